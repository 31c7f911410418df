//! The Anthropic provider against a local mock server speaking the Messages API: recorded-shape SSE
//! bodies split at awkward points, the exact request bodies, errors after 200, throttling, retries
//! and credentials.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use support::provider::{
    MockServer, PIXEL_PNG, Reply, assemble, awkward_cuts, call, hello, image_result,
};
use tau_api::config::{CacheConfig, CacheStrategy, CacheTtl, FallbackConfig, RoleConfig};
use tau_api::env::Env;
use taud::agent::{StaticSystemPrompt, StopReason, TauAgent};
use taud::gate::ApprovalOutcome;
use taud::message::{CachePoint, SystemContentBlock, ToolUse};
use taud::model::{Model, ModelError, ModelEvent};
use taud::provider::{
    ProviderError, ProviderOptions, RetryPolicy, build_model, build_model_with, check_credentials,
};
use taud::testing::ScriptedApprover;
use taud::tool::builtin::{FixedClock, shipped_catalog};

const TEXT_TURN: &[u8] = include_bytes!("fixtures/providers/anthropic/text_turn.sse");
const TOOL_TURN: &[u8] = include_bytes!("fixtures/providers/anthropic/tool_turn.sse");
const ERROR_AFTER_200: &[u8] = include_bytes!("fixtures/providers/anthropic/error_after_200.sse");
const SSE: &str = "text/event-stream";

fn role(cache: Option<CacheConfig>) -> RoleConfig {
    RoleConfig {
        provider: "anthropic".into(),
        model_id: "claude-sonnet-4-5".into(),
        max_tokens: 1024,
        cache,
        fallback: None,
        tuning: Default::default(),
    }
}

fn env(server: &MockServer) -> Env {
    [
        ("ANTHROPIC_API_KEY", "sk-test-key"),
        ("ANTHROPIC_BASE_URL", server.url().as_str()),
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

fn model(server: &MockServer, attempts: u32) -> Arc<dyn Model> {
    match build_model_with("brain", &role(None), &env(server), &options(attempts)) {
        Ok(model) => model,
        Err(error) => panic!("{error}"),
    }
}

#[tokio::test]
async fn a_text_turn_split_inside_characters_and_fields() {
    let server = MockServer::start(vec![Reply::ok(SSE, TEXT_TURN, &awkward_cuts(TEXT_TURN))]).await;
    let model = model(&server, 1);
    let items = call(model.as_ref(), hello()).await;
    let done = assemble(&items).unwrap();
    assert_eq!(
        done.message.text(),
        "Merhaba! Saat 15:30, efendim. Çay ister misiniz? 🍵"
    );
    assert_eq!(done.stop_reason, StopReason::EndTurn);
    assert_eq!(done.usage.input_tokens, 412);
    assert_eq!(done.usage.output_tokens, 17);
    assert_eq!(done.usage.cache_read_input_tokens, Some(380));
    assert_eq!(done.usage.cache_write_input_tokens, Some(0));
    assert_eq!(done.usage.total_tokens, 412 + 17 + 380);

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.target, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some("sk-test-key"));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(
        sent.json(),
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "stream": true,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Merhaba"}]}]
        })
    );
}

#[tokio::test]
async fn a_tool_turn_then_a_refusal_sends_the_exact_next_body() {
    let server = MockServer::start(vec![
        Reply::ok(SSE, TOOL_TURN, &awkward_cuts(TOOL_TURN)),
        Reply::ok(SSE, TEXT_TURN, &[7, 300]),
    ])
    .await;
    let cache = CacheConfig {
        strategy: CacheStrategy::Auto,
        ttl: Some(CacheTtl::FiveMinutes),
        system_prompt_ttl: Some(CacheTtl::OneHour),
        tools_ttl: Some(CacheTtl::OneHour),
    };
    let model = build_model_with("brain", &role(Some(cache)), &env(&server), &options(1)).unwrap();
    let clock = Arc::new(FixedClock::from(jiff::Timestamp::UNIX_EPOCH));
    let agent = TauAgent::builder(model)
        .catalog(shipped_catalog(clock, &[]).unwrap())
        .approver(Arc::new(ScriptedApprover::decisions([
            ApprovalOutcome::Rejected,
        ])))
        .system_prompt(Arc::new(StaticSystemPrompt::blocks(vec![
            SystemContentBlock::Text("You are tau.".into()),
            SystemContentBlock::CachePoint(CachePoint::default()),
            SystemContentBlock::Text("## Now\n1970-01-01".into()),
        ])))
        .build();
    let end = agent
        .stream("Turn on the desk lamp")
        .finish()
        .await
        .unwrap();
    assert_eq!(end.stop_reason, StopReason::EndTurn);
    assert_eq!(end.model_calls, 2);

    let history = agent.messages();
    let uses: Vec<&ToolUse> = history[1].tool_uses().collect();
    assert_eq!(uses.len(), 1);
    assert_eq!(uses[0].tool_use_id, "toolu_01LampVector");
    assert_eq!(
        uses[0].input,
        json!({"action": "turn on the desk lamp", "note": "path C:\\lamp \"quoted\""})
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let second = requests[1].json();
    assert_eq!(
        second["system"],
        json!([
            {"type": "text", "text": "You are tau.",
             "cache_control": {"type": "ephemeral", "ttl": "1h"}},
            {"type": "text", "text": "## Now\n1970-01-01"}
        ])
    );
    assert_eq!(
        second["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Turn on the desk lamp"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking the lamp."},
                {"type": "tool_use", "id": "toolu_01LampVector", "name": "demo_physical_action",
                 "input": {"action": "turn on the desk lamp", "note": "path C:\\lamp \"quoted\""}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01LampVector", "is_error": true,
                 "content": [{"type": "text", "text":
                    "The user did not approve this action: demo_physical_action. Do not perform it; tell the user briefly."}],
                 "cache_control": {"type": "ephemeral", "ttl": "5m"}}
            ]}
        ])
    );
    let tools = second["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["current_time", "demo_physical_action"]);
    assert!(tools[0].get("cache_control").is_none());
    assert_eq!(
        tools[1]["cache_control"],
        json!({"type": "ephemeral", "ttl": "1h"})
    );
    assert_eq!(tools[1]["input_schema"]["type"], "object");
}

#[tokio::test]
async fn an_error_event_after_200_is_an_error_not_an_end() {
    let server = MockServer::start(vec![Reply::ok(SSE, ERROR_AFTER_200, &[100, 101, 502])]).await;
    let items = call(model(&server, 1).as_ref(), hello()).await;
    let last = items.last().unwrap();
    assert!(
        matches!(last, Err(ModelError::Unavailable(m)) if m.contains("overloaded_error")),
        "{last:?}"
    );
    assert!(
        !items
            .iter()
            .any(|i| matches!(i, Ok(ModelEvent::MessageStop { .. })))
    );
}

#[tokio::test]
async fn an_error_after_200_is_retried_and_the_partial_output_voided() {
    let server = MockServer::start(vec![
        Reply::ok(SSE, ERROR_AFTER_200, &[]),
        Reply::ok(SSE, TEXT_TURN, &[]),
    ])
    .await;
    let items = call(model(&server, 2).as_ref(), hello()).await;
    let throttled = items
        .iter()
        .position(|i| matches!(i, Ok(ModelEvent::Throttled { .. })))
        .expect("a Throttled event before the retry");
    assert!(
        matches!(items[throttled - 1], Ok(ModelEvent::OutputDiscarded)),
        "the partial reply is discarded before the wait: {items:?}"
    );
    assert!(
        items[..throttled]
            .iter()
            .any(|i| matches!(i, Ok(ModelEvent::TextDelta { text, .. }) if text == "Part"))
    );
    let done = assemble(&items).unwrap();
    assert_eq!(
        done.message.text(),
        "Merhaba! Saat 15:30, efendim. Çay ister misiniz? 🍵"
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn throttling_then_success_honours_the_retry_hint() {
    let rate_limited =
        r#"{"type":"error","error":{"type":"rate_limit_error","message":"Slow down"}}"#;
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let server = MockServer::start(vec![
        Reply::status(429, rate_limited).header("retry-after-ms", "7"),
        Reply::status(529, overloaded).header("retry-after", "0"),
        Reply::ok(SSE, TEXT_TURN, &[]),
    ])
    .await;
    let items = call(model(&server, 3).as_ref(), hello()).await;
    let waits: Vec<Duration> = items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::Throttled { delay }) => Some(*delay),
            _ => None,
        })
        .collect();
    assert_eq!(waits, vec![Duration::from_millis(7), Duration::ZERO]);
    assert_eq!(assemble(&items).unwrap().stop_reason, StopReason::EndTurn);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn exhausted_retries_report_the_throttle_and_a_bad_request_is_not_retried() {
    let rate_limited =
        r#"{"type":"error","error":{"type":"rate_limit_error","message":"Slow down"}}"#;
    let server = MockServer::start(vec![
        Reply::status(429, rate_limited),
        Reply::status(429, rate_limited),
    ])
    .await;
    let items = call(model(&server, 2).as_ref(), hello()).await;
    assert!(matches!(items.last(), Some(Err(ModelError::Throttled(m))) if m.contains("Slow down")));
    assert_eq!(server.requests().len(), 2);

    let invalid = r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too big"}}"#;
    let server = MockServer::start(vec![Reply::status(400, invalid)]).await;
    let items = call(model(&server, 5).as_ref(), hello()).await;
    assert!(matches!(&items[..], [Err(ModelError::Request(m))] if m.contains("max_tokens")));
    assert_eq!(server.requests().len(), 1);

    let too_long = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
    let server = MockServer::start(vec![Reply::status(400, too_long)]).await;
    let items = call(model(&server, 5).as_ref(), hello()).await;
    assert!(matches!(&items[..], [Err(ModelError::ContextOverflow(_))]));
}

#[tokio::test]
async fn a_body_cut_before_message_stop_is_retried_as_unavailable() {
    let cut = &TEXT_TURN[..TEXT_TURN.len() / 2];
    let server = MockServer::start(vec![Reply::ok(SSE, cut, &[]), Reply::ok(SSE, cut, &[])]).await;
    let items = call(model(&server, 2).as_ref(), hello()).await;
    assert!(
        matches!(items.last(), Some(Err(ModelError::Unavailable(m))) if m.contains("message_stop"))
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn exhausted_retries_fall_back_and_status_says_so() {
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let server = MockServer::start(vec![
        Reply::status(529, overloaded),
        Reply::status(529, overloaded),
    ])
    .await;
    let mut with_fallback = role(None);
    with_fallback.fallback = Some(FallbackConfig {
        provider: "fake".into(),
        model_id: "demo".into(),
        max_tokens: None,
    });
    let model = build_model_with("brain", &with_fallback, &env(&server), &options(2)).unwrap();
    assert!(!model.fallback_in_use());
    let items = call(model.as_ref(), hello()).await;
    let done = assemble(&items).unwrap();
    assert!(
        done.message.text().contains("demo"),
        "{}",
        done.message.text()
    );
    assert!(model.fallback_in_use());
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn a_missing_key_names_the_variable_and_builds_nothing() {
    let env = Env::new();
    let missing = check_credentials(&role(None), &env).unwrap_err();
    assert!(missing.to_string().contains("ANTHROPIC_API_KEY"));
    let Err(ProviderError::MissingCredentials { role, source }) =
        build_model("brain", &role(None), &env)
    else {
        panic!("expected MissingCredentials");
    };
    assert_eq!(role, "brain");
    assert_eq!(source, missing);

    let mut fallback_missing = RoleConfig {
        provider: "fake".into(),
        model_id: "demo".into(),
        max_tokens: 100,
        cache: None,
        fallback: None,
        tuning: Default::default(),
    };
    assert_eq!(check_credentials(&fallback_missing, &env), Ok(()));
    fallback_missing.fallback = Some(FallbackConfig {
        provider: "anthropic".into(),
        model_id: "claude-haiku-4-5".into(),
        max_tokens: None,
    });
    assert!(check_credentials(&fallback_missing, &env).is_err());
    let with_key: Env = [("ANTHROPIC_API_KEY", "k")].into_iter().collect();
    assert_eq!(check_credentials(&fallback_missing, &with_key), Ok(()));
}

#[test]
fn the_fake_provider_needs_nothing() {
    let fake = RoleConfig {
        provider: "fake".into(),
        model_id: "demo".into(),
        max_tokens: 100,
        cache: None,
        fallback: None,
        tuning: Default::default(),
    };
    let model = build_model("brain", &fake, &Env::new()).unwrap();
    assert!(!model.fallback_in_use());
    let unknown = RoleConfig {
        provider: "vllm".into(),
        ..fake
    };
    assert!(matches!(
        build_model("local", &unknown, &Env::new()),
        Err(ProviderError::UnknownProvider { provider, .. }) if provider == "vllm"
    ));
}

/// `[component.<name>]` tables from `tau.toml` text.
#[allow(clippy::unwrap_used)] // a test helper: bad TOML fails the test
fn component_settings(text: &str) -> std::collections::BTreeMap<String, toml::Table> {
    let table: toml::Table = toml::from_str(text).unwrap();
    table
        .into_iter()
        .map(|(k, v)| (k, v.as_table().cloned().unwrap()))
        .collect()
}

#[tokio::test]
async fn endpoints_from_tau_toml_win_over_the_environment() {
    let from_toml = MockServer::start(vec![Reply::ok(SSE, TEXT_TURN, &[])]).await;
    let from_env = MockServer::start(vec![Reply::ok(SSE, TEXT_TURN, &[])]).await;
    let settings = component_settings(&format!(
        "[anthropic]\nbase_url = \"{}/proxy\"\n",
        from_toml.url()
    ));
    let options = ProviderOptions {
        retry: Some(RetryPolicy::immediate(1)),
        ..ProviderOptions::from_component_settings(&settings).unwrap()
    };
    // The explicit environment names another server: tau.toml's base URL (with its path) wins.
    let model = build_model_with("brain", &role(None), &env(&from_env), &options).unwrap();
    let items = call(model.as_ref(), hello()).await;
    assert_eq!(assemble(&items).unwrap().stop_reason, StopReason::EndTurn);
    let sent = from_toml.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].target, "/proxy/v1/messages");
    assert!(from_env.requests().is_empty());

    // tau.toml names no base URL: ANTHROPIC_BASE_URL from the explicit environment is used.
    let settings = component_settings("[anthropic]\n[bedrock]\n");
    let options = ProviderOptions {
        retry: Some(RetryPolicy::immediate(1)),
        ..ProviderOptions::from_component_settings(&settings).unwrap()
    };
    let model = build_model_with("brain", &role(None), &env(&from_env), &options).unwrap();
    let items = call(model.as_ref(), hello()).await;
    assert_eq!(assemble(&items).unwrap().stop_reason, StopReason::EndTurn);
    let sent = from_env.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].target, "/v1/messages");
    assert_eq!(
        from_toml.requests().len(),
        1,
        "the first server is not asked again"
    );

    let settings = component_settings("[bedrock]\nendpoint_url = \"http://127.0.0.1:9\"\n");
    let options = ProviderOptions::from_component_settings(&settings).unwrap();
    assert_eq!(
        options.bedrock_endpoint_url.as_deref(),
        Some("http://127.0.0.1:9")
    );
    let bad = component_settings("[anthropic]\nbase_url = 3\n");
    assert!(matches!(
        ProviderOptions::from_component_settings(&bad),
        Err(ProviderError::Config(m)) if m.contains("component.anthropic.base_url")
    ));
}

#[tokio::test]
async fn the_agent_voids_the_primary_output_before_the_fallback_answers() {
    let server = MockServer::start(vec![Reply::ok(SSE, ERROR_AFTER_200, &[])]).await;
    let mut with_fallback = role(None);
    with_fallback.fallback = Some(FallbackConfig {
        provider: "fake".into(),
        model_id: "demo".into(),
        max_tokens: None,
    });
    let model = build_model_with("brain", &with_fallback, &env(&server), &options(1)).unwrap();
    let agent = TauAgent::builder(model.clone()).build();
    let events = agent.stream("hello there").collect_events().await;
    let discarded = events
        .iter()
        .position(|e| matches!(e, taud::agent::TurnEvent::OutputDiscarded))
        .expect("an OutputDiscarded event");
    let before: String = events[..discarded]
        .iter()
        .filter_map(|e| match e {
            taud::agent::TurnEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(before, "Partial answer that");
    let Some(taud::agent::TurnEvent::TurnEnd(end)) = events.last() else {
        panic!("no TurnEnd");
    };
    assert_eq!(end.stop_reason, StopReason::EndTurn);
    assert!(end.text.starts_with("Hello! I am tau's offline demo model"));
    let history = agent.messages();
    assert_eq!(history.len(), 2);
    assert!(!history[1].text().contains("Partial"));
    assert!(model.fallback_in_use());
}

#[tokio::test]
async fn a_tool_result_image_is_sent_as_a_base64_image_block() {
    let server = MockServer::start(vec![Reply::ok(SSE, TEXT_TURN, &[])]).await;
    let items = call(model(&server, 1).as_ref(), image_result()).await;
    assemble(&items).unwrap();
    let sent = server.requests()[0].json();
    assert_eq!(
        sent["messages"][2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_cam", "is_error": false, "content": [
                {"type": "text", "text": "one frame"},
                {"type": "image", "source":
                    {"type": "base64", "media_type": "image/png", "data": PIXEL_PNG}}
            ]}
        ]})
    );
}
