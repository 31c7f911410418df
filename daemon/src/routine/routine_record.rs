//! One routine as stored: its name, schedule, action, catch-up rule, who registered it, its
//! registration approval (bound to everything its question showed), the last scheduled instant it
//! handled, and its bounded firing history.
//!
//! Invariants: a name is 1-64 characters of `a-z 0-9 - _`, starting with a letter or digit (it
//! names the routine's session); `handled_through` only moves forward and is written before a
//! firing starts, so an instant is never fired twice, even across a kill; the history keeps the
//! newest [`HISTORY_LIMIT`] firings.

use std::collections::VecDeque;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::instant_text;
use super::schedule::Schedule;

/// Firings kept per routine, newest last.
pub const HISTORY_LIMIT: usize = 50;
/// Longest routine name.
pub const MAX_NAME_CHARS: usize = 64;
/// Longest prompt text, in bytes.
pub const MAX_PROMPT_BYTES: usize = 8 * 1024;
/// Longest tool arguments, as compact JSON bytes.
pub const MAX_ARGUMENTS_BYTES: usize = 16 * 1024;
/// The channel a routine's prompt turns run on.
pub const ROUTINE_CHANNEL: &str = "routine";

/// What a routine does when it fires.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RoutineAction {
    /// A turn on the routine's own session, run on `approval_channel`, where its tier-2 calls are
    /// asked (held for the owner: see the hub's unattended turns).
    Prompt {
        text: String,
        approval_channel: String,
    },
    /// One fixed tool call.
    Tool { tool: String, arguments: Value },
}

impl RoutineAction {
    /// One line for lists and logs.
    pub fn describe(&self) -> String {
        match self {
            Self::Prompt { text, .. } => format!("prompt {text:?}"),
            Self::Tool { tool, arguments } => format!(
                "{tool} {}",
                crate::gate::format_approval_arguments(arguments)
            ),
        }
    }
}

/// What happens to a firing missed while the hub was down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Fire once at start, however many firings were missed.
    #[default]
    RunOnce,
    /// Record the miss and wait for the next firing.
    Skip,
}

impl CatchUp {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RunOnce => "run_once",
            Self::Skip => "skip",
        }
    }
}

/// Who registered a routine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Creator {
    /// The owner, from the CLI or the gRPC API.
    Owner,
    /// The model, through `schedule_routine` (always asked).
    Model,
    /// Registered before the file recorded it (format 1).
    #[default]
    Unknown,
}

impl Creator {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Owner => "owner",
            Self::Model => "model",
            Self::Unknown => "unknown",
        }
    }
}

/// Where a tool comes from and what the owner says it does, as a question showed it: the
/// distribution (`taud`, `mcp:<server>`, `node:<node>`), the tool's own name there, the effect
/// text and, for a node's tool, the digest of the node's claim (`Tool::claim`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolIdentity {
    pub distribution: String,
    pub source_name: String,
    pub effect: String,
    /// Absent for other tools, and in files written before nodes lent tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
}

/// Everything a registration question showed: the action, the schedule, the catch-up rule, the
/// session its firings are recorded in and, for a tool action, the tool's identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShownRoutine {
    pub schedule: Schedule,
    pub catch_up: CatchUp,
    pub session_id: String,
    pub action: RoutineAction,
    #[serde(default)]
    pub tool: Option<ToolIdentity>,
}

impl ShownRoutine {
    /// What a question about `routine` shows, its tool being `tool`.
    pub fn of(routine: &Routine, tool: Option<ToolIdentity>) -> Self {
        Self {
            schedule: routine.schedule.clone(),
            catch_up: routine.catch_up,
            session_id: routine.session_id(),
            action: routine.action.clone(),
            tool,
        }
    }

    /// Whether `routine`, its tool being `tool` now, is exactly what was shown. An interval's
    /// anchor is not shown (only how often it fires), so it may differ.
    pub fn matches(&self, routine: &Routine, tool: Option<&ToolIdentity>) -> bool {
        self.schedule.same_as_shown(&routine.schedule)
            && self.catch_up == routine.catch_up
            && self.session_id == routine.session_id()
            && self.action == routine.action
            && self.tool.as_ref() == tool
    }
}

/// The approval a routine was registered with (a tier-2 tool action, or anything the model
/// proposed), and exactly what it approved: a firing is exempt only while the routine and its
/// tool are still what the question showed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegistrationApproval {
    pub approval_id: String,
    /// The channel it was asked and approved on.
    pub channel: String,
    #[serde(with = "instant_text")]
    pub approved_at: Timestamp,
    /// What the question showed; `None` for an approval stored by format 1, which bound only the
    /// tool and its arguments: it covers nothing now (the routine is registered again).
    #[serde(default)]
    pub shown: Option<ShownRoutine>,
}

impl RegistrationApproval {
    /// Whether this approval covers `routine` exactly, its tool being `tool` now.
    pub fn covers(&self, routine: &Routine, tool: Option<&ToolIdentity>) -> bool {
        self.shown
            .as_ref()
            .is_some_and(|shown| shown.matches(routine, tool))
    }
}

/// Why a firing happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FiringCause {
    /// On time.
    Scheduled,
    /// Later than its instant while the hub ran (a clock jump, a busy host): fired once.
    Late,
    /// Missed while the hub was down; fired once at start.
    CatchUp,
    /// Asked for with "run now".
    Manual,
}

impl FiringCause {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scheduled => "scheduled",
            Self::Late => "late",
            Self::CatchUp => "catch_up",
            Self::Manual => "manual",
        }
    }
}

/// How a firing ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FiringOutcome {
    /// Started and not yet ended.
    Running,
    Succeeded,
    /// The action failed (a tool error, a refused call, a turn that ended in error); it is retried
    /// only at its next firing.
    Failed,
    /// Missed while the hub was down and skipped by `catch_up = skip`.
    Skipped,
    /// The hub stopped or was killed while it ran; it is not run again.
    Interrupted,
}

impl FiringOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Skipped => "skipped",
            Self::Interrupted => "interrupted",
        }
    }
}

/// One firing in a routine's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Firing {
    /// Unique within the routine: its sequence number.
    pub number: u64,
    /// The scheduled instant it stands for (`None` for a manual run).
    #[serde(with = "instant_text::optional")]
    pub scheduled: Option<Timestamp>,
    #[serde(with = "instant_text")]
    pub started_at: Timestamp,
    #[serde(with = "instant_text::optional")]
    pub ended_at: Option<Timestamp>,
    pub cause: FiringCause,
    pub outcome: FiringOutcome,
    /// A short result or error text.
    pub detail: String,
}

/// One routine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Routine {
    pub name: String,
    pub schedule: Schedule,
    pub action: RoutineAction,
    #[serde(default)]
    pub catch_up: CatchUp,
    #[serde(default)]
    pub paused: bool,
    #[serde(with = "instant_text")]
    pub created_at: Timestamp,
    /// The approval it was registered with (a tier-2 tool action, or whatever the model
    /// proposed).
    #[serde(default)]
    pub approval: Option<RegistrationApproval>,
    /// Who registered it.
    #[serde(default)]
    pub created_by: Creator,
    /// The latest scheduled instant already fired or skipped; instants up to it never fire.
    #[serde(with = "instant_text::optional", default)]
    pub handled_through: Option<Timestamp>,
    #[serde(default)]
    pub next_firing_number: u64,
    #[serde(default)]
    pub history: VecDeque<Firing>,
}

impl Routine {
    /// A new routine, never fired.
    pub fn new(
        name: &str,
        schedule: Schedule,
        action: RoutineAction,
        catch_up: CatchUp,
        created_at: Timestamp,
    ) -> Self {
        Self {
            name: name.to_owned(),
            schedule,
            action,
            catch_up,
            paused: false,
            created_at,
            approval: None,
            created_by: Creator::Owner,
            handled_through: None,
            next_firing_number: 1,
            history: VecDeque::new(),
        }
    }

    /// The session a routine's prompt turns run on.
    pub fn session_id(&self) -> String {
        session_id_for(&self.name)
    }

    /// The instant after which the schedule is asked for the next firing.
    pub fn schedule_base(&self) -> Timestamp {
        self.handled_through.unwrap_or(self.created_at)
    }

    /// Adds a firing to the history (dropping the oldest past the limit) and returns its number.
    pub(crate) fn push_firing(&mut self, mut firing: Firing) -> u64 {
        let number = self.next_firing_number.max(1);
        firing.number = number;
        self.next_firing_number = number.saturating_add(1);
        self.history.push_back(firing);
        while self.history.len() > HISTORY_LIMIT {
            self.history.pop_front();
        }
        number
    }

    /// Ends a running firing; returns whether it was found.
    pub(crate) fn end_firing(
        &mut self,
        number: u64,
        outcome: FiringOutcome,
        detail: String,
        at: Timestamp,
    ) -> bool {
        match self.history.iter_mut().find(|f| f.number == number) {
            Some(firing) if firing.outcome == FiringOutcome::Running => {
                firing.outcome = outcome;
                firing.detail = detail;
                firing.ended_at = Some(at);
                true
            }
            _ => false,
        }
    }

    /// Firings left `running` by a hub that stopped become `interrupted` (never re-run).
    pub(crate) fn interrupt_running(&mut self, at: Timestamp) -> usize {
        let mut count = 0;
        for firing in &mut self.history {
            if firing.outcome == FiringOutcome::Running {
                firing.outcome = FiringOutcome::Interrupted;
                firing.detail = "the hub stopped while it ran; not run again".into();
                firing.ended_at = Some(at);
                count += 1;
            }
        }
        count
    }
}

/// The session id of routine `name`'s prompt turns.
pub fn session_id_for(name: &str) -> String {
    format!("routine-{name}")
}

/// Checks a routine name; the error says what is expected.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok_start = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if ok_start && ok_chars && name.chars().count() <= MAX_NAME_CHARS {
        Ok(())
    } else {
        Err(format!(
            "routine name {name:?}: expected 1-{MAX_NAME_CHARS} characters of a-z, 0-9, - and _, starting with a letter or digit"
        ))
    }
}

/// Checks an action's sizes, and that a tool routine does not call `schedule_routine` (a routine
/// that registers routines would put registrations on a timer, away from the person asked to
/// approve each one; a prompt routine's model may still propose one, asked like any other); the
/// error says which rule was broken.
pub fn check_action(action: &RoutineAction) -> Result<(), String> {
    match action {
        RoutineAction::Prompt {
            text,
            approval_channel,
        } => {
            if text.trim().is_empty() {
                return Err("routine prompt: expected some text".into());
            }
            if text.len() > MAX_PROMPT_BYTES {
                return Err(format!(
                    "routine prompt: {} bytes, at most {MAX_PROMPT_BYTES}",
                    text.len()
                ));
            }
            if approval_channel.trim().is_empty() {
                return Err(
                    "routine prompt: expected the channel its approvals are asked on".into(),
                );
            }
            Ok(())
        }
        RoutineAction::Tool { tool, arguments } => {
            if tool.trim().is_empty() {
                return Err("routine tool: expected a tool name".into());
            }
            if tool == crate::tool::builtin::ScheduleRoutine::NAME {
                return Err(format!(
                    "routine tool {tool}: a routine cannot register routines; expected another tool"
                ));
            }
            if !arguments.is_object() {
                return Err(format!(
                    "routine tool {tool}: arguments must be a JSON object"
                ));
            }
            let size = arguments.to_string().len();
            if size > MAX_ARGUMENTS_BYTES {
                return Err(format!(
                    "routine tool {tool}: arguments are {size} bytes, at most {MAX_ARGUMENTS_BYTES}"
                ));
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn firing(at: Timestamp) -> Firing {
        Firing {
            number: 0,
            scheduled: Some(at),
            started_at: at,
            ended_at: None,
            cause: FiringCause::Scheduled,
            outcome: FiringOutcome::Running,
            detail: String::new(),
        }
    }

    fn routine() -> Routine {
        Routine::new(
            "lamp-off",
            Schedule::cron("0 23 * * *").unwrap(),
            RoutineAction::Tool {
                tool: "demo_physical_action".into(),
                arguments: serde_json::json!({"action": "lamp off"}),
            },
            CatchUp::Skip,
            Timestamp::UNIX_EPOCH,
        )
    }

    #[test]
    fn history_is_bounded_and_numbers_keep_rising() {
        let mut r = routine();
        for _ in 0..(HISTORY_LIMIT + 5) {
            r.push_firing(firing(Timestamp::UNIX_EPOCH));
        }
        assert_eq!(r.history.len(), HISTORY_LIMIT);
        assert_eq!(r.history.front().map(|f| f.number), Some(6));
        assert_eq!(
            r.history.back().map(|f| f.number),
            Some(u64::try_from(HISTORY_LIMIT + 5).unwrap())
        );
    }

    #[test]
    fn a_firing_ends_once_and_running_ones_are_interrupted() {
        let mut r = routine();
        let a = r.push_firing(firing(Timestamp::UNIX_EPOCH));
        let b = r.push_firing(firing(Timestamp::UNIX_EPOCH));
        assert!(r.end_firing(
            a,
            FiringOutcome::Succeeded,
            "ok".into(),
            Timestamp::UNIX_EPOCH
        ));
        assert!(!r.end_firing(a, FiringOutcome::Failed, "x".into(), Timestamp::UNIX_EPOCH));
        assert_eq!(r.interrupt_running(Timestamp::UNIX_EPOCH), 1);
        assert_eq!(r.history[1].number, b);
        assert_eq!(r.history[1].outcome, FiringOutcome::Interrupted);
        assert_eq!(r.history[0].outcome, FiringOutcome::Succeeded);
    }

    #[test]
    fn names_and_actions_are_checked() {
        assert!(check_name("lamp-off_2").is_ok());
        for bad in ["", "-x", "Lamp", "a b", &"x".repeat(65)] {
            let err = check_name(bad).unwrap_err();
            assert!(err.contains("a-z"), "{err}");
        }
        let err = check_action(&RoutineAction::Tool {
            tool: "t".into(),
            arguments: serde_json::json!([1]),
        })
        .unwrap_err();
        assert!(err.contains("JSON object"), "{err}");
        let err = check_action(&RoutineAction::Tool {
            tool: "schedule_routine".into(),
            arguments: serde_json::json!({"name": "x", "prompt": "y"}),
        })
        .unwrap_err();
        assert!(err.contains("cannot register routines"), "{err}");
        assert!(
            check_action(&RoutineAction::Prompt {
                text: " ".into(),
                approval_channel: "cli".into()
            })
            .is_err()
        );
        assert_eq!(routine().session_id(), "routine-lamp-off");
    }
}
