//! Where the `ollama` and `openai` providers send their requests, and whether `openai` has the key
//! it needs: shared by the hub (which calls them) and `tau doctor` (which checks them), so the two
//! never disagree.
//!
//! Invariants: the order is `[component.<name>] base_url` in tau.toml, then the environment
//! (OLLAMA_HOST / OPENAI_BASE_URL), then the public default; a returned URL has a scheme and no
//! trailing `/`; OLLAMA_HOST in Ollama's own forms (`0.0.0.0`, `host:port`, `https://host`) is
//! read as a client would (a wildcard bind address means this machine); the OpenAI key is
//! required only by the public OpenAI API (local servers take none) and is never logged.

use crate::credentials::{MissingCredentials, Secret};
use crate::env::Env;

/// Ollama's address when neither tau.toml nor OLLAMA_HOST names one.
pub const OLLAMA_DEFAULT_URL: &str = "http://127.0.0.1:11434";
/// Ollama's port when OLLAMA_HOST names a host only.
pub const OLLAMA_DEFAULT_PORT: u16 = 11434;
/// The public OpenAI API (the base the `/chat/completions` path is appended to).
pub const OPENAI_DEFAULT_URL: &str = "https://api.openai.com/v1";

/// The Ollama base URL: `configured` (tau.toml), else OLLAMA_HOST, else [`OLLAMA_DEFAULT_URL`].
pub fn ollama_base_url(configured: Option<&str>, env: &Env) -> String {
    if let Some(url) = configured {
        return url.trim_end_matches('/').to_owned();
    }
    match env.non_empty("OLLAMA_HOST") {
        Some(host) => ollama_host_url(host),
        None => OLLAMA_DEFAULT_URL.to_owned(),
    }
}

/// OLLAMA_HOST as a URL: a scheme is added when missing (`http`), the default port when the
/// host has none, and a wildcard address (`0.0.0.0`, `::`) is this machine.
fn ollama_host_url(host: &str) -> String {
    let host = host.trim().trim_end_matches('/');
    let (scheme, rest) = match host.split_once("://") {
        Some((scheme, rest)) => (scheme, rest),
        None => ("http", host),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let has_port = if authority.starts_with('[') {
        authority.contains("]:")
    } else {
        authority.contains(':')
    };
    let authority = authority
        .replace("0.0.0.0", "127.0.0.1")
        .replace("[::]", "[::1]");
    let port = if has_port || scheme != "http" {
        String::new()
    } else {
        format!(":{OLLAMA_DEFAULT_PORT}")
    };
    format!("{scheme}://{authority}{port}{path}")
}

/// The OpenAI-compatible base URL: `configured` (tau.toml), else OPENAI_BASE_URL, else
/// [`OPENAI_DEFAULT_URL`].
pub fn openai_base_url(configured: Option<&str>, env: &Env) -> String {
    configured
        .or_else(|| env.non_empty("OPENAI_BASE_URL"))
        .unwrap_or(OPENAI_DEFAULT_URL)
        .trim_end_matches('/')
        .to_owned()
}

/// Whether `base_url` is the public OpenAI API (which needs a key and wants
/// `max_completion_tokens`).
pub fn is_public_openai(base_url: &str) -> bool {
    base_url
        .split_once("://")
        .map(|(_, rest)| rest)
        .is_some_and(|rest| rest == "api.openai.com" || rest.starts_with("api.openai.com/"))
}

/// OPENAI_API_KEY, required when `base_url` is the public OpenAI API and optional elsewhere.
pub fn openai_key(env: &Env, base_url: &str) -> Result<Option<Secret>, MissingCredentials> {
    match env.non_empty("OPENAI_API_KEY") {
        Some(key) => Ok(Some(Secret::new(key))),
        None if is_public_openai(base_url) => Err(MissingCredentials {
            provider: "openai".into(),
            variables: vec!["OPENAI_API_KEY".into()],
            needs: "OPENAI_API_KEY (or a local server's base_url, which needs no key)".into(),
        }),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        pairs.iter().copied().collect()
    }

    #[test]
    fn ollama_host_in_every_form_ollama_accepts() {
        let cases = [
            ("0.0.0.0", "http://127.0.0.1:11434"),
            ("0.0.0.0:8080", "http://127.0.0.1:8080"),
            ("pi5.local", "http://pi5.local:11434"),
            ("http://10.0.0.2:11434/", "http://10.0.0.2:11434"),
            ("https://ollama.example.com", "https://ollama.example.com"),
            ("[::]:11434", "http://[::1]:11434"),
            ("[::1]", "http://[::1]:11434"),
        ];
        for (host, want) in cases {
            assert_eq!(
                ollama_base_url(None, &env(&[("OLLAMA_HOST", host)])),
                want,
                "{host}"
            );
        }
        assert_eq!(ollama_base_url(None, &env(&[])), OLLAMA_DEFAULT_URL);
        assert_eq!(
            ollama_base_url(Some("http://box:1/"), &env(&[("OLLAMA_HOST", "x")])),
            "http://box:1"
        );
    }

    #[test]
    fn the_openai_key_is_required_only_by_the_public_api() {
        let none = env(&[]);
        let base = openai_base_url(None, &none);
        assert_eq!(base, OPENAI_DEFAULT_URL);
        let missing = openai_key(&none, &base).unwrap_err();
        assert_eq!(missing.variables, ["OPENAI_API_KEY"]);
        let local = openai_base_url(
            None,
            &env(&[("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1/")]),
        );
        assert_eq!(local, "http://127.0.0.1:8080/v1");
        assert_eq!(openai_key(&none, &local), Ok(None));
        let with_key = env(&[("OPENAI_API_KEY", "sk-test")]);
        let key = openai_key(&with_key, &base).unwrap().unwrap();
        assert_eq!(key.expose(), "sk-test");
        assert!(!format!("{key:?}").contains("sk-test"));
        assert!(!is_public_openai("https://api.openai.com.evil.example/v1"));
    }
}
