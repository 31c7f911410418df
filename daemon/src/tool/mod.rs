//! Tools: what a tool declares ([`ToolSpec`] with a mandatory [`Tier`]), how it is called ([`Tool`]),
//! and the [`ToolCatalog`] the gate looks tools up in.
//!
//! Invariants: no tool without a tier reaches the catalog; the catalog is the only source of tools the
//! agent runs; tools are called only through the tier gate (`crate::gate`).

pub mod builtin;
mod call;
mod catalog;
mod lenders;
mod progress;
mod spec;

pub use call::{BUILTIN_DISTRIBUTION, Tool, ToolContext, ToolError, ToolOutput};
pub use catalog::{
    CatalogEntry, CatalogError, ToolCatalog, ToolSummary, UntieredToolError, fold_name,
};
pub use lenders::{Lenders, ToolLender};
pub use progress::{MAX_PROGRESS_MESSAGE, ProgressReporter, ProgressWatch, ToolProgress};
pub use spec::{
    InputSchema, NoTier, TauAnnotation, Tier, ToolAnnotations, ToolSpec, ToolSpecBuilder,
    is_valid_tool_name,
};
