//! Errors of the OpenAI-compatible family (`openai`, and `ollama`, whose native API answers with
//! the same status codes): an HTTP status or an in-stream error message → a retry decision.
//!
//! Invariants: 429 (except an exhausted quota), 408, 409 and 5xx are retryable, honouring the
//! server's hint; a missing model is a fatal request error that says how to get the model (for
//! Ollama: `ollama pull <model>`); a prompt longer than the context window is `ContextOverflow`;
//! an error body is read whether it is Ollama's `{"error":"…"}` or OpenAI's
//! `{"error":{"message","type","code"}}`, and otherwise quoted (cut to 300 characters); an error
//! that arrives inside a 200 stream is retryable unless it names a missing model or an overflow.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::reply_mapping::{error_text, quote_body};
use super::retry::Failure;
use crate::model::ModelError;

/// Which server answered, for the hints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Ollama's native API: a missing model can be pulled.
    Ollama,
    /// An OpenAI-compatible server.
    OpenAi,
}

/// An error body in either shape.
#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ErrorField,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ErrorField {
    /// Ollama: `{"error": "model \"x\" not found, try pulling it first"}`.
    Text(String),
    /// OpenAI: `{"error": {"message": "…", "type": "…", "code": "…"}}`.
    Object(ApiError),
}

/// OpenAI's error object, in an error body or in a stream's error record.
#[derive(Debug, Deserialize)]
pub struct ApiError {
    #[serde(default)]
    pub message: String,
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub code: Option<Value>,
}

impl ApiError {
    /// The message and the code (a string or a number; `type` when there is no code).
    pub fn message_and_code(self) -> (String, String) {
        let code = match self.code {
            Some(Value::String(code)) => code,
            Some(Value::Number(n)) => n.to_string(),
            _ => self.kind.unwrap_or_default(),
        };
        (self.message, code)
    }
}

/// The message and code (`type` when there is no code) of an error body; unreadable bodies are
/// quoted.
pub fn parse_error_body(body: &str) -> (String, String) {
    match serde_json::from_str::<ErrorBody>(body) {
        Ok(ErrorBody {
            error: ErrorField::Text(message),
        }) => (message, String::new()),
        Ok(ErrorBody {
            error: ErrorField::Object(error),
        }) => error.message_and_code(),
        Err(_) => (quote_body(body.trim()), String::new()),
    }
}

fn mentions_context_overflow(message: &str, code: &str) -> bool {
    let m = message.to_ascii_lowercase();
    code == "context_length_exceeded"
        || m.contains("context length")
        || m.contains("context window")
        || m.contains("context size")
        || m.contains("maximum context")
        || m.contains("prompt is too long")
}

fn mentions_missing_model(message: &str, code: &str) -> bool {
    let m = message.to_ascii_lowercase();
    code == "model_not_found"
        || (m.contains("model") && (m.contains("not found") || m.contains("does not exist")))
}

/// The hint for a missing `model_id`.
pub fn pull_hint(family: Family, model_id: &str) -> String {
    match family {
        Family::Ollama => format!(
            "the Ollama server has no model '{model_id}'; pull it with `ollama pull {model_id}` \
             (or set the role's model_id to one `ollama list` shows)"
        ),
        Family::OpenAi => format!(
            "the server has no model '{model_id}'; set the role's model_id to one its \
             GET /models lists"
        ),
    }
}

/// The failure for an error: an HTTP `status` (None for an error inside a 200 stream) with the
/// server's `message` and `code`.
pub fn failure(
    family: Family,
    model_id: &str,
    status: Option<u16>,
    message: &str,
    code: &str,
    hint: Option<Duration>,
) -> Failure {
    let text = match (status, code.is_empty()) {
        (Some(status), true) => format!("HTTP {status}: {message}"),
        (None, true) => message.to_owned(),
        (status, false) => error_text(status, code, message),
    };
    if mentions_missing_model(message, code) || status == Some(404) {
        let hint = pull_hint(family, model_id);
        return Failure::fatal(ModelError::Request(format!("{text} ({hint})")));
    }
    if mentions_context_overflow(message, code) {
        return Failure::fatal(ModelError::ContextOverflow(text));
    }
    match status {
        Some(429) if code == "insufficient_quota" => Failure::fatal(ModelError::Request(text)),
        Some(429) => Failure::retryable(ModelError::Throttled(text), hint),
        Some(408 | 409) => Failure::retryable(ModelError::Unavailable(text), hint),
        Some(s) if s >= 500 => Failure::retryable(ModelError::Unavailable(text), hint),
        Some(401 | 403) => Failure::fatal(ModelError::Request(format!(
            "{text} (check OPENAI_API_KEY for this endpoint)"
        ))),
        Some(_) => Failure::fatal(ModelError::Request(text)),
        None => Failure::retryable(ModelError::Unavailable(text), None),
    }
}

/// The failure for a non-2xx response with `body`.
pub fn http_failure(
    family: Family,
    model_id: &str,
    status: u16,
    body: &str,
    hint: Option<Duration>,
) -> Failure {
    let (message, code) = parse_error_body(body);
    failure(family, model_id, Some(status), &message, &code, hint)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::retry::RetryAdvice;

    #[test]
    fn every_status_maps_to_the_right_decision() {
        let ollama_404 = http_failure(
            Family::Ollama,
            "qwen3:8b",
            404,
            r#"{"error":"model \"qwen3:8b\" not found, try pulling it first"}"#,
            None,
        );
        assert_eq!(ollama_404.retry, RetryAdvice::Never);
        assert!(
            matches!(&ollama_404.error, ModelError::Request(m) if m.contains("ollama pull qwen3:8b")),
            "{ollama_404:?}"
        );
        let overflow = http_failure(
            Family::OpenAi,
            "gpt-4.1",
            400,
            r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
            None,
        );
        assert!(matches!(overflow.error, ModelError::ContextOverflow(_)));
        let wait = Some(Duration::from_secs(2));
        let throttled = http_failure(Family::OpenAi, "m", 429, "{}", wait);
        assert_eq!(throttled.retry, RetryAdvice::After(wait));
        assert!(matches!(throttled.error, ModelError::Throttled(_)));
        let quota = http_failure(
            Family::OpenAi,
            "m",
            429,
            r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#,
            None,
        );
        assert_eq!(quota.retry, RetryAdvice::Never);
        let busy = http_failure(Family::Ollama, "m", 503, "server busy", None);
        assert!(matches!(busy.error, ModelError::Unavailable(m) if m.contains("server busy")));
        let bad = http_failure(Family::OpenAi, "m", 400, "<html>nope</html>", None);
        assert_eq!(bad.retry, RetryAdvice::Never);
        let key = http_failure(Family::OpenAi, "m", 401, "{}", None);
        assert!(matches!(key.error, ModelError::Request(m) if m.contains("OPENAI_API_KEY")));
    }
}
