//! The OpenAI-compatible provider against a local mock server speaking Chat Completions:
//! recorded-shape SSE bodies split inside UTF-8 characters and fields, tool-call arguments spread
//! over many deltas, the exact request bodies, a tool turn through the agent with a tier-2
//! approval, every error path, retries, and the key rules.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use support::provider::{
    MockServer, PIXEL_PNG, Reply, assemble, awkward_cuts, call, hello, image_result,
};
use tau_api::config::{ModelTuning, RoleConfig, Temperature};
use tau_api::env::Env;
use taud::agent::{StaticSystemPrompt, StopReason, TauAgent};
use taud::gate::ApprovalOutcome;
use taud::message::SystemContentBlock;
use taud::model::{Model, ModelError, ModelEvent};
use taud::provider::{ProviderError, ProviderOptions, RetryPolicy, build_model_with};
use taud::testing::ScriptedApprover;
use taud::tool::builtin::{FixedClock, shipped_catalog};

const TEXT_TURN: &[u8] = include_bytes!("fixtures/providers/openai/text_turn.sse");
const TOOL_TURN: &[u8] = include_bytes!("fixtures/providers/openai/tool_turn.sse");
const ERROR_MID_STREAM: &[u8] = include_bytes!("fixtures/providers/openai/error_mid_stream.sse");
const SSE: &str = "text/event-stream";

fn role() -> RoleConfig {
    RoleConfig {
        provider: "openai".into(),
        model_id: "gpt-4.1".into(),
        max_tokens: 1024,
        cache: None,
        fallback: None,
        tuning: ModelTuning {
            temperature: Temperature::new(0.7),
            ..ModelTuning::default()
        },
    }
}

fn base(server: &MockServer) -> String {
    format!("{}/v1", server.url())
}

fn env(server: &MockServer) -> Env {
    let base = base(server);
    [
        ("OPENAI_API_KEY", "sk-openai-test"),
        ("OPENAI_BASE_URL", base.as_str()),
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
    match build_model_with("brain", &role(), &env(server), &options(attempts)) {
        Ok(model) => model,
        Err(error) => panic!("{error}"),
    }
}

#[tokio::test]
async fn a_text_turn_split_inside_characters_and_fields() {
    let server = MockServer::start(vec![Reply::ok(SSE, TEXT_TURN, &awkward_cuts(TEXT_TURN))]).await;
    let items = call(model(&server, 1).as_ref(), hello()).await;
    let done = assemble(&items).unwrap();
    assert_eq!(
        done.message.text(),
        "Merhaba! Saat 15:30, efendim. Çay ister misiniz? 🍵"
    );
    assert_eq!(done.stop_reason, StopReason::EndTurn);
    assert_eq!(done.usage.input_tokens, 176);
    assert_eq!(done.usage.cache_read_input_tokens, Some(1024));
    assert_eq!(done.usage.output_tokens, 21);
    assert_eq!(done.usage.total_tokens, 1221);
    assert!(
        items
            .iter()
            .any(|i| matches!(i, Ok(ModelEvent::ReasoningDelta { .. })))
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.target, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), Some("Bearer sk-openai-test"));
    assert_eq!(
        sent.json(),
        json!({
            "model": "gpt-4.1",
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": 1024,
            "temperature": 0.7,
            "messages": [{"role": "user", "content": "Merhaba"}]
        })
    );
}

#[tokio::test]
async fn a_tool_turn_with_a_tier_two_refusal_sends_the_results_back() {
    let server = MockServer::start(vec![
        Reply::ok(SSE, TOOL_TURN, &awkward_cuts(TOOL_TURN)),
        Reply::ok(SSE, TEXT_TURN, &[7, 300]),
    ])
    .await;
    let approver = Arc::new(ScriptedApprover::decisions([ApprovalOutcome::Rejected]));
    let clock = Arc::new(FixedClock::from(jiff::Timestamp::UNIX_EPOCH));
    let agent = TauAgent::builder(model(&server, 1))
        .catalog(shipped_catalog(clock, &[]).unwrap())
        .approver(approver.clone())
        .system_prompt(Arc::new(StaticSystemPrompt::blocks(vec![
            SystemContentBlock::Text("You are tau.".into()),
        ])))
        .build();
    let end = agent
        .stream("Time, then the kettle")
        .finish()
        .await
        .unwrap();
    assert_eq!(end.stop_reason, StopReason::EndTurn);
    assert_eq!(end.model_calls, 2);
    assert_eq!(approver.requests().len(), 1);

    let history = agent.messages();
    let uses: Vec<_> = history[1].tool_uses().collect();
    assert_eq!(uses.len(), 2);
    assert_eq!(uses[0].input, json!({"timezone": "Europe/İstanbul"}));
    assert_eq!(uses[1].input, json!({"action": "kettle on"}));

    let second = server.requests()[1].json();
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(
        messages[0],
        json!({"role": "system", "content": "You are tau."})
    );
    assert_eq!(
        messages[2],
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_Qm1x", "type": "function",
             "function": {"name": "current_time", "arguments": "{\"timezone\":\"Europe/İstanbul\"}"}},
            {"id": "call_Zr7p", "type": "function",
             "function": {"name": "demo_physical_action", "arguments": "{\"action\":\"kettle on\"}"}}
        ]})
    );
    assert_eq!(messages[3]["role"], "tool");
    assert_eq!(messages[3]["tool_call_id"], "call_Qm1x");
    assert_eq!(
        messages[4],
        json!({"role": "tool", "tool_call_id": "call_Zr7p", "content":
            "error: The user did not approve this action: demo_physical_action. Do not perform it; tell the user briefly."})
    );
    assert_eq!(messages.len(), 5);
    assert_eq!(
        second["tools"][1]["function"]["parameters"]["required"],
        json!(["action"])
    );
}

#[tokio::test]
async fn a_missing_model_and_an_overflow_are_not_retried() {
    let server = MockServer::start(vec![Reply::status(
        404,
        r#"{"error":{"message":"The model `gpt-9` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#,
    )])
    .await;
    let items = call(model(&server, 3).as_ref(), hello()).await;
    assert!(
        matches!(&items[..], [Err(ModelError::Request(m))] if m.contains("GET /models")),
        "{items:?}"
    );
    assert_eq!(server.requests().len(), 1);

    let server = MockServer::start(vec![Reply::status(
        400,
        r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
    )])
    .await;
    let items = call(model(&server, 3).as_ref(), hello()).await;
    assert!(
        matches!(&items[..], [Err(ModelError::ContextOverflow(_))]),
        "{items:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn throttling_is_retried_with_the_hint_and_reported_when_exhausted() {
    let limited = r#"{"error":{"message":"Rate limit reached for gpt-4.1","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#;
    let server = MockServer::start(vec![
        Reply::status(429, limited).header("retry-after", "0.004"),
        Reply::ok(SSE, TEXT_TURN, &[]),
    ])
    .await;
    let items = call(model(&server, 2).as_ref(), hello()).await;
    assert!(items.contains(&Ok(ModelEvent::Throttled {
        delay: Duration::from_millis(4)
    })));
    assert_eq!(assemble(&items).unwrap().stop_reason, StopReason::EndTurn);

    let server = MockServer::start(vec![
        Reply::status(429, limited),
        Reply::status(429, limited),
    ])
    .await;
    let items = call(model(&server, 2).as_ref(), hello()).await;
    assert!(
        matches!(items.last(), Some(Err(ModelError::Throttled(m))) if m.contains("Rate limit")),
        "{items:?}"
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_reply_cut_or_broken_mid_stream_is_retried_and_voided() {
    let cut = &TOOL_TURN[..TOOL_TURN.len() / 2];
    let server = MockServer::start(vec![
        Reply::ok(SSE, cut, &[11]),
        Reply::ok(SSE, ERROR_MID_STREAM, &[]),
        Reply::ok(SSE, TEXT_TURN, &[]),
    ])
    .await;
    let items = call(model(&server, 3).as_ref(), hello()).await;
    let discarded = items
        .iter()
        .filter(|i| matches!(i, Ok(ModelEvent::OutputDiscarded)))
        .count();
    assert_eq!(discarded, 2, "{items:?}");
    let done = assemble(&items).unwrap();
    assert!(done.message.tool_uses().next().is_none());
    assert!(done.message.text().starts_with("Merhaba!"));
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn malformed_data_fails_without_a_retry() {
    let body = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Mer\"}}]}\n\ndata: <html>502 Bad Gateway</html>\n\n";
    let server = MockServer::start(vec![Reply::ok(SSE, body, &[20])]).await;
    let items = call(model(&server, 3).as_ref(), hello()).await;
    assert!(
        matches!(items.last(), Some(Err(ModelError::Stream(m))) if m.contains("not JSON")),
        "{items:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn the_public_api_needs_a_key_and_a_local_server_none() {
    let error = build_model_with("brain", &role(), &Env::new(), &options(1))
        .err()
        .expect("no key for the public API");
    assert!(
        matches!(&error, ProviderError::MissingCredentials { source, .. } if source.variables == ["OPENAI_API_KEY"]),
        "{error}"
    );

    let server = MockServer::start(vec![Reply::ok(SSE, TEXT_TURN, &[])]).await;
    let table: toml::Table =
        toml::from_str(&format!("[openai]\nbase_url = \"{}\"\n", base(&server))).unwrap();
    let settings = table
        .into_iter()
        .map(|(k, v)| (k, v.as_table().cloned().unwrap()))
        .collect();
    let options = ProviderOptions {
        retry: Some(RetryPolicy::immediate(1)),
        ..ProviderOptions::from_component_settings(&settings).unwrap()
    };
    let model = build_model_with("brain", &role(), &Env::new(), &options).unwrap();
    let items = call(model.as_ref(), hello()).await;
    assert_eq!(assemble(&items).unwrap().stop_reason, StopReason::EndTurn);
    let sent = server.requests();
    assert_eq!(sent[0].header("authorization"), None);
    assert_eq!(sent[0].target, "/v1/chat/completions");
}

#[tokio::test]
async fn a_tool_result_image_follows_as_a_data_url_in_a_user_message() {
    let server = MockServer::start(vec![Reply::ok(SSE, TEXT_TURN, &[])]).await;
    let items = call(model(&server, 1).as_ref(), image_result()).await;
    assemble(&items).unwrap();
    let sent = server.requests()[0].json();
    let messages = sent["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4);
    assert_eq!(
        messages[2],
        json!({"role": "tool", "tool_call_id": "call_cam", "content":
            "one frame\n[image image/png of 8 bytes, attached in the next user message]"})
    );
    assert_eq!(
        messages[3],
        json!({"role": "user", "content": [
            {"type": "text", "text": "(images returned by the tool calls above)"},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PIXEL_PNG}")}}
        ]})
    );
}
