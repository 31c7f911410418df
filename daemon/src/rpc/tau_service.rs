//! `tau.v1.Tau`: the hub's own gRPC service (today: `GetStatus`).
//!
//! Invariants: handlers translate and delegate to the [`Hub`]; nothing else.

use tau_api::proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::convert;
use crate::hub::Hub;

/// The `tau.v1.Tau` implementation.
#[derive(Debug, Clone)]
pub struct TauApi {
    hub: Hub,
}

impl TauApi {
    /// Serves `hub`.
    pub fn new(hub: Hub) -> Self {
        Self { hub }
    }
}

#[tonic::async_trait]
impl pb::tau_server::Tau for TauApi {
    async fn get_status(
        &self,
        _request: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::GetStatusResponse>, Status> {
        Ok(Response::new(convert::status(self.hub.status())))
    }
}
