//! What the hub core hands a client that watches a session: a [`TurnStream`] (one turn's events,
//! from StartTurn: [`start_turn`]) or an [`EventStream`] (a [`Snapshot`], then every event, from
//! Subscribe: [`subscribe`]). Each holds the client's [`Attachment`] on the session's channel for
//! as long as it lives. Also a turn that creates its session ([`start_turn_in_new_session`]) and
//! cancelling a turn ([`cancel_turn`]).
//!
//! Invariants: a turn's stream is attached before its turn is accepted, so an approval the turn
//! asks at once finds it attached; a turn no client started has no attachment and decides nothing;
//! seqs are numbered per process, and a resumption naming another numbering is refused, never
//! served events of another numbering; a turn stream yields only its turn's events, in seq order,
//! and ends right after its `TurnEnded`; an event stream yields every event after its snapshot
//! without gaps, or ends with [`Lagged`]; dropping either ends the attachment (and may close the
//! channel's approvals), except after a [`Lagged`]: then the attachment is held for [`LAG_GRACE`]
//! (see [`Attachment::hold_after_lag`]) so the client can resubscribe before its approvals close.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::core_state::CoreState;
use super::runtime::SessionRuntime;
use super::session_api::{SessionSummary, create_session, require_session, summary};
use super::turn_queue::{AcceptError, Accepted};
use crate::hub::approvals::{Attachment, LAG_GRACE};
use crate::hub::error::CoreError;
use crate::hub::events::{EventKind, PendingInfo, SessionEvent, TurnInfo};
use crate::hub::events::{Lagged, Subscription};
use crate::hub::limits::{
    check_channel, check_idempotency_key, check_ref_id, check_session_id, check_text,
};

/// One turn's events for the client that started it.
#[derive(Debug)]
pub struct TurnStream {
    accepted: Accepted,
    attachment_id: String,
    /// `None` once handed to its grace hold after a lag.
    attachment: Option<Attachment>,
    subscription: Option<Subscription>,
    ready: VecDeque<Arc<SessionEvent>>,
    done: bool,
    stop: CancellationToken,
}

impl TurnStream {
    /// A turn's stream; without an attachment (a turn no client started) it decides nothing and
    /// its attachment id is empty.
    pub(crate) fn new(
        accepted: Accepted,
        attachment: Option<Attachment>,
        subscription: Option<Subscription>,
        ready: VecDeque<Arc<SessionEvent>>,
        stop: CancellationToken,
    ) -> Self {
        Self {
            accepted,
            attachment_id: attachment
                .as_ref()
                .map(|a| a.id().to_owned())
                .unwrap_or_default(),
            attachment,
            subscription,
            ready,
            done: false,
            stop,
        }
    }

    pub fn accepted(&self) -> &Accepted {
        &self.accepted
    }

    /// This stream's attachment id (for deciding approvals).
    pub fn attachment_id(&self) -> &str {
        &self.attachment_id
    }

    /// The turn's next event; `Ok(None)` after its `TurnEnded`.
    pub async fn next(&mut self) -> Result<Option<Arc<SessionEvent>>, Lagged> {
        if self.done {
            return Ok(None);
        }
        let event = match self.ready.pop_front() {
            Some(event) => Some(event),
            None => match self.next_of_turn().await {
                Ok(event) => event,
                Err(lagged) => {
                    self.done = true;
                    self.subscription = None;
                    if let Some(attachment) = self.attachment.take() {
                        attachment.hold_after_lag(LAG_GRACE, &self.stop);
                    }
                    return Err(lagged);
                }
            },
        };
        match event {
            Some(event) => {
                if matches!(event.kind, EventKind::TurnEnded(_)) {
                    self.done = true;
                }
                Ok(Some(event))
            }
            None => {
                self.done = true;
                Ok(None)
            }
        }
    }

    async fn next_of_turn(&mut self) -> Result<Option<Arc<SessionEvent>>, Lagged> {
        let Some(subscription) = self.subscription.as_mut() else {
            return Ok(None);
        };
        loop {
            match subscription.next().await? {
                None => return Ok(None),
                Some(event) if event.turn_id.as_deref() == Some(&self.accepted.turn_id) => {
                    return Ok(Some(event));
                }
                Some(_) => {}
            }
        }
    }
}

/// A session's state when a subscriber attached.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub session: SessionSummary,
    pub running: Option<TurnInfo>,
    pub queued: Vec<TurnInfo>,
    pub pending: Vec<PendingInfo>,
    /// The seq the snapshot is current with.
    pub last_seq: u64,
    pub attachment_id: String,
    pub role: String,
    /// The numbering `last_seq` and the events belong to (`HubCore::stream_id`).
    pub stream_id: String,
}

/// A subscriber's view of a session: the snapshot, then every event, until the hub stops.
#[derive(Debug)]
pub struct EventStream {
    snapshot: Snapshot,
    /// `None` once handed to its grace hold after a lag.
    attachment: Option<Attachment>,
    subscription: Subscription,
    stop: CancellationToken,
}

impl EventStream {
    pub(crate) fn new(
        snapshot: Snapshot,
        attachment: Attachment,
        subscription: Subscription,
        stop: CancellationToken,
    ) -> Self {
        Self {
            snapshot,
            attachment: Some(attachment),
            subscription,
            stop,
        }
    }

    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// On a resumption, the last deltas delivered before it (`Subscription::take_lead`).
    pub fn take_lead(&mut self) -> Vec<Arc<SessionEvent>> {
        self.subscription.take_lead()
    }

    /// The next event; `Ok(None)` when the hub stops; `Err(Lagged)` when this subscriber fell
    /// too far behind (its attachment is then held for [`LAG_GRACE`] and this stream is done).
    pub async fn next(&mut self) -> Result<Option<Arc<SessionEvent>>, Lagged> {
        let next = tokio::select! {
            () = self.stop.cancelled() => Ok(None),
            next = self.subscription.next() => next,
        };
        if next.is_err()
            && let Some(attachment) = self.attachment.take()
        {
            attachment.hold_after_lag(LAG_GRACE, &self.stop);
        }
        next
    }
}

/// A turn to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartTurn {
    pub session_id: String,
    pub text: String,
    /// Empty: [`DEFAULT_CHANNEL`](crate::hub::limits::DEFAULT_CHANNEL).
    pub channel: String,
    /// Empty: no deduplication.
    pub idempotency_key: String,
}

/// Starts a turn (or finds the one its idempotency key names) and streams its events. With
/// `held_for` it is a turn no client started (a routine's): its stream is nobody's attachment, so
/// it decides nothing, and its questions are held for that long (see the approval registry).
pub(in crate::hub) async fn start_turn(
    state: &Arc<CoreState>,
    request: StartTurn,
    held_for: Option<Duration>,
) -> Result<TurnStream, CoreError> {
    let channel = check_channel(&request.channel)?;
    check_text(&request.text)?;
    let key = check_idempotency_key(&request.idempotency_key)?;
    let max_queued = state.options().max_queued_turns;
    for _ in 0..2 {
        let runtime = state.runtime(&request.session_id, None).await?;
        // Attach first, to the turn about to be made: an approval the turn asks at once must
        // find its stream attached.
        let fresh_id = state.new_turn_id();
        let attachment = match held_for {
            Some(_) => None,
            None => Some(
                state
                    .registry()
                    .attach_turn(&runtime.bus, &channel, &fresh_id)?,
            ),
        };
        let accepted = match runtime.turns.accept(
            request.text.clone(),
            channel.clone(),
            key.clone(),
            max_queued,
            held_for,
            || fresh_id.clone(),
        ) {
            Ok(accepted) => {
                runtime.touch();
                accepted
            }
            Err(AcceptError::Closed) => continue,
            Err(AcceptError::QueueFull(n)) => {
                return Err(CoreError::ResourceExhausted(format!(
                    "{n} turns are already waiting in this session; try again when one has finished"
                )));
            }
        };
        if accepted.turn_id != fresh_id
            && let Some(attachment) = &attachment
        {
            // A repeat: the stream replays the earlier turn from its start.
            attachment.show_turn(&accepted.turn_id);
        }
        let after = accepted.first_seq.saturating_sub(1);
        let (subscription, ready) = match runtime.bus.subscribe(Some(after)) {
            Ok(subscription) => (Some(subscription), VecDeque::new()),
            Err(_) => turn_fallback(&runtime, &accepted.turn_id),
        };
        return Ok(TurnStream::new(
            accepted,
            attachment,
            subscription,
            ready,
            state.stop.clone(),
        ));
    }
    Err(CoreError::Unavailable(
        "the session was closing; try again".to_owned(),
    ))
}

/// Starts a turn in a new session (StartTurn's `new_session`): the session is created whole, titled
/// from the turn's text (no title write follows the turn), then the turn starts in it as in
/// [`start_turn`]. `session_id` must be empty. The request's fields are checked before anything
/// is created, so a refused turn leaves no session behind. With an idempotency key, a repeated
/// request (same channel and key) starts its turn in the session the first one made, where the
/// key returns the first turn (`NewSessionKeys`).
pub(in crate::hub) async fn start_turn_in_new_session(
    state: &Arc<CoreState>,
    mut request: StartTurn,
) -> Result<TurnStream, CoreError> {
    if !request.session_id.is_empty() {
        return Err(CoreError::InvalidArgument(
            "session_id must be empty when new_session is set".to_owned(),
        ));
    }
    let channel = check_channel(&request.channel)?;
    check_text(&request.text)?;
    let Some(key) = check_idempotency_key(&request.idempotency_key)? else {
        request.session_id = create_session(state, &channel, None, Some(&request.text)).await?;
        return start_turn(state, request, None).await;
    };
    // A retry finds the session its first request made, and there the key finds the first turn.
    let cell = state.new_session_keys.cell(&channel, &key);
    let session_id = cell
        .get_or_try_init(|| create_session(state, &channel, None, Some(&request.text)))
        .await?;
    request.session_id = session_id.clone();
    let started = start_turn(state, request, None).await;
    if let Err(CoreError::NotFound(_)) = &started {
        // Deleted since: the key names nothing now, and the turn is not run again.
        state.new_session_keys.forget(&channel, &key);
    }
    started
}

/// For a repeated turn whose events are no longer buffered: its end if it ended, else the live
/// events from now.
fn turn_fallback(
    runtime: &SessionRuntime,
    turn_id: &str,
) -> (Option<Subscription>, VecDeque<Arc<SessionEvent>>) {
    let ended = runtime
        .turns
        .lock()
        .known(turn_id)
        .and_then(|k| k.ended.clone());
    match ended {
        Some((seq, at, end)) => {
            let event = Arc::new(SessionEvent {
                seq,
                session_id: runtime.session_id.clone(),
                turn_id: Some(turn_id.to_owned()),
                at,
                kind: EventKind::TurnEnded(end),
            });
            (None, VecDeque::from([event]))
        }
        None => (runtime.bus.subscribe(None).ok(), VecDeque::new()),
    }
}

/// Cancels a turn (`None`: the running one); returns the turn it applied to, if any.
pub(in crate::hub) async fn cancel_turn(
    state: &Arc<CoreState>,
    session_id: &str,
    turn_id: Option<&str>,
) -> Result<Option<String>, CoreError> {
    check_session_id(session_id)?;
    if let Some(turn_id) = turn_id {
        check_ref_id("turn_id", turn_id)?;
    }
    match state.open_runtime(session_id).await {
        Some(runtime) => Ok(runtime.turns.cancel(turn_id)),
        None => {
            require_session(state, session_id).await?;
            Ok(None)
        }
    }
}

/// Attaches to a session on `channel`: the snapshot, then its events after `after_seq` (see
/// [`EventBus::subscribe_with`](crate::hub::EventBus::subscribe_with)) of the stream `stream_id` names (`None`: unchecked). With
/// `after_seq` set, a stream id other than this process's is refused (`FailedPrecondition`): its
/// seqs numbered another hub process's events.
pub(in crate::hub) async fn subscribe(
    state: &Arc<CoreState>,
    session_id: &str,
    after_seq: Option<u64>,
    stream_id: Option<&str>,
    channel: &str,
) -> Result<EventStream, CoreError> {
    let channel = check_channel(channel)?;
    check_session_id(session_id)?;
    if let Some(stream_id) = stream_id {
        check_ref_id("stream_id", stream_id)?;
    }
    if let (Some(after_seq), Some(stream_id)) = (after_seq, stream_id)
        && stream_id != state.stream_id
    {
        return Err(CoreError::FailedPrecondition(format!(
            "after_seq {after_seq} is from event stream {:?}, but this hub's stream is {:?}: the hub restarted; subscribe again without after_seq",
            stream_id.chars().take(80).collect::<String>(),
            state.stream_id
        )));
    }
    let runtime = state.runtime(session_id, None).await?;
    let session = summary(state, session_id).await?;
    let attachment = state.registry().attach(&runtime.bus, &channel)?;
    let registry = Arc::clone(state.registry());
    let attachment_id = attachment.id().to_owned();
    let role = runtime.role();
    let (snapshot, subscription) = runtime
        .bus
        .subscribe_with(after_seq, |last_seq| {
            let turns = runtime.turns.lock();
            Snapshot {
                session,
                running: turns.running.as_ref().map(|r| r.info.clone()),
                queued: turns.queue.iter().map(|r| r.info.clone()).collect(),
                pending: registry.list_pending(Some(session_id)),
                last_seq,
                attachment_id,
                role,
                stream_id: state.stream_id.clone(),
            }
        })
        .map_err(|e| CoreError::FailedPrecondition(e.to_string()))?;
    Ok(EventStream::new(
        snapshot,
        attachment,
        subscription,
        state.stop.clone(),
    ))
}
