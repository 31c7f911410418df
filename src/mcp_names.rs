//! The names the model sees for MCP tools: the rule, stated here once and used by `taud` (which
//! offers the tools) and `tau` (`tau mcp list`, `tau components`, also with no hub running).
//!
//! The tool `raw` of the server `[mcp.servers.<key>]` is offered as
//!
//! - `mcp__<key>__<raw>` when `raw` is 1 or more of `[A-Za-z0-9_-]`, does not end like a hash
//!   suffix (`_` or `-` and 8 lowercase hex digits) and the whole name fits in 64 characters;
//! - else `mcp__<key>__<readable>_<hash>`: `readable` is `raw` with every other character made
//!   `_`, cut so the name is at most 64 characters, and `hash` is 8 hex digits of
//!   SHA-256(`key`, a zero byte, `raw`).
//!
//! So a name is a pure function of (server key, raw tool name): the same after every restart,
//! whatever other tools or servers there are. It is injective:
//!
//! - across servers: a server key ([`crate::config::is_valid_server_key`]) starts and ends with a
//!   letter or digit and never has two of `-` and `_` in a row, so in `mcp__<key>__…` the key ends
//!   at the first `__`, even with `-` read as `_`; and tau.toml refuses two keys that differ only
//!   in `-` versus `_`. (`a` with a tool `__b` and `a_` with a tool `_b` both gave `mcp__a____b`;
//!   `a_` is no longer a key.)
//! - within a server: a verbatim name never ends like a hash suffix and a hashed one always does,
//!   so the two kinds never meet; two verbatim names are equal only for equal raw names; two hashed
//!   names are equal only when their hashes collide.
//!
//! What is left is found and refused by `taud` (its `mcp::names`), never resolved by dropping a
//! tool: tau counts names that differ only in `-` versus `_` as one, so a server's `a-b` and `a_b`
//! clash, as would a hash collision.

use sha2::{Digest, Sha256};

/// The longest tool name the providers accept.
pub const MAX_NAME_LEN: usize = 64;

/// Hex digits of a hash suffix.
const HASH_HEX: usize = 8;

/// The model-visible name of the tool `raw` of server `server` (see the module's rule).
pub fn model_name(server: &str, raw: &str) -> String {
    let verbatim = format!("mcp__{server}__{raw}");
    if is_plain(raw) && verbatim.len() <= MAX_NAME_LEN {
        verbatim
    } else {
        hashed(server, raw)
    }
}

/// Whether `raw` may appear as it is: `[A-Za-z0-9_-]+`, not ending like a hash suffix.
fn is_plain(raw: &str) -> bool {
    !raw.is_empty() && raw.chars().all(is_name_char) && !ends_like_hash(raw)
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Whether `name` ends in `_` or `-` and 8 lowercase hex digits, as a hashed name does.
pub fn ends_like_hash(name: &str) -> bool {
    let Some(at) = name.len().checked_sub(HASH_HEX + 1) else {
        return false;
    };
    let Some(tail) = name.get(at..) else {
        return false;
    };
    let mut chars = tail.chars();
    chars.next().is_some_and(|c| c == '_' || c == '-')
        && chars.all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
}

fn hashed(server: &str, raw: &str) -> String {
    let digest = Sha256::new()
        .chain_update(server.as_bytes())
        .chain_update([0u8])
        .chain_update(raw.as_bytes())
        .finalize();
    let suffix = hex::encode(digest.get(..HASH_HEX / 2).unwrap_or_default());
    let readable: String = raw
        .chars()
        .map(|c| if is_name_char(c) { c } else { '_' })
        .collect();
    let keep = MAX_NAME_LEN - 1 - HASH_HEX;
    let prefix: String = format!("mcp__{server}__{readable}")
        .chars()
        .take(keep)
        .collect();
    format!("{prefix}_{suffix}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::BTreeMap;

    use super::*;
    use crate::config::{fold_server_key, is_valid_server_key};

    fn valid(name: &str) -> bool {
        (1..=MAX_NAME_LEN).contains(&name.len()) && name.chars().all(is_name_char)
    }

    fn fold(name: &str) -> String {
        name.replace('-', "_")
    }

    #[test]
    fn plain_names_stay_as_they_are() {
        assert_eq!(model_name("home", "lamp"), "mcp__home__lamp");
        assert_eq!(model_name("home", "get-weather"), "mcp__home__get-weather");
        assert_eq!(model_name("home-lab", "__b"), "mcp__home-lab____b");
        let fits = "x".repeat(MAX_NAME_LEN - "mcp__home__".len());
        assert_eq!(model_name("home", &fits), format!("mcp__home__{fits}"));
    }

    #[test]
    fn sanitised_long_and_hash_like_names_get_a_hash_of_server_and_name() {
        let long = "x".repeat(80);
        let cases = ["a.b", "ü", "", "x_deadbeef", "x-0123abcd", &long];
        for raw in cases {
            let name = model_name("home", raw);
            assert!(valid(&name), "{raw:?} -> {name}");
            assert!(ends_like_hash(&name), "{raw:?} -> {name}");
            assert!(name.starts_with("mcp__home__"), "{name}");
            // The hash covers the server: another server's tool of the same name differs.
            assert_ne!(name, model_name("away", raw).replace("away", "home"));
        }
        assert!(model_name("home", "a.b").starts_with("mcp__home__a_b_"));
        assert_eq!(model_name("home", "ü"), "mcp__home____ea3728b3");
        assert_eq!(model_name("home", &long).len(), MAX_NAME_LEN);
        // Not hash-shaped: kept.
        assert_eq!(model_name("home", "x_deadbeeg"), "mcp__home__x_deadbeeg");
        assert_eq!(model_name("home", "x_DEADBEEF"), "mcp__home__x_DEADBEEF");
    }

    #[test]
    fn names_are_stable_whatever_else_is_listed() {
        // Pinned: a name never changes between restarts or releases without notice. `a.b` no
        // longer becomes `mcp__home__a_b` when it is alone, nor another name when `a_b` appears.
        assert_eq!(
            model_name("home", "read.state"),
            "mcp__home__read_state_0d336513"
        );
        assert_eq!(model_name("home", "a.b"), model_name("home", "a.b"));
        assert_ne!(model_name("home", "a.b"), model_name("home", "a_b"));
        assert_eq!(model_name("home", "a_b"), "mcp__home__a_b");
    }

    #[test]
    fn no_two_pairs_share_a_name_over_a_small_universe() {
        // Every valid key over {a, -, _} up to 4 characters (one per '-'/'_' class, as tau.toml
        // allows) and every raw name over {a, -, _, .} up to 3.
        let mut level = vec![String::new()];
        let mut keys: BTreeMap<String, String> = BTreeMap::new();
        for _ in 0..4 {
            level = level
                .iter()
                .flat_map(|s| ['a', '-', '_'].map(|c| format!("{s}{c}")))
                .collect();
            for key in level.iter().filter(|k| is_valid_server_key(k)) {
                keys.entry(fold_server_key(key))
                    .or_insert_with(|| key.clone());
            }
        }
        assert_eq!(keys.len(), 7, "{keys:?}");
        let mut raws = vec![String::new()];
        let mut level = vec![String::new()];
        for _ in 0..3 {
            level = level
                .iter()
                .flat_map(|s| ['a', '-', '_', '.'].map(|c| format!("{s}{c}")))
                .collect();
            raws.extend(level.clone());
        }
        let mut seen: BTreeMap<String, (String, String)> = BTreeMap::new();
        for key in keys.values() {
            for raw in &raws {
                let name = model_name(key, raw);
                assert!(valid(&name), "{name}");
                let pair = (key.clone(), raw.clone());
                if let Some(other) = seen.insert(fold(&name), pair.clone()) {
                    // Only a server's own names that differ in '-' versus '_' meet, and never
                    // as the same exact name.
                    assert_eq!(other.0, pair.0, "{other:?} and {pair:?} share {name}");
                    assert_eq!(fold(&other.1), fold(&pair.1));
                    assert_ne!(model_name(&other.0, &other.1), name);
                }
            }
        }
    }
}
