//! The hub's side of node links: [`NodeListener`], the `nodes` service that serves
//! `tau.v1.NodeLink` on `[nodes] listen`, and what one link does: the node's hello (its tool
//! claims, again whenever they change), its heartbeats, progress and answers up; the hub's
//! heartbeats, calls and cancels down.
//!
//! Invariants: only a pinned key gets a link (an admitted key that is not pinned may only pair);
//! a link silent for two heartbeat intervals ends, and so do the calls in flight on it (outcome
//! unknown); revoking a node ends its link at once; the hub's status names the live nodes and the
//! listener's address.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use futures::Stream;
use serde_json::{Map, Value};
use tau_api::proto::v1 as pb;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tonic::service::Routes;
use tonic::{Request, Response, Status, Streaming};

use super::tls_accept::{Handshaken, NodePeer};
use crate::host::{Hub, HubService, ServiceError};
use crate::listen::{self, Protocols};
use crate::node::{CallEvent, LinkHandle, NodeError, NodeRegistry, Outbound, ToolClaim};
use crate::tool::ToolProgress;

/// The node listener service's name.
pub const NODE_LISTENER: &str = "nodes";
/// Longest name or proof a pairing request may carry.
const MAX_FIELD: usize = 256;

/// The node listener (bound only when `[nodes] listen` is set).
pub struct NodeListener {
    registry: Arc<NodeRegistry>,
    running: Mutex<Option<(oneshot::Sender<()>, JoinHandle<()>)>>,
}

impl NodeListener {
    /// A listener over `registry`, not started.
    pub fn new(registry: Arc<NodeRegistry>) -> Self {
        Self {
            registry,
            running: Mutex::new(None),
        }
    }
}

#[async_trait]
impl HubService for NodeListener {
    fn name(&self) -> &str {
        NODE_LISTENER
    }

    async fn start(&self, hub: &Hub) -> Result<(), ServiceError> {
        let registry = Arc::clone(&self.registry);
        let live = Arc::clone(&registry);
        hub.set_nodes_source(move || live.live_names());
        let Some(address) = registry.config().listen else {
            return Ok(());
        };
        let failed = |e: NodeError| ServiceError::Failed(e.to_string());
        let identity = registry.ensure_identity().map_err(failed)?;
        let tls =
            crate::node::server_config(&identity, Arc::clone(&registry) as _).map_err(failed)?;
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|e| ServiceError::io(format!("cannot listen for nodes on {address}"), e))?;
        let bound = listener
            .local_addr()
            .map_err(|e| ServiceError::io("node listener", e))?;
        let app = Routes::new(pb::node_link_server::NodeLinkServer::new(LinkApi {
            registry: Arc::clone(&registry),
        }))
        .prepare()
        .into_axum_router();
        let (shutdown, signal) = oneshot::channel::<()>();
        let task = tokio::spawn(listen::serve(
            NODE_LISTENER,
            Handshaken::start(listener, tls),
            app,
            hub.options().connections,
            Protocols::Http2Only,
            async move {
                let _ = signal.await;
            },
        ));
        let shown = bound.to_string();
        hub.add_status_source(move || {
            let mut map = Map::new();
            map.insert("nodes_listen".to_owned(), Value::String(shown.clone()));
            map
        });
        tracing::info!(%bound, fingerprint = identity.fingerprint(), "listening for nodes");
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) = Some((shutdown, task));
        Ok(())
    }

    async fn stop(&self) -> Result<(), ServiceError> {
        let running = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        self.registry.close_links();
        if let Some((shutdown, task)) = running {
            let _ = shutdown.send(());
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(3), task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        Ok(())
    }
}

struct LinkApi {
    registry: Arc<NodeRegistry>,
}

fn peer_of<T>(request: &Request<T>) -> Result<NodePeer, Status> {
    request
        .extensions()
        .get::<NodePeer>()
        .cloned()
        .ok_or_else(|| Status::unauthenticated("no client key on this connection"))
}

type HubFrames = Pin<Box<dyn Stream<Item = Result<pb::HubFrame, Status>> + Send>>;

#[tonic::async_trait]
impl pb::node_link_server::NodeLink for LinkApi {
    async fn pair(
        &self,
        request: Request<pb::PairRequest>,
    ) -> Result<Response<pb::PairResponse>, Status> {
        let peer = peer_of(&request)?;
        let pb::PairRequest { name, proof } = request.into_inner();
        if name.len() > MAX_FIELD || proof.len() > MAX_FIELD {
            return Err(Status::invalid_argument("name or proof too long"));
        }
        match self.registry.redeem(&name, &proof, &peer.fingerprint) {
            Ok(proof) => {
                tracing::info!(node = %name, address = %peer.address, "node paired");
                Ok(Response::new(pb::PairResponse { proof }))
            }
            Err(NodeError::Pair(e)) => {
                tracing::warn!(node = %name, address = %peer.address, "pairing refused: {e}");
                Err(Status::failed_precondition(e.to_string()))
            }
            Err(e) => Err(Status::internal(e.to_string())),
        }
    }

    type LinkStream = HubFrames;

    async fn link(
        &self,
        request: Request<Streaming<pb::NodeFrame>>,
    ) -> Result<Response<HubFrames>, Status> {
        let peer = peer_of(&request)?;
        let Some(name) = self.registry.pinned_name(&peer.fingerprint) else {
            return Err(Status::permission_denied(
                "this node's key is not paired with this hub: pair again",
            ));
        };
        let mut inbound = request.into_inner();
        let heartbeat = self.registry.heartbeat();
        let window = heartbeat.saturating_mul(2);
        let hello = match tokio::time::timeout(window, inbound.message()).await {
            Ok(Ok(Some(pb::NodeFrame {
                frame: Some(pb::node_frame::Frame::Hello(hello)),
            }))) => hello,
            _ => {
                return Err(Status::invalid_argument(
                    "a node link starts with its hello",
                ));
            }
        };
        let (link, outbound) = self
            .registry
            .attach(&name, &peer.address.to_string(), claims_of(hello))
            .map_err(|e| Status::permission_denied(e.to_string()))?;
        tracing::info!(node = %name, address = %peer.address, "node link up");
        let (tx, rx) = mpsc::channel(crate::node::OUTBOUND_QUEUE);
        tokio::spawn(read_node(
            Arc::clone(&self.registry),
            name,
            link.clone(),
            inbound,
            window,
        ));
        tokio::spawn(write_hub(link, outbound, tx, heartbeat));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

fn claims_of(hello: pb::NodeHello) -> Vec<ToolClaim> {
    hello
        .tools
        .into_iter()
        .map(|t| ToolClaim {
            name: t.name,
            description: t.description,
            input_schema_json: t.input_schema_json,
        })
        .collect()
}

/// The node's frames, until the link ends, the node goes quiet for `window`, or it is revoked.
async fn read_node(
    registry: Arc<NodeRegistry>,
    name: String,
    link: LinkHandle,
    mut inbound: Streaming<pb::NodeFrame>,
    window: Duration,
) {
    use pb::node_frame::Frame;
    loop {
        let frame = tokio::select! {
            () = link.closed().cancelled() => break,
            frame = tokio::time::timeout(window, inbound.message()) => frame,
        };
        match frame {
            Ok(Ok(Some(frame))) => {
                registry.heard(&name, link.id());
                match frame.frame {
                    Some(Frame::Result(r)) => link.deliver(
                        r.call_id,
                        CallEvent::Done {
                            ok: r.ok,
                            text: r.text,
                        },
                    ),
                    Some(Frame::Progress(p)) => {
                        let progress = ToolProgress {
                            message: p.text,
                            progress: p.progress,
                            total: p.total,
                        };
                        link.deliver(p.call_id, CallEvent::Progress(progress));
                    }
                    // A later hello: what the node lends changed.
                    Some(Frame::Hello(hello)) => {
                        if let Err(e) = registry.update_claims(&name, link.id(), claims_of(hello)) {
                            tracing::warn!(node = %name, "the node's new tools were not taken: {e}");
                        }
                    }
                    Some(Frame::Heartbeat(_)) | None => {}
                }
            }
            Ok(Ok(None)) => break,
            Ok(Err(status)) => {
                tracing::info!(node = %name, "node link ended: {}", status.message());
                break;
            }
            Err(_) => {
                tracing::warn!(node = %name, "node silent for two heartbeats: link closed");
                break;
            }
        }
    }
    tracing::info!(node = %name, "node link down");
    registry.detach(&name, link.id());
}

/// The hub's frames: heartbeats every `heartbeat`, and the calls and cancels queued on `link`.
async fn write_hub(
    link: LinkHandle,
    mut outbound: mpsc::Receiver<Outbound>,
    tx: mpsc::Sender<Result<pb::HubFrame, Status>>,
    heartbeat: Duration,
) {
    use pb::hub_frame::Frame;
    let mut tick = tokio::time::interval(heartbeat);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let frame = tokio::select! {
            () = link.closed().cancelled() => break,
            _ = tick.tick() => Frame::Heartbeat(pb::Heartbeat {}),
            next = outbound.recv() => match next {
                Some(Outbound::Heartbeat) => Frame::Heartbeat(pb::Heartbeat {}),
                Some(Outbound::Call { call_id, tool, arguments_json, timeout_ms, claim_digest }) => {
                    Frame::Call(pb::NodeCall { call_id, tool, arguments_json, timeout_ms, claim_digest })
                }
                Some(Outbound::Cancel { call_id }) => Frame::Cancel(pb::CancelCall { call_id }),
                None => break,
            },
        };
        let sent = tokio::select! {
            () = link.closed().cancelled() => break,
            sent = tx.send(Ok(pb::HubFrame { frame: Some(frame) })) => sent,
        };
        if sent.is_err() {
            link.close();
            break;
        }
    }
}
