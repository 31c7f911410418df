//! The `getUpdates` loop: long polls from the persisted offset, hands each update to
//! [`super::inbound`], then persists the next offset.
//!
//! Invariants: a 429 waits exactly `retry_after`; a 409 or a refused token ends the loop (the
//! caller reports it, nobody spins); other failures back off from 1 s doubling to 30 s, reset by
//! a success; every wait also ends when the run stops.

use std::sync::Arc;
use std::time::Duration;

use crate::bot_api::BotError;
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
            Err(BotError::RetryAfter { retry_after }) => {
                tracing::warn!(retry_after, "telegram: getUpdates rate limited");
                Duration::from_secs(retry_after)
            }
            Err(BotError::Conflict(description)) => {
                return Err(ChannelError::Conflict(description));
            }
            Err(e @ BotError::Unauthorized { .. }) => return Err(ChannelError::Unauthorized(e)),
            Err(e) => {
                tracing::warn!(error = %e, backoff_ms = backoff.as_millis() as u64, "telegram: getUpdates failed");
                let pause = backoff;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                pause
            }
        };
        tokio::select! {
            () = shared.stop.cancelled() => return Ok(()),
            () = tokio::time::sleep(pause) => {}
        }
    }
}
