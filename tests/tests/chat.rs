//! `tau chat` end to end: the real `taud` with the offline fake model, the real `tau chat` on a
//! pseudo-terminal, typed the way a person types.

use std::process::Stdio;

use tau_e2e::chat::ChatSandbox;

#[test]
fn no_start_without_a_hub_exits_non_zero_with_its_hint() {
    let env = ChatSandbox::new().unwrap();
    let output = env
        .command("tau")
        .unwrap()
        .args(["chat", "--no-start"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(69), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("No hub answers"), "{stderr}");
    assert!(stderr.contains("tau hub run"), "{stderr}");
    assert!(!env.socket().exists());
}
