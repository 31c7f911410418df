//! The Bedrock provider on a machine whose clock is wrong, against a local mock server with its own
//! clock that rejects SigV4 requests dated more than five minutes from it the way AWS does (403,
//! `InvalidSignatureException`, "Signature expired" / "Signature not yet current", a `Date`
//! header): one re-signed retry with the server's clock, the offset kept for later calls, a clear
//! error when it does not help, and no retry for other 403s.

use crate::support;

use std::sync::Arc;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use support::provider::sigv4_check::assert_signed_as_sent;
use support::provider::{MockServer, Recorded, Reply, assemble, call, hello};
use tau_api::env::Env;
use taud::model::{Model, ModelError};
use taud::provider::bedrock::{BedrockSettings, BedrockTransport};
use taud::provider::cache::CachePlan;
use taud::provider::http::build_client;
use taud::provider::{BedrockCredentials, RetryPolicy, RetryingModel};
use taud::tool::builtin::FixedClock;

const TEXT_TURN: &[u8] = include_bytes!("fixtures/providers/bedrock/text_turn.bin");
const EVENTS: &str = "application/vnd.amazon.eventstream";
const MODEL_ID: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
const SKEW_LIMIT: SignedDuration = SignedDuration::from_mins(5);
const INVALID_SIGNATURE: &str =
    "InvalidSignatureException:http://internal.amazon.com/coral/com.amazon.coral.service/";

#[allow(clippy::unwrap_used)] // a test helper: bad setup fails the test
fn client_now() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

/// A Bedrock model for `server` whose clock is stopped at [`client_now`]; the retry policy would
/// allow three attempts, so any retry beyond the skew one shows in the request count.
#[allow(clippy::unwrap_used)] // a test helper: bad setup fails the test
fn model(server: &MockServer) -> Arc<dyn Model> {
    let env: Env = [
        ("AWS_ACCESS_KEY_ID", "AKIDTEST"),
        ("AWS_SECRET_ACCESS_KEY", "secret-test"),
        ("AWS_SESSION_TOKEN", "session-token-test"),
        ("AWS_REGION", "eu-central-1"),
    ]
    .into_iter()
    .collect();
    let settings = BedrockSettings {
        endpoint: server.url(),
        credentials: BedrockCredentials::from_env(&env).unwrap(),
        model_id: MODEL_ID.into(),
        max_tokens: 2048,
        cache: CachePlan::new(None, MODEL_ID),
    };
    let client = build_client(&env).unwrap();
    let transport = BedrockTransport::new(client, settings)
        .unwrap()
        .with_clock(Arc::new(FixedClock::from(client_now())));
    Arc::new(RetryingModel::new(transport, RetryPolicy::immediate(3)))
}

fn amz(time: Timestamp) -> String {
    time.strftime("%Y%m%dT%H%M%SZ").to_string()
}

fn http_date(time: Timestamp) -> String {
    time.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

/// The time a request was signed for, from its `x-amz-date`.
#[allow(clippy::unwrap_used)] // a test helper: bad setup fails the test
fn signed_at(sent: &Recorded) -> Timestamp {
    let date = sent.header("x-amz-date").unwrap();
    jiff::civil::DateTime::strptime("%Y%m%dT%H%M%SZ", date)
        .unwrap()
        .to_zoned(TimeZone::UTC)
        .unwrap()
        .timestamp()
}

/// AWS's answer to a request signed too far from `server_now`, as Bedrock sends it.
fn skew_rejection(sent: &Recorded, server_now: Timestamp) -> Reply {
    let at = signed_at(sent);
    let message = if at < server_now {
        format!(
            "Signature expired: {} is now earlier than {} ({} - 5 min.)",
            amz(at),
            amz(server_now - SKEW_LIMIT),
            amz(server_now)
        )
    } else {
        format!(
            "Signature not yet current: {} is still later than {} ({} + 5 min.)",
            amz(at),
            amz(server_now + SKEW_LIMIT),
            amz(server_now)
        )
    };
    let body = serde_json::json!({ "message": message }).to_string();
    Reply::status(403, &body)
        .header("x-amzn-ErrorType", INVALID_SIGNATURE)
        .header("x-amzn-RequestId", "5f1c0e9a-skew-test")
        .header("Date", &http_date(server_now))
}

/// A server whose clock reads `server_now`: a request signed within five minutes of it is answered
/// with a text turn, any other is rejected as skewed.
async fn aws_with_clock(server_now: Timestamp) -> MockServer {
    MockServer::respond(move |sent| {
        let skew = signed_at(sent).duration_since(server_now).abs();
        if skew > SKEW_LIMIT {
            skew_rejection(sent, server_now)
        } else {
            Reply::ok(EVENTS, TEXT_TURN, &[]).header("Date", &http_date(server_now))
        }
    })
    .await
}

fn request_error(items: &[Result<taud::model::ModelEvent, ModelError>]) -> String {
    match items.last() {
        Some(Err(ModelError::Request(message))) => message.clone(),
        other => panic!("expected a request error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_skewed_clock_is_corrected_from_the_date_header_and_remembered() {
    for server_offset in [
        SignedDuration::from_hours(1),
        SignedDuration::from_hours(-1),
    ] {
        let server_now = client_now() + server_offset;
        let server = aws_with_clock(server_now).await;
        let host = server.addr.to_string();
        let model = model(&server);

        let items = call(model.as_ref(), hello()).await;
        assert_eq!(
            assemble(&items).unwrap().message.text(),
            "Saat 15:30, efendim. Çay? 🍵"
        );
        let requests = server.requests();
        assert_eq!(requests.len(), 2, "one rejection, one re-signed retry");
        assert_eq!(
            requests[0].header("x-amz-date"),
            Some(amz(client_now()).as_str())
        );
        assert_eq!(
            requests[1].header("x-amz-date"),
            Some(amz(server_now).as_str())
        );
        for sent in &requests {
            assert_signed_as_sent(sent, &host);
        }
        assert_eq!(requests[0].body, requests[1].body);

        let items = call(model.as_ref(), hello()).await;
        assert!(assemble(&items).is_ok(), "{items:?}");
        let requests = server.requests();
        assert_eq!(requests.len(), 3, "the next call is signed right at once");
        assert_eq!(
            requests[2].header("x-amz-date"),
            Some(amz(server_now).as_str())
        );
        assert_signed_as_sent(&requests[2], &host);
    }
}

#[tokio::test]
async fn a_server_that_keeps_rejecting_gets_one_retry_then_a_clear_error() {
    let server_now = client_now() + SignedDuration::from_hours(1);
    let server = MockServer::respond(move |sent| skew_rejection(sent, server_now)).await;
    let items = call(model(&server).as_ref(), hello()).await;
    let message = request_error(&items);
    assert!(
        message.contains("clock looks wrong by about 3600 seconds (behind AWS)"),
        "{message}"
    );
    assert!(message.contains("NTP"), "{message}");
    assert!(message.contains("InvalidSignatureException"), "{message}");
    assert!(!message.contains("secret-test"), "{message}");
    assert!(!message.contains("session-token-test"), "{message}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].header("x-amz-date"),
        Some(amz(server_now).as_str())
    );
    assert_signed_as_sent(&requests[1], &server.addr.to_string());
}

#[tokio::test]
async fn a_skew_rejection_without_a_date_is_not_retried() {
    let server_now = client_now() + SignedDuration::from_hours(1);
    let server = MockServer::respond(move |sent| {
        let mut reply = skew_rejection(sent, server_now);
        reply.headers.retain(|(name, _)| name != "Date");
        reply
    })
    .await;
    let items = call(model(&server).as_ref(), hello()).await;
    let message = request_error(&items);
    assert!(message.contains("clock may be wrong"), "{message}");
    assert!(message.contains("NTP"), "{message}");
    assert!(message.contains("Signature expired"), "{message}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn another_403_is_not_retried_and_teaches_no_offset() {
    let server_now = client_now() + SignedDuration::from_hours(1);
    let server = MockServer::respond(move |_| {
        Reply::status(
            403,
            r#"{"message":"The security token included in the request is invalid."}"#,
        )
        .header(
            "x-amzn-ErrorType",
            "UnrecognizedClientException:http://internal.amazon.com/coral/com.amazon.coral.service/",
        )
        .header("Date", &http_date(server_now))
    })
    .await;
    let model = model(&server);
    let items = call(model.as_ref(), hello()).await;
    let message = request_error(&items);
    assert!(message.contains("UnrecognizedClientException"), "{message}");
    assert!(!message.contains("NTP"), "{message}");
    assert_eq!(server.requests().len(), 1);

    call(model.as_ref(), hello()).await;
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].header("x-amz-date"),
        Some(amz(client_now()).as_str()),
        "the clock is left as it is"
    );
}
