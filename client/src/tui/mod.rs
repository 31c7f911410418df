//! `tau tui`: the full-screen client. A thin gRPC client like `tau chat`, which it reuses: the
//! same attach (starting the hub when none answers), session opening, slash commands (their
//! output drawn in the conversation) and turn relay ([`tau_client::relay`]), with a screen of panes and
//! an approval card that a stray key cannot approve.
//!
//! Rooms: [`app`] (state, events → state), [`view`] and [`card_view`] (drawing), [`card`] (the
//! card's arming and focus), [`input`] (composer) and `history_file` (its history across runs),
//! [`front`] (the relay's front), `idle_loop` (between turns: keys, the session watch, cards of
//! approvals pending here), `session_watch` (the standing Subscribe, reconnecting with back-off),
//! `pending_cards` (the queue of approvals answerable here), [`term`] (terminal guard, key
//! reader), [`wrap`], [`theme`].
//!
//! Invariants: the hub is the authority on sessions, turns and approvals; nothing in a draw waits
//! on the network; the terminal is restored on every way out (return, error, panic, SIGTERM,
//! SIGHUP); logging goes to `tau.log` only; losing the terminal or the hub never approves.

pub mod app;
pub mod card;
pub mod card_view;
mod front;
mod history_file;
mod idle_loop;
pub mod input;
pub mod markdown;
mod pending_cards;
mod replay;
mod session_watch;
mod term;
pub mod theme;
pub mod view;
pub mod wrap;

use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossterm::event::Event;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tau_api::proto::v1 as pb;
use tau_client::call::{CallError, call};
use tau_client::relay::{Outcome, Relay};
use tokio::sync::mpsc;

use self::app::{App, Who};
use self::front::{FRAME, TuiFront};
use self::session_watch::SessionWatch;
use self::theme::Theme;
use crate::chat::state::{CHANNEL, Chat};
use crate::cli::TuiArgs;
use crate::context::Context;

/// What the chat's slash commands print, captured for the conversation pane.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Ok(mut captured) = self.0.lock() {
            captured.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn take(&self) -> String {
        let bytes = self
            .0
            .lock()
            .map(|mut b| std::mem::take(&mut *b))
            .unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// One run of the TUI.
pub struct Tui {
    chat: Chat,
    captured: Captured,
    pub(crate) app: App,
    terminal: Terminal<CrosstermBackend<io::Stdout>>,
    pub(crate) keys: mpsc::Receiver<Event>,
    theme: Theme,
    pub(crate) dirty: bool,
    last_draw: Instant,
    /// The standing Subscribe on the current session (between turns).
    pub(crate) watch: SessionWatch,
    /// Where the composer's history is kept across runs.
    history: std::path::PathBuf,
}

/// Runs `tau tui`.
pub fn run(args: &TuiArgs, ctx: &Context) -> anyhow::Result<ExitCode> {
    let captured = Captured::default();
    let (runtime, chat, chat_history) =
        match crate::chat::open(&args.chat, ctx, Some(Box::new(captured.clone())))? {
            Ok(opened) => opened,
            Err(code) => {
                eprint!("{}", captured.take());
                return Ok(code);
            }
        };
    let theme = Theme::detect(&crate::environment::snapshot(ctx));
    let guard = term::TerminalGuard::enter()?;
    let flag = guard.flag();
    let _runtime = runtime.enter();
    for kind in [
        tokio::signal::unix::SignalKind::terminate(),
        tokio::signal::unix::SignalKind::hangup(),
    ] {
        if let Ok(mut signal) = tokio::signal::unix::signal(kind) {
            let flag = Arc::clone(&flag);
            runtime.spawn(async move {
                signal.recv().await;
                // Restore, then exit: nothing is sent, so a pending approval is never approved.
                term::restore_once(&flag);
                std::process::exit(143);
            });
        }
    }
    let mut app = App::new(tau_api::i18n::Messages::builtin(), chat.lang);
    app.status.profile = chat.info.profile.clone();
    app.status.context = chat.info.context.clone();
    app.limits = chat.info.limits;
    app.status.hub = idle_loop::LIVE.to_owned();
    let history = chat_history.with_file_name(history_file::FILE_NAME);
    app.composer = input::Composer::with_history(history_file::load(&history));
    let watch = SessionWatch::new(chat.hub.clone(), CHANNEL, chat.deadlines.call);
    let mut tui = Tui {
        watch,
        history,
        chat,
        captured,
        app,
        terminal: Terminal::new(CrosstermBackend::new(io::stdout()))?,
        keys: term::read_keys(),
        theme,
        dirty: true,
        last_draw: Instant::now(),
    };
    let code = runtime.block_on(tui.main_loop());
    drop(tui);
    drop(guard);
    Ok(code)
}

impl Tui {
    /// Draws now; returns when the frame was flushed.
    pub(crate) fn draw_now(&mut self) -> Instant {
        let (app, theme) = (&self.app, self.theme);
        let now = Instant::now();
        if let Err(error) = self
            .terminal
            .draw(|frame| view::draw(frame, app, theme, now))
        {
            tracing::warn!("drawing failed: {error}");
        }
        self.dirty = false;
        self.last_draw = Instant::now();
        let fits = self.terminal.size().is_ok_and(|size| {
            card_view::fits(ratatui::layout::Rect::new(0, 0, size.width, size.height))
        });
        if let Some(card) = &mut self.app.card {
            // The card arms from its first frame on screen, and never when it does not fit.
            card.fits = fits;
            card.drawn(self.last_draw);
        }
        self.last_draw
    }

    /// Draws when something changed and a frame's time has passed; otherwise how long to wait
    /// before drawing (None: nothing to draw).
    pub(crate) fn draw_throttled(&mut self) -> Option<Duration> {
        if !self.dirty {
            return None;
        }
        let since = self.last_draw.elapsed();
        if since >= FRAME {
            self.draw_now();
            None
        } else {
            Some(FRAME - since)
        }
    }

    pub(crate) fn report(&mut self, error: &CallError) {
        self.chat.report(error);
        self.flush_captured();
    }

    /// Moves what the chat printed into the conversation.
    fn flush_captured(&mut self) {
        let text = self.captured.take();
        let text = text.trim_end();
        if !text.is_empty() {
            self.app.say(Who::Notice, text);
            self.dirty = true;
        }
    }

    /// Refreshes what the screen shows of the chat's state.
    async fn refresh(&mut self) {
        if self.app.session_id != self.chat.session_id() {
            self.app.session_id = self.chat.session_id().to_owned();
            self.watch.watch(&self.app.session_id);
            self.replay().await;
        }
        self.app.status.role.clone_from(&self.chat.role);
        let request = self.chat.hub.list_model_roles(pb::ListModelRolesRequest {});
        if let Ok(roles) = call(&mut self.chat.interrupts, self.chat.deadlines.call, request).await
            && let Some(role) = roles.roles.iter().find(|r| r.name == self.chat.role)
        {
            self.app.status.role = format!("{} → {}", role.name, role.provider);
        }
        self.app.lang = self.chat.lang;
        let request = self
            .chat
            .hub
            .list_sessions(pb::ListSessionsRequest::default());
        if let Ok(listing) =
            call(&mut self.chat.interrupts, self.chat.deadlines.call, request).await
        {
            self.app.sessions = listing.sessions;
        }
        self.dirty = true;
    }

    /// Fills the events pane from the session's stored events and the approvals pending on other
    /// channels.
    async fn replay(&mut self) {
        let (session_id, deadline) = (self.app.session_id.clone(), self.chat.deadlines.call);
        let request = self.chat.hub.read_events(pb::ReadEventsRequest {
            session_id: session_id.clone(),
        });
        let stored = match call(&mut self.chat.interrupts, deadline, request).await {
            Ok(response) => response.events,
            Err(error) => return self.report(&error),
        };
        let request = self
            .chat
            .hub
            .list_pending_approvals(pb::ListPendingApprovalsRequest { session_id });
        let mut pending = call(&mut self.chat.interrupts, deadline, request)
            .await
            .map(|response| response.approvals)
            .unwrap_or_default();
        // This channel's open the card when the session watch's snapshot lists them.
        pending.retain(|approval| approval.channel != CHANNEL);
        self.app.replay(&stored, &pending);
    }

    /// Runs one turn through the relay.
    async fn turn(&mut self, text: &str) {
        self.app.turn_started(text);
        self.draw_now();
        let started = crate::chat::turn::start(&mut self.chat, text).await;
        let stream = match started {
            Ok(stream) => stream,
            Err(error) => {
                self.app.turn_finished("");
                return self.report(&error);
            }
        };
        let session_id = self.chat.session_id().to_owned();
        let (client, deadline) = (self.chat.hub.clone(), self.chat.deadlines.call);
        let mut front = TuiFront { tui: self };
        let outcome = Relay::new(client, &session_id, CHANNEL, stream, &mut front, deadline)
            .run()
            .await;
        // A card still undecided belongs to a turn no longer followed: its stream can no longer
        // decide it, but the session watch can, as long as the hub keeps it pending (the watch's
        // events drop it from the queue once resolved).
        if let Some(card) = self.app.card.take_if(|card| card.verdict.is_none()) {
            self.app.waiting.push_front(card.approval);
        }
        match outcome {
            Outcome::Ended(_) => {}
            Outcome::Detached | Outcome::Stopped => {
                self.app.turn_finished("");
                let text = self.app.t("chat.detached", &[]);
                self.app.say(Who::Notice, &text);
            }
            Outcome::StreamLost(error) => {
                self.app.turn_finished("");
                let reason =
                    error.map_or_else(|| "the hub closed the stream".to_owned(), |e| e.reason());
                let text = self.app.t("chat.stream_lost", &[("reason", &reason)]);
                self.app.say(Who::Error, &text);
            }
        }
        self.refresh().await;
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod bench;
