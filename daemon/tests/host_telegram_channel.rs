//! The Telegram channel under the real `taud`: configured with a token, the hub runs it against a
//! local stand-in for the Bot API and reports its state in `GET /status` and `GetStatus`; a 409
//! leaves it stopped with the error while the hub runs on; without `[component.telegram]` it says
//! so. The token never reaches the hub's log.

// Test set-up: a failed step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use support::process::{Install, get_status, uds_channel, wait_for};
use tau_api::proto::v1::{self as pb, tau_client::TauClient};

const TOKEN: &str = "777:HUB-test-token-SECRET";

#[derive(Clone, Default)]
struct Stand {
    conflict: Arc<AtomicBool>,
    polls: Arc<AtomicUsize>,
}

async fn answer(State(stand): State<Stand>, Path((_, method)): Path<(String, String)>) -> Response {
    if method.eq_ignore_ascii_case("getUpdates") {
        stand.polls.fetch_add(1, Ordering::SeqCst);
        if stand.conflict.load(Ordering::SeqCst) {
            let body = json!({"ok": false, "error_code": 409, "description": "Conflict: terminated by other getUpdates request"});
            return (StatusCode::CONFLICT, Json(body)).into_response();
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        return Json(json!({"ok": true, "result": []})).into_response();
    }
    Json(json!({"ok": true, "result": true})).into_response()
}

/// A Bot API stand-in on 127.0.0.1:0 on its own runtime thread; returns its base URL.
fn stand_in(stand: Stand) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let app = axum::Router::new()
                .route("/{segment}/{method}", axum::routing::post(answer))
                .with_state(stand);
            axum::serve(listener, app).await.unwrap();
        });
    });
    format!("http://{}", rx.recv().unwrap())
}

fn install_with(base: Option<&str>) -> Install {
    let telegram = base
        .map(|b| format!("[component.telegram]\napi_base = \"{b}\"\npoll_timeout_seconds = 1\n"))
        .unwrap_or_default();
    let mut install = Install::with_config(&format!("[hub]\nheartbeat_seconds = 1\n{telegram}"));
    install
        .extra_env
        .push(("TELEGRAM_BOT_TOKEN".into(), TOKEN.into()));
    install
}

fn channel_state(install: &Install) -> Option<(String, String)> {
    let status = get_status(install);
    let channel = status["channels"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == "telegram")?
        .clone();
    Some((
        channel["state"].as_str()?.to_owned(),
        channel["error"].as_str()?.to_owned(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_channel_runs_under_the_hub_and_reports_its_state() {
    let stand = Stand::default();
    let base = stand_in(stand.clone());
    let install = install_with(Some(&base));
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    wait_for("the channel polling, not paired", || {
        channel_state(&install).filter(|(s, _)| s == "not_paired")
    });
    wait_for("two polls", || {
        (stand.polls.load(Ordering::SeqCst) >= 2).then_some(())
    });
    let mut client = TauClient::new(uds_channel(&install.paths().socket).await);
    let status = client
        .get_status(pb::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    let channel = status
        .channels
        .iter()
        .find(|c| c.name == "telegram")
        .unwrap();
    assert_eq!(channel.state, "not_paired");
    assert_eq!(channel.restarts, 0);
    assert!(
        status
            .services
            .iter()
            .any(|s| s.name == "telegram" && s.state == "started")
    );
    let log = std::fs::read_to_string(install.data.join("logs/tau.log")).unwrap_or_default();
    assert!(
        !log.contains(TOKEN) && !hub.stderr().contains(TOKEN),
        "the token leaked"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_409_leaves_the_channel_stopped_with_the_error_and_the_hub_up() {
    let stand = Stand::default();
    stand.conflict.store(true, Ordering::SeqCst);
    let base = stand_in(stand.clone());
    let install = install_with(Some(&base));
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let (_, error) = wait_for("the channel stopped", || {
        channel_state(&install).filter(|(s, _)| s == "stopped")
    });
    assert!(error.contains("409"), "{error}");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(stand.polls.load(Ordering::SeqCst), 1, "no spinning on 409");
    let health: Value = support::process::get_json(install.port, "/health");
    assert!(health.is_object());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_its_table_the_channel_reports_not_configured() {
    let install = install_with(None);
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let (state, _) = wait_for("the channel's state", || channel_state(&install));
    assert_eq!(state, "not_configured");
}
