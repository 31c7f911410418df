//! `<data_dir>/routines.json`: every routine, with its state and history, in one versioned file.
//!
//! Format (version 3): `{"version": 3, "routines": [<Routine>, ...]}`, each routine as
//! [`Routine`] serializes it; fixtures are kept in `daemon/tests/fixtures/routines-v{1,2}.json`.
//! Version 2 added who registered a routine (`created_by`) and bound a registration approval to
//! everything its question showed (`approval.shown`: schedule, catch-up rule, session, action, the
//! tool's distribution, own name and effect). A version 1 file still reads: its routines were
//! registered by `unknown`, and its approvals (which bound only a tool and its arguments) cover
//! nothing, so a tier-2 tool routine of version 1 fails its firings until it is registered again.
//! Version 3 binds a node's tool to the digest of the node's claim as well
//! (`approval.shown.tool.claim`, written only for such tools, so every other record reads and
//! writes as before): an approval given before a node's tool changed covers nothing after, and one
//! stored without it (as every version 2 approval is) covers no node tool. The version was raised
//! so that an older `taud`, which would ignore the claim, refuses the file instead.
//! Invariants: the file is replaced atomically (a temporary file, fsync, rename, fsync of the
//! directory) and is 0600; a missing file is no routines; a newer version or a file that does not
//! parse is an error naming the file, never silently replaced.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::routine_error::RoutineError;
use super::routine_record::Routine;

/// The format version written.
pub const ROUTINES_FILE_VERSION: u32 = 3;
/// The file's name in the data directory.
pub const ROUTINES_FILE_NAME: &str = "routines.json";

#[derive(Debug, Serialize, Deserialize)]
struct RoutinesFile {
    version: u32,
    #[serde(default)]
    routines: Vec<Routine>,
}

#[derive(Deserialize)]
struct VersionOnly {
    version: u32,
}

/// Where the routines of data directory `data_dir` are kept.
pub fn routines_path(data_dir: &Path) -> PathBuf {
    data_dir.join(ROUTINES_FILE_NAME)
}

/// Reads the routines; a missing file is none.
pub fn load_routines(path: &Path) -> Result<Vec<Routine>, RoutineError> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(RoutineError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    let parse_error = |e: serde_json::Error| RoutineError::Parse {
        path: path.to_owned(),
        reason: e.to_string(),
    };
    let version: VersionOnly = serde_json::from_str(&text).map_err(parse_error)?;
    if version.version > ROUTINES_FILE_VERSION {
        return Err(RoutineError::NewerVersion {
            path: path.to_owned(),
            found: version.version,
            supported: ROUTINES_FILE_VERSION,
        });
    }
    let file: RoutinesFile = serde_json::from_str(&text).map_err(parse_error)?;
    Ok(file.routines)
}

/// Replaces the file with `routines`, atomically.
pub fn save_routines(path: &Path, routines: &[Routine]) -> Result<(), RoutineError> {
    #[derive(Serialize)]
    struct Borrowed<'a> {
        version: u32,
        routines: &'a [Routine],
    }
    let mut bytes = serde_json::to_vec_pretty(&Borrowed {
        version: ROUTINES_FILE_VERSION,
        routines,
    })
    .map_err(|e| RoutineError::Parse {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    bytes.push(b'\n');
    tau_api::durable_file::write_atomic(path, &bytes).map_err(|source| RoutineError::Io {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routine::routine_record::{
        Creator, FiringCause, FiringOutcome, RoutineAction, ToolIdentity,
    };
    use crate::routine::schedule::Schedule;
    use std::os::unix::fs::PermissionsExt;

    const V1_FIXTURE: &str = include_str!("../../tests/fixtures/routines-v1.json");

    const V2_FIXTURE: &str = include_str!("../../tests/fixtures/routines-v2.json");

    #[test]
    fn the_v2_fixture_reads_and_writes_back_the_same_as_version_3() {
        let dir = tempfile::tempdir().unwrap();
        let path = routines_path(dir.path());
        fs::write(&path, V2_FIXTURE).unwrap();
        let routines = load_routines(&path).unwrap();
        let lamp = &routines[0];
        assert_eq!(lamp.created_by, Creator::Owner);
        let approval = lamp.approval.as_ref().unwrap();
        let identity = ToolIdentity {
            distribution: "taud".into(),
            source_name: "demo_physical_action".into(),
            effect: "Simulates a physical action.".into(),
            claim: None,
        };
        assert!(approval.covers(lamp, Some(&identity)), "{approval:?}");
        let mut moved = lamp.clone();
        moved.schedule = Schedule::cron("* * * * *").unwrap();
        assert!(!approval.covers(&moved, Some(&identity)));
        assert_eq!(routines[1].created_by, Creator::Model);
        save_routines(&path, &routines).unwrap();
        let written: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        let mut fixture: serde_json::Value = serde_json::from_str(V2_FIXTURE).unwrap();
        fixture["version"] = 3.into();
        assert_eq!(written, fixture, "the format written is the fixture's");
    }

    #[test]
    fn a_v1_approval_reads_but_covers_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = routines_path(dir.path());
        fs::write(&path, V1_FIXTURE).unwrap();
        let routines = load_routines(&path).unwrap();
        let lamp = &routines[0];
        assert_eq!(lamp.created_by, Creator::Unknown);
        let approval = lamp.approval.as_ref().unwrap();
        assert_eq!(approval.shown, None);
        let identity = ToolIdentity {
            distribution: "taud".into(),
            source_name: "demo_physical_action".into(),
            effect: "Simulates a physical action.".into(),
            claim: None,
        };
        assert!(!approval.covers(lamp, Some(&identity)));
        save_routines(&path, &routines).unwrap();
        let written: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(written["version"], 3);
        assert_eq!(written["routines"][0]["created_by"], "unknown");
        assert_eq!(
            written["routines"][0]["approval"]["shown"],
            serde_json::Value::Null
        );
    }

    #[test]
    fn a_node_tools_approval_binds_its_claim() {
        let dir = tempfile::tempdir().unwrap();
        let path = routines_path(dir.path());
        fs::write(&path, V2_FIXTURE).unwrap();
        let mut routines = load_routines(&path).unwrap();
        let node_tool = |claim: Option<&str>| ToolIdentity {
            distribution: "node:pi".into(),
            source_name: "demo_physical_action".into(),
            effect: "Simulates a physical action.".into(),
            claim: claim.map(str::to_owned),
        };
        let lamp = &mut routines[0];
        let shown = lamp.approval.as_mut().unwrap().shown.as_mut().unwrap();
        // Stored before claims were bound: it covers no node tool.
        shown.tool = Some(node_tool(None));
        let approval = lamp.approval.clone().unwrap();
        assert!(!approval.covers(lamp, Some(&node_tool(Some("a")))));
        let shown = lamp.approval.as_mut().unwrap().shown.as_mut().unwrap();
        shown.tool = Some(node_tool(Some("a")));
        save_routines(&path, &routines).unwrap();
        let routines = load_routines(&path).unwrap();
        let approval = routines[0].approval.clone().unwrap();
        assert!(approval.covers(&routines[0], Some(&node_tool(Some("a")))));
        assert!(
            !approval.covers(&routines[0], Some(&node_tool(Some("b")))),
            "the node's tool changed since it was approved"
        );
        let written = fs::read_to_string(&path).unwrap();
        assert!(written.contains(r#""claim": "a""#), "{written}");
    }

    #[test]
    fn the_v1_fixture_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = routines_path(dir.path());
        fs::write(&path, V1_FIXTURE).unwrap();
        let routines = load_routines(&path).unwrap();
        assert_eq!(routines.len(), 2);
        let lamp = &routines[0];
        assert_eq!(lamp.name, "lamp-off");
        assert_eq!(lamp.schedule, Schedule::cron("0 23 * * *").unwrap());
        assert!(
            matches!(&lamp.action, RoutineAction::Tool { tool, .. } if tool == "demo_physical_action")
        );
        assert_eq!(
            lamp.approval.as_ref().map(|a| a.channel.as_str()),
            Some("cli")
        );
        assert_eq!(
            lamp.handled_through,
            Some("2026-12-01T20:00:00Z".parse().unwrap())
        );
        assert_eq!(lamp.history[0].cause, FiringCause::Scheduled);
        assert_eq!(lamp.history[0].outcome, FiringOutcome::Succeeded);
        let weather = &routines[1];
        assert!(weather.paused);
        assert!(matches!(
            weather.schedule,
            Schedule::Interval {
                every_seconds: 5400,
                ..
            }
        ));
        save_routines(&path, &routines).unwrap();
        assert_eq!(load_routines(&path).unwrap(), routines);
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn missing_newer_and_broken_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = routines_path(dir.path());
        assert!(load_routines(&path).unwrap().is_empty());
        fs::write(&path, r#"{"version": 4, "routines": []}"#).unwrap();
        let err = load_routines(&path).unwrap_err().to_string();
        assert!(
            err.contains("routines.json") && err.contains("version 4"),
            "{err}"
        );
        fs::write(&path, "{nope").unwrap();
        let err = load_routines(&path).unwrap_err().to_string();
        assert!(err.contains("not a routines file"), "{err}");
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file is left");
    }
}
