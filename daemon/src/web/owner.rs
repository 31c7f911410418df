//! What the owner's `tau web pair | devices | revoke` call: routes on the hub's control port
//! (127.0.0.1 only, Host checked there), each needing the hub token (`authorization: Bearer`),
//! which only the owner's account can read.
//!
//! - `POST /web/pair` `{"name": NAME?}` → a one-time link, the code in its fragment (a fragment
//!   never reaches a server log or a Referer), good once and for [`PAIR_TTL`].
//! - `GET /web/devices` → the enrolled devices (name, enrolled, last seen; never a key).
//! - `POST /web/revoke` `{"name": NAME}` → the device removed, its sessions and streams ended.
//!
//! Invariants: nothing answers without the token; the device file is saved before revoke answers.

use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::WebState;
use super::device_auth::PAIR_TTL;
use super::device_store::check_name;
use super::signin::error;
use crate::host::{BearerToken, Hub, ServiceError, token};

#[derive(Deserialize, Default)]
struct PairRequest {
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct RevokeRequest {
    name: String,
}

fn authorized(token: &BearerToken, headers: &HeaderMap) -> bool {
    token
        .check_authorization(
            headers
                .get(header::AUTHORIZATION)
                .map(HeaderValue::as_bytes),
        )
        .is_ok()
}

fn unauthorized() -> Response {
    error(
        StatusCode::UNAUTHORIZED,
        "the hub token is needed (authorization: Bearer <TAU_DATA_DIR>/hub/token)",
    )
}

/// Adds the owner's routes to the hub's control port.
pub(super) fn add_routes(hub: &Hub, state: &Arc<WebState>) -> Result<(), ServiceError> {
    let bearer =
        token::ensure(&hub.paths().token_file).map_err(|e| ServiceError::Failed(e.to_string()))?;

    let (s, t) = (Arc::clone(state), bearer.clone());
    hub.add_route(
        Method::POST,
        "/web/pair",
        move |headers: HeaderMap, body: Bytes| {
            let (state, token) = (Arc::clone(&s), t.clone());
            async move {
                if !authorized(&token, &headers) {
                    return unauthorized();
                }
                pair(&state, &body)
            }
        },
    )?;

    let (s, t) = (Arc::clone(state), bearer.clone());
    hub.add_route(Method::GET, "/web/devices", move |headers: HeaderMap| {
        let (state, token) = (Arc::clone(&s), t.clone());
        async move {
            if !authorized(&token, &headers) {
                return unauthorized();
            }
            let devices: Vec<_> = state
                .devices()
                .all()
                .iter()
                .map(|d| {
                    json!({
                        "name": d.name,
                        "enrolled_at": d.enrolled_at,
                        "last_seen_at": d.last_seen_at,
                    })
                })
                .collect();
            Json(json!({"ok": true, "devices": devices})).into_response()
        }
    })?;

    let (s, t) = (Arc::clone(state), bearer);
    hub.add_route(
        Method::POST,
        "/web/revoke",
        move |headers: HeaderMap, body: Bytes| {
            let (state, token) = (Arc::clone(&s), t.clone());
            async move {
                if !authorized(&token, &headers) {
                    return unauthorized();
                }
                revoke(&state, &body).await
            }
        },
    )?;
    Ok(())
}

fn pair(state: &WebState, body: &[u8]) -> Response {
    let request: PairRequest = if body.is_empty() {
        PairRequest::default()
    } else {
        match serde_json::from_slice(body) {
            Ok(request) => request,
            Err(e) => return error(StatusCode::BAD_REQUEST, format!("a JSON body: {e}")),
        }
    };
    let now = Instant::now();
    let name = match request.name {
        Some(name) => {
            if let Err(e) = state.devices().check_new_name(&name) {
                return error(StatusCode::CONFLICT, e.to_string());
            }
            name
        }
        None => {
            let devices = state.devices();
            let mut name = devices.free_name();
            let mut n = 1;
            while state.auth.name_pending(&name, now) && n < 100 {
                n += 1;
                name = format!("{}-{n}", devices.free_name());
            }
            name
        }
    };
    if let Err(e) = check_name(&name) {
        return error(StatusCode::BAD_REQUEST, e.to_string());
    }
    match state.auth.issue_code(&name, now) {
        Ok(code) => Json(json!({
            "ok": true,
            "name": name,
            "url": format!("{}/#pair={code}", state.link_base),
            "expires_in_s": PAIR_TTL.as_secs(),
        }))
        .into_response(),
        Err(e) => error(StatusCode::CONFLICT, e.to_string()),
    }
}

async fn revoke(state: &WebState, body: &[u8]) -> Response {
    let request: RevokeRequest = match serde_json::from_slice(body) {
        Ok(request) => request,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("a JSON body with \"name\": {e}"),
            );
        }
    };
    let Some(device) = state.devices().remove(&request.name) else {
        return error(
            StatusCode::NOT_FOUND,
            format!("no device named {:?} is enrolled", request.name),
        );
    };
    // Sessions and streams end now, whether or not the file is written.
    state.auth.revoke(&device.id);
    let streams_ended = {
        let mut streams = state.streams();
        let before = streams.len();
        streams.retain(|_, (owner, _)| *owner != device.id);
        before - streams.len()
    };
    if let Err(e) = state.save_devices().await {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "{} was signed out, but the device file was not saved: {e}",
                device.name
            ),
        );
    }
    tracing::info!(device = %device.name, "web device revoked");
    Json(json!({"ok": true, "revoked": device.name, "streams_ended": streams_ended}))
        .into_response()
}
