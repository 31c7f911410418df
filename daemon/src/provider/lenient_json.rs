//! Tolerant typed reading of provider JSON: the typed events of the Anthropic and Bedrock streams
//! (and Bedrock's error bodies) read a known field of an unexpected shape as absent (or empty),
//! the way a lookup in untyped JSON would, so only text that is not JSON is an error. See
//! ARCHITECTURE.md, `provider/`.
//!
//! Invariants: unknown fields are ignored (no type here denies them); a field of the wrong shape
//! never fails the record it is in; [`parse`] fails only on text that is not JSON, and its error
//! is the JSON parser's own message for that text.

use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer, IgnoredAny};

/// A field that may be absent, of the expected shape, or present with another shape (`null`
/// included). Use it with `#[serde(default)]` where presence alone matters.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Field<T> {
    #[default]
    Absent,
    Fit(T),
    Mismatch,
}

impl<T> Field<T> {
    /// The value when it has the expected shape.
    pub fn fit(self) -> Option<T> {
        match self {
            Field::Fit(value) => Some(value),
            Field::Absent | Field::Mismatch => None,
        }
    }

    /// Whether the field is there at all.
    pub fn is_present(&self) -> bool {
        !matches!(self, Field::Absent)
    }
}

/// What a present field holds: the expected shape, else anything.
#[derive(Deserialize)]
#[serde(untagged)]
enum Shape<T> {
    Fit(T),
    Other(IgnoredAny),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match Shape::deserialize(deserializer)? {
            Shape::Fit(value) => Field::Fit(value),
            Shape::Other(_) => Field::Mismatch,
        })
    }
}

/// For `#[serde(default, deserialize_with = "fit")]`: the value when it has the expected shape,
/// else `None`.
pub fn fit<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Field::deserialize(deserializer)?.fit())
}

/// For `#[serde(default, deserialize_with = "or_default")]`: the value when it has the expected
/// shape, else its default (an empty string for a string).
pub fn or_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Field::deserialize(deserializer)?.fit().unwrap_or_default())
}

/// Reads `bytes` as a `T`; JSON of another shape (not an object, a field given twice) is
/// `otherwise()`. Only text that is not JSON fails.
pub fn parse<T: DeserializeOwned>(
    bytes: &[u8],
    otherwise: impl FnOnce() -> T,
) -> Result<T, serde_json::Error> {
    match serde_json::from_slice(bytes) {
        Ok(value) => Ok(value),
        // A shape error can come before a syntax error further on; read the text again to know.
        Err(_) => serde_json::from_slice::<IgnoredAny>(bytes).map(|_| otherwise()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    struct Probe {
        #[serde(default, deserialize_with = "or_default")]
        text: String,
        #[serde(default, deserialize_with = "fit")]
        count: Option<u64>,
        #[serde(default)]
        marker: Field<String>,
    }

    #[test]
    fn wrong_shapes_read_as_absent_and_only_non_json_fails() {
        let read = |text: &str| parse::<Probe>(text.as_bytes(), Probe::default);
        let probe = read(r#"{"text":5,"count":"x","marker":null,"extra":[1]}"#).unwrap();
        assert_eq!(probe.text, "");
        assert_eq!(probe.count, None);
        assert_eq!(probe.marker, Field::Mismatch);
        assert!(probe.marker.is_present());
        let probe = read(r#"{"text":"hi","count":-1}"#).unwrap();
        assert_eq!((probe.text.as_str(), probe.count), ("hi", None));
        assert_eq!(probe.marker, Field::Absent);
        assert_eq!(read(r#"{"count":7}"#).unwrap().count, Some(7));
        assert_eq!(read("42").unwrap(), Probe::default());
        let error = read(r#"{"text":5, oops"#).unwrap_err();
        let plain = serde_json::from_str::<serde_json::Value>(r#"{"text":5, oops"#).unwrap_err();
        assert_eq!(error.to_string(), plain.to_string());
    }
}
