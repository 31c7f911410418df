//! Anthropic's stop reasons and errors → tau's stop reasons and retry decisions. See
//! ARCHITECTURE.md, `provider/`.
//!
//! Invariants: every `stop_reason` maps to a [`StopReason`] (unknown ones end the turn and are
//! logged) or, when the reply cannot be used (context window exceeded, a paused turn), to an
//! error; rate limits, overloads and 408/409/5xx are retryable, honouring the server's hint;
//! `x-should-retry` overrides the decision either way; a prompt too long is `ContextOverflow`.

use std::time::Duration;

use serde::Deserialize;

use crate::model::{ModelError, StopReason};
use crate::provider::reply_mapping::{
    error_text, quote_body, shared_stop_reason, unknown_stop_reason,
};
use crate::provider::retry::{Failure, RetryAdvice};

/// The stop reason for an API `stop_reason` string, or the error a reply ending so is.
///
/// `model_context_window_exceeded` is a context overflow (not the output limit), and `pause_turn`
/// (a long server-tool turn the API wants sent back to continue) cannot be resumed by tau, which
/// offers no server tools: both end the call as an error, never as a quiet or misleading stop.
pub fn stop_reason(value: &str) -> Result<StopReason, ModelError> {
    if let Some(shared) = shared_stop_reason(value) {
        return shared;
    }
    Ok(match value {
        "refusal" => StopReason::ContentFiltered,
        "pause_turn" => {
            return Err(ModelError::Incomplete(
                "the model paused a long server-tool turn (stop reason pause_turn), \
                 which tau does not resume"
                    .into(),
            ));
        }
        other => unknown_stop_reason("Anthropic", "stop reason", other),
    })
}

/// An API error body: `{"type":"error","error":{"type","message"}}`.
#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ApiError,
}

#[derive(Debug, Deserialize)]
struct ApiError {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

/// The failure for an API error of `kind` (an `error.type`), as an HTTP error or an `error` event.
pub fn api_failure(
    kind: &str,
    message: &str,
    status: Option<u16>,
    hint: Option<Duration>,
) -> Failure {
    let text = error_text(status, kind, message);
    let lowered = message.to_ascii_lowercase();
    match (kind, status) {
        ("rate_limit_error", _) | (_, Some(429)) => {
            Failure::retryable(ModelError::Throttled(text), hint)
        }
        ("overloaded_error" | "api_error" | "timeout_error", _) => {
            Failure::retryable(ModelError::Unavailable(text), hint)
        }
        (_, Some(408 | 409)) => Failure::retryable(ModelError::Unavailable(text), hint),
        (_, Some(s)) if s >= 500 => Failure::retryable(ModelError::Unavailable(text), hint),
        ("invalid_request_error", _)
            if lowered.contains("prompt is too long") || lowered.contains("context window") =>
        {
            Failure::fatal(ModelError::ContextOverflow(text))
        }
        _ => Failure::fatal(ModelError::Request(text)),
    }
}

/// The failure for a non-200 response; `should_retry` is the `x-should-retry` header.
pub fn http_failure(
    status: u16,
    body: &str,
    hint: Option<Duration>,
    should_retry: Option<bool>,
) -> Failure {
    let (kind, message) = match serde_json::from_str::<ErrorBody>(body) {
        Ok(parsed) => (parsed.error.kind, parsed.error.message),
        Err(_) => (String::new(), quote_body(body)),
    };
    let mut failure = api_failure(&kind, &message, Some(status), hint);
    match should_retry {
        Some(true) if failure.retry == RetryAdvice::Never => {
            failure = Failure::retryable(failure.error, hint);
        }
        Some(false) => failure = Failure::fatal(failure.error),
        _ => {}
    }
    failure
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stop_reason_maps() {
        for (wire, ours) in [
            ("end_turn", StopReason::EndTurn),
            ("tool_use", StopReason::ToolUse),
            ("max_tokens", StopReason::MaxTokens),
            ("stop_sequence", StopReason::StopSequence),
            ("refusal", StopReason::ContentFiltered),
            ("something_new", StopReason::EndTurn),
        ] {
            assert_eq!(stop_reason(wire), Ok(ours), "{wire}");
        }
        assert!(matches!(
            stop_reason("model_context_window_exceeded"),
            Err(ModelError::ContextOverflow(_))
        ));
        assert!(matches!(
            stop_reason("pause_turn"),
            Err(ModelError::Incomplete(_))
        ));
    }

    #[test]
    fn http_errors_are_classified() {
        let retryable = |status, body: &str| http_failure(status, body, None, None).retry;
        use RetryAdvice::{After, Never};
        assert_eq!(retryable(429, "{}"), After(None));
        assert_eq!(retryable(529, "not json"), After(None));
        assert_eq!(retryable(503, ""), After(None));
        assert_eq!(retryable(408, ""), After(None));
        assert_eq!(
            retryable(
                401,
                r#"{"type":"error","error":{"type":"authentication_error","message":"bad key"}}"#
            ),
            Never
        );
        assert_eq!(retryable(413, "<html>too large</html>"), Never);
        assert_eq!(http_failure(400, "", None, Some(true)).retry, After(None));
        assert_eq!(http_failure(500, "", None, Some(false)).retry, Never);
    }
}
