//! What the workspace's sources define, for the map test: a small Rust lexer (comments, strings and
//! character literals skipped) and, per file, the items it defines, the types it defines or
//! implements, and the variants of its enums; plus the names `proto/tau/v1` defines.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use super::super::rust_files;

/// The workspace's crate sources the map's unfiled names are looked up in.
const SOURCE_DIRS: &[&str] = &[
    "src",
    "daemon/src",
    "client-lib/src",
    "client/src",
    "telegram/src",
];

/// Keywords after which the next identifier is defined.
const DEFINING: &[&str] = &[
    "fn", "struct", "enum", "trait", "const", "static", "type", "mod", "union",
];
/// Keywords after which the next identifier is a type (so `Type::member` looks here).
const TYPE_DEFINING: &[&str] = &["struct", "enum", "trait", "type", "union"];

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Punct(char),
}

/// `text` as identifiers and punctuation, without comments, strings and character literals.
fn tokens(text: &str) -> Vec<Token> {
    let c: Vec<char> = text.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            i += 2;
            while i < c.len() && !(c[i] == '*' && at(i + 1) == '/') {
                i += 1;
            }
            i += 2;
        } else if ch == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if ch == '\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a, read as an identifier).
            if at(i + 1) == '\\' {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
            }
        } else if ch == 'r' && (at(i + 1) == '"' || (at(i + 1) == '#' && at(i + 2) == '"')) {
            // A raw string: r"…" or r#"…"#.
            let hashes = usize::from(at(i + 1) == '#');
            i += 2 + hashes;
            while i < c.len() && !(c[i] == '"' && (hashes == 0 || at(i + 1) == '#')) {
                i += 1;
            }
            i += 1 + hashes;
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(Token::Ident(c[start..i].iter().collect()));
        } else {
            out.push(Token::Punct(ch));
            i += 1;
        }
    }
    out
}

/// What one file defines.
#[derive(Debug, Default)]
pub struct Defs {
    /// Every item defined here (`fn`, `struct`, `enum`, `trait`, `const`, `static`, `type`, `mod`).
    names: BTreeSet<String>,
    /// The types defined or implemented here.
    types: BTreeSet<String>,
    /// Each enum's variants.
    variants: BTreeMap<String, BTreeSet<String>>,
}

impl Defs {
    pub fn read(text: &str) -> Defs {
        let toks = tokens(text);
        let mut defs = Defs::default();
        let ident = |i: usize| match toks.get(i) {
            Some(Token::Ident(name)) => Some(name.as_str()),
            _ => None,
        };
        for i in 0..toks.len() {
            let Some(word) = ident(i) else { continue };
            if DEFINING.contains(&word) {
                if let Some(name) = ident(i + 1) {
                    defs.names.insert(name.to_owned());
                    if TYPE_DEFINING.contains(&word) {
                        defs.types.insert(name.to_owned());
                    }
                    if word == "enum" {
                        let variants = enum_variants(&toks[i + 2..]);
                        defs.variants.insert(name.to_owned(), variants);
                    }
                }
            } else if word == "impl" {
                for tok in toks[i + 1..].iter() {
                    match tok {
                        Token::Punct('{' | ';') => break,
                        Token::Ident(w) if w == "where" => break,
                        Token::Ident(w) => {
                            defs.types.insert(w.clone());
                        }
                        Token::Punct(_) => {}
                    }
                }
            }
        }
        defs
    }
}

/// The variants of an enum whose tokens (after its name) are `toks`.
fn enum_variants(toks: &[Token]) -> BTreeSet<String> {
    let mut variants = BTreeSet::new();
    let Some(open) = toks.iter().position(|t| *t == Token::Punct('{')) else {
        return variants;
    };
    let mut depth = 1;
    let mut expect = true;
    let mut in_attribute = false;
    for tok in &toks[open + 1..] {
        match tok {
            Token::Punct('#') if depth == 1 && expect => in_attribute = true,
            Token::Punct('{' | '(' | '[') => depth += 1,
            Token::Punct('}' | ')' | ']') => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
                if depth == 1 && in_attribute {
                    in_attribute = false;
                }
            }
            Token::Punct(',') if depth == 1 => expect = true,
            Token::Ident(name) if depth == 1 && expect && !in_attribute => {
                variants.insert(name.clone());
                expect = false;
            }
            _ => {}
        }
    }
    variants
}

/// The definitions of the workspace's sources and the names the protos define.
pub struct Sources {
    files: BTreeMap<PathBuf, Defs>,
    proto: BTreeSet<String>,
}

impl Sources {
    pub fn read(root: &Path) -> Sources {
        let mut files = Vec::new();
        for dir in SOURCE_DIRS {
            for file in rust_files(&root.join(dir)) {
                let text = fs::read_to_string(&file).expect("readable source");
                files.push((file, Defs::read(&text)));
            }
        }
        let mut sources = Sources::from_defs(files);
        let protos = fs::read_dir(root.join("proto/tau/v1")).expect("proto/tau/v1");
        for entry in protos.flatten() {
            let text = fs::read_to_string(entry.path()).expect("readable proto");
            for line in text.lines() {
                let mut words = line.split_whitespace();
                let (Some(kind), Some(name)) = (words.next(), words.next()) else {
                    continue;
                };
                if ["message", "enum", "service", "rpc"].contains(&kind) {
                    let name: String = name
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    sources.proto.insert(name);
                }
            }
        }
        sources
    }

    pub fn from_defs(files: Vec<(PathBuf, Defs)>) -> Sources {
        Sources {
            files: files.into_iter().collect(),
            proto: BTreeSet::new(),
        }
    }

    pub fn all_files(&self) -> Vec<PathBuf> {
        self.files.keys().cloned().collect()
    }

    /// Whether any source file defines `name` (an item or an enum variant).
    pub fn anywhere(&self, name: &str) -> bool {
        self.files
            .values()
            .any(|d| d.names.contains(name) || d.variants.values().any(|v| v.contains(name)))
    }

    pub fn in_proto(&self, name: &str) -> bool {
        self.proto.contains(name)
    }

    /// Whether one of `files` defines `path`: an item, or `Type::member` (a member defined in a
    /// file that defines or implements `Type`, or a variant of the enum `Type`).
    pub fn defined_in(&self, files: &[PathBuf], path: &str) -> bool {
        let segments: Vec<&str> = path.split("::").collect();
        let read;
        let defs: Vec<&Defs> = if files.iter().all(|f| self.files.contains_key(f)) {
            files.iter().filter_map(|f| self.files.get(f)).collect()
        } else {
            read = files
                .iter()
                .filter_map(|f| fs::read_to_string(f).ok())
                .map(|text| Defs::read(&text))
                .collect::<Vec<_>>();
            read.iter().collect()
        };
        match segments.as_slice() {
            [name] => defs
                .iter()
                .any(|d| d.names.contains(*name) || d.variants.values().any(|v| v.contains(*name))),
            [.., ty, member] => defs.iter().any(|d| {
                let variant = d.variants.get(*ty).is_some_and(|v| v.contains(*member));
                variant || (d.types.contains(*ty) && d.names.contains(*member))
            }),
            [] => false,
        }
    }
}

/// Whether `text` reads as a Rust path: identifiers joined by `::`.
pub fn is_ident_path(text: &str) -> bool {
    !text.is_empty()
        && text.split("::").all(|s| {
            s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

#[test]
fn the_lexer_skips_comments_strings_and_characters() {
    let code = "fn a() { let s = \"fn x\"; let c = '{'; let r = r#\"fn y\"#; } // fn z\n\
                /* fn w */ fn b<'t>() {}";
    let idents: Vec<String> = tokens(code)
        .into_iter()
        .filter_map(|t| match t {
            Token::Ident(name) => Some(name),
            Token::Punct(_) => None,
        })
        .collect();
    assert_eq!(
        idents,
        [
            "fn", "a", "let", "s", "let", "c", "let", "r", "fn", "b", "t"
        ]
    );
    assert!(is_ident_path("HubCore::decide") && is_ident_path("store_io"));
    assert!(!is_ident_path("Ok(true)") && !is_ident_path("a::") && !is_ident_path("x y"));
}
