//! The gRPC service in-process, on a hub built directly (no lifecycle, no TCP port): a caller of
//! another uid is refused over the real Unix socket, and a start that fails after the session
//! service started releases it.

// Test set-up: a failed step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod hub_common;
mod hubcore_common;

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tau_api::proto::v1::{self as pb, tau_client::TauClient};
use taud::hub::{Hub, HubOptions, HubService};
use taud::hubcore::{ModelFactory, SharedModelFactory};
use taud::rpc::GrpcService;
use taud::testing::FakeModel;
use tonic::Code;

struct Setup {
    tmp: tempfile::TempDir,
    hub: Hub,
    factory: Arc<dyn ModelFactory>,
}

fn hub_setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let options = HubOptions::new(tmp.path().join("data"));
    let dir = options.paths().dir.clone();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let factory: Arc<dyn ModelFactory> = Arc::new(SharedModelFactory(
        Arc::new(FakeModel::scripted(vec![])) as _,
    ));
    Setup {
        hub: Hub::new(options, None),
        factory,
        tmp,
    }
}

fn service(setup: &Setup) -> GrpcService {
    let model = Arc::new(FakeModel::scripted(vec![]));
    let mut core = hubcore_common::setup(
        &setup.tmp.path().join("store"),
        "file",
        &model,
        hubcore_common::options(),
    );
    core.factory = Arc::clone(&setup.factory);
    GrpcService::with_core(core)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_of_another_uid_is_refused_on_the_socket() {
    let setup = hub_setup();
    let own = nix::unistd::geteuid().as_raw();
    let service = service(&setup).with_socket_uid(own.wrapping_add(1));
    service.start(&setup.hub).await.unwrap();
    let mut client = TauClient::new(hub_common::uds_channel(&setup.hub.paths().socket).await);
    let err = client
        .get_status(pb::GetStatusRequest {})
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err}");
    assert!(err.message().contains(&format!("uid {own}")), "{err}");
    let err = client
        .list_sessions(pb::ListSessionsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err}");
    service.stop().await.unwrap();

    // The same service with the caller's own uid answers.
    let service = service_for_own_uid(&setup);
    service.start(&setup.hub).await.unwrap();
    let mut client = TauClient::new(hub_common::uds_channel(&setup.hub.paths().socket).await);
    client.get_status(pb::GetStatusRequest {}).await.unwrap();
    service.stop().await.unwrap();
}

fn service_for_own_uid(setup: &Setup) -> GrpcService {
    service(setup).with_socket_uid(nix::unistd::geteuid().as_raw())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_that_cannot_listen_stops_the_session_service_it_started() {
    let setup = hub_setup();
    let baseline = Arc::strong_count(&setup.factory);
    // A regular file where the socket goes: binding is refused.
    std::fs::write(&setup.hub.paths().socket, "not a socket").unwrap();
    let service = service(&setup);
    let held = Arc::strong_count(&setup.factory);
    assert_eq!(held, baseline + 1, "the service's setup holds the factory");
    let err = service.start(&setup.hub).await.unwrap_err();
    assert!(err.to_string().contains("cannot listen"), "{err}");
    // The core (and its reaper task) let go of the factory, store and all.
    let deadline = Instant::now() + hub_common::DEADLINE;
    while Arc::strong_count(&setup.factory) != held {
        assert!(
            Instant::now() < deadline,
            "the session service still runs: {} holders",
            Arc::strong_count(&setup.factory)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(setup.hub.paths().socket.is_file(), "the file is left alone");
}
