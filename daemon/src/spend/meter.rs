//! [`SpendMeter`]: counts each model call's usage against its role's price and daily budget, by
//! the day in Europe/Istanbul, and answers what was spent ([`DaySpend`]) and whether a role is
//! over its budget ([`BudgetOverrun`]).
//!
//! Invariants: a day is the calendar day in Europe/Istanbul of the meter's clock (so spend rolls
//! over at midnight there); a call served by a role's fallback model is counted under
//! `<role>/fallback` and never against the role's budget; a role without a price costs 0.

use std::sync::Arc;

use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};
use tau_api::config::SpendConfig;

use super::ledger::{SpendLedger, Tally};
use crate::clock::{Clock, TIME_ZONE, istanbul};
use crate::message::Usage;

/// The ledger key suffix of what a role's fallback model served.
pub const FALLBACK_SUFFIX: &str = "/fallback";

/// What one role (or its fallback) used on one day.
#[derive(Debug, Clone, PartialEq)]
pub struct RoleSpend {
    /// The role's name.
    pub role: String,
    /// Served by the role's fallback model (not priced, not budgeted).
    pub fallback: bool,
    pub tally: Tally,
    /// Whether the role has a price (else its cost reads unknown).
    pub priced: bool,
    /// The role's daily budget in US dollars, if any.
    pub budget_usd: Option<f64>,
}

/// The spend of one day, by role.
#[derive(Debug, Clone, PartialEq)]
pub struct DaySpend {
    /// `YYYY-MM-DD` in Europe/Istanbul.
    pub date: String,
    pub roles: Vec<RoleSpend>,
}

/// A role that spent its daily budget, or whose spend today cannot be known.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetOverrun {
    pub role: String,
    pub spent_usd: f64,
    pub budget_usd: f64,
    /// Set when the ledger could not be read: today's spend is unknown, so the budget refuses
    /// (fails closed) instead of counting from zero.
    pub unknown_because: Option<String>,
}

impl BudgetOverrun {
    /// What the person reads when the turn is refused.
    pub fn refusal(&self) -> String {
        match &self.unknown_because {
            Some(why) => format!(
                "the '{}' role has a daily budget ({}) but today's spend is unknown ({why}), and it has no fallback model; nothing was sent. Fix or move the file and restart the hub.",
                self.role,
                dollars(self.budget_usd, false),
            ),
            None => format!(
                "the '{}' role reached its daily budget ({} of {} today) and has no fallback model; nothing was sent. The budget starts again at midnight {TIME_ZONE}.",
                self.role,
                dollars(self.spent_usd, true),
                dollars(self.budget_usd, false),
            ),
        }
    }
}

/// Counts spend for every role of the hub.
pub struct SpendMeter {
    config: SpendConfig,
    ledger: SpendLedger,
    clock: Arc<dyn Clock>,
    zone: TimeZone,
    /// Why the stored spend could not be read, when it could not: every budget then refuses.
    unreadable: Option<String>,
}

impl std::fmt::Debug for SpendMeter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpendMeter")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl SpendMeter {
    pub fn new(config: SpendConfig, ledger: SpendLedger, clock: Arc<dyn Clock>) -> Self {
        Self {
            config,
            ledger,
            clock,
            zone: istanbul(),
            unreadable: None,
        }
    }

    /// A meter whose stored spend could not be read (`why` names the file): it counts in memory,
    /// and every role with a daily budget is refused as over it, since today's spend is unknown.
    pub fn with_unreadable_ledger(config: SpendConfig, clock: Arc<dyn Clock>, why: String) -> Self {
        Self {
            unreadable: Some(why),
            ..Self::new(config, SpendLedger::in_memory(), clock)
        }
    }

    /// Why the stored spend could not be read, when it could not.
    pub fn unreadable(&self) -> Option<&str> {
        self.unreadable.as_deref()
    }

    /// A meter with no prices, kept in memory (tests, and hubs built without one).
    pub fn unpriced() -> Self {
        Self::new(
            SpendConfig::default(),
            SpendLedger::in_memory(),
            Arc::new(crate::clock::SystemClock),
        )
    }

    /// Today in Europe/Istanbul.
    fn today(&self) -> jiff::civil::Date {
        let now = Timestamp::try_from(self.clock.now()).unwrap_or(Timestamp::UNIX_EPOCH);
        now.to_zoned(self.zone.clone()).date()
    }

    /// Counts one model call of `role` (served by its fallback model or not).
    pub fn record(&self, role: &str, by_fallback: bool, usage: &Usage) {
        let price = (!by_fallback).then(|| self.config.price(role)).flatten();
        let cache_read = usage.cache_read_input_tokens.unwrap_or(0);
        let cache_write = usage.cache_write_input_tokens.unwrap_or(0);
        let tally = Tally {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cache_read_tokens: cache_read,
            cache_write_tokens: cache_write,
            model_calls: 1,
            cost_usd: price.map_or(0.0, |p| {
                p.cost_usd(
                    usage.input_tokens,
                    usage.output_tokens,
                    cache_read,
                    cache_write,
                )
            }),
        };
        let key = if by_fallback {
            format!("{role}{FALLBACK_SUFFIX}")
        } else {
            role.to_owned()
        };
        self.ledger.add(&self.today().to_string(), &key, &tally);
    }

    /// Saves the ledger's unsaved tallies now (a blocking write; the hub calls it at shutdown).
    pub fn flush(&self) -> Result<(), super::SpendError> {
        self.ledger.flush()
    }

    /// `role`'s overrun when it has a daily budget and spent it today.
    pub fn over_budget(&self, role: &str) -> Option<BudgetOverrun> {
        let budget_usd = self.config.budget(role)?;
        if let Some(why) = &self.unreadable {
            return Some(BudgetOverrun {
                role: role.to_owned(),
                spent_usd: 0.0,
                budget_usd,
                unknown_because: Some(why.clone()),
            });
        }
        let spent_usd = self
            .ledger
            .day(&self.today().to_string())
            .get(role)
            .map_or(0.0, |t| t.cost_usd);
        (spent_usd >= budget_usd).then(|| BudgetOverrun {
            role: role.to_owned(),
            spent_usd,
            budget_usd,
            unknown_because: None,
        })
    }

    /// The last `days` days (today included) that have any usage, oldest first.
    pub fn days(&self, days: u32) -> Vec<DaySpend> {
        let today = self.today();
        let back = i64::from(days.max(1)) - 1;
        let first = today
            .checked_sub(back.days())
            .unwrap_or(jiff::civil::Date::MIN)
            .to_string();
        let last = today.to_string();
        self.ledger
            .days()
            .into_iter()
            .filter(|(date, _)| *date >= first && *date <= last)
            .map(|(date, keys)| DaySpend {
                date,
                roles: keys
                    .into_iter()
                    .map(|(key, tally)| self.role_spend(&key, tally))
                    .collect(),
            })
            .collect()
    }

    fn role_spend(&self, key: &str, tally: Tally) -> RoleSpend {
        let (role, fallback) = match key.strip_suffix(FALLBACK_SUFFIX) {
            Some(role) => (role, true),
            None => (key, false),
        };
        RoleSpend {
            role: role.to_owned(),
            fallback,
            tally,
            priced: !fallback && self.config.price(role).is_some(),
            budget_usd: (!fallback).then(|| self.config.budget(role)).flatten(),
        }
    }

    /// The `Budget today` line of the `## Now` block, like `fast 0,12 $ / 1 $`: every priced
    /// role, with its budget when it has one; `None` when no role has a price (unknown).
    pub fn budget_line(&self) -> Option<String> {
        if self.config.prices.is_empty() {
            return None;
        }
        let today = self.ledger.day(&self.today().to_string());
        let parts: Vec<String> = self
            .config
            .prices
            .keys()
            .map(|role| {
                let spent = today.get(role).map_or(0.0, |t| t.cost_usd);
                match self.config.budget(role) {
                    Some(budget) => format!(
                        "{role} {} / {}",
                        dollars(spent, true),
                        dollars(budget, false)
                    ),
                    None => format!("{role} {}", dollars(spent, true)),
                }
            })
            .collect();
        let mut line = parts.join(", ");
        if self.unreadable.is_some() && !self.config.daily_usd.is_empty() {
            line.push_str(" (the spend ledger is unreadable: budgets refuse)");
        }
        Some(line)
    }
}

/// `0,12 $` (cents always shown) or `1 $` (a whole budget), with a decimal comma as the seed
/// writes it.
pub fn dollars(amount: f64, cents: bool) -> String {
    let text = if !cents && amount.fract() == 0.0 {
        format!("{amount:.0}")
    } else {
        format!("{amount:.2}")
    };
    format!("{} $", text.replace('.', ","))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::SystemTime;

    use tau_api::config::RolePrice;

    use super::*;

    fn at(rfc3339: &str) -> SystemTime {
        SystemTime::from(rfc3339.parse::<Timestamp>().unwrap())
    }

    /// A meter whose clock the test moves; `fast` costs 1 $ per million input and output tokens
    /// and has a 1 $ budget, `brain` is priced without a budget.
    fn meter(now: &Arc<Mutex<SystemTime>>) -> SpendMeter {
        let mut config = SpendConfig::default();
        let price = RolePrice {
            input_per_mtok: 1.0,
            output_per_mtok: 1.0,
            ..RolePrice::default()
        };
        config.prices.insert("fast".into(), price);
        config.prices.insert("brain".into(), price);
        config.daily_usd.insert("fast".into(), 1.0);
        let now = Arc::clone(now);
        let clock = move || *now.lock().unwrap();
        SpendMeter::new(config, SpendLedger::in_memory(), Arc::new(clock))
    }

    fn usage(input: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            total_tokens: input + output,
            ..Usage::default()
        }
    }

    #[test]
    fn spend_rolls_over_at_midnight_in_istanbul() {
        // 20:59 UTC is 23:59 in Istanbul; 21:00 UTC is the next day there.
        let now = Arc::new(Mutex::new(at("2026-12-01T20:59:00Z")));
        let meter = meter(&now);
        meter.record("fast", false, &usage(600_000, 0));
        assert_eq!(
            meter.budget_line().as_deref(),
            Some("brain 0,00 $, fast 0,60 $ / 1 $")
        );
        *now.lock().unwrap() = at("2026-12-01T21:00:00Z");
        meter.record("fast", false, &usage(100_000, 20_000));
        assert_eq!(
            meter.budget_line().as_deref(),
            Some("brain 0,00 $, fast 0,12 $ / 1 $")
        );
        let days = meter.days(7);
        let dates: Vec<&str> = days.iter().map(|d| d.date.as_str()).collect();
        assert_eq!(dates, ["2026-12-01", "2026-12-02"]);
        assert_eq!(days[1].roles[0].tally.input_tokens, 100_000);
        assert_eq!(meter.days(1).len(), 1, "only today");
    }

    #[test]
    fn a_role_is_over_budget_once_it_spent_it_and_fallback_calls_do_not_count() {
        let now = Arc::new(Mutex::new(at("2026-12-01T09:00:00Z")));
        let meter = meter(&now);
        meter.record("fast", false, &usage(900_000, 0));
        assert_eq!(meter.over_budget("fast"), None);
        meter.record("fast", true, &usage(5_000_000, 0));
        assert_eq!(meter.over_budget("fast"), None, "fallback calls are free");
        meter.record("fast", false, &usage(100_000, 0));
        let over = meter.over_budget("fast").unwrap();
        assert!((over.spent_usd - 1.0).abs() < 1e-9);
        assert!(
            over.refusal().contains("(1,00 $ of 1 $ today)"),
            "{}",
            over.refusal()
        );
        assert_eq!(meter.over_budget("brain"), None, "no budget");
        let today = &meter.days(1)[0];
        let fallback = today.roles.iter().find(|r| r.fallback).unwrap();
        assert_eq!((fallback.role.as_str(), fallback.priced), ("fast", false));
        assert_eq!(fallback.tally.cost_usd, 0.0);
        // The next day starts afresh.
        *now.lock().unwrap() = at("2026-12-01T21:00:00Z");
        assert_eq!(meter.over_budget("fast"), None);
    }

    #[test]
    fn an_unreadable_ledger_fails_budgets_closed_and_leaves_the_others_alone() {
        let now = Arc::new(Mutex::new(at("2026-12-01T09:00:00Z")));
        let config = meter(&now).config.clone();
        let clock = Arc::clone(&now);
        let meter = SpendMeter::with_unreadable_ledger(
            config,
            Arc::new(move || *clock.lock().unwrap()),
            "the spend ledger is unreadable: /data/spend.json: expected value at line 1 column 1"
                .into(),
        );
        let over = meter
            .over_budget("fast")
            .expect("a budget with unknown spend refuses");
        let refusal = over.refusal();
        assert!(refusal.contains("today's spend is unknown"), "{refusal}");
        assert!(refusal.contains("/data/spend.json"), "{refusal}");
        assert!(!refusal.contains('\n'));
        assert_eq!(
            meter.over_budget("brain"),
            None,
            "a role without a budget goes on"
        );
        assert!(meter.unreadable().is_some());
        assert!(
            meter
                .budget_line()
                .is_some_and(|l| l.ends_with("(the spend ledger is unreadable: budgets refuse)")),
            "{:?}",
            meter.budget_line()
        );
    }
}
