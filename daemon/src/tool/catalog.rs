//! The [`ToolCatalog`]: the tools an agent may call, each with its tier and distribution.
//!
//! Invariants: every entry has a tier (a spec without `annotations.tau.tier` is refused with
//! [`UntieredToolError`]); names are valid and unique (also across `-`/`_`); `[components.tools]
//! disabled` can only remove entries, never add one or change a tier. The gate looks tools up here;
//! a tool that is not in the catalog never runs. The specs offered to the model are copied once per
//! catalog ([`ToolCatalog::specs`]) and shared by every model call that uses it.

use std::sync::{Arc, OnceLock};

use super::call::Tool;
use super::spec::{Tier, ToolSpec, is_valid_tool_name};

/// A tool declaration without a tier: it cannot be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Tool '{name}' declares no tier; a tool without a tier cannot be registered.")]
pub struct UntieredToolError {
    pub name: String,
}

/// Why a tool was not added to the catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    #[error(transparent)]
    Untiered(#[from] UntieredToolError),
    #[error("Tool name '{0}' is not valid: use 1 to 64 letters, digits, '_' or '-'.")]
    InvalidName(String),
    #[error("Tool name '{0}' already exists. Cannot register tools with the same name.")]
    Duplicate(String),
}

/// One registered tool with what the gate needs to know about it.
#[derive(Clone)]
pub struct CatalogEntry {
    tool: Arc<dyn Tool>,
    tier: Tier,
}

impl CatalogEntry {
    pub fn tool(&self) -> &Arc<dyn Tool> {
        &self.tool
    }

    pub fn tier(&self) -> Tier {
        self.tier
    }

    /// The distribution the tool comes from.
    pub fn distribution(&self) -> &str {
        self.tool.distribution()
    }

    pub fn spec(&self) -> &ToolSpec {
        self.tool.spec()
    }

    pub fn name(&self) -> &str {
        &self.tool.spec().name
    }
}

impl std::fmt::Debug for CatalogEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogEntry")
            .field("name", &self.name())
            .field("tier", &self.tier)
            .field("distribution", &self.distribution())
            .finish()
    }
}

/// The registered tools, in registration order.
#[derive(Debug, Clone, Default)]
pub struct ToolCatalog {
    entries: Vec<CatalogEntry>,
    /// The entries' specs, copied at the first [`ToolCatalog::specs`] after the last change.
    specs: OnceLock<Arc<[ToolSpec]>>,
}

impl ToolCatalog {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a tool. Refuses a spec without a tier, an invalid name and a duplicate name.
    /// Allocates nothing but the entry: a hub with nodes builds each session's catalog again at
    /// every turn's start.
    pub fn add(&mut self, tool: Arc<dyn Tool>) -> Result<(), CatalogError> {
        let spec = tool.spec();
        let name = &spec.name;
        if !is_valid_tool_name(name) {
            return Err(CatalogError::InvalidName(name.clone()));
        }
        let Some(tier) = spec.tier() else {
            return Err(UntieredToolError { name: name.clone() }.into());
        };
        if self.entries.iter().any(|e| fold_alike(e.name(), name)) {
            return Err(CatalogError::Duplicate(name.clone()));
        }
        self.specs = OnceLock::new();
        self.entries.push(CatalogEntry { tool, tier });
        Ok(())
    }

    /// Removes the tools named in `[components.tools] disabled`: a tool name, or `dist:<name>` for
    /// every tool of a distribution. Returns the names removed, in catalog order.
    pub fn disable(&mut self, disabled: &[String]) -> Vec<String> {
        let is_disabled = |entry: &CatalogEntry| {
            disabled
                .iter()
                .any(|item| match item.strip_prefix("dist:") {
                    Some(dist) => entry.distribution() == dist,
                    None => entry.name() == item,
                })
        };
        let mut removed = Vec::new();
        self.specs = OnceLock::new();
        self.entries.retain(|entry| {
            if is_disabled(entry) {
                removed.push(entry.name().to_owned());
                false
            } else {
                true
            }
        });
        removed
    }

    /// The entry for `name`, if registered.
    pub fn get(&self, name: &str) -> Option<&CatalogEntry> {
        self.entries.iter().find(|entry| entry.name() == name)
    }

    /// The tier of `name`, if registered.
    pub fn tier_of(&self, name: &str) -> Option<Tier> {
        self.get(name).map(CatalogEntry::tier)
    }

    /// Every entry, in registration order.
    pub fn entries(&self) -> &[CatalogEntry] {
        &self.entries
    }

    /// The specs the model is offered, in registration order: copied once, then shared (a model
    /// request holds them without copying each tool's schema again).
    pub fn specs(&self) -> Arc<[ToolSpec]> {
        Arc::clone(
            self.specs
                .get_or_init(|| self.entries.iter().map(|e| e.spec().clone()).collect()),
        )
    }

    /// Whether `other` holds the very same tools (the same objects, so the same specs), with the
    /// same tiers and distributions, in the same order.
    pub fn same_tools(&self, other: &ToolCatalog) -> bool {
        self.entries.len() == other.entries.len()
            && self.entries.iter().zip(&other.entries).all(|(a, b)| {
                Arc::ptr_eq(&a.tool, &b.tool)
                    && a.tier == b.tier
                    && a.distribution() == b.distribution()
            })
    }

    /// The registered names, in registration order.
    pub fn names(&self) -> Vec<String> {
        self.entries.iter().map(|e| e.name().to_owned()).collect()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether any registered tool is tier 2; then tool calls of a turn run one at a time.
    pub fn has_physical(&self) -> bool {
        self.entries.iter().any(|e| e.tier == Tier::Physical)
    }
}

/// `name` with `-` read as `_`: two names that fold alike count as one in the catalog.
pub fn fold_name(name: &str) -> String {
    name.replace('-', "_")
}

/// Whether `a` and `b` fold alike ([`fold_name`]), without allocating.
fn fold_alike(a: &str, b: &str) -> bool {
    let fold = |c: u8| if c == b'-' { b'_' } else { c };
    a.len() == b.len() && a.bytes().zip(b.bytes()).all(|(x, y)| fold(x) == fold(y))
}

/// A tool as listings show it (`ListTools`, `tau components`): a catalog entry, or an MCP or
/// node tool that is listed but not offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSummary {
    pub name: String,
    /// `None` for an MCP or node tool the owner did not tier (never offered).
    pub tier: Option<Tier>,
    pub description: String,
    pub effect: String,
    /// The MCP server of an MCP tool.
    pub server: Option<String>,
    /// The node lending a node tool.
    pub node: Option<String>,
    /// `ready`; for an MCP tool not offered `untiered`, `missing` or `refused`; for a node tool
    /// `offline` (tiered, its node not live), `untiered` or `changed`.
    pub state: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{ToolContext, ToolError, ToolOutput};
    use async_trait::async_trait;
    use serde_json::{Value, json};

    struct Plain {
        spec: ToolSpec,
        dist: &'static str,
    }

    #[async_trait]
    impl Tool for Plain {
        fn spec(&self) -> &ToolSpec {
            &self.spec
        }
        fn distribution(&self) -> &str {
            self.dist
        }
        async fn call(&self, _input: Value, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text("ok"))
        }
    }

    fn tiered(name: &str, tier: Tier, dist: &'static str) -> Arc<dyn Tool> {
        Arc::new(Plain {
            spec: ToolSpec::builder(name, "d").tier(tier).build(),
            dist,
        })
    }

    #[test]
    fn untiered_json_spec_is_refused() {
        let spec = ToolSpec::from_json(json!({
            "name": "plain", "description": "d", "inputSchema": {"json": {"type": "object"}}
        }))
        .unwrap();
        let mut catalog = ToolCatalog::new();
        let err = catalog
            .add(Arc::new(Plain { spec, dist: "x" }))
            .unwrap_err();
        assert_eq!(
            err,
            CatalogError::Untiered(UntieredToolError {
                name: "plain".into()
            })
        );
        assert!(catalog.is_empty());
    }

    #[test]
    fn duplicates_and_bad_names_are_refused() {
        let mut catalog = ToolCatalog::new();
        catalog.add(tiered("a_b", Tier::Read, "x")).unwrap();
        assert_eq!(
            catalog.add(tiered("a-b", Tier::Read, "x")),
            Err(CatalogError::Duplicate("a-b".into()))
        );
        assert_eq!(
            catalog.add(tiered("a b", Tier::Read, "x")),
            Err(CatalogError::InvalidName("a b".into()))
        );
        assert_eq!(catalog.names(), vec!["a_b"]);
    }

    #[test]
    fn disabled_removes_by_name_and_distribution_only() {
        let mut catalog = ToolCatalog::new();
        catalog.add(tiered("one", Tier::Read, "core")).unwrap();
        catalog.add(tiered("two", Tier::Physical, "extra")).unwrap();
        catalog
            .add(tiered("three", Tier::DigitalWrite, "extra"))
            .unwrap();
        catalog.add(tiered("four", Tier::Read, "core")).unwrap();
        assert!(catalog.has_physical());
        let removed = catalog.disable(&["dist:extra".into(), "four".into(), "missing".into()]);
        assert_eq!(removed, vec!["two", "three", "four"]);
        assert_eq!(catalog.names(), vec!["one"]);
        assert_eq!(catalog.tier_of("one"), Some(Tier::Read));
        assert!(!catalog.has_physical());
        assert_eq!(catalog.get("one").unwrap().distribution(), "core");
    }

    #[test]
    fn specs_are_copied_once_and_follow_every_change() {
        let one = tiered("one", Tier::Read, "core");
        let two = tiered("two", Tier::Physical, "extra");
        let mut catalog = ToolCatalog::new();
        catalog.add(Arc::clone(&one)).unwrap();
        let first = catalog.specs();
        assert!(Arc::ptr_eq(&first, &catalog.specs()));
        catalog.add(Arc::clone(&two)).unwrap();
        let names = |specs: &[ToolSpec]| specs.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&catalog.specs()), vec!["one", "two"]);
        catalog.disable(&["one".into()]);
        assert_eq!(names(&catalog.specs()), vec!["two"]);
        assert_eq!(names(&first), vec!["one"]);
    }

    #[test]
    fn same_tools_means_the_same_objects_in_the_same_order() {
        let one = tiered("one", Tier::Read, "core");
        let two = tiered("two", Tier::Physical, "extra");
        let of = |tools: &[&Arc<dyn Tool>]| {
            let mut catalog = ToolCatalog::new();
            for tool in tools {
                catalog.add(Arc::clone(tool)).unwrap();
            }
            catalog
        };
        assert!(of(&[&one, &two]).same_tools(&of(&[&one, &two])));
        assert!(!of(&[&one, &two]).same_tools(&of(&[&two, &one])));
        assert!(!of(&[&one, &two]).same_tools(&of(&[&one])));
        // An equal spec in another object is not the same tool.
        let other_one = tiered("one", Tier::Read, "core");
        assert!(!of(&[&one]).same_tools(&of(&[&other_one])));
    }
}
