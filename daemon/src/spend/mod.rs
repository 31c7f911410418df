//! Spend: what each model call cost, per role and day (Europe/Istanbul), and the daily budgets.
//!
//! `ledger.rs` ([`SpendLedger`]: the tallies and `spend.json`, versioned, written atomically by one
//! paced writer thread),
//! `meter.rs` ([`SpendMeter`]: prices, budgets, days, the `Budget today` line),
//! `metered_model.rs` ([`MeteredModel`]: a role's model that counts its calls and switches to the
//! fallback model, or refuses, once the role is over its budget).
//!
//! Invariants: spend lives in its own file of the data directory, never in the session store;
//! usage is counted per model call, so a turn's calls add up to the turn's usage; a role with no
//! price is counted in tokens only and has no budget (tau.toml refuses a budget without a price).
//! Imports `clock`, `message` and `model` only.

mod ledger;
mod meter;
mod metered_model;

pub use ledger::{Days, LEDGER_VERSION, MAX_DAYS, SpendLedger, Tally};
pub use meter::{BudgetOverrun, DaySpend, FALLBACK_SUFFIX, RoleSpend, SpendMeter, dollars};
pub use metered_model::MeteredModel;

/// The spend ledger's file name in the data directory.
pub const SPEND_FILE: &str = "spend.json";

/// The spend ledger could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpendError {
    /// Reading or writing the file failed.
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    /// The file is not a spend ledger.
    #[error("the spend ledger is unreadable: {0}")]
    Format(String),
}

impl SpendError {
    fn io(path: &std::path::Path, error: &std::io::Error) -> Self {
        Self::Io {
            path: path.display().to_string(),
            message: error.to_string(),
        }
    }
}
