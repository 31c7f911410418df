//! The tools that ship inside taud: `current_time` (tier 0) and `demo_physical_action` (tier 2);
//! `schedule_routine` (tier 1) joins the hub's catalog, which gives it a proposer.
//!
//! Invariants: every shipped tool is built with a tier; [`shipped_catalog`] applies
//! `[components.tools] disabled`, which can only remove tools.

mod current_time;
mod demo_physical;
mod schedule_routine;

use std::sync::Arc;

pub use crate::clock::{Clock, FixedClock, SystemClock, TIME_ZONE};
pub use current_time::CurrentTime;
pub use demo_physical::DemoPhysicalAction;
pub use schedule_routine::{RoutineProposal, RoutineProposer, ScheduleRoutine};

use crate::tool::{CatalogError, Tool, ToolCatalog};

/// The name of every tool taud ships (the hub's catalog may hold each): no MCP tool may take one.
pub const BUILTIN_NAMES: &[&str] = &[
    CurrentTime::NAME,
    DemoPhysicalAction::NAME,
    ScheduleRoutine::NAME,
];

/// The shipped tools, reading time from `clock`.
pub fn shipped(clock: Arc<dyn Clock>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(CurrentTime::new(clock)),
        Arc::new(DemoPhysicalAction::new()),
    ]
}

/// A catalog of the shipped tools minus those `disabled` names (tool names or `dist:<name>`).
pub fn shipped_catalog(
    clock: Arc<dyn Clock>,
    disabled: &[String],
) -> Result<ToolCatalog, CatalogError> {
    let mut catalog = ToolCatalog::new();
    for tool in shipped(clock) {
        catalog.add(tool)?;
    }
    catalog.disable(disabled);
    Ok(catalog)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::Tier;

    #[test]
    fn shipped_catalog_has_both_tools_and_honours_disabled() {
        let catalog = shipped_catalog(Arc::new(SystemClock), &[]).unwrap();
        assert_eq!(
            catalog.names(),
            vec!["current_time", "demo_physical_action"]
        );
        assert_eq!(catalog.tier_of("current_time"), Some(Tier::Read));
        assert_eq!(
            catalog.tier_of("demo_physical_action"),
            Some(Tier::Physical)
        );

        let catalog =
            shipped_catalog(Arc::new(SystemClock), &["demo_physical_action".into()]).unwrap();
        assert_eq!(catalog.names(), vec!["current_time"]);
        let catalog = shipped_catalog(Arc::new(SystemClock), &["dist:taud".into()]).unwrap();
        assert!(catalog.is_empty());
    }

    #[test]
    fn builtin_names_cover_every_shipped_tool() {
        for tool in shipped(Arc::new(SystemClock)) {
            assert!(BUILTIN_NAMES.contains(&tool.spec().name.as_str()));
        }
    }
}
