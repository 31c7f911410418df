//! Hub services in-process: start order and reverse stop, a service that fails to build or start
//! is skipped (and what it added is taken back), `find_service` sees only started services, routes
//! are additive only, and `[components.hub] services` picks what runs.

// Test services outside #[test] functions: a poisoned lock must fail the test loudly.
#![allow(clippy::unwrap_used)]

use crate::support;
use support::process as common;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use axum::http::Method;
use taud::host::{
    CONTROL_API, ControlApi, Hub, HubLock, HubOptions, HubService, RouteError, ServiceError,
    ServiceRegistry, StopRequest,
};
use tokio::sync::mpsc;

type Log = Arc<Mutex<Vec<String>>>;

/// What a test service does when it starts.
#[derive(Clone, Copy)]
enum Behaviour {
    Ok,
    Fail,
    /// Adds `GET /mine-<name>` and `GET /shared`.
    AddRoutes,
}

struct Probe {
    name: String,
    behaviour: Behaviour,
    log: Log,
}

#[async_trait]
impl HubService for Probe {
    fn name(&self) -> &str {
        &self.name
    }

    async fn start(&self, hub: &Hub) -> Result<(), ServiceError> {
        self.log
            .lock()
            .unwrap()
            .push(format!("start {}", self.name));
        match self.behaviour {
            Behaviour::Ok => Ok(()),
            Behaviour::Fail => Err(ServiceError::Failed("refuses to start".into())),
            Behaviour::AddRoutes => {
                let name = self.name.clone();
                hub.add_status_source(move || {
                    let mut m = serde_json::Map::new();
                    m.insert(name.clone(), serde_json::json!({"up": true}));
                    m
                });
                hub.add_route(Method::GET, &format!("/mine-{}", self.name), || async {
                    "mine"
                })?;
                hub.add_route(Method::GET, "/shared", || async { "shared" })?;
                Ok(())
            }
        }
    }

    async fn stop(&self) -> Result<(), ServiceError> {
        self.log.lock().unwrap().push(format!("stop {}", self.name));
        Ok(())
    }
}

/// Registered last: once the hub lists it as started, every earlier start has finished.
struct Sentinel {
    hub: Arc<Mutex<Option<Hub>>>,
}

const SENTINEL: &str = "sentinel";

#[async_trait]
impl HubService for Sentinel {
    fn name(&self) -> &str {
        SENTINEL
    }

    async fn start(&self, hub: &Hub) -> Result<(), ServiceError> {
        *self.hub.lock().unwrap() = Some(hub.clone());
        Ok(())
    }

    async fn stop(&self) -> Result<(), ServiceError> {
        Ok(())
    }
}

struct Harness {
    log: Log,
    registry: ServiceRegistry,
}

impl Harness {
    fn new() -> Self {
        Self {
            log: Log::default(),
            registry: ServiceRegistry::new(),
        }
    }

    fn add(&mut self, name: &str, behaviour: Behaviour) -> &mut Self {
        let (log, name) = (self.log.clone(), name.to_owned());
        self.registry.register(name.clone(), move |_| {
            Ok(Arc::new(Probe {
                name: name.clone(),
                behaviour,
                log: log.clone(),
            }))
        });
        self
    }

    /// Runs the hub with `options`, calls `inspect` once every service has started (the names
    /// it lists end with the sentinel), then stops it and returns the start/stop log.
    async fn run(mut self, options: HubOptions, inspect: impl FnOnce(&Hub)) -> Vec<String> {
        let sentinel_hub: Arc<Mutex<Option<Hub>>> = Arc::default();
        let for_factory = sentinel_hub.clone();
        self.registry.register(SENTINEL, move |_| {
            Ok(Arc::new(Sentinel {
                hub: for_factory.clone(),
            }))
        });
        let lock = HubLock::acquire(&options.paths()).unwrap();
        let (stop, requests) = mpsc::channel(4);
        let Harness { log, registry, .. } = self;
        let runner =
            tokio::spawn(async move { taud::host::run(options, &lock, &registry, requests).await });
        let hub = tokio::time::timeout(common::DEADLINE, async {
            loop {
                let found = sentinel_hub.lock().unwrap().clone();
                if let Some(hub) = found.filter(|h| h.find_service(SENTINEL).is_some()) {
                    return hub;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        })
        .await
        .unwrap();
        inspect(&hub);
        stop.send(StopRequest {
            reason: "test".into(),
        })
        .await
        .unwrap();
        runner.await.unwrap().unwrap();
        assert!(hub.find_service(SENTINEL).is_none());
        assert!(
            hub.started_services().is_empty(),
            "after stop nothing is found"
        );
        log.lock().unwrap().clone()
    }
}

fn options(tmp: &crate::support::temp::TestDir) -> HubOptions {
    let mut o = HubOptions::new(tmp.path().join("data"));
    o.control_port = 0;
    o
}

#[tokio::test]
async fn services_start_in_order_and_stop_in_reverse_and_failures_are_skipped() {
    let tmp = crate::support::temp::dir();
    let mut h = Harness::new();
    h.add("a", Behaviour::Ok)
        .add("broken", Behaviour::Fail)
        .add("b", Behaviour::Ok);
    h.registry
        .register("unbuildable", |_| Err(ServiceError::Failed("no".into())));
    h.add("c", Behaviour::Ok);
    let log = h
        .run(options(&tmp), |hub| {
            assert_eq!(hub.started_services(), ["a", "b", "c", SENTINEL]);
            assert!(hub.find_service("a").is_some());
            assert!(hub.find_service("broken").is_none(), "failed to start");
            assert!(hub.find_service("unbuildable").is_none());
            assert!(hub.find_service_as::<Probe>("b").is_some());
            assert!(
                hub.find_service_as::<ControlApi>("b").is_none(),
                "wrong type"
            );
        })
        .await;
    assert_eq!(
        log,
        [
            "start a",
            "start broken",
            "start b",
            "start c",
            "stop c",
            "stop b",
            "stop a"
        ]
    );
    let state = std::fs::read_to_string(options(&tmp).paths().state_file).unwrap();
    assert!(state.contains("stopped_at"), "{state}");
}

#[tokio::test]
async fn a_conflicting_route_fails_the_later_service_and_its_additions_are_taken_back() {
    let tmp = crate::support::temp::dir();
    let mut h = Harness::new();
    h.add("first", Behaviour::AddRoutes)
        .add("second", Behaviour::AddRoutes);
    h.run(options(&tmp), |hub| {
        assert_eq!(hub.started_services(), ["first", SENTINEL]);
        assert!(hub.route(&Method::GET, "/mine-first").is_some());
        assert!(hub.route(&Method::GET, "/shared").is_some());
        assert!(
            hub.route(&Method::GET, "/mine-second").is_none(),
            "the failed service's route is removed"
        );
        let status = hub.status_json();
        assert_eq!(status["first"]["up"], true);
        assert!(
            status.get("second").is_none(),
            "its status source is removed"
        );
        assert_eq!(
            hub.add_route(Method::GET, "/shared", || async { "again" }),
            Err(RouteError::Exists {
                method: Method::GET,
                path: "/shared".into()
            })
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_api_routes_cannot_be_replaced() {
    let tmp = crate::support::temp::dir();
    let mut h = Harness::new();
    h.registry
        .register(CONTROL_API, |_| Ok(Arc::new(ControlApi::new())));
    h.add("probe", Behaviour::Ok);
    h.run(options(&tmp), |hub| {
        assert!(hub.find_service_as::<ControlApi>(CONTROL_API).is_some());
        assert!(hub.listening_port().is_some_and(|p| p != 0));
        for path in ["/health", "/status"] {
            assert!(matches!(
                hub.add_route(Method::GET, path, || async { "mine now" }),
                Err(RouteError::Exists { .. })
            ));
        }
        hub.add_route(Method::POST, "/probe/send", || async { "sent" })
            .unwrap();
        let port = hub.listening_port().unwrap();
        let (code, body) =
            std::thread::spawn(move || common::http_get(port, "/health", "localhost").unwrap())
                .join()
                .unwrap();
        assert_eq!(code, 200, "{body}");
    })
    .await;
}

#[tokio::test]
async fn the_enabled_list_picks_services() {
    let tmp = crate::support::temp::dir();
    let mut h = Harness::new();
    h.add("a", Behaviour::Ok).add("b", Behaviour::Ok);
    let mut o = options(&tmp);
    o.services = vec!["b".into(), "not-installed".into(), SENTINEL.into()];
    let log = h
        .run(o, |hub| assert_eq!(hub.started_services(), ["b", SENTINEL]))
        .await;
    assert_eq!(log, ["start b", "stop b"]);
}

#[tokio::test]
async fn status_lists_each_service_as_started_skipped_or_failed_with_its_error() {
    let tmp = crate::support::temp::dir();
    let mut h = Harness::new();
    h.add("a", Behaviour::Ok)
        .add("broken", Behaviour::Fail)
        .add("off", Behaviour::Ok);
    h.registry.register("unbuildable", |_| {
        Err(ServiceError::Failed("no token".into()))
    });
    let mut o = options(&tmp);
    o.services = vec![
        "a".into(),
        "broken".into(),
        "unbuildable".into(),
        SENTINEL.into(),
    ];
    h.run(o, |hub| {
        let status = hub.status_json();
        let services = status["services"].as_array().unwrap();
        let got: Vec<(&str, &str, Option<&str>)> = services
            .iter()
            .map(|s| {
                (
                    s["name"].as_str().unwrap(),
                    s["state"].as_str().unwrap(),
                    s.get("error").and_then(|e| e.as_str()),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("a", "started", None),
                (
                    "broken",
                    "failed",
                    Some("failed to start: refuses to start")
                ),
                ("off", "skipped", None),
                ("unbuildable", "failed", Some("failed to build: no token")),
                (SENTINEL, "started", None),
            ]
        );
        assert_eq!(services[2]["reason"], "not in [components.hub] services");
        let reports = tau_api::components::reports_from_status(&status).unwrap();
        assert_eq!(reports, hub.service_reports());
    })
    .await;
}
