//! AWS Signature Version 4 for one HTTP request (header signing, unsigned-payload header not sent).
//!
//! Hand-written (about a hundred lines over `hmac` + `sha2`) rather than the `aws-sigv4` crate:
//! that crate and its smithy dependencies need Rust 1.94 (the workspace declares 1.88) and bring a
//! dozen crates for what is a fixed, well-tested algorithm here.
//!
//! Invariants: the canonical path is the path as sent (already percent-encoded once) encoded again
//! segment by segment, as every service but S3 expects (so a model id's `:` is `%3A` on the wire
//! and `%253A` in the canonical request); header names are lowercased, values trimmed with inner
//! runs of spaces collapsed, and sorted; `host` (with a non-default port), `x-amz-date` and, with
//! temporary credentials, `x-amz-security-token` are always signed; the secret key never leaves
//! this module except as a derived signature; the `Debug` form of [`Signed`] shows neither the
//! security token nor the signature.

use std::fmt;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::provider::credentials::AwsKeys;

/// What a signature needs besides the request.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    pub region: &'a str,
    pub service: &'a str,
    /// `YYYYMMDDTHHMMSSZ` (UTC).
    pub amz_date: &'a str,
}

/// The signature and the headers to add to the request. Its `Debug` form redacts the security
/// token and the signature (the canonical request carries the token too).
#[derive(Clone, PartialEq, Eq)]
pub struct Signed {
    pub canonical_request: String,
    pub string_to_sign: String,
    pub authorization: String,
    /// `x-amz-date`, `x-amz-security-token` (when there is one) and `authorization`.
    pub headers: Vec<(&'static str, String)>,
}

const REDACTED: &str = "***";

/// `authorization` with the signature replaced.
fn redacted_authorization(authorization: &str) -> String {
    match authorization.split_once("Signature=") {
        Some((head, _)) => format!("{head}Signature={REDACTED}"),
        None => REDACTED.to_owned(),
    }
}

impl fmt::Debug for Signed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let canonical_request: Vec<&str> = self
            .canonical_request
            .lines()
            .map(|line| {
                if line.starts_with("x-amz-security-token:") {
                    "x-amz-security-token:***"
                } else {
                    line
                }
            })
            .collect();
        let headers: Vec<(&str, String)> = self
            .headers
            .iter()
            .map(|(name, value)| match *name {
                "x-amz-security-token" => (*name, REDACTED.to_owned()),
                "authorization" => (*name, redacted_authorization(value)),
                _ => (*name, value.clone()),
            })
            .collect();
        f.debug_struct("Signed")
            .field("canonical_request", &canonical_request.join("\n"))
            .field("string_to_sign", &self.string_to_sign)
            .field(
                "authorization",
                &redacted_authorization(&self.authorization),
            )
            .field("headers", &headers)
            .finish()
    }
}

/// The signing failed (the HMAC could not be keyed; it accepts every key, so this is defensive).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the request could not be signed")]
pub struct SignError;

/// The current time as `YYYYMMDDTHHMMSSZ`.
pub fn amz_date_now() -> String {
    amz_date(jiff::Timestamp::now())
}

/// `time` as `YYYYMMDDTHHMMSSZ` (UTC), the form of `x-amz-date`.
pub fn amz_date(time: jiff::Timestamp) -> String {
    time.strftime("%Y%m%dT%H%M%SZ").to_string()
}

/// Signs a request to `url` with `headers` (besides host, x-amz-date and the security token, which
/// are added here) and `body`.
pub fn sign(
    method: &str,
    url: &reqwest::Url,
    headers: &[(&str, &str)],
    body: &[u8],
    scope: Scope<'_>,
    keys: &AwsKeys,
) -> Result<Signed, SignError> {
    let host = match (url.host_str(), url.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_owned(),
        (None, _) => String::new(),
    };
    let mut signed: Vec<(String, String)> = headers
        .iter()
        .map(|(name, value)| (name.to_ascii_lowercase(), normalize(value)))
        .collect();
    signed.push(("host".into(), host));
    signed.push(("x-amz-date".into(), scope.amz_date.to_owned()));
    if let Some(token) = &keys.session_token {
        signed.push(("x-amz-security-token".into(), token.expose().to_owned()));
    }
    signed.sort();
    let canonical_headers: String = signed.iter().map(|(n, v)| format!("{n}:{v}\n")).collect();
    let signed_names = signed
        .iter()
        .map(|(n, _)| n.as_str())
        .collect::<Vec<_>>()
        .join(";");
    let canonical_request = [
        method,
        &canonical_path(url.path()),
        &canonical_query(url),
        &canonical_headers,
        &signed_names,
        &hex::encode(Sha256::digest(body)),
    ]
    .join("\n");
    let date = scope.amz_date.get(..8).unwrap_or(scope.amz_date);
    let credential_scope = format!("{date}/{}/{}/aws4_request", scope.region, scope.service);
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{}\n{credential_scope}\n{}",
        scope.amz_date,
        hex::encode(Sha256::digest(canonical_request.as_bytes()))
    );
    let mut key = hmac(
        format!("AWS4{}", keys.secret_access_key.expose()).as_bytes(),
        date.as_bytes(),
    )?;
    for part in [scope.region, scope.service, "aws4_request"] {
        key = hmac(&key, part.as_bytes())?;
    }
    let signature = hex::encode(hmac(&key, string_to_sign.as_bytes())?);
    let authorization = format!(
        "AWS4-HMAC-SHA256 Credential={}/{credential_scope}, SignedHeaders={signed_names}, Signature={signature}",
        keys.access_key_id
    );
    let mut out = vec![("x-amz-date", scope.amz_date.to_owned())];
    if let Some(token) = &keys.session_token {
        out.push(("x-amz-security-token", token.expose().to_owned()));
    }
    out.push(("authorization", authorization.clone()));
    Ok(Signed {
        canonical_request,
        string_to_sign,
        authorization,
        headers: out,
    })
}

fn hmac(key: &[u8], data: &[u8]) -> Result<Vec<u8>, SignError> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).map_err(|_| SignError)?;
    mac.update(data);
    Ok(mac.finalize().into_bytes().to_vec())
}

fn normalize(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Percent-encodes every byte outside `A-Za-z0-9-_.~` (and `/` when `keep_slash`).
pub fn uri_encode(input: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(input.len());
    for byte in input.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(byte));
            }
            b'/' if keep_slash => out.push('/'),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

fn canonical_path(path: &str) -> String {
    if path.is_empty() {
        "/".to_owned()
    } else {
        uri_encode(path, true)
    }
}

fn canonical_query(url: &reqwest::Url) -> String {
    let mut pairs: Vec<(String, String)> = url
        .query_pairs()
        .map(|(k, v)| (uri_encode(&k, false), uri_encode(&v, false)))
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::credentials::Secret;
    use serde_json::Value;

    const VECTOR: &str =
        include_str!("../../../tests/fixtures/providers/sigv4/converse_stream_colon_model_id.json");

    fn example_keys(token: Option<&str>) -> AwsKeys {
        AwsKeys {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: Secret::new("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
            session_token: token.map(Secret::new),
        }
    }

    fn aws_suite(method: &str, url: &str) -> Signed {
        let url = reqwest::Url::parse(url).unwrap();
        let scope = Scope {
            region: "us-east-1",
            service: "service",
            amz_date: "20150830T123600Z",
        };
        sign(method, &url, &[], b"", scope, &example_keys(None)).unwrap()
    }

    #[test]
    fn aws_published_vectors() {
        let signed = aws_suite("GET", "https://example.amazonaws.com/");
        assert!(signed.authorization.ends_with(
            "SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
        ));
        assert_eq!(
            signed.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
             SignedHeaders=host;x-amz-date, \
             Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
        );
        let post = aws_suite("POST", "https://example.amazonaws.com/");
        assert!(post.authorization.ends_with(
            "Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"
        ));
        let query = aws_suite(
            "GET",
            "https://example.amazonaws.com/?Param2=value2&Param1=value1",
        );
        assert!(
            query
                .canonical_request
                .contains("\nParam1=value1&Param2=value2\n")
        );
        assert!(query.authorization.ends_with(
            "Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"
        ));
    }

    #[test]
    fn bedrock_vector_with_a_colon_model_id_and_a_session_token() {
        let v: Value = serde_json::from_str(VECTOR).unwrap();
        let s = |k: &str| v[k].as_str().unwrap();
        let url = reqwest::Url::parse(s("url")).unwrap();
        assert!(url.path().contains("%3A"), "the URL keeps its encoding");
        let keys = AwsKeys {
            access_key_id: s("access_key_id").into(),
            secret_access_key: Secret::new(s("secret_access_key")),
            session_token: Some(Secret::new(s("session_token"))),
        };
        let scope = Scope {
            region: s("region"),
            service: s("service"),
            amz_date: s("x_amz_date"),
        };
        let signed = sign(
            s("method"),
            &url,
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/vnd.amazon.eventstream"),
            ],
            s("body").as_bytes(),
            scope,
            &keys,
        )
        .unwrap();
        assert_eq!(signed.canonical_request, s("canonical_request"));
        assert_eq!(signed.string_to_sign, s("string_to_sign"));
        assert_eq!(signed.authorization, s("authorization"));
        assert!(signed.headers.contains(&(
            "x-amz-security-token",
            "IQoJb3JpZ2luX2VjEXAMPLETOKEN".to_owned()
        )));
        assert!(!format!("{keys:?}").contains("EXAMPLEKEY"));
        let signature = signed.authorization.rsplit("Signature=").next().unwrap();
        assert_eq!(signature.len(), 64);
        for shown in [format!("{signed:?}"), format!("{signed:#?}")] {
            assert!(!shown.contains("IQoJb3JpZ2luX2VjEXAMPLETOKEN"), "{shown}");
            assert!(!shown.contains(signature), "{shown}");
            assert!(!shown.contains("EXAMPLEKEY"), "{shown}");
            assert!(shown.contains("x-amz-security-token"), "{shown}");
            assert!(shown.contains("Signature=***"), "{shown}");
        }
    }

    #[test]
    fn a_non_default_port_is_part_of_the_host() {
        let url = reqwest::Url::parse("http://127.0.0.1:4566/model/a%3Ab/converse-stream").unwrap();
        let scope = Scope {
            region: "us-east-1",
            service: "bedrock",
            amz_date: "20260101T000000Z",
        };
        let signed = sign("POST", &url, &[], b"{}", scope, &example_keys(None)).unwrap();
        assert!(signed.canonical_request.contains("\nhost:127.0.0.1:4566\n"));
        assert!(
            signed
                .canonical_request
                .starts_with("POST\n/model/a%253Ab/converse-stream\n")
        );
        assert_eq!(amz_date_now().len(), 16);
        let time: jiff::Timestamp = "2026-01-01T01:02:03.9Z".parse().unwrap();
        assert_eq!(amz_date(time), "20260101T010203Z");
    }
}
