//! Relays a running tool's progress reports to the turn's caller as
//! [`TurnEvent::ToolProgress`], at most one per [`PROGRESS_INTERVAL`] per call.
//!
//! Invariants: the relay keeps no queue (the tool's `ProgressWatch` holds only the latest report,
//! so reports made while the relay waits collapse into one); it stops when the tool's call returns,
//! before the call's `ToolResult` is sent, so no progress event ever follows its result.

use std::time::Duration;

use super::turn_event::{TurnEvent, TurnOutput};
use crate::gate::ToolCallRecord;
use crate::tool::ProgressWatch;

/// The shortest time between two progress events of one tool call.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(250);

/// Sends each report read from `watch` as a progress event, spaced by [`PROGRESS_INTERVAL`];
/// ends when every reporter is gone.
pub(super) async fn relay_progress(
    mut watch: ProgressWatch,
    tool_use_id: String,
    tool: String,
    out: &TurnOutput,
) {
    while let Some(progress) = watch.next().await {
        out.send(TurnEvent::ToolProgress {
            tool_use_id: tool_use_id.clone(),
            tool: tool.clone(),
            progress,
        })
        .await;
        tokio::time::sleep(PROGRESS_INTERVAL).await;
    }
}

/// Runs the tool's call (`running`, polled first) while `beside` (the relay) runs; `beside` is
/// dropped as soon as the call returns.
pub(super) async fn until_done(
    running: impl Future<Output = ToolCallRecord>,
    beside: impl Future<Output = ()>,
) -> ToolCallRecord {
    tokio::pin!(running);
    tokio::pin!(beside);
    tokio::select! {
        biased;
        record = &mut running => record,
        () = &mut beside => running.await,
    }
}
