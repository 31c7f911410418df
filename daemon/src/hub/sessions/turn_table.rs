//! [`TurnTable`]: the turns of one open session as data: the running turn, the queue, and the
//! turns started with an idempotency key, bounded by [`REMEMBERED_TURNS`] and
//! [`REMEMBERED_END_TEXT_BYTES`]. They are accepted and handed out by `super::turn_queue` and run
//! by `super::worker`.
//!
//! Invariants: at most [`REMEMBERED_TURNS`] keyed turns are remembered, the oldest forgotten
//! first with its key; their ends' text stays within [`REMEMBERED_END_TEXT_BYTES`], the newest
//! end keeping its whole text.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::agent::TurnEnd;
use crate::hub::events::{TurnInfo, now_rfc3339};

/// Turns started with an idempotency key that a session remembers (what a repeated StartTurn
/// finds: the turn, where its events start, how it ended), the oldest forgotten first. Turns
/// without a key cannot be repeated and are not remembered. At least the default queue bound
/// plus the running turn, so a waiting turn's key is never forgotten.
pub const REMEMBERED_TURNS: usize = 32;
/// The most text the remembered turns' ends keep, in bytes: the newest ended turn keeps its whole
/// text; past this, older ones lose theirs (a repeat of one then ends without its text, which the
/// stored session still has).
pub const REMEMBERED_END_TEXT_BYTES: usize = 8 * 1024;

/// A turn waiting or running.
#[derive(Debug, Clone)]
pub(crate) struct TurnRecord {
    pub info: TurnInfo,
    /// The seq of its first event (`turn_queued`).
    pub first_seq: u64,
    pub cancel: CancellationToken,
    /// Set for a turn no client started (a routine's): its questions are held for this long.
    pub held_for: Option<Duration>,
}

/// A turn the session has seen: where its events start, and how it ended.
#[derive(Debug, Clone)]
pub(crate) struct KnownTurn {
    /// Its idempotency key.
    key: String,
    pub first_seq: u64,
    pub ended: Option<(u64, String, TurnEnd)>,
}

impl KnownTurn {
    fn end_text_bytes(&self) -> usize {
        self.ended
            .as_ref()
            .map_or(0, |(_, _, end)| end_text_bytes(end))
    }
}

fn end_text_bytes(end: &TurnEnd) -> usize {
    end.text.len() + end.notice.as_ref().map_or(0, String::len)
}

/// The turns of one session.
#[derive(Debug, Default)]
pub(crate) struct TurnTable {
    pub running: Option<TurnRecord>,
    pub queue: VecDeque<TurnRecord>,
    /// Idempotency key → turn id, for the turns in `known`.
    keys: HashMap<String, String>,
    /// The remembered turns (those started with a key), by turn id; `known_order` oldest first.
    known: HashMap<String, KnownTurn>,
    known_order: VecDeque<String>,
    /// [`end_text_bytes`] over `known`.
    end_text: usize,
    /// Set when the session is dropped from memory: no more turns are accepted here.
    pub closed: bool,
}

impl TurnTable {
    /// Whether a turn runs or waits.
    pub fn busy(&self) -> bool {
        self.running.is_some() || !self.queue.is_empty()
    }

    /// The turn an idempotency key names, if remembered.
    pub fn by_key(&self, key: &str) -> Option<&str> {
        self.keys.get(key).map(String::as_str)
    }

    pub fn known(&self, turn_id: &str) -> Option<&KnownTurn> {
        self.known.get(turn_id)
    }

    /// How many turns are remembered, and the bytes of their ends' text.
    #[cfg(test)]
    pub fn remembered(&self) -> (usize, usize) {
        (self.known.len(), self.end_text)
    }

    /// Remembers a turn started with `key` (see [`REMEMBERED_TURNS`]).
    pub(super) fn remember(&mut self, key: String, turn_id: String, first_seq: u64) {
        while self.known_order.len() >= REMEMBERED_TURNS {
            let Some(oldest) = self.known_order.pop_front() else {
                break;
            };
            if let Some(forgotten) = self.known.remove(&oldest) {
                self.end_text = self.end_text.saturating_sub(forgotten.end_text_bytes());
                self.keys.remove(&forgotten.key);
            }
        }
        self.keys.insert(key.clone(), turn_id.clone());
        self.known_order.push_back(turn_id.clone());
        self.known.insert(
            turn_id,
            KnownTurn {
                key,
                first_seq,
                ended: None,
            },
        );
    }

    /// Records how a remembered turn ended; older ends lose their text past
    /// [`REMEMBERED_END_TEXT_BYTES`].
    pub(super) fn record_end(&mut self, turn_id: &str, seq: u64, end: TurnEnd) {
        let Some(known) = self.known.get_mut(turn_id) else {
            return;
        };
        let before = known.end_text_bytes();
        known.ended = Some((seq, now_rfc3339(), end));
        self.end_text = self.end_text.saturating_sub(before) + known.end_text_bytes();
        for id in &self.known_order {
            if self.end_text <= REMEMBERED_END_TEXT_BYTES {
                break;
            }
            if id == turn_id {
                continue;
            }
            if let Some((_, _, older)) = self.known.get_mut(id).and_then(|k| k.ended.as_mut()) {
                self.end_text = self.end_text.saturating_sub(end_text_bytes(older));
                older.text = String::new();
                older.notice = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::StopReason;
    use crate::message::Usage;

    fn end(text: &str) -> TurnEnd {
        TurnEnd {
            stop_reason: StopReason::EndTurn,
            text: text.to_owned(),
            usage: Usage::default(),
            model_calls: 1,
            notice: None,
        }
    }

    #[test]
    fn only_turns_with_a_key_are_remembered_and_at_most_remembered_turns() {
        let mut table = TurnTable::default();
        for i in 0..10 * REMEMBERED_TURNS {
            let key = (i % 2 == 0).then(|| format!("key-{i}"));
            if let Some(key) = key {
                table.remember(key, format!("turn-{i}"), i as u64);
            }
            table.record_end(&format!("turn-{i}"), i as u64, end("ok"));
        }
        assert_eq!(table.remembered().0, REMEMBERED_TURNS);
        assert_eq!(table.keys.len(), REMEMBERED_TURNS);
        assert_eq!(table.known_order.len(), REMEMBERED_TURNS);
        let newest = 10 * REMEMBERED_TURNS - 2;
        assert_eq!(
            table.by_key(&format!("key-{newest}")),
            Some(format!("turn-{newest}").as_str())
        );
        assert_eq!(
            table.by_key("key-0"),
            None,
            "the oldest key is forgotten with its turn"
        );
        assert!(
            table.known("turn-1").is_none(),
            "a turn without a key is not remembered"
        );
    }

    fn text_of(table: &TurnTable, id: &str) -> Option<usize> {
        table
            .known(id)
            .and_then(|k| k.ended.as_ref())
            .map(|(_, _, end)| end.text.len())
    }

    #[test]
    fn ended_texts_stay_within_their_budget_and_the_newest_keeps_its_text() {
        let mut table = TurnTable::default();
        let long = "x".repeat(REMEMBERED_END_TEXT_BYTES / 3);
        for i in 0..20 {
            table.remember(format!("k{i}"), format!("t{i}"), i);
            table.record_end(&format!("t{i}"), i, end(&long));
            assert!(table.remembered().1 <= REMEMBERED_END_TEXT_BYTES);
        }
        assert_eq!(text_of(&table, "t19"), Some(long.len()));
        assert_eq!(
            text_of(&table, "t0"),
            Some(0),
            "an older end lost its text, not its place"
        );
        let held: usize = table.known.values().map(KnownTurn::end_text_bytes).sum();
        assert_eq!(held, table.remembered().1, "the running count is exact");
        // One end longer than the budget is kept whole while it is the newest.
        let huge = "y".repeat(2 * REMEMBERED_END_TEXT_BYTES);
        table.remember("big".into(), "big".into(), 99);
        table.record_end("big", 99, end(&huge));
        assert_eq!(text_of(&table, "big"), Some(huge.len()));
        assert_eq!(table.remembered().1, huge.len());
    }
}
