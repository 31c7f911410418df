//! One run of the Telegram channel: connect to the hub, delete any webhook, settle the cards an
//! earlier run left, start the approval watch (every question asked on channel `telegram`, a
//! routine's too, reaches the owner's chat as a card), then long-poll the Bot API until stopped or
//! refused.
//!
//! Invariants:
//! - the owner is two ids, never one taken for the other: the user id, whose messages and taps
//!   alone count, and the chat id, where the channel talks (paired: the private chat `/start` came
//!   from; pinned in `tau.toml`: both keys or neither, see [`pinned_owner`]); only the owner's
//!   updates reach the hub: a message must come from the owner's user id in the owner's chat, a
//!   tap must pass every check of [`cards`]; anything else is dropped with a debug line naming its
//!   ids, never its text;
//! - the poll offset is persisted after each update, so after a restart no update is handled
//!   twice except the one in flight (whose turn the hub deduplicates by its idempotency key);
//! - a 409 (another poller) or a refused token ends the run with an error that says so, so the
//!   supervisor reports it instead of spinning; every other failure backs off;
//! - every task of a run (relays, cards' timers and subscriptions, the approval watch) ends with
//!   it: the run's stop cancels them and the run waits for them;
//! - no lock is held across an `.await`.

mod approval_watch;
mod card_deadline;
mod cards;
mod claims;
mod commands;
mod inbound;
mod poller;
mod presenting;
mod turn_relay;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tau_api::config::TelegramConfig;
use tau_api::credentials::Secret;
use tau_api::lang::Lang;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::bot_api::{BotClient, BotError};
use crate::hub_link::{self, HubClient, HubError};
use crate::render::escape_html;
use crate::state::{self, OwnerBinding, PresentationLog, StateError, StatePaths};
use crate::texts::Texts;

/// What the channel needs to run.
#[derive(Debug, Clone)]
pub struct ChannelOptions {
    pub config: TelegramConfig,
    pub token: Secret,
    /// `<TAU_DATA_DIR>/telegram`.
    pub state: StatePaths,
    /// The hub's gRPC socket.
    pub socket: PathBuf,
    pub lang: Lang,
    /// How long a turn's relay waits for StartTurn's answer and then for its first message
    /// (`crate::hub_link::CALL_TIMEOUT` but in tests).
    pub hub_call_timeout: Duration,
}

/// Where a run is, as the hub's status shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelPhase {
    /// Connecting and settling earlier cards.
    Starting,
    /// Polling, with an owner bound.
    Running,
    /// Polling, waiting for `/start <code>` from `tau telegram pair`.
    NotPaired,
}

/// Why a run ended.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// Another process polls this bot (409): not retried.
    #[error(
        "another process polls this bot (409 Conflict): {0}; stop the other instance, then restart the hub"
    )]
    Conflict(String),
    /// The token was refused: not retried.
    #[error("{0}; check TELEGRAM_BOT_TOKEN")]
    Unauthorized(BotError),
    #[error(transparent)]
    Hub(#[from] HubError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error("{0}")]
    Setup(String),
    /// Only one of `owner_user_id` and `owner_chat_id` is set: not retried.
    #[error(
        "owner_user_id and owner_chat_id pin the owner together: set both or neither (and run `tau telegram pair`)"
    )]
    HalfPinnedOwner,
}

impl ChannelError {
    /// Whether restarting cannot help (a conflict, a refused token, a half-pinned owner).
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            ChannelError::Conflict(_)
                | ChannelError::Unauthorized(_)
                | ChannelError::HalfPinnedOwner
        )
    }
}

/// A card this process shows, with what deciding it needs.
#[derive(Debug, Clone)]
struct LiveCard {
    approval_id: String,
    /// The attachment (of the turn's stream or a re-presenting subscription) that was shown it.
    attachment_id: String,
    body_html: String,
}

/// The cards: the persisted log and this process's live ones.
#[derive(Debug, Default)]
struct CardBook {
    log: PresentationLog,
    live: HashMap<String, LiveCard>,
    /// Tokens whose decision is on its way to the hub: a second tap is "already decided".
    deciding: HashSet<String>,
    /// Tokens whose card is being sent: a tap can arrive before `sendMessage` returns.
    presenting: HashSet<String>,
    /// Approvals whose card this run is setting up (see [`claims::claim`]).
    claimed: HashSet<String>,
}

/// What every task of one run shares.
struct Shared {
    bot: BotClient,
    hub: HubClient,
    texts: Texts,
    config: TelegramConfig,
    paths: StatePaths,
    /// [`ChannelOptions::hub_call_timeout`].
    hub_call_timeout: Duration,
    /// This process's epoch: only its tokens can approve.
    epoch: String,
    owner: Mutex<Option<OwnerBinding>>,
    session: Mutex<Option<String>>,
    cards: Mutex<CardBook>,
    /// The turns this run's relays stream: their questions are the relays' to show.
    own_turns: Mutex<HashSet<String>>,
    stop: CancellationToken,
    tasks: TaskTracker,
    phase: watch::Sender<ChannelPhase>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    fn owner(&self) -> Option<OwnerBinding> {
        *lock(&self.owner)
    }

    fn session(&self) -> Option<String> {
        lock(&self.session).clone()
    }

    fn set_session(&self, id: &str) -> Result<(), StateError> {
        state::write_session(&self.paths, id)?;
        *lock(&self.session) = Some(id.to_owned());
        Ok(())
    }

    fn bind_owner(&self, owner: OwnerBinding) -> Result<(), StateError> {
        state::write_owner(&self.paths, &owner)?;
        *lock(&self.owner) = Some(owner);
        self.phase.send_replace(ChannelPhase::Running);
        Ok(())
    }

    /// Sends a chrome text (escaped) to `chat`; a failure is logged.
    async fn send_plain(&self, chat: i64, text: &str) {
        if let Err(e) = self.bot.send_message(chat, &escape_html(text), None).await {
            tracing::warn!(error = %e, "telegram: sendMessage failed");
        }
    }
}

/// Runs the channel until `stop` is cancelled (`Ok`) or a failure ends the run.
pub async fn run_channel(
    options: ChannelOptions,
    phase: watch::Sender<ChannelPhase>,
    stop: CancellationToken,
) -> Result<(), ChannelError> {
    phase.send_replace(ChannelPhase::Starting);
    let texts = Texts::new(options.lang).map_err(|e| ChannelError::Setup(e.to_string()))?;
    let bot = BotClient::new(&options.config.api_base, &options.token)
        .map_err(|e| ChannelError::Setup(e.to_string()))?;
    let hub = hub_link::connect(&options.socket).await?;
    let owner = match pinned_owner(&options.config)? {
        Some(owner) => Some(owner),
        None => state::read_owner(&options.state)?,
    };
    let session = state::read_session(&options.state)?;
    let log = PresentationLog::load(&options.state)?;
    let epoch = state::random_token().map_err(ChannelError::Setup)?;
    let shared = Arc::new(Shared {
        bot,
        hub,
        texts,
        config: options.config,
        paths: options.state,
        hub_call_timeout: options.hub_call_timeout,
        epoch,
        owner: Mutex::new(owner),
        session: Mutex::new(session),
        cards: Mutex::new(CardBook {
            log,
            ..CardBook::default()
        }),
        own_turns: Mutex::default(),
        stop: stop.child_token(),
        tasks: TaskTracker::new(),
        phase,
    });
    let result = run(&shared).await;
    // Turn relays and card timers end with the run: their attachments go with them.
    shared.stop.cancel();
    shared.tasks.close();
    shared.tasks.wait().await;
    result
}

/// The owner pinned in `tau.toml`, if any. Both ids or neither: a user id is never taken for the
/// chat (only a private chat's id equals its user's), nor a chat id for the user.
fn pinned_owner(config: &TelegramConfig) -> Result<Option<OwnerBinding>, ChannelError> {
    match (config.owner_user_id, config.owner_chat_id) {
        (Some(user), Some(chat)) => Ok(Some(OwnerBinding::new(user, chat, 0))),
        (None, None) => Ok(None),
        _ => Err(ChannelError::HalfPinnedOwner),
    }
}

async fn run(shared: &Arc<Shared>) -> Result<(), ChannelError> {
    match shared.bot.delete_webhook().await {
        Ok(_) => {}
        Err(e @ BotError::Unauthorized { .. }) => return Err(ChannelError::Unauthorized(e)),
        // Not fatal: getUpdates says so if a webhook is really in the way.
        Err(e) => tracing::warn!(error = %e, "telegram: deleteWebhook failed"),
    }
    presenting::settle_earlier_cards(shared).await;
    approval_watch::spawn(shared);
    shared.phase.send_replace(if shared.owner().is_some() {
        ChannelPhase::Running
    } else {
        ChannelPhase::NotPaired
    });
    poller::poll(shared).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn pinned(user: Option<i64>, chat: Option<i64>) -> Result<Option<OwnerBinding>, ChannelError> {
        pinned_owner(&TelegramConfig {
            owner_user_id: user,
            owner_chat_id: chat,
            ..TelegramConfig::default()
        })
    }

    #[test]
    fn a_pinned_owner_is_both_ids_and_one_is_never_taken_for_the_other() {
        let owner = pinned(Some(42), Some(-100_777)).unwrap().unwrap();
        assert_eq!((owner.user_id, owner.chat_id), (42, -100_777));
        assert!(owner.is_owner(42, -100_777));
        assert!(
            !owner.is_owner(-100_777, -100_777),
            "the chat is not the user"
        );
        assert!(
            !owner.is_owner(42, 42),
            "the user's private chat is not the pinned chat"
        );
        assert_eq!(pinned(None, None).unwrap(), None, "paired instead");
        for (user, chat) in [(Some(42), None), (None, Some(42))] {
            let e = pinned(user, chat).unwrap_err();
            assert!(matches!(e, ChannelError::HalfPinnedOwner), "{e}");
            assert!(e.is_final(), "restarting cannot help");
        }
    }
}
