//! The map stays true: every path and item ARCHITECTURE.md names exists, and its paragraph for each
//! room of `taud` says what `DAEMON_ROOMS` says that room may import. The convention the map is
//! written in is its own section "Reading the map"; in short:
//!
//! - A path is a code span made of letters, digits, `_`, `-`, `.` and `/` that contains a `/` or
//!   ends in `.rs`, `.proto`, `.py` or `.sh`. It is read from the `src/` of the crate whose
//!   section it is in (a heading naming a directory that ends in `src/`; elsewhere
//!   `daemon/src/`), else from the repository root, and must exist there.
//! - Code spans right after a path, separated by blanks, `,`, `and` or `or`, are items defined in
//!   that file (or under that directory): `rpc/calls.rs` `decide`, `hub/approvals/decide.rs`
//!   `ApprovalRegistry::decide`.
//! - `Type::member` anywhere names a member (a `fn`, `const`, `type` or enum variant) of a type
//!   defined in the workspace's sources, found where the type is defined or implemented.
//!   `module::item` names an item from the crate's root (`store::store_io`, also `crate::`,
//!   `tau_api::`, `taud::`, `tau_client::`, `tau_telegram::`); a first segment that is no module of
//!   the crate is someone else's (`std::`, `tonic::`) and is not checked.
//! - A CamelCase name alone (`HubCore`) is a Rust item or a proto message, enum, service or rpc.
//! - A paragraph that opens with a bold room name (`**`gate/`**`) in the `taud` section says
//!   `May import:` and the rooms, or `nothing in the crate`, ending with a full stop.
//!
//! Also: README.md stays within [`MAX_README_LINES`], and it, the map, `proto/README.md` and
//! `docs/benchmarks.md` link only to files that exist.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use super::{DAEMON_ROOMS, repo, rust_files};

#[path = "map_sources.rs"]
mod sources;
use sources::{Defs, Sources, is_ident_path};

/// The crate directory paths are read from outside a crate's section.
const DEFAULT_BASE: &str = "daemon/src/";
/// The `src/` directories of the workspace's crates, by the name code calls them.
const CRATES: &[(&str, &str)] = &[
    ("tau_api", "src/"),
    ("taud", "daemon/src/"),
    ("tau_client", "client-lib/src/"),
    ("tau_telegram", "telegram/src/"),
];

/// One code span of the map, with the crate directory in force where it sits.
#[derive(Debug, Clone, PartialEq)]
struct Span {
    text: String,
    line: usize,
    base: String,
    /// What lies between the previous span's end and this span's start.
    gap_before: String,
}

/// The code spans outside fenced blocks, in order.
fn spans(markdown: &str) -> Vec<Span> {
    let mut out = Vec::new();
    let mut base = DEFAULT_BASE.to_owned();
    let mut fenced = false;
    let mut gap = String::new();
    for (i, line) in markdown.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            gap.push('\n');
            continue;
        }
        if fenced {
            continue;
        }
        let parts: Vec<&str> = line.split('`').collect();
        if line.starts_with('#') {
            base = parts
                .iter()
                .skip(1)
                .step_by(2)
                .find(|p| p.ends_with("src/"))
                .map_or(DEFAULT_BASE, |p| *p)
                .to_owned();
        }
        // An odd count of backticks leaves the last part as text: spans never cross a line here.
        for (j, part) in parts.iter().enumerate() {
            if j % 2 == 1 && j + 1 < parts.len() {
                out.push(Span {
                    text: (*part).to_owned(),
                    line: i + 1,
                    base: base.clone(),
                    gap_before: std::mem::take(&mut gap),
                });
            } else {
                gap.push_str(part);
            }
        }
        gap.push('\n');
    }
    out
}

fn is_path(text: &str) -> bool {
    let charset = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c));
    let looks = text.contains('/')
        || [".rs", ".proto", ".py", ".sh"]
            .iter()
            .any(|e| text.ends_with(e));
    charset
        && looks
        && !text.starts_with('/')
        && !text.contains("//")
        && text.contains(|c: char| c.is_ascii_alphabetic())
}

/// Where `path` resolves: the span's crate directory first, then the repository root.
fn resolve(root: &Path, base: &str, path: &str) -> Option<PathBuf> {
    [root.join(base).join(path), root.join(path)]
        .into_iter()
        .find(|p| p.exists())
}

/// A gap that lists items after a file: blanks, commas, `and`, `or`.
fn is_list_gap(gap: &str) -> bool {
    gap.split(|c: char| c.is_whitespace() || c == ',')
        .all(|w| w.is_empty() || w == "and" || w == "or")
}

/// The problems with the paths and items the map names.
fn check_names(root: &Path, sources: &Sources, spans: &[Span]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut files_in_force: Option<(String, Vec<PathBuf>)> = None;
    for span in spans {
        let text = span.text.as_str();
        let at = span.line;
        if is_path(text) {
            files_in_force = None;
            match resolve(root, &span.base, text) {
                None => problems.push(format!("line {at}: path `{text}` does not exist")),
                Some(found) => {
                    let files = if found.is_dir() {
                        rust_files(&found)
                    } else {
                        vec![found]
                    };
                    files_in_force = Some((text.to_owned(), files));
                }
            }
            continue;
        }
        if let Some((path, files)) = &files_in_force
            && is_ident_path(text)
            && is_list_gap(&span.gap_before)
        {
            if !sources.defined_in(files, text) {
                problems.push(format!("line {at}: `{path}` does not define `{text}`"));
            }
            continue;
        }
        files_in_force = None;
        if let Some(problem) = check_unfiled(root, sources, &span.base, text) {
            problems.push(format!("line {at}: {problem}"));
        }
    }
    problems
}

/// An item named without its file: `Type::member`, `module::item` or a CamelCase name.
fn check_unfiled(root: &Path, sources: &Sources, base: &str, text: &str) -> Option<String> {
    if !is_ident_path(text) {
        return None;
    }
    let segments: Vec<&str> = text.split("::").collect();
    let first = segments[0];
    if first.starts_with(|c: char| c.is_ascii_uppercase()) {
        let known = if segments.len() == 1 {
            !is_camel_case(first) || sources.anywhere(first) || sources.in_proto(first)
        } else {
            sources.defined_in(&sources.all_files(), text)
        };
        return (!known).then(|| format!("`{text}` is not defined in the workspace's sources"));
    }
    if segments.len() == 1 {
        return None;
    }
    let (crate_dir, rest) = match CRATES.iter().find(|(name, _)| *name == first) {
        Some((_, dir)) => (*dir, &segments[1..]),
        None if first == "crate" => (base, &segments[1..]),
        None => (base, &segments[..]),
    };
    let dir = root.join(crate_dir);
    let is_module = |parent: &Path, name: &str| {
        parent.join(format!("{name}.rs")).is_file() || parent.join(name).join("mod.rs").is_file()
    };
    if rest.first().is_none_or(|m| !is_module(&dir, m)) && crate_dir == base && first != "crate" {
        return None; // not a module of this crate: another crate's path
    }
    let mut module = dir;
    let mut at = 0;
    while at < rest.len() && is_module(&module, rest[at]) {
        module = module.join(rest[at]);
        at += 1;
    }
    if at == rest.len() {
        return None; // the whole path is modules, and they exist
    }
    let mut files = rust_files(&module);
    files.push(module.with_extension("rs"));
    files.retain(|f| f.is_file());
    let item = rest[at..].join("::");
    (!sources.defined_in(&files, &item))
        .then(|| format!("`{text}`: no `{item}` in `{}`", relative(root, &module)))
}

fn is_camel_case(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_uppercase())
        && name.contains(|c: char| c.is_ascii_lowercase())
        && !name.contains('_')
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The map's paragraphs about the rooms of `taud`: room → the rooms it says the room may import.
fn room_paragraphs(markdown: &str) -> (BTreeMap<String, Option<BTreeSet<String>>>, Vec<String>) {
    let mut rooms = BTreeMap::new();
    let mut problems = Vec::new();
    let mut in_daemon = false;
    let mut paragraph: Vec<&str> = Vec::new();
    let mut flush = |paragraph: &mut Vec<&str>, rooms: &mut BTreeMap<_, _>| {
        let text = paragraph.join(" ");
        paragraph.clear();
        let Some(rest) = text.strip_prefix("**`") else {
            return;
        };
        let Some(end) = rest.find("`**") else { return };
        let room = rest[..end]
            .trim_end_matches('/')
            .trim_end_matches(".rs")
            .to_owned();
        let imports = text.split_once("May import:").map(|(_, after)| {
            let sentence = after.split(". ").next().unwrap_or(after);
            sentence
                .split('`')
                .skip(1)
                .step_by(2)
                .map(|s| s.trim_end_matches('/').to_owned())
                .collect::<BTreeSet<String>>()
        });
        if rooms.insert(room.clone(), imports).is_some() {
            problems.push(format!("room `{room}` has two paragraphs"));
        }
    };
    for line in markdown.lines() {
        if line.starts_with('#') {
            flush(&mut paragraph, &mut rooms);
            in_daemon = line.contains("`daemon/src/`");
        } else if line.trim().is_empty() {
            flush(&mut paragraph, &mut rooms);
        } else if in_daemon {
            paragraph.push(line.trim());
        }
    }
    flush(&mut paragraph, &mut rooms);
    (rooms, problems)
}

/// The problems with the map's room paragraphs against `DAEMON_ROOMS`.
fn check_rooms(markdown: &str) -> Vec<String> {
    let (said, mut problems) = room_paragraphs(markdown);
    for (room, deps) in DAEMON_ROOMS {
        let table: BTreeSet<String> = deps.iter().map(|d| (*d).to_owned()).collect();
        match said.get(*room) {
            None => problems.push(format!("room `{room}` has no paragraph (**`{room}/`** …)")),
            Some(None) => {
                problems.push(format!("room `{room}`: its paragraph has no `May import:`"))
            }
            Some(Some(map)) if *map != table => problems.push(format!(
                "room `{room}`: the map says it may import {map:?}, tests/tests/layout.rs {table:?}"
            )),
            Some(Some(_)) => {}
        }
    }
    for room in said.keys() {
        if !DAEMON_ROOMS.iter().any(|(r, _)| r == room) {
            problems.push(format!(
                "room `{room}` is in the map but not in DAEMON_ROOMS"
            ));
        }
    }
    problems
}

fn architecture() -> String {
    fs::read_to_string(repo().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md at the root")
}

/// The README's length limit: what tau is, the two commands, daily use, configuration, where to
/// read more; the rest lives in the documents it links to.
const MAX_README_LINES: usize = 300;

/// The documents that link to each other, from the repository root.
const DOCUMENTS: &[&str] = &[
    "README.md",
    "ARCHITECTURE.md",
    "proto/README.md",
    "docs/benchmarks.md",
];

/// The local targets of the markdown links in `markdown` (`[text](target)`, anchors dropped).
fn local_links(markdown: &str) -> Vec<String> {
    markdown
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split_once(')').map(|(target, _)| target))
        .map(|target| target.split('#').next().unwrap_or(target).to_owned())
        .filter(|target| !target.is_empty() && !target.contains("://"))
        .collect()
}

#[test]
fn every_path_and_item_the_map_names_exists() {
    let root = repo();
    let sources = Sources::read(&root);
    let problems = check_names(&root, &sources, &spans(&architecture()));
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md names what is not there ({} problems; see its \"Reading the map\"):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_map_says_what_each_room_may_import() {
    let problems = check_rooms(&architecture());
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md's rooms of taud against DAEMON_ROOMS:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_readme_stays_short_and_the_documents_link_what_exists() {
    let root = repo();
    let mut problems = Vec::new();
    let readme = fs::read_to_string(root.join("README.md")).expect("README.md at the root");
    let lines = readme.lines().count();
    if lines > MAX_README_LINES {
        problems.push(format!(
            "README.md has {lines} lines (at most {MAX_README_LINES})"
        ));
    }
    for document in DOCUMENTS {
        let path = root.join(document);
        let text = fs::read_to_string(&path).unwrap_or_default();
        if text.is_empty() {
            problems.push(format!("{document} is missing or empty"));
        }
        let dir = path.parent().expect("a document sits in a directory");
        for target in local_links(&text) {
            if !dir.join(&target).exists() {
                problems.push(format!(
                    "{document} links to {target}, which does not exist"
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "the documents:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_map_reader_sees_spans_bases_and_gaps() {
    let text = "# Top\n`a/b.rs` `f`, `g`\n```text\n`not/read.rs`\n```\n\
                ### `x` (`client/src/`)\n`c.rs` and `D`";
    let found: Vec<(String, usize, String)> = spans(text)
        .into_iter()
        .map(|s| (s.text, s.line, s.base))
        .collect();
    let daemon = DEFAULT_BASE.to_owned();
    let client = "client/src/".to_owned();
    assert_eq!(
        found,
        [
            ("a/b.rs".to_owned(), 2, daemon.clone()),
            ("f".to_owned(), 2, daemon.clone()),
            ("g".to_owned(), 2, daemon),
            ("x".to_owned(), 6, client.clone()),
            ("client/src/".to_owned(), 6, client.clone()),
            ("c.rs".to_owned(), 7, client.clone()),
            ("D".to_owned(), 7, client),
        ]
    );
    assert!(is_path("hub/core.rs") && is_path("rpc/") && is_path("tests/python/drive_turn.py"));
    assert!(!is_path("/health") && !is_path("state.json") && !is_path("<TAU_DATA_DIR>/hub/"));
    assert!(is_list_gap(", ") && is_list_gap(" and\n") && !is_list_gap(" (the "));
    let links = local_links("[a](x.md) [b](https://e.org) [c](../d/y.md#top) `f(x)`");
    assert_eq!(links, ["x.md", "../d/y.md"]);
}

#[test]
fn the_room_reader_takes_the_sentence_after_may_import() {
    let text = "### `taud` (`daemon/src/`)\n\n\
                **`gate/`** — the gate. May import: `tool`,\n`message`. Then `store` is named.\n\n\
                **`clock.rs`** — May import: nothing in the crate.\n\n\
                ## Next\n\n**`other/`** — May import: `x`.";
    let (rooms, problems) = room_paragraphs(text);
    assert!(problems.is_empty());
    let gate: BTreeSet<String> = ["message", "tool"].map(str::to_owned).into();
    assert_eq!(rooms.get("gate"), Some(&Some(gate)));
    assert_eq!(rooms.get("clock"), Some(&Some(BTreeSet::new())));
    assert!(!rooms.contains_key("other"));
}

#[test]
fn the_definition_reader_finds_items_members_and_variants() {
    let code = "pub(crate) enum Kind {\n/// doc\n#[serde(rename = \"x\")]\n\
                Plain,\nTuple(u8),\nNamed { a: u8 },\n}\n\
                impl<T> Trait for Holder<T> {\n\
                async fn run(&self) -> &'static str { \"fn nope\" }\n}\n\
                // struct Hidden\nconst LIMIT: usize = 1;";
    let defs = Defs::read(code);
    let file = [PathBuf::from("one.rs")];
    let sources = Sources::from_defs(vec![(file[0].clone(), defs)]);
    for name in [
        "Kind",
        "Kind::Plain",
        "Kind::Tuple",
        "Kind::Named",
        "Holder::run",
        "LIMIT",
    ] {
        assert!(sources.defined_in(&file, name), "{name}");
    }
    for name in ["Hidden", "nope", "Kind::a", "Holder::missing", "Other::run"] {
        assert!(!sources.defined_in(&file, name), "{name}");
    }
}
