//! Who may call: over TCP, a request with `authorization: Bearer <hub token>`; over the Unix
//! socket, a peer whose uid is the hub's own (from `UdsConnectInfo::peer_cred`).
//!
//! Invariants: the token is compared in constant time and never logged; a request that fails a
//! check never reaches a service.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, Request, header};
use axum::middleware::Next;
use axum::response::Response;
use tonic::transport::server::UdsConnectInfo;

use crate::host::BearerToken;
use crate::host::token::BearerRefused;

/// Why a caller was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No `authorization: Bearer …` header.
    #[error(
        "missing bearer token (send `authorization: Bearer <token>` from <TAU_DATA_DIR>/hub/token)"
    )]
    MissingToken,
    /// The token does not match.
    #[error("invalid bearer token")]
    WrongToken,
    /// The Unix socket peer's credentials are unknown.
    #[error("cannot identify the caller on the hub socket")]
    UnknownPeer,
    /// Another user is calling over the Unix socket.
    #[error("uid {uid} may not use this hub")]
    ForeignPeer {
        /// The caller's uid.
        uid: u32,
    },
}

/// Checks an `authorization` header against the token.
pub fn check_bearer(token: &BearerToken, header: Option<&HeaderValue>) -> Result<(), AuthError> {
    token
        .check_authorization(header.map(HeaderValue::as_bytes))
        .map_err(|refused| match refused {
            BearerRefused::Missing => AuthError::MissingToken,
            BearerRefused::Wrong => AuthError::WrongToken,
        })
}

/// Checks a Unix socket peer's uid.
pub fn check_peer(expected_uid: u32, peer_uid: Option<u32>) -> Result<(), AuthError> {
    match peer_uid {
        None => Err(AuthError::UnknownPeer),
        Some(uid) if uid == expected_uid => Ok(()),
        Some(uid) => Err(AuthError::ForeignPeer { uid }),
    }
}

fn refuse(err: AuthError) -> Response {
    tracing::warn!("gRPC call refused: {err}");
    tonic::Status::from(err).into_http::<Body>()
}

/// axum middleware for gRPC over TCP.
pub async fn require_bearer(
    State(token): State<BearerToken>,
    req: Request<Body>,
    next: Next,
) -> Response {
    match check_bearer(&token, req.headers().get(header::AUTHORIZATION)) {
        Ok(()) => next.run(req).await,
        Err(e) => refuse(e),
    }
}

/// axum middleware for gRPC over the Unix socket (whose listener records `UdsConnectInfo` on
/// every request).
pub async fn require_same_uid(
    State(expected_uid): State<u32>,
    req: Request<Body>,
    next: Next,
) -> Response {
    let peer = req
        .extensions()
        .get::<UdsConnectInfo>()
        .and_then(|info| info.peer_cred)
        .map(|cred| cred.uid());
    match check_peer(expected_uid, peer) {
        Ok(()) => next.run(req).await,
        Err(e) => refuse(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token() -> BearerToken {
        let tmp = tempfile::tempdir().unwrap();
        crate::host::token::ensure(&tmp.path().join("token")).unwrap()
    }

    #[test]
    fn bearer_checks() {
        let t = token();
        let good = HeaderValue::from_str(&format!("Bearer {}", t.expose())).unwrap();
        assert_eq!(check_bearer(&t, Some(&good)), Ok(()));
        let lower = HeaderValue::from_str(&format!("bearer {}", t.expose())).unwrap();
        assert_eq!(check_bearer(&t, Some(&lower)), Ok(()));
        assert_eq!(check_bearer(&t, None), Err(AuthError::MissingToken));
        let basic = HeaderValue::from_str(&format!("Basic {}", t.expose())).unwrap();
        assert_eq!(check_bearer(&t, Some(&basic)), Err(AuthError::MissingToken));
        let bare = HeaderValue::from_str(t.expose()).unwrap();
        assert_eq!(check_bearer(&t, Some(&bare)), Err(AuthError::MissingToken));
        let wrong = HeaderValue::from_static("Bearer 00");
        assert_eq!(check_bearer(&t, Some(&wrong)), Err(AuthError::WrongToken));
        let empty = HeaderValue::from_static("Bearer ");
        assert_eq!(check_bearer(&t, Some(&empty)), Err(AuthError::WrongToken));
    }

    #[test]
    fn peer_checks() {
        assert_eq!(check_peer(1000, Some(1000)), Ok(()));
        assert_eq!(
            check_peer(1000, Some(0)),
            Err(AuthError::ForeignPeer { uid: 0 })
        );
        assert_eq!(check_peer(1000, None), Err(AuthError::UnknownPeer));
    }
}
