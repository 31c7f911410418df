//! Contract cases for reads that do not read a whole session: `session_info` (a session's count
//! and times without its messages) and `list_messages_before` (pages from the newest end, walked
//! with a cursor), on every backend, also after a reopen.

use taud::store::{SessionError, SessionMessage, SessionStore};

use super::Harness;
use crate::support::store::{assistant_message, user_message};

fn ids(messages: Vec<SessionMessage>) -> Vec<u64> {
    messages.iter().map(|m| m.message_id).collect()
}

/// Every page of `size` from the newest end, each in id order, following the cursor.
fn walk(store: &dyn SessionStore, id: &str, size: usize) -> Vec<Vec<u64>> {
    let mut pages = Vec::new();
    let mut before = None;
    loop {
        let page = ids(store.list_messages_before(id, "tau", before, size).unwrap());
        let Some(&oldest) = page.first() else {
            return pages;
        };
        before = Some(oldest);
        pages.push(page);
    }
}

pub fn pages_are_read_from_the_newest_end_with_a_cursor(h: &Harness) {
    let store = h.store.as_ref();
    let id = h.session_with_agent();
    assert!(
        store
            .list_messages_before(&id, "tau", None, 10)
            .unwrap()
            .is_empty()
    );
    for n in [2u64, 0, 10, 1, 1_000_000, 3] {
        store
            .create_message(&id, "tau", &user_message(n, &format!("m{n}")))
            .unwrap();
    }
    assert_eq!(
        ids(store.list_messages_before(&id, "tau", None, 2).unwrap()),
        [10, 1_000_000]
    );
    assert_eq!(
        ids(store.list_messages_before(&id, "tau", Some(10), 3).unwrap()),
        [1, 2, 3]
    );
    assert_eq!(
        ids(store.list_messages_before(&id, "tau", Some(1), 3).unwrap()),
        [0]
    );
    assert!(
        store
            .list_messages_before(&id, "tau", Some(0), 3)
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .list_messages_before(&id, "tau", None, 0)
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        ids(store
            .list_messages_before(&id, "tau", Some(u64::MAX), 100)
            .unwrap()),
        [0, 1, 2, 3, 10, 1_000_000]
    );
    // The pages of a walk cover every message once, newest page first.
    assert_eq!(walk(store, &id, 4), [vec![2, 3, 10, 1_000_000], vec![0, 1]]);
    let page = store.list_messages_before(&id, "tau", Some(11), 1).unwrap();
    assert_eq!(page[0].message.text(), "m10");
    assert_eq!(page, store.list_messages(&id, "tau", Some(1), 4).unwrap());
    assert_eq!(
        walk(h.reopen().as_ref(), &id, 5),
        [vec![1, 2, 3, 10, 1_000_000], vec![0]]
    );
}

pub fn a_page_needs_its_session_and_agent(h: &Harness) {
    let store = h.store.as_ref();
    let missing = store.list_messages_before("20000101-000000-0000", "tau", None, 5);
    assert!(
        matches!(missing, Err(SessionError::SessionNotFound(_))),
        "{missing:?}"
    );
    let id = h.session_with_agent();
    let missing = store.list_messages_before(&id, "other", None, 5);
    assert!(
        matches!(missing, Err(SessionError::AgentNotFound { .. })),
        "{missing:?}"
    );
    let bad = store.list_messages_before(&id, "../tau", None, 5);
    assert!(
        matches!(bad, Err(SessionError::InvalidId { .. })),
        "{bad:?}"
    );
}

pub fn session_info_counts_without_reading_messages(h: &Harness) {
    let store = h.store.as_ref();
    assert_eq!(store.session_info("20000101-000000-0000").unwrap(), None);
    let bad = store.session_info("a/b");
    assert!(
        matches!(bad, Err(SessionError::InvalidId { .. })),
        "{bad:?}"
    );
    let id = h.session_with_agent();
    let session = store.read_session(&id).unwrap().unwrap();
    let info = store.session_info(&id).unwrap().unwrap();
    assert_eq!(
        (
            info.session_id.as_str(),
            info.created_at,
            info.message_count
        ),
        (id.as_str(), session.created_at, 0)
    );
    for n in 0..5u64 {
        let message = if n % 2 == 0 {
            user_message(n, "q")
        } else {
            assistant_message(n, "a")
        };
        store.create_message(&id, "tau", &message).unwrap();
    }
    let info = store.session_info(&id).unwrap().unwrap();
    assert_eq!(info.message_count, 5);
    assert_eq!(
        info.updated_at,
        store.read_session(&id).unwrap().unwrap().updated_at
    );
    let listed = store.list_sessions().unwrap();
    assert_eq!(listed.iter().find(|s| s.session_id == id), Some(&info));
    assert_eq!(h.reopen().session_info(&id).unwrap(), Some(info));
}

/// Appends and flushes from many threads at once, a stray flush of every session among them: each
/// session ends with its own count, on this store and on a store opened afterwards.
pub fn flushes_beside_appends_keep_every_count(h: &Harness) {
    const SESSIONS: usize = 4;
    const MESSAGES: u64 = 20;
    let ids: Vec<String> = (0..SESSIONS).map(|_| h.session_with_agent()).collect();
    let store = h.store.as_ref();
    std::thread::scope(|scope| {
        for id in &ids {
            scope.spawn(move || {
                for n in 0..MESSAGES {
                    store
                        .create_message(id, "tau", &user_message(n, "q"))
                        .unwrap();
                    if n % 2 == 1 {
                        store.flush_session(id).unwrap();
                    }
                }
            });
        }
        scope.spawn(|| {
            for _ in 0..50 {
                for id in &ids {
                    store.flush_session(id).unwrap();
                }
            }
        });
    });
    for id in &ids {
        assert_eq!(
            store.session_info(id).unwrap().unwrap().message_count,
            MESSAGES
        );
    }
    let reopened = h.reopen();
    for info in reopened.list_sessions().unwrap() {
        assert_eq!(info.message_count, MESSAGES, "{}", info.session_id);
    }
}
