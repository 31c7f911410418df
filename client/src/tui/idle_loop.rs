//! The TUI between turns: one loop over the terminal's keys, the session watch
//! ([`SessionWatch`](super::session_watch::SessionWatch)) and the card's arming deadline. A line
//! sent starts a turn (relayed by [`super::front`]) or runs a slash command; an approval pending
//! here opens the card, and its decision goes to the hub with the watch's attachment; a lost hub
//! shows in the status line while the watch tries again.
//!
//! Invariants: Ctrl-C (no card open) and `/quit` leave at once, whatever the hub's state; the
//! card decides only through [`App::card_event`](super::app::App) (armed, focus on Reject); the
//! composer's history file is written after each sent line and never holds a key the card took.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use tau_api::commands::{find_command, split_command};
use tau_client::call::call;

use super::card::Verdict;
use super::front::{FRAME, Key, verdict_of};
use super::pending_cards::CardInput;
use super::session_watch::Watched;
use super::{Tui, history_file};
use crate::chat::commands;
use crate::chat::state::CHANNEL;

/// The status line's hub state while the watch's stream is live.
pub const LIVE: &str = "live";

impl Tui {
    pub(super) async fn main_loop(&mut self) -> ExitCode {
        self.flush_captured();
        self.refresh().await;
        loop {
            if self.app.next_card() {
                self.dirty = true;
            }
            let wait = self.draw_throttled();
            let arms_at = self
                .app
                .card
                .as_ref()
                .filter(|card| card.verdict.is_none())
                .and_then(super::card::Card::arms_at)
                .filter(|at| *at > Instant::now());
            let event = tokio::select! {
                event = self.keys.recv() => event,
                watched = self.watch.next() => {
                    self.watched(watched).await;
                    continue;
                }
                () = tokio::time::sleep(wait.unwrap_or(FRAME)), if wait.is_some() => continue,
                () = sleep_until(arms_at), if arms_at.is_some() => {
                    self.dirty = true;
                    continue;
                }
            };
            let Some(event) = event else {
                return ExitCode::SUCCESS;
            };
            match self.app.card_event(&event, Instant::now()) {
                CardInput::Decided(approve) => {
                    self.decide_pending(approve).await;
                    continue;
                }
                CardInput::Swallowed => {
                    self.dirty = true;
                    continue;
                }
                CardInput::NoCard => {}
            }
            match self.input(event) {
                Key::Interrupt => return ExitCode::SUCCESS,
                Key::Send(line) => {
                    self.save_history();
                    if !self.line(&line).await {
                        return ExitCode::SUCCESS;
                    }
                }
                Key::Resume(id) => {
                    self.line(&format!("/resume {id}")).await;
                }
                Key::Nothing => {}
            }
        }
    }

    /// What the session watch yielded.
    async fn watched(&mut self, watched: Watched) {
        self.dirty = true;
        match watched {
            Watched::Snapshot(snapshot) => {
                let was_lost = self.app.status.hub != LIVE;
                self.app.status.hub = LIVE.to_owned();
                self.app.snapshot(&snapshot, CHANNEL);
                if was_lost {
                    tracing::info!("the session's event stream is live again");
                    self.refresh().await;
                }
            }
            Watched::Event(event) => self.app.watched(&event, CHANNEL),
            Watched::Lost { reason, retry_in } => {
                tracing::warn!("the session's event stream ended: {reason}");
                self.app.watch_lost();
                let seconds = retry_in.as_millis().div_ceil(1000).max(1);
                let failed = self.app.t("tui.conn.failed", &[]);
                let retry = self.app.t("tui.conn.retry", &[("seconds", &seconds)]);
                self.app.status.hub = format!("{failed} {retry}");
                let text = crate::chat::render::one_line(&reason, 200);
                self.app.note(&format!("{failed} {text}"), true);
            }
        }
    }

    /// Sends the open card's decision with the watch's attachment and shows the hub's verdict.
    async fn decide_pending(&mut self, approve: bool) {
        let Some(card) = &self.app.card else { return };
        let request = tau_client::approvals::request(
            &card.approval.approval_id,
            tau_client::approvals::decision(approve),
            self.watch.attachment(),
        );
        self.app.verdict(Verdict::Sending);
        self.draw_now();
        let mut client = self.chat.hub.clone();
        let deadline = self.chat.deadlines.call;
        match call(
            &mut self.chat.interrupts,
            deadline,
            client.decide_approval(request),
        )
        .await
        {
            Ok(response) => self.app.verdict(verdict_of(approve, &response)),
            Err(error) => {
                // The hub's verdict is unknown: the card closes rather than claim one.
                self.app.card = None;
                self.report(&error);
            }
        }
        self.dirty = true;
    }

    /// Keeps the composer's history for the next run (a failure is logged, never fatal).
    fn save_history(&self) {
        if let Err(error) = history_file::save(&self.history, self.app.composer.history()) {
            tracing::warn!(
                "cannot write the input history {}: {error}",
                self.history.display()
            );
        }
    }

    /// Handles a sent line; `false` to leave.
    async fn line(&mut self, line: &str) -> bool {
        let Some((name, _)) = split_command(line) else {
            self.turn(line.trim()).await;
            return true;
        };
        match find_command(name).map(|command| command.name) {
            Some("quit") => return false,
            Some("clear") => self.app.conversation.clear(),
            _ => {
                commands::handle_line(&mut self.chat, line).await;
                self.flush_captured();
                self.refresh().await;
            }
        }
        self.dirty = true;
        true
    }
}

/// Sleeps until `at` (forever when `None`).
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => tokio::time::sleep(Duration::from_secs(3600)).await,
    }
}
