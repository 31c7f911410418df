//! `tau usage [--days N] [--json]`: tokens and cost per model role per day (Europe/Istanbul
//! days), from the hub's spend ledger through `GetUsage`.
//!
//! Invariants: the call has a deadline; a hub that is not running is one line and exit code
//! `EXIT_NO_HUB`; `--json` prints one JSON document whose numbers are the hub's, unrounded.

use std::process::ExitCode;

use anyhow::Context as _;
use serde_json::{Value, json};
use tau_api::installation::Installation;
use tau_api::proto::v1 as pb;
use tau_client::call::{CallError, DEADLINE_VAR, Deadlines, seconds, within};

use crate::cli::UsageArgs;
use crate::context::Context;
use crate::environment;
use crate::hub_link::{self, EXIT_NO_HUB, HubAddress};

/// Runs `tau usage`.
pub fn run(args: &UsageArgs, ctx: &Context) -> anyhow::Result<ExitCode> {
    let installation =
        Installation::discover(environment::snapshot(ctx), &environment::current_dir()?)?;
    let deadline = Deadlines::from_var(installation.env.get(DEADLINE_VAR)).call;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let socket = installation.paths.hub.socket.clone();
    let days = args.days;
    let usage = runtime.block_on(async move {
        let mut client = match hub_link::connect(&HubAddress::Unix(socket)).await {
            Ok(client) => client,
            Err(not_running) => return Ok(Err(not_running.to_string())),
        };
        match within(deadline, client.get_usage(pb::GetUsageRequest { days })).await {
            Ok(usage) => Ok(Ok(usage)),
            Err(CallError::Hub(status)) => Err(anyhow::anyhow!(
                "cannot read the usage: {}",
                status.message()
            )),
            Err(CallError::TimedOut(after)) => Err(anyhow::anyhow!(
                "cannot read the usage: the hub did not answer within {} s",
                seconds(after)
            )),
            Err(CallError::Interrupted) => Err(anyhow::anyhow!("interrupted")),
        }
    })?;
    let usage = match usage {
        Ok(usage) => usage,
        Err(not_running) => {
            eprintln!("tau usage: {not_running}. Start one with `tau hub start`.");
            return Ok(ExitCode::from(EXIT_NO_HUB));
        }
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&usage_json(&usage))?);
    } else {
        out!("{}", usage_table(&usage, days));
    }
    Ok(ExitCode::SUCCESS)
}

/// The name a line shows: the role, or `<role>/fallback`.
fn role_name(role: &pb::RoleUsage) -> String {
    if role.fallback {
        format!("{}/fallback", role.role)
    } else {
        role.role.clone()
    }
}

/// `--json`: the days as the hub reports them, with the sums of every field.
pub fn usage_json(usage: &pb::GetUsageResponse) -> Value {
    let mut total = Total::default();
    let days: Vec<Value> = usage
        .days
        .iter()
        .map(|day| {
            let roles: Vec<Value> = day
                .roles
                .iter()
                .map(|r| {
                    total.add(r);
                    json!({
                        "role": r.role,
                        "fallback": r.fallback,
                        "input_tokens": r.input_tokens,
                        "output_tokens": r.output_tokens,
                        "cache_read_tokens": r.cache_read_tokens,
                        "cache_write_tokens": r.cache_write_tokens,
                        "model_calls": r.model_calls,
                        "cost_usd": r.cost_usd,
                        "budget_usd": r.budget_usd,
                    })
                })
                .collect();
            json!({"date": day.date, "roles": roles})
        })
        .collect();
    json!({
        "time_zone": usage.time_zone,
        "days": days,
        "total": {
            "input_tokens": total.input,
            "output_tokens": total.output,
            "cache_read_tokens": total.cache_read,
            "cache_write_tokens": total.cache_write,
            "model_calls": total.calls,
            "cost_usd": total.cost,
        },
    })
}

#[derive(Default)]
struct Total {
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
    calls: u64,
    cost: f64,
}

impl Total {
    fn add(&mut self, r: &pb::RoleUsage) {
        self.input += r.input_tokens;
        self.output += r.output_tokens;
        self.cache_read += r.cache_read_tokens;
        self.cache_write += r.cache_write_tokens;
        self.calls += r.model_calls;
        self.cost += r.cost_usd.unwrap_or(0.0);
    }
}

/// `0,12 $`, as the persona's budget line writes money.
fn dollars(amount: f64) -> String {
    format!("{amount:.2} $").replace('.', ",")
}

/// The table a person reads.
pub fn usage_table(usage: &pb::GetUsageResponse, days: u32) -> String {
    if usage.days.iter().all(|d| d.roles.is_empty()) {
        return format!(
            "No model usage in the last {days} day{}.\n",
            if days == 1 { "" } else { "s" }
        );
    }
    let mut out = format!(
        "{:<10}  {:<20} {:>12} {:>10} {:>11} {:>11} {:>6}  COST ({})\n",
        "DATE", "ROLE", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE", "CALLS", usage.time_zone
    );
    let mut total = Total::default();
    for day in &usage.days {
        for r in &day.roles {
            total.add(r);
            let cost = match (r.cost_usd, r.budget_usd) {
                (Some(cost), Some(budget)) => format!("{} / {}", dollars(cost), dollars(budget)),
                (Some(cost), None) => dollars(cost),
                (None, _) => "-".to_owned(),
            };
            out.push_str(&format!(
                "{:<10}  {:<20} {:>12} {:>10} {:>11} {:>11} {:>6}  {cost}\n",
                day.date,
                role_name(r),
                r.input_tokens,
                r.output_tokens,
                r.cache_read_tokens,
                r.cache_write_tokens,
                r.model_calls,
            ));
        }
    }
    out.push_str(&format!(
        "{:<10}  {:<20} {:>12} {:>10} {:>11} {:>11} {:>6}  {}\n",
        "total",
        "",
        total.input,
        total.output,
        total.cache_read,
        total.cache_write,
        total.calls,
        dollars(total.cost)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> pb::GetUsageResponse {
        let role = |name: &str, fallback, input, cost: Option<f64>, budget| pb::RoleUsage {
            role: name.into(),
            fallback,
            input_tokens: input,
            output_tokens: 10,
            model_calls: 1,
            cost_usd: cost,
            budget_usd: budget,
            ..Default::default()
        };
        pb::GetUsageResponse {
            time_zone: "Europe/Istanbul".into(),
            days: vec![
                pb::UsageDay {
                    date: "2026-12-01".into(),
                    roles: vec![role("fast", false, 100, Some(0.12), Some(1.0))],
                },
                pb::UsageDay {
                    date: "2026-12-02".into(),
                    roles: vec![
                        role("brain", false, 50, None, None),
                        role("fast", true, 7, None, None),
                    ],
                },
            ],
        }
    }

    #[test]
    fn the_table_shows_each_role_per_day_and_the_total() {
        let table = usage_table(&sample(), 7);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 5, "{table}");
        assert!(lines[0].starts_with("DATE") && lines[0].ends_with("COST (Europe/Istanbul)"));
        assert!(lines[1].starts_with("2026-12-01  fast ") && lines[1].ends_with("0,12 $ / 1,00 $"));
        assert!(lines[2].ends_with("  -"), "{table}");
        assert!(lines[3].contains("fast/fallback"), "{table}");
        assert!(
            lines[4].starts_with("total")
                && lines[4].contains(" 157 ")
                && lines[4].ends_with("0,12 $")
        );
        let empty = pb::GetUsageResponse::default();
        assert_eq!(
            usage_table(&empty, 1),
            "No model usage in the last 1 day.\n"
        );
    }

    #[test]
    fn json_keeps_the_hubs_numbers_and_sums_them() {
        let value = usage_json(&sample());
        assert_eq!(value["days"][0]["roles"][0]["cost_usd"], 0.12);
        assert_eq!(value["days"][1]["roles"][0]["cost_usd"], Value::Null);
        assert_eq!(value["days"][1]["roles"][1]["fallback"], true);
        assert_eq!(value["total"]["input_tokens"], 157);
        assert_eq!(value["total"]["model_calls"], 3);
    }
}
