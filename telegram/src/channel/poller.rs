//! The `getUpdates` loop: long polls from the persisted offset, hands each update to
//! [`super::inbound`], then persists the next offset.
//!
//! Invariants: a 429 waits its `retry_after`, but never more than [`MAX_RETRY_AFTER`] (the number
//! comes from outside: a huge one must not put the poller to sleep for ever while the run still
//! reports itself running); a 409 or a refused token ends the loop (the caller reports it, nobody
//! spins); other failures back off from 1 s doubling to 30 s, reset by a success; no pause is
//! longer than [`MAX_RETRY_AFTER`], and every pause also ends as soon as the run stops.

use std::sync::Arc;
use std::time::Duration;

use crate::bot_api::{BotError, MAX_RETRY_AFTER};
use crate::state;

use super::{ChannelError, Shared, inbound};

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

pub(super) async fn poll(shared: &Arc<Shared>) -> Result<(), ChannelError> {
    let mut offset = state::read_offset(&shared.paths)?;
    let wait = Duration::from_secs(shared.config.poll_timeout_seconds);
    let mut backoff = FIRST_BACKOFF;
    loop {
        let polled = tokio::select! {
            () = shared.stop.cancelled() => return Ok(()),
            polled = shared.bot.get_updates(offset, wait) => polled,
        };
        let pause = match polled {
            Ok(updates) => {
                backoff = FIRST_BACKOFF;
                for update in updates {
                    if update.update_id < offset {
                        continue;
                    }
                    let id = update.update_id;
                    inbound::handle(shared, update).await;
                    offset = id + 1;
                    state::write_offset(&shared.paths, offset)?;
                    if shared.stop.is_cancelled() {
                        return Ok(());
                    }
                }
                continue;
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
        tokio::select! {
            () = shared.stop.cancelled() => return Ok(()),
            () = tokio::time::sleep(pause.min(MAX_RETRY_AFTER)) => {}
        }
    }
}

fn duration_ms(wait: Duration) -> u64 {
    u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)
}
