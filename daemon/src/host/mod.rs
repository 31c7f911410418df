//! The hub lifecycle: one hub per machine (a flock), `state.json` refreshed every heartbeat,
//! crash reports for a hub that died, hub services (the control API, the gRPC server, later
//! channels such as Telegram, supervised) started in order and stopped in reverse, and the JSON control API.
//!
//! Invariants: this module knows nothing of tonic or prost (the gRPC service lives in
//! `crate::rpc` and reaches the TCP port through [`Hub::mount_grpc`]); every file it writes is in
//! `<TAU_DATA_DIR>/hub` (0700), 0600 and written atomically; at every start `file_modes` puts the
//! hub's own files elsewhere in the data directory back to 0700/0600 and names each it fixed.

pub mod control;
pub mod crash;
pub mod file_modes;
pub mod files;
mod handle;
pub mod lifecycle;
pub mod lock;
pub mod routes;
pub mod service;
pub mod settings;
pub mod snapshot;
pub mod state;
#[cfg(feature = "hub")]
pub mod telegram_channel;
pub mod token;

pub use control::{CONTROL_API, ControlApi};
pub use handle::{GrpcMounted, Hub, HubService, ServiceError};
pub use lifecycle::{HubError, STOP_DEADLINE, StopRequest, run, stop_on_signals};
pub use lock::{HubLock, LockError};
pub use routes::{RouteError, RouteHandler};
pub use service::{BuildOutcome, ServiceFactory, ServiceRegistry};
pub use settings::{DEFAULT_CONTROL_PORT, DEFAULT_HEARTBEAT, HubOptions, OptionsError};
pub use snapshot::HubStatus;
#[cfg(feature = "hub")]
pub use telegram_channel::{
    ChannelReport, TELEGRAM_SERVICE, TelegramChannelService, TelegramLaunch,
};
pub use token::{BearerToken, TokenError};
