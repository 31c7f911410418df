//! Property tests of what reaches the gRPC server below the typed API: arbitrary bytes as the
//! request message of every `tau.v1.Tau` method (malformed protobuf, strings that are not UTF-8,
//! unknown fields, wrong wire types), a request over the message size limit, and any
//! `authorization` header on the TCP route. Nothing panics; a request that is not a valid
//! message is refused with a status and a message (INVALID_ARGUMENT "the message could not be
//! decoded as …", never INTERNAL: the caller's request was malformed, the hub is not broken; or
//! the API's own refusal), never touches
//! the disk, and the hub still answers GetStatus.
//!
//! `PROPTEST_CASES=N` runs N cases per property instead of the short default.

// Test set-up: a failed step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut};
use proptest::prelude::*;
use support::props::runner;
use tau_api::proto::v1::{self as pb, tau_client::TauClient};
use taud::host::{Hub, HubOptions, HubService};
use taud::rpc::GrpcService;
use taud::testing::FakeModel;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::Channel;
use tonic::{Code, Status};

const DEADLINE: Duration = Duration::from_secs(10);

/// Messages as raw bytes, both ways.
#[derive(Debug, Clone, Copy, Default)]
struct RawCodec;

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = Status;

    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = Vec<u8>;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        let mut out = vec![0; src.remaining()];
        src.copy_to_slice(&mut out);
        Ok(Some(out))
    }
}

const METHODS: [&str; 14] = [
    "GetStatus",
    "ListSessions",
    "GetSession",
    "OpenSession",
    "CompactSession",
    "SwitchRole",
    "ReadEvents",
    "StartTurn",
    "CancelTurn",
    "Subscribe",
    "ListPendingApprovals",
    "DecideApproval",
    "ListTools",
    "ListModelRoles",
];

/// A request body: arbitrary bytes, or a field of any number and wire type holding bytes that
/// are not UTF-8 (a string field then fails to decode).
fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..200),
        (
            1u8..16,
            0u8..6,
            proptest::collection::vec(any::<u8>(), 0..40)
        )
            .prop_map(|(field, wire, mut bytes)| {
                bytes.push(0xff);
                let mut out = vec![(field << 3) | wire];
                out.push(u8::try_from(bytes.len()).unwrap());
                out.extend(bytes);
                out
            }),
    ]
}

struct Fixture {
    store: std::path::PathBuf,
    hub: Hub,
    service: GrpcService,
    channel: Channel,
    /// Declared last, so dropped last: what writes into it is gone first.
    _tmp: crate::support::temp::TestDir,
}

async fn fixture() -> Fixture {
    let tmp = crate::support::temp::dir();
    let options = HubOptions::new(tmp.path().join("data"));
    let dir = options.paths().dir.clone();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let hub = Hub::new(options, None);
    let store = tmp.path().join("store");
    let model = Arc::new(FakeModel::demo());
    let core = support::hub::setup(&store, "file", &model, support::hub::options());
    let service =
        taud::services::grpc_service(core).with_socket_uid(nix::unistd::geteuid().as_raw());
    service.start(&hub).await.unwrap();
    let channel = support::process::uds_channel(&hub.paths().socket).await;
    let mut client = TauClient::new(channel.clone());
    support::api::new_session(&mut client, "terminal").await;
    Fixture {
        _tmp: tmp,
        store,
        hub,
        service,
        channel,
    }
}

fn entries(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut all: Vec<_> = std::fs::read_dir(dir)
        .map(|read| read.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    all.sort();
    all
}

/// Sends `body` as the request of `method`; the status it ended with (OK when it was taken).
async fn send(channel: Channel, method: &str, body: Vec<u8>) -> Status {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let path = format!("/tau.v1.Tau/{method}").parse().unwrap();
    let answer = grpc
        .server_streaming(tonic::Request::new(body), path, RawCodec)
        .await;
    match answer {
        Err(status) => status,
        Ok(response) => {
            let mut stream = response.into_inner();
            match stream.message().await {
                Ok(_) => Status::ok(""),
                Err(status) => status,
            }
        }
    }
}

#[test]
fn arbitrary_request_bytes_for_every_method_are_refused_cleanly() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let f = rt.block_on(fixture());
    let sessions = f.store.join("sessions");
    let result = runner(256).run(
        &(proptest::sample::select(&METHODS[..]), body()),
        |(method, body)| {
            rt.block_on(async {
                let before = entries(&sessions);
                let status = tokio::time::timeout(DEADLINE, send(f.channel.clone(), method, body))
                    .await
                    .map_err(|_| TestCaseError::fail("the call hung"))?;
                if status.code() != Code::Ok {
                    prop_assert!(
                        [
                            Code::InvalidArgument,
                            Code::NotFound,
                            Code::FailedPrecondition,
                            Code::ResourceExhausted,
                        ]
                        .contains(&status.code()),
                        "{:?}: {}",
                        status.code(),
                        status.message()
                    );
                    prop_assert!(!status.message().is_empty());
                    prop_assert_eq!(entries(&sessions), before, "a refusal touched the disk");
                }
                let mut client = TauClient::new(f.channel.clone());
                let alive =
                    tokio::time::timeout(DEADLINE, client.get_status(pb::GetStatusRequest {}))
                        .await
                        .map_err(|_| TestCaseError::fail("GetStatus hung afterwards"))?;
                prop_assert!(alive.is_ok(), "GetStatus afterwards: {:?}", alive.err());
                Ok(())
            })
        },
    );
    rt.block_on(f.service.stop()).unwrap();
    drop(f.hub);
    result.unwrap();
}

/// A request that is not protobuf is the caller's mistake: INVALID_ARGUMENT naming the message,
/// on a unary and a streaming method alike.
#[test]
fn an_undecodable_request_is_invalid_argument_not_internal() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let f = fixture().await;
        // Field 1 as a length-delimited string whose bytes are not UTF-8.
        let not_utf8 = vec![0x0a, 0x02, 0xff, 0xfe];
        for (method, message) in [
            ("GetSession", "GetSessionRequest"),
            ("Subscribe", "SubscribeRequest"),
        ] {
            let status = send(f.channel.clone(), method, not_utf8.clone()).await;
            assert_eq!(status.code(), Code::InvalidArgument, "{method}: {status:?}");
            assert!(
                status
                    .message()
                    .starts_with(&format!("the message could not be decoded as {message}:")),
                "{method}: {}",
                status.message()
            );
        }
        f.service.stop().await.unwrap();
    });
}

/// A caller's `grpc-timeout` holds on the socket: a Subscribe stream still open at its deadline
/// ends with DEADLINE_EXCEEDED from the hub (the client library enforces none on a stream), and
/// a call that finishes in time is untouched.
#[test]
fn a_streams_deadline_ends_it_with_deadline_exceeded() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let f = fixture().await;
        let mut client = TauClient::new(f.channel.clone());
        let id = support::api::new_session(&mut client, "terminal").await;
        let mut request = tonic::Request::new(pb::SubscribeRequest {
            session_id: id.clone(),
            after_seq: None,
            channel: "terminal".into(),
            stream_id: String::new(),
        });
        request.set_timeout(Duration::from_millis(400));
        let started = std::time::Instant::now();
        let mut stream = client.subscribe(request).await.unwrap().into_inner();
        let first = stream.message().await.unwrap().unwrap();
        assert!(matches!(
            first.kind,
            Some(pb::subscribe_response::Kind::Snapshot(_))
        ));
        let ended = tokio::time::timeout(DEADLINE, stream.message())
            .await
            .expect("the stream ends at its deadline")
            .unwrap_err();
        assert_eq!(ended.code(), Code::DeadlineExceeded, "{ended:?}");
        assert!(ended.message().contains("grpc-timeout"), "{ended:?}");
        assert!(started.elapsed() >= Duration::from_millis(400));
        let mut status = tonic::Request::new(pb::GetStatusRequest {});
        status.set_timeout(Duration::from_secs(5));
        client.get_status(status).await.unwrap();
        f.service.stop().await.unwrap();
    });
}

#[test]
fn a_request_over_the_message_size_limit_is_refused_and_the_hub_goes_on() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let f = fixture().await;
        let sessions = f.store.join("sessions");
        let before = entries(&sessions);
        let mut client = TauClient::new(f.channel.clone());
        let id = support::api::new_session(&mut client, "terminal").await;
        let before_turn = entries(&sessions.join(&id));
        let err = client
            .start_turn(support::api::turn(&id, &"z".repeat(5 << 20), "terminal"))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::OutOfRange, "{err}");
        assert!(err.message().contains("too large"), "{err}");
        assert_eq!(entries(&sessions.join(&id)), before_turn);
        assert_eq!(entries(&sessions).len(), before.len() + 1);
        client.get_status(pb::GetStatusRequest {}).await.unwrap();
        f.service.stop().await.unwrap();
    });
}

/// The TCP route's `authorization` check over any header value: only `Bearer <token>` (scheme
/// in any case, surrounding blanks trimmed) passes; the rest is refused as missing or wrong,
/// never a panic.
#[test]
fn the_bearer_check_lets_only_the_token_through_whatever_the_header() {
    use axum::http::HeaderValue;
    use taud::rpc::auth::{AuthError, check_bearer};
    let tmp = crate::support::temp::dir();
    let token = taud::host::token::ensure(&tmp.path().join("token")).unwrap();
    let secret = token.expose().to_owned();
    let header = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..80),
        (
            proptest::sample::select(vec!["Bearer", "bearer", "BEARER", "Basic", "Bearer:", ""]),
            "[ \t]{0,3}",
            any::<bool>(),
            proptest::collection::vec(any::<u8>(), 0..4),
        )
            .prop_map(move |(scheme, pad, real, noise)| {
                let mut value = format!("{scheme} {pad}").into_bytes();
                if real {
                    value.extend_from_slice(secret.as_bytes());
                }
                value.extend(noise);
                value
            }),
    ];
    let passed = std::cell::Cell::new(0usize);
    runner(512)
        .run(&header, |bytes| {
            let Ok(value) = HeaderValue::from_bytes(&bytes) else {
                return Ok(());
            };
            let result = check_bearer(&token, Some(&value));
            let expected = match bytes.iter().position(|b| *b == b' ') {
                Some(i) if bytes[..i].eq_ignore_ascii_case(b"bearer") => {
                    bytes[i + 1..].trim_ascii() == token.expose().as_bytes()
                }
                _ => false,
            };
            prop_assert_eq!(result.is_ok(), expected, "{:?}", value);
            passed.set(passed.get() + usize::from(expected));
            if let Err(error) = result {
                prop_assert!(
                    matches!(error, AuthError::MissingToken | AuthError::WrongToken),
                    "{error:?}"
                );
            }
            Ok(())
        })
        .unwrap();
    assert!(passed.get() > 0, "no case carried the token");
    assert!(check_bearer(&token, None).is_err());
}

/// A refusal that quotes a damaged record (a huge value of the wrong type, a manager name with a
/// line break) reaches the client as one line of bounded length, and the connection goes on: a
/// status too long for the client's header limit would arrive as a broken HTTP/2 stream.
#[test]
fn a_refusal_quoting_a_damaged_record_reaches_the_client_as_one_bounded_line() {
    use support::props::{ID, fill};
    use taud::rpc::errors::MAX_STATUS_MESSAGE;
    use taud::store::{Durability, FileSessionStore};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let huge = format!("{}\nline two", "x".repeat(70_000));
    let damages: [(&str, &str); 3] = [
        ("session.json", "/message_count"),
        (
            "agents/tau/agent.json",
            "/conversation_manager_state/__name__",
        ),
        ("meta.json", "/context"),
    ];
    rt.block_on(async {
        for (file, pointer) in damages {
            let f = fixture().await;
            let sessions = f.store.join("sessions");
            fill(&FileSessionStore::open(&sessions, Durability::NoSync).unwrap());
            let path = sessions.join(ID).join(file);
            let mut record: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            *record.pointer_mut(pointer).unwrap() = huge.clone().into();
            std::fs::write(&path, serde_json::to_vec(&record).unwrap()).unwrap();
            let mut client = TauClient::new(f.channel.clone());
            let err = client
                .open_session(pb::OpenSessionRequest {
                    target: Some(pb::open_session_request::Target::SessionId(ID.into())),
                    channel: "terminal".into(),
                    ..Default::default()
                })
                .await
                .unwrap_err();
            assert!(
                [Code::Unavailable, Code::FailedPrecondition].contains(&err.code()),
                "{file}: {:?} {}",
                err.code(),
                err.message()
            );
            assert!(
                err.message().len() <= MAX_STATUS_MESSAGE,
                "{file}: {}",
                err.message().len()
            );
            assert!(!err.message().contains('\n'), "{file}: {}", err.message());
            assert!(err.message().contains(ID), "{file}: {}", err.message());
            client.get_status(pb::GetStatusRequest {}).await.unwrap();
            f.service.stop().await.unwrap();
        }
    });
}
