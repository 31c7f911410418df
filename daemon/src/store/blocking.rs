//! [`store_io`]: how code running on the async runtime makes a synchronous, durable store write
//! (a message, an agent event, the agent record).
//!
//! Invariants: on the hub's multi-thread runtime the worker hands its queued tasks to the others
//! before it blocks (`tokio::task::block_in_place`), so an fsync on a slow SD card never delays the
//! heartbeat, the control API or another session's turn; on a current-thread runtime (tests) or with
//! no runtime the write simply runs, because `block_in_place` is not allowed there. The write itself
//! and its ordering are unchanged: the caller still waits for it.

use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `write`, a blocking store call, without holding up the runtime's other tasks.
pub(crate) fn store_io<T>(write: impl FnOnce() -> T) -> T {
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(write)
        }
        _ => write(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn runs_without_a_runtime() {
        assert_eq!(store_io(|| 7), 7);
    }

    #[tokio::test]
    async fn runs_on_a_current_thread_runtime() {
        assert_eq!(store_io(|| "written"), "written");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_write_does_not_hold_up_other_tasks_on_its_worker() {
        // A task spawned from the writing task lands on the same worker's queue; with the worker
        // handed off, it runs (and answers) while the write still blocks.
        let (tx, rx) = std::sync::mpsc::channel();
        let writer = tokio::spawn(async move {
            let ticker = tokio::spawn(async move {
                let _ = tx.send("ran during the write");
            });
            let seen = store_io(|| rx.recv_timeout(Duration::from_secs(10)));
            let _ = ticker.await;
            seen
        });
        assert_eq!(writer.await.unwrap(), Ok("ran during the write"));
    }
}
