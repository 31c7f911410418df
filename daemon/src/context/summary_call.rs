//! The summary model call shared by `/compact` and the `summarize` conversation window: a throwaway
//! call on the agent's own model over a copy of the history, with the English continuation prompt.
//!
//! Invariants:
//! - The live history is never touched: the request is built from a copy, and nothing is stored.
//! - The request carries no tools, and the copy carries no toolUse or toolResult blocks: tool calls
//!   and results are rendered as text (cut to [`TOOL_TEXT_MAX_CHARS`]), so no provider sees a
//!   dangling toolUse or a tool history without tool specs. Reasoning and cache points are dropped.
//! - The copy starts with a user message, alternates roles (neighbours with the same role are
//!   merged), has no empty message, and ends with the user instruction [`SUMMARY_INSTRUCTION`].
//! - Every call has a deadline ([`SummaryCall::timeout`]) and a cancellation token; on either the
//!   provider's call is cancelled too.
//! - An empty history, a failed or stopped call and an empty reply are [`CompactionError`]s.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::context::compaction_error::CompactionError;
use crate::message::{
    ContentBlock, Message, Role, SystemContentBlock, ToolResultContent, ToolResultStatus,
};
use crate::model::{Model, ModelError, ModelEvent, ModelRequest, StopReason, blank_text};

/// How long a summary call may take by default.
pub const DEFAULT_SUMMARY_TIMEOUT: Duration = Duration::from_secs(180);

/// The longest text a tool call's input or a tool result is rendered with, in characters.
pub const TOOL_TEXT_MAX_CHARS: usize = 2_000;

/// The system prompt of a summary call (English, whatever language the user writes in).
pub const CONTINUATION_PROMPT: &str = "\
You write a continuation summary of a conversation between a user and their personal assistant. \
The assistant will continue the conversation in a new session where this summary replaces every \
earlier message, so it must hold everything the assistant needs to carry on.

Include:
- Facts about the user: names, preferences, circumstances, and anything they asked to remember.
- Decisions that were made, and why.
- Open tasks, promises and unanswered questions.
- Tool results that still matter: values that were read, actions that were taken and their outcome.
- The language the user writes in, so the assistant keeps answering in it.

Leave out small talk and anything that no longer matters. Write compact notes in plain text. Do \
not answer the user, do not continue the conversation, and do not call tools: write only the \
summary.";

/// The last user message of a summary call.
pub const SUMMARY_INSTRUCTION: &str =
    "Write the continuation summary of the conversation above now.";

/// Put first when the copy starts with an assistant message (the providers need a user message
/// first).
const MIDDLE_START: &str = "(The conversation starts here; earlier messages are not shown.)";

/// The model, the cancellation and the deadline of a summary call.
#[derive(Clone)]
pub struct SummaryCall<'a> {
    /// The agent's own model.
    pub model: &'a dyn Model,
    /// Cancels the call (a `/compact` whose caller went away, a hub shutting down).
    pub cancel: CancellationToken,
    /// The deadline of the whole call, from opening the stream to its end.
    pub timeout: Duration,
}

impl<'a> SummaryCall<'a> {
    /// A call on `model` with [`DEFAULT_SUMMARY_TIMEOUT`].
    pub fn new(model: &'a dyn Model, cancel: CancellationToken) -> Self {
        Self {
            model,
            cancel,
            timeout: DEFAULT_SUMMARY_TIMEOUT,
        }
    }

    /// The same call with another deadline.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

impl std::fmt::Debug for SummaryCall<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SummaryCall")
            .field("model", &self.model.name())
            .field("cancelled", &self.cancel.is_cancelled())
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// The system prompt of a summary call: [`CONTINUATION_PROMPT`], plus `Focus on: <focus>` when a
/// non-blank focus is given.
pub fn summary_system_prompt(focus: Option<&str>) -> String {
    match focus.map(str::trim).filter(|f| !f.is_empty()) {
        Some(focus) => format!("{CONTINUATION_PROMPT}\n\nFocus on: {focus}"),
        None => CONTINUATION_PROMPT.to_owned(),
    }
}

/// The request a summary call sends: the system prompt, the history copy (see the module
/// invariants) and no tools. `EmptyHistory` when no message has anything to summarize.
pub fn summary_request(
    messages: &[Message],
    focus: Option<&str>,
) -> Result<ModelRequest, CompactionError> {
    let mut copy: Vec<Message> = Vec::with_capacity(messages.len() + 1);
    for message in messages {
        let content: Vec<ContentBlock> = message
            .content
            .iter()
            .filter_map(render_block)
            .map(ContentBlock::Text)
            .collect();
        if !content.is_empty() {
            push_merged(&mut copy, message.role, content);
        }
    }
    if copy.is_empty() {
        return Err(CompactionError::EmptyHistory);
    }
    if copy.first().is_some_and(|m| m.role == Role::Assistant) {
        copy.insert(0, Message::user_text(MIDDLE_START));
    }
    push_merged(
        &mut copy,
        Role::User,
        vec![ContentBlock::Text(SUMMARY_INSTRUCTION.to_owned())],
    );
    Ok(ModelRequest {
        system: vec![SystemContentBlock::Text(summary_system_prompt(focus))],
        messages: copy.into_iter().map(Arc::new).collect(),
        tools: Vec::new().into(),
    })
}

/// Appends `content` as a message of `role`, or to the last message when it has the same role.
fn push_merged(copy: &mut Vec<Message>, role: Role, content: Vec<ContentBlock>) {
    match copy.last_mut() {
        Some(last) if last.role == role => last.content.extend(content),
        _ => copy.push(Message {
            role,
            content,
            metadata: None,
        }),
    }
}

/// One block as the text the summary call sees, or `None` for what it does not need.
fn render_block(block: &ContentBlock) -> Option<String> {
    match block {
        ContentBlock::Text(text) if text.trim().is_empty() => None,
        ContentBlock::Text(text) => Some(text.clone()),
        ContentBlock::ToolUse(tool_use) => Some(format!(
            "[tool call {}: {}]",
            tool_use.name,
            cut(&tool_use.input.to_string())
        )),
        ContentBlock::ToolResult(result) => {
            let parts: Vec<String> = result
                .content
                .iter()
                .map(ToolResultContent::as_text)
                .collect();
            let status = match result.status {
                ToolResultStatus::Success => "success",
                ToolResultStatus::Error => "error",
            };
            Some(format!(
                "[tool result, {status}: {}]",
                cut(&parts.join("\n"))
            ))
        }
        ContentBlock::Image(image) => Some(image.note()),
        ContentBlock::ReasoningContent(_)
        | ContentBlock::CachePoint(_)
        | ContentBlock::Other(_) => None,
    }
}

/// `text` cut to [`TOOL_TEXT_MAX_CHARS`] characters, saying how much was left out.
fn cut(text: &str) -> String {
    let total = text.chars().count();
    if total <= TOOL_TEXT_MAX_CHARS {
        return text.to_owned();
    }
    let kept: String = text.chars().take(TOOL_TEXT_MAX_CHARS).collect();
    format!("{kept}… [{} characters cut]", total - TOOL_TEXT_MAX_CHARS)
}

/// Runs a summary call over a copy of `messages` and returns the summary text, trimmed.
///
/// Errors: `EmptyHistory` (nothing to summarize; the model is not called), `Model` (the call or
/// its stream failed), `Stopped` (content filter, guardrail), `Cancelled`, `TimedOut`,
/// `EmptyReply` (no text, or only blank text).
pub async fn summarize(
    call: &SummaryCall<'_>,
    messages: &[Message],
    focus: Option<&str>,
) -> Result<String, CompactionError> {
    let request = summary_request(messages, focus)?;
    if call.cancel.is_cancelled() {
        return Err(CompactionError::Cancelled);
    }
    // The provider gets its own token, so a deadline also stops it.
    let provider_cancel = call.cancel.child_token();
    let outcome = tokio::select! {
        biased;
        () = call.cancel.cancelled() => Err(CompactionError::Cancelled),
        timed = tokio::time::timeout(call.timeout, run(call.model, request, &provider_cancel)) => {
            timed.unwrap_or(Err(CompactionError::TimedOut(call.timeout)))
        }
    };
    provider_cancel.cancel();
    let text = outcome?;
    let text = text.trim();
    if text.is_empty() || text == blank_text() {
        return Err(CompactionError::EmptyReply);
    }
    Ok(text.to_owned())
}

/// Opens the stream and collects the reply's text blocks in index order.
async fn run(
    model: &dyn Model,
    request: ModelRequest,
    cancel: &CancellationToken,
) -> Result<String, CompactionError> {
    let mut stream = model
        .stream(request, cancel.clone())
        .await
        .map_err(CompactionError::Model)?;
    let mut texts: BTreeMap<u32, String> = BTreeMap::new();
    let mut stop_reason = None;
    while let Some(event) = stream.next().await {
        match event.map_err(CompactionError::Model)? {
            ModelEvent::TextDelta { index, text } => {
                texts.entry(index).or_default().push_str(&text);
            }
            ModelEvent::Throttled { .. } | ModelEvent::OutputDiscarded => texts.clear(),
            ModelEvent::MessageStop {
                stop_reason: reason,
            } => stop_reason = Some(reason),
            ModelEvent::ToolUseStart { .. }
            | ModelEvent::ToolUseInputDelta { .. }
            | ModelEvent::ReasoningDelta { .. }
            | ModelEvent::BlockStop { .. }
            | ModelEvent::Metadata { .. } => {}
        }
    }
    match stop_reason {
        None => Err(CompactionError::Model(ModelError::Stream(
            "the stream ended before the reply was complete".to_owned(),
        ))),
        Some(StopReason::EndTurn | StopReason::StopSequence | StopReason::ToolUse) => {
            Ok(texts.into_values().collect::<Vec<_>>().join("\n"))
        }
        Some(StopReason::MaxTokens) => {
            tracing::warn!(
                model = model.name(),
                "the summary reached the output token limit; keeping what was written"
            );
            Ok(texts.into_values().collect::<Vec<_>>().join("\n"))
        }
        Some(other) => Err(CompactionError::Stopped(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ReasoningContent, ReasoningText, ToolResult, ToolUse};
    use crate::testing::{FakeModel, FakeReply};
    use serde_json::json;

    fn call(model: &FakeModel) -> SummaryCall<'_> {
        SummaryCall::new(model, CancellationToken::new())
    }

    fn tool_exchange() -> Vec<Message> {
        vec![
            Message::user_text("Is the lamp on?"),
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::ReasoningContent(ReasoningContent {
                        reasoning_text: Some(ReasoningText {
                            text: "check it".into(),
                            signature: Some("sig".into()),
                        }),
                        redacted_content: None,
                    }),
                    ContentBlock::ToolUse(ToolUse {
                        tool_use_id: "t1".into(),
                        name: "lamp_state".into(),
                        input: json!({"room": "desk"}),
                    }),
                ],
                metadata: None,
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult(ToolResult::text(
                    "t1",
                    ToolResultStatus::Success,
                    "on",
                ))],
                metadata: None,
            },
            Message::assistant_text("The desk lamp is on."),
        ]
    }

    #[test]
    fn the_request_has_the_prompt_no_tools_and_no_tool_blocks() {
        let request = summary_request(&tool_exchange(), None).unwrap();
        assert!(request.tools.is_empty());
        assert_eq!(
            request.system,
            vec![SystemContentBlock::Text(CONTINUATION_PROMPT.to_owned())]
        );
        let texts: Vec<String> = request.messages.iter().map(|m| m.text()).collect();
        assert_eq!(
            texts,
            [
                "Is the lamp on?",
                "[tool call lamp_state: {\"room\":\"desk\"}]",
                "[tool result, success: on]",
                "The desk lamp is on.",
                SUMMARY_INSTRUCTION,
            ]
        );
        for message in &request.messages {
            assert!(
                message
                    .content
                    .iter()
                    .all(|b| matches!(b, ContentBlock::Text(t) if !t.trim().is_empty()))
            );
        }
    }

    #[test]
    fn the_copy_alternates_and_starts_and_ends_with_the_user() {
        let messages = vec![
            Message::assistant_text("Hello again."),
            Message::assistant_text("Anything else?"),
            Message::user_text("yes"),
            Message::user_text("the plants"),
        ];
        let request = summary_request(&messages, None).unwrap();
        let roles: Vec<Role> = request.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, vec![Role::User, Role::Assistant, Role::User]);
        assert_eq!(request.messages[0].text(), MIDDLE_START);
        assert_eq!(request.messages[1].text(), "Hello again.\nAnything else?");
        assert_eq!(
            request.messages[2].text(),
            format!("yes\nthe plants\n{SUMMARY_INSTRUCTION}")
        );
    }

    #[test]
    fn focus_is_appended_to_the_prompt() {
        let request = summary_request(&tool_exchange(), Some("  the garden  ")).unwrap();
        assert_eq!(
            SystemContentBlock::join(&request.system),
            format!("{CONTINUATION_PROMPT}\n\nFocus on: the garden")
        );
        assert_eq!(summary_system_prompt(Some(" ")), CONTINUATION_PROMPT);
    }

    #[test]
    fn the_prompt_asks_for_what_the_seed_lists() {
        for needle in [
            "Facts about the user",
            "Decisions",
            "Open tasks",
            "Tool results that still matter",
            "The language the user writes in",
        ] {
            assert!(CONTINUATION_PROMPT.contains(needle), "{needle}");
        }
    }

    #[test]
    fn long_tool_output_is_cut() {
        let messages = vec![
            Message::user_text("read it"),
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult(ToolResult::text(
                    "t",
                    ToolResultStatus::Error,
                    "x".repeat(TOOL_TEXT_MAX_CHARS + 5),
                ))],
                metadata: None,
            },
        ];
        let request = summary_request(&messages, None).unwrap();
        let text = request.messages[0].text();
        assert!(text.contains("[tool result, error: "));
        assert!(text.contains("… [5 characters cut]]"));
        assert_eq!(text.matches('x').count(), TOOL_TEXT_MAX_CHARS);
    }

    #[test]
    fn nothing_to_summarize_is_an_empty_history() {
        assert!(matches!(
            summary_request(&[], None),
            Err(CompactionError::EmptyHistory)
        ));
        let blank = vec![Message::user_text("  "), Message::assistant_text("")];
        assert!(matches!(
            summary_request(&blank, None),
            Err(CompactionError::EmptyHistory)
        ));
    }

    #[tokio::test]
    async fn summarize_returns_the_trimmed_reply_and_sends_the_request() {
        let model = FakeModel::scripted([FakeReply::deltas(["  The user ", "likes tea.\n"])]);
        let summary = summarize(&call(&model), &tool_exchange(), Some("drinks"))
            .await
            .unwrap();
        assert_eq!(summary, "The user likes tea.");
        let request = model.last_request().unwrap();
        assert_eq!(
            request,
            summary_request(&tool_exchange(), Some("drinks")).unwrap()
        );
        assert!(SystemContentBlock::join(&request.system).ends_with("Focus on: drinks"));
    }

    #[tokio::test]
    async fn an_empty_history_does_not_call_the_model() {
        let model = FakeModel::scripted([FakeReply::text("x")]);
        let err = summarize(&call(&model), &[], None).await.unwrap_err();
        assert!(matches!(err, CompactionError::EmptyHistory), "{err}");
        assert_eq!(model.call_count(), 0);
    }

    #[tokio::test]
    async fn failures_and_empty_replies_are_errors() {
        let history = tool_exchange();
        let model = FakeModel::scripted([
            FakeReply::error("boom"),
            FakeReply::text("partial").then_fail("reset"),
            FakeReply::text("   "),
            FakeReply::tool_call("lamp_state", json!({})),
            FakeReply::text("no").with_stop_reason(StopReason::ContentFiltered),
            FakeReply::text("kept").with_stop_reason(StopReason::MaxTokens),
        ]);
        let call = call(&model);
        let err = summarize(&call, &history, None).await.unwrap_err();
        assert!(matches!(err, CompactionError::Model(_)), "{err}");
        let err = summarize(&call, &history, None).await.unwrap_err();
        assert!(matches!(err, CompactionError::Model(_)), "{err}");
        let err = summarize(&call, &history, None).await.unwrap_err();
        assert!(matches!(err, CompactionError::EmptyReply), "{err}");
        let err = summarize(&call, &history, None).await.unwrap_err();
        assert!(matches!(err, CompactionError::EmptyReply), "{err}");
        let err = summarize(&call, &history, None).await.unwrap_err();
        assert!(
            matches!(err, CompactionError::Stopped(StopReason::ContentFiltered)),
            "{err}"
        );
        assert_eq!(summarize(&call, &history, None).await.unwrap(), "kept");
    }

    #[tokio::test]
    async fn a_throttled_attempt_is_forgotten() {
        let model = FakeModel::scripted([
            FakeReply::text("fresh").throttled_first(Duration::from_millis(1))
        ]);
        assert_eq!(
            summarize(&call(&model), &tool_exchange(), None)
                .await
                .unwrap(),
            "fresh"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_hanging_call_times_out() {
        let model = FakeModel::scripted([FakeReply::text("start").then_hang()]);
        let call = call(&model).with_timeout(Duration::from_secs(5));
        let err = summarize(&call, &tool_exchange(), None).await.unwrap_err();
        assert!(
            matches!(err, CompactionError::TimedOut(d) if d == Duration::from_secs(5)),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_cancel_stops_the_call() {
        let model = FakeModel::scripted([FakeReply::text("x")]);
        let call = call(&model);
        call.cancel.cancel();
        let err = summarize(&call, &tool_exchange(), None).await.unwrap_err();
        assert!(matches!(err, CompactionError::Cancelled), "{err}");
        assert_eq!(model.call_count(), 0);

        let model = FakeModel::scripted([FakeReply::text("start").then_hang()]);
        let call = SummaryCall::new(&model, CancellationToken::new());
        let history = tool_exchange();
        let (result, ()) = tokio::join!(summarize(&call, &history, None), async {
            while model.call_count() == 0 {
                tokio::task::yield_now().await;
            }
            call.cancel.cancel();
        });
        assert!(matches!(result, Err(CompactionError::Cancelled)));
    }
}
