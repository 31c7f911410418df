//! The gRPC service in-process, on a hub built directly (no lifecycle, no TCP port): a caller of
//! another uid is refused over the real Unix socket, and a start that fails after the session
//! service started releases it; a subscriber that falls behind is cut off with the seq to resume
//! after.

// Test set-up: a failed step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tau_api::proto::v1::{self as pb, tau_client::TauClient};
use taud::host::{Hub, HubOptions, HubService};
use taud::hub::{ModelFactory, SharedModelFactory};
use taud::rpc::GrpcService;
use taud::testing::{FakeModel, FakeReply};
use tonic::Code;

struct Setup {
    hub: Hub,
    factory: Arc<dyn ModelFactory>,
    /// Declared last, so dropped last: what writes into it is gone first.
    tmp: crate::support::temp::TestDir,
}

fn hub_setup() -> Setup {
    let tmp = crate::support::temp::dir();
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
    let mut core = support::hub::setup(
        &setup.tmp.path().join("store"),
        "file",
        &model,
        support::hub::options(),
    );
    core.factory = Arc::clone(&setup.factory);
    taud::services::grpc_service(core)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_of_another_uid_is_refused_on_the_socket() {
    let setup = hub_setup();
    let own = nix::unistd::geteuid().as_raw();
    let service = service(&setup).with_socket_uid(own.wrapping_add(1));
    service.start(&setup.hub).await.unwrap();
    let mut client = TauClient::new(support::process::uds_channel(&setup.hub.paths().socket).await);
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
    let mut client = TauClient::new(support::process::uds_channel(&setup.hub.paths().socket).await);
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
    let deadline = Instant::now() + support::process::DEADLINE;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_falls_behind_gets_resource_exhausted_with_the_resume_trailer() {
    let setup = hub_setup();
    // Big events: a client that reads nothing fills its HTTP/2 window, so the hub's side of its
    // stream stops reading the bus and falls behind.
    let big = "x".repeat(30_000);
    let model = Arc::new(FakeModel::scripted(vec![FakeReply::deltas(vec![
        big.clone(
        );
        12
    ])]));
    let mut options = support::hub::options();
    options.subscriber_lag = 2;
    let core = support::hub::setup(&setup.tmp.path().join("store"), "file", &model, options);
    let service =
        taud::services::grpc_service(core).with_socket_uid(nix::unistd::geteuid().as_raw());
    service.start(&setup.hub).await.unwrap();
    let mut client = TauClient::new(support::process::uds_channel(&setup.hub.paths().socket).await);
    let id = support::api::new_session(&mut client, "terminal").await;
    let (mut slow, snapshot) = support::api::subscribe(&mut client, &id, None).await;
    let mut turn = client
        .start_turn(support::api::turn(&id, "count", "terminal"))
        .await
        .unwrap()
        .into_inner();
    // Read the turn stream until it ends or is cut off too; the turn runs to its end either way.
    while let Ok(Some(_)) = tokio::time::timeout(support::process::DEADLINE, turn.message())
        .await
        .unwrap()
    {}
    let mut last_seq = snapshot.last_seq;
    let status = loop {
        match tokio::time::timeout(support::process::DEADLINE, slow.message())
            .await
            .unwrap()
        {
            Ok(Some(message)) => match message.kind {
                Some(pb::subscribe_response::Kind::Event(event)) => {
                    assert_eq!(event.seq, last_seq + 1, "no gaps");
                    last_seq = event.seq;
                }
                other => panic!("not an event: {other:?}"),
            },
            Ok(None) => panic!("the stream ended without a cut-off"),
            Err(status) => break status,
        }
    };
    assert_eq!(status.code(), Code::ResourceExhausted, "{status}");
    let trailer = status
        .metadata()
        .get(taud::rpc::errors::RESUME_TRAILER)
        .expect("the resume trailer")
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(trailer, last_seq.to_string(), "the last seq the client got");
    assert!(
        status
            .message()
            .contains(&format!("after_seq = {last_seq}")),
        "{status}"
    );
    // Resuming after it gives the rest of the turn without gaps.
    let (mut resumed, _) = support::api::subscribe(&mut client, &id, Some(last_seq)).await;
    let rest = support::api::events_until_end(&mut resumed).await;
    assert_eq!(rest[0].seq, last_seq + 1);
    service.stop().await.unwrap();
}
