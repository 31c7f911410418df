//! `tau … | head -1`: a command whose output's reader has gone ends quietly and with success,
//! whether it prints lines itself or writes through a writer (completions, the manual).

use std::io::Read as _;
use std::process::{Command, Stdio};

use crate::support;

use support::sandbox::configured;

/// Runs `command` with its stdout a pipe whose reader is closed before it starts; its exit code
/// and stderr.
fn run_unread(mut command: Command) -> (i32, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut child = command
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The parent's copy of the writer went into the command above; only the child's is left.
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    (status.code().unwrap_or(-1), stderr)
}

#[test]
fn a_reader_gone_ends_every_kind_of_output_quietly() {
    let sandbox = configured("", "");
    for args in [
        &["components"][..],
        &["components", "--json"],
        &["version"],
        &["doctor"],
        &["completions", "bash"],
        &["man"],
    ] {
        let (code, stderr) = run_unread(sandbox.command(args));
        assert_eq!(code, 0, "tau {args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "tau {args:?}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "tau {args:?}: {stderr}");
    }
}
