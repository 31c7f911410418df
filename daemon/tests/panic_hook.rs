//! The panic hook writes `crash.json` naming the panic, for the next start's crash report. (In
//! `process_wide.rs`: the hook is process-wide.)

use tau_api::hub_files::CrashNote;

#[test]
fn a_panic_writes_crash_json() {
    let tmp = crate::support::temp::dir();
    let note_path = tmp.path().join("crash.json");
    taud::host::crash::install_panic_hook(note_path.clone());
    let joined = std::thread::spawn(|| panic!("the sky fell")).join();
    assert!(joined.is_err());
    let note: CrashNote =
        serde_json::from_str(&std::fs::read_to_string(&note_path).unwrap()).unwrap();
    assert_eq!(note.pid, std::process::id());
    assert!(
        note.reason.starts_with("panic: the sky fell (at "),
        "{}",
        note.reason
    );
    assert!(note.reason.contains("panic_hook.rs"), "{}", note.reason);
}
