//! Files someone loosened are put back to 0700/0600 at the next start, each named in the log; a
//! `.env` others can read is warned about and left as it is.

use super::*;

#[test]
fn loosened_files_are_made_private_again_at_start_and_a_readable_env_is_named() {
    let install = Install::new();
    let set = |path: &std::path::Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    let sessions = install.data.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    set(&install.data, 0o755);
    set(&sessions, 0o755);
    let routines = install.data.join("routines.json");
    let spend = install.data.join("spend.json");
    std::fs::write(&routines, r#"{"version": 2, "routines": []}"#).unwrap();
    std::fs::write(&spend, r#"{"version": 1, "days": {}}"#).unwrap();
    set(&routines, 0o644);
    set(&spend, 0o644);
    let env_file = install.home.join(".env");
    std::fs::write(&env_file, "TAU_LANG=en\n").unwrap();
    set(&env_file, 0o644);

    let mut hub = install.spawn();
    install.wait_ready(hub.pid());
    for dir in [&install.data, &sessions] {
        assert_eq!(mode(dir), 0o700, "{}", dir.display());
    }
    assert_eq!(mode(&routines), 0o600);
    assert_eq!(mode(&spend), 0o600);
    assert_eq!(
        mode(&env_file),
        0o644,
        "the person's file is only warned about"
    );
    hub.signal(Signal::SIGTERM);
    hub.wait_exit();
    let stderr = hub.stderr();
    assert!(stderr.contains("routines.json was 0644"), "{stderr}");
    assert!(stderr.contains("spend.json was 0644"), "{stderr}");
    assert!(stderr.contains(".env is 0644"), "{stderr}");
}
