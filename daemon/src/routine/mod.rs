//! Routines, the reflex engine: tau acting on a schedule without being asked each time.
//!
//! A routine has a name, a schedule (`schedule.rs`: a cron expression from `cron_expr.rs`, an
//! interval or a one-off, always read in Europe/Istanbul) and an action (`routine_record.rs`: a
//! prompt run as a turn on the routine's own session, on its `approval_channel`, or one fixed
//! tool call). `routine_file.rs` keeps them in `<data_dir>/routines.json` (versioned, atomic);
//! `firing_plan.rs` decides what fires on a wake (once per routine, catch-up, clock jumps);
//! `routine_engine.rs` is the API and the loop on the injectable clock; `routine_gate.rs` is how
//! a tier-2 tool routine is registered (one approval, asked by the gate) and fired (exempt through
//! the gate's exemption mechanism for exactly the approved tool and arguments).
//!
//! Imports `message`, `clock`, `tool`, `gate`. Invariants: an instant never fires twice, even across a kill
//! (claims are saved before actions start); a clock jump fires at most once per routine; a tier-2
//! tool routine fires without a prompt only while its stored approval covers its exact action; the
//! exemption is the gate's, so a firing is checked and recorded like any call.

mod cron_expr;
mod firing_plan;
mod instant_text;
mod routine_engine;
mod routine_error;
mod routine_file;
mod routine_gate;
mod routine_record;
mod schedule;

pub use cron_expr::{CronError, CronExpr};
pub use firing_plan::{DueFiring, LATE_AFTER, Phase, claim_due, claim_manual, next_wake};
pub use routine_engine::{
    FiringResult, MAX_NAP, MAX_ROUTINES, RoutineEngine, RoutineRunner, RoutineView,
};
pub use routine_error::RoutineError;
pub use routine_file::{
    ROUTINES_FILE_NAME, ROUTINES_FILE_VERSION, load_routines, routines_path, save_routines,
};
pub use routine_gate::{fire_tool_action, register, registration_note, run_by_hand, tool_identity};
pub use routine_record::{
    CatchUp, Creator, Firing, FiringCause, FiringOutcome, HISTORY_LIMIT, MAX_ARGUMENTS_BYTES,
    MAX_NAME_CHARS, MAX_PROMPT_BYTES, ROUTINE_CHANNEL, RegistrationApproval, Routine,
    RoutineAction, ShownRoutine, ToolIdentity, check_action, check_name, session_id_for,
};
pub use schedule::{MIN_INTERVAL, Schedule, ScheduleError, parse_local_time};
