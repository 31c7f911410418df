//! Resume helpers: the data behind `/sessions` (`n. id date channel title (N messages)`),
//! `/resume`, `/resume <n>` and `tau chat --resume`.
//!
//! Invariants: only sessions with at least one message are listed, newest `updated_at` first, the
//! current session left out; indexes are 1-based as printed; a session whose metadata cannot be
//! read is still listed (without channel and title) and the problem is logged.

use jiff::Timestamp;

use crate::store::contract::SessionStore;
use crate::store::store_error::SessionError;

/// How many sessions `/sessions` lists.
pub const RECENT_SESSIONS_LIMIT: usize = 10;

/// One line of a `/sessions` listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionListing {
    /// 1-based position in the listing.
    pub index: usize,
    pub session_id: String,
    pub updated_at: Timestamp,
    pub channel: Option<String>,
    pub title: Option<String>,
    pub message_count: u64,
}

/// The `limit` most recently updated sessions that have messages, excluding `current`.
pub fn recent_sessions(
    store: &dyn SessionStore,
    limit: usize,
    current: Option<&str>,
) -> Result<Vec<SessionListing>, SessionError> {
    let candidates = store
        .list_sessions()?
        .into_iter()
        .filter(|info| info.message_count > 0 && Some(info.session_id.as_str()) != current)
        .take(limit);
    let mut listing = Vec::new();
    for (position, info) in candidates.enumerate() {
        let meta = match store.read_meta(&info.session_id) {
            Ok(meta) => meta,
            Err(err) => {
                tracing::warn!(session_id = %info.session_id, %err, "listing a session without its metadata");
                None
            }
        };
        let (channel, title) = meta.map_or((None, None), |m| (m.channel, m.title));
        listing.push(SessionListing {
            index: position + 1,
            session_id: info.session_id,
            updated_at: info.updated_at,
            channel,
            title,
            message_count: info.message_count,
        });
    }
    Ok(listing)
}

/// The most recently updated session with messages other than `current` (`/resume`).
pub fn most_recent_session(
    store: &dyn SessionStore,
    current: Option<&str>,
) -> Result<Option<SessionListing>, SessionError> {
    Ok(recent_sessions(store, 1, current)?.into_iter().next())
}

/// The `n`-th (1-based) entry of a listing (`/resume <n>`).
pub fn session_by_index(listing: &[SessionListing], n: usize) -> Option<&SessionListing> {
    n.checked_sub(1).and_then(|i| listing.get(i))
}
