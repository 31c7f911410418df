//! The Ollama provider against a local mock server speaking `/api/chat`: recorded-shape NDJSON
//! bodies split at awkward points (inside characters, keys and line ends), the exact request
//! bodies with the role's tuning, a tool turn through the agent with a tier-2 approval, every
//! error path, retries, and a cloud role falling back to the local one.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use support::provider::{
    MockServer, PIXEL_PNG, Reply, assemble, awkward_cuts, call, hello, image_result,
};
use tau_api::config::{FallbackConfig, KeepAlive, ModelTuning, RoleConfig, Temperature};
use tau_api::env::Env;
use taud::agent::{StaticSystemPrompt, StopReason, TauAgent};
use taud::gate::ApprovalOutcome;
use taud::message::SystemContentBlock;
use taud::model::{Model, ModelError, ModelEvent, ReasoningDelta};
use taud::provider::{ProviderOptions, RetryPolicy, build_model_with};
use taud::testing::ScriptedApprover;
use taud::tool::builtin::{FixedClock, shipped_catalog};

const TEXT_TURN: &[u8] = include_bytes!("fixtures/providers/ollama/text_turn.ndjson");
const TOOL_TURN: &[u8] = include_bytes!("fixtures/providers/ollama/tool_turn.ndjson");
const ERROR_MID_STREAM: &[u8] = include_bytes!("fixtures/providers/ollama/error_mid_stream.ndjson");
const NDJSON: &str = "application/x-ndjson";

fn role() -> RoleConfig {
    RoleConfig {
        provider: "ollama".into(),
        model_id: "qwen3:8b".into(),
        max_tokens: 1024,
        cache: None,
        fallback: None,
        tuning: ModelTuning {
            num_ctx: Some(32768),
            keep_alive: Some(KeepAlive::Duration("30m".into())),
            temperature: Temperature::new(0.2),
        },
    }
}

fn env(server: &MockServer) -> Env {
    [("OLLAMA_HOST", server.url().as_str())]
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
    match build_model_with("local", &role(), &env(server), &options(attempts)) {
        Ok(model) => model,
        Err(error) => panic!("{error}"),
    }
}

/// Cuts inside multi-byte characters, right before and after every line end, and inside keys.
fn ndjson_cuts(body: &[u8]) -> Vec<usize> {
    let mut cuts = awkward_cuts(body);
    for (i, b) in body.iter().enumerate() {
        if *b == b'\n' {
            cuts.extend([i, i + 1]);
        }
    }
    let text = String::from_utf8_lossy(body);
    for key in ["\"done\"", "\"content\"", "\"tool_calls\""] {
        cuts.extend(text.match_indices(key).map(|(i, _)| i + 3));
    }
    cuts
}

#[tokio::test]
async fn a_text_turn_split_at_odd_places_with_thinking_and_usage() {
    let server =
        MockServer::start(vec![Reply::ok(NDJSON, TEXT_TURN, &ndjson_cuts(TEXT_TURN))]).await;
    let items = call(model(&server, 1).as_ref(), hello()).await;
    let reasoning: String = items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::ReasoningDelta {
                delta: ReasoningDelta::Text(t),
                ..
            }) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning, "The user greets me in Turkish.");
    let done = assemble(&items).unwrap();
    assert_eq!(
        done.message.text(),
        "Merhaba! Saat 15:30, efendim. Çay ister misiniz? 🍵"
    );
    assert_eq!(done.stop_reason, StopReason::EndTurn);
    assert_eq!(
        (done.usage.input_tokens, done.usage.output_tokens),
        (26, 282)
    );
    assert_eq!(done.usage.total_tokens, 308);

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.target, "/api/chat");
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(
        sent.json(),
        json!({
            "model": "qwen3:8b",
            "stream": true,
            "keep_alive": "30m",
            "options": {"num_predict": 1024, "num_ctx": 32768, "temperature": 0.2},
            "messages": [{"role": "user", "content": "Merhaba"}]
        })
    );
}

#[tokio::test]
async fn a_tool_turn_with_a_tier_two_approval_sends_the_results_back() {
    let server = MockServer::start(vec![
        Reply::ok(NDJSON, TOOL_TURN, &ndjson_cuts(TOOL_TURN)),
        Reply::ok(NDJSON, TEXT_TURN, &[5, 200]),
    ])
    .await;
    let approver = Arc::new(ScriptedApprover::decisions([ApprovalOutcome::Approved]));
    let clock = Arc::new(FixedClock::from(jiff::Timestamp::UNIX_EPOCH));
    let agent = TauAgent::builder(model(&server, 1))
        .catalog(shipped_catalog(clock, &[]).unwrap())
        .approver(approver.clone())
        .system_prompt(Arc::new(StaticSystemPrompt::blocks(vec![
            SystemContentBlock::Text("You are tau.".into()),
            SystemContentBlock::Text("## Now\n1970-01-01".into()),
        ])))
        .build();
    let end = agent
        .stream("Time, then the kettle")
        .finish()
        .await
        .unwrap();
    assert_eq!(end.stop_reason, StopReason::EndTurn);
    assert_eq!(end.model_calls, 2);
    assert_eq!(approver.requests().len(), 1, "the tier-2 call asked once");
    assert_eq!(approver.remaining(), 0);

    let history = agent.messages();
    let ids: Vec<&str> = history[1]
        .tool_uses()
        .map(|u| u.tool_use_id.as_str())
        .collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0], "call_k3v9x2q1");
    assert!(ids[1].starts_with("call_") && ids[1] != ids[0], "{ids:?}");
    let results: Vec<_> = history[2].tool_results().collect();
    assert_eq!(results.len(), 2);
    assert!(
        results
            .iter()
            .all(|r| r.status == taud::message::ToolResultStatus::Success),
        "{results:?}"
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let second = requests[1].json();
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(
        messages[0],
        json!({"role": "system", "content": "You are tau.\n## Now\n1970-01-01"})
    );
    assert_eq!(
        messages[1],
        json!({"role": "user", "content": "Time, then the kettle"})
    );
    assert_eq!(messages[2]["role"], "assistant");
    assert_eq!(messages[2]["thinking"], "I should check the clock.");
    assert_eq!(
        messages[2]["tool_calls"][0],
        json!({"id": "call_k3v9x2q1", "function": {
            "name": "current_time", "arguments": {"timezone": "Europe/İstanbul"}}})
    );
    assert_eq!(
        messages[2]["tool_calls"][1]["function"]["arguments"],
        json!({"action": "kettle on"})
    );
    assert_eq!(messages[3]["role"], "tool");
    assert_eq!(messages[3]["tool_name"], "current_time");
    assert_eq!(messages[3]["tool_call_id"], "call_k3v9x2q1");
    assert_eq!(messages[4]["role"], "tool");
    assert_eq!(messages[4]["tool_name"], "demo_physical_action");
    assert_eq!(messages.len(), 5, "no empty user message after the results");
    let tools: Vec<&str> = second["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["current_time", "demo_physical_action"]);
}

#[tokio::test]
async fn a_missing_model_is_not_retried_and_says_how_to_pull_it() {
    let server = MockServer::start(vec![Reply::status(
        404,
        r#"{"error":"model \"qwen3:8b\" not found, try pulling it first"}"#,
    )])
    .await;
    let items = call(model(&server, 3).as_ref(), hello()).await;
    assert!(
        matches!(&items[..], [Err(ModelError::Request(m))] if m.contains("`ollama pull qwen3:8b`")),
        "{items:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_context_overflow_is_reported_as_one() {
    let server = MockServer::start(vec![Reply::status(
        400,
        r#"{"error":"the input length exceeds the context length"}"#,
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
async fn busy_and_throttled_servers_are_retried_with_their_hint() {
    let server = MockServer::start(vec![
        Reply::status(429, r#"{"error":"too many requests"}"#).header("retry-after", "0.005"),
        Reply::status(
            503,
            r#"{"error":"server busy, please try again. maximum pending requests exceeded"}"#,
        ),
        Reply::ok(NDJSON, TEXT_TURN, &[]),
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
    assert_eq!(waits, [Duration::from_millis(5), Duration::ZERO]);
    assert_eq!(assemble(&items).unwrap().stop_reason, StopReason::EndTurn);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_reply_cut_mid_stream_is_retried_and_its_output_voided() {
    let cut = &TEXT_TURN[..TEXT_TURN.len() * 2 / 3];
    let server = MockServer::start(vec![
        Reply::ok(NDJSON, cut, &[9]),
        Reply::ok(NDJSON, ERROR_MID_STREAM, &[]),
        Reply::ok(NDJSON, TEXT_TURN, &[]),
    ])
    .await;
    let items = call(model(&server, 3).as_ref(), hello()).await;
    let discarded = items
        .iter()
        .filter(|i| matches!(i, Ok(ModelEvent::OutputDiscarded)))
        .count();
    assert_eq!(discarded, 2, "{items:?}");
    let done = assemble(&items).unwrap();
    assert_eq!(
        done.message.text(),
        "Merhaba! Saat 15:30, efendim. Çay ister misiniz? 🍵"
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_malformed_line_fails_the_call_without_a_retry() {
    let body = b"{\"message\":{\"role\":\"assistant\",\"content\":\"Mer\"},\"done\":false}\n<html>502</html>\n";
    let server = MockServer::start(vec![Reply::ok(NDJSON, body, &[4])]).await;
    let items = call(model(&server, 3).as_ref(), hello()).await;
    assert!(
        matches!(items.last(), Some(Err(ModelError::Stream(m))) if m.contains("not JSON")),
        "{items:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_cloud_role_falls_back_to_the_local_model() {
    let cloud = MockServer::start(vec![Reply::status(
        529,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    )])
    .await;
    let local = MockServer::start(vec![Reply::ok(NDJSON, TEXT_TURN, &[])]).await;
    let role = RoleConfig {
        provider: "anthropic".into(),
        model_id: "claude-sonnet-4-5".into(),
        fallback: Some(FallbackConfig {
            provider: "ollama".into(),
            model_id: "qwen3:8b".into(),
            max_tokens: Some(512),
        }),
        ..role()
    };
    let env: Env = [
        ("ANTHROPIC_API_KEY", "sk-test"),
        ("ANTHROPIC_BASE_URL", cloud.url().as_str()),
    ]
    .into_iter()
    .collect();
    let options = ProviderOptions {
        ollama_base_url: Some(local.url()),
        ..options(1)
    };
    let model = build_model_with("brain", &role, &env, &options).unwrap();
    let items = call(model.as_ref(), hello()).await;
    let done = assemble(&items).unwrap();
    assert!(done.message.text().starts_with("Merhaba!"));
    assert!(model.fallback_in_use());
    let sent = local.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].json()["options"]["num_predict"], 512);
}

#[test]
fn tau_toml_names_the_endpoint_and_no_credentials_are_needed() {
    let table: toml::Table = toml::from_str(
        "[ollama]\nbase_url = \"http://127.0.0.1:9/\"\n[openai]\nbase_url = \"ftp://x\"\n",
    )
    .unwrap();
    let settings: std::collections::BTreeMap<String, toml::Table> = table
        .into_iter()
        .map(|(k, v)| (k, v.as_table().cloned().unwrap()))
        .collect();
    let error = ProviderOptions::from_component_settings(&settings).unwrap_err();
    assert_eq!(
        error.to_string(),
        "component.openai.base_url: expected an http:// or https:// URL"
    );
    let mut settings = settings;
    settings.remove("openai");
    let options = ProviderOptions::from_component_settings(&settings).unwrap();
    assert_eq!(
        options.ollama_base_url.as_deref(),
        Some("http://127.0.0.1:9/")
    );
    assert!(build_model_with("local", &role(), &Env::new(), &options).is_ok());
}

#[tokio::test]
async fn a_tool_result_image_rides_on_the_user_message_after_the_tool_message() {
    let server = MockServer::start(vec![Reply::ok(NDJSON, TEXT_TURN, &[])]).await;
    let items = call(model(&server, 1).as_ref(), image_result()).await;
    assemble(&items).unwrap();
    let sent = server.requests()[0].json();
    let messages = sent["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4);
    assert_eq!(
        messages[2],
        json!({"role": "tool", "tool_name": "camera", "tool_call_id": "call_cam", "content":
            "one frame\n[image image/png of 8 bytes, attached in the next user message]"})
    );
    assert_eq!(
        messages[3],
        json!({"role": "user", "content": "(images returned by the tool calls above)",
               "images": [PIXEL_PNG]})
    );
}
