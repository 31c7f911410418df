//! `[web]`: the browser client `taud` serves (off unless `listen` is set).
//!
//! Invariants: only the keys below are accepted; `listen` is one `ADDRESS:PORT` (`localhost` reads
//! as 127.0.0.1); a non-loopback `listen` is refused unless both `tls_cert` and `tls_key` are set
//! (the error is one line naming the keys); `tls_cert` and `tls_key` come together or not at all
//! and a relative path is read from the directory of `tau.toml`; `public_origin` is one origin
//! (`https://host[:port]`, or `http://` for a loopback host), no path, lowercased, with no
//! trailing `/`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use toml::Value;

use super::error::ConfigError;
use super::reader::Section;

const KEYS: &[&str] = &["listen", "tls_cert", "tls_key", "public_origin"];

/// The web client's name as a hub service (`tau components`, `[components.hub] services`).
pub const WEB_COMPONENT: &str = "web";

/// The checked `[web]` table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WebConfig {
    /// Where the web client is served; `None`: not served.
    pub listen: Option<SocketAddr>,
    /// The TLS certificate chain (PEM), when served over TLS.
    pub tls_cert: Option<PathBuf>,
    /// The TLS private key (PEM), when served over TLS.
    pub tls_key: Option<PathBuf>,
    /// The one origin the page is reached at behind a reverse proxy (`https://tau.example.org`).
    pub public_origin: Option<String>,
}

impl WebConfig {
    /// Whether the page is served over TLS.
    pub fn tls(&self) -> bool {
        self.tls_cert.is_some() && self.tls_key.is_some()
    }
}

/// Reads `[web]`; the default (not served) when the table is absent.
pub(crate) fn web(doc: &Section<'_>) -> Result<WebConfig, ConfigError> {
    let mut out = WebConfig::default();
    let Some(web) = doc.table("web", KEYS)? else {
        return Ok(out);
    };
    let base = doc.file().parent().unwrap_or(Path::new("."));
    if let Some(value) = web.get("listen") {
        let addr = match value {
            Value::String(text) => parse_listen(text),
            _ => None,
        };
        out.listen = Some(addr.ok_or_else(|| {
            web.invalid(
                "listen",
                value,
                "\"ADDRESS:PORT\", e.g. \"127.0.0.1:7878\" or \"[::1]:7878\"",
            )
        })?);
    }
    let path = |name: &str| -> Result<Option<PathBuf>, ConfigError> {
        Ok(web
            .string(name, "a path to a PEM file")?
            .map(|p| base.join(p.trim())))
    };
    out.tls_cert = path("tls_cert")?;
    out.tls_key = path("tls_key")?;
    if out.tls_cert.is_some() != out.tls_key.is_some() {
        let (set, unset) = if out.tls_cert.is_some() {
            ("tls_cert", "tls_key")
        } else {
            ("tls_key", "tls_cert")
        };
        return Err(ConfigError::Missing {
            file: doc.file().to_path_buf(),
            key: format!("web.{unset}"),
            expected: format!("web.tls_cert and web.tls_key together (web.{set} is set)"),
        });
    }
    if let Some(value) = web.get("public_origin") {
        let origin = match value {
            Value::String(text) => parse_origin(text),
            _ => None,
        };
        out.public_origin = Some(origin.ok_or_else(|| {
            web.invalid(
                "public_origin",
                value,
                "one origin such as \"https://tau.example.org\" (no path; http:// only for a loopback host)",
            )
        })?);
    }
    if let (Some(addr), Some(value)) = (out.listen, web.get("listen"))
        && !addr.ip().is_loopback()
        && !out.tls()
    {
        return Err(web.invalid(
            "listen",
            value,
            "a loopback address (127.0.0.1 or [::1]); any other address needs web.tls_cert and web.tls_key",
        ));
    }
    Ok(out)
}

/// `ADDRESS:PORT` (`localhost:PORT` is 127.0.0.1).
fn parse_listen(text: &str) -> Option<SocketAddr> {
    let text = text.trim();
    if let Some(port) = text.strip_prefix("localhost:") {
        let port: u16 = port.parse().ok()?;
        return Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    text.parse().ok()
}

/// `scheme://host[:port]`, lowercased, with no path, query, fragment or user part.
fn parse_origin(text: &str) -> Option<String> {
    let text = text.trim().trim_end_matches('/').to_ascii_lowercase();
    let (scheme, rest) = text.split_once("://")?;
    if rest.is_empty() || rest.contains(['/', '?', '#', '@', ' ']) {
        return None;
    }
    let host = host_of(rest)?;
    match scheme {
        "https" => Some(text.clone()),
        "http" if is_loopback_host(host) => Some(text.clone()),
        _ => None,
    }
}

/// The host of `host[:port]` (an IPv6 address keeps its brackets); `None` for a bad port.
pub fn host_of(authority: &str) -> Option<&str> {
    if authority.starts_with('[') {
        let end = authority.find(']')?;
        let (host, rest) = authority.split_at(end + 1);
        return match rest.strip_prefix(':') {
            None if rest.is_empty() => Some(host),
            Some(port) if port.parse::<u16>().is_ok() => Some(host),
            _ => None,
        };
    }
    match authority.split_once(':') {
        None => Some(authority),
        Some((host, port)) if port.parse::<u16>().is_ok() && !host.is_empty() => Some(host),
        Some(_) => None,
    }
}

/// `localhost`, `127.x.y.z` or `[::1]` (case-insensitive).
pub fn is_loopback_host(host: &str) -> bool {
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, KnownNames};
    use crate::env::Env;

    fn load(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml_str(
            text,
            Path::new("/home/u/.tau/tau.toml"),
            &Env::default(),
            &KnownNames::builtin(),
        )
    }

    #[test]
    fn absent_table_serves_nothing() {
        let config = load("").unwrap();
        assert_eq!(config.web, WebConfig::default());
    }

    #[test]
    fn loopback_listen_needs_no_tls() {
        let config = load("[web]\nlisten = \"127.0.0.1:7878\"\n").unwrap();
        assert_eq!(config.web.listen, Some("127.0.0.1:7878".parse().unwrap()));
        let config = load("[web]\nlisten = \"localhost:9\"\n").unwrap();
        assert_eq!(config.web.listen, Some("127.0.0.1:9".parse().unwrap()));
    }

    #[test]
    fn non_loopback_listen_without_tls_is_one_line_naming_the_keys() {
        let err = load("[web]\nlisten = \"0.0.0.0:8443\"\n")
            .unwrap_err()
            .to_string();
        assert!(!err.contains('\n'), "{err}");
        assert!(err.contains("web.listen"), "{err}");
        assert!(
            err.contains("web.tls_cert") && err.contains("web.tls_key"),
            "{err}"
        );
        let config =
            load("[web]\nlisten = \"0.0.0.0:8443\"\ntls_cert = \"c.pem\"\ntls_key = \"/k.pem\"\n")
                .unwrap();
        assert_eq!(
            config.web.tls_cert.as_deref(),
            Some(Path::new("/home/u/.tau/c.pem"))
        );
        assert_eq!(config.web.tls_key.as_deref(), Some(Path::new("/k.pem")));
    }

    #[test]
    fn half_a_tls_pair_is_refused() {
        let err = load("[web]\nlisten = \"127.0.0.1:1\"\ntls_cert = \"c.pem\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("web.tls_key"), "{err}");
    }

    #[test]
    fn bad_values_and_keys_are_refused() {
        for text in [
            "[web]\nlisten = \"7878\"\n",
            "[web]\nlisten = 7878\n",
            "[web]\npublic_origin = \"https://a.example/path\"\n",
            "[web]\npublic_origin = \"http://a.example\"\n",
            "[web]\npublic_origin = \"ftp://a.example\"\n",
            "[web]\nport = 1\n",
        ] {
            let err = load(text).unwrap_err().to_string();
            assert!(
                err.starts_with("/home/u/.tau/tau.toml: web."),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn public_origin_is_normalized() {
        let config = load("[web]\npublic_origin = \"HTTPS://Tau.Example.org:8443/\"\n").unwrap();
        assert_eq!(
            config.web.public_origin.as_deref(),
            Some("https://tau.example.org:8443")
        );
        let config = load("[web]\npublic_origin = \"http://localhost:3000\"\n").unwrap();
        assert_eq!(
            config.web.public_origin.as_deref(),
            Some("http://localhost:3000")
        );
    }

    #[test]
    fn hosts() {
        assert_eq!(host_of("[::1]:80"), Some("[::1]"));
        assert_eq!(host_of("a.b:80"), Some("a.b"));
        assert_eq!(host_of("a.b:x"), None);
        assert!(is_loopback_host("LOCALHOST"));
        assert!(is_loopback_host("127.0.0.2"));
        assert!(is_loopback_host("[::1]"));
        assert!(!is_loopback_host("localhost.evil.example"));
        assert!(!is_loopback_host("10.0.0.1"));
    }
}
