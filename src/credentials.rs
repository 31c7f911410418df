//! Provider credentials: where each provider's secrets and region come from, resolved from an
//! explicit [`Env`] (the process environment plus `.env`) and, for Bedrock, the AWS shared
//! credentials and config files. It lives in `tau-api` so the hub (which builds clients with it)
//! and `tau doctor` (which only checks) judge credentials by the same rules.
//!
//! Invariants: nothing here reads `std::env`; a secret lives in a [`Secret`] whose `Debug` and
//! `Display` never show it; a missing credential is a [`MissingCredentials`] that names the
//! variables to set (never their values); resolving builds no client and opens no connection.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::env::Env;

/// A secret string (an API key, a secret access key, a session token). Shown as `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one place that puts it on the wire.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// A provider cannot run because a credential (or the region) is not configured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {provider} provider needs {needs}")]
pub struct MissingCredentials {
    /// The provider name (`anthropic`, `bedrock`).
    pub provider: String,
    /// The environment variables that would supply what is missing.
    pub variables: Vec<String>,
    /// One sentence naming what to set, e.g. "ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)".
    pub needs: String,
}

/// How a request to the Anthropic Messages API authenticates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnthropicAuth {
    /// `x-api-key: <ANTHROPIC_API_KEY>`.
    ApiKey(Secret),
    /// `authorization: Bearer <ANTHROPIC_AUTH_TOKEN>` (gateways and compatible servers).
    Bearer(Secret),
}

impl AnthropicAuth {
    /// ANTHROPIC_API_KEY, else ANTHROPIC_AUTH_TOKEN.
    pub fn from_env(env: &Env) -> Result<Self, MissingCredentials> {
        if let Some(key) = env.non_empty("ANTHROPIC_API_KEY") {
            return Ok(Self::ApiKey(Secret::new(key)));
        }
        if let Some(token) = env.non_empty("ANTHROPIC_AUTH_TOKEN") {
            return Ok(Self::Bearer(Secret::new(token)));
        }
        Err(MissingCredentials {
            provider: "anthropic".into(),
            variables: vec!["ANTHROPIC_API_KEY".into(), "ANTHROPIC_AUTH_TOKEN".into()],
            needs: "ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN for a gateway)".into(),
        })
    }
}

/// AWS access keys for SigV4.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsKeys {
    pub access_key_id: String,
    pub secret_access_key: Secret,
    pub session_token: Option<Secret>,
}

/// How a request to Bedrock authenticates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BedrockAuth {
    /// `authorization: Bearer <AWS_BEARER_TOKEN_BEDROCK>` (a Bedrock API key).
    Bearer(Secret),
    /// SigV4 with these keys.
    SigV4(AwsKeys),
}

/// Bedrock's credentials and region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BedrockCredentials {
    pub auth: BedrockAuth,
    pub region: String,
}

impl BedrockCredentials {
    /// Resolves, in order: AWS_BEARER_TOKEN_BEDROCK; AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY
    /// (+ AWS_SESSION_TOKEN); the keys of profile AWS_PROFILE (default `default`) in the shared
    /// credentials file (AWS_SHARED_CREDENTIALS_FILE, default `~/.aws/credentials`) or config file
    /// (AWS_CONFIG_FILE, default `~/.aws/config`). The region: AWS_REGION, AWS_DEFAULT_REGION,
    /// then the profile's `region` in the config file.
    pub fn from_env(env: &Env) -> Result<Self, MissingCredentials> {
        let profile_name = env.non_empty("AWS_PROFILE").unwrap_or("default");
        let profile = AwsProfile::load(env, profile_name);
        let auth = if let Some(token) = env.non_empty("AWS_BEARER_TOKEN_BEDROCK") {
            Some(BedrockAuth::Bearer(Secret::new(token)))
        } else if let (Some(id), Some(secret)) = (
            env.non_empty("AWS_ACCESS_KEY_ID"),
            env.non_empty("AWS_SECRET_ACCESS_KEY"),
        ) {
            Some(BedrockAuth::SigV4(AwsKeys {
                access_key_id: id.to_owned(),
                secret_access_key: Secret::new(secret),
                session_token: env.non_empty("AWS_SESSION_TOKEN").map(Secret::new),
            }))
        } else {
            profile.keys().map(BedrockAuth::SigV4)
        };
        let region = env
            .non_empty("AWS_REGION")
            .or_else(|| env.non_empty("AWS_DEFAULT_REGION"))
            .map(str::to_owned)
            .or_else(|| profile.region());
        match (auth, region) {
            (Some(auth), Some(region)) => Ok(Self { auth, region }),
            (None, _) => Err(MissingCredentials {
                provider: "bedrock".into(),
                variables: vec![
                    "AWS_BEARER_TOKEN_BEDROCK".into(),
                    "AWS_ACCESS_KEY_ID".into(),
                    "AWS_SECRET_ACCESS_KEY".into(),
                    "AWS_PROFILE".into(),
                ],
                needs: format!(
                    "AWS_BEARER_TOKEN_BEDROCK, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or \
                     keys for profile '{profile_name}' in the AWS shared credentials file"
                ),
            }),
            (Some(_), None) => Err(MissingCredentials {
                provider: "bedrock".into(),
                variables: vec!["AWS_REGION".into(), "AWS_DEFAULT_REGION".into()],
                needs: "a region: AWS_REGION or AWS_DEFAULT_REGION (or `region` in the AWS config \
                        file's profile)"
                    .into(),
            }),
        }
    }
}

/// Where the AWS shared files are: AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE, else under
/// `~/.aws` (HOME from `env`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsSharedFiles {
    /// The shared credentials file.
    pub credentials: PathBuf,
    /// The shared config file.
    pub config: PathBuf,
}

impl AwsSharedFiles {
    /// The files `env` points at.
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
}

/// The settings of one named profile from the AWS shared files (missing files are empty).
#[derive(Debug, Default)]
struct AwsProfile {
    credentials: Vec<(String, String)>,
    config: Vec<(String, String)>,
}

impl AwsProfile {
    fn load(env: &Env, name: &str) -> Self {
        let files = AwsSharedFiles::from_env(env);
        let credentials = read_section(&files.credentials, name);
        let config_section = if name == "default" {
            "default".to_owned()
        } else {
            format!("profile {name}")
        };
        let config = read_section(&files.config, &config_section);
        Self {
            credentials,
            config,
        }
    }

    fn get(&self, key: &str) -> Option<&str> {
        fn find<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
            pairs
                .iter()
                .find(|(k, v)| k == key && !v.is_empty())
                .map(|(_, v)| v.as_str())
        }
        find(&self.credentials, key).or_else(|| find(&self.config, key))
    }

    fn keys(&self) -> Option<AwsKeys> {
        Some(AwsKeys {
            access_key_id: self.get("aws_access_key_id")?.to_owned(),
            secret_access_key: Secret::new(self.get("aws_secret_access_key")?),
            session_token: self.get("aws_session_token").map(Secret::new),
        })
    }

    fn region(&self) -> Option<String> {
        self.config
            .iter()
            .find(|(k, v)| k == "region" && !v.is_empty())
            .map(|(_, v)| v.clone())
    }
}

/// The `key = value` pairs of `[section]` in an INI-style AWS file; an unreadable file is empty.
fn read_section(path: &Path, section: &str) -> Vec<(String, String)> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse_section(&text, section),
        Err(_) => Vec::new(),
    }
}

fn parse_section(text: &str, section: &str) -> Vec<(String, String)> {
    let mut inside = false;
    let mut pairs = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.trim() == section;
            continue;
        }
        if inside && let Some((key, value)) = line.split_once('=') {
            pairs.push((key.trim().to_owned(), value.trim().to_owned()));
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        pairs.iter().copied().collect()
    }

    #[test]
    fn anthropic_key_then_token_then_missing() {
        let auth = AnthropicAuth::from_env(&env(&[("ANTHROPIC_API_KEY", "sk-1")])).unwrap();
        assert_eq!(auth, AnthropicAuth::ApiKey(Secret::new("sk-1")));
        assert!(!format!("{auth:?}").contains("sk-1"));
        let auth = AnthropicAuth::from_env(&env(&[
            ("ANTHROPIC_API_KEY", ""),
            ("ANTHROPIC_AUTH_TOKEN", "tok"),
        ]))
        .unwrap();
        assert_eq!(auth, AnthropicAuth::Bearer(Secret::new("tok")));
        let missing = AnthropicAuth::from_env(&Env::new()).unwrap_err();
        assert!(missing.to_string().contains("ANTHROPIC_API_KEY"));
        assert_eq!(missing.variables[0], "ANTHROPIC_API_KEY");
    }

    #[test]
    fn bedrock_bearer_wins_and_region_order() {
        let creds = BedrockCredentials::from_env(&env(&[
            ("AWS_BEARER_TOKEN_BEDROCK", "br"),
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_REGION", "eu-central-1"),
            ("AWS_DEFAULT_REGION", "us-east-1"),
        ]))
        .unwrap();
        assert_eq!(creds.auth, BedrockAuth::Bearer(Secret::new("br")));
        assert_eq!(creds.region, "eu-central-1");
        let creds = BedrockCredentials::from_env(&env(&[
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_SESSION_TOKEN", "t"),
            ("AWS_DEFAULT_REGION", "us-east-1"),
        ]))
        .unwrap();
        assert_eq!(creds.region, "us-east-1");
        let BedrockAuth::SigV4(keys) = creds.auth else {
            panic!("expected keys")
        };
        assert_eq!(keys.session_token, Some(Secret::new("t")));
    }

    #[test]
    fn bedrock_profile_from_shared_files() {
        let dir = tempfile::tempdir().unwrap();
        let creds_file = dir.path().join("credentials");
        let config_file = dir.path().join("config");
        std::fs::write(
            &creds_file,
            "[default]\naws_access_key_id = WRONG\n\n[work]\n# comment\naws_access_key_id = AKIDWORK\naws_secret_access_key = secretwork\n",
        )
        .unwrap();
        std::fs::write(&config_file, "[profile work]\nregion = ap-south-1\n").unwrap();
        let e = env(&[
            ("AWS_PROFILE", "work"),
            ("AWS_SHARED_CREDENTIALS_FILE", creds_file.to_str().unwrap()),
            ("AWS_CONFIG_FILE", config_file.to_str().unwrap()),
        ]);
        let creds = BedrockCredentials::from_env(&e).unwrap();
        assert_eq!(creds.region, "ap-south-1");
        assert_eq!(
            creds.auth,
            BedrockAuth::SigV4(AwsKeys {
                access_key_id: "AKIDWORK".into(),
                secret_access_key: Secret::new("secretwork"),
                session_token: None,
            })
        );
    }

    #[test]
    fn bedrock_missing_keys_or_region_names_the_variables() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_str().unwrap();
        let missing = BedrockCredentials::from_env(&env(&[("HOME", home)])).unwrap_err();
        assert!(missing.variables.contains(&"AWS_ACCESS_KEY_ID".to_owned()));
        assert!(missing.to_string().contains("AWS_BEARER_TOKEN_BEDROCK"));
        let missing = BedrockCredentials::from_env(&env(&[
            ("HOME", home),
            ("AWS_BEARER_TOKEN_BEDROCK", "secret-token"),
        ]))
        .unwrap_err();
        assert_eq!(missing.variables, vec!["AWS_REGION", "AWS_DEFAULT_REGION"]);
        assert!(!missing.to_string().contains("secret-token"));
    }
}
