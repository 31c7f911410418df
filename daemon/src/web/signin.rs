//! Enrolment and sign-in: a browser registers its public key with a one-time code, then signs a
//! fresh challenge (bound to the page's origin) for a session cookie; and the one check every
//! other request makes ([`signed_in`]).
//!
//! Invariants: the cookie is `HttpOnly; SameSite=Strict; Path=/` (and `Secure`, as
//! `__Host-tau_web`, under TLS), its value a random token the page never sees; the only way to a
//! cookie is [`login`], which checks the enrolled key's signature over
//! `tau-web-login\n<origin>\n<challenge>`; a signed-in request is refused as soon as its device is
//! revoked; answers never carry a token in a URL or a body the page could keep.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::WebState;
use super::device_auth::{is_public_key, random_hex, signed_message, verify};
use super::device_store::Device;
use super::guard::CheckedHost;
use super::texts;

/// A JSON error answer.
pub(super) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"ok": false, "error": message.into()}))).into_response()
}

fn cookie_name(state: &WebState) -> &'static str {
    if state.tls {
        "__Host-tau_web"
    } else {
        "tau_web"
    }
}

fn cookie_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (key, value) = pair.trim().split_once('=')?;
            (key == name).then_some(value)
        })
}

/// The device a request is signed in as, and its session.
#[derive(Debug, Clone)]
pub(super) struct SignedIn {
    pub device_id: String,
    pub name: String,
    /// When the session's cookie stops working.
    pub until: Instant,
    /// Cancelled when the session is signed out or its device revoked.
    pub ended: CancellationToken,
}

/// A request that is not signed in (a 401 answer).
#[derive(Debug, Clone, Copy)]
pub(super) struct NotSignedIn;

impl IntoResponse for NotSignedIn {
    fn into_response(self) -> Response {
        error(StatusCode::UNAUTHORIZED, "not signed in")
    }
}

/// The signed-in device of a request.
pub(super) fn signed_in(state: &WebState, headers: &HeaderMap) -> Result<SignedIn, NotSignedIn> {
    let token = cookie_value(headers, cookie_name(state)).ok_or(NotSignedIn)?;
    let session = state
        .auth
        .session(token, Instant::now())
        .ok_or(NotSignedIn)?;
    let devices = state.devices();
    let device = devices.by_id(&session.device_id).ok_or(NotSignedIn)?;
    Ok(SignedIn {
        name: device.name.clone(),
        device_id: session.device_id,
        until: session.until,
        ended: session.ended,
    })
}

/// `GET /api/boot`: the chrome's texts and whether this browser is signed in (no secret).
pub(super) async fn boot(State(state): State<Arc<WebState>>, headers: HeaderMap) -> Response {
    let device = signed_in(&state, &headers).ok().map(|d| d.name);
    Json(json!({
        "ok": true,
        "lang": state.lang.as_str(),
        "texts": texts::table(state.lang),
        "device": device,
    }))
    .into_response()
}

#[derive(Deserialize)]
pub(super) struct Enroll {
    code: String,
    public_key: String,
}

/// `POST /api/enroll`: a one-time code and a public key make a device.
pub(super) async fn enroll(
    State(state): State<Arc<WebState>>,
    Json(body): Json<Enroll>,
) -> Response {
    if body.code.len() > 128 || !is_public_key(&body.public_key) {
        return error(
            StatusCode::BAD_REQUEST,
            "a pairing code and a P-256 public key are needed",
        );
    }
    let Some(name) = state.auth.take_code(&body.code, Instant::now()) else {
        return error(
            StatusCode::FORBIDDEN,
            "this pairing link was used already or has expired; run `tau web pair` again",
        );
    };
    let id = match random_hex(16) {
        Ok(id) => id,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let device = Device {
        id: id.clone(),
        name: name.clone(),
        public_key: body.public_key.to_ascii_lowercase(),
        enrolled_at: jiff::Timestamp::now().to_string(),
        last_seen_at: None,
    };
    if let Err(e) = state.devices().add(device) {
        return error(StatusCode::CONFLICT, e.to_string());
    }
    if let Err(e) = state.save_devices().await {
        state.devices().remove(&name);
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot save the device: {e}"),
        );
    }
    tracing::info!(device = %name, "web device enrolled");
    Json(json!({"ok": true, "device_id": id, "name": name})).into_response()
}

#[derive(Deserialize)]
pub(super) struct ChallengeRequest {
    device_id: String,
}

/// `POST /api/challenge`: a fresh challenge for an enrolled device.
pub(super) async fn challenge(
    State(state): State<Arc<WebState>>,
    Json(body): Json<ChallengeRequest>,
) -> Response {
    if state.devices().by_id(&body.device_id).is_none() {
        return error(
            StatusCode::FORBIDDEN,
            "this browser is not enrolled (or was revoked)",
        );
    }
    match state.auth.challenge(&body.device_id, Instant::now()) {
        Ok(challenge) => Json(json!({"ok": true, "challenge": challenge})).into_response(),
        Err(e) => error(StatusCode::TOO_MANY_REQUESTS, e.to_string()),
    }
}

#[derive(Deserialize)]
pub(super) struct Login {
    device_id: String,
    challenge: String,
    signature: String,
}

/// `POST /api/login`: a signed challenge buys a session cookie.
pub(super) async fn login(
    State(state): State<Arc<WebState>>,
    Extension(CheckedHost(host)): Extension<CheckedHost>,
    Json(body): Json<Login>,
) -> Response {
    let now = Instant::now();
    let refused = || error(StatusCode::FORBIDDEN, "the signature does not check out");
    if !state
        .auth
        .take_challenge(&body.challenge, &body.device_id, now)
    {
        return refused();
    }
    let Some(public_key) = state
        .devices()
        .by_id(&body.device_id)
        .map(|d| d.public_key.clone())
    else {
        return refused();
    };
    let origin = state.origins.origin_for(&host);
    let message = signed_message(&origin, &body.challenge);
    if !verify(&public_key, message.as_bytes(), &body.signature) {
        return refused();
    }
    let token = match state.auth.open_session(&body.device_id, now) {
        Ok(token) => token,
        Err(e) => return error(StatusCode::TOO_MANY_REQUESTS, e.to_string()),
    };
    let name = {
        let mut devices = state.devices();
        devices.touch(&body.device_id, &jiff::Timestamp::now().to_string());
        devices
            .by_id(&body.device_id)
            .map(|d| d.name.clone())
            .unwrap_or_default()
    };
    if let Err(e) = state.save_devices().await {
        tracing::warn!("cannot note when a web device signed in: {e}");
    }
    let secure = if state.tls { "; Secure" } else { "" };
    let cookie = format!(
        "{}={token}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{secure}",
        cookie_name(&state),
        state.auth.session_ttl().as_secs()
    );
    let mut response = Json(json!({"ok": true, "device": name})).into_response();
    match HeaderValue::from_str(&cookie) {
        Ok(value) => {
            response.headers_mut().insert(header::SET_COOKIE, value);
            response
        }
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "cannot set the cookie"),
    }
}

/// `POST /api/logout`: ends this browser's session.
pub(super) async fn logout(State(state): State<Arc<WebState>>, headers: HeaderMap) -> Response {
    if let Some(token) = cookie_value(&headers, cookie_name(&state)) {
        state.auth.close_session(token);
    }
    let expired = format!(
        "{}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0",
        cookie_name(&state)
    );
    let mut response = Json(json!({"ok": true})).into_response();
    if let Ok(value) = HeaderValue::from_str(&expired) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}
