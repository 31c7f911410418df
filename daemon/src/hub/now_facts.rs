//! What the hub itself tells the persona's `## Now` block, as a context source that runs before
//! every model call (see ARCHITECTURE.md, `persona/`).
//!
//! Invariant: the Now block says what `GetStatus` says. This version of tau runs one hub and no
//! nodes, so the hub's list of live nodes is empty and reads `none` (not `unknown`, which means
//! nobody knows); the budget is left to a later source.

use std::sync::Arc;

use serde_json::Value;

use crate::persona::{ContextPatch, ContextSource, ContextSourceError};

/// The hub's own context sources, in the order they run (later ones override earlier ones).
pub(crate) fn hub_context_sources() -> Vec<Arc<dyn ContextSource>> {
    vec![Arc::new(LiveNodes)]
}

/// The live nodes the hub knows of: none in this version, as `GetStatus` reports `nodes: []`.
struct LiveNodes;

impl ContextSource for LiveNodes {
    fn snapshot(&self) -> Result<ContextPatch, ContextSourceError> {
        let mut patch = ContextPatch::new();
        patch.insert("nodes".to_owned(), Value::Array(Vec::new()));
        Ok(patch)
    }

    fn name(&self) -> &str {
        "hub live nodes"
    }
}
