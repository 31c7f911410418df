//! Helpers of the property tests: the runner configuration (a short run by default,
//! `PROPTEST_CASES` for a longer one) and the damage done to stored records (arbitrary bytes, a
//! truncation, a flipped byte, a field replaced by a value of the wrong type or out of range, a
//! field removed).

// Test helpers: a failed set-up step must fail the test at once.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod targets;

use jiff::Timestamp;
use std::sync::Once;
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};
use taud::message::{ContentBlock, Message, Role, ToolResult, ToolResultStatus, ToolUse};
use taud::store::{
    ContextMode, DEFAULT_AGENT_ID, Session, SessionAgent, SessionMessage, SessionMeta, SessionStore,
};

/// A runner of `default_cases` cases, or of `PROPTEST_CASES` when it is set; failures are shrunk
/// and reported, never written to a regressions file.
pub fn runner(default_cases: u32) -> TestRunner {
    let mut config = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = default_cases;
    }
    config.failure_persistence = None;
    TestRunner::new(config)
}

/// Panics anywhere in this test process (handlers, session workers, blocking tasks, the test
/// itself), counted by a hook installed on first use (the previous hook still reports them).
pub fn panics() -> &'static AtomicUsize {
    static PANICS: AtomicUsize = AtomicUsize::new(0);
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            previous(info);
        }));
    });
    &PANICS
}

/// A value put where a stored field was: the wrong type, out of range, or hostile text. `Raw` is
/// spliced into the JSON text as is (numbers JSON allows but Rust types do not hold).
#[derive(Debug, Clone)]
pub enum Junk {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
    Raw(&'static str),
    EmptyArray,
    EmptyObject,
    Nested(u8),
}

const RAW_NUMBERS: [&str; 9] = [
    "18446744073709551615",
    "18446744073709551616",
    "4294967295",
    "4294967296",
    "-1",
    "-0",
    "1e400",
    "1.5",
    "99999999999999999999999999999",
];

const RAW_MARK: &str = "\u{1}raw\u{1}";

pub fn junk() -> impl Strategy<Value = Junk> {
    prop_oneof![
        Just(Junk::Null),
        any::<bool>().prop_map(Junk::Bool),
        prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(-1i64), any::<i64>()].prop_map(Junk::Int),
        any::<f64>().prop_map(Junk::Float),
        text().prop_map(Junk::Text),
        proptest::sample::select(&RAW_NUMBERS[..]).prop_map(Junk::Raw),
        Just(Junk::EmptyArray),
        Just(Junk::EmptyObject),
        (1u8..200).prop_map(Junk::Nested),
    ]
}

/// Hostile text: empty, arbitrary Unicode, control characters, long, or almost a timestamp.
pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        any::<String>(),
        "[\\x00-\\x1f\\x7f\u{202e}\u{feff}]{1,8}",
        (1usize..70_000).prop_map(|n| "x".repeat(n)),
        Just("2026-13-40T25:61:61.000000Z".to_owned()),
        Just("-009999-01-01T00:00:00Z".to_owned()),
        Just("9999-12-31T23:59:59.999999Z".to_owned()),
        Just("../../etc/passwd".to_owned()),
    ]
}

impl Junk {
    fn value(&self) -> Value {
        match self {
            Junk::Null => Value::Null,
            Junk::Bool(b) => Value::Bool(*b),
            Junk::Int(n) => Value::from(*n),
            Junk::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Junk::Text(text) => Value::String(text.clone()),
            Junk::Raw(_) => Value::String(RAW_MARK.to_owned()),
            Junk::EmptyArray => Value::Array(Vec::new()),
            Junk::EmptyObject => Value::Object(serde_json::Map::new()),
            Junk::Nested(depth) => {
                let mut value = Value::Null;
                for _ in 0..*depth {
                    value = Value::Array(vec![value]);
                }
                value
            }
        }
    }
}

/// What is done to one stored JSON record.
#[derive(Debug, Clone)]
pub enum Damage {
    /// The whole record replaced by arbitrary bytes.
    Bytes(Vec<u8>),
    /// Only the first `n` bytes (modulo its length) kept.
    Truncate(usize),
    /// One byte (at a position modulo its length) replaced.
    Flip(usize, u8),
    /// The `pick`-th field or element (modulo their number, in document order) replaced.
    Field(usize, Junk),
    /// The `pick`-th field of an object removed.
    Remove(usize),
    /// The format version `v` (or `version`) raised.
    Version(u64),
    /// The `pick`-th number of the record (modulo their count) replaced by an extreme one.
    Number(usize, &'static str),
}

/// Numbers at the edges of the integer types a record holds.
pub const EXTREME_NUMBERS: [&str; 4] = [
    "18446744073709551615",
    "9223372036854775807",
    "4294967295",
    "-9223372036854775808",
];

pub fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        1 => proptest::collection::vec(any::<u8>(), 0..256).prop_map(Damage::Bytes),
        1 => any::<usize>().prop_map(Damage::Truncate),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Damage::Flip(at, b)),
        4 => (any::<usize>(), junk()).prop_map(|(pick, junk)| Damage::Field(pick, junk)),
        1 => any::<usize>().prop_map(Damage::Remove),
        2 => (any::<usize>(), proptest::sample::select(&EXTREME_NUMBERS[..]))
            .prop_map(|(pick, raw)| Damage::Number(pick, raw)),
        1 => prop_oneof![Just(2u64), Just(u64::from(u32::MAX)), Just(u64::MAX), any::<u64>()]
            .prop_map(Damage::Version),
    ]
}

/// Every field and element of `value`, as JSON pointers, in document order.
fn pointers(value: &Value, at: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let here = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
                out.push(here.clone());
                pointers(child, &here, out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                let here = format!("{at}/{i}");
                out.push(here.clone());
                pointers(child, &here, out);
            }
        }
        _ => {}
    }
}

fn splice_raw(value: &Value, junk: &Junk) -> Vec<u8> {
    let text = serde_json::to_string(value).unwrap();
    match junk {
        Junk::Raw(raw) => text
            .replace(&serde_json::to_string(RAW_MARK).unwrap(), raw)
            .into_bytes(),
        _ => text.into_bytes(),
    }
}

/// `record` (one valid JSON record) with `damage` done to it.
pub fn apply(record: &[u8], damage: &Damage) -> Vec<u8> {
    let parsed: Option<Value> = serde_json::from_slice(record).ok();
    match (damage, parsed) {
        (Damage::Bytes(bytes), _) => bytes.clone(),
        (Damage::Truncate(n), _) => record[..n % record.len().max(1)].to_vec(),
        (Damage::Flip(at, byte), _) => {
            let mut out = record.to_vec();
            if !out.is_empty() {
                let at = at % out.len();
                out[at] = *byte;
            }
            out
        }
        (Damage::Field(pick, junk), Some(mut value)) => {
            let mut all = Vec::new();
            pointers(&value, "", &mut all);
            if all.is_empty() {
                return splice_raw(&junk.value(), junk);
            }
            let target = &all[pick % all.len()];
            if let Some(slot) = value.pointer_mut(target) {
                *slot = junk.value();
            }
            splice_raw(&value, junk)
        }
        (Damage::Remove(pick), Some(mut value)) => {
            let mut all = Vec::new();
            pointers(&value, "", &mut all);
            all.retain(|p| p.rsplit('/').next().unwrap_or("").parse::<usize>().is_err());
            if let Some(target) = all.get(pick % all.len().max(1)) {
                let (parent, key) = target.rsplit_once('/').unwrap();
                let key = key.replace("~1", "/").replace("~0", "~");
                if let Some(Value::Object(map)) = value.pointer_mut(parent) {
                    map.remove(&key);
                }
            }
            serde_json::to_vec(&value).unwrap()
        }
        (Damage::Version(version), Some(mut value)) => {
            if let Value::Object(map) = &mut value {
                let key = if map.contains_key("version") {
                    "version"
                } else {
                    "v"
                };
                map.insert(key.to_owned(), Value::from(*version));
            }
            serde_json::to_vec(&value).unwrap()
        }
        (Damage::Number(pick, raw), Some(mut value)) => {
            let mut all = Vec::new();
            pointers(&value, "", &mut all);
            all.retain(|p| value.pointer(p).is_some_and(Value::is_number));
            if let Some(target) = all.get(pick % all.len().max(1))
                && let Some(slot) = value.pointer_mut(target)
            {
                *slot = Value::String(RAW_MARK.to_owned());
            }
            splice_raw(&value, &Junk::Raw(raw))
        }
        (_, None) => record.to_vec(),
    }
}

/// A JSON-lines file with `damage` done to its `line`-th line (modulo the line count).
pub fn apply_to_line(file: &[u8], line: usize, damage: &Damage) -> Vec<u8> {
    let text = String::from_utf8_lossy(file);
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() {
        return apply(file, damage);
    }
    let pick = line % lines.len();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if i == pick {
            out.extend(apply(l.as_bytes(), damage));
        } else {
            out.extend_from_slice(l.as_bytes());
        }
        out.push(b'\n');
    }
    out
}

/// The session every store property starts from.
pub const ID: &str = "20261201-120000-abcd";
pub const MESSAGES: u64 = 4;

pub fn messages() -> Vec<Message> {
    vec![
        Message::user_text("turn on the lamp"),
        Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Text("asking".into()),
                ContentBlock::ToolUse(ToolUse {
                    tool_use_id: "tu-1".into(),
                    name: "demo_physical_action".into(),
                    input: json!({"device": "lamp", "on": true}),
                }),
            ],
            metadata: None,
        },
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResult::text(
                "tu-1",
                ToolResultStatus::Success,
                "done",
            ))],
            metadata: None,
        },
        Message::assistant_text("the lamp is on"),
    ]
}

pub fn approval_event(status: &str) -> Value {
    json!({
        "type": "approval", "approval_id": "apr-1", "status": status,
        "tool": "demo_physical_action", "tier": 2, "arguments": {"device": "lamp"},
        "effect": "switches a device", "tool_use_id": "tu-1", "session_id": ID,
        "channel": "terminal", "approver": "hub"
    })
}

/// One complete session: record, agent, messages, metadata and events.
pub fn fill(store: &dyn SessionStore) {
    let now: Timestamp = "2026-12-01T12:00:00Z".parse().unwrap();
    store.create_session(&Session::new(ID, now)).unwrap();
    store
        .create_agent(
            ID,
            &SessionAgent::new(DEFAULT_AGENT_ID, ContextMode::Sliding, now),
        )
        .unwrap();
    for (id, message) in (0u64..).zip(messages()) {
        store
            .create_message(ID, DEFAULT_AGENT_ID, &SessionMessage::new(id, message, now))
            .unwrap();
    }
    store
        .write_meta(
            ID,
            &SessionMeta {
                channel: Some("terminal".into()),
                title: Some("turn on the lamp".into()),
                role: Some("brain".into()),
                context: Some(ContextMode::Sliding),
                ..SessionMeta::default()
            },
        )
        .unwrap();
    store.append_event(ID, &approval_event("pending")).unwrap();
    store
        .append_event(
            ID,
            &json!({"type": "tool_call", "tool": "demo_physical_action"}),
        )
        .unwrap();
    // As the hub leaves a session it closes: every record in its own file, the journal empty.
    store.close_session(ID).unwrap();
}
