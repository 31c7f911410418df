//! Whether a model provider has what it needs, judged by the same rules the hub uses to build its
//! clients (`tau_api::credentials`), from variable names and the shared AWS files only: no client is
//! built and nothing is sent anywhere.
//!
//! - bedrock: AWS_BEARER_TOKEN_BEDROCK, AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY, or the keys of
//!   profile AWS_PROFILE (default `default`) in the shared files; and a region;
//! - anthropic: ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN for a gateway);
//! - fake and ollama: nothing;
//! - openai: OPENAI_API_KEY for the public API (OPENAI_BASE_URL unset or api.openai.com); a local
//!   server named by OPENAI_BASE_URL needs none (a `[component.openai] base_url` server is judged
//!   by the model-server probe, which sees the key's absence as the server does);
//! - a planned provider is a warning, not a failure.
//!
//! Invariant: messages name variables and files, never a variable's value (a profile name is a
//! value too and is not shown).

use std::path::Path;

use tau_api::config::PLANNED_PROVIDERS;
use tau_api::credentials::{AnthropicAuth, AwsSharedFiles, BedrockAuth, BedrockCredentials};
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
        "fake" | "ollama" => Verdict::ok("no credentials needed"),
        "openai" => openai(env, &where_),
        "anthropic" => anthropic(env, &where_),
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

fn openai(env: &Env, where_: &str) -> Verdict {
    let base = tau_api::model_endpoints::openai_base_url(None, env);
    match tau_api::model_endpoints::openai_key(env, &base) {
        Ok(Some(_)) => Verdict::ok("OPENAI_API_KEY is set"),
        Ok(None) => Verdict::ok("a local server (OPENAI_BASE_URL) needs no key"),
        Err(_) => Verdict::with(
            Status::Fail,
            "OPENAI_API_KEY is not set (the public OpenAI API needs it)",
            format!("set OPENAI_API_KEY {where_}, or OPENAI_BASE_URL to a local server's /v1 URL"),
        ),
    }
}

fn anthropic(env: &Env, where_: &str) -> Verdict {
    let mut message = match AnthropicAuth::from_env(env) {
        Ok(AnthropicAuth::ApiKey(_)) => "ANTHROPIC_API_KEY is set".to_owned(),
        Ok(AnthropicAuth::Bearer(_)) => "ANTHROPIC_AUTH_TOKEN is set".to_owned(),
        Err(_) => {
            return Verdict::with(
                Status::Fail,
                "ANTHROPIC_API_KEY is not set (nor ANTHROPIC_AUTH_TOKEN)",
                format!("set ANTHROPIC_API_KEY {where_}"),
            );
        }
    };
    if env.non_empty("ANTHROPIC_BASE_URL").is_some() {
        message.push_str(" (ANTHROPIC_BASE_URL too)");
    }
    Verdict::ok(message)
}

fn bedrock(env: &Env, where_: &str) -> Verdict {
    let has = |name: &str| env.non_empty(name).is_some();
    match BedrockCredentials::from_env(env) {
        Ok(credentials) => Verdict::ok(match credentials.auth {
            BedrockAuth::Bearer(_) => "AWS_BEARER_TOKEN_BEDROCK is set",
            BedrockAuth::SigV4(_) if has("AWS_ACCESS_KEY_ID") => {
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are set"
            }
            BedrockAuth::SigV4(_) => "the AWS profile's keys are in the shared files",
        }),
        Err(missing) if missing.variables.iter().any(|v| v == "AWS_REGION") => Verdict::with(
            Status::Fail,
            "AWS credentials are set, but no region",
            format!("set AWS_REGION {where_}"),
        ),
        Err(_) if has("AWS_PROFILE") => {
            let files = AwsSharedFiles::from_env(env);
            Verdict::with(
                Status::Fail,
                format!(
                    "AWS_PROFILE names a profile with no keys in {} or {}",
                    files.credentials.display(),
                    files.config.display()
                ),
                "add the profile (`aws configure --profile <name>`) or set AWS_PROFILE to one that has keys",
            )
        }
        Err(_) => {
            let half = if has("AWS_ACCESS_KEY_ID") != has("AWS_SECRET_ACCESS_KEY") {
                " (only one of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY is set)"
            } else {
                ""
            };
            Verdict::with(
                Status::Fail,
                format!("no AWS credentials{half}"),
                format!(
                    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE or AWS_BEARER_TOKEN_BEDROCK {where_}"
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        pairs.iter().copied().collect()
    }

    const SECRET: &str = "sk-secret-value-never-shown";

    #[test]
    fn anthropic_needs_its_key_or_a_gateway_token() {
        let file = Path::new("/h/.env");
        let v = check("anthropic", &env(&[("ANTHROPIC_API_KEY", SECRET)]), file);
        assert_eq!(v.status, Status::Ok);
        assert!(!v.message.contains(SECRET));
        let v = check("anthropic", &env(&[("ANTHROPIC_AUTH_TOKEN", SECRET)]), file);
        assert_eq!(
            v.status,
            Status::Ok,
            "the hub accepts a gateway token: {v:?}"
        );
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
            "[default]\naws_access_key_id = x\naws_secret_access_key = y\n\n\
             [work]\naws_access_key_id = a\naws_secret_access_key = b\n\n\
             [half]\naws_access_key_id = only\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join(".aws/config"),
            "[default]\nregion = eu-west-1\n[profile cfgonly]\noutput = json\n",
        )
        .unwrap();
        let file = Path::new("/h/.env");
        let cases: &[(&[(&str, &str)], Status)] = &[
            // The default profile has keys and a region.
            (&[], Status::Ok),
            (
                &[
                    ("AWS_ACCESS_KEY_ID", SECRET),
                    ("AWS_SECRET_ACCESS_KEY", SECRET),
                ],
                Status::Ok,
            ),
            (&[("AWS_BEARER_TOKEN_BEDROCK", SECRET)], Status::Ok),
            // A named profile has no region of its own here.
            (&[("AWS_PROFILE", "work")], Status::Fail),
            (
                &[("AWS_PROFILE", "work"), ("AWS_REGION", "us-east-1")],
                Status::Ok,
            ),
            // A profile without both keys cannot sign a request.
            (
                &[("AWS_PROFILE", "half"), ("AWS_REGION", "x")],
                Status::Fail,
            ),
            (
                &[("AWS_PROFILE", "cfgonly"), ("AWS_REGION", "x")],
                Status::Fail,
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
    fn no_aws_credentials_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let mut e = env(&[("AWS_ACCESS_KEY_ID", SECRET)]);
        e.set("HOME", dir.path().to_str().unwrap());
        let v = check("bedrock", &e, Path::new("/h/.env"));
        assert_eq!(v.status, Status::Fail);
        assert!(v.message.contains("only one of"), "{v:?}");
    }

    #[test]
    fn fake_ollama_and_openai() {
        let file = Path::new("/h/.env");
        assert_eq!(check("fake", &env(&[]), file).status, Status::Ok);
        assert_eq!(check("ollama", &env(&[]), file).status, Status::Ok);
        let v = check("openai", &env(&[]), file);
        assert_eq!(v.status, Status::Fail);
        assert!(v.fix.unwrap().contains("OPENAI_API_KEY"));
        let local = env(&[("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")]);
        assert_eq!(check("openai", &local, file).status, Status::Ok);
        let keyed = env(&[("OPENAI_API_KEY", SECRET)]);
        let v = check("openai", &keyed, file);
        assert_eq!(v.status, Status::Ok);
        assert!(!v.message.contains(SECRET));
        let v = check("vllm", &env(&[]), file);
        assert_eq!(v.status, Status::Warn);
    }
}
