//! What `tau` logs and where, through the real binary: `tau ask` (like `tau chat`) writes INFO
//! records to `<TAU_DATA_DIR>/logs/tau.log`; `.env` problems and unknown `tau.toml` tables are
//! told once, on stderr, by ask and components, and only as a check line by doctor.

use crate::support;

use support::sandbox::{Sandbox, checks, doctor};

/// A healthy installation whose tau.toml has an unknown table and whose .env a broken line 2.
fn with_problems() -> Sandbox {
    let sandbox = Sandbox::healthy();
    let config = sandbox.read("home/tau.toml");
    sandbox.write(
        "home/tau.toml",
        &format!("{config}\n[telegram]\nchat = 1\n"),
    );
    sandbox.write("home/.env", "TAU_LANG=en\nthis line is broken\n");
    sandbox.chmod("home/.env", 0o600);
    sandbox
}

fn dotenv_line(sandbox: &Sandbox) -> String {
    format!("{}:2:", sandbox.home().join(".env").display())
}

#[test]
fn ask_writes_info_records_to_tau_log_and_tells_each_problem_once() {
    let sandbox = with_problems();
    let run = sandbox.run(&["ask", "hello"]);
    assert_ne!(run.code, 0, "no hub runs here");
    let log = std::fs::read_to_string(sandbox.data().join("logs").join("tau.log")).unwrap();
    let started: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("tau ask started"))
        .collect();
    assert_eq!(started.len(), 1, "{log}");
    assert!(started[0].contains(" INFO "), "{log}");
    assert_eq!(
        log.matches("unknown table [telegram] ignored").count(),
        1,
        "{log}"
    );
    assert_eq!(
        run.stderr
            .matches("unknown table [telegram] ignored")
            .count(),
        1,
        "{}",
        run.stderr
    );
    assert_eq!(
        run.stderr.matches(&dotenv_line(&sandbox)).count(),
        1,
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("tau ask started"),
        "INFO stays out of the console without -v: {}",
        run.stderr
    );
}

#[test]
fn with_verbose_the_console_gets_info_and_the_file_no_debug() {
    let sandbox = Sandbox::healthy();
    let run = sandbox.run(&["-v", "ask", "hello"]);
    assert!(run.stderr.contains("tau ask started"), "{}", run.stderr);
    let log = std::fs::read_to_string(sandbox.data().join("logs").join("tau.log")).unwrap();
    assert!(log.contains("tau ask started"), "{log}");
    assert!(!log.contains("DEBUG"), "{log}");
}

#[test]
fn components_tells_each_problem_once_and_keeps_no_log_file() {
    let sandbox = with_problems();
    let run = sandbox.run(&["components"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stderr.matches(&dotenv_line(&sandbox)).count(),
        1,
        "{}",
        run.stderr
    );
    assert_eq!(
        run.stderr
            .matches("unknown table [telegram] ignored")
            .count(),
        1,
        "{}",
        run.stderr
    );
    assert!(!sandbox.data().join("logs").exists());
}

#[test]
fn doctor_reports_an_unknown_table_only_as_a_check_line() {
    let sandbox = with_problems();
    let (run, json) = doctor(&sandbox);
    assert!(!run.stderr.contains("unknown table"), "{}", run.stderr);
    let config = checks(&json, "config");
    let unknown: Vec<_> = config
        .iter()
        .filter(|(_, m, _)| m.contains("unknown table [telegram] ignored"))
        .collect();
    assert_eq!(unknown.len(), 1, "{config:?}");
    assert_eq!(unknown[0].0, "warn");
}
