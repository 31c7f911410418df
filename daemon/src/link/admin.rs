//! `tau.v1.Nodes`: `tau node pair|join|list|revoke`, served beside `tau.v1.Tau` on the local
//! socket and loopback TCP (same uid, or the bearer token). Each call only translates between
//! proto and `crate::node` (and `join`).
//!
//! Invariants: pairing a node is a hub's, joining a hub is a node's (the other role is told so
//! in one line); inputs are bounded before anything is touched.

use std::sync::Arc;

use tau_api::config::NodeRole;
use tau_api::proto::v1 as pb;
use tokio::sync::Notify;
use tonic::{Request, Response, Status};

use crate::node::{NodeError, NodeRegistry, NodeView};

/// Longest address, code or name accepted.
const MAX_FIELD: usize = 256;

/// The `tau.v1.Nodes` server.
pub fn server(
    registry: Arc<NodeRegistry>,
    role: NodeRole,
    wake: Arc<Notify>,
) -> pb::nodes_server::NodesServer<AdminApi> {
    pb::nodes_server::NodesServer::new(AdminApi {
        registry,
        role,
        wake,
    })
}

/// The service.
pub struct AdminApi {
    registry: Arc<NodeRegistry>,
    role: NodeRole,
    wake: Arc<Notify>,
}

fn status(e: NodeError) -> Status {
    match e {
        NodeError::BadName(_) => Status::invalid_argument(e.to_string()),
        NodeError::NotPaired(_) => Status::not_found(e.to_string()),
        NodeError::TooManyCodes => Status::resource_exhausted(e.to_string()),
        NodeError::Pair(_) => Status::failed_precondition(e.to_string()),
        NodeError::Store { .. } | NodeError::Keys(_) => Status::internal(e.to_string()),
    }
}

fn bounded(field: &str, value: &str) -> Result<(), Status> {
    if value.len() > MAX_FIELD {
        return Err(Status::invalid_argument(format!("{field} is too long")));
    }
    Ok(())
}

fn info(view: NodeView) -> pb::NodeInfo {
    pb::NodeInfo {
        name: view.name,
        live: view.live,
        last_seen: view.last_seen,
        address: view.address,
        state: view.state.as_str().to_owned(),
        fingerprint: view.fingerprint,
        tools: view
            .tools
            .into_iter()
            .map(|t| pb::LentTool {
                name: t.name,
                tier: t.tier.map_or(pb::Tier::Unspecified, |n| match n {
                    0 => pb::Tier::Read,
                    1 => pb::Tier::DigitalWrite,
                    _ => pb::Tier::Physical,
                }) as i32,
                tiered: t.tier.is_some(),
                offered_as: t.offered_as.unwrap_or_default(),
                changed: t.changed,
            })
            .collect(),
    }
}

#[tonic::async_trait]
impl pb::nodes_server::Nodes for AdminApi {
    async fn pair_node(
        &self,
        request: Request<pb::PairNodeRequest>,
    ) -> Result<Response<pb::PairNodeResponse>, Status> {
        let name = request.into_inner().name;
        bounded("name", &name)?;
        if self.role == NodeRole::Node {
            return Err(Status::failed_precondition(
                "this taud runs as a node; run tau node pair on the hub",
            ));
        }
        if self.registry.config().listen.is_none() {
            return Err(Status::failed_precondition(
                "this hub does not accept nodes: set [nodes] listen = \"ADDRESS:PORT\" in tau.toml and restart it",
            ));
        }
        let (code, expires_at) = self.registry.issue_code(&name).map_err(status)?;
        Ok(Response::new(pb::PairNodeResponse { code, expires_at }))
    }

    async fn join_hub(
        &self,
        request: Request<pb::JoinHubRequest>,
    ) -> Result<Response<pb::JoinHubResponse>, Status> {
        let pb::JoinHubRequest { address, code } = request.into_inner();
        bounded("address", &address)?;
        bounded("code", &code)?;
        if self.role == NodeRole::Hub {
            return Err(Status::failed_precondition(
                "this taud runs as a hub; run tau node join on the node (TAU_ROLE=node)",
            ));
        }
        let (name, hub_fingerprint) = super::join::join(&self.registry, &address, &code)
            .await
            .map_err(Status::failed_precondition)?;
        self.wake.notify_one();
        Ok(Response::new(pb::JoinHubResponse {
            name,
            hub_fingerprint,
        }))
    }

    async fn list_nodes(
        &self,
        _request: Request<pb::ListNodesRequest>,
    ) -> Result<Response<pb::ListNodesResponse>, Status> {
        let views = match self.role {
            NodeRole::Hub => self.registry.list(),
            NodeRole::Node => self.registry.hub_view().into_iter().collect(),
        };
        Ok(Response::new(pb::ListNodesResponse {
            role: self.role.as_str().to_owned(),
            nodes: views.into_iter().map(info).collect(),
        }))
    }

    async fn revoke_node(
        &self,
        request: Request<pb::RevokeNodeRequest>,
    ) -> Result<Response<pb::RevokeNodeResponse>, Status> {
        let name = request.into_inner().name;
        bounded("name", &name)?;
        self.registry.revoke(&name).map_err(status)?;
        tracing::info!(node = %name, "node revoked");
        Ok(Response::new(pb::RevokeNodeResponse {}))
    }
}
