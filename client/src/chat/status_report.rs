//! `/status` in `tau chat`: the profile (the hub's, as `GetStatus` says), the session, the model
//! role and its provider, the context window, the tools, the UI language, the versions and whether
//! the hub answers; and a model role's line, which `/model` shows too ([`role_line`]).
//!
//! Invariants: information only; a question the hub refuses shows `unknown` and never stops the
//! chat, while a hub that does not answer within the deadline, or Ctrl-C, ends `/status` with one
//! line; the hub line is the `tau doctor` probe of `GET /health` on the control port (one
//! second); no key or token is ever printed (the hub's model roles carry none).

use std::time::Duration;

use tau_api::proto::v1 as pb;
use tau_api::tiers::tier_number;
use tau_client::call::{CallError, call};

use super::render;
use super::state::Chat;
use crate::hub_link::control_http::{Probe, probe};

/// How long the control API's `/health` may take to answer (the `tau doctor` probe).
const PROBE_DEADLINE: Duration = Duration::from_secs(1);

/// The answer of a question the hub may refuse (`None`, shown as `unknown`); a stalled hub or
/// Ctrl-C ends `/status`.
fn answered<T>(result: Result<T, CallError>) -> Result<Option<T>, CallError> {
    match result {
        Ok(answer) => Ok(Some(answer)),
        Err(CallError::Hub(_)) => Ok(None),
        Err(error) => Err(error),
    }
}

/// Prints the status block.
pub async fn show(chat: &mut Chat) {
    if let Err(error) = try_show(chat).await {
        chat.report(&error);
    }
}

/// What the hub said for `/status`; `None` where it refused to say.
struct HubAnswers {
    status: Option<pb::GetStatusResponse>,
    /// Messages the agent holds in memory (`None`: unknown).
    in_memory: Option<u64>,
    fallback_in_use: bool,
    roles: Option<pb::ListModelRolesResponse>,
    tools: Option<Vec<pb::ToolInfo>>,
    /// Today's spend per role (`GetUsage` for one day).
    usage: Option<pb::GetUsageResponse>,
}

async fn try_show(chat: &mut Chat) -> Result<(), CallError> {
    let answers = ask_hub(chat).await?;
    // The hub's profile is the one the model is told (a hub restarted since may run another).
    if let Some(status) = answers.status.as_ref().filter(|s| !s.profile.is_empty()) {
        chat.info.profile = render::one_line(&status.profile, 40);
    }
    let unknown = chat.t("value.unknown", &[]);
    let session = chat.session.clone();
    let title = chat.title_of(&session);
    let session_line = chat.t(
        "status.session",
        &[
            ("id", &session.session_id),
            ("title", &title),
            ("count", &session.message_count),
            ("role", &chat.role),
        ],
    );
    let model_line = model_line(chat, &answers).unwrap_or_else(|| unknown.clone());
    let context_line = chat.t(
        "status.context",
        &[
            ("mode", &chat.info.context),
            ("window", &chat.info.window),
            (
                "count",
                &answers
                    .in_memory
                    .map_or_else(|| unknown.clone(), |n| n.to_string()),
            ),
        ],
    );
    let tools_line = answers
        .tools
        .as_ref()
        .map_or_else(|| unknown.clone(), |tools| tools_line(chat, tools));
    let routines_line = routines_line(chat, &answers, &unknown);
    let language = format!("{} ({})", chat.lang.as_str(), chat.lang.native_name());
    let taud = answers.status.as_ref().map_or_else(
        || unknown.clone(),
        |status| render::one_line(&status.version, 40),
    );
    let versions = format!("tau {} · taud {taud}", tau_api::VERSION);
    let spend_line = answers
        .usage
        .as_ref()
        .map_or_else(|| unknown.clone(), |usage| spend_line(chat, usage));
    let hub_line = hub_line(chat).await?;

    let title = chat.t("status.title", &[]);
    let style = chat.printer.style();
    chat.printer.line(&style.bold(&title));
    let rows = [
        ("label.profile", chat.info.profile.clone()),
        ("label.session", session_line),
        ("label.model", model_line),
        ("label.context", context_line),
        ("label.tools", tools_line),
        ("label.spend", spend_line),
        ("label.routines", routines_line),
        ("label.language", language),
        ("label.versions", versions),
        ("label.hub", hub_line),
    ];
    for (label, value) in rows {
        let label = chat.t(label, &[]);
        chat.printer.line(&format!("  {label}: {value}"));
    }
    Ok(())
}

/// The routines row: how many, how many paused, and the hub's warnings about them.
fn routines_line(chat: &Chat, answers: &HubAnswers, unknown: &str) -> String {
    answers.status.as_ref().map_or_else(
        || unknown.to_owned(),
        |status| {
            let paused = status.routines.iter().filter(|r| r.paused).count();
            let warnings = if status.routine_warnings.is_empty() {
                String::new()
            } else {
                format!(
                    " · {}",
                    render::one_line(&status.routine_warnings.join("; "), 300)
                )
            };
            chat.t(
                "status.routines",
                &[
                    ("count", &status.routines.len()),
                    ("paused", &paused),
                    ("warnings", &warnings),
                ],
            )
        },
    )
}

/// The tools the model is offered (a node's tool while its node is away too), and how many of
/// them need an approval.
fn tools_line(chat: &Chat, tools: &[pb::ToolInfo]) -> String {
    let offered: Vec<&pb::ToolInfo> = tools
        .iter()
        .filter(|tool| matches!(tool.state.as_str(), "" | "ready" | "offline"))
        .collect();
    let approval = offered
        .iter()
        .filter(|tool| tier_number(tool.tier) == Some(2))
        .count();
    chat.t(
        "status.tools",
        &[("count", &offered.len()), ("approval", &approval)],
    )
}

/// Asks the hub its status, the session, the model roles and the tools, in that order; the
/// session it returns becomes the chat's.
async fn ask_hub(chat: &mut Chat) -> Result<HubAnswers, CallError> {
    let deadline = chat.deadlines.call;
    let status = answered(
        call(
            &mut chat.interrupts,
            deadline,
            chat.hub.get_status(pb::GetStatusRequest {}),
        )
        .await,
    )?;
    let request = pb::GetSessionRequest {
        session_id: chat.session_id().to_owned(),
        include_messages: false,
        ..Default::default()
    };
    let detail = answered(
        call(
            &mut chat.interrupts,
            deadline,
            chat.hub.get_session(request),
        )
        .await,
    )?;
    if let Some(session) = detail.as_ref().and_then(|d| d.session.clone()) {
        chat.session = session;
    }
    // What the agent holds in memory; a session without an agent in memory holds nothing.
    let in_memory = detail.as_ref().map(|d| d.in_memory_messages);
    let fallback_in_use = detail.as_ref().is_some_and(|d| d.fallback_in_use);
    let request = chat.hub.list_model_roles(pb::ListModelRolesRequest {});
    let roles = answered(call(&mut chat.interrupts, deadline, request).await)?;
    let request = chat.hub.list_tools(pb::ListToolsRequest {});
    let tools = answered(call(&mut chat.interrupts, deadline, request).await)?
        .map(|response| response.tools);
    let request = chat.hub.get_usage(pb::GetUsageRequest { days: 1 });
    let usage = answered(call(&mut chat.interrupts, deadline, request).await)?;
    Ok(HubAnswers {
        status,
        in_memory,
        fallback_in_use,
        roles,
        tools,
        usage,
    })
}

/// The chat's role, its provider and model, and its fallback with whether it is in use; `None`
/// when the hub did not list the role.
fn model_line(chat: &Chat, answers: &HubAnswers) -> Option<String> {
    let role = answers
        .roles
        .as_ref()?
        .roles
        .iter()
        .find(|role| role.name == chat.role)?;
    let mut line = role_line(chat, role);
    if !role.fallback_provider.is_empty() {
        let fallback = chat.t(
            "model.fallback",
            &[
                ("provider", &role.fallback_provider),
                ("model_id", &role.fallback_model_id),
            ],
        );
        let state = if answers.fallback_in_use {
            chat.t("model.fallback_in_use", &[])
        } else {
            chat.t("model.fallback_standby", &[])
        };
        line.push_str(&format!(" · {fallback} ({state})"));
    }
    Some(line)
}

/// Whether the hub answers `GET /health` on the control port (the `tau doctor` probe); Ctrl-C
/// ends `/status`.
async fn hub_line(chat: &mut Chat) -> Result<String, CallError> {
    let url = format!("http://127.0.0.1:{}/health", chat.info.hub_port);
    let port = chat.info.hub_port;
    let probing = tokio::task::spawn_blocking(move || probe(port, PROBE_DEADLINE));
    let probe = tokio::select! {
        probe = probing => probe.unwrap_or_else(|e| Probe::Unexpected(e.to_string())),
        () = chat.interrupts.next() => return Err(CallError::Interrupted),
    };
    Ok(match probe {
        Probe::Hub { .. } => chat.t("hub.up", &[("url", &url)]),
        Probe::NotRunning => chat.t("hub.down", &[("url", &url)]),
        Probe::Unexpected(reason) => format!(
            "{} ({})",
            chat.t("hub.down", &[("url", &url)]),
            render::one_line(&reason, 120)
        ),
    })
}

/// Today's spend per role: `brain 0,12 $ / 1 $` with a price, `brain 1500 tokens` without;
/// `none` when no model was called today.
fn spend_line(chat: &Chat, usage: &pb::GetUsageResponse) -> String {
    let dollars = |amount: f64| format!("{amount:.2} $").replace('.', ",");
    let parts: Vec<String> = usage
        .days
        .iter()
        .flat_map(|day| &day.roles)
        .map(|r| {
            let role = if r.fallback {
                format!("{}/fallback", render::one_line(&r.role, 40))
            } else {
                render::one_line(&r.role, 40)
            };
            match (r.cost_usd, r.budget_usd) {
                (Some(cost), Some(budget)) => {
                    format!("{role} {} / {}", dollars(cost), dollars(budget))
                }
                (Some(cost), None) => format!("{role} {}", dollars(cost)),
                (None, _) => chat.t(
                    "status.spend_tokens",
                    &[
                        ("role", &role),
                        ("count", &(r.input_tokens + r.output_tokens)),
                    ],
                ),
            }
        })
        .collect();
    if parts.is_empty() {
        chat.t("value.none", &[])
    } else {
        parts.join(", ")
    }
}

/// `role → provider, model_id`.
pub fn role_line(chat: &Chat, role: &pb::ModelRole) -> String {
    chat.t(
        "model.line",
        &[
            ("role", &render::one_line(&role.name, 40)),
            ("provider", &render::one_line(&role.provider, 40)),
            ("model_id", &render::one_line(&role.model_id, 80)),
        ],
    )
}
