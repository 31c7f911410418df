//! `tau doctor` through the real binary: the checks of files and permissions (the sessions
//! directory or database, the persona, `user.md`, `.env` against `.env.example`, files and
//! directories open to others, files it cannot read). The other checks are in `doctor.rs`.

use crate::support;

use support::sandbox::{SECRET, Sandbox, checks, doctor, status};

#[test]
fn a_sessions_path_that_is_not_a_directory_fails() {
    let sandbox = Sandbox::healthy();
    sandbox.write("data/sessions", "not a directory");
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 1);
    assert_eq!(status(&json, "sessions"), ["fail"]);

    std::fs::remove_file(sandbox.data().join("sessions")).unwrap();
    std::fs::create_dir_all(sandbox.data().join("sessions/s1")).unwrap();
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 0);
    assert!(checks(&json, "sessions")[0].1.contains("(1 sessions)"));
}

#[test]
fn persona_problems() {
    let sandbox = Sandbox::healthy();
    sandbox.write("home/persona/persona.md", "<!-- only a note -->\n\n");
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 1);
    let (s, message, fix) = checks(&json, "persona")[0];
    assert_eq!(s, "fail");
    assert!(message.contains("empty"), "{message}");
    assert!(fix.unwrap().contains("tau init --force"));

    std::fs::remove_file(sandbox.home().join("persona/persona.md")).unwrap();
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 1);
    assert!(checks(&json, "persona")[0].1.contains("is missing"));

    // No persona directory with a tau.toml: taud would refuse to start.
    std::fs::remove_dir_all(sandbox.home().join("persona")).unwrap();
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 1, "{}", run.stdout);
    let (s, message, fix) = checks(&json, "persona")[0];
    assert_eq!(s, "fail");
    assert!(message.contains("refuses to start"), "{message}");
    assert!(fix.unwrap().contains("tau init"));

    // Neither a tau.toml nor a persona: the hub runs on the shipped persona.
    std::fs::remove_file(sandbox.home().join("tau.toml")).unwrap();
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(status(&json, "persona"), ["warn"]);
}

#[test]
fn user_md_missing_or_still_the_example_is_a_warning() {
    let sandbox = Sandbox::healthy();
    std::fs::copy(
        sandbox.home().join("persona/user.example.md"),
        sandbox.home().join("persona/user.md"),
    )
    .unwrap();
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 0);
    let (s, message, _) = checks(&json, "user")[0];
    assert_eq!(s, "warn");
    assert!(message.contains("made-up example"), "{message}");

    std::fs::remove_file(sandbox.home().join("persona/user.md")).unwrap();
    let (_, json) = doctor(&sandbox);
    let (s, message, fix) = checks(&json, "user")[0];
    assert_eq!(s, "warn");
    assert!(message.contains("formally"), "{message}");
    assert!(fix.unwrap().starts_with("cp "));
}

#[test]
fn dotenv_names_are_checked_against_env_example() {
    let sandbox = Sandbox::healthy();
    sandbox.write(
        "home/.env",
        &format!("ANTHROPIC_API_KEY={SECRET}\nANTROPIC_API_KEY={SECRET}\nbroken line\n"),
    );
    sandbox.chmod("home/.env", 0o600);
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let env = checks(&json, ".env");
    assert_eq!(env.len(), 2, "{env:?}");
    assert!(env[0].1.contains(".env:3"), "{:?}", env[0]);
    assert!(
        env[1].1.ends_with("does not list: ANTROPIC_API_KEY"),
        "{:?}",
        env[1]
    );
    assert!(env.iter().all(|(s, _, _)| *s == "warn"));
    assert!(!run.stdout.contains(SECRET));

    // Names added to .env.example are known.
    let mut example = sandbox.read("home/.env.example");
    example.push_str("# ANTROPIC_API_KEY=\n");
    sandbox.write("home/.env.example", &example);
    sandbox.write("home/.env", &format!("ANTROPIC_API_KEY={SECRET}\n"));
    let (_, json) = doctor(&sandbox);
    assert_eq!(status(&json, ".env"), ["ok"]);

    std::fs::remove_file(sandbox.home().join(".env.example")).unwrap();
    let (_, json) = doctor(&sandbox);
    let (s, _, fix) = checks(&json, ".env")[0];
    assert_eq!(s, "warn");
    assert!(fix.unwrap().contains("tau init"));
}

#[test]
fn private_files_open_to_others_fail_with_the_chmod_that_fixes_them() {
    let sandbox = Sandbox::healthy();
    std::fs::create_dir(sandbox.data().join("hub")).unwrap();
    sandbox.chmod("data/hub", 0o700);
    sandbox.write("data/hub/token", "t0ken");
    sandbox.chmod("data/hub/token", 0o600);
    sandbox.write("home/.env", "TAU_LANG=en\n");
    sandbox.chmod("home/.env", 0o600);
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let (s, message, _) = checks(&json, "permissions")[0];
    assert_eq!(s, "ok");
    assert!(message.contains("(4 of 4 exist)"), "{message}");

    sandbox.chmod("data", 0o755);
    sandbox.chmod("data/hub/token", 0o644);
    sandbox.chmod("home/.env", 0o640);
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 1);
    let fixes: Vec<String> = checks(&json, "permissions")
        .into_iter()
        .map(|(s, _, fix)| {
            assert_eq!(s, "fail");
            fix.unwrap().to_string()
        })
        .collect();
    assert_eq!(
        fixes,
        [
            format!("chmod 700 {}", sandbox.data().display()),
            format!("chmod 600 {}", sandbox.data().join("hub/token").display()),
            format!("chmod 600 {}", sandbox.home().join(".env").display()),
        ]
    );
    let text = sandbox.run(&["doctor"]);
    assert!(
        text.stdout.lines().any(|l| l
            == format!(
                "fail  permissions: {} is open to group or others (mode 0644); fix: chmod 600 {}",
                sandbox.data().join("hub/token").display(),
                sandbox.data().join("hub/token").display()
            )),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .lines()
            .any(|l| l == format!("next: chmod 700 {}", sandbox.data().display())),
        "{}",
        text.stdout
    );
}

/// Whether this process can still read `path` (true when it runs with privileges that ignore
/// file modes, as root does): a chmod 000 case is only meaningful when it cannot.
fn still_readable(path: &std::path::Path) -> bool {
    if path.is_dir() {
        std::fs::read_dir(path).is_ok()
    } else {
        std::fs::read(path).is_ok()
    }
}

#[test]
fn a_hub_directory_open_to_others_fails_with_chmod_700() {
    let sandbox = Sandbox::healthy();
    std::fs::create_dir(sandbox.data().join("hub")).unwrap();
    sandbox.chmod("data/hub", 0o755);
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 1, "{}", run.stdout);
    let permissions = checks(&json, "permissions");
    assert_eq!(permissions.len(), 1, "{permissions:?}");
    let (s, message, fix) = permissions[0];
    assert_eq!(s, "fail");
    assert!(message.contains("(mode 0755)"), "{message}");
    assert_eq!(
        fix,
        Some(format!("chmod 700 {}", sandbox.data().join("hub").display()).as_str())
    );
}

#[test]
fn an_unreadable_env_file_fails_and_the_other_checks_still_run() {
    let sandbox = Sandbox::healthy();
    let env_file = sandbox.home().join(".env");
    std::fs::write(&env_file, b"TAU_LANG=\xff\xfe\n").unwrap();
    sandbox.chmod("home/.env", 0o600);
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 1, "{}", run.stdout);
    let env_checks = checks(&json, ".env");
    let (s, message, fix) = env_checks[0];
    assert_eq!(s, "fail");
    assert!(
        message.starts_with(&format!("{}: cannot read", env_file.display())),
        "{message}"
    );
    assert!(fix.unwrap().contains("a file you can read"));
    assert_eq!(status(&json, "config"), ["ok"], "the rest still runs");
    assert_eq!(status(&json, "permissions"), ["ok"]);

    std::fs::write(&env_file, "TAU_LANG=en\n").unwrap();
    sandbox.chmod("home/.env", 0o000);
    if !still_readable(&env_file) {
        let (run, json) = doctor(&sandbox);
        assert_eq!(run.code, 1, "{}", run.stdout);
        assert_eq!(checks(&json, ".env")[0].0, "fail");
    }
}

#[test]
fn an_unreadable_sessions_directory_fails() {
    let sandbox = Sandbox::healthy();
    let sessions = sandbox.data().join("sessions");
    // A symlink to itself cannot be inspected, whoever runs the doctor.
    std::os::unix::fs::symlink(&sessions, &sessions).unwrap();
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 1, "{}", run.stdout);
    let (s, message, _) = checks(&json, "sessions")[0];
    assert_eq!(s, "fail");
    assert!(message.starts_with("cannot inspect"), "{message}");

    std::fs::remove_file(&sessions).unwrap();
    std::fs::create_dir(&sessions).unwrap();
    sandbox.chmod("data/sessions", 0o000);
    if !still_readable(&sessions) {
        let (run, json) = doctor(&sandbox);
        assert_eq!(run.code, 1, "{}", run.stdout);
        let (s, message, fix) = checks(&json, "sessions")[0];
        assert_eq!(s, "fail");
        assert!(message.starts_with("cannot read"), "{message}");
        assert_eq!(
            fix,
            Some(format!("chmod 700 {}", sessions.display()).as_str())
        );
    }
    sandbox.chmod("data/sessions", 0o700);
}

#[test]
fn with_the_sqlite_backend_the_database_file_is_checked() {
    let sandbox = Sandbox::healthy();
    let config = sandbox
        .read("home/tau.toml")
        .replace("backend = \"file\"", "backend = \"sqlite\"");
    sandbox.write("home/tau.toml", &config);
    let db = sandbox.data().join("sessions.db");

    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let (s, message, _) = checks(&json, "sessions")[0];
    assert_eq!(s, "ok");
    assert_eq!(
        message,
        format!("sqlite store at {} (created on first use)", db.display())
    );

    let mut header = b"SQLite format 3\0".to_vec();
    header.extend_from_slice(&[0u8; 84]);
    std::fs::write(&db, &header).unwrap();
    sandbox.chmod("data/sessions.db", 0o600);
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(
        checks(&json, "sessions")[0].1,
        format!("sqlite store at {}", db.display())
    );

    sandbox.chmod("data/sessions.db", 0o644);
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 1, "{}", run.stdout);
    let (s, _, fix) = checks(&json, "sessions")[0];
    assert_eq!(s, "fail");
    assert_eq!(fix, Some(format!("chmod 600 {}", db.display()).as_str()));

    std::fs::write(&db, "not a database at all").unwrap();
    sandbox.chmod("data/sessions.db", 0o600);
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 1, "{}", run.stdout);
    let (s, message, _) = checks(&json, "sessions")[0];
    assert_eq!(s, "fail");
    assert!(message.ends_with("is not an SQLite database"), "{message}");
}
