//! `tau.v1.Tau`: the hub's gRPC service. `GetStatus` comes from the [`Hub`]; every other call goes
//! to the [`HubCore`] (sessions, turns, events, approvals, catalog) through `calls`.
//!
//! Invariants: handlers translate and delegate; nothing else. When the session service could not
//! start (its store failed to open), status still answers and every other call is UNAVAILABLE
//! with the reason.

use tau_api::proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::calls::{self, BoxStream};
use super::routine_calls;
use super::to_proto;
use crate::host::Hub;
use crate::hub::HubCore;

/// The `tau.v1.Tau` implementation.
#[derive(Debug, Clone)]
pub struct TauApi {
    hub: Hub,
    core: Result<HubCore, String>,
}

impl TauApi {
    /// Serves `hub` and, when it started, the session service `core` (else the reason it did not).
    pub fn new(hub: Hub, core: Result<HubCore, String>) -> Self {
        Self { hub, core }
    }

    fn core(&self) -> Result<&HubCore, Status> {
        self.core.as_ref().map_err(|reason| calls::no_core(reason))
    }
}

#[tonic::async_trait]
impl pb::tau_server::Tau for TauApi {
    async fn get_status(
        &self,
        _request: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::GetStatusResponse>, Status> {
        let mut response = to_proto::hub_status::status(self.hub.status());
        response.services = to_proto::hub_status::services(self.hub.service_reports());
        response.channels = to_proto::hub_status::channels(&self.hub);
        if let Ok(core) = &self.core {
            calls::status_extras(core, &mut response);
        }
        Ok(Response::new(response))
    }

    async fn list_sessions(
        &self,
        request: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        calls::list_sessions(self.core()?, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn get_session(
        &self,
        request: Request<pb::GetSessionRequest>,
    ) -> Result<Response<pb::GetSessionResponse>, Status> {
        calls::get_session(self.core()?, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn open_session(
        &self,
        request: Request<pb::OpenSessionRequest>,
    ) -> Result<Response<pb::OpenSessionResponse>, Status> {
        calls::open_session(self.core()?, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn compact_session(
        &self,
        request: Request<pb::CompactSessionRequest>,
    ) -> Result<Response<pb::CompactSessionResponse>, Status> {
        calls::compact_session(self.core()?, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn switch_role(
        &self,
        request: Request<pb::SwitchRoleRequest>,
    ) -> Result<Response<pb::SwitchRoleResponse>, Status> {
        calls::switch_role(self.core()?, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn read_events(
        &self,
        request: Request<pb::ReadEventsRequest>,
    ) -> Result<Response<pb::ReadEventsResponse>, Status> {
        calls::read_events(self.core()?, request.into_inner())
            .await
            .map(Response::new)
    }

    type StartTurnStream = BoxStream<pb::StartTurnResponse>;

    async fn start_turn(
        &self,
        request: Request<pb::StartTurnRequest>,
    ) -> Result<Response<Self::StartTurnStream>, Status> {
        calls::start_turn(self.core()?, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn cancel_turn(
        &self,
        request: Request<pb::CancelTurnRequest>,
    ) -> Result<Response<pb::CancelTurnResponse>, Status> {
        calls::cancel_turn(self.core()?, request.into_inner())
            .await
            .map(Response::new)
    }

    type SubscribeStream = BoxStream<pb::SubscribeResponse>;

    async fn subscribe(
        &self,
        request: Request<pb::SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        calls::subscribe(self.core()?, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn list_pending_approvals(
        &self,
        request: Request<pb::ListPendingApprovalsRequest>,
    ) -> Result<Response<pb::ListPendingApprovalsResponse>, Status> {
        calls::list_pending(self.core()?, request.get_ref()).map(Response::new)
    }

    type WatchApprovalsStream = BoxStream<pb::PendingApproval>;

    async fn watch_approvals(
        &self,
        request: Request<pb::WatchApprovalsRequest>,
    ) -> Result<Response<Self::WatchApprovalsStream>, Status> {
        calls::watch_approvals(self.core()?, request.into_inner()).map(Response::new)
    }

    async fn decide_approval(
        &self,
        request: Request<pb::DecideApprovalRequest>,
    ) -> Result<Response<pb::DecideApprovalResponse>, Status> {
        calls::decide(self.core()?, request.get_ref())
            .await
            .map(Response::new)
    }

    async fn list_tools(
        &self,
        _request: Request<pb::ListToolsRequest>,
    ) -> Result<Response<pb::ListToolsResponse>, Status> {
        Ok(Response::new(calls::list_tools(self.core()?)))
    }

    async fn list_model_roles(
        &self,
        _request: Request<pb::ListModelRolesRequest>,
    ) -> Result<Response<pb::ListModelRolesResponse>, Status> {
        Ok(Response::new(calls::list_model_roles(self.core()?)))
    }

    async fn get_usage(
        &self,
        request: Request<pb::GetUsageRequest>,
    ) -> Result<Response<pb::GetUsageResponse>, Status> {
        Ok(Response::new(calls::get_usage(
            self.core()?,
            request.into_inner().days,
        )))
    }

    // Routines --------------------------------------------------------------------------------

    async fn list_routines(
        &self,
        _request: Request<pb::ListRoutinesRequest>,
    ) -> Result<Response<pb::ListRoutinesResponse>, Status> {
        routine_calls::list(self.core()?).map(Response::new)
    }

    async fn add_routine(
        &self,
        request: Request<pb::AddRoutineRequest>,
    ) -> Result<Response<pb::AddRoutineResponse>, Status> {
        routine_calls::add(self.core()?, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn remove_routine(
        &self,
        request: Request<pb::RemoveRoutineRequest>,
    ) -> Result<Response<pb::RemoveRoutineResponse>, Status> {
        routine_calls::remove(self.core()?, &request.into_inner().name).map(Response::new)
    }

    async fn pause_routine(
        &self,
        request: Request<pb::PauseRoutineRequest>,
    ) -> Result<Response<pb::PauseRoutineResponse>, Status> {
        let routine = routine_calls::pause(self.core()?, &request.into_inner().name, true)?;
        Ok(Response::new(pb::PauseRoutineResponse {
            routine: Some(routine),
        }))
    }

    async fn resume_routine(
        &self,
        request: Request<pb::ResumeRoutineRequest>,
    ) -> Result<Response<pb::ResumeRoutineResponse>, Status> {
        let routine = routine_calls::pause(self.core()?, &request.into_inner().name, false)?;
        Ok(Response::new(pb::ResumeRoutineResponse {
            routine: Some(routine),
        }))
    }

    async fn run_routine(
        &self,
        request: Request<pb::RunRoutineRequest>,
    ) -> Result<Response<pb::RunRoutineResponse>, Status> {
        routine_calls::run(self.core()?, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn routine_history(
        &self,
        request: Request<pb::RoutineHistoryRequest>,
    ) -> Result<Response<pb::RoutineHistoryResponse>, Status> {
        routine_calls::history(self.core()?, &request.into_inner().name).map(Response::new)
    }
}
