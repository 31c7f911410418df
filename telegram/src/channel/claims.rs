//! Who shows an approval's card in this run: a [`Claim`] of its approval id while a card is set
//! up, then this run's card in the log.
//!
//! Invariants: an approval gets at most one card per run, whoever shows it (a turn's relay, the
//! start's settling, the approval watch); a claim is released when dropped; no lock is held
//! across an `.await`.

use std::sync::Arc;

use super::{CardBook, Shared, lock};

/// An approval this run is setting up a card for: while it lives, nobody else shows one; once
/// dropped, the card this run logged for the approval (if any) keeps it from being shown twice.
pub(super) struct Claim {
    shared: Arc<Shared>,
    approval_id: String,
}

impl Drop for Claim {
    fn drop(&mut self) {
        lock(&self.shared.cards).claimed.remove(&self.approval_id);
    }
}

/// Claims `approval_id` for a card, unless this run shows one for it already or is setting one up.
pub(super) fn claim(shared: &Arc<Shared>, approval_id: &str) -> Option<Claim> {
    let mut book = lock(&shared.cards);
    if has_card(shared, &book, approval_id) || !book.claimed.insert(approval_id.to_owned()) {
        return None;
    }
    Some(Claim {
        shared: Arc::clone(shared),
        approval_id: approval_id.to_owned(),
    })
}

/// Whether this run shows a card for `approval_id` or is setting one up.
pub(super) fn is_presented(shared: &Shared, approval_id: &str) -> bool {
    let book = lock(&shared.cards);
    book.claimed.contains(approval_id) || has_card(shared, &book, approval_id)
}

/// Whether this run sent a card for `approval_id` (shown or ended since).
fn has_card(shared: &Shared, book: &CardBook, approval_id: &str) -> bool {
    book.log
        .cards
        .iter()
        .any(|c| c.approval_id == approval_id && c.epoch == shared.epoch)
}
