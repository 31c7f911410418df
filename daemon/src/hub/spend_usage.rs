//! The hub's spend: the meter every session's models count with (opened from
//! [`CoreOptions::spend_ledger`]), and the bounds of what `GetUsage` and `/status` read from it
//! (through `HubCore::usage` and `HubCore::budget_today`).
//!
//! Invariant: a ledger that cannot be read never stops the hub, and never resets a budget: spend
//! is then counted in memory, the unreadable file is left as it was (logged once, naming it), and
//! every role with a daily budget fails closed (refused, or sent to its fallback model) until the
//! file is fixed or moved and the hub restarted.

use std::sync::Arc;

use super::options::CoreOptions;
use crate::clock::SystemClock;
use crate::spend::{SpendLedger, SpendMeter};

/// The time zone the days of the spend ledger are in.
pub const USAGE_TIME_ZONE: &str = crate::clock::TIME_ZONE;

/// Most days `GetUsage` reports.
pub const MAX_USAGE_DAYS: u32 = crate::spend::MAX_DAYS as u32;

/// The meter of a hub with `options`.
pub(super) fn open_spend_meter(options: &CoreOptions) -> SpendMeter {
    let ledger = match &options.spend_ledger {
        None => SpendLedger::in_memory(),
        Some(path) => match SpendLedger::open(path) {
            Ok(ledger) => ledger,
            Err(e) => {
                tracing::error!(
                    "{e}; spend is counted in memory only, and roles with a daily budget are refused (or use their fallback) until it is fixed or moved"
                );
                return SpendMeter::with_unreadable_ledger(
                    options.spend.clone(),
                    Arc::new(SystemClock),
                    e.to_string(),
                );
            }
        },
    };
    SpendMeter::new(options.spend.clone(), ledger, Arc::new(SystemClock))
}
