//! The hub's life: crash check, `state.json`, services started in order, a heartbeat until a stop
//! request, services stopped in reverse under a deadline, `stopped_at`.
//!
//! Invariants: the caller holds the [`HubLock`] for the whole run; idle, the only wake-up is the
//! heartbeat timer (no polling); a stop finishes within [`STOP_DEADLINE`] plus one state write,
//! and a second stop request stops waiting for services at once; `stopped_at` is written only
//! here, after the services stopped.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};

use super::crash::{self, CrashError};
use super::files::remove_if_exists;
use super::handle::{Hub, HubService};
use super::lock::HubLock;
use super::service::{BuildOutcome, ServiceRegistry};
use super::settings::HubOptions;
use super::state::{self, StateError};
use tau_api::components::HubServiceReport;

/// How long one service may take to start before it is skipped.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long stopping all services may take.
pub const STOP_DEADLINE: Duration = Duration::from_secs(10);

/// A request to stop the hub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopRequest {
    /// Why (e.g. "SIGTERM"), for the log.
    pub reason: String,
}

/// The hub could not run or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// The crash check could not record a crash.
    #[error(transparent)]
    Crash(#[from] CrashError),
    /// `state.json` could not be written.
    #[error(transparent)]
    State(#[from] StateError),
}

/// Stop requests from SIGTERM and SIGINT (each signal is one request). Call inside a runtime,
/// before start-up work, so an early signal is not lost.
pub fn stop_on_signals() -> io::Result<mpsc::Receiver<StopRequest>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        loop {
            let reason = tokio::select! {
                Some(()) = term.recv() => "SIGTERM",
                Some(()) = int.recv() => "SIGINT",
                else => break,
            };
            let request = StopRequest {
                reason: reason.to_owned(),
            };
            if tx.send(request).await.is_err() {
                break;
            }
        }
    });
    Ok(rx)
}

/// Runs the hub until a stop request arrives (or every sender is dropped).
pub async fn run(
    options: HubOptions,
    _lock: &HubLock,
    registry: &ServiceRegistry,
    mut stop: mpsc::Receiver<StopRequest>,
) -> Result<(), HubError> {
    let paths = options.paths();
    let check = crash::check(&paths)?;
    let hub = Hub::new(options, check.last_crash);
    state::write_running(&hub).await?;
    tracing::info!(pid = hub.pid(), "hub started");

    let mut stop_requested = None;
    for outcome in registry.build_all(hub.options()) {
        let service = match outcome {
            BuildOutcome::Built(service) => service,
            BuildOutcome::NotBuilt(report) => {
                hub.record_service(report);
                continue;
            }
        };
        if stop_requested.is_none()
            && let Ok(request) = stop.try_recv()
        {
            stop_requested = Some(request);
        }
        if stop_requested.is_some() {
            hub.record_service(HubServiceReport::skipped(
                service.name(),
                "the hub was asked to stop before it started",
            ));
            continue;
        }
        start_service(&hub, service).await;
    }
    hub.mark_ready();
    if let Err(e) = state::write_running(&hub).await {
        tracing::warn!("{e}");
    }

    let request = match stop_requested {
        Some(request) => Some(request),
        None => beat_until_stop(&hub, &mut stop).await,
    };
    match request {
        Some(request) => tracing::info!(reason = %request.reason, "hub stopping"),
        None => tracing::info!("hub stopping: no one can ask it to stop any more"),
    }
    stop_services(&hub, &mut stop).await;

    if let Err(e) = state::write_stopped(&hub).await {
        let reason = format!("could not record a clean stop: {e}");
        if let Err(note) = crash::write_note(&paths.crash_file, &reason) {
            tracing::error!("{note}");
        }
        return Err(e.into());
    }
    if let Err(e) = remove_if_exists(&paths.crash_file) {
        tracing::warn!("cannot remove {}: {e}", paths.crash_file.display());
    }
    tracing::info!("hub stopped");
    Ok(())
}

async fn beat_until_stop(hub: &Hub, stop: &mut mpsc::Receiver<StopRequest>) -> Option<StopRequest> {
    let period = hub.options().heartbeat;
    let mut ticks = tokio::time::interval_at(Instant::now() + period, period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            request = stop.recv() => return request,
            _ = ticks.tick() => {
                if let Err(e) = state::heartbeat(hub).await {
                    tracing::warn!("heartbeat: {e}");
                }
            }
        }
    }
}

async fn start_service(hub: &Hub, service: Arc<dyn HubService>) {
    let name = service.name().to_owned();
    let routes_before = hub.route_keys();
    let sources_before = hub.status_source_count();
    let failure = match tokio::time::timeout(START_TIMEOUT, service.start(hub)).await {
        Ok(Ok(())) => {
            tracing::info!(service = %name, "hub service started");
            hub.record_service(HubServiceReport::started(name));
            hub.push_started(service);
            return;
        }
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("did not start within {}s", START_TIMEOUT.as_secs()),
    };
    tracing::error!(service = %name, "hub service failed to start and is skipped: {failure}");
    hub.record_service(HubServiceReport::failed(
        name,
        format!("failed to start: {failure}"),
    ));
    let added: Vec<_> = hub
        .route_keys()
        .into_iter()
        .filter(|k| !routes_before.contains(k))
        .collect();
    hub.remove_routes(&added);
    hub.truncate_status_sources(sources_before);
}

async fn stop_services(hub: &Hub, stop: &mut mpsc::Receiver<StopRequest>) {
    let deadline = Instant::now() + STOP_DEADLINE;
    let mut started = hub.take_started();
    while let Some(service) = started.pop() {
        let name = service.name().to_owned();
        tokio::select! {
            result = tokio::time::timeout_at(deadline, service.stop()) => match result {
                Ok(Ok(())) => tracing::info!(service = %name, "hub service stopped"),
                Ok(Err(e)) => tracing::warn!(service = %name, "hub service failed to stop: {e}"),
                Err(_) => tracing::warn!(service = %name, "hub service did not stop before the deadline"),
            },
            Some(request) = stop.recv() => {
                tracing::warn!(reason = %request.reason, "second stop request: not waiting for the remaining services");
                return;
            }
        }
    }
}
