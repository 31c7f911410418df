//! A role's model tuning: `num_ctx`, `keep_alive` and `temperature` in `[models.roles.<role>]`,
//! read by the providers that have them (ollama reads all three, openai reads `temperature`; the
//! others ignore them).
//!
//! Invariants: a held value is valid for the wire as is: `num_ctx` is positive, `keep_alive` is
//! whole seconds or a Go duration such as `"30m"` / `"1h30m"` / `"-1"` (negative: keep the model
//! loaded), `temperature` is finite and within 0..=2.

use toml::Value;

use super::error::ConfigError;
use super::reader::Section;

/// `num_ctx`, `keep_alive` and `temperature` of a role; all optional.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelTuning {
    /// The context window the local server loads the model with (Ollama's default is small and
    /// silently truncates long conversations).
    pub num_ctx: Option<u32>,
    /// How long the local server keeps the model loaded after a call.
    pub keep_alive: Option<KeepAlive>,
    /// Sampling temperature.
    pub temperature: Option<Temperature>,
}

/// `keep_alive`: seconds, or a duration string as Ollama reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeepAlive {
    /// Whole seconds; negative keeps the model loaded.
    Seconds(i64),
    /// A duration such as `"30m"`, `"1h30m"`, `"-1"` (validated).
    Duration(String),
}

/// A sampling temperature in 0..=2 (never NaN, so equality is exact).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Temperature(f64);

impl Eq for Temperature {}

impl Temperature {
    /// `value` when it is finite and within 0..=2.
    pub fn new(value: f64) -> Option<Self> {
        (value.is_finite() && (0.0..=2.0).contains(&value)).then_some(Self(value))
    }

    /// The value.
    pub fn get(self) -> f64 {
        self.0
    }
}

/// Reads the tuning keys of a role table.
pub(crate) fn tuning_of(role: &Section<'_>) -> Result<ModelTuning, ConfigError> {
    let num_ctx = role.positive_u32("num_ctx")?;
    let keep_alive = match role.get("keep_alive") {
        None => None,
        Some(Value::Integer(i)) => Some(KeepAlive::Seconds(*i)),
        Some(Value::String(s)) if is_duration(s) => Some(KeepAlive::Duration(s.clone())),
        Some(v) => {
            return Err(role.invalid(
                "keep_alive",
                v,
                "whole seconds or a duration such as \"30m\", \"1h30m\" or \"-1\" (keep loaded)",
            ));
        }
    };
    let temperature = match role.get("temperature") {
        None => None,
        Some(v) => {
            let number = match v {
                Value::Float(f) => Some(*f),
                Value::Integer(i) => i32::try_from(*i).ok().map(f64::from),
                _ => None,
            };
            match number.and_then(Temperature::new) {
                Some(t) => Some(t),
                None => return Err(role.invalid("temperature", v, "a number from 0 to 2")),
            }
        }
    };
    Ok(ModelTuning {
        num_ctx,
        keep_alive,
        temperature,
    })
}

/// Whether `s` is an integer or a Go duration: `-`? then one or more `<number><unit>` with units
/// `ns`, `us`, `ms`, `s`, `m`, `h`.
fn is_duration(s: &str) -> bool {
    let body = s.strip_prefix('-').unwrap_or(s);
    if body.is_empty() {
        return false;
    }
    if body.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    let mut rest = body;
    while !rest.is_empty() {
        let digits = rest
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b'.')
            .count();
        if digits == 0 || rest[..digits].matches('.').count() > 1 {
            return false;
        }
        rest = &rest[digits..];
        let unit = ["ns", "us", "ms", "s", "m", "h"]
            .into_iter()
            .find(|u| rest.starts_with(u));
        match unit {
            Some(u) => rest = &rest[u.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_ollama_reads_them() {
        for ok in ["5m", "1h30m", "-1", "0", "90s", "1.5h", "-1m", "250ms"] {
            assert!(is_duration(ok), "{ok}");
        }
        for bad in ["", "-", "m", "5 m", "5d", "1h30", "1..5h", "forever"] {
            assert!(!is_duration(bad), "{bad}");
        }
    }

    #[test]
    fn temperatures_outside_zero_to_two_are_refused() {
        assert_eq!(Temperature::new(0.7).map(Temperature::get), Some(0.7));
        for bad in [-0.1, 2.01, f64::NAN, f64::INFINITY] {
            assert!(Temperature::new(bad).is_none(), "{bad}");
        }
    }
}
