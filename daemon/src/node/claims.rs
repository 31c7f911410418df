//! [`ToolClaim`]: a tool as a node announces it (name, description, input schema), its digest,
//! and how a new announcement is compared with the first one the hub saw since pairing.
//!
//! Invariants: the digest covers the name, the description and the schema, each followed by a
//! zero byte, so no two different claims share one; the first digest seen for a tool is kept until
//! the node is paired again, and a claim that differs from it is "changed" (never offered), however
//! many times it is announced; at most [`MAX_REMEMBERED`] first digests are kept per node, and a
//! tool that would need more counts as changed (not offered until the node is paired again).

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

/// First digests kept per node (the tools it ever announced since pairing).
pub const MAX_REMEMBERED: usize = 256;

/// A tool a node claims to lend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolClaim {
    pub name: String,
    pub description: String,
    pub input_schema_json: String,
}

impl ToolClaim {
    /// A claim known by its name alone (from the pairing store).
    pub(super) fn named(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            description: String::new(),
            input_schema_json: String::new(),
        }
    }

    /// SHA-256 (hex) of the name, description and schema, each followed by a zero byte: what a
    /// call carries so the node runs only the tool the hub offered.
    pub fn digest(&self) -> String {
        let mut h = Sha256::new();
        for part in [&self.name, &self.description, &self.input_schema_json] {
            h.update(part.as_bytes());
            h.update([0]);
        }
        hex::encode(h.finalize())
    }
}

/// Compares `claims` with the first digests seen (`first`, by tool name): the names whose claim
/// changed, and whether a tool was seen for the first time (its digest is then added to `first`).
pub(super) fn compare(
    first: &mut BTreeMap<String, String>,
    claims: &[ToolClaim],
) -> (BTreeSet<String>, bool) {
    let mut changed = BTreeSet::new();
    let mut learned = false;
    for claim in claims {
        let digest = claim.digest();
        match first.get(&claim.name) {
            Some(seen) if *seen != digest => {
                changed.insert(claim.name.clone());
            }
            Some(_) => {}
            None if first.len() >= MAX_REMEMBERED => {
                changed.insert(claim.name.clone());
            }
            None => {
                first.insert(claim.name.clone(), digest);
                learned = true;
            }
        }
    }
    (changed, learned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(name: &str, description: &str) -> ToolClaim {
        ToolClaim {
            name: name.into(),
            description: description.into(),
            input_schema_json: "{}".into(),
        }
    }

    #[test]
    fn a_claim_unlike_the_first_one_stays_changed() {
        let mut first = BTreeMap::new();
        let (changed, learned) = compare(&mut first, &[claim("a", "one")]);
        assert!(changed.is_empty() && learned);
        let (changed, learned) = compare(&mut first, &[claim("a", "two"), claim("b", "x")]);
        assert_eq!(changed.into_iter().collect::<Vec<_>>(), ["a"]);
        assert!(learned, "b is new");
        let (changed, learned) = compare(&mut first, &[claim("a", "one")]);
        assert!(changed.is_empty() && !learned, "back as first seen");
        assert_ne!(claim("ab", "c").digest(), claim("a", "bc").digest());
    }

    #[test]
    fn past_the_cap_a_new_tool_counts_as_changed() {
        let mut first = BTreeMap::new();
        let many: Vec<ToolClaim> = (0..MAX_REMEMBERED)
            .map(|n| claim(&format!("t{n}"), "x"))
            .collect();
        let (changed, learned) = compare(&mut first, &many);
        assert!(changed.is_empty() && learned);
        let (changed, learned) = compare(&mut first, &[claim("one_more", "x")]);
        assert_eq!(changed.into_iter().collect::<Vec<_>>(), ["one_more"]);
        assert!(!learned && first.len() == MAX_REMEMBERED);
    }
}
