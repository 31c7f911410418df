//! The checks of an installation that runs as a node (TAU_ROLE=node, or `[hub] role = "node"`,
//! resolved as `taud` resolves it: `tau_api::config::Settings`): one line saying which hub checks
//! are skipped and why, and the node's pairing with its hub as the pairing store (`nodes.json` in
//! the hub directory) records it.
//!
//! Invariants: only reads; the pairing store is read for its version and its `hub` entry alone
//! (the keys in it are never shown); a store `taud` would refuse (damaged, or a newer version)
//! fails, a node not paired yet is a warning (it runs, lending nothing until it joins).

use std::path::Path;

use serde_json::Value;
use tau_api::hub_files::{PAIRING_FILE, PAIRING_VERSION};

use super::report::Check;

/// The line that says what a node does not need.
pub(super) fn skipped() -> Check {
    Check::ok(
        "node",
        "this installation runs as a node (no model and no agent): the model roles and their servers, the session store, the persona, Telegram and routines are skipped",
    )
}

/// The node's pairing with its hub, from the pairing store in `hub_dir`.
pub(super) fn pairing(hub_dir: &Path) -> Check {
    let path = hub_dir.join(PAIRING_FILE);
    let join = "on the hub run `tau node pair NAME`, then here `tau node join HOST:PORT CODE`";
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Check::warn("pairing", "not paired with a hub yet: it lends nothing").fix(join);
        }
        Err(e) => {
            return Check::fail("pairing", format!("{}: {e}", path.display()))
                .fix(format!("make {} a file you can read", path.display()));
        }
    };
    let damaged = |why: String| {
        Check::fail(
            "pairing",
            format!(
                "{} is not a pairing store taud reads: {why}",
                path.display()
            ),
        )
        .fix(format!(
            "move {} aside and pair again ({join})",
            path.display()
        ))
    };
    let file: Value = match serde_json::from_str(&text) {
        Ok(file) => file,
        Err(e) => return damaged(e.to_string()),
    };
    match file.get("version").and_then(Value::as_u64) {
        Some(version) if (1..=u64::from(PAIRING_VERSION)).contains(&version) => {}
        Some(version) => return damaged(format!("version {version}")),
        None => return damaged("no version".to_owned()),
    }
    let hub = file.get("hub").filter(|hub| !hub.is_null());
    let field = |name: &str| {
        hub.and_then(|hub| hub.get(name))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    match (hub, field("name"), field("address")) {
        (None, _, _) => {
            Check::warn("pairing", "not paired with a hub yet: it lends nothing").fix(join)
        }
        (Some(_), Some(name), Some(address)) => Check::ok(
            "pairing",
            format!("paired as {name:?} with the hub at {address}"),
        ),
        (Some(_), _, _) => damaged("its hub has no name or address".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::doctor::Status;

    fn with_store(text: Option<&str>) -> Check {
        let dir = tempfile::tempdir().unwrap();
        if let Some(text) = text {
            std::fs::write(dir.path().join(PAIRING_FILE), text).unwrap();
        }
        pairing(dir.path())
    }

    #[test]
    fn pairing_reads_the_hub_the_node_pinned() {
        let paired = with_store(Some(
            r#"{"version":1,"identity":{"cert":"00","key":"00"},"nodes":[],
               "hub":{"name":"pi","address":"10.0.0.2:7443","fingerprint":"ab","paired_at":"2026-01-01T00:00:00Z"}}"#,
        ));
        assert_eq!(paired.status, Status::Ok);
        assert!(paired.message.contains("\"pi\""), "{}", paired.message);
        assert!(paired.message.contains("10.0.0.2:7443"));
        assert!(!paired.message.contains("00"), "no key shown");

        for unpaired in [None, Some(r#"{"version":1,"nodes":[]}"#)] {
            let check = with_store(unpaired);
            assert_eq!(check.status, Status::Warn, "{unpaired:?}");
            assert!(check.fix.unwrap().contains("tau node join"));
        }
        for refused in [
            "{",
            r#"{"version":2}"#,
            r#"{"version":1,"hub":{"name":"pi"}}"#,
        ] {
            assert_eq!(with_store(Some(refused)).status, Status::Fail, "{refused}");
        }
    }
}
