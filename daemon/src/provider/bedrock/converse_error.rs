//! Bedrock's stop reasons and errors (HTTP responses and exception frames) → tau's stop reasons
//! and retry decisions. See ARCHITECTURE.md, `provider/`.
//!
//! Invariants: every `stopReason` maps to a [`StopReason`] (unknown ones end the turn and are
//! logged) or, when the reply cannot be used (context window exceeded, malformed output or tool
//! use), to an error; throttling → `Throttled`, server-side trouble → `Unavailable`, both
//! retryable; an exceeded service quota → `Throttled` that is never retried; validation →
//! `Request` or `ContextOverflow`; an error code matches in either case of its first letter.

use std::time::Duration;

use serde::Deserialize;

use crate::model::{ModelError, StopReason};
use crate::provider::lenient_json::Field;
use crate::provider::reply_mapping::{
    error_text, quote_body, shared_stop_reason, unknown_stop_reason,
};
use crate::provider::retry::Failure;

/// The stop reason for a Converse `stopReason`, or the error a reply ending so is.
///
/// `model_context_window_exceeded` is a context overflow (not the output limit);
/// `malformed_model_output` and `malformed_tool_use` are a reply that cannot be used: all three end
/// the call as an error, never as a quiet or misleading stop.
pub fn stop_reason(value: &str) -> Result<StopReason, ModelError> {
    if let Some(shared) = shared_stop_reason(value) {
        return shared;
    }
    Ok(match value {
        "guardrail_intervened" => StopReason::GuardrailIntervened,
        "content_filtered" => StopReason::ContentFiltered,
        "malformed_model_output" => {
            return Err(ModelError::MalformedOutput(
                "Bedrock reports malformed model output (stop reason malformed_model_output)"
                    .into(),
            ));
        }
        "malformed_tool_use" => {
            return Err(ModelError::MalformedOutput(
                "Bedrock reports a malformed tool call (stop reason malformed_tool_use)".into(),
            ));
        }
        other => unknown_stop_reason("Bedrock", "stop reason", other),
    })
}

/// The failure for a Bedrock error code (an exception type, either case of its first letter).
pub fn error_failure(
    code: &str,
    message: &str,
    status: Option<u16>,
    hint: Option<Duration>,
) -> Failure {
    let text = error_text(status, code, message);
    let mut chars = code.chars();
    let code = match chars.next() {
        Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
        None => String::new(),
    };
    let lowered = message.to_ascii_lowercase();
    match code.as_str() {
        "ThrottlingException"
        | "ThrottledException"
        | "TooManyRequestsException"
        | "ModelNotReadyException" => Failure::retryable(ModelError::Throttled(text), hint),
        // An account quota: retrying soon cannot help, so no retry; it still counts as a
        // throttle, so a configured fallback model answers instead.
        "ServiceQuotaExceededException" => Failure::fatal(ModelError::Throttled(text)),
        "InternalServerException"
        | "ServiceUnavailableException"
        | "ModelStreamErrorException"
        | "ModelTimeoutException"
        | "ModelErrorException" => Failure::retryable(ModelError::Unavailable(text), hint),
        "ValidationException"
            if lowered.contains("too long")
                || lowered.contains("too many tokens")
                || lowered.contains("context") =>
        {
            Failure::fatal(ModelError::ContextOverflow(text))
        }
        _ => match status {
            Some(429) => Failure::retryable(ModelError::Throttled(text), hint),
            Some(500 | 502 | 503 | 504) => Failure::retryable(ModelError::Unavailable(text), hint),
            _ => Failure::fatal(ModelError::Request(text)),
        },
    }
}

/// The failure for a non-200 response: the code from `x-amzn-ErrorType` (before the first `:`),
/// else the body's `__type` / `code`.
pub fn http_failure(
    status: u16,
    error_type: Option<&str>,
    body: &str,
    hint: Option<Duration>,
) -> Failure {
    let (code, message) = error_parts(error_type, body);
    error_failure(&code, &message, Some(status), hint)
}

/// An error response body. Of each pair of members, the first one present is read.
#[derive(Debug, Default, Deserialize)]
struct ErrorBody {
    #[serde(rename = "__type", default)]
    type_name: Field<String>,
    #[serde(default)]
    code: Field<String>,
    #[serde(default)]
    message: Field<String>,
    #[serde(rename = "Message", default)]
    capital_message: Field<String>,
}

/// `first` when it is present (a string or not), else `second`; as a string.
fn first_present(first: Field<String>, second: Field<String>) -> Option<String> {
    if first.is_present() {
        first.fit()
    } else {
        second.fit()
    }
}

/// The error code and message of a non-200 response: the code from `x-amzn-ErrorType` (before the
/// first `:`), else the body's `__type` / `code`; the body's `message`, else its first 300
/// characters.
pub fn error_parts(error_type: Option<&str>, body: &str) -> (String, String) {
    let parsed: ErrorBody = serde_json::from_str(body).unwrap_or_default();
    let from_body = first_present(parsed.type_name, parsed.code)
        .map(|t| t.rsplit('#').next().unwrap_or(&t).to_owned());
    let code = match error_type {
        Some(t) => t.split(':').next().unwrap_or(t).to_owned(),
        None => from_body.unwrap_or_default(),
    };
    let message =
        first_present(parsed.message, parsed.capital_message).unwrap_or_else(|| quote_body(body));
    (code, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::retry::RetryAdvice;

    #[test]
    fn errors_are_typed() {
        let f = http_failure(
            429,
            Some("ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"),
            r#"{"message":"Too many requests"}"#,
            None,
        );
        assert!(matches!(f.error, ModelError::Throttled(ref m) if m.contains("Too many requests")));
        let f = http_failure(
            400,
            None,
            r#"{"__type":"ValidationException","message":"Input is too long for requested model."}"#,
            None,
        );
        assert!(matches!(f.error, ModelError::ContextOverflow(_)));
        assert_eq!(f.retry, RetryAdvice::Never);
        let f = http_failure(
            403,
            Some("AccessDeniedException"),
            r#"{"message":"no"}"#,
            None,
        );
        assert!(matches!(f.error, ModelError::Request(_)));
        assert_eq!(f.retry, RetryAdvice::Never);
        let f = http_failure(503, None, "", None);
        assert!(matches!(f.error, ModelError::Unavailable(_)));
        let f = error_failure("modelStreamErrorException", "boom", None, None);
        assert!(matches!(f.error, ModelError::Unavailable(_)));
    }

    #[test]
    fn an_exceeded_service_quota_is_not_retried() {
        let f = http_failure(
            400,
            Some(
                "ServiceQuotaExceededException:http://internal.amazon.com/coral/com.amazon.bedrock/",
            ),
            r#"{"message":"Your request exceeds the service quota for your account."}"#,
            Some(Duration::from_secs(1)),
        );
        assert_eq!(f.retry, RetryAdvice::Never);
        assert!(
            matches!(f.error, ModelError::Throttled(ref m) if m.contains("service quota")),
            "{f:?}"
        );
        let f = error_failure("serviceQuotaExceededException", "quota", None, None);
        assert_eq!(f.retry, RetryAdvice::Never);
        // Real throttling is still retried.
        let f = error_failure("ThrottlingException", "Too many tokens", None, None);
        assert_eq!(f.retry, RetryAdvice::After(None));
    }

    #[test]
    fn error_bodies_are_read_member_by_member() {
        let parts = |body: &str| error_parts(None, body);
        assert_eq!(
            parts(r##"{"__type":"com.amazon#ValidationException","Message":"m"}"##),
            ("ValidationException".into(), "m".into())
        );
        assert_eq!(
            parts(r#"{"code":"Busy","message":5,"Message":"ignored"}"#),
            (
                "Busy".into(),
                r#"{"code":"Busy","message":5,"Message":"ignored"}"#.into()
            )
        );
        assert_eq!(
            parts(r#"{"__type":7,"code":"ignored"}"#).0,
            "",
            "a present __type wins even when it is not a string"
        );
        assert_eq!(parts("[1]"), (String::new(), "[1]".into()));
    }
}
