//! The node's side: [`NodeDialer`], the `node_link` service of a `taud` running as a node. It
//! starts the node's MCP servers, dials the hub it pinned, says hello with the tools it lends
//! (`lent.rs`: its built-ins and its MCP servers' tools, limited by `[node] lend`) and again
//! whenever they change, answers the hub's heartbeats and calls (`node_calls.rs`), and reconnects
//! with capped, jittered back-off.
//!
//! Invariants: it dials only the pinned hub and accepts only the pinned key; it runs only calls
//! that arrive on that link, each under the deadline the hub sent and cancelled when the hub
//! cancels it or the link drops; a link silent for two heartbeat intervals is ended and dialled
//! again; a change of the lent tools is announced once it has settled for [`SETTLE`], and only
//! when the claims differ from the last ones sent.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tau_api::config::NodeConfig;
use tau_api::proto::v1 as pb;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use super::join::{connect, refused_key};
use super::lent::Lent;
use super::node_calls::{Running, start_call};
use crate::host::{Hub, HubService, ServiceError};
use crate::mcp::McpServerSpec;
use crate::node::{HubKey, NodeRegistry, client_config};

/// The dialer service's name.
pub const NODE_DIALER: &str = "node_link";
/// How long the lent tools must stay unchanged before a new hello announces them (an MCP server
/// that restarts publishes no tools, then its new ones).
pub const SETTLE: Duration = Duration::from_millis(250);
/// The first pause before dialling again.
const FIRST_PAUSE: Duration = Duration::from_millis(250);
/// The longest pause between dials.
const LONGEST_PAUSE: Duration = Duration::from_secs(30);

/// Dials the hub and keeps the link up.
pub struct NodeDialer {
    registry: Arc<NodeRegistry>,
    tools: Arc<Lent>,
    wake: Arc<Notify>,
    running: Mutex<Option<(CancellationToken, JoinHandle<()>)>>,
}

impl NodeDialer {
    /// A dialer lending this node's built-in tools and the tools of its MCP servers `mcp` that
    /// `lend` allows (nothing starts before the service does).
    pub fn new(
        registry: Arc<NodeRegistry>,
        lend: &NodeConfig,
        mcp: Vec<McpServerSpec>,
        wake: Arc<Notify>,
    ) -> Self {
        Self {
            registry,
            tools: Arc::new(Lent::new(lend, mcp)),
            wake,
            running: Mutex::new(None),
        }
    }
}

#[async_trait]
impl HubService for NodeDialer {
    fn name(&self) -> &str {
        NODE_DIALER
    }

    async fn start(&self, hub: &Hub) -> Result<(), ServiceError> {
        self.tools.start();
        let lent = Arc::clone(&self.tools);
        hub.add_status_source(move || lent.status());
        let stop = CancellationToken::new();
        let task = tokio::spawn(dial_loop(
            Arc::clone(&self.registry),
            Arc::clone(&self.tools),
            Arc::clone(&self.wake),
            stop.clone(),
        ));
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) = Some((stop, task));
        Ok(())
    }

    async fn stop(&self) -> Result<(), ServiceError> {
        let running = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some((stop, task)) = running {
            stop.cancel();
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(3), task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        self.tools.stop().await;
        Ok(())
    }
}

/// The pause before dial `attempt` (0-based): doubling from [`FIRST_PAUSE`] up to
/// [`LONGEST_PAUSE`], then ±25 % at random so many nodes do not dial in step.
pub fn backoff(attempt: u32) -> Duration {
    let doubled = FIRST_PAUSE.saturating_mul(1u32 << attempt.min(8));
    let capped = doubled.min(LONGEST_PAUSE);
    let mut byte = [0u8; 1];
    let spread = if getrandom::fill(&mut byte).is_ok() {
        f64::from(byte[0]) / 255.0
    } else {
        0.5
    };
    capped.mul_f64(0.75 + spread * 0.5)
}

async fn dial_loop(
    registry: Arc<NodeRegistry>,
    tools: Arc<Lent>,
    wake: Arc<Notify>,
    stop: CancellationToken,
) {
    let mut attempt: u32 = 0;
    loop {
        let target = registry.hub().zip(registry.identity());
        let Some((hub, identity)) = target else {
            tokio::select! {
                () = wake.notified() => continue,
                () = stop.cancelled() => return,
            }
        };
        match link_once(
            &registry,
            &hub.address,
            &hub.fingerprint,
            &identity,
            &tools,
            &stop,
        )
        .await
        {
            Ok(()) => attempt = 0,
            Err(e) => {
                tracing::warn!(hub = %hub.address, "hub link: {e}");
                attempt = attempt.saturating_add(1);
            }
        }
        registry.hub_link(Some(false));
        tokio::select! {
            () = tokio::time::sleep(backoff(attempt)) => {}
            () = wake.notified() => attempt = 0,
            () = stop.cancelled() => return,
        }
    }
}

async fn link_once(
    registry: &Arc<NodeRegistry>,
    address: &str,
    hub_fp: &str,
    identity: &crate::node::Identity,
    tools: &Arc<Lent>,
    stop: &CancellationToken,
) -> Result<(), String> {
    use pb::hub_frame::Frame;
    let tls =
        client_config(identity, HubKey::Pinned(hub_fp.to_owned())).map_err(|e| e.to_string())?;
    let channel = connect(address, tls).await.map_err(|e| {
        let text = format!("{e:?}");
        if refused_key(&text) {
            registry.hub_key_changed();
        }
        format!("cannot reach {address}: {e}")
    })?;
    let heartbeat = registry.heartbeat();
    let window = heartbeat.saturating_mul(2);
    let (tx, rx) = mpsc::channel::<pb::NodeFrame>(crate::node::OUTBOUND_QUEUE);
    let mut changes = tools.changes();
    changes.mark_unchanged();
    let mut announced = tools.claims();
    let hello = pb::NodeHello {
        tools: announced.clone(),
    };
    let _ = tx.try_send(frame(pb::node_frame::Frame::Hello(hello)));
    let mut settle: Option<Instant> = None;
    let mut client = pb::node_link_client::NodeLinkClient::new(channel);
    let mut inbound = match tokio::time::timeout(window, client.link(ReceiverStream::new(rx))).await
    {
        Ok(Ok(response)) => response.into_inner(),
        Ok(Err(status)) => {
            if refused_key(&format!("{status:?}")) {
                registry.hub_key_changed();
            }
            return Err(format!("the hub refused the link: {}", status.message()));
        }
        Err(_) => return Err("the hub did not answer".to_owned()),
    };
    registry.hub_link(Some(true));
    tracing::info!(hub = %address, "hub link up");
    let running: Running = Arc::default();
    let mut tick = tokio::time::interval(heartbeat);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // When the hub was last heard: the silence is measured from it, whatever else wakes the loop.
    let mut heard = Instant::now();
    let ended = loop {
        tokio::select! {
            () = stop.cancelled() => break Ok(()),
            () = tokio::time::sleep_until(heard + window) => {
                break Err("the hub was silent for two heartbeats".to_owned());
            }
            _ = tick.tick() => {
                let _ = tx.try_send(frame(pb::node_frame::Frame::Heartbeat(pb::Heartbeat {})));
            }
            Ok(()) = changes.changed(), if settle.is_none() => {
                settle = Some(Instant::now() + SETTLE);
            }
            () = tokio::time::sleep_until(settle.unwrap_or_else(Instant::now)), if settle.is_some() => {
                settle = None;
                changes.mark_unchanged();
                let claims = tools.claims();
                if claims != announced {
                    let hello = pb::NodeHello { tools: claims.clone() };
                    if tx.try_send(frame(pb::node_frame::Frame::Hello(hello))).is_ok() {
                        tracing::info!(hub = %address, tools = claims.len(), "lent tools changed: announced");
                        announced = claims;
                    } else {
                        settle = Some(Instant::now() + SETTLE);
                    }
                }
            }
            next = inbound.message() => match next.inspect(|_| heard = Instant::now()) {
                Ok(Some(pb::HubFrame { frame: Some(Frame::Call(call)) })) => {
                    registry.hub_link(None);
                    start_call(tools, call, tx.clone(), &running);
                }
                Ok(Some(pb::HubFrame { frame: Some(Frame::Cancel(cancel)) })) => {
                    registry.hub_link(None);
                    let token = running
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .remove(&cancel.call_id);
                    if let Some(token) = token {
                        token.cancel();
                    }
                }
                Ok(Some(_)) => registry.hub_link(None),
                Ok(None) => break Ok(()),
                Err(status) => {
                    if refused_key(&format!("{status:?}")) {
                        registry.hub_key_changed();
                    }
                    break Err(format!("the link ended: {}", status.message()));
                }
            },
        }
    };
    for (_, token) in running
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .drain()
    {
        token.cancel();
    }
    tracing::info!(hub = %address, "hub link down");
    ended
}

fn frame(frame: pb::node_frame::Frame) -> pb::NodeFrame {
    pb::NodeFrame { frame: Some(frame) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_cap_with_jitter() {
        for attempt in 0..20 {
            let pause = backoff(attempt);
            let base = FIRST_PAUSE
                .saturating_mul(1 << attempt.min(8))
                .min(LONGEST_PAUSE);
            assert!(
                pause >= base.mul_f64(0.74) && pause <= base.mul_f64(1.26),
                "{attempt}: {pause:?}"
            );
        }
        assert!(backoff(30) <= LONGEST_PAUSE.mul_f64(1.26));
    }
}
