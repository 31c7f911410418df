//! The routine calls of `tau.v1.Tau`: each request read by `super::from_proto`, the hub asked,
//! the answer written by `super::to_proto::routines`.
//!
//! Invariant: no translation and no business logic here.

use tau_api::proto::v1 as pb;
use tonic::Status;

use super::from_proto;
use super::to_proto::routines::{firing, routine};
use crate::hub::HubCore;

pub fn list(core: &HubCore) -> Result<pb::ListRoutinesResponse, Status> {
    Ok(pb::ListRoutinesResponse {
        routines: core.list_routines()?.iter().map(routine).collect(),
    })
}

pub async fn add(
    core: &HubCore,
    request: pb::AddRoutineRequest,
) -> Result<pb::AddRoutineResponse, Status> {
    let view = core.add_routine(from_proto::add_routine(request)?).await?;
    Ok(pb::AddRoutineResponse {
        routine: Some(routine(&view)),
    })
}

pub fn remove(core: &HubCore, name: &str) -> Result<pb::RemoveRoutineResponse, Status> {
    core.remove_routine(name)?;
    Ok(pb::RemoveRoutineResponse {})
}

pub fn pause(core: &HubCore, name: &str, paused: bool) -> Result<pb::Routine, Status> {
    let view = core.pause_routine(name, paused)?;
    Ok(routine(&view))
}

pub async fn run(
    core: &HubCore,
    request: pb::RunRoutineRequest,
) -> Result<pb::RunRoutineResponse, Status> {
    let run = core
        .run_routine(&request.name, &request.session_id, &request.channel)
        .await?;
    let (detail, succeeded) = run
        .result
        .map(|r| (r.detail, r.succeeded))
        .unwrap_or_default();
    Ok(pb::RunRoutineResponse {
        firing: run.firing,
        detail,
        succeeded,
    })
}

pub fn history(core: &HubCore, name: &str) -> Result<pb::RoutineHistoryResponse, Status> {
    Ok(pb::RoutineHistoryResponse {
        firings: core.routine_history(name)?.iter().map(firing).collect(),
    })
}
