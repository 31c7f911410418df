//! What one run of `tau chat` holds: the hub client, the current session, the UI language, the
//! last `/sessions` listing, and what it knows of the local installation.
//!
//! Invariants: the hub is the authority on sessions and approvals; this state only remembers which
//! session the chat is on and what was last listed. Every person-facing text goes through
//! [`Chat::t`] in the chat's current language.

use tau_api::error_marks;
use tau_api::i18n::{Args, Messages};
use tau_api::lang::Lang;
use tau_api::proto::v1 as pb;
use tau_client::call::{self, CallError, Deadlines, Interrupts};
use tau_client::present::Limits;

use super::render::{self, Printer};
use crate::hub_link::HubClient;

/// The channel `tau chat` speaks for: approvals of its turns are asked here.
pub const CHANNEL: &str = "terminal";

/// What the chat knows of the installation it runs in (for `/status` and notices).
#[derive(Debug, Clone)]
pub struct LocalInfo {
    /// The profile (`home`, `travel`, `sport`).
    pub profile: String,
    /// `[agent] context` and `window_size`.
    pub context: String,
    pub window: u32,
    /// `[agent]` limits, for the stop notices.
    pub limits: Limits,
    /// The control port, for the `/status` health probe.
    pub hub_port: u16,
    /// No tau.toml was found: running on built-in defaults.
    pub defaults: bool,
}

/// One run of `tau chat`.
pub struct Chat {
    /// The hub.
    pub hub: HubClient,
    /// Where output goes.
    pub printer: Printer,
    /// The message table.
    pub messages: Messages,
    /// The UI language (`/lang` changes it for this run).
    pub lang: Lang,
    /// The current session.
    pub session: pb::SessionInfo,
    /// The role the current session's agent runs on.
    pub role: String,
    /// `--role`: pinned for the run, passed to every session opened.
    pub pinned_role: Option<String>,
    /// The last `/sessions` listing, for `/resume <n>`.
    pub listing: Option<Vec<pb::SessionInfo>>,
    /// The installation.
    pub info: LocalInfo,
    /// Whether stdin is a terminal (approvals can be asked).
    pub interactive: bool,
    /// Whether stdout is a terminal (`/clear` clears it).
    pub stdout_terminal: bool,
    /// Turns started in this run, for idempotency keys.
    pub turns_started: u64,
    /// How long one-shot hub calls may take.
    pub deadlines: Deadlines,
    /// Ctrl-C, for every wait outside the line editor.
    pub interrupts: Interrupts,
}

impl Chat {
    /// A chrome text in the current language.
    pub fn t(&self, key: &str, args: &Args<'_>) -> String {
        self.messages.t_or_key(key, self.lang, args)
    }

    /// The current session's id.
    pub fn session_id(&self) -> &str {
        &self.session.session_id
    }

    /// Prints a hub error as a notice: a refusal the chat recognises in the UI language, anything
    /// else as `Error: <the hub's message>`, sanitized on one line.
    pub fn hub_error(&mut self, status: &tonic::Status) {
        let text = match self.recognised_refusal(status) {
            Some(text) => text,
            None => {
                let message = render::one_line(status.message(), 300);
                self.t("notice.error", &[("error", &message)])
            }
        };
        self.printer.red(&text);
    }

    /// A refusal the hub marked (`tau_api::error_marks`), in the UI language.
    pub fn recognised_refusal(&self, status: &tonic::Status) -> Option<String> {
        let mismatch = error_marks::context_mismatch(status)?;
        let id = render::one_line(&mismatch.session_id, 60);
        let mode = render::one_line(&mismatch.recorded_mode, 40);
        Some(self.t("session.context_mismatch", &[("id", &id), ("mode", &mode)]))
    }

    /// Says why a one-shot hub call gave no answer: the hub's error, the deadline that passed,
    /// or that Ctrl-C abandoned it.
    pub fn report(&mut self, error: &CallError) {
        match error {
            CallError::Hub(status) => self.hub_error(status),
            CallError::TimedOut(deadline) => {
                let text = self.t("hub.timed_out", &[("seconds", &call::seconds(*deadline))]);
                self.printer.red(&text);
            }
            CallError::Interrupted => {
                let text = self.t("chat.interrupted", &[]);
                self.printer.dim(&text);
            }
        }
    }

    /// The session title for people: the title, else `(untitled)`.
    pub fn title_of(&self, session: &pb::SessionInfo) -> String {
        if session.title.trim().is_empty() {
            self.t("session.untitled", &[])
        } else {
            super::render::one_line(&session.title, 60)
        }
    }

    /// A fresh idempotency key for the next turn of this run.
    pub fn next_turn_key(&mut self) -> String {
        self.turns_started += 1;
        format!(
            "chat-{}-{}-{}",
            std::process::id(),
            start_nanos(),
            self.turns_started
        )
    }
}

fn start_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or_default()
}
