//! [`Lenders`]: tools another machine lends the hub (a node's, see `crate::node`), asked for at
//! each turn's start, which lenders are live now (the Now block's "Live nodes:" line), and what
//! they claim but are not offered (for `ListTools`).
//!
//! Invariant: a lender only adds tools that already carry the hub owner's tier; the catalog
//! checks them like any other, and `[components.tools] disabled` still removes them.

use std::sync::Arc;

use super::call::Tool;
use super::catalog::ToolSummary;

/// Who lends tools to the hub.
pub trait ToolLender: Send + Sync {
    /// The tools offered now (tiered by the hub's owner).
    fn tools(&self) -> Vec<Arc<dyn Tool>>;
    /// The names of the lenders that are live now, sorted.
    fn live(&self) -> Vec<String>;
    /// The tools claimed but not in [`ToolLender::tools`] (untiered, changed, or of a lender
    /// not heard since the hub started), as listings show them.
    fn not_offered(&self) -> Vec<ToolSummary>;
}

/// The hub's lender, if any (cheap to clone).
#[derive(Clone, Default)]
pub struct Lenders(Option<Arc<dyn ToolLender>>);

impl Lenders {
    /// Tools lent by `lender`.
    pub fn new(lender: Arc<dyn ToolLender>) -> Self {
        Self(Some(lender))
    }

    /// Whether anything lends tools.
    pub fn is_some(&self) -> bool {
        self.0.is_some()
    }

    /// The tools lent now.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.0.as_ref().map(|l| l.tools()).unwrap_or_default()
    }

    /// The live lenders now.
    pub fn live(&self) -> Vec<String> {
        self.0.as_ref().map(|l| l.live()).unwrap_or_default()
    }

    /// What the lenders claim but do not offer now.
    pub fn not_offered(&self) -> Vec<ToolSummary> {
        self.0.as_ref().map(|l| l.not_offered()).unwrap_or_default()
    }
}

impl std::fmt::Debug for Lenders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Lenders(some)"
        } else {
            "Lenders(none)"
        })
    }
}

impl PartialEq for Lenders {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }
}
