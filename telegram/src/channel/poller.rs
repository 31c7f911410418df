//! The `getUpdates` loop: long polls from the persisted offset, hands each update to
//! [`super::inbound`], then persists the next offset.
//!
//! Invariants: a 429 waits its `retry_after`, but never more than [`MAX_RETRY_AFTER`] (the number
//! comes from outside: a huge one must not put the poller to sleep for ever while the run still
//! reports itself running); a 409 or a refused token ends the loop (the caller reports it, nobody
//! spins); other failures back off from 1 s doubling to 30 s, reset by a success; no pause is
//! longer than [`MAX_RETRY_AFTER`], and every pause also ends as soon as the run stops.
//!
//! An `update_id` is a number from outside too: only one in `0..=`[`MAX_UPDATE_ID`] is handled and
//! moves the offset (by checked arithmetic, so no id, however huge, panics the poller or wraps the
//! offset round to a negative one, which Telegram would read as "the last updates again"); one
//! outside it is dropped with a warn line, and a poll that brought nothing but such ids backs off
//! like a failure, so a server that keeps sending one is never polled in a tight loop. The
//! persisted offset is read back within the same bounds.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::bot_api::{BotError, MAX_RETRY_AFTER};
use crate::state;

use super::{ChannelError, Shared, inbound};

/// The largest `update_id` the poller handles: the largest integer every JSON reader keeps exact
/// (2^53 − 1); Telegram's ids are far below it.
pub const MAX_UPDATE_ID: i64 = (1 << 53) - 1;

/// The largest offset: one past [`MAX_UPDATE_ID`].
const MAX_OFFSET: i64 = MAX_UPDATE_ID + 1;

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

pub(super) async fn poll(shared: &Arc<Shared>) -> Result<(), ChannelError> {
    let mut offset = state::read_offset(&shared.paths)?.clamp(0, MAX_OFFSET);
    let wait = Duration::from_secs(shared.config.poll_timeout_seconds);
    let mut backoff = FIRST_BACKOFF;
    loop {
        let polled = tokio::select! {
            () = shared.stop.cancelled() => return Ok(()),
            polled = shared.bot.get_updates(offset, wait) => polled,
        };
        let pause = match polled {
            Ok(updates) => {
                let mut out_of_range = 0_usize;
                let count = updates.len();
                for update in updates {
                    let next = match admit(offset, update.update_id) {
                        Admit::Seen => continue,
                        Admit::OutOfRange => {
                            out_of_range = out_of_range.saturating_add(1);
                            tracing::warn!(
                                update_id = update.update_id,
                                "telegram: dropped an update whose id is out of range"
                            );
                            continue;
                        }
                        Admit::Handle { next } => next,
                    };
                    inbound::handle(shared, update).await;
                    offset = next;
                    state::write_offset(&shared.paths, offset)?;
                    if shared.stop.is_cancelled() {
                        return Ok(());
                    }
                }
                if count == 0 || out_of_range < count {
                    backoff = FIRST_BACKOFF;
                    continue;
                }
                let pause = backoff;
                backoff = backoff.saturating_mul(2).min(MAX_BACKOFF);
                pause
            }
            Err(e @ BotError::RetryAfter { .. }) => {
                let pause = e.retry_wait().unwrap_or(FIRST_BACKOFF);
                tracing::warn!(
                    wait_ms = duration_ms(pause),
                    "telegram: getUpdates rate limited"
                );
                pause
            }
            Err(BotError::Conflict(description)) => {
                return Err(ChannelError::Conflict(description));
            }
            Err(e @ BotError::Unauthorized { .. }) => return Err(ChannelError::Unauthorized(e)),
            Err(e) => {
                tracing::warn!(error = %e, backoff_ms = duration_ms(backoff), "telegram: getUpdates failed");
                let pause = backoff;
                backoff = backoff.saturating_mul(2).min(MAX_BACKOFF);
                pause
            }
        };
        if !pause_unless_stopped(&shared.stop, pause).await {
            return Ok(());
        }
    }
}

/// Sleeps for `pause`, but never longer than [`MAX_RETRY_AFTER`]; `false` when `stop` came first.
async fn pause_unless_stopped(stop: &CancellationToken, pause: Duration) -> bool {
    tokio::select! {
        () = stop.cancelled() => false,
        () = tokio::time::sleep(pause.min(MAX_RETRY_AFTER)) => true,
    }
}

/// What the poller does with an update, given the offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admit {
    /// Handle it; the offset becomes `next`.
    Handle { next: i64 },
    /// Below the offset: handled already.
    Seen,
    /// Negative or above [`MAX_UPDATE_ID`]: dropped.
    OutOfRange,
}

fn admit(offset: i64, update_id: i64) -> Admit {
    if !(0..=MAX_UPDATE_ID).contains(&update_id) {
        return Admit::OutOfRange;
    }
    if update_id < offset {
        return Admit::Seen;
    }
    match update_id.checked_add(1) {
        Some(next) => Admit::Handle { next },
        None => Admit::OutOfRange,
    }
}

fn duration_ms(wait: Duration) -> u64 {
    u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_id_moves_the_offset_only_within_range_and_never_overflows() {
        assert_eq!(admit(0, 1000), Admit::Handle { next: 1001 });
        assert_eq!(admit(1001, 1000), Admit::Seen);
        assert_eq!(admit(1001, 1001), Admit::Handle { next: 1002 });
        assert_eq!(
            admit(0, MAX_UPDATE_ID),
            Admit::Handle {
                next: MAX_UPDATE_ID + 1
            }
        );
        for hostile in [MAX_UPDATE_ID + 1, i64::MAX, -1, i64::MIN] {
            assert_eq!(admit(0, hostile), Admit::OutOfRange, "{hostile}");
            assert_eq!(admit(1001, hostile), Admit::OutOfRange, "{hostile}");
        }
    }

    /// A 429 asking for ever (its wait already capped by `retry_wait`, and capped here again for
    /// any other pause) ends after [`MAX_RETRY_AFTER`]; a stop ends any pause at once.
    #[tokio::test(start_paused = true)]
    async fn a_pause_lasts_at_most_the_cap_and_a_stop_ends_it_at_once() {
        let stop = CancellationToken::new();
        let started = tokio::time::Instant::now();
        let huge = BotError::RetryAfter {
            retry_after: u64::MAX,
        }
        .retry_wait()
        .unwrap_or(Duration::ZERO);
        assert!(pause_unless_stopped(&stop, huge).await);
        assert_eq!(started.elapsed(), MAX_RETRY_AFTER);
        let started = tokio::time::Instant::now();
        assert!(pause_unless_stopped(&stop, Duration::MAX).await);
        assert_eq!(started.elapsed(), MAX_RETRY_AFTER);

        let started = tokio::time::Instant::now();
        let stopper = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            stopper.cancel();
        });
        assert!(!pause_unless_stopped(&stop, Duration::MAX).await);
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }
}
