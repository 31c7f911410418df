//! The hub's front door and its sub-rooms (`daemon/src/hub/`, see its `mod.rs` and ARCHITECTURE.md,
//! "hub/"): which module of the hub may import which other, read from non-test code the way
//! `sibling_cycles` reads it (a path through the hub's own re-exports, `crate::hub::HubCore`,
//! counts as a path to the module it names). The sub-rooms import only downwards, in the order of
//! [`HUB_PARTS`]; nothing but `setup` imports `core`, the front door.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;

use super::repo;
use super::sibling_cycles::sibling_edges;

/// The modules of `daemon/src/hub/` and the others each may import (non-test code), each listing
/// only modules before it: the shared files first, then the sub-rooms bottom up (`events`,
/// `approvals`, `sessions`, `routine_ops`), then the front door (`core`) and how the hub starts
/// one (`setup`).
pub const HUB_PARTS: &[(&str, &[&str])] = &[
    ("error", &[]),
    ("ids", &[]),
    ("builtin_tools", &[]),
    ("now_facts", &[]),
    ("events", &[]),
    ("limits", &["error"]),
    ("options", &["events"]),
    ("spend_usage", &["options"]),
    ("approvals", &["error", "ids", "limits", "events"]),
    (
        "sessions",
        &[
            "error",
            "ids",
            "limits",
            "options",
            "builtin_tools",
            "events",
            "approvals",
        ],
    ),
    (
        "routine_ops",
        &["error", "limits", "builtin_tools", "events", "sessions"],
    ),
    (
        "core",
        &[
            "error",
            "ids",
            "builtin_tools",
            "now_facts",
            "events",
            "limits",
            "options",
            "spend_usage",
            "approvals",
            "sessions",
            "routine_ops",
        ],
    ),
    ("setup", &["core", "error", "options"]),
];

/// The modules directly under `daemon/src/hub/`: its files (but `mod.rs` and test files) and its
/// directories with a `mod.rs`.
fn hub_modules() -> BTreeSet<String> {
    let hub = repo().join("daemon/src/hub");
    fs::read_dir(&hub)
        .expect("daemon/src/hub")
        .flatten()
        .filter_map(|entry| {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                return path.join("mod.rs").is_file().then_some(name);
            }
            let stem = name.strip_suffix(".rs")?;
            let test = stem == "tests" || stem.starts_with("tests_") || stem.ends_with("_tests");
            (stem != "mod" && !test).then(|| stem.to_owned())
        })
        .collect()
}

#[test]
fn every_module_of_the_hub_is_listed_here() {
    let listed: BTreeSet<String> = HUB_PARTS.iter().map(|(m, _)| (*m).to_owned()).collect();
    assert_eq!(
        hub_modules(),
        listed,
        "modules of daemon/src/hub vs HUB_PARTS"
    );
}

#[test]
fn the_hubs_parts_import_only_what_they_may() {
    let allowed: BTreeMap<&str, BTreeSet<&str>> = HUB_PARTS
        .iter()
        .map(|(part, deps)| (*part, deps.iter().copied().collect()))
        .collect();
    let mut broken = Vec::new();
    for ((parent, from, to), files) in sibling_edges(&repo().join("daemon/src")) {
        if parent != ["hub"] {
            continue;
        }
        let ok = allowed
            .get(from.as_str())
            .is_some_and(|deps| deps.contains(to.as_str()));
        if !ok {
            broken.push(format!("hub/{from} imports hub/{to} in {files:?}"));
        }
    }
    assert!(
        broken.is_empty(),
        "imports against the hub's layering (tests/tests/layout_cases/hub_parts.rs):\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_hubs_parts_are_listed_bottom_up() {
    let order: BTreeMap<&str, usize> = HUB_PARTS
        .iter()
        .enumerate()
        .map(|(i, (part, _))| (*part, i))
        .collect();
    for (i, (part, deps)) in HUB_PARTS.iter().enumerate() {
        for dep in *deps {
            assert!(
                order.get(dep).is_some_and(|at| *at < i),
                "{part} may import {dep}, which is not listed before it"
            );
        }
    }
}
