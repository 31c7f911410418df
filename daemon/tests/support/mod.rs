//! Helpers shared by taud's test binaries (`all.rs`, `props.rs`) and, through `#[path]`, by its
//! benchmarks. Each binary uses a part of them.
#![allow(dead_code)]

pub mod agent;
pub mod api;
pub mod hooked_store;
pub mod hub;
pub mod mcp;
pub mod nodes;
pub mod process;
pub mod props;
pub mod provider;
pub mod soak;
pub mod store;
pub mod temp;
pub mod web;
pub mod window;

/// For a test whose tool (`what`) is missing here: fails when `.ci/run` requires it (`require_var`
/// is `1`, set where CI installs the tool), else says on stderr that the test is skipped and
/// `how` to run it. The caller then returns.
#[track_caller]
pub fn skip_unless_required(require_var: &str, what: &str, how: &str) {
    let required = std::env::var(require_var).is_ok_and(|v| v == "1");
    assert!(!required, "{require_var}=1 but {what}");
    eprintln!("skipped: {how}");
}
