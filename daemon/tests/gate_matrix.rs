//! The gate matrix: tier (0, 1, 2, unknown tool) × approver outcome (approve, reject, timeout,
//! error, invalid, cancelled) × exemption (none, match, raising), each run through a real agent turn
//! with the fake model. Every case asserts what ran, the agent events, the approver's questions, and
//! the toolResult the model read. No case approves without a scripted decision.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use taud::agent::{StopReason, TauAgent, TurnEvent};
use taud::gate::{AgentEvent, ApprovalOutcome, Approver, refusal_text, unknown_tool_text};
use taud::message::{ContentBlock, Role, ToolResultContent, ToolResultStatus};
use taud::testing::{
    FakeModel, FakeReply, MemorySink, ScriptedAnswer, ScriptedApprover, UnansweredApprover,
};
use taud::tool::{Tier, Tool, ToolCatalog, ToolContext, ToolError, ToolOutput, ToolSpec};

const DEADLINE: Duration = Duration::from_secs(10);

struct Probe {
    spec: ToolSpec,
    runs: Arc<AtomicUsize>,
}

#[async_trait]
impl Tool for Probe {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _input: Value, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::text("probe ran"))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Tier(Tier),
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Approve,
    Reject,
    Timeout,
    Error,
    Invalid,
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exemption {
    None,
    Match,
    Raising,
}

/// The approver for an outcome, and a way to count the questions it got.
fn approver(outcome: Outcome) -> (Arc<dyn Approver>, Box<dyn Fn() -> usize>) {
    fn scripted(answers: Vec<ScriptedAnswer>) -> (Arc<dyn Approver>, Box<dyn Fn() -> usize>) {
        let approver = Arc::new(ScriptedApprover::new(answers));
        let asked = Arc::clone(&approver);
        (approver, Box::new(move || asked.requests().len()))
    }
    match outcome {
        Outcome::Approve => scripted(vec![ScriptedAnswer::Decide(ApprovalOutcome::Approved)]),
        Outcome::Reject => scripted(vec![ScriptedAnswer::Decide(ApprovalOutcome::Rejected)]),
        Outcome::Error => scripted(vec![ScriptedAnswer::Fail("approver offline".into())]),
        Outcome::Invalid => scripted(vec![ScriptedAnswer::Raw("maybe".into())]),
        Outcome::Timeout | Outcome::Cancelled => {
            let approver = Arc::new(UnansweredApprover::new());
            let asked = Arc::clone(&approver);
            (approver, Box::new(move || asked.requests().len()))
        }
    }
}

fn decision(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Approve => "approved",
        Outcome::Reject => "rejected",
        Outcome::Timeout => "timeout",
        Outcome::Error => "error",
        Outcome::Invalid => "invalid",
        Outcome::Cancelled => "cancelled",
    }
}

/// A compact, comparable form of the agent events.
fn event_trace(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .map(|event| match event {
            AgentEvent::ToolCall(call) => format!(
                "tool_call:{}:{}:{}",
                call.status.as_str(),
                call.approval.as_str(),
                call.tier.map_or("-".to_owned(), |t| t.number().to_string())
            ),
            AgentEvent::Approval(approval) => format!(
                "approval:{}",
                serde_json::to_value(approval.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            ),
            other => other.kind().to_owned(),
        })
        .collect()
}

struct Expected {
    ran: bool,
    asked: bool,
    approval: &'static str,
    status: &'static str,
    result: String,
    result_status: ToolResultStatus,
    events: Vec<String>,
}

fn expected(target: Target, outcome: Outcome, exemption: Exemption) -> Expected {
    let tool = match target {
        Target::Unknown => "nope",
        Target::Tier(_) => "probe",
    };
    let mut events = Vec::new();
    let ran = |approval: &'static str, tier: u8, events: Vec<String>| Expected {
        ran: true,
        asked: false,
        approval,
        status: "success",
        result: "probe ran".into(),
        result_status: ToolResultStatus::Success,
        events: [events, vec![format!("tool_call:success:{approval}:{tier}")]].concat(),
    };
    match target {
        Target::Unknown => Expected {
            ran: false,
            asked: false,
            approval: "not_required",
            status: "refused",
            result: unknown_tool_text(tool),
            result_status: ToolResultStatus::Error,
            events: vec!["error".into(), "tool_call:refused:not_required:-".into()],
        },
        Target::Tier(tier) if tier != Tier::Physical => ran("not_required", tier.number(), events),
        Target::Tier(_) => {
            if exemption == Exemption::Raising {
                events.push("error".into());
            }
            if exemption == Exemption::Match {
                return ran("exempt", 2, events);
            }
            events.push("approval:pending".into());
            if outcome == Outcome::Error {
                events.push("error".into());
            }
            events.push(format!("approval:{}", decision(outcome)));
            if outcome == Outcome::Approve {
                let mut done = ran("approved", 2, events);
                done.asked = true;
                return done;
            }
            events.push(format!("tool_call:refused:{}:2", decision(outcome)));
            Expected {
                ran: false,
                asked: true,
                approval: decision(outcome),
                status: "refused",
                result: refusal_text(tool),
                result_status: ToolResultStatus::Error,
                events,
            }
        }
    }
}

/// Runs one case, checks it against [`expected`], and says whether the tool ran.
async fn run_case(target: Target, outcome: Outcome, exemption: Exemption) -> bool {
    let case = format!("{target:?} × {outcome:?} × {exemption:?}");
    let runs = Arc::new(AtomicUsize::new(0));
    let exemption_calls = Arc::new(AtomicUsize::new(0));
    let mut catalog = ToolCatalog::new();
    let probe_tier = match target {
        Target::Tier(tier) => tier,
        Target::Unknown => Tier::Physical,
    };
    let added = catalog.add(Arc::new(Probe {
        spec: ToolSpec::builder("probe", "Probes the gate.")
            .tier(probe_tier)
            .build(),
        runs: Arc::clone(&runs),
    }));
    assert_eq!(added, Ok(()));
    let tool_name = if target == Target::Unknown {
        "nope"
    } else {
        "probe"
    };
    let model = Arc::new(FakeModel::scripted([
        FakeReply::tool_call(tool_name, json!({"x": 1})),
        FakeReply::text("reported"),
    ]));
    let sink = Arc::new(MemorySink::new());
    let (approver, asked) = approver(outcome);
    let mut builder = TauAgent::builder(model.clone())
        .catalog(catalog)
        .approver(approver)
        .event_sink(sink.clone())
        .session_id("matrix");
    if outcome == Outcome::Timeout {
        builder = builder.gate_timeout(Some(Duration::from_millis(20)));
    }
    let counter = Arc::clone(&exemption_calls);
    builder = match exemption {
        Exemption::None => builder,
        Exemption::Match => builder.exemption(move |_: &str, _: &Value| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>(true)
        }),
        Exemption::Raising => builder.exemption(move |_: &str, _: &Value| {
            counter.fetch_add(1, Ordering::SeqCst);
            Err::<bool, _>("routine store unreadable")
        }),
    };
    let agent = builder.build();

    let mut stream = agent.stream("do it");
    let mut turn_events = Vec::new();
    let end = tokio::time::timeout(DEADLINE, async {
        while let Some(event) = stream.next_event().await {
            if matches!(event, TurnEvent::ApprovalAsked(_)) && outcome == Outcome::Cancelled {
                // ApprovalAsked is sent before the approver is polled: cancel only once the
                // question has really reached it (the outer deadline bounds this wait).
                while asked() == 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                stream.cancel();
            }
            if let TurnEvent::TurnEnd(end) = &event {
                return end.clone();
            }
            turn_events.push(event);
        }
        panic!("{case}: no TurnEnd");
    })
    .await
    .unwrap_or_else(|_| panic!("{case}: turn did not end"));

    let want = expected(target, outcome, exemption);
    let cancelled = want.asked && outcome == Outcome::Cancelled;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        usize::from(want.ran),
        "{case}: ran"
    );
    assert_eq!(asked(), usize::from(want.asked), "{case}: approver asked");
    let exemption_expected =
        usize::from(exemption != Exemption::None && target == Target::Tier(Tier::Physical));
    assert_eq!(
        exemption_calls.load(Ordering::SeqCst),
        exemption_expected,
        "{case}: exemption asked"
    );
    assert_eq!(event_trace(&sink.events()), want.events, "{case}: events");
    let calls = sink.tool_calls();
    assert_eq!(calls.len(), 1, "{case}");
    assert_eq!(calls[0].tool_use_id, "fake-1-0", "{case}");
    assert_eq!(calls[0].arguments, json!({"x": 1}), "{case}");
    assert_eq!(calls[0].approval.as_str(), want.approval, "{case}");
    assert_eq!(calls[0].status.as_str(), want.status, "{case}");
    assert_eq!(calls[0].session_id, "matrix", "{case}");
    for approval in sink.approvals() {
        assert_eq!(approval.tool, tool_name, "{case}");
        assert_eq!(approval.tier, Tier::Physical, "{case}");
        assert_eq!(approval.effect, "Probes the gate.", "{case}");
        assert!(approval.approval_id.starts_with("apr-"), "{case}");
    }
    let asked_events = turn_events
        .iter()
        .filter(|e| matches!(e, TurnEvent::ApprovalAsked(_)))
        .count();
    let decided: Vec<ApprovalOutcome> = turn_events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::ApprovalDecided { decision, .. } => Some(*decision),
            _ => None,
        })
        .collect();
    assert_eq!(
        asked_events,
        usize::from(want.asked),
        "{case}: ApprovalAsked"
    );
    if want.asked {
        assert_eq!(decided.len(), 1, "{case}: ApprovalDecided");
        assert_eq!(decided[0].as_str(), decision(outcome), "{case}");
    }

    if cancelled {
        assert_eq!(end.stop_reason, StopReason::Cancelled, "{case}");
        // The next turn lets the model read the refusal, after the repair notice.
        let next = agent.ask("next").await;
        assert_eq!(next, Ok("reported".to_owned()), "{case}");
    } else {
        assert_eq!(end.stop_reason, StopReason::EndTurn, "{case}");
        assert_eq!(end.text, "reported", "{case}");
    }

    // What the model read on its second call.
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "{case}");
    let messages = &requests[1].messages;
    let results_message = messages
        .iter()
        .find(|m| m.role == Role::User && m.tool_results().next().is_some())
        .unwrap_or_else(|| panic!("{case}: no toolResult read"));
    let results: Vec<_> = results_message.tool_results().collect();
    assert_eq!(results.len(), 1, "{case}");
    assert_eq!(results[0].tool_use_id, "fake-1-0", "{case}");
    assert_eq!(results[0].status, want.result_status, "{case}");
    assert_eq!(
        results[0].content,
        vec![ToolResultContent::Text(want.result.clone())],
        "{case}"
    );
    if cancelled {
        let tail: Vec<_> = messages[messages.len() - 2..].to_vec();
        assert_eq!(tail[0].role, Role::Assistant, "{case}");
        assert_eq!(
            tail[0].content,
            vec![ContentBlock::Text(
                "(The user cancelled the previous turn.)".into()
            )],
            "{case}"
        );
        assert_eq!(tail[1].text(), "next", "{case}");
    }
    runs.load(Ordering::SeqCst) > 0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_matrix() {
    let targets = [
        Target::Tier(Tier::Read),
        Target::Tier(Tier::DigitalWrite),
        Target::Tier(Tier::Physical),
        Target::Unknown,
    ];
    let outcomes = [
        Outcome::Approve,
        Outcome::Reject,
        Outcome::Timeout,
        Outcome::Error,
        Outcome::Invalid,
        Outcome::Cancelled,
    ];
    let exemptions = [Exemption::None, Exemption::Match, Exemption::Raising];
    let mut physical_runs = Vec::new();
    for target in targets {
        for outcome in outcomes {
            for exemption in exemptions {
                let ran = run_case(target, outcome, exemption).await;
                if ran
                    && target != Target::Tier(Tier::Read)
                    && target != Target::Tier(Tier::DigitalWrite)
                {
                    physical_runs.push((target, outcome, exemption));
                }
            }
        }
    }
    // The rule itself, independent of `expected`: a tier-2 tool ran only when a person approved
    // it or an exemption matched, and an unknown tool never ran.
    for (target, outcome, exemption) in &physical_runs {
        assert_eq!(
            *target,
            Target::Tier(Tier::Physical),
            "{outcome:?} × {exemption:?}"
        );
        assert!(
            *outcome == Outcome::Approve || *exemption == Exemption::Match,
            "tier 2 ran without approval: {outcome:?} × {exemption:?}"
        );
    }
    assert!(physical_runs.contains(&(
        Target::Tier(Tier::Physical),
        Outcome::Approve,
        Exemption::None
    )));
}
