//! The Bedrock provider against a local mock server speaking ConverseStream: event-stream bodies
//! split inside preludes and between headers and payloads, SigV4 and bearer authentication, the
//! exact request bodies, exception frames, throttling, a corrupted CRC and the fallback.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use support::provider::sigv4_check::assert_signed_as_sent;
use support::provider::{MockServer, PIXEL_PNG, Reply, assemble, call, hello, image_result};
use tau_api::config::{CacheConfig, CacheStrategy, CacheTtl, FallbackConfig, RoleConfig};
use tau_api::env::Env;
use taud::agent::{StaticSystemPrompt, StopReason, TauAgent};
use taud::gate::ApprovalOutcome;
use taud::message::{CachePoint, SystemContentBlock};
use taud::model::{Model, ModelError, ModelEvent};
use taud::provider::bedrock::endpoint;
use taud::provider::bedrock::eventstream::encode_frame;
use taud::provider::{
    ProviderError, ProviderOptions, RetryPolicy, build_model, build_model_with, check_credentials,
};
use taud::testing::ScriptedApprover;
use taud::tool::builtin::{FixedClock, shipped_catalog};

const TEXT_TURN: &[u8] = include_bytes!("fixtures/providers/bedrock/text_turn.bin");
const TOOL_TURN: &[u8] = include_bytes!("fixtures/providers/bedrock/tool_turn.bin");
const THROTTLED: &[u8] = include_bytes!("fixtures/providers/bedrock/throttled_mid_stream.bin");
const EVENTS: &str = "application/vnd.amazon.eventstream";
const MODEL_ID: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";

fn role(cache: Option<CacheConfig>) -> RoleConfig {
    RoleConfig {
        provider: "bedrock".into(),
        model_id: MODEL_ID.into(),
        max_tokens: 2048,
        cache,
        fallback: None,
        tuning: Default::default(),
    }
}

fn sigv4_env(server: &MockServer) -> Env {
    [
        ("AWS_ACCESS_KEY_ID", "AKIDTEST"),
        ("AWS_SECRET_ACCESS_KEY", "secret-test"),
        ("AWS_SESSION_TOKEN", "session-token-test"),
        ("AWS_REGION", "eu-central-1"),
        ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.url().as_str()),
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:1"),
    ]
    .into_iter()
    .collect()
}

fn options(attempts: u32) -> ProviderOptions {
    ProviderOptions {
        retry: Some(RetryPolicy::immediate(attempts)),
        ..ProviderOptions::default()
    }
}

fn model(env: &Env, attempts: u32) -> Arc<dyn Model> {
    match build_model_with("brain", &role(None), env, &options(attempts)) {
        Ok(model) => model,
        Err(error) => panic!("{error}"),
    }
}

/// Cuts inside the first prelude, between the first frame's headers and payload, inside the
/// second frame's prelude CRC and in the middle of the body.
fn frame_cuts(body: &[u8]) -> Vec<usize> {
    let word = |at: usize| u32::from_be_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]]);
    let first_total = word(0) as usize;
    let first_headers = word(4) as usize;
    vec![
        5,
        12 + first_headers,
        first_total + 9,
        body.len() / 2,
        body.len() - 2,
    ]
}

#[tokio::test]
async fn a_signed_text_turn_split_inside_frames() {
    let server =
        MockServer::start(vec![Reply::ok(EVENTS, TEXT_TURN, &frame_cuts(TEXT_TURN))]).await;
    let items = call(model(&sigv4_env(&server), 1).as_ref(), hello()).await;
    let done = assemble(&items).unwrap();
    assert_eq!(done.message.text(), "Saat 15:30, efendim. Çay? 🍵");
    assert_eq!(done.stop_reason, StopReason::EndTurn);
    assert_eq!(done.usage.input_tokens, 300);
    assert_eq!(done.usage.total_tokens, 306);

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(
        sent.target,
        "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
    );
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_signed_as_sent(sent, &server.addr.to_string());
    assert_eq!(
        sent.json(),
        json!({
            "messages": [{"role": "user", "content": [{"text": "Merhaba"}]}],
            "inferenceConfig": {"maxTokens": 2048}
        })
    );
}

#[tokio::test]
async fn a_bearer_key_replaces_sigv4() {
    let server = MockServer::start(vec![Reply::ok(EVENTS, TEXT_TURN, &[])]).await;
    let env: Env = [
        ("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key"),
        ("AWS_ACCESS_KEY_ID", "AKIDTEST"),
        ("AWS_SECRET_ACCESS_KEY", "secret-test"),
        ("AWS_DEFAULT_REGION", "us-west-2"),
        ("AWS_ENDPOINT_URL", server.url().as_str()),
    ]
    .into_iter()
    .collect();
    let items = call(model(&env, 1).as_ref(), hello()).await;
    assert!(assemble(&items).is_ok());
    let sent = &server.requests()[0];
    assert_eq!(sent.header("authorization"), Some("Bearer bedrock-api-key"));
    assert_eq!(sent.header("x-amz-date"), None);
}

#[tokio::test]
async fn a_tool_turn_then_a_refusal_sends_cache_points_and_the_error_result() {
    let server = MockServer::start(vec![
        Reply::ok(EVENTS, TOOL_TURN, &frame_cuts(TOOL_TURN)),
        Reply::ok(EVENTS, TEXT_TURN, &[]),
    ])
    .await;
    let cache = CacheConfig {
        strategy: CacheStrategy::Auto,
        ttl: Some(CacheTtl::OneHour),
        system_prompt_ttl: None,
        tools_ttl: None,
    };
    let model = build_model_with(
        "brain",
        &role(Some(cache)),
        &sigv4_env(&server),
        &options(1),
    )
    .unwrap();
    let clock = Arc::new(FixedClock::from(jiff::Timestamp::UNIX_EPOCH));
    let agent = TauAgent::builder(model)
        .catalog(shipped_catalog(clock, &[]).unwrap())
        .approver(Arc::new(ScriptedApprover::decisions([
            ApprovalOutcome::Rejected,
        ])))
        .system_prompt(Arc::new(StaticSystemPrompt::blocks(vec![
            SystemContentBlock::Text("You are tau.".into()),
            SystemContentBlock::CachePoint(CachePoint::default()),
            SystemContentBlock::Text("## Now".into()),
        ])))
        .build();
    let end = agent.stream("Turn on the lamp").finish().await.unwrap();
    assert_eq!(end.model_calls, 2);
    let history = agent.messages();
    let tool = history[1].tool_uses().next().unwrap().clone();
    assert_eq!(tool.tool_use_id, "tooluse_LampVector");
    assert_eq!(tool.input, json!({"action": "turn on the desk lamp"}));

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_signed_as_sent(&requests[1], &server.addr.to_string());
    let second = requests[1].json();
    assert_eq!(
        second["system"],
        json!([
            {"text": "You are tau."},
            {"cachePoint": {"type": "default", "ttl": "1h"}},
            {"text": "## Now"}
        ])
    );
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(
        messages[0],
        json!({"role": "user", "content": [{"text": "Turn on the lamp"}]})
    );
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(
        messages[1]["content"].as_array().unwrap().last().unwrap(),
        &json!({"toolUse": {"toolUseId": tool.tool_use_id, "name": tool.name, "input": tool.input}})
    );
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [
            {"toolResult": {"toolUseId": tool.tool_use_id, "status": "error", "content": [{"text":
                format!("The user did not approve this action: {}. Do not perform it; tell the user briefly.", tool.name)}]}},
            {"cachePoint": {"type": "default", "ttl": "1h"}}
        ]})
    );
    let tools = second["toolConfig"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 3);
    assert_eq!(tools[0]["toolSpec"]["name"], "current_time");
    assert_eq!(
        tools[2],
        json!({"cachePoint": {"type": "default", "ttl": "1h"}})
    );
    assert_eq!(second["inferenceConfig"], json!({"maxTokens": 2048}));
}

#[tokio::test]
async fn a_throttling_frame_mid_stream_then_success() {
    let server = MockServer::start(vec![
        Reply::ok(EVENTS, THROTTLED, &frame_cuts(THROTTLED)),
        Reply::ok(EVENTS, TEXT_TURN, &[]),
    ])
    .await;
    let items = call(model(&sigv4_env(&server), 2).as_ref(), hello()).await;
    assert!(
        items
            .iter()
            .any(|i| matches!(i, Ok(ModelEvent::Throttled { .. })))
    );
    assert_eq!(
        assemble(&items).unwrap().message.text(),
        "Saat 15:30, efendim. Çay? 🍵"
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn an_http_throttle_is_retried_and_exhaustion_is_a_throttle_error() {
    let throttled = || {
        Reply::status(429, r#"{"message":"Too many requests, please wait."}"#).header(
            "x-amzn-ErrorType",
            "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/",
        )
    };
    let server = MockServer::start(vec![throttled(), Reply::ok(EVENTS, TEXT_TURN, &[])]).await;
    let items = call(model(&sigv4_env(&server), 3).as_ref(), hello()).await;
    assert_eq!(
        items[0],
        Ok(ModelEvent::Throttled {
            delay: Duration::ZERO
        })
    );
    assert!(assemble(&items).is_ok());

    let server = MockServer::start(vec![throttled(), throttled()]).await;
    let items = call(model(&sigv4_env(&server), 2).as_ref(), hello()).await;
    assert!(
        matches!(items.last(), Some(Err(ModelError::Throttled(m))) if m.contains("Too many requests"))
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_corrupted_crc_fails_the_call_without_a_retry() {
    let mut body = TEXT_TURN.to_vec();
    body[20] ^= 0x55;
    let server = MockServer::start(vec![Reply::ok(EVENTS, &body, &[3, 40])]).await;
    let items = call(model(&sigv4_env(&server), 3).as_ref(), hello()).await;
    assert!(
        matches!(items.last(), Some(Err(ModelError::Stream(m))) if m.contains("CRC")),
        "{items:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn exhausted_retries_fall_back_to_another_provider() {
    let bedrock = MockServer::start(vec![
        Reply::status(503, r#"{"message":"Service unavailable"}"#)
            .header("x-amzn-ErrorType", "ServiceUnavailableException"),
        Reply::ok(
            EVENTS,
            &encode_frame(
                &[
                    (":message-type", "exception"),
                    (":exception-type", "internalServerException"),
                    (":content-type", "application/json"),
                ],
                br#"{"message":"internal"}"#,
            ),
            &[],
        ),
    ])
    .await;
    let anthropic = MockServer::start(vec![Reply::ok(
        "text/event-stream",
        include_bytes!("fixtures/providers/anthropic/text_turn.sse"),
        &[],
    )])
    .await;
    let mut env = sigv4_env(&bedrock);
    env.set("ANTHROPIC_API_KEY", "sk-test");
    env.set("ANTHROPIC_BASE_URL", anthropic.url());
    let mut with_fallback = role(None);
    with_fallback.fallback = Some(FallbackConfig {
        provider: "anthropic".into(),
        model_id: "claude-haiku-4-5".into(),
        max_tokens: Some(512),
    });
    let model = build_model_with("brain", &with_fallback, &env, &options(2)).unwrap();
    let items = call(model.as_ref(), hello()).await;
    let done = assemble(&items).unwrap();
    assert_eq!(
        done.message.text(),
        "Merhaba! Saat 15:30, efendim. Çay ister misiniz? 🍵"
    );
    assert!(model.fallback_in_use());
    assert_eq!(bedrock.requests().len(), 2);
    let fallback_body = anthropic.requests()[0].json();
    assert_eq!(fallback_body["model"], "claude-haiku-4-5");
    assert_eq!(fallback_body["max_tokens"], 512);
}

#[tokio::test]
async fn the_tau_toml_endpoint_wins_then_the_bedrock_variable_then_the_global_one() {
    let from_toml = MockServer::start(vec![Reply::ok(EVENTS, TEXT_TURN, &[])]).await;
    let bedrock_var = MockServer::start(vec![Reply::ok(EVENTS, TEXT_TURN, &[])]).await;
    let global_var = MockServer::start(vec![Reply::ok(EVENTS, TEXT_TURN, &[])]).await;
    let env_with = |bedrock: Option<&MockServer>| -> Env {
        let mut vars = vec![
            ("AWS_ACCESS_KEY_ID".to_owned(), "AKIDTEST".to_owned()),
            ("AWS_SECRET_ACCESS_KEY".to_owned(), "secret-test".to_owned()),
            (
                "AWS_SESSION_TOKEN".to_owned(),
                "session-token-test".to_owned(),
            ),
            ("AWS_REGION".to_owned(), "eu-central-1".to_owned()),
            ("AWS_ENDPOINT_URL".to_owned(), global_var.url()),
        ];
        if let Some(server) = bedrock {
            vars.push(("AWS_ENDPOINT_URL_BEDROCK_RUNTIME".to_owned(), server.url()));
        }
        vars.into_iter().collect()
    };
    let settings = |text: &str| -> ProviderOptions {
        let table: toml::Table = toml::from_str(text).unwrap();
        let settings = table
            .into_iter()
            .map(|(k, v)| (k, v.as_table().cloned().unwrap()))
            .collect();
        ProviderOptions {
            retry: Some(RetryPolicy::immediate(1)),
            ..ProviderOptions::from_component_settings(&settings).unwrap()
        }
    };
    let answered = |options: &ProviderOptions, env: &Env| {
        let model = build_model_with("brain", &role(None), env, options).unwrap();
        async move { assemble(&call(model.as_ref(), hello()).await).map(|d| d.stop_reason) }
    };
    let counts = || [&from_toml, &bedrock_var, &global_var].map(|server| server.requests().len());

    let toml_endpoint = settings(&format!(
        "[bedrock]\nendpoint_url = \"{}\"\n",
        from_toml.url()
    ));
    let result = answered(&toml_endpoint, &env_with(Some(&bedrock_var))).await;
    assert_eq!(result.ok(), Some(StopReason::EndTurn));
    assert_eq!(counts(), [1, 0, 0], "tau.toml wins over both variables");
    let sent = &from_toml.requests()[0];
    assert_signed_as_sent(sent, &from_toml.addr.to_string());

    let no_endpoint = settings("[bedrock]\n");
    let result = answered(&no_endpoint, &env_with(Some(&bedrock_var))).await;
    assert_eq!(result.ok(), Some(StopReason::EndTurn));
    assert_eq!(
        counts(),
        [1, 1, 0],
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME wins over AWS_ENDPOINT_URL"
    );

    let result = answered(&no_endpoint, &env_with(None)).await;
    assert_eq!(result.ok(), Some(StopReason::EndTurn));
    assert_eq!(
        counts(),
        [1, 1, 1],
        "AWS_ENDPOINT_URL when nothing else names one"
    );
}

#[test]
fn missing_credentials_and_endpoint_order() {
    let dir = crate::support::temp::dir();
    let home: Env = [("HOME", dir.path().to_str().unwrap())]
        .into_iter()
        .collect();
    let missing = check_credentials(&role(None), &home).unwrap_err();
    assert!(missing.variables.contains(&"AWS_ACCESS_KEY_ID".to_owned()));
    assert!(matches!(
        build_model("brain", &role(None), &home),
        Err(ProviderError::MissingCredentials { source, .. }) if source == missing
    ));

    let env: Env = [
        ("AWS_ENDPOINT_URL", "http://global:1"),
        ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "http://bedrock:2/"),
    ]
    .into_iter()
    .collect();
    assert_eq!(endpoint(None, &env, "eu-west-1"), "http://bedrock:2");
    assert_eq!(
        endpoint(Some("http://toml:3"), &env, "eu-west-1"),
        "http://toml:3"
    );
    assert_eq!(
        endpoint(None, &Env::new(), "eu-west-1"),
        "https://bedrock-runtime.eu-west-1.amazonaws.com"
    );
}

#[tokio::test]
async fn a_tool_result_image_is_sent_as_converse_image_bytes() {
    let server =
        MockServer::start(vec![Reply::ok(EVENTS, TEXT_TURN, &frame_cuts(TEXT_TURN))]).await;
    let items = call(model(&sigv4_env(&server), 1).as_ref(), image_result()).await;
    assemble(&items).unwrap();
    let sent = &server.requests()[0];
    assert_signed_as_sent(sent, &server.addr.to_string());
    assert_eq!(
        sent.json()["messages"][2],
        json!({"role": "user", "content": [
            {"toolResult": {"toolUseId": "call_cam", "status": "success", "content": [
                {"text": "one frame"},
                {"image": {"format": "png", "source": {"bytes": PIXEL_PNG}}}
            ]}}
        ]})
    );
}
