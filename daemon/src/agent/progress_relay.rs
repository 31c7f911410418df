//! Relays a running tool's progress reports to the turn's caller as
//! [`TurnEvent::ToolProgress`], at most one per [`PROGRESS_INTERVAL`] per call.
//!
//! Invariants: the relay keeps no queue (the tool's `ProgressWatch` holds only the latest report,
//! so reports made while the relay waits collapse into one); it stops when the tool's task ends,
//! before the call's `ToolResult` is sent, so no progress event ever follows its result.

use std::time::Duration;

use tokio::task::{JoinError, JoinHandle};

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

/// Waits for the tool's task while `relay` runs; the relay is dropped as soon as the task ends.
pub(super) async fn until_done(
    mut running: JoinHandle<ToolCallRecord>,
    relay: impl std::future::Future<Output = ()>,
) -> Result<ToolCallRecord, JoinError> {
    tokio::pin!(relay);
    tokio::select! {
        biased;
        joined = &mut running => joined,
        () = &mut relay => running.await,
    }
}
