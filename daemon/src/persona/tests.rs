//! Tests of the loader as a whole: layout, reloads, breakage, context sources, the shipped persona.
use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tracing::Level;

use super::*;

/// 29.09.2026 15:30 in Istanbul (12:30 UTC), the seed's example.
fn seed_time() -> SystemTime {
    let ts: jiff::Timestamp = "2026-09-29T12:30:00Z".parse().unwrap();
    SystemTime::from(ts)
}

fn fixed_clock() -> Arc<dyn Clock> {
    Arc::new(seed_time)
}

fn source(value: Value) -> Arc<dyn ContextSource> {
    let Value::Object(map) = value else {
        panic!("a patch is an object")
    };
    Arc::new(move || Ok(map.clone()))
}

fn loader_with(dir: &Path, sources: Vec<Arc<dyn ContextSource>>) -> PersonaLoader {
    PersonaLoader::new(dir, "home", "hub", sources, fixed_clock()).unwrap()
}

fn loader(dir: &Path) -> PersonaLoader {
    loader_with(dir, vec![])
}

fn persona_dir(persona: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join(PERSONA_FILE), persona).unwrap();
    dir
}

fn set_mtime(path: &Path, time: SystemTime) {
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(time)
        .unwrap();
}

fn mtime(path: &Path) -> SystemTime {
    fs::metadata(path).unwrap().modified().unwrap()
}

const NOW_UNKNOWN: &str = "## Now\n- Date and time: 29.09.2026 15:30, Tuesday (Europe/Istanbul)\n- Profile: home\n- Host role: hub\n- Live nodes: unknown\n- Budget today: unknown";

/// Collects the WARN messages emitted while `f` runs on this thread.
fn warnings_during<R>(f: impl FnOnce() -> R) -> (R, Vec<String>) {
    let (result, lines) = crate::testing::logs_during(f);
    (result, crate::testing::at_level(&lines, Level::WARN))
}

#[test]
fn the_prompt_has_the_seed_layout_exactly() {
    let dir = persona_dir("You are tau.");
    fs::write(dir.path().join(USER_FILE), "Name: Deniz").unwrap();
    assert_eq!(
        loader(dir.path()).build_system_prompt(),
        format!("You are tau.\n\n## User\nName: Deniz\n\n{NOW_UNKNOWN}")
    );
}

#[test]
fn the_prompt_is_three_blocks_that_join_to_the_one_string() {
    let dir = persona_dir("You are tau.");
    let loader = loader(dir.path());
    let blocks = loader.build_system_content();
    assert_eq!(
        blocks,
        vec![
            SystemContentBlock::Text(format!("You are tau.\n\n## User\n{NO_USER_FILE}\n")),
            SystemContentBlock::CachePoint(CachePoint::default()),
            SystemContentBlock::Text(NOW_UNKNOWN.to_owned()),
        ]
    );
    assert_eq!(
        SystemContentBlock::join(&blocks),
        loader.build_system_prompt()
    );
}

#[test]
fn a_missing_or_empty_user_file_gives_the_formal_fallback() {
    let dir = persona_dir("P");
    let expected = format!("P\n\n## User\n{NO_USER_FILE}\n\n{NOW_UNKNOWN}");
    assert_eq!(loader(dir.path()).build_system_prompt(), expected);
    fs::write(dir.path().join(USER_FILE), "").unwrap();
    assert_eq!(loader(dir.path()).build_system_prompt(), expected);
    fs::write(dir.path().join(USER_FILE), "<!-- only a note -->\n\n").unwrap();
    assert_eq!(loader(dir.path()).build_system_prompt(), expected);
}

#[test]
fn a_user_file_that_is_removed_or_emptied_later_falls_back_too() {
    let dir = persona_dir("P");
    let user = dir.path().join(USER_FILE);
    fs::write(&user, "Name: Deniz").unwrap();
    let loader = loader(dir.path());
    assert!(
        loader
            .build_system_prompt()
            .contains("## User\nName: Deniz\n")
    );
    fs::write(&user, "").unwrap();
    assert!(loader.build_system_prompt().contains(NO_USER_FILE));
    fs::write(&user, "Name: Elif").unwrap();
    assert!(
        loader
            .build_system_prompt()
            .contains("## User\nName: Elif\n")
    );
    fs::remove_file(&user).unwrap();
    assert!(loader.build_system_prompt().contains(NO_USER_FILE));
}

#[test]
fn a_user_file_that_stops_being_utf8_keeps_its_last_good_version() {
    let dir = persona_dir("P");
    let user = dir.path().join(USER_FILE);
    fs::write(&user, "Name: Deniz").unwrap();
    let loader = loader(dir.path());
    let good = loader.build_system_prompt();
    fs::write(&user, b"Name: \xff\xfe broken").unwrap();
    let (prompts, warnings) = warnings_during(|| {
        (0..3)
            .map(|_| loader.build_system_prompt())
            .collect::<Vec<_>>()
    });
    assert!(prompts.iter().all(|prompt| *prompt == good));
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("not valid UTF-8"), "{warnings:?}");
}

#[test]
fn an_edit_applies_on_the_next_build() {
    let dir = persona_dir("First persona.");
    let path = dir.path().join(PERSONA_FILE);
    let loader = loader(dir.path());
    assert!(
        loader
            .build_system_prompt()
            .starts_with("First persona.\n\n## User\n")
    );
    fs::write(&path, "A second, longer persona.").unwrap();
    assert!(
        loader
            .build_system_prompt()
            .starts_with("A second, longer persona.\n\n## User\n")
    );
    fs::write(dir.path().join(USER_FILE), "Name: Deniz").unwrap();
    assert!(
        loader
            .build_system_prompt()
            .contains("## User\nName: Deniz\n")
    );
}

#[test]
fn a_file_whose_stamp_is_unchanged_is_not_read_again() {
    let dir = persona_dir("AAAA");
    let path = dir.path().join(PERSONA_FILE);
    let loader = loader(dir.path());
    assert!(loader.build_system_prompt().starts_with("AAAA\n"));
    let original = mtime(&path);
    // Same size, and the modification time put back: the stamp is unchanged, so the cache holds.
    fs::write(&path, "BBBB").unwrap();
    set_mtime(&path, original);
    assert!(loader.build_system_prompt().starts_with("AAAA\n"));
    // Only the mtime moves: now it is read again.
    set_mtime(&path, original + Duration::from_secs(5));
    assert!(loader.build_system_prompt().starts_with("BBBB\n"));
}

#[test]
fn a_persona_that_breaks_later_keeps_the_last_good_version_and_logs_once() {
    let dir = persona_dir("Good persona.");
    let path = dir.path().join(PERSONA_FILE);
    let loader = loader(dir.path());
    let good = loader.build_system_prompt();

    let breakages: [(&str, &dyn Fn()); 3] = [
        ("does not exist", &|| fs::remove_file(&path).unwrap()),
        ("is empty", &|| fs::write(&path, "").unwrap()),
        ("not valid UTF-8", &|| {
            fs::write(&path, b"\xc3\x28 bad").unwrap()
        }),
    ];
    for (expected, break_it) in breakages {
        break_it();
        let (prompts, warnings) = warnings_during(|| {
            (0..4)
                .map(|_| loader.build_system_prompt())
                .collect::<Vec<_>>()
        });
        assert!(prompts.iter().all(|prompt| *prompt == good), "{expected}");
        assert_eq!(warnings.len(), 1, "{expected}: {warnings:?}");
        assert!(warnings[0].contains(expected), "{warnings:?}");
        assert!(
            warnings[0].contains("keeping the last good version"),
            "{warnings:?}"
        );
    }

    fs::write(&path, "Fixed persona.").unwrap();
    assert!(loader.build_system_prompt().starts_with("Fixed persona.\n"));
}

#[test]
fn the_same_problem_is_logged_again_only_after_a_recovery() {
    let dir = persona_dir("Good.");
    let path = dir.path().join(PERSONA_FILE);
    let loader = loader(dir.path());
    let ((), warnings) = warnings_during(|| {
        fs::remove_file(&path).unwrap();
        loader.build_system_prompt();
        loader.build_system_prompt();
        fs::write(&path, "Back again.").unwrap();
        assert!(loader.build_system_prompt().starts_with("Back again.\n"));
        fs::remove_file(&path).unwrap();
        loader.build_system_prompt();
        loader.build_system_prompt();
    });
    assert_eq!(warnings.len(), 2, "{warnings:?}");
}

#[test]
fn html_comments_never_reach_the_model() {
    let dir = persona_dir(
        "<!-- header note -->\n# tau\n\nBe brief. <!-- inline -->\n<!--\nmulti\nline\n-->\nBe kind.\n",
    );
    fs::write(
        dir.path().join(USER_FILE),
        "<!--\nhow to fill this in\n-->\nName: <!-- real name here -->Deniz\n",
    )
    .unwrap();
    let prompt = loader(dir.path()).build_system_prompt();
    assert!(
        !prompt.contains("<!--") && !prompt.contains("-->"),
        "{prompt}"
    );
    assert!(
        prompt.starts_with("# tau\n\nBe brief.\n\nBe kind.\n\n## User\nName: Deniz\n\n## Now\n"),
        "{prompt}"
    );
}

#[test]
fn a_bad_persona_at_construction_is_an_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(PERSONA_FILE);
    let build = || PersonaLoader::new(dir.path(), "home", "hub", vec![], fixed_clock());

    let err = build().unwrap_err();
    assert!(matches!(err, PersonaError::Missing { .. }), "{err:?}");
    assert_eq!(err.path(), path);
    assert!(err.to_string().contains(&path.display().to_string()));

    fs::write(&path, "").unwrap();
    assert!(matches!(build().unwrap_err(), PersonaError::Empty { .. }));
    fs::write(&path, "<!-- just a note -->\n").unwrap();
    assert!(matches!(build().unwrap_err(), PersonaError::Empty { .. }));
    fs::write(&path, b"\xff").unwrap();
    assert!(matches!(build().unwrap_err(), PersonaError::NotUtf8 { .. }));
    fs::remove_file(&path).unwrap();
    fs::create_dir(&path).unwrap();
    let err = build().unwrap_err();
    assert!(matches!(err, PersonaError::Unreadable { .. }), "{err:?}");
    assert!(err.to_string().contains(&path.display().to_string()));
}

#[test]
fn context_sources_fill_the_now_block_in_order() {
    let dir = persona_dir("P");
    let loader = loader_with(
        dir.path(),
        vec![
            source(json!({"nodes": ["pi"], "budget": "fast 0,05 $ / 1 $"})),
            source(json!({"nodes": ["mac", "arm"]})),
            source(json!({"budget": "fast 0,12 $ / 1 $", "mood": "sunny"})),
        ],
    );
    assert!(
        loader
            .build_system_prompt()
            .ends_with("- Live nodes: mac, arm\n- Budget today: fast 0,12 $ / 1 $"),
        "{}",
        loader.build_system_prompt()
    );
}

#[test]
fn null_is_unknown_and_an_empty_node_list_is_none() {
    let dir = persona_dir("P");
    let loader = loader_with(
        dir.path(),
        vec![
            source(json!({"nodes": ["mac"], "budget": "1 $"})),
            source(json!({"nodes": [], "budget": null})),
        ],
    );
    assert!(
        loader
            .build_system_prompt()
            .ends_with("- Live nodes: none\n- Budget today: unknown")
    );
}

#[test]
fn a_failing_source_is_skipped_and_logged_once() {
    let dir = persona_dir("P");
    let loader = loader_with(
        dir.path(),
        vec![
            source(json!({"nodes": ["mac"]})),
            Arc::new(|| Err(ContextSourceError::new("node registry is down"))),
            source(json!({"budget": "2 $"})),
        ],
    );
    let (prompts, warnings) = warnings_during(|| {
        (0..3)
            .map(|_| loader.build_system_prompt())
            .collect::<Vec<_>>()
    });
    for prompt in &prompts {
        assert!(
            prompt.ends_with("- Live nodes: mac\n- Budget today: 2 $"),
            "{prompt}"
        );
    }
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("node registry is down"),
        "{warnings:?}"
    );
}

#[test]
fn empty_profile_and_role_read_unknown() {
    let dir = persona_dir("P");
    let loader = PersonaLoader::new(dir.path(), "", " \n", vec![], fixed_clock()).unwrap();
    assert!(
        loader
            .build_system_prompt()
            .contains("- Profile: unknown\n- Host role: unknown\n")
    );
}

#[test]
fn the_clock_is_read_on_every_build() {
    let dir = persona_dir("P");
    let minutes = Arc::new(Mutex::new(0u64));
    let ticking = Arc::clone(&minutes);
    let clock: Arc<dyn Clock> =
        Arc::new(move || seed_time() + Duration::from_secs(60 * *ticking.lock().unwrap()));
    let loader = PersonaLoader::new(dir.path(), "home", "hub", vec![], clock).unwrap();
    assert!(
        loader
            .build_system_prompt()
            .contains("29.09.2026 15:30, Tuesday")
    );
    *minutes.lock().unwrap() = 9 * 60 + 1;
    assert!(
        loader
            .build_system_prompt()
            .contains("30.09.2026 00:31, Wednesday")
    );
}

#[test]
fn the_shipped_persona_works_without_any_files() {
    let loader = PersonaLoader::shipped("default", "hub", vec![], fixed_clock());
    assert_eq!(loader.persona_path(), None);
    assert_eq!(loader.user_path(), None);
    let prompt = loader.build_system_prompt();
    let persona = watched_file::clean(SHIPPED_PERSONA);
    assert!(!persona.is_empty());
    assert_eq!(
        prompt,
        format!(
            "{persona}\n\n## User\n{NO_USER_FILE}\n\n{}",
            NOW_UNKNOWN.replace("Profile: home", "Profile: default")
        )
    );
}

#[test]
fn the_shipped_files_are_the_repository_files_and_hold_the_rules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("persona");
    assert_eq!(
        fs::read_to_string(root.join("persona.md")).unwrap(),
        SHIPPED_PERSONA
    );
    assert_eq!(
        fs::read_to_string(root.join("user.example.md")).unwrap(),
        SHIPPED_USER_EXAMPLE
    );
    let persona = watched_file::clean(SHIPPED_PERSONA);
    for rule in [
        "Turkish by default",
        "two sentences",
        "no jokes",
        "`unknown`",
        "Never invent facts",
    ] {
        assert!(persona.contains(rule), "persona.md lacks {rule:?}");
    }
    assert!(!persona.contains("<!--"));
    // The example is a usable user.md once copied: comments gone, facts left.
    let example = watched_file::clean(SHIPPED_USER_EXAMPLE);
    assert!(example.starts_with("### Name and address\n"), "{example}");
    assert!(!example.contains("<!--"));
}

#[test]
fn the_loader_can_be_shared_between_threads_while_the_file_changes() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<PersonaLoader>();

    let dir = persona_dir("Old persona.");
    let path = dir.path().join(PERSONA_FILE);
    let loader = Arc::new(loader(dir.path()));
    let old = loader.build_system_prompt();
    let new = old.replace("Old persona.", "New persona, longer.");
    std::thread::scope(|scope| {
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let loader = Arc::clone(&loader);
                scope.spawn(move || {
                    (0..200)
                        .map(|_| loader.build_system_prompt())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        // Saved the way editors save: a new file renamed over the old one.
        let saved = path.with_extension("md.tmp");
        fs::write(&saved, "New persona, longer.").unwrap();
        fs::rename(&saved, &path).unwrap();
        for reader in readers {
            for prompt in reader.join().unwrap() {
                assert!(prompt == old || prompt == new, "{prompt}");
            }
        }
    });
    assert_eq!(loader.build_system_prompt(), new);
}
