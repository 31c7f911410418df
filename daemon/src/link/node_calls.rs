//! How a node runs the hub's calls: [`start_call`] runs one in its own task with the node's own
//! tool, relays the tool's progress up as `CallProgress` frames and answers with one
//! `CallResult`; cancelling its token (the hub's `CancelCall`, or the link dropping) cancels the
//! tool.
//!
//! Invariants: at most [`MAX_RUNNING`] calls run at once; a call whose claim digest differs from
//! what the node lends now is refused before it runs; a call is stopped once it has gone its
//! deadline without a result or progress (progress starts the wait over, as on the hub); progress
//! goes up at most once per [`PROGRESS_GAP`], the latest report winning; a cancelled tool gets
//! [`CANCEL_GRACE`] to end on its own before it is dropped; every call ends with exactly one
//! result frame, sent unless the link is gone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tau_api::proto::v1 as pb;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::lent::{Lent, claim_of};
use crate::tool::{ProgressReporter, Tool, ToolContext};

/// Calls running at once on a node.
pub const MAX_RUNNING: usize = 32;
/// The shortest time between two progress frames of one call.
pub const PROGRESS_GAP: Duration = Duration::from_millis(100);
/// How long a cancelled tool may take to end on its own.
pub const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// The calls running on one link, by call id.
pub type Running = Arc<Mutex<HashMap<u64, CancellationToken>>>;

fn frame(frame: pb::node_frame::Frame) -> pb::NodeFrame {
    pb::NodeFrame { frame: Some(frame) }
}

fn result(call_id: u64, ok: bool, text: &str) -> pb::NodeFrame {
    frame(pb::node_frame::Frame::Result(pb::CallResult {
        call_id,
        ok,
        text: text.to_owned(),
    }))
}

/// Starts `call` in its own task; its frames go to `tx`.
pub fn start_call(
    lent: &Arc<Lent>,
    call: pb::NodeCall,
    tx: mpsc::Sender<pb::NodeFrame>,
    running: &Running,
) {
    let call_id = call.call_id;
    let token = CancellationToken::new();
    {
        let mut table = running.lock().unwrap_or_else(PoisonError::into_inner);
        if table.len() >= MAX_RUNNING {
            let busy = "the node is running too many calls; try again later";
            let _ = tx.try_send(result(call_id, false, busy));
            return;
        }
        table.insert(call_id, token.clone());
    }
    let tool = lent.find(&call.tool);
    let running = Arc::clone(running);
    tokio::spawn(async move {
        let (ok, text) = run_call(tool, &call, token, &tx).await;
        tracing::info!(tool = %call.tool, call_id, ok, "ran a call for the hub");
        running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&call_id);
        let _ = tx.send(result(call_id, ok, &text)).await;
    });
}

/// Runs one call with the node's own tool: whether it succeeded, and its output or error text.
async fn run_call(
    tool: Option<Arc<dyn Tool>>,
    call: &pb::NodeCall,
    cancel: CancellationToken,
    tx: &mpsc::Sender<pb::NodeFrame>,
) -> (bool, String) {
    let Some(tool) = tool else {
        return (false, format!("this node does not lend {}", call.tool));
    };
    if !call.claim_digest.is_empty() && claim_of(tool.as_ref()).digest() != call.claim_digest {
        return (
            false,
            format!(
                "{} changed on this node since the hub offered it; it did not run",
                call.tool
            ),
        );
    }
    let input: Value = match serde_json::from_str(&call.arguments_json) {
        Ok(value @ Value::Object(_)) => value,
        _ => return (false, "the arguments must be a JSON object".to_owned()),
    };
    let (progress, mut reports) = ProgressReporter::channel();
    let ctx = ToolContext {
        tool_use_id: format!("node-call-{}", call.call_id),
        session_id: String::new(),
        channel: "node".to_owned(),
        cancel: cancel.clone(),
        progress,
    };
    let idle = Duration::from_millis(u64::from(call.timeout_ms).clamp(1000, 3_600_000));
    let mut quiet_until = Instant::now() + idle;
    let mut next_frame = Instant::now();
    let mut reporting = true;
    let mut task = tokio::spawn(async move { tool.call(input, ctx).await });
    let outcome = loop {
        tokio::select! {
            joined = &mut task => break joined,
            () = cancel.cancelled() => {
                if tokio::time::timeout(CANCEL_GRACE, &mut task).await.is_err() {
                    task.abort();
                }
                return (false, "cancelled by the hub".to_owned());
            }
            () = tokio::time::sleep_until(quiet_until) => {
                task.abort();
                return (false, "the call went past its deadline on the node without progress".to_owned());
            }
            () = tokio::time::sleep_until(next_frame), if reporting && next_frame > Instant::now() => {}
            report = reports.next(), if reporting && next_frame <= Instant::now() => match report {
                Some(report) => {
                    quiet_until = Instant::now() + idle;
                    next_frame = Instant::now() + PROGRESS_GAP;
                    let up = pb::CallProgress {
                        call_id: call.call_id,
                        text: report.message,
                        progress: report.progress,
                        total: report.total,
                    };
                    // A full queue drops this report: a later one carries the news.
                    let _ = tx.try_send(frame(pb::node_frame::Frame::Progress(up)));
                }
                None => reporting = false,
            },
        }
    };
    match outcome {
        Ok(Ok(output)) => (
            true,
            output
                .content
                .iter()
                .map(crate::message::ToolResultContent::as_text)
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        Ok(Err(e)) => (false, e.to_string()),
        Err(_) => (false, "the tool crashed on the node".to_owned()),
    }
}
