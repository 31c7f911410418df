//! The one place where domain errors become `tonic::Status`.
//!
//! Invariants: a status message never carries a secret (a token, a path under the user's home is
//! fine); authentication failures are UNAUTHENTICATED, a wrong peer is PERMISSION_DENIED.

use super::auth::AuthError;

impl From<AuthError> for tonic::Status {
    fn from(err: AuthError) -> Self {
        match err {
            AuthError::MissingToken | AuthError::WrongToken => {
                tonic::Status::unauthenticated(err.to_string())
            }
            AuthError::UnknownPeer => tonic::Status::unauthenticated(err.to_string()),
            AuthError::ForeignPeer { .. } => tonic::Status::permission_denied(err.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes() {
        assert_eq!(
            tonic::Status::from(AuthError::MissingToken).code(),
            tonic::Code::Unauthenticated
        );
        assert_eq!(
            tonic::Status::from(AuthError::WrongToken).code(),
            tonic::Code::Unauthenticated
        );
        assert_eq!(
            tonic::Status::from(AuthError::UnknownPeer).code(),
            tonic::Code::Unauthenticated
        );
        assert_eq!(
            tonic::Status::from(AuthError::ForeignPeer { uid: 7 }).code(),
            tonic::Code::PermissionDenied
        );
    }
}
