//! The server side of SigV4 for the Bedrock tests: recomputes a recorded request's signature with
//! the test keys and compares it with the one sent.
// Test-only helpers: a missing header should fail the test loudly.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use super::Recorded;
use taud::provider::bedrock::sigv4;
use taud::provider::credentials::{AwsKeys, Secret};

/// Checks that the request was signed as it was sent: recomputes the signature over the recorded
/// method, target, headers and body.
pub fn assert_signed_as_sent(sent: &Recorded, host: &str) {
    let authorization = sent.header("authorization").unwrap();
    assert!(
        authorization.starts_with("AWS4-HMAC-SHA256 Credential=AKIDTEST/"),
        "{authorization}"
    );
    assert!(authorization.contains("/eu-central-1/bedrock/aws4_request, "));
    assert!(
        authorization
            .contains("SignedHeaders=accept;content-type;host;x-amz-date;x-amz-security-token, ")
    );
    assert_eq!(
        sent.header("x-amz-security-token"),
        Some("session-token-test")
    );
    let url = reqwest::Url::parse(&format!("http://{host}{}", sent.target)).unwrap();
    let amz_date = sent.header("x-amz-date").unwrap();
    let keys = AwsKeys {
        access_key_id: "AKIDTEST".into(),
        secret_access_key: Secret::new("secret-test"),
        session_token: Some(Secret::new("session-token-test")),
    };
    let scope = sigv4::Scope {
        region: "eu-central-1",
        service: "bedrock",
        amz_date,
    };
    let expected = sigv4::sign(
        "POST",
        &url,
        &[
            ("content-type", sent.header("content-type").unwrap()),
            ("accept", sent.header("accept").unwrap()),
        ],
        &sent.body,
        scope,
        &keys,
    )
    .unwrap();
    assert_eq!(authorization, expected.authorization);
}
