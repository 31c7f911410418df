//! Whether a model provider has what it needs, judged from variable names and the shared AWS files
//! only: no client is built and nothing is sent anywhere.
//!
//! - bedrock: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY, AWS_BEARER_TOKEN_BEDROCK, or AWS_PROFILE
//!   naming a profile that exists in the shared credentials or config file; and a region
//!   (AWS_REGION, AWS_DEFAULT_REGION or the profile's `region`), else a warning;
//! - anthropic: ANTHROPIC_API_KEY;
//! - fake: nothing;
//! - a planned provider (ollama) is a warning, not a failure.
//!
//! Invariant: messages name variables and files, never a variable's value (a profile name is a
//! value too and is not shown).

use std::path::{Path, PathBuf};

use tau_api::config::PLANNED_PROVIDERS;
use tau_api::env::Env;

use super::report::Status;

/// The verdict on one provider's credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// ok, warn or fail.
    pub status: Status,
    /// What was found (names only).
    pub message: String,
    /// What to do when it is not ok.
    pub fix: Option<String>,
}

impl Verdict {
    fn ok(message: impl Into<String>) -> Self {
        Self {
            status: Status::Ok,
            message: message.into(),
            fix: None,
        }
    }

    fn with(status: Status, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            fix: Some(fix.into()),
        }
    }
}

/// Checks `provider`'s credentials in `env`. `env_file` is where the fix says to put variables.
pub fn check(provider: &str, env: &Env, env_file: &Path) -> Verdict {
    let where_ = format!("in the environment or {}", env_file.display());
    match provider {
        "fake" => Verdict::ok("no credentials needed"),
        "anthropic" => {
            if env.non_empty("ANTHROPIC_API_KEY").is_some() {
                let mut message = "ANTHROPIC_API_KEY is set".to_string();
                if env.non_empty("ANTHROPIC_BASE_URL").is_some() {
                    message.push_str(" (ANTHROPIC_BASE_URL too)");
                }
                Verdict::ok(message)
            } else {
                Verdict::with(
                    Status::Fail,
                    "ANTHROPIC_API_KEY is not set",
                    format!("set ANTHROPIC_API_KEY {where_}"),
                )
            }
        }
        "bedrock" => bedrock(env, &where_),
        planned if PLANNED_PROVIDERS.contains(&planned) => Verdict::with(
            Status::Warn,
            format!("provider '{planned}' is planned and not in this build"),
            "use bedrock, anthropic or fake for this role in tau.toml",
        ),
        other => Verdict::with(
            Status::Warn,
            format!("provider '{other}' is not built in; its credentials cannot be checked here"),
            "check its documentation for the variables it needs",
        ),
    }
}

fn bedrock(env: &Env, where_: &str) -> Verdict {
    let has = |name: &str| env.non_empty(name).is_some();
    let files = AwsFiles::from_env(env);
    let profile = env.non_empty("AWS_PROFILE");
    let source = if has("AWS_ACCESS_KEY_ID") && has("AWS_SECRET_ACCESS_KEY") {
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are set".to_string()
    } else if has("AWS_BEARER_TOKEN_BEDROCK") {
        "AWS_BEARER_TOKEN_BEDROCK is set".to_string()
    } else if let Some(profile) = profile {
        match files.find_profile(profile) {
            Some(found_in) => format!(
                "AWS_PROFILE is set and its profile is in {}",
                found_in.display()
            ),
            None => {
                return Verdict::with(
                    Status::Fail,
                    format!(
                        "AWS_PROFILE names a profile that is in neither {} nor {}",
                        files.credentials.display(),
                        files.config.display()
                    ),
                    "add the profile (`aws configure --profile <name>`) or set AWS_PROFILE to one that exists",
                );
            }
        }
    } else {
        let half = if has("AWS_ACCESS_KEY_ID") != has("AWS_SECRET_ACCESS_KEY") {
            " (only one of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY is set)"
        } else {
            ""
        };
        return Verdict::with(
            Status::Fail,
            format!("no AWS credentials{half}"),
            format!(
                "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE or AWS_BEARER_TOKEN_BEDROCK {where_}"
            ),
        );
    };
    let region = has("AWS_REGION")
        || has("AWS_DEFAULT_REGION")
        || files.profile_region(profile.unwrap_or("default")).is_some();
    if region {
        Verdict::ok(source)
    } else {
        Verdict::with(
            Status::Warn,
            format!("{source}, but no region is set"),
            format!("set AWS_REGION {where_}"),
        )
    }
}

/// The shared AWS files: AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE, else under `~/.aws`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsFiles {
    /// The credentials file.
    pub credentials: PathBuf,
    /// The config file.
    pub config: PathBuf,
}

impl AwsFiles {
    /// The files `env` points at (HOME decides the defaults).
    pub fn from_env(env: &Env) -> Self {
        let aws_dir = env
            .user_home()
            .unwrap_or_else(|| PathBuf::from("~"))
            .join(".aws");
        Self {
            credentials: env
                .non_empty("AWS_SHARED_CREDENTIALS_FILE")
                .map(PathBuf::from)
                .unwrap_or_else(|| aws_dir.join("credentials")),
            config: env
                .non_empty("AWS_CONFIG_FILE")
                .map(PathBuf::from)
                .unwrap_or_else(|| aws_dir.join("config")),
        }
    }

    /// The file that defines `profile`: `[profile]` in the credentials file, or `[profile
    /// <name>]` (`[default]` for the default) in the config file.
    pub fn find_profile(&self, profile: &str) -> Option<&Path> {
        if ini_section(&self.credentials, profile).is_some() {
            return Some(&self.credentials);
        }
        config_section(&self.config, profile).map(|_| self.config.as_path())
    }

    /// The `region` of `profile` in the config file.
    pub fn profile_region(&self, profile: &str) -> Option<String> {
        config_section(&self.config, profile)?
            .into_iter()
            .find(|(key, value)| key == "region" && !value.is_empty())
            .map(|(_, value)| value)
    }
}

fn config_section(path: &Path, profile: &str) -> Option<Vec<(String, String)>> {
    let prefixed = format!("profile {profile}");
    ini_section(path, &prefixed).or_else(|| {
        if profile == "default" {
            ini_section(path, "default")
        } else {
            None
        }
    })
}

/// The `key = value` pairs of section `[name]` of the INI file at `path`, if it has one. A file
/// that cannot be read has no sections.
fn ini_section(path: &Path, name: &str) -> Option<Vec<(String, String)>> {
    let text = std::fs::read_to_string(path).ok()?;
    parse_section(&text, name)
}

fn parse_section(text: &str, name: &str) -> Option<Vec<(String, String)>> {
    let mut found = None;
    let mut in_section = false;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let header = header.split_whitespace().collect::<Vec<_>>().join(" ");
            in_section = header == name;
            if in_section && found.is_none() {
                found = Some(Vec::new());
            }
            continue;
        }
        if in_section
            && let Some(pairs) = found.as_mut()
            && let Some((key, value)) = line.split_once('=')
        {
            pairs.push((key.trim().to_string(), value.trim().to_string()));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        pairs.iter().copied().collect()
    }

    const SECRET: &str = "sk-secret-value-never-shown";

    #[test]
    fn anthropic_needs_its_key() {
        let file = Path::new("/h/.env");
        let v = check("anthropic", &env(&[("ANTHROPIC_API_KEY", SECRET)]), file);
        assert_eq!(v.status, Status::Ok);
        assert!(!v.message.contains(SECRET));
        let v = check("anthropic", &env(&[("ANTHROPIC_API_KEY", "")]), file);
        assert_eq!(v.status, Status::Fail);
        assert_eq!(
            v.fix.as_deref(),
            Some("set ANTHROPIC_API_KEY in the environment or /h/.env")
        );
    }

    #[test]
    fn bedrock_sources_and_region() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_str().unwrap();
        std::fs::create_dir(dir.path().join(".aws")).unwrap();
        std::fs::write(
            dir.path().join(".aws/credentials"),
            "[default]\naws_access_key_id = x\n\n[work]\naws_access_key_id = y\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join(".aws/config"),
            "[default]\nregion = eu-west-1\n[profile  cfgonly ]\noutput = json\n",
        )
        .unwrap();
        let file = Path::new("/h/.env");
        let cases: &[(&[(&str, &str)], Status)] = &[
            (&[], Status::Fail),
            (&[("AWS_ACCESS_KEY_ID", SECRET)], Status::Fail),
            (
                &[
                    ("AWS_ACCESS_KEY_ID", SECRET),
                    ("AWS_SECRET_ACCESS_KEY", SECRET),
                ],
                // The default profile of the config file has a region.
                Status::Ok,
            ),
            (&[("AWS_BEARER_TOKEN_BEDROCK", SECRET)], Status::Ok),
            (&[("AWS_PROFILE", "work")], Status::Warn),
            (
                &[("AWS_PROFILE", "work"), ("AWS_REGION", "us-east-1")],
                Status::Ok,
            ),
            (
                &[("AWS_PROFILE", "cfgonly"), ("AWS_DEFAULT_REGION", "x")],
                Status::Ok,
            ),
            (&[("AWS_PROFILE", "missing")], Status::Fail),
        ];
        for (vars, want) in cases {
            let mut e = env(vars);
            e.set("HOME", home);
            let v = check("bedrock", &e, file);
            assert_eq!(v.status, *want, "{vars:?}: {v:?}");
            assert!(!v.message.contains(SECRET) && !v.message.contains("missing"));
        }
        let mut e = env(&[("AWS_PROFILE", "missing")]);
        e.set("HOME", home);
        e.set(
            "AWS_SHARED_CREDENTIALS_FILE",
            dir.path().join("elsewhere").to_str().unwrap(),
        );
        let v = check("bedrock", &e, file);
        assert!(v.message.contains("elsewhere"), "{v:?}");
    }

    #[test]
    fn planned_and_fake() {
        let file = Path::new("/h/.env");
        assert_eq!(check("fake", &env(&[]), file).status, Status::Ok);
        let v = check("ollama", &env(&[]), file);
        assert_eq!(v.status, Status::Warn);
        assert!(v.message.contains("planned"));
    }

    #[test]
    fn ini_sections() {
        let text = "; c\n[a]\nk = v\n[b]\nregion=r\n[a]\nz = 1\n";
        assert_eq!(
            parse_section(text, "a").unwrap(),
            [("k".into(), "v".into()), ("z".into(), "1".into())]
        );
        assert_eq!(
            parse_section(text, "b").unwrap(),
            [("region".into(), "r".into())]
        );
        assert_eq!(parse_section(text, "c"), None);
    }
}
