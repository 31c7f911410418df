//! No import cycles between sibling modules, in any crate: for the modules that share a parent
//! module, which sibling each one imports (through itself or any module below it) forms a graph,
//! and that graph has no cycle. Two siblings that import each other are one module in two files;
//! a reader cannot understand either alone.
//!
//! Read from non-test code (`production_code`): `crate::…`, `super::…` and `self::…` paths, in
//! `use` trees (`{…}` groups included) and in expressions. A path through a parent's own `use`
//! (`super::HubCore` where the parent has `use self::core::HubCore`) counts as a path to the
//! sibling it names. Test-only files (`tests.rs`, `tests_*.rs`, `*_tests.rs`) are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use super::{production_code, repo, rust_files};

/// The source trees checked, one per crate.
const CRATE_SOURCES: &[&str] = &[
    "src",
    "daemon/src",
    "client-lib/src",
    "client/src",
    "telegram/src",
    "tests/src",
];

/// A module path below the crate root (`["hub", "core"]`); the root is empty.
pub type ModPath = Vec<String>;

/// `(parent, from, to) → files`: a module below `parent` named `from` (or a file inside it) uses
/// its sibling `to` in those files.
pub type SiblingEdges = BTreeMap<(ModPath, String, String), BTreeSet<String>>;

/// The module a file defines, or `None` for a test-only file.
fn module_of(relative: &Path) -> Option<ModPath> {
    let stem = relative.file_stem()?.to_string_lossy().into_owned();
    if stem == "tests" || stem.starts_with("tests_") || stem.ends_with("_tests") {
        return None;
    }
    let mut path: ModPath = relative
        .parent()
        .into_iter()
        .flat_map(Path::components)
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let at_root = path.is_empty();
    match stem.as_str() {
        "mod" => {}
        "lib" | "main" if at_root => {}
        _ => path.push(stem),
    }
    Some(path)
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Parses the path tree at the start of `text` (`a::b::{c, d::{e as f, *}}`) into full paths, each
/// ending with the name it binds (the alias after `as`, else its last segment).
fn path_tree(text: &str) -> (Vec<(Vec<String>, String)>, usize) {
    let mut segments = Vec::new();
    let mut at = 0;
    let bytes = text.as_bytes();
    loop {
        let ident: String = text[at..]
            .chars()
            .take_while(|c| is_ident_char(*c))
            .collect();
        if ident.is_empty() {
            break;
        }
        at += ident.len();
        segments.push(ident);
        let rest = &text[at..];
        let trimmed = rest.trim_start();
        if !trimmed.starts_with("::") {
            break;
        }
        at += rest.len() - trimmed.len() + 2;
        let rest = &text[at..];
        let trimmed = rest.trim_start();
        at += rest.len() - trimmed.len();
        if trimmed.starts_with('{') {
            at += 1;
            let mut out = Vec::new();
            loop {
                let rest = &text[at..];
                let trimmed = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
                at += rest.len() - trimmed.len();
                if at >= bytes.len() || trimmed.starts_with('}') {
                    at += 1;
                    break;
                }
                let (inner, used) = path_tree(trimmed);
                if used == 0 {
                    at += trimmed.chars().next().map_or(1, char::len_utf8); // `*` and the like
                    continue;
                }
                at += used;
                for (tail, name) in inner {
                    let mut full = segments.clone();
                    full.extend(tail);
                    out.push((full, name));
                }
            }
            return (out, at);
        }
    }
    if segments.is_empty() {
        return (Vec::new(), 0);
    }
    let mut name = segments.last().cloned().unwrap_or_default();
    let rest = &text[at..];
    if let Some(alias) = rest.trim_start().strip_prefix("as ") {
        let alias = alias.trim_start();
        let alias_name: String = alias.chars().take_while(|c| is_ident_char(*c)).collect();
        at += rest.len() - alias.len() + alias_name.len();
        name = alias_name;
    }
    (vec![(segments, name)], at)
}

/// Every `crate::`, `super::` and `self::` path in `code`, as written, with the name each binds.
fn relative_paths(code: &str) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    for (at, _) in code.char_indices() {
        let rest = &code[at..];
        if !["crate::", "super::", "self::"]
            .iter()
            .any(|k| rest.starts_with(k))
        {
            continue;
        }
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| is_ident_char(c) || c == ':') {
            continue; // inside a longer path or name, read from its start
        }
        out.extend(path_tree(rest).0);
    }
    out
}

/// `path` as written in module `module`, made absolute; `None` when it leaves the crate.
fn absolute(module: &[String], path: &[String]) -> Option<ModPath> {
    let mut base: ModPath = module.to_vec();
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &path[1..];
        }
        Some("self") => rest = &path[1..],
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    base.extend(rest.iter().take_while(|s| *s != "self").cloned());
    Some(base)
}

/// The names each module binds with its own `use` declarations, as absolute paths.
fn use_bindings(
    files: &[(ModPath, String, String)],
) -> BTreeMap<ModPath, BTreeMap<String, ModPath>> {
    let mut bindings: BTreeMap<ModPath, BTreeMap<String, ModPath>> = BTreeMap::new();
    for (module, _, code) in files {
        for statement in code.split(';') {
            let Some(at) = statement.find("use ") else {
                continue;
            };
            let head = statement[..at].trim_end();
            let head = head.strip_suffix("pub").unwrap_or(head).trim_end();
            let head = match head.strip_suffix(')') {
                Some(h) => h.rfind("pub(").map_or(head, |i| h[..i].trim_end()),
                None => head,
            };
            if !(head.is_empty() || head.ends_with('}') || head.ends_with(']')) {
                continue;
            }
            let tree = statement[at + "use ".len()..].trim_start();
            for (path, name) in path_tree(tree).0 {
                if let Some(target) = absolute(module, &path) {
                    bindings
                        .entry(module.clone())
                        .or_default()
                        .insert(name, target);
                }
            }
        }
    }
    bindings
}

/// `path` with any prefix that names a `use` binding of a module replaced by what it binds.
fn resolve(
    mut path: ModPath,
    modules: &BTreeSet<ModPath>,
    bindings: &BTreeMap<ModPath, BTreeMap<String, ModPath>>,
) -> ModPath {
    for _ in 0..8 {
        let mut changed = false;
        for len in 1..=path.len() {
            let (parent, name) = (&path[..len - 1], &path[len - 1]);
            if modules.contains(&path[..len].to_vec()) {
                continue;
            }
            if let Some(target) = bindings.get(parent).and_then(|b| b.get(name))
                && target.as_slice() != &path[..len]
            {
                let mut next = target.clone();
                next.extend_from_slice(&path[len..]);
                path = next;
                changed = true;
            }
            break;
        }
        if !changed {
            break;
        }
    }
    path
}

/// The sibling imports of one crate's source tree.
pub fn sibling_edges(src: &Path) -> SiblingEdges {
    let mut files = Vec::new();
    for file in rust_files(src) {
        let relative = file.strip_prefix(src).expect("under src").to_path_buf();
        let Some(module) = module_of(&relative) else {
            continue;
        };
        let text = fs::read_to_string(&file).expect("readable source");
        files.push((
            module,
            relative.display().to_string(),
            production_code(&text),
        ));
    }
    let modules: BTreeSet<ModPath> = files.iter().map(|(m, _, _)| m.clone()).collect();
    let bindings = use_bindings(&files);
    let mut edges = SiblingEdges::new();
    for (module, file, code) in &files {
        for (path, _) in relative_paths(code) {
            let Some(target) = absolute(module, &path) else {
                continue;
            };
            let target = resolve(target, &modules, &bindings);
            let common = module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            if common >= module.len() || common >= target.len() {
                continue; // a module and its own ancestor or descendant
            }
            let parent = module[..common].to_vec();
            let mut sibling = parent.clone();
            sibling.push(target[common].clone());
            if modules.contains(&sibling) {
                edges
                    .entry((parent, module[common].clone(), target[common].clone()))
                    .or_default()
                    .insert(file.clone());
            }
        }
    }
    edges
}

/// The strongly connected components of more than one node (Tarjan), each sorted, in order.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, node: &'g str) {
            let i = self.index.len();
            self.index.insert(node, i);
            self.low.insert(node, i);
            self.stack.push(node);
            self.on_stack.insert(node);
            for next in self.graph.get(node).into_iter().flatten() {
                let next = next.as_str();
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = Vec::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(top);
                    component.push(top.to_owned());
                    if top == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node.as_str()) {
            walk.visit(node);
        }
    }
    walk.found.sort();
    walk.found
}

#[test]
fn no_two_sibling_modules_import_each_other() {
    let mut report = Vec::new();
    for crate_src in CRATE_SOURCES {
        let edges = sibling_edges(&repo().join(crate_src));
        let mut graphs: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
        for (parent, from, to) in edges.keys() {
            let graph = graphs.entry(parent.clone()).or_default();
            graph.entry(from.clone()).or_default().insert(to.clone());
            graph.entry(to.clone()).or_default();
        }
        for (parent, graph) in &graphs {
            for cycle in cycles(graph) {
                let room = if parent.is_empty() {
                    format!("{crate_src}/")
                } else {
                    format!("{crate_src}/{}/", parent.join("/"))
                };
                report.push(format!("{room}: {}", cycle.join(" ↔ ")));
                for ((p, from, to), files) in &edges {
                    if p == parent && cycle.contains(from) && cycle.contains(to) {
                        report.push(format!("    {from} → {to} in {files:?}"));
                    }
                }
            }
        }
    }
    assert!(
        report.is_empty(),
        "import cycles between sibling modules:\n{}",
        report.join("\n")
    );
}

#[test]
fn the_cycle_finder_finds_every_cycle_and_only_cycles() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", &["b"][..]),
        ("b", &["c"]),
        ("c", &["a", "d"]),
        ("d", &["e"]),
        ("e", &[]),
        ("f", &["g"]),
        ("g", &["f", "e"]),
        ("h", &["a"]),
    ]
    .iter()
    .map(|(n, to)| (n.to_string(), to.iter().map(|s| s.to_string()).collect()))
    .collect();
    assert_eq!(cycles(&graph), [vec!["a", "b", "c"], vec!["f", "g"]]);
    let acyclic: BTreeMap<String, BTreeSet<String>> =
        [("x".to_owned(), BTreeSet::from(["y".to_owned()]))].into();
    assert!(cycles(&acyclic).is_empty());
}

#[test]
fn the_path_reader_resolves_groups_parents_and_bindings() {
    let code = "use super::{core::HubCore, restart::{self, Mark as M}};\nfn f() { crate::hub::events::emit(); self::x::y(); }";
    let paths: Vec<Vec<String>> = relative_paths(code).into_iter().map(|(p, _)| p).collect();
    let text: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        text,
        [
            "super::core::HubCore",
            "super::restart::self",
            "super::restart::Mark",
            "crate::hub::events::emit",
            "self::x::y"
        ]
    );
    let here: ModPath = vec!["hub".into(), "approvals".into()];
    let at = |p: &str| p.split("::").map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(
        absolute(&here, &at("super::restart::self")),
        Some(at("hub::restart"))
    );
    assert_eq!(absolute(&here, &at("super::super::x")), Some(at("x")));
    assert_eq!(absolute(&[], &at("super::x")), None);

    let files = vec![(
        at("hub"),
        "hub/mod.rs".to_owned(),
        "use self::core::HubCore;".to_owned(),
    )];
    let modules: BTreeSet<ModPath> = [at("hub"), at("hub::core"), at("hub::approvals")].into();
    let resolved = resolve(at("hub::HubCore::new"), &modules, &use_bindings(&files));
    assert_eq!(resolved, at("hub::core::HubCore::new"));
}
