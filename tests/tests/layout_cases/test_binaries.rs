//! Each crate's integration tests are one binary, `tests/all.rs` (taud keeps three more, named in
//! `APART`): cargo's automatic discovery is off, so a file put in `tests/` and named nowhere would
//! never be compiled, let alone run. This checks that every `.rs` file directly in a crate's
//! `tests/` directory is either a binary the manifest lists or a module a binary declares.

use std::collections::BTreeSet;
use std::fs;

use super::repo;

/// The crates with integration tests, and the binaries besides `all` each may list.
const CRATES: &[(&str, &[&str])] = &[
    ("daemon", &["props", "process_wide", "store_crash"]),
    ("client", &[]),
    ("telegram", &[]),
    ("tests", &[]),
];

/// The binaries a manifest lists: each `[[test]]` table's `name`.
fn listed_binaries(manifest: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut in_test = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_test = line == "[[test]]";
        } else if in_test && let Some(value) = line.strip_prefix("name = ") {
            names.insert(value.trim_matches('"').to_string());
        }
    }
    names
}

/// The modules a binary's root declares without a `#[path]`: `mod name;` lines.
fn declared_modules(root: &str) -> BTreeSet<String> {
    root.lines()
        .filter_map(|line| line.trim().strip_prefix("mod "))
        .filter_map(|rest| rest.strip_suffix(';'))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_test_file_is_a_listed_binary_or_a_declared_module() {
    let mut problems = Vec::new();
    for (krate, apart) in CRATES {
        let dir = repo().join(krate);
        let manifest = fs::read_to_string(dir.join("Cargo.toml")).expect("a crate's manifest");
        if !manifest.contains("autotests = false") {
            problems.push(format!(
                "{krate}/Cargo.toml: `autotests = false` is missing"
            ));
        }
        let binaries = listed_binaries(&manifest);
        let expected: BTreeSet<String> = std::iter::once("all")
            .chain(apart.iter().copied())
            .map(str::to_string)
            .collect();
        if binaries != expected {
            problems.push(format!(
                "{krate}/Cargo.toml lists test binaries {binaries:?}, expected {expected:?}"
            ));
        }
        let mut declared = BTreeSet::new();
        for binary in &binaries {
            let root = dir.join("tests").join(format!("{binary}.rs"));
            let text = fs::read_to_string(&root).unwrap_or_default();
            declared.extend(declared_modules(&text));
        }
        let entries = fs::read_dir(dir.join("tests")).expect("a tests directory");
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            let Some(stem) = path
                .extension()
                .filter(|ext| *ext == "rs")
                .and_then(|_| path.file_stem())
                .and_then(|stem| stem.to_str())
            else {
                continue;
            };
            if !binaries.contains(stem) && !declared.contains(stem) {
                problems.push(format!(
                    "{krate}/tests/{stem}.rs is neither a listed binary nor a module of one: \
                     add `mod {stem};` to {krate}/tests/all.rs"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_manifest_reader_sees_each_test_table() {
    let manifest = "[package]\nname = \"x\"\n\n[[test]]\nname = \"all\"\npath = \"tests/all.rs\"\n\n[[bench]]\nname = \"b\"\n\n[[test]]\nname = \"props\"\n";
    let names: Vec<String> = listed_binaries(manifest).into_iter().collect();
    assert_eq!(names, vec!["all".to_string(), "props".to_string()]);
    let modules = declared_modules(
        "//! doc\nmod support;\nmod hub_turns;\n#[path = \"x.rs\"]\nmod cases {\n",
    );
    assert!(modules.contains("hub_turns") && modules.contains("support"));
    assert!(!modules.contains("cases {"));
}
