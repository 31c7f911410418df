//! What the hub itself tells the persona's `## Now` block, as a context source that runs before
//! every model call (see ARCHITECTURE.md, `persona/`).
//!
//! Invariant: the Now block says what `GetStatus` says: the live nodes come from the node
//! registry both read, and no live node reads `none` (not `unknown`, which means nobody knows); the budget line is today's spend of each priced role from the spend meter
//! (`fast 0,12 $ / 1 $`), unknown when no role has a price.

use std::sync::Arc;

use serde_json::Value;

use crate::persona::{ContextPatch, ContextSource, ContextSourceError};
use crate::spend::SpendMeter;
use crate::tool::Lenders;

/// The hub's own context sources, in the order they run (later ones override earlier ones).
pub(crate) fn hub_context_sources(
    spend: &Arc<SpendMeter>,
    lenders: &Lenders,
) -> Vec<Arc<dyn ContextSource>> {
    vec![
        Arc::new(LiveNodes(lenders.clone())),
        Arc::new(BudgetToday(Arc::clone(spend))),
    ]
}

/// The live nodes the hub knows of, from the one node registry `GetStatus` also reads.
struct LiveNodes(Lenders);

impl ContextSource for LiveNodes {
    fn snapshot(&self) -> Result<ContextPatch, ContextSourceError> {
        let mut patch = ContextPatch::new();
        let live = self.0.live().into_iter().map(Value::String).collect();
        patch.insert("nodes".to_owned(), Value::Array(live));
        Ok(patch)
    }

    fn name(&self) -> &str {
        "hub live nodes"
    }
}

/// Today's spend per priced role, with its daily budget.
struct BudgetToday(Arc<SpendMeter>);

impl ContextSource for BudgetToday {
    fn snapshot(&self) -> Result<ContextPatch, ContextSourceError> {
        let mut patch = ContextPatch::new();
        if let Some(line) = self.0.budget_line() {
            patch.insert("budget".to_owned(), Value::String(line));
        }
        Ok(patch)
    }

    fn name(&self) -> &str {
        "hub spend today"
    }
}
