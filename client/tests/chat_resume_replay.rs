//! `tau chat --resume` against the scripted hub: the stored conversation is replayed with the
//! session's stored turn stops and repairs (its `turn_stopped` / `turn_repaired` events) between
//! the messages where they happened.

// Test helpers: a failed set-up step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::scripted_hub::*;

#[test]
fn a_resumed_session_replays_its_stored_stops_and_repairs_between_its_messages() {
    let script = Script {
        stored_stops: true,
        ..Script::default()
    };
    let fixture = Fixture::launch(script, &[], &["--resume", EARLIER]);
    // The terminal's bytes were read as Latin-1; back to UTF-8.
    let bytes: Vec<u8> = fixture.startup.chars().map(|c| c as u8).collect();
    let startup = String::from_utf8(bytes).unwrap();
    let expected = [
        "> first question",
        "thinking about it",
        "■ Stopped: this turn reached its limit of 1 model calls ([agent] max_turns).",
        "↺ Repaired the unfinished history: The turn stopped after 1 model calls (its limit).",
        "> second question",
        "second answer",
        "> third question",
        "■ Error: The model call failed: boom",
    ];
    let mut from = 0;
    for line in expected {
        let at = startup[from..]
            .find(line)
            .unwrap_or_else(|| panic!("{line:?} not in order in:\n{startup}"));
        from += at + line.len();
    }
    fixture.quit();
}
