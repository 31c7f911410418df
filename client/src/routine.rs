//! `tau routine list|add|rm|pause|resume|run|log` (each with `--json`): the running hub's routines,
//! tau acting on a schedule.
//!
//! Invariants: the client decides nothing: a tool routine is added with this command as the
//! registering client (`crate::routine_approval`: its own session, or `--session`, on its own
//! channel), so a tier-2 action's registration question is shown here and only the person's
//! explicit yes approves it; every call has a deadline ([`CALL_DEADLINE`], the registration
//! [`crate::routine_approval::REGISTER_WAIT`]). Times are shown in Europe/Istanbul, and as RFC 3339
//! UTC in `--json`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use serde_json::{Value, json};
use tau_api::installation::Installation;
use tau_api::proto::v1 as pb;

use crate::cli::{CatchUpArg, RoutineAddArgs, RoutineCommand};
use crate::context::Context;
use crate::environment;
use crate::hub_link::{self, HubAddress, HubClient};
use crate::routine_approval::{self, within as call};

/// How long a routine call may take.
const CALL_DEADLINE: Duration = Duration::from_secs(10);
const TIME_ZONE: &str = "Europe/Istanbul";

/// Runs `tau routine …`.
pub fn run(command: &RoutineCommand, ctx: &Context) -> anyhow::Result<ExitCode> {
    let installation =
        Installation::discover(environment::snapshot(ctx), &environment::current_dir()?)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let address = HubAddress::Unix(installation.paths.hub.socket.clone());
        let client = match hub_link::connect_or_report("tau routine", &address, CALL_DEADLINE).await
        {
            Ok(client) => client,
            Err(code) => return Ok(code),
        };
        let lang = installation.settings.lang;
        match dispatch(command, client, lang).await {
            Ok(()) => Ok(ExitCode::SUCCESS),
            Err(message) => {
                eprintln!("tau routine: {message}");
                Ok(ExitCode::FAILURE)
            }
        }
    })
}

async fn dispatch(
    command: &RoutineCommand,
    mut client: HubClient,
    lang: tau_api::lang::Lang,
) -> Result<(), String> {
    match command {
        RoutineCommand::List(args) => {
            let list = call(
                CALL_DEADLINE,
                client.list_routines(pb::ListRoutinesRequest {}),
            )
            .await?;
            if args.json {
                let all: Vec<Value> = list.routines.iter().map(routine_json).collect();
                print_json(&json!({ "routines": all }));
            } else if list.routines.is_empty() {
                outln!("no routines (add one with `tau routine add`)");
            } else {
                for routine in &list.routines {
                    outln!("{}", routine_line(routine));
                }
            }
        }
        RoutineCommand::Add(args) => {
            let request = add_request(args)?;
            let routine = if args.tool.is_some() {
                let asking = routine_approval::Asking::detect(args.json, lang);
                routine_approval::add_as_owner(&client, request, asking, CALL_DEADLINE).await?
            } else {
                let added = call(CALL_DEADLINE, client.add_routine(request)).await?;
                added.routine.unwrap_or_default()
            };
            if args.json {
                print_json(&routine_json(&routine));
            } else {
                outln!("added {}", routine_line(&routine));
            }
        }
        RoutineCommand::Rm(args) => {
            call(
                CALL_DEADLINE,
                client.remove_routine(pb::RemoveRoutineRequest {
                    name: args.name.clone(),
                }),
            )
            .await?;
            if args.json {
                print_json(&json!({"removed": args.name}));
            } else {
                outln!("removed {}", args.name);
            }
        }
        RoutineCommand::Pause(args) | RoutineCommand::Resume(args) => {
            let name = args.name.clone();
            let routine = if matches!(command, RoutineCommand::Pause(_)) {
                call(
                    CALL_DEADLINE,
                    client.pause_routine(pb::PauseRoutineRequest { name }),
                )
                .await?
                .routine
            } else {
                call(
                    CALL_DEADLINE,
                    client.resume_routine(pb::ResumeRoutineRequest { name }),
                )
                .await?
                .routine
            };
            let routine = routine.unwrap_or_default();
            if args.json {
                print_json(&routine_json(&routine));
            } else {
                outln!("{}", routine_line(&routine));
            }
        }
        RoutineCommand::Run(args) => {
            let run = if calls_tier_two(&mut client, &args.name).await? {
                let asking = routine_approval::Asking::detect(args.json, lang);
                routine_approval::run_as_owner(
                    &client,
                    &args.name,
                    args.session.as_deref().unwrap_or_default(),
                    &args.channel,
                    asking,
                    CALL_DEADLINE,
                )
                .await?
            } else {
                call(
                    CALL_DEADLINE,
                    client.run_routine(pb::RunRoutineRequest {
                        name: args.name.clone(),
                        ..Default::default()
                    }),
                )
                .await?
            };
            let asked = !run.detail.is_empty();
            if args.json {
                let mut value = json!({"routine": args.name, "firing": run.firing});
                if asked {
                    value["succeeded"] = json!(run.succeeded);
                    value["detail"] = json!(run.detail);
                }
                print_json(&value);
            } else if asked {
                outln!("{}: firing {}: {}", args.name, run.firing, run.detail);
            } else {
                outln!(
                    "{}: firing {} started (see `tau routine log {}`)",
                    args.name,
                    run.firing,
                    args.name
                );
            }
        }
        RoutineCommand::Log(args) => {
            let log = call(
                CALL_DEADLINE,
                client.routine_history(pb::RoutineHistoryRequest {
                    name: args.name.clone(),
                }),
            )
            .await?;
            if args.json {
                let firings: Vec<Value> = log.firings.iter().map(firing_json).collect();
                print_json(&json!({"routine": args.name, "firings": firings}));
            } else if log.firings.is_empty() {
                outln!("{} has not fired yet", args.name);
            } else {
                for firing in &log.firings {
                    outln!("{}", firing_line(firing));
                }
            }
        }
    }
    Ok(())
}

/// Whether routine `name` calls a tier-2 tool (then a manual run is asked).
async fn calls_tier_two(client: &mut HubClient, name: &str) -> Result<bool, String> {
    let list = call(
        CALL_DEADLINE,
        client.list_routines(pb::ListRoutinesRequest {}),
    )
    .await?;
    let routine = list
        .routines
        .iter()
        .find(|r| r.name == name)
        .ok_or_else(|| format!("no routine is named {name:?} (see `tau routine list`)"))?;
    let Some(pb::routine::Action::Tool(action)) = &routine.action else {
        return Ok(false);
    };
    let tools = call(CALL_DEADLINE, client.list_tools(pb::ListToolsRequest {})).await?;
    Ok(tools
        .tools
        .iter()
        .any(|t| t.name == action.tool && t.tier == pb::Tier::Physical as i32))
}

fn add_request(args: &RoutineAddArgs) -> Result<pb::AddRoutineRequest, String> {
    let action = match (&args.prompt, &args.tool) {
        (Some(text), None) => pb::add_routine_request::Action::Prompt(pb::RoutinePromptAction {
            text: text.clone(),
            approval_channel: args.channel.clone(),
        }),
        (None, Some(tool)) => {
            let arguments: Value = serde_json::from_str(&args.arguments)
                .map_err(|e| format!("--args {:?}: not JSON ({e})", args.arguments))?;
            if !arguments.is_object() {
                return Err(format!(
                    "--args {:?}: expected a JSON object",
                    args.arguments
                ));
            }
            pb::add_routine_request::Action::Tool(pb::RoutineToolAction {
                tool: tool.clone(),
                arguments_json: arguments.to_string(),
            })
        }
        _ => return Err("give one action: --prompt TEXT or --tool NAME".to_owned()),
    };
    Ok(pb::AddRoutineRequest {
        name: args.name.clone(),
        cron: args.cron.clone().unwrap_or_default(),
        every: args.every.clone().unwrap_or_default(),
        at: args.at.clone().unwrap_or_default(),
        action: Some(action),
        catch_up: match args.catch_up {
            CatchUpArg::RunOnce => "run_once",
            CatchUpArg::Skip => "skip",
        }
        .to_owned(),
        replace: args.replace,
        session_id: args.session.clone().unwrap_or_default(),
        channel: args.channel.clone(),
    })
}

fn print_json(value: &Value) {
    outln!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
    );
}

/// An RFC 3339 instant as local Istanbul time, `2026-12-24 18:00`; the text itself when it does
/// not parse; `-` when empty.
fn local(instant: &str) -> String {
    if instant.is_empty() {
        return "-".to_owned();
    }
    match (
        instant.parse::<jiff::Timestamp>(),
        jiff::tz::TimeZone::get(TIME_ZONE),
    ) {
        (Ok(t), Ok(zone)) => t.to_zoned(zone).strftime("%Y-%m-%d %H:%M").to_string(),
        _ => instant.to_owned(),
    }
}

fn action_text(routine: &pb::Routine) -> String {
    match &routine.action {
        Some(pb::routine::Action::Prompt(p)) => format!("prompt {:?}", p.text),
        Some(pb::routine::Action::Tool(t)) => format!("{} {}", t.tool, t.arguments_json),
        None => "-".to_owned(),
    }
}

fn routine_line(routine: &pb::Routine) -> String {
    let state = if routine.paused { "paused" } else { "active" };
    let last = routine.last_firing.as_ref().map_or_else(
        || "never fired".to_owned(),
        |f| format!("last {}", f.outcome),
    );
    let approval = if routine.approval_id.is_empty() {
        String::new()
    } else {
        format!(", approved on {}", routine.approval_channel)
    };
    let by = match routine.created_by.as_str() {
        "" | "unknown" => String::new(),
        who => format!(", by the {who}"),
    };
    format!(
        "{}  {}  next {}  {state}, {last}{approval}{by}  {}",
        routine.name,
        routine.schedule,
        local(&routine.next_firing),
        crate::chat::render::sanitize(&action_text(routine)),
    )
}

fn firing_line(firing: &pb::RoutineFiring) -> String {
    format!(
        "#{} {} {} {}: {}",
        firing.number,
        local(&firing.started_at),
        firing.cause,
        firing.outcome,
        crate::chat::render::sanitize(&firing.detail),
    )
}

fn firing_json(firing: &pb::RoutineFiring) -> Value {
    json!({
        "number": firing.number,
        "scheduled": firing.scheduled,
        "started_at": firing.started_at,
        "ended_at": firing.ended_at,
        "cause": firing.cause,
        "outcome": firing.outcome,
        "detail": firing.detail,
    })
}

fn routine_json(routine: &pb::Routine) -> Value {
    let action = match &routine.action {
        Some(pb::routine::Action::Prompt(p)) => {
            json!({"kind": "prompt", "text": p.text, "approval_channel": p.approval_channel})
        }
        Some(pb::routine::Action::Tool(t)) => json!({
            "kind": "tool",
            "tool": t.tool,
            "arguments": serde_json::from_str::<Value>(&t.arguments_json).unwrap_or(Value::Null),
        }),
        None => Value::Null,
    };
    json!({
        "name": routine.name,
        "schedule": routine.schedule,
        "action": action,
        "catch_up": routine.catch_up,
        "paused": routine.paused,
        "created_at": routine.created_at,
        "next_firing": routine.next_firing,
        "approval_id": routine.approval_id,
        "approval_channel": routine.approval_channel,
        "session_id": routine.session_id,
        "created_by": routine.created_by,
        "last_firing": routine.last_firing.as_ref().map(firing_json),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_in_istanbul() {
        assert_eq!(local("2026-12-24T15:00:00Z"), "2026-12-24 18:00");
        assert_eq!(local(""), "-");
        assert_eq!(local("soon"), "soon");
    }

    #[test]
    fn tool_arguments_must_be_an_object() {
        let args = RoutineAddArgs {
            name: "lamp".into(),
            cron: Some("0 23 * * *".into()),
            every: None,
            at: None,
            prompt: None,
            tool: Some("demo_physical_action".into()),
            arguments: "[1]".into(),
            catch_up: CatchUpArg::Skip,
            replace: false,
            session: None,
            channel: "terminal".into(),
            json: false,
        };
        assert!(add_request(&args).unwrap_err().contains("JSON object"));
        let ok = RoutineAddArgs {
            arguments: r#"{"action":"lamp off"}"#.into(),
            ..args
        };
        let request = add_request(&ok).unwrap();
        assert_eq!(request.catch_up, "skip");
        assert!(matches!(
            request.action,
            Some(pb::add_routine_request::Action::Tool(ref t)) if t.arguments_json == r#"{"action":"lamp off"}"#
        ));
    }
}
