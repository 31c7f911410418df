//! Instants in `routines.json` as RFC 3339 text in UTC (`2026-12-24T15:00:00Z`), for
//! `#[serde(with = ...)]`. Invariant: what it writes it reads back to the same instant.

use jiff::Timestamp;
use serde::{Deserialize, Deserializer, Serializer};

pub fn serialize<S: Serializer>(instant: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(instant)
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
    let text = String::deserialize(d)?;
    text.parse().map_err(serde::de::Error::custom)
}

/// The same for an optional instant (`null` when absent).
pub mod optional {
    use jiff::Timestamp;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(instant: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
        match instant {
            Some(instant) => s.collect_str(instant),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
        match Option::<String>::deserialize(d)? {
            Some(text) => text.parse().map(Some).map_err(serde::de::Error::custom),
            None => Ok(None),
        }
    }
}
