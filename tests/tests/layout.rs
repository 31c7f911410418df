//! The house rules of the source tree, checked on the files themselves (see ARCHITECTURE.md, "Code
//! map" and "Rules that never bend"): each room of `taud` imports only the rooms below it, so no two
//! rooms import each other; no two modules of a crate share a name; no source file is longer than
//! 600 lines; no function of the chat client or the relay is longer than 80 lines; neither the
//! client nor the client library links the daemon (whose tests alone may use the library); no two
//! sibling modules of any crate import each other, directly or through others (module
//! `sibling_cycles`); the hub's sub-rooms import each other only downwards and none imports its
//! front door (module `hub_parts`); ARCHITECTURE.md names only paths and items that exist and says
//! what each room may import as the table below does, and README.md stays short (module `map`);
//! every integration test file is compiled into its crate's one test binary (module
//! `test_binaries`); these modules are in `layout_cases/`.
//!
//! Only non-test code is read for imports: `tests.rs` files and every `#[cfg(test)]` item (the
//! test module, wherever it is, and test-only `use`s and functions) are left out, and so are
//! comments.

#![allow(clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

#[path = "layout_cases/sibling_cycles.rs"]
mod sibling_cycles;

/// The hub's front door and sub-rooms: which module of `daemon/src/hub/` may import which.
#[path = "layout_cases/hub_parts.rs"]
mod hub_parts;

/// The rooms of `taud` and the rooms each may import (non-test code). `testing` is compiled only
/// for tests and benchmarks, so no room may import it.
const DAEMON_ROOMS: &[(&str, &[&str])] = &[
    ("message", &[]),
    ("clock", &[]),
    ("listen", &[]),
    ("tool", &["message", "clock"]),
    ("gate", &["message", "tool"]),
    ("model", &["message", "tool"]),
    ("agent", &["message", "tool", "gate", "model"]),
    ("persona", &["message", "clock", "agent"]),
    ("provider", &["message", "tool", "model", "clock"]),
    ("store", &["message"]),
    ("context", &["message", "model", "agent", "store"]),
    ("mcp", &["message", "tool", "clock"]),
    ("spend", &["message", "clock", "model"]),
    ("routine", &["message", "clock", "tool", "gate"]),
    ("node", &["message", "clock", "tool"]),
    (
        "hub",
        &[
            "message", "clock", "tool", "gate", "model", "agent", "persona", "provider", "store",
            "context", "mcp", "spend", "routine",
        ],
    ),
    ("host", &["listen"]),
    (
        "rpc",
        &[
            "message", "tool", "gate", "model", "store", "mcp", "hub", "host", "listen", "spend",
            "routine",
        ],
    ),
    (
        "link",
        &["message", "clock", "tool", "listen", "host", "mcp", "node"],
    ),
    (
        "web",
        &[
            "message", "tool", "gate", "node", "routine", "hub", "host", "listen",
        ],
    ),
    ("services", &["host", "hub", "rpc", "link", "web"]),
    (
        "testing",
        &[
            "message", "tool", "gate", "model", "agent", "provider", "store",
        ],
    ),
];

/// The map test: ARCHITECTURE.md against the sources and this table.
#[path = "layout_cases/map.rs"]
mod map;

/// Every integration test file is compiled: one binary per crate, its files declared modules.
#[path = "layout_cases/test_binaries.rs"]
mod test_binaries;

const MAX_FILE_LINES: usize = 600;
const MAX_FN_LINES: usize = 80;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the repository")
        .to_path_buf()
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n == "target") {
                    continue;
                }
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The code of a file without its comment lines and without its `#[cfg(test)]` items (the test
/// module, wherever it is, and any test-only `use`, `fn` or `impl`).
fn production_code(text: &str) -> String {
    let code = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = String::with_capacity(code.len());
    let mut rest = code.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        rest = &rest[at + "#[cfg(test)]".len()..];
        rest = &rest[item_end(rest)..];
    }
    out.push_str(rest);
    out
}

/// Where the item at the start of `code` (after any attributes) ends: after its `;` or after the
/// brace that closes its body, whichever comes first. Braces in string (raw ones too) and
/// character literals are skipped.
fn item_end(code: &str) -> usize {
    let bytes = code.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'r' if i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_') => {
                let hashes = bytes[i + 1..].iter().take_while(|b| **b == b'#').count();
                if bytes.get(i + 1 + hashes) == Some(&b'"') {
                    let close: Vec<u8> = std::iter::once(b'"')
                        .chain(std::iter::repeat_n(b'#', hashes))
                        .collect();
                    let body = i + 2 + hashes;
                    i = bytes[body..]
                        .windows(close.len())
                        .position(|w| w == close.as_slice())
                        .map_or(bytes.len(), |at| body + at + close.len() - 1);
                }
            }
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'\'' if bytes.get(i + 2) == Some(&b'\'') => i += 2,
            b'\'' if bytes.get(i + 1) == Some(&b'\\') => {
                i += 2;
                while i < bytes.len() && bytes[i] != b'\'' {
                    i += 1;
                }
            }
            b'[' | b'(' | b'{' => depth += 1,
            b']' | b')' | b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 && bytes[i] == b'}' {
                    return i + 1;
                }
            }
            b';' if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    bytes.len()
}

/// The rooms named after `crate::` in `code`, including those inside `crate::{a, b::c}`.
fn crate_imports(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `taud::crate_x` and the like
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item = String::new();
            let mut at_item_start = true;
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 1 => {
                        at_item_start = true;
                        if !item.is_empty() {
                            found.insert(std::mem::take(&mut item));
                        }
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 {
                    if !item.is_empty() {
                        found.insert(std::mem::take(&mut item));
                    }
                    break;
                }
                if depth == 1 && at_item_start {
                    if c.is_alphanumeric() || c == '_' {
                        item.push(c);
                    } else if !item.is_empty() {
                        found.insert(std::mem::take(&mut item));
                        at_item_start = false;
                    }
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            found.insert(name);
        }
    }
    found
}

fn daemon_room_imports() -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let src = repo().join("daemon/src");
    let rooms: BTreeSet<&str> = DAEMON_ROOMS.iter().map(|(r, _)| *r).collect();
    let mut edges: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in rust_files(&src) {
        let relative = file.strip_prefix(&src).expect("under src");
        let first = relative
            .components()
            .next()
            .expect("a path")
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        if first == "lib" || first == "main" {
            continue;
        }
        let stem = file.file_stem().expect("a file name").to_string_lossy();
        if stem == "tests" || stem.starts_with("tests_") {
            continue;
        }
        let text = fs::read_to_string(&file).expect("readable source");
        for import in crate_imports(&production_code(&text)) {
            if import != first && rooms.contains(import.as_str()) {
                edges
                    .entry(first.clone())
                    .or_default()
                    .entry(import)
                    .or_default()
                    .insert(relative.display().to_string());
            }
        }
    }
    edges
}

#[test]
fn every_room_of_the_daemon_is_listed_here() {
    let src = repo().join("daemon/src");
    let listed: BTreeSet<String> = DAEMON_ROOMS.iter().map(|(r, _)| r.to_string()).collect();
    let present: BTreeSet<String> = fs::read_dir(&src)
        .expect("daemon/src")
        .flatten()
        .map(|e| {
            e.file_name()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_owned()
        })
        .filter(|n| n != "lib" && n != "main")
        .collect();
    assert_eq!(present, listed, "rooms in daemon/src vs this test's table");
}

#[test]
fn daemon_rooms_import_only_the_rooms_below_them() {
    let allowed: BTreeMap<&str, BTreeSet<&str>> = DAEMON_ROOMS
        .iter()
        .map(|(room, deps)| (*room, deps.iter().copied().collect()))
        .collect();
    let mut broken = Vec::new();
    for (room, deps) in daemon_room_imports() {
        let Some(ok) = allowed.get(room.as_str()) else {
            continue;
        };
        for (dep, files) in deps {
            if !ok.contains(dep.as_str()) {
                broken.push(format!("{room} imports {dep} in {files:?}"));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "imports against the layering:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_allowed_imports_have_no_cycle() {
    // A room may only import rooms listed before it in `DAEMON_ROOMS`, which makes the table a DAG.
    let order: BTreeMap<&str, usize> = DAEMON_ROOMS
        .iter()
        .enumerate()
        .map(|(i, (room, _))| (*room, i))
        .collect();
    for (i, (room, deps)) in DAEMON_ROOMS.iter().enumerate() {
        for dep in *deps {
            assert!(
                order[dep] < i,
                "{room} may import {dep}, which is not listed before it"
            );
            assert_ne!(*dep, "testing", "{room} may not import testing");
        }
    }
}

#[test]
fn the_import_reader_sees_grouped_and_plain_paths() {
    let code = "use crate::{agent::X, gate, tool::{A, B}};\nuse crate::store::Y;\nfn f() { crate::clock::now(); }";
    let found: Vec<String> = crate_imports(code).into_iter().collect();
    assert_eq!(found, ["agent", "clock", "gate", "store", "tool"]);
    let code = "//! see crate::hub\nfn f() {}\n#[cfg(test)]\nmod tests { use crate::testing::X; }";
    assert!(crate_imports(&production_code(code)).is_empty());
    let code = "#[cfg(test)]\nuse crate::a::X;\n#[cfg(test)]\n#[path = \"t.rs\"]\nmod t;\n#[cfg(test)]\nmod tests {\n    fn f() { let s = \"}\"; let c = '{'; let r = r#\"}\"\"#; }\n}\nfn g(x: &crate::b::Y) {}\n#[cfg(test)]\nfn h() { crate::c::z(); }";
    let found: Vec<String> = crate_imports(&production_code(code)).into_iter().collect();
    assert_eq!(found, ["b"]);
}

fn module_names(src: &Path) -> BTreeMap<String, Vec<String>> {
    let mut names: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in rust_files(src) {
        let relative = file.strip_prefix(src).expect("under src");
        let stem = file
            .file_stem()
            .expect("a name")
            .to_string_lossy()
            .into_owned();
        let name = match stem.as_str() {
            "lib" | "main" if relative.parent() == Some(Path::new("")) => continue,
            "mod" => relative
                .parent()
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned())
                .expect("mod.rs sits in a directory"),
            _ => stem,
        };
        if name == "tests" || name.starts_with("tests_") {
            continue;
        }
        names
            .entry(name)
            .or_default()
            .push(relative.display().to_string());
    }
    names
}

#[test]
fn no_two_modules_of_a_crate_share_a_name() {
    let mut shared = Vec::new();
    for crate_src in [
        "src",
        "daemon/src",
        "client-lib/src",
        "client/src",
        "telegram/src",
    ] {
        for (name, files) in module_names(&repo().join(crate_src)) {
            if files.len() > 1 {
                shared.push(format!("{crate_src}: `{name}` in {files:?}"));
            }
        }
    }
    assert!(
        shared.is_empty(),
        "modules sharing a name:\n{}",
        shared.join("\n")
    );
}

#[test]
fn no_source_file_is_longer_than_the_limit() {
    let root = repo();
    let mut long = Vec::new();
    for dir in [
        "src",
        "daemon",
        "client-lib",
        "client",
        "telegram",
        "tests",
        "build.rs",
    ] {
        let path = root.join(dir);
        let files = if path.is_file() {
            vec![path]
        } else {
            rust_files(&path)
        };
        for file in files {
            let lines = fs::read_to_string(&file).expect("readable").lines().count();
            if lines > MAX_FILE_LINES {
                long.push(format!(
                    "{} has {lines} lines",
                    file.strip_prefix(&root).expect("in repo").display()
                ));
            }
        }
    }
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// The functions of `text` longer than `max` lines, as `name (lines)`; braces in strings and
/// comments are rare enough in this code that counting them all is exact here.
fn long_functions(text: &str, max: usize) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let is_fn = [
            "fn ",
            "pub fn ",
            "pub(crate) fn ",
            "pub(super) fn ",
            "async fn ",
            "pub async fn ",
            "pub(crate) async fn ",
        ]
        .iter()
        .any(|p| trimmed.starts_with(p));
        if !is_fn {
            continue;
        }
        let mut depth = 0i32;
        let mut opened = false;
        for (j, body) in lines.iter().enumerate().skip(i) {
            if !opened && body.trim_end().ends_with(';') && !body.contains('{') {
                break; // a declaration in a trait
            }
            for c in body.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if opened && depth == 0 {
                let length = j - i + 1;
                if length > max {
                    let name: String = trimmed
                        .split("fn ")
                        .nth(1)
                        .unwrap_or("")
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    out.push(format!("{name} ({length} lines)"));
                }
                break;
            }
        }
    }
    out
}

#[test]
fn chat_and_relay_functions_stay_short() {
    let root = repo();
    let mut long = Vec::new();
    for dir in ["client/src/chat", "client-lib/src/relay"] {
        for file in rust_files(&root.join(dir)) {
            let text = fs::read_to_string(&file).expect("readable");
            for f in long_functions(&production_code(&text), MAX_FN_LINES) {
                long.push(format!(
                    "{}: {f}",
                    file.strip_prefix(&root).expect("in repo").display()
                ));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn the_function_reader_measures_bodies() {
    let short = "fn a() {\n    1\n}\n";
    assert!(long_functions(short, 3).is_empty());
    let long =
        "pub fn b(x: u8) -> u8 {\n    if x > 1 {\n        2\n    } else {\n        3\n    }\n}\n";
    assert_eq!(long_functions(long, 3), ["b (7 lines)"]);
}

#[test]
fn the_client_never_links_the_daemon() {
    let manifest = fs::read_to_string(repo().join("client/Cargo.toml")).expect("client manifest");
    assert!(
        !manifest.lines().any(|l| l.trim_start().starts_with("taud")),
        "client/Cargo.toml depends on taud"
    );
}

#[test]
fn the_client_library_never_links_the_daemon_and_the_daemon_only_tests_with_it() {
    let library =
        fs::read_to_string(repo().join("client-lib/Cargo.toml")).expect("client library manifest");
    assert!(
        !library.lines().any(|l| l.trim_start().starts_with("taud")),
        "client-lib/Cargo.toml depends on taud"
    );
    let daemon = fs::read_to_string(repo().join("daemon/Cargo.toml")).expect("daemon manifest");
    // Its tests and benchmarks connect as a client does (a dev-dependency); the daemon never
    // links the client library.
    let dependencies = daemon
        .split("[dev-dependencies]")
        .next()
        .expect("the part before dev-dependencies");
    assert!(
        !dependencies
            .lines()
            .any(|l| l.trim_start().starts_with("tau-client")),
        "daemon/Cargo.toml depends on tau-client"
    );
}

#[test]
fn the_telegram_channel_never_links_the_daemon() {
    let manifest =
        fs::read_to_string(repo().join("telegram/Cargo.toml")).expect("telegram manifest");
    // Its tests may run a real hub (a dev-dependency); the library itself never links taud.
    let dependencies = manifest
        .split("[dev-dependencies]")
        .next()
        .expect("the part before dev-dependencies");
    assert!(
        !dependencies
            .lines()
            .any(|l| l.trim_start().starts_with("taud")),
        "telegram/Cargo.toml depends on taud"
    );
}
