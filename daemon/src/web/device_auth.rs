//! Who a browser is: one-time pairing codes, sign-in challenges, the signature check and the
//! short-lived sessions a signed challenge buys.
//!
//! Invariants: a pairing code works once and for [`PAIR_TTL`]; a challenge works once, for
//! [`CHALLENGE_TTL`], and only for the device it was made for; a session exists only because a
//! device signed a fresh challenge with its enrolled key (there is no other way in: no token, no
//! code and no flag skips the signature); a session lasts its lifetime ([`SESSION_TTL`] unless
//! the web client was started with a shorter one) and ends at once when its device is revoked or
//! it is signed out, and so does every stream opened with it (its [`SignedSession::ended`], a child
//! of the device's [`CancellationToken`]); time comes in as `now` from the caller, so tests move it;
//! codes and session tokens are kept only as SHA-256 digests, so a lookup leaks nothing of them;
//! every map is bounded ([`MAX_CODES`], [`MAX_CHALLENGES`], [`MAX_SESSIONS`]).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use p256::ecdsa::signature::Verifier;
use p256::ecdsa::{Signature, VerifyingKey};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

/// How long a pairing link works.
pub const PAIR_TTL: Duration = Duration::from_secs(600);
/// How long a sign-in challenge works.
pub const CHALLENGE_TTL: Duration = Duration::from_secs(60);
/// How long a session cookie lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(3600);
/// Outstanding pairing codes at most.
pub const MAX_CODES: usize = 16;
/// Outstanding challenges at most.
pub const MAX_CHALLENGES: usize = 256;
/// Live sessions at most.
pub const MAX_SESSIONS: usize = 256;

/// What every signature signs: this prefix, the page's origin and the challenge.
pub const SIGNED_PREFIX: &str = "tau-web-login";

/// A map is full.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("too many {0} are outstanding; try again in a minute")]
pub struct Busy(&'static str);

/// Why randomness was not had.
#[derive(Debug, thiserror::Error)]
#[error("no randomness: {0}")]
pub struct NoRandom(String);

/// `n` random bytes as lowercase hex.
pub fn random_hex(n: usize) -> Result<String, NoRandom> {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).map_err(|e| NoRandom(e.to_string()))?;
    Ok(hex::encode(bytes))
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

struct Code {
    name: String,
    until: Instant,
}

struct Challenge {
    device_id: String,
    until: Instant,
}

struct Session {
    device_id: String,
    until: Instant,
    /// Cancelled when the session is signed out or its device revoked.
    ended: CancellationToken,
}

/// A live session: its device, until when it lasts, and what ends with it.
#[derive(Debug, Clone)]
pub struct SignedSession {
    pub device_id: String,
    pub until: Instant,
    /// Cancelled when the session is signed out or its device is revoked (not at `until`: the
    /// holder waits for that instant itself).
    pub ended: CancellationToken,
}

#[derive(Default)]
struct State {
    codes: HashMap<[u8; 32], Code>,
    challenges: HashMap<String, Challenge>,
    sessions: HashMap<[u8; 32], Session>,
    /// Cancelled when the device is revoked: its streams end.
    devices: HashMap<String, CancellationToken>,
}

impl State {
    fn prune(&mut self, now: Instant) {
        self.codes.retain(|_, c| c.until > now);
        self.challenges.retain(|_, c| c.until > now);
        self.sessions.retain(|_, s| s.until > now);
    }
}

/// The sign-in state of the web client (in memory: a restart ends every session and voids every
/// code; enrolled devices stay, in the device file).
pub struct Auth {
    state: Mutex<State>,
    session_ttl: Duration,
}

impl Default for Auth {
    fn default() -> Self {
        Self::new(SESSION_TTL)
    }
}

impl Auth {
    /// Sign-in state whose sessions last `session_ttl` (at most [`SESSION_TTL`]).
    pub fn new(session_ttl: Duration) -> Self {
        Self {
            state: Mutex::default(),
            session_ttl: session_ttl.min(SESSION_TTL),
        }
    }

    /// How long a session lasts.
    pub fn session_ttl(&self) -> Duration {
        self.session_ttl
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new one-time pairing code that enrolls one device named `name`.
    pub fn issue_code(&self, name: &str, now: Instant) -> Result<String, PairError> {
        let code = random_hex(16).map_err(PairError::Random)?;
        let mut state = self.lock();
        state.prune(now);
        if state.codes.len() >= MAX_CODES {
            return Err(PairError::Busy(Busy("pairing links")));
        }
        if state.codes.values().any(|c| c.name == name) {
            return Err(PairError::NamePending(name.to_owned()));
        }
        state.codes.insert(
            digest(&code),
            Code {
                name: name.to_owned(),
                until: now + PAIR_TTL,
            },
        );
        Ok(code)
    }

    /// Uses a pairing code up: the name it enrolls, or `None` (unknown, used, or expired).
    pub fn take_code(&self, code: &str, now: Instant) -> Option<String> {
        let mut state = self.lock();
        state.prune(now);
        state.codes.remove(&digest(code)).map(|c| c.name)
    }

    /// Whether a pairing code waits for `name` (so no second device is enrolled under it).
    pub fn name_pending(&self, name: &str, now: Instant) -> bool {
        let mut state = self.lock();
        state.prune(now);
        state.codes.values().any(|c| c.name == name)
    }

    /// A fresh challenge for `device_id` to sign.
    pub fn challenge(&self, device_id: &str, now: Instant) -> Result<String, PairError> {
        let challenge = random_hex(32).map_err(PairError::Random)?;
        let mut state = self.lock();
        state.prune(now);
        if state.challenges.len() >= MAX_CHALLENGES {
            return Err(PairError::Busy(Busy("sign-in challenges")));
        }
        state.challenges.insert(
            challenge.clone(),
            Challenge {
                device_id: device_id.to_owned(),
                until: now + CHALLENGE_TTL,
            },
        );
        Ok(challenge)
    }

    /// Uses a challenge up; whether it was live and made for `device_id`.
    pub fn take_challenge(&self, challenge: &str, device_id: &str, now: Instant) -> bool {
        let mut state = self.lock();
        state.prune(now);
        state
            .challenges
            .remove(challenge)
            .is_some_and(|c| c.device_id == device_id)
    }

    /// A session for `device_id` (after its signature was checked): the cookie's value.
    pub fn open_session(&self, device_id: &str, now: Instant) -> Result<String, PairError> {
        let token = random_hex(32).map_err(PairError::Random)?;
        let mut state = self.lock();
        state.prune(now);
        if state.sessions.len() >= MAX_SESSIONS {
            return Err(PairError::Busy(Busy("sessions")));
        }
        let ended = state
            .devices
            .entry(device_id.to_owned())
            .or_default()
            .child_token();
        state.sessions.insert(
            digest(&token),
            Session {
                device_id: device_id.to_owned(),
                until: now + self.session_ttl,
                ended,
            },
        );
        Ok(token)
    }

    /// The session a token opens, while it lasts.
    pub fn session(&self, token: &str, now: Instant) -> Option<SignedSession> {
        let mut state = self.lock();
        state.prune(now);
        state.sessions.get(&digest(token)).map(|s| SignedSession {
            device_id: s.device_id.clone(),
            until: s.until,
            ended: s.ended.clone(),
        })
    }

    /// Ends a session (sign-out), and the streams opened with it.
    pub fn close_session(&self, token: &str) {
        let session = self.lock().sessions.remove(&digest(token));
        if let Some(session) = session {
            session.ended.cancel();
        }
    }

    /// A token cancelled when `device_id` is revoked (a stream of the device holds a child).
    pub fn device_token(&self, device_id: &str) -> CancellationToken {
        self.lock()
            .devices
            .entry(device_id.to_owned())
            .or_default()
            .child_token()
    }

    /// Ends every session, challenge and stream of `device_id`.
    pub fn revoke(&self, device_id: &str) {
        let token = {
            let mut state = self.lock();
            state.sessions.retain(|_, s| s.device_id != device_id);
            state.challenges.retain(|_, c| c.device_id != device_id);
            state.devices.remove(device_id)
        };
        if let Some(token) = token {
            token.cancel();
        }
    }
}

/// A pairing or sign-in step that could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum PairError {
    #[error(transparent)]
    Busy(Busy),
    #[error(transparent)]
    Random(NoRandom),
    #[error("a pairing link for {0:?} is already waiting; use it or wait until it expires")]
    NamePending(String),
}

/// The bytes a device signs to sign in from `origin` with `challenge`.
pub fn signed_message(origin: &str, challenge: &str) -> String {
    format!("{SIGNED_PREFIX}\n{origin}\n{challenge}")
}

/// Whether `signature_hex` (IEEE P1363 `r‖s`, as WebCrypto makes it, or DER) is `public_key_hex`'s
/// ECDSA P-256 / SHA-256 signature of `message`.
pub fn verify(public_key_hex: &str, message: &[u8], signature_hex: &str) -> bool {
    let Ok(key) = hex::decode(public_key_hex) else {
        return false;
    };
    let Ok(key) = VerifyingKey::from_sec1_bytes(&key) else {
        return false;
    };
    let Ok(signature) = hex::decode(signature_hex) else {
        return false;
    };
    let signature = match Signature::from_slice(&signature) {
        Ok(signature) => signature,
        Err(_) => match Signature::from_der(&signature) {
            Ok(signature) => signature,
            Err(_) => return false,
        },
    };
    key.verify(message, &signature).is_ok()
}

/// Whether `hex_key` is a P-256 public key (SEC1, uncompressed or compressed).
pub fn is_public_key(hex_key: &str) -> bool {
    hex_key.len() <= 200
        && hex::decode(hex_key).is_ok_and(|key| VerifyingKey::from_sec1_bytes(&key).is_ok())
}

#[cfg(test)]
mod tests {
    use p256::ecdsa::SigningKey;
    use p256::ecdsa::signature::Signer;

    use super::*;

    fn key() -> (SigningKey, String) {
        let secret = SigningKey::from_slice(&[7u8; 32]).unwrap();
        let public = hex::encode(secret.verifying_key().to_encoded_point(false).as_bytes());
        (secret, public)
    }

    #[test]
    fn a_signature_verifies_only_for_its_key_message_and_origin() {
        let (secret, public) = key();
        let message = signed_message("http://127.0.0.1:1", "abc");
        let signature: Signature = secret.sign(message.as_bytes());
        let sig = hex::encode(signature.to_bytes());
        assert!(verify(&public, message.as_bytes(), &sig));
        let elsewhere = signed_message("http://evil.example", "abc");
        assert!(!verify(&public, elsewhere.as_bytes(), &sig));
        let other = SigningKey::from_slice(&[9u8; 32]).unwrap();
        let other_public = hex::encode(other.verifying_key().to_encoded_point(false).as_bytes());
        assert!(!verify(&other_public, message.as_bytes(), &sig));
        assert!(!verify(&public, message.as_bytes(), ""));
        assert!(!verify(&public, message.as_bytes(), "zz"));
        assert!(is_public_key(&public));
        assert!(!is_public_key("04"));
    }

    #[test]
    fn codes_and_challenges_work_once_and_expire() {
        let auth = Auth::default();
        let now = Instant::now();
        let code = auth.issue_code("phone", now).unwrap();
        assert!(auth.name_pending("phone", now));
        assert!(matches!(
            auth.issue_code("phone", now),
            Err(PairError::NamePending(_))
        ));
        assert_eq!(auth.take_code(&code, now), Some("phone".to_owned()));
        assert_eq!(auth.take_code(&code, now), None);
        let late = auth.issue_code("late", now).unwrap();
        assert_eq!(auth.take_code(&late, now + PAIR_TTL), None);

        let challenge = auth.challenge("dev-a", now).unwrap();
        assert!(!auth.take_challenge(&challenge, "dev-b", now));
        let challenge = auth.challenge("dev-a", now).unwrap();
        assert!(auth.take_challenge(&challenge, "dev-a", now));
        assert!(!auth.take_challenge(&challenge, "dev-a", now));
        let stale = auth.challenge("dev-a", now).unwrap();
        assert!(!auth.take_challenge(&stale, "dev-a", now + CHALLENGE_TTL));
    }

    #[test]
    fn a_session_lasts_its_lifetime_and_signing_out_ends_its_streams() {
        let auth = Auth::new(Duration::from_secs(2));
        assert_eq!(auth.session_ttl(), Duration::from_secs(2));
        assert_eq!(Auth::new(SESSION_TTL * 2).session_ttl(), SESSION_TTL);
        let now = Instant::now();
        let token = auth.open_session("dev-a", now).unwrap();
        let session = auth.session(&token, now).unwrap();
        assert_eq!(session.until, now + Duration::from_secs(2));
        let later = now + Duration::from_secs(1);
        assert!(auth.session(&token, later).is_some());
        assert!(auth.session(&token, now + Duration::from_secs(2)).is_none());
        let token = auth.open_session("dev-a", now).unwrap();
        let ended = auth.session(&token, now).unwrap().ended;
        auth.close_session(&token);
        assert!(ended.is_cancelled());
        assert!(auth.session(&token, now).is_none());
    }

    #[test]
    fn revoking_ends_sessions_and_streams() {
        let auth = Auth::default();
        let now = Instant::now();
        let token = auth.open_session("dev-a", now).unwrap();
        let other = auth.open_session("dev-b", now).unwrap();
        let stream = auth.device_token("dev-a");
        let session = auth.session(&token, now).unwrap().ended;
        assert_eq!(
            auth.session(&token, now).map(|s| s.device_id).as_deref(),
            Some("dev-a")
        );
        auth.revoke("dev-a");
        assert!(stream.is_cancelled());
        assert!(session.is_cancelled(), "the session's streams end too");
        assert!(auth.session(&token, now).is_none());
        assert_eq!(
            auth.session(&other, now).map(|s| s.device_id).as_deref(),
            Some("dev-b")
        );
        assert!(
            auth.session(&other, now + SESSION_TTL).is_none(),
            "sessions expire"
        );
    }
}
