//! `GET /api/events?session=ID`: one session's events as Server-Sent Events, for a signed-in
//! device: a `snapshot` (the session, the running turn, every pending approval, and this stream's
//! key for decisions), then each event as `session` with the id `<stream_id>.<seq>`, so a browser
//! that reconnects (`Last-Event-ID`) resumes right after the last event it saw.
//!
//! Invariants: the stream is the hub's `Subscribe` on channel `web` (its attachment is what lets
//! the device decide the approvals it shows, and its end closes them when no one else watches);
//! its key maps to its device and attachment only while it lives; it ends at once when its device
//! is revoked (a last `revoked` event), when the session cookie it was opened with expires or is
//! signed out (a last `expired` event: the page signs in again and reopens it), or when the web
//! client stops, and with a `lagged` event when the page fell too far behind; a comment line every
//! [`KEEPALIVE`] keeps proxies from cutting it.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;

use super::api::{core_error, query};
use super::device_auth::random_hex;
use super::event_json;
use super::signin::{error, signed_in};
use super::{WEB_CHANNEL, WebState};
use crate::hub::{CoreError, EventStream};

/// How often an idle stream sends a comment line.
pub const KEEPALIVE: Duration = Duration::from_secs(15);

/// `Last-Event-ID` as `(after_seq, stream_id)`.
fn resume_point(headers: &HeaderMap) -> Option<(u64, String)> {
    let value = headers.get("last-event-id")?.to_str().ok()?;
    let (stream_id, seq) = value.rsplit_once('.')?;
    Some((seq.parse().ok()?, stream_id.to_owned()))
}

/// Removes the stream's key when the stream ends.
struct Registered {
    state: Arc<WebState>,
    key: String,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.state.streams().remove(&self.key);
    }
}

struct Live {
    events: EventStream,
    stream_id: String,
    revoked: CancellationToken,
    /// The session's sign-out (or its device's revocation).
    signed_out: CancellationToken,
    /// When the session's cookie expires.
    expires: Pin<Box<tokio::time::Sleep>>,
    stop: CancellationToken,
    keepalive: tokio::time::Interval,
    first: Option<String>,
    /// The running turn's last reply and reasoning characters this stream sent.
    edges: event_json::DeltaEdges,
    done: bool,
    _registered: Registered,
}

fn frame(event: &str, id: Option<String>, data: &serde_json::Value) -> Bytes {
    let id = id.map(|id| format!("id: {id}\n")).unwrap_or_default();
    Bytes::from(format!("{id}event: {event}\ndata: {data}\n\n"))
}

async fn step(mut live: Live) -> Option<(Result<Bytes, Infallible>, Live)> {
    if live.done {
        return None;
    }
    if let Some(first) = live.first.take() {
        return Some((Ok(Bytes::from(first)), live));
    }
    let empty = serde_json::json!({});
    let chunk = tokio::select! {
        biased;
        () = live.revoked.cancelled() => {
            live.done = true;
            frame("revoked", None, &empty)
        }
        () = live.stop.cancelled() => return None,
        () = live.signed_out.cancelled() => {
            live.done = true;
            frame("expired", None, &empty)
        }
        () = &mut live.expires => {
            live.done = true;
            frame("expired", None, &empty)
        }
        _ = live.keepalive.tick() => Bytes::from_static(b": ping\n\n"),
        next = live.events.next() => match next {
            Ok(Some(event)) => frame(
                "session",
                Some(format!("{}.{}", live.stream_id, event.seq)),
                &event_json::event(&event, &mut live.edges),
            ),
            Ok(None) => return None,
            Err(_) => {
                live.done = true;
                frame("lagged", None, &empty)
            }
        },
    };
    Some((Ok(chunk), live))
}

/// `GET /api/events?session=ID`.
pub(super) async fn events(
    State(state): State<Arc<WebState>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let device = match signed_in(&state, &headers) {
        Ok(device) => device,
        Err(refused) => return refused.into_response(),
    };
    let Some(session_id) = query(&uri, "session") else {
        return error(StatusCode::BAD_REQUEST, "name the session: ?session=ID");
    };
    let resume = resume_point(&headers);
    let core = &state.core;
    let subscribed = match &resume {
        Some((after, stream_id)) => {
            core.subscribe_in_stream(session_id, Some(*after), Some(stream_id), WEB_CHANNEL)
                .await
        }
        None => core.subscribe(session_id, None, WEB_CHANNEL).await,
    };
    let mut events = match subscribed {
        Ok(events) => events,
        // Another hub process numbered those events: start over with a fresh snapshot.
        Err(CoreError::FailedPrecondition(_)) if resume.is_some() => {
            match core.subscribe(session_id, None, WEB_CHANNEL).await {
                Ok(events) => events,
                Err(e) => return core_error(&e),
            }
        }
        Err(e) => return core_error(&e),
    };
    let key = match random_hex(16) {
        Ok(key) => key,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    // A resumption carries on from the deltas the page had (a selector after its emoji).
    let edges = event_json::DeltaEdges::after(&events.take_lead());
    let snapshot = events.snapshot();
    state.streams().insert(
        key.clone(),
        (device.device_id.clone(), snapshot.attachment_id.clone()),
    );
    let first = frame("snapshot", None, &event_json::snapshot(snapshot, &key));
    let mut keepalive = tokio::time::interval(KEEPALIVE);
    keepalive.reset();
    let live = Live {
        stream_id: snapshot.stream_id.clone(),
        events,
        revoked: state.auth.device_token(&device.device_id),
        signed_out: device.ended.clone(),
        expires: Box::pin(tokio::time::sleep_until(device.until.into())),
        stop: state.stop.clone(),
        keepalive,
        first: Some(String::from_utf8_lossy(&first).into_owned()),
        edges,
        done: false,
        _registered: Registered {
            state: Arc::clone(&state),
            key,
        },
    };
    let body = Body::from_stream(futures::stream::unfold(live, step));
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}
