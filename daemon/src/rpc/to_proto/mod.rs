//! Domain → proto, every answer the hub gives: sessions, messages, events, approvals, decisions
//! and the catalog here; the hub's status in [`hub_status`], routines in [`routines`]. The other
//! direction is `super::from_proto`.
//!
//! Invariants: pure functions of the hub's public types (`crate::hub`'s re-exports, never its
//! sub-modules); a tier always leaves as `pb::Tier`.

pub mod hub_status;
pub mod routines;

use tau_api::proto::v1 as pb;

use crate::gate::{ApprovalOutcome, CallApproval, ToolCallStatus};
use crate::hub::{
    DecideOutcome, EventKind, PendingInfo, SessionEvent, SessionSummary, Snapshot, ToolSummary,
    TurnInfo, shown_arguments,
};
use crate::message::{ContentBlock, Message, Role, ToolResultContent, ToolResultStatus};
use crate::tool::Tier;

pub fn session_info(s: SessionSummary) -> pb::SessionInfo {
    pb::SessionInfo {
        session_id: s.session_id,
        index: s.index,
        created_at: s.created_at,
        updated_at: s.updated_at,
        channel: s.channel,
        title: s.title,
        message_count: s.message_count,
        role: s.role,
        profile: s.profile,
        compacted_from: s.compacted_from,
        compacted_to: s.compacted_to,
        context: s.context,
    }
}

pub fn stored_message(index: u64, message: &Message, created_at: String) -> pb::StoredMessage {
    let role = match message.role {
        Role::User => pb::MessageRole::User,
        Role::Assistant => pb::MessageRole::Assistant,
    };
    pb::StoredMessage {
        index,
        role: role as i32,
        content: message.content.iter().filter_map(content_block).collect(),
        created_at,
    }
}

fn content_block(block: &ContentBlock) -> Option<pb::ContentBlock> {
    use pb::content_block::Block;
    let block = match block {
        ContentBlock::Text(text) => Block::Text(text.clone()),
        ContentBlock::ToolUse(tool_use) => Block::ToolUse(pb::ToolUseBlock {
            tool_use_id: tool_use.tool_use_id.clone(),
            name: tool_use.name.clone(),
            input_json: tool_use.input.to_string(),
        }),
        ContentBlock::ToolResult(result) => {
            let status = match result.status {
                ToolResultStatus::Success => pb::ToolResultStatus::Success,
                ToolResultStatus::Error => pb::ToolResultStatus::Error,
            };
            let text = result
                .content
                .iter()
                .map(ToolResultContent::as_text)
                .collect::<Vec<_>>()
                .join("\n");
            Block::ToolResult(pb::ToolResultBlock {
                tool_use_id: result.tool_use_id.clone(),
                status: status as i32,
                text,
            })
        }
        ContentBlock::ReasoningContent(reasoning) => {
            Block::Reasoning(reasoning.reasoning_text.as_ref()?.text.clone())
        }
        // A block this version does not know is stored as it was but not shown.
        ContentBlock::Image(image) => Block::Text(image.note()),
        ContentBlock::CachePoint(_) | ContentBlock::Other(_) => return None,
    };
    Some(pb::ContentBlock { block: Some(block) })
}

pub fn tier(tier: Option<Tier>) -> pb::Tier {
    match tier {
        None => pb::Tier::Unspecified,
        Some(Tier::Read) => pb::Tier::Read,
        Some(Tier::DigitalWrite) => pb::Tier::DigitalWrite,
        Some(Tier::Physical) => pb::Tier::Physical,
    }
}

fn tool_status(status: ToolCallStatus) -> pb::ToolCallStatus {
    match status {
        ToolCallStatus::Success => pb::ToolCallStatus::Success,
        ToolCallStatus::Error => pb::ToolCallStatus::Error,
        ToolCallStatus::Refused => pb::ToolCallStatus::Refused,
        ToolCallStatus::Cancelled => pb::ToolCallStatus::Cancelled,
    }
}

/// How an approval ended, as `ApprovalResolved` and `DecideApproval` report it. The registry
/// never ends one as `error` or `invalid` (a failing gate settles it as cancelled); were it to,
/// it would read as cancelled, like a stored one.
pub fn resolution(outcome: ApprovalOutcome) -> pb::ApprovalResolution {
    match outcome {
        ApprovalOutcome::Approved => pb::ApprovalResolution::Approved,
        ApprovalOutcome::Rejected => pb::ApprovalResolution::Rejected,
        ApprovalOutcome::Timeout => pb::ApprovalResolution::Timeout,
        ApprovalOutcome::Cancelled | ApprovalOutcome::Error | ApprovalOutcome::Invalid => {
            pb::ApprovalResolution::Cancelled
        }
        ApprovalOutcome::ChannelClosed => pb::ApprovalResolution::ChannelClosed,
        ApprovalOutcome::ExpiredByRestart => pb::ApprovalResolution::ExpiredByRestart,
    }
}

pub fn pending(info: PendingInfo) -> pb::PendingApproval {
    let PendingInfo {
        request,
        turn_id,
        asked_at,
        deadline,
        held,
    } = info;
    pb::PendingApproval {
        tier: tier(Some(request.tier)) as i32,
        arguments: request.formatted_arguments(),
        approval_id: request.approval_id,
        session_id: request.session_id,
        turn_id,
        channel: request.channel,
        tool: request.tool,
        effect: request.effect,
        tool_use_id: request.tool_use_id,
        asked_at,
        deadline: deadline.unwrap_or_default(),
        held,
    }
}

pub fn turn_info(info: TurnInfo) -> pb::TurnInfo {
    pb::TurnInfo {
        turn_id: info.turn_id,
        channel: info.channel,
        text: info.text,
        accepted_at: info.accepted_at,
    }
}

fn approval_name(approval: CallApproval) -> String {
    approval.as_str().to_owned()
}

pub fn event(event: &SessionEvent) -> pb::SessionEvent {
    use pb::session_event::Kind;
    let kind = match event.kind.clone() {
        EventKind::TurnQueued { turn, ahead } => Kind::TurnQueued(pb::TurnQueued {
            turn: Some(turn_info(turn)),
            ahead,
        }),
        EventKind::TurnStarted { turn } => Kind::TurnStarted(pb::TurnStarted {
            turn: Some(turn_info(turn)),
        }),
        EventKind::TextDelta(text) => Kind::TextDelta(pb::TextDelta { text }),
        EventKind::ReasoningDelta(text) => Kind::ReasoningDelta(pb::ReasoningDelta { text }),
        EventKind::ToolUseStarted { tool_use_id, name } => {
            Kind::ToolUseStarted(pb::ToolUseStarted { tool_use_id, name })
        }
        EventKind::ToolProgress {
            tool_use_id,
            tool,
            progress,
        } => Kind::ToolProgress(pb::ToolProgress {
            tool_use_id,
            tool,
            message: progress.message,
            progress: progress.progress,
            total: progress.total,
        }),
        EventKind::ToolCall(record) => Kind::ToolCall(pb::ToolCallFinished {
            arguments: shown_arguments(&record),
            tool_use_id: record.tool_use_id,
            tool: record.tool,
            tier: tier(record.tier) as i32,
            status: tool_status(record.status) as i32,
            approval: approval_name(record.approval),
            result_summary: record.result_summary,
            duration_ms: record.duration_ms,
        }),
        EventKind::ApprovalRequested(info) => Kind::ApprovalRequested(pb::ApprovalRequested {
            approval: Some(pending(info)),
        }),
        EventKind::ApprovalResolved {
            approval_id,
            tool,
            tool_use_id,
            resolution: r,
            decided_by_channel,
        } => Kind::ApprovalResolved(pb::ApprovalResolved {
            approval_id,
            tool,
            tool_use_id,
            resolution: resolution(r) as i32,
            decided_by_channel: decided_by_channel.unwrap_or_default(),
        }),
        EventKind::Throttled { delay } => Kind::Throttled(pb::Throttled {
            delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
        }),
        EventKind::OutputDiscarded => Kind::OutputDiscarded(pb::OutputDiscarded {}),
        EventKind::TurnEnded(end) => Kind::TurnEnded(pb::TurnEnded {
            stop_reason: end.stop_reason.as_str().to_owned(),
            text: end.text,
            usage: Some(pb::Usage {
                input_tokens: end.usage.input_tokens,
                output_tokens: end.usage.output_tokens,
                total_tokens: end.usage.total_tokens,
            }),
            model_calls: end.model_calls,
            notice: end.notice.unwrap_or_default(),
        }),
        EventKind::Error(error) => Kind::Error(pb::AgentError {
            r#where: error.location,
            message: error.message,
            tool: error.tool.unwrap_or_default(),
            tool_use_id: error.tool_use_id.unwrap_or_default(),
        }),
        EventKind::RoleSwitched {
            role,
            previous_role,
        } => Kind::RoleSwitched(pb::RoleSwitched {
            role,
            previous_role,
        }),
    };
    pb::SessionEvent {
        seq: event.seq,
        session_id: event.session_id.clone(),
        turn_id: event.turn_id.clone().unwrap_or_default(),
        at: event.at.clone(),
        kind: Some(kind),
    }
}

pub fn snapshot(snapshot: Snapshot) -> pb::SessionSnapshot {
    pb::SessionSnapshot {
        session: Some(session_info(snapshot.session)),
        running_turn: snapshot.running.map(turn_info),
        queued_turns: snapshot.queued.into_iter().map(turn_info).collect(),
        pending_approvals: snapshot.pending.into_iter().map(pending).collect(),
        last_seq: snapshot.last_seq,
        attachment_id: snapshot.attachment_id,
        role: snapshot.role,
        stream_id: snapshot.stream_id,
    }
}

pub fn tool(tool: ToolSummary) -> pb::ToolInfo {
    pb::ToolInfo {
        name: tool.name,
        tier: self::tier(tool.tier) as i32,
        description: tool.description,
        effect: tool.effect,
        server: tool.server.unwrap_or_default(),
        state: tool.state,
        node: tool.node.unwrap_or_default(),
    }
}

/// One MCP server's status as `GetStatusResponse.mcp_servers` shows it.
pub fn mcp_server(server: crate::mcp::ServerStatus) -> pb::McpServer {
    use crate::mcp::ToolState;
    let count = |state: ToolState| {
        let n = server.tools.iter().filter(|t| t.state == state).count();
        u32::try_from(n).unwrap_or(u32::MAX)
    };
    pb::McpServer {
        tools_offered: count(ToolState::Offered),
        tools_untiered: count(ToolState::Untiered),
        state: serde_json::to_value(server.state)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        error: server.error.unwrap_or_default(),
        restarts: server.restarts,
        pid: server.pid.unwrap_or(0),
        name: server.name,
    }
}

/// A decision's answer: whether it counted and how the approval ended.
pub fn decide_response(outcome: DecideOutcome) -> pb::DecideApprovalResponse {
    let (outcome, resolution) = match outcome {
        DecideOutcome::Applied(r) => (pb::DecideOutcome::Applied, Some(r)),
        DecideOutcome::AlreadyDecided(r) => (pb::DecideOutcome::AlreadyDecided, Some(r)),
        DecideOutcome::Expired(r) => (pb::DecideOutcome::Expired, Some(r)),
        DecideOutcome::NotFound => (pb::DecideOutcome::NotFound, None),
    };
    pb::DecideApprovalResponse {
        outcome: outcome as i32,
        resolution: resolution.map_or(pb::ApprovalResolution::Unspecified, self::resolution) as i32,
    }
}

/// A stored agent event (a JSON object) as `ReadEvents` carries it: its type, and the whole.
pub fn stored_event(event: &serde_json::Value) -> pb::StoredEvent {
    pb::StoredEvent {
        r#type: event
            .get("type")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        json: event.to_string(),
    }
}

/// One day of the spend ledger.
pub fn usage_day(day: crate::spend::DaySpend) -> pb::UsageDay {
    pb::UsageDay {
        date: day.date,
        roles: day
            .roles
            .into_iter()
            .map(|r| pb::RoleUsage {
                role: r.role,
                fallback: r.fallback,
                input_tokens: r.tally.input_tokens,
                output_tokens: r.tally.output_tokens,
                cache_read_tokens: r.tally.cache_read_tokens,
                cache_write_tokens: r.tally.cache_write_tokens,
                model_calls: r.tally.model_calls,
                cost_usd: r.priced.then_some(r.tally.cost_usd),
                budget_usd: r.budget_usd,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_keep_their_blocks_and_drop_cache_points() {
        let message = Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Text("hi".into()),
                ContentBlock::ToolUse(crate::message::ToolUse {
                    tool_use_id: "t1".into(),
                    name: "current_time".into(),
                    input: json!({"a": 1}),
                }),
                ContentBlock::CachePoint(crate::message::CachePoint {
                    kind: "default".into(),
                    ttl: None,
                }),
            ],
            metadata: None,
        };
        let stored = stored_message(3, &message, "t".into());
        assert_eq!(stored.index, 3);
        assert_eq!(stored.role, pb::MessageRole::Assistant as i32);
        assert_eq!(stored.content.len(), 2);
        match &stored.content[1].block {
            Some(pb::content_block::Block::ToolUse(u)) => assert_eq!(u.input_json, r#"{"a":1}"#),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn enums_never_map_to_unspecified_by_accident() {
        assert_eq!(tier(Some(Tier::Physical)), pb::Tier::Physical);
        assert_eq!(tier(None), pb::Tier::Unspecified);
        for outcome in ApprovalOutcome::ALL {
            assert_ne!(resolution(outcome), pb::ApprovalResolution::Unspecified);
        }
    }

    #[test]
    fn mcp_server_states_reach_the_wire_by_name() {
        use crate::mcp::{Phase, ServerStatus};
        let names: Vec<String> = [
            Phase::Starting,
            Phase::Ready,
            Phase::Restarting,
            Phase::GaveUp,
            Phase::Stopped,
        ]
        .into_iter()
        .map(|state| {
            mcp_server(ServerStatus {
                name: "home".into(),
                command: "home-mcp".into(),
                state,
                error: Some("gave up".into()),
                restarts: 5,
                pid: None,
                generation: 1,
                tools: Vec::new(),
                stderr_tail: Vec::new(),
            })
            .state
        })
        .collect();
        assert_eq!(
            names,
            ["starting", "ready", "restarting", "gave_up", "stopped"]
        );
    }
}
