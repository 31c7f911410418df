//! [`Remembered`]: a map the core keeps for clients' convenience (the last listing per channel,
//! the last seq of sessions that left memory) with a fixed number of entries, so nothing a client
//! does, however many channels or sessions it names, grows the hub's memory without bound.
//!
//! [`ChannelListings`] is the one kept per channel; [`NewSessionKeys`] the sessions StartTurn's
//! `new_session` made for an idempotency key.
//!
//! Invariants: at most `capacity` entries; inserting a new key when full forgets the key inserted
//! longest ago (an update keeps its place); what is forgotten is only a convenience (a listing
//! index to list again, an `after_seq` to subscribe afresh, a retried `new_session` turn with a
//! key forgotten long ago), never state.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::OnceCell;

/// Channels whose last listing is remembered.
pub const REMEMBERED_LISTINGS: usize = 64;
/// Session ids remembered per listing (an index past them is listed afresh).
pub const MAX_LISTED_IDS: usize = 1000;

/// The last listing per channel, for `OpenSession.index`: at most [`REMEMBERED_LISTINGS`]
/// channels, each at most [`MAX_LISTED_IDS`] ids.
#[derive(Debug)]
pub(crate) struct ChannelListings {
    listings: Mutex<Remembered<Vec<String>>>,
}

impl Default for ChannelListings {
    fn default() -> Self {
        Self {
            listings: Mutex::new(Remembered::new(REMEMBERED_LISTINGS)),
        }
    }
}

impl ChannelListings {
    /// Remembers the session ids of `channel`'s last listing (the first [`MAX_LISTED_IDS`]).
    pub(crate) fn remember(&self, channel: String, ids: impl IntoIterator<Item = String>) {
        let ids = ids.into_iter().take(MAX_LISTED_IDS).collect();
        self.listings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(channel, ids);
    }

    /// The session ids of `channel`'s last listing, if remembered.
    pub(crate) fn get(&self, channel: &str) -> Option<Vec<String>> {
        self.listings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(channel)
            .cloned()
    }
}

/// `new_session` idempotency keys remembered (per channel and key), so that many retries' worth.
pub const REMEMBERED_NEW_SESSION_KEYS: usize = 1024;

/// The session StartTurn's `new_session` made for each (channel, idempotency key), so a retried
/// request starts its turn in the same session (where the key then finds the first turn) instead
/// of making another. At most [`REMEMBERED_NEW_SESSION_KEYS`] keys; forgotten at a restart.
///
/// Each key holds a cell the first request fills with its session's id: a second request with
/// the same key waits for that one's creation instead of racing it, and if the creation fails
/// the next request tries again.
#[derive(Debug)]
pub(crate) struct NewSessionKeys {
    keys: Mutex<Remembered<Arc<OnceCell<String>>>>,
}

impl Default for NewSessionKeys {
    fn default() -> Self {
        Self {
            keys: Mutex::new(Remembered::new(REMEMBERED_NEW_SESSION_KEYS)),
        }
    }
}

impl NewSessionKeys {
    /// The cell for `channel`'s `key`, made empty when not remembered.
    pub(crate) fn cell(&self, channel: &str, key: &str) -> Arc<OnceCell<String>> {
        let name = Self::name(channel, key);
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(cell) = keys.get(&name) {
            return Arc::clone(cell);
        }
        let cell = Arc::new(OnceCell::new());
        keys.insert(name, Arc::clone(&cell));
        cell
    }

    /// Forgets `channel`'s `key` (its session is gone).
    pub(crate) fn forget(&self, channel: &str, key: &str) {
        self.keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&Self::name(channel, key));
    }

    /// One map key: a channel name holds no newline (`limits::check_channel`).
    fn name(channel: &str, key: &str) -> String {
        format!("{channel}\n{key}")
    }
}

/// A bounded map that forgets its oldest entry first.
#[derive(Debug)]
pub struct Remembered<V> {
    entries: HashMap<String, V>,
    order: VecDeque<String>,
    capacity: usize,
}

impl<V> Remembered<V> {
    /// An empty map of at most `capacity` entries (at least one).
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Sets `key` to `value`, forgetting the oldest entry if a new key would exceed the capacity.
    pub fn insert(&mut self, key: String, value: V) {
        if let Some(slot) = self.entries.get_mut(&key) {
            *slot = value;
            return;
        }
        while self.entries.len() >= self.capacity {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            self.entries.remove(&oldest);
        }
        self.order.push_back(key.clone());
        self.entries.insert(key, value);
    }

    pub fn get(&self, key: &str) -> Option<&V> {
        self.entries.get(key)
    }

    pub fn remove(&mut self, key: &str) -> Option<V> {
        let removed = self.entries.remove(key)?;
        self.order.retain(|k| k != key);
        Some(removed)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_entry_is_forgotten_first_and_updates_keep_their_place() {
        let mut map = Remembered::new(3);
        for key in ["a", "b", "c"] {
            map.insert(key.to_owned(), key.len());
        }
        map.insert("a".to_owned(), 10);
        assert_eq!(map.len(), 3);
        map.insert("d".to_owned(), 1);
        assert_eq!(map.len(), 3);
        assert_eq!(map.get("a"), None, "a was inserted first");
        assert_eq!(map.get("b"), Some(&1));
        assert_eq!(map.remove("b"), Some(1));
        map.insert("e".to_owned(), 2);
        map.insert("f".to_owned(), 3);
        assert_eq!(map.len(), 3);
        assert_eq!(map.get("c"), None);
        assert!(map.get("d").is_some() && map.get("e").is_some() && map.get("f").is_some());
    }

    #[test]
    fn a_key_holds_one_cell_per_channel_until_forgotten() {
        let keys = NewSessionKeys::default();
        let first = keys.cell("cli", "k");
        assert!(first.set("session-1".to_owned()).is_ok());
        assert_eq!(
            keys.cell("cli", "k").get().map(String::as_str),
            Some("session-1")
        );
        assert!(keys.cell("web", "k").get().is_none(), "another channel");
        assert!(keys.cell("cli", "k2").get().is_none(), "another key");
        keys.forget("cli", "k");
        assert!(keys.cell("cli", "k").get().is_none());
        for i in 0..REMEMBERED_NEW_SESSION_KEYS + 10 {
            keys.cell("cli", &format!("key-{i}"));
        }
        let held = keys
            .keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        assert_eq!(held, REMEMBERED_NEW_SESSION_KEYS);
    }

    #[test]
    fn many_keys_never_grow_it_past_its_capacity() {
        let mut map = Remembered::new(64);
        for i in 0..10_000 {
            map.insert(format!("channel-{i}"), vec![i; 4]);
        }
        assert_eq!(map.len(), 64);
        assert_eq!(map.order.len(), 64);
    }
}
