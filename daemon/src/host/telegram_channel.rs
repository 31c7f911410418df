//! The Telegram channel as a hub service: when `[component.telegram]` is configured and
//! `TELEGRAM_BOT_TOKEN` is set, the hub runs `tau_telegram::run_channel` (one more client of its
//! own gRPC socket) as a supervised task, and reports its state in `GET /status` (`channels`),
//! `GetStatus`, `tau components` and `tau doctor`.
//!
//! Invariants:
//! - a crash of the channel (an error or a panic: the task's `JoinError`) never takes the hub
//!   down: it is logged and the channel restarts after a back-off (1 s doubling to 60 s, reset
//!   after a run that lasted [`STABLE_RUN`]);
//! - a 409 Conflict or a refused token is not retried: the state stays `stopped` with the error
//!   until the hub restarts;
//! - the token is never logged and never part of a state or error;
//! - stopping the service cancels the channel and waits for it (its tasks and attachments end).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;
use tau_api::config::{TELEGRAM_COMPONENT, TELEGRAM_TOKEN_VAR, TelegramConfig};
use tau_api::credentials::Secret;
use tau_api::installation::Installation;
use tau_api::lang::Lang;
use tau_telegram::state::StatePaths;
use tau_telegram::{ChannelOptions, ChannelPhase, run_channel};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Hub, HubService, ServiceError};

/// The service's name in `[components.hub] services` and `/status`.
pub const TELEGRAM_SERVICE: &str = "telegram";
/// The first wait before a restart.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait before a restart.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A run this long resets the back-off.
pub const STABLE_RUN: Duration = Duration::from_secs(60);

/// What starting the channel needs, read from the installation.
#[derive(Debug, Clone)]
pub struct TelegramLaunch {
    /// `[component.telegram]`, if configured.
    pub config: Option<TelegramConfig>,
    /// `TELEGRAM_BOT_TOKEN` (environment or `.env`).
    pub token: Option<Secret>,
    /// `<TAU_DATA_DIR>/telegram`.
    pub state: StatePaths,
    pub lang: Lang,
}

impl TelegramLaunch {
    /// The channel's settings of `installation`.
    pub fn from_installation(installation: &Installation) -> Self {
        Self {
            config: installation
                .config
                .component(TELEGRAM_COMPONENT)
                .map(TelegramConfig::from_table),
            token: installation
                .env
                .non_empty(TELEGRAM_TOKEN_VAR)
                .map(Secret::new),
            state: StatePaths::for_data_dir(&installation.paths.data_dir),
            lang: installation.settings.lang,
        }
    }
}

/// The channel's state as the hub reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChannelReport {
    /// `telegram`.
    pub name: String,
    /// `not_configured`, `no_token`, `starting`, `running`, `not_paired`, `backing_off` or
    /// `stopped`.
    pub state: String,
    /// The last error (backing off, stopped); empty otherwise.
    pub error: String,
    /// How many times the channel was restarted.
    pub restarts: u32,
}

#[derive(Debug)]
enum Supervised {
    NotConfigured,
    NoToken,
    Running(watch::Receiver<ChannelPhase>),
    BackingOff,
    Stopped,
}

#[derive(Debug)]
struct Status {
    state: Supervised,
    error: String,
    restarts: u32,
}

/// The hub service that runs and supervises the channel.
pub struct TelegramChannelService {
    launch: TelegramLaunch,
    status: Arc<Mutex<Status>>,
    running: Mutex<Option<(CancellationToken, JoinHandle<()>)>>,
}

impl TelegramChannelService {
    pub fn new(launch: TelegramLaunch) -> Self {
        let state = match (&launch.config, &launch.token) {
            (None, _) => Supervised::NotConfigured,
            (Some(_), None) => Supervised::NoToken,
            (Some(_), Some(_)) => Supervised::Stopped,
        };
        Self {
            launch,
            status: Arc::new(Mutex::new(Status {
                state,
                error: String::new(),
                restarts: 0,
            })),
            running: Mutex::new(None),
        }
    }

    /// The channel's state now.
    pub fn report(&self) -> ChannelReport {
        report(&self.status)
    }
}

fn report(status: &Mutex<Status>) -> ChannelReport {
    let status = status.lock().unwrap_or_else(PoisonError::into_inner);
    let state = match &status.state {
        Supervised::NotConfigured => "not_configured",
        Supervised::NoToken => "no_token",
        Supervised::Running(phase) => match *phase.borrow() {
            ChannelPhase::Starting => "starting",
            ChannelPhase::Running => "running",
            ChannelPhase::NotPaired => "not_paired",
        },
        Supervised::BackingOff => "backing_off",
        Supervised::Stopped => "stopped",
    };
    ChannelReport {
        name: TELEGRAM_SERVICE.to_owned(),
        state: state.to_owned(),
        error: status.error.clone(),
        restarts: status.restarts,
    }
}

#[async_trait::async_trait]
impl HubService for TelegramChannelService {
    fn name(&self) -> &str {
        TELEGRAM_SERVICE
    }

    async fn start(&self, hub: &Hub) -> Result<(), ServiceError> {
        let status = Arc::clone(&self.status);
        hub.add_status_source(move || {
            let mut map = serde_json::Map::new();
            let channels = serde_json::to_value(vec![report(&status)]).unwrap_or_default();
            map.insert("channels".to_owned(), channels);
            map
        });
        let (Some(config), Some(token)) = (&self.launch.config, &self.launch.token) else {
            if self.launch.config.is_some() {
                tracing::warn!(
                    "[component.telegram] is configured but {TELEGRAM_TOKEN_VAR} is not set: the Telegram channel does not run"
                );
            }
            return Ok(());
        };
        let options = ChannelOptions {
            config: config.clone(),
            token: token.clone(),
            state: self.launch.state.clone(),
            socket: hub.paths().socket.clone(),
            lang: self.launch.lang,
            hub_call_timeout: tau_telegram::hub_link::CALL_TIMEOUT,
        };
        let stop = CancellationToken::new();
        let task = tokio::spawn(supervise(options, Arc::clone(&self.status), stop.clone()));
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
            if let Err(e) = task.await {
                tracing::error!("the Telegram channel's supervisor ended badly: {e}");
            }
        }
        Ok(())
    }
}

/// Runs the channel until `stop`, restarting it after a crash with back-off.
async fn supervise(options: ChannelOptions, status: Arc<Mutex<Status>>, stop: CancellationToken) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        let (phase_tx, phase_rx) = watch::channel(ChannelPhase::Starting);
        set(&status, Supervised::Running(phase_rx), None);
        let began = Instant::now();
        let run = tokio::spawn(run_channel(options.clone(), phase_tx, stop.child_token()));
        let outcome = run.await;
        if stop.is_cancelled() {
            set(&status, Supervised::Stopped, Some(String::new()));
            return;
        }
        let error = match outcome {
            Ok(Ok(())) => "the channel ended on its own".to_owned(),
            Ok(Err(e)) if e.is_final() => {
                tracing::error!("the Telegram channel stopped and is not restarted: {e}");
                set(&status, Supervised::Stopped, Some(e.to_string()));
                return;
            }
            Ok(Err(e)) => e.to_string(),
            Err(join) if join.is_panic() => "the channel panicked".to_owned(),
            Err(join) => format!("the channel's task ended: {join}"),
        };
        if began.elapsed() >= STABLE_RUN {
            backoff = FIRST_BACKOFF;
        }
        tracing::warn!(
            backoff_ms = backoff.as_millis() as u64,
            "the Telegram channel failed and restarts: {error}"
        );
        set(&status, Supervised::BackingOff, Some(error));
        tokio::select! {
            () = stop.cancelled() => {
                set(&status, Supervised::Stopped, None);
                return;
            }
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
        status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .restarts += 1;
    }
}

fn set(status: &Mutex<Status>, state: Supervised, error: Option<String>) {
    let mut status = status.lock().unwrap_or_else(PoisonError::into_inner);
    status.state = state;
    if let Some(error) = error {
        status.error = error;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn launch(dir: &std::path::Path) -> TelegramLaunch {
        TelegramLaunch {
            config: Some(TelegramConfig::default()),
            token: Some(Secret::new("1:secret")),
            state: StatePaths::in_dir(dir.join("telegram")),
            lang: Lang::En,
        }
    }

    #[test]
    fn without_a_table_or_a_token_it_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let mut none = launch(dir.path());
        none.config = None;
        assert_eq!(
            TelegramChannelService::new(none).report().state,
            "not_configured"
        );
        let mut no_token = launch(dir.path());
        no_token.token = None;
        assert_eq!(
            TelegramChannelService::new(no_token).report().state,
            "no_token"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_that_fails_backs_off_and_restarts_without_ending_the_supervisor() {
        let dir = tempfile::tempdir().unwrap();
        let launch = launch(dir.path());
        let options = ChannelOptions {
            config: launch.config.clone().unwrap(),
            token: launch.token.clone().unwrap(),
            state: launch.state.clone(),
            // Nobody listens here: every run fails to reach the hub.
            socket: dir.path().join("missing.sock"),
            lang: Lang::En,
            hub_call_timeout: tau_telegram::hub_link::CALL_TIMEOUT,
        };
        let status = Arc::new(Mutex::new(Status {
            state: Supervised::Stopped,
            error: String::new(),
            restarts: 0,
        }));
        let stop = CancellationToken::new();
        let task = tokio::spawn(supervise(options, Arc::clone(&status), stop.clone()));
        let mut seen_backing_off = false;
        for _ in 0..200 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = report(&status);
            seen_backing_off |= now.state == "backing_off";
            if now.restarts >= 2 {
                break;
            }
        }
        let now = report(&status);
        assert!(seen_backing_off);
        assert!(now.restarts >= 2, "{now:?}");
        assert!(now.error.contains("no hub answers"), "{now:?}");
        assert!(!now.error.contains("secret"));
        stop.cancel();
        task.await.unwrap();
        assert_eq!(report(&status).state, "stopped");
    }
}
