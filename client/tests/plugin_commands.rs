//! Plugin commands through the real binary: an executable `tau-hello` on PATH runs as
//! `tau hello …` with its arguments, stdin and exit code, is listed by `tau --help` and
//! `tau components`, never shadows a built-in, and a name that is a path is never looked up.

use crate::support;

use std::io::Write as _;
use std::process::Stdio;

use support::sandbox::Sandbox;

/// A sandbox whose PATH is a `bin` directory holding `tau-hello` (and a `tau-chat` that must
/// never run), then the system directories.
fn with_plugins() -> Sandbox {
    let mut sandbox = Sandbox::new();
    sandbox.write(
        "bin/tau-hello",
        "#!/bin/sh\necho \"hello from plugin: $*\"\nread line\necho \"stdin: $line\"\necho oops >&2\nexit 7\n",
    );
    sandbox.chmod("bin/tau-hello", 0o755);
    sandbox.write("bin/tau-chat", "#!/bin/sh\necho shadowed chat ran\n");
    sandbox.chmod("bin/tau-chat", 0o755);
    let path = format!("{}:/usr/bin:/bin", sandbox.root().join("bin").display());
    sandbox.var("PATH", &path);
    sandbox
}

#[test]
fn a_plugin_on_path_runs_with_its_arguments_stdin_and_exit_code() {
    let sandbox = with_plugins();
    let mut child = sandbox
        .command(&["hello", "one", "--two"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"typed line\n")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(7), "{stdout}\n{stderr}");
    assert_eq!(stdout, "hello from plugin: one --two\nstdin: typed line\n");
    assert_eq!(stderr, "oops\n");
}

#[test]
fn help_and_components_list_the_plugins_found() {
    let sandbox = with_plugins();
    let help = sandbox.run(&["--help"]);
    assert_eq!(help.code, 0, "{}", help.stderr);
    let section = help
        .stdout
        .split("Plugin commands:")
        .nth(1)
        .unwrap_or_else(|| panic!("no plugin section:\n{}", help.stdout));
    let hello = sandbox.root().join("bin/tau-hello");
    assert!(
        section.contains(&format!("hello  {}", hello.display())),
        "{section}"
    );
    assert!(
        !section.contains("tau-chat"),
        "a built-in is shadowed: {section}"
    );

    let text = sandbox.run(&["components"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout.contains(&format!(
            "plugin commands\n  tau hello  {}\n",
            hello.display()
        )),
        "{}",
        text.stdout
    );
    let json = sandbox.run(&["components", "--json"]).json();
    assert_eq!(json["plugins"][0]["name"], "hello");
    assert_eq!(json["plugins"][0]["path"], hello.display().to_string());
    assert_eq!(json["plugins"].as_array().unwrap().len(), 1, "{json}");
    assert!(json["clients"].is_array(), "the older fields stay: {json}");
}

#[test]
fn a_builtin_wins_and_a_path_or_unknown_name_is_never_run() {
    let sandbox = with_plugins();
    let chat_help = sandbox.run(&["chat", "--help"]);
    assert_eq!(chat_help.code, 0, "{}", chat_help.stderr);
    assert!(
        !chat_help.stdout.contains("shadowed"),
        "{}",
        chat_help.stdout
    );

    for name in ["bin/tau-hello", "../bin/hello", "nothing-here"] {
        let run = sandbox.run(&[name]);
        assert_eq!(run.code, 2, "{name}: {}", run.stdout);
        assert!(run.stdout.is_empty(), "{name}: {}", run.stdout);
        assert!(run.stderr.contains("not a tau command"), "{}", run.stderr);
    }
}

#[test]
fn help_without_plugins_has_no_plugin_section() {
    let mut sandbox = Sandbox::new();
    sandbox.var("PATH", "/usr/bin:/bin");
    let help = sandbox.run(&["--help"]);
    assert_eq!(help.code, 0, "{}", help.stderr);
    assert!(!help.stdout.contains("Plugin commands"), "{}", help.stdout);
}
