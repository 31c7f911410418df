//! Model-visible names of MCP tools: `mcp__<server>__<tool>`, sanitised to `[A-Za-z0-9_-]`, at most
//! 64 characters, unique.
//!
//! Invariants: a name is a pure function of (server key, raw tool name) and of which other raw
//! names clash with it, so it is stable across restarts; a too-long or clashing name gets `_` and
//! 8 hex digits of a hash of the server key and the raw name. Routing never re-parses a name.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

/// Longest name the providers accept.
pub const MAX_NAME_LEN: usize = 64;

/// The model-visible names for `raw` tool names of `server`, in the same order.
pub fn model_names(server: &str, raw: &[&str]) -> Vec<String> {
    let bases: Vec<String> = raw.iter().map(|r| base_name(server, r)).collect();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for base in &bases {
        *counts.entry(base.as_str()).or_default() += 1;
    }
    raw.iter()
        .zip(&bases)
        .map(|(raw, base)| {
            if base.len() <= MAX_NAME_LEN && counts.get(base.as_str()) == Some(&1) {
                base.clone()
            } else {
                hashed(server, raw, base)
            }
        })
        .collect()
}

fn base_name(server: &str, raw: &str) -> String {
    let tool: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("mcp__{server}__{tool}")
}

fn hashed(server: &str, raw: &str, base: &str) -> String {
    let digest = Sha256::new()
        .chain_update(server.as_bytes())
        .chain_update([0u8])
        .chain_update(raw.as_bytes())
        .finalize();
    let suffix = hex::encode(&digest[..4]);
    let keep = MAX_NAME_LEN - 1 - suffix.len();
    let prefix: String = base.chars().take(keep).collect();
    format!("{prefix}_{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::is_valid_tool_name;

    #[test]
    fn names_are_prefixed_sanitised_short_and_unique() {
        let long = "x".repeat(80);
        let names = model_names("home", &["lamp", "a.b", "a_b", "ü", &long]);
        assert_eq!(names[0], "mcp__home__lamp");
        assert_ne!(names[1], names[2]);
        assert!(names[1].starts_with("mcp__home__a_b_"), "{}", names[1]);
        assert_eq!(names[3], "mcp__home___");
        assert_eq!(names[4].len(), MAX_NAME_LEN);
        for name in &names {
            assert!(is_valid_tool_name(name), "{name}");
        }
        // Stable.
        assert_eq!(
            names,
            model_names("home", &["lamp", "a.b", "a_b", "ü", &long])
        );
    }
}
