//! Where tau keeps things: the config root (TAU_HOME) and the mutable state root (TAU_DATA_DIR),
//! and every well-known file beneath them.
//!
//! - TAU_HOME: the variable if set; else the current directory if it holds a `tau.toml`; else
//!   `~/.tau`. It holds `tau.toml`, `.env` and `persona/`.
//! - TAU_DATA_DIR: the variable if set; else `~/.local/share/tau`. It holds `sessions/`, `logs/` and
//!   `hub/` (lock, state, crash reports, the Unix socket, the bearer token).
//!
//! Invariants: resolution is pure. It reads variables from an explicit [`Env`], takes the current
//! directory and the user's home as parameters, touches no directory except to ask whether
//! `<cwd>/tau.toml` exists, and creates nothing. Every returned path is absolute when the `cwd`
//! given is absolute (relative variable values are taken relative to `cwd`, except a relative
//! TAU_DATA_DIR set in `<home>/.env`, which is relative to TAU_HOME; a leading `~` is the user's
//! home).

use std::path::{Path, PathBuf};

use crate::env::Env;

/// The name of the configuration file under TAU_HOME.
pub const CONFIG_FILE_NAME: &str = "tau.toml";
/// The name of the dotenv file under TAU_HOME.
pub const ENV_FILE_NAME: &str = ".env";
/// The name of the sqlite session store's database under TAU_DATA_DIR.
pub const SQLITE_FILE_NAME: &str = "sessions.db";

/// A path could not be resolved.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PathsError {
    /// A default needs the user's home directory and `HOME` is not usable.
    #[error(
        "cannot find your home directory for {needed_for} (HOME is not set to an absolute path); set HOME or {needed_for}"
    )]
    NoUserHome {
        /// The variable whose default needs the home directory (`TAU_HOME` or `TAU_DATA_DIR`).
        needed_for: &'static str,
    },
}

/// The files of a running hub, all under `<TAU_DATA_DIR>/hub` (a 0700 directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubPaths {
    /// `<data>/hub`.
    pub dir: PathBuf,
    /// `hub.lock`: held (flock) by the one running hub.
    pub lock_file: PathBuf,
    /// `state.json`: heartbeat, start and stop times.
    pub state_file: PathBuf,
    /// `crash.json`: the reason a dying hub wrote about itself, if it could.
    pub crash_file: PathBuf,
    /// `crash_reports.jsonl`: every crash found at start-up, one per line.
    pub crash_reports_file: PathBuf,
    /// `last_crash.json`: the most recent crash report.
    pub last_crash_file: PathBuf,
    /// `taud.sock`: the gRPC Unix socket.
    pub socket: PathBuf,
    /// `token`: the bearer token for gRPC over TCP.
    pub token_file: PathBuf,
}

impl HubPaths {
    /// The hub files under `dir`.
    pub fn in_dir(dir: PathBuf) -> Self {
        Self {
            lock_file: dir.join("hub.lock"),
            state_file: dir.join("state.json"),
            crash_file: dir.join("crash.json"),
            crash_reports_file: dir.join("crash_reports.jsonl"),
            last_crash_file: dir.join("last_crash.json"),
            socket: dir.join("taud.sock"),
            token_file: dir.join("token"),
            dir,
        }
    }
}

/// Every location tau uses, derived from TAU_HOME and TAU_DATA_DIR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// TAU_HOME: the configuration root.
    pub home: PathBuf,
    /// `<home>/tau.toml` (it may not exist: then tau runs on built-in defaults).
    pub config_file: PathBuf,
    /// `<home>/.env`.
    pub env_file: PathBuf,
    /// `<home>/persona`.
    pub persona_dir: PathBuf,
    /// TAU_DATA_DIR: the mutable state root.
    pub data_dir: PathBuf,
    /// `<data>/sessions`.
    pub sessions_dir: PathBuf,
    /// `<data>/logs`.
    pub logs_dir: PathBuf,
    /// `<data>/hub` and the hub's files.
    pub hub: HubPaths,
}

impl Paths {
    /// All paths for the given roots (no resolution, no I/O).
    pub fn from_roots(home: PathBuf, data_dir: PathBuf) -> Self {
        Self {
            config_file: home.join(CONFIG_FILE_NAME),
            env_file: home.join(ENV_FILE_NAME),
            persona_dir: home.join("persona"),
            sessions_dir: data_dir.join("sessions"),
            logs_dir: data_dir.join("logs"),
            hub: HubPaths::in_dir(data_dir.join("hub")),
            home,
            data_dir,
        }
    }

    /// The sqlite session store's database, `<data>/sessions.db`.
    pub fn sqlite_file(&self) -> PathBuf {
        self.data_dir.join(SQLITE_FILE_NAME)
    }

    /// Resolves TAU_HOME (see [`resolve_home`]) and then TAU_DATA_DIR (see [`resolve_data_dir`]).
    ///
    /// A binary that loads `<home>/.env` first resolves the home with [`resolve_home`], fills its
    /// [`Env`] from the file, then calls [`Paths::for_home`] so `.env` can set TAU_DATA_DIR.
    pub fn resolve(env: &Env, cwd: &Path, user_home: Option<&Path>) -> Result<Self, PathsError> {
        let home = resolve_home(env, cwd, user_home)?;
        Self::for_home(home, env, cwd, user_home)
    }

    /// The paths for an already resolved TAU_HOME, resolving TAU_DATA_DIR from `env`.
    pub fn for_home(
        home: PathBuf,
        env: &Env,
        cwd: &Path,
        user_home: Option<&Path>,
    ) -> Result<Self, PathsError> {
        let data_dir = resolve_data_dir(env, cwd, user_home)?;
        Ok(Self::from_roots(home, data_dir))
    }
}

/// TAU_HOME: the variable if set (non-empty); else `cwd` if `<cwd>/tau.toml` is a file; else
/// `<user_home>/.tau`.
pub fn resolve_home(
    env: &Env,
    cwd: &Path,
    user_home: Option<&Path>,
) -> Result<PathBuf, PathsError> {
    if let Some(value) = env.non_empty("TAU_HOME") {
        return expand(value, cwd, user_home, "TAU_HOME");
    }
    if cwd.join(CONFIG_FILE_NAME).is_file() {
        return Ok(cwd.to_path_buf());
    }
    user_home
        .map(|h| h.join(".tau"))
        .ok_or(PathsError::NoUserHome {
            needed_for: "TAU_HOME",
        })
}

/// TAU_DATA_DIR: the variable if set (non-empty); else `<user_home>/.local/share/tau`.
///
/// A relative value is resolved against the current directory when it comes from the process
/// environment, and against the directory of the `.env` file that set it (TAU_HOME) when it comes
/// from `.env` ([`Env::origin`]), so `TAU_DATA_DIR=data` in `<home>/.env` means `<home>/data`
/// wherever tau is started.
pub fn resolve_data_dir(
    env: &Env,
    cwd: &Path,
    user_home: Option<&Path>,
) -> Result<PathBuf, PathsError> {
    if let Some(value) = env.non_empty("TAU_DATA_DIR") {
        let base = env
            .origin("TAU_DATA_DIR")
            .and_then(Path::parent)
            .unwrap_or(cwd);
        return expand(value, base, user_home, "TAU_DATA_DIR");
    }
    user_home
        .map(|h| h.join(".local").join("share").join("tau"))
        .ok_or(PathsError::NoUserHome {
            needed_for: "TAU_DATA_DIR",
        })
}

/// A variable's path value: `~` and `~/…` are under the user's home, a relative path is under
/// `cwd`, an absolute one is kept.
fn expand(
    value: &str,
    cwd: &Path,
    user_home: Option<&Path>,
    name: &'static str,
) -> Result<PathBuf, PathsError> {
    let tilde_rest = if value == "~" {
        Some("")
    } else {
        value.strip_prefix("~/")
    };
    if let Some(rest) = tilde_rest {
        let home = user_home.ok_or(PathsError::NoUserHome { needed_for: name })?;
        return Ok(home.join(rest));
    }
    Ok(cwd.join(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        pairs.iter().copied().collect()
    }

    #[test]
    fn home_is_cwd_when_it_has_a_tau_toml() {
        let cwd = tempfile::tempdir().unwrap();
        let user = tempfile::tempdir().unwrap();
        std::fs::write(cwd.path().join("tau.toml"), "").unwrap();
        let home = resolve_home(&env(&[]), cwd.path(), Some(user.path())).unwrap();
        assert_eq!(home, cwd.path());
    }

    #[test]
    fn home_is_dot_tau_when_cwd_has_no_tau_toml() {
        let cwd = tempfile::tempdir().unwrap();
        let user = tempfile::tempdir().unwrap();
        // A directory named tau.toml is not a config file.
        std::fs::create_dir(cwd.path().join("tau.toml")).unwrap();
        let home = resolve_home(&env(&[]), cwd.path(), Some(user.path())).unwrap();
        assert_eq!(home, user.path().join(".tau"));
    }

    #[test]
    fn tau_home_variable_wins_over_cwd() {
        let cwd = tempfile::tempdir().unwrap();
        std::fs::write(cwd.path().join("tau.toml"), "").unwrap();
        let e = env(&[("TAU_HOME", "/etc/tau-home")]);
        assert_eq!(
            resolve_home(&e, cwd.path(), None).unwrap(),
            PathBuf::from("/etc/tau-home")
        );
        // Empty means unset.
        let e = env(&[("TAU_HOME", "")]);
        assert_eq!(resolve_home(&e, cwd.path(), None).unwrap(), cwd.path());
    }

    #[test]
    fn relative_and_tilde_values_are_expanded() {
        let cwd = Path::new("/work/here");
        let user = Path::new("/home/u");
        let e = env(&[("TAU_HOME", "conf"), ("TAU_DATA_DIR", "~/state")]);
        let p = Paths::resolve(&e, cwd, Some(user)).unwrap();
        assert_eq!(p.home, PathBuf::from("/work/here/conf"));
        assert_eq!(p.data_dir, PathBuf::from("/home/u/state"));
        let e = env(&[("TAU_HOME", "~")]);
        assert_eq!(
            resolve_home(&e, cwd, Some(user)).unwrap(),
            PathBuf::from("/home/u")
        );
    }

    #[test]
    fn a_relative_data_dir_from_dotenv_is_under_tau_home() {
        let pairs = vec![("TAU_DATA_DIR".to_string(), "state".to_string())];
        let mut from_file = env(&[]);
        from_file.fill_from(&pairs, Path::new("/h/.env"));
        let dir = resolve_data_dir(&from_file, Path::new("/elsewhere"), Some(Path::new("/u")));
        assert_eq!(dir.unwrap(), PathBuf::from("/h/state"));
        let from_process = env(&[("TAU_DATA_DIR", "state")]);
        let dir = resolve_data_dir(
            &from_process,
            Path::new("/elsewhere"),
            Some(Path::new("/u")),
        );
        assert_eq!(dir.unwrap(), PathBuf::from("/elsewhere/state"));
        let mut tilde = env(&[]);
        tilde.fill_from(
            &[("TAU_DATA_DIR".to_string(), "~/d".to_string())],
            Path::new("/h/.env"),
        );
        let dir = resolve_data_dir(&tilde, Path::new("/elsewhere"), Some(Path::new("/u")));
        assert_eq!(dir.unwrap(), PathBuf::from("/u/d"));
    }

    #[test]
    fn defaults_need_a_user_home() {
        let cwd = tempfile::tempdir().unwrap();
        let err = resolve_home(&env(&[]), cwd.path(), None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot find your home directory for TAU_HOME (HOME is not set to an absolute path); set HOME or TAU_HOME"
        );
        let e = env(&[("TAU_HOME", "/h")]);
        let err = Paths::resolve(&e, cwd.path(), None).unwrap_err();
        assert_eq!(
            err,
            PathsError::NoUserHome {
                needed_for: "TAU_DATA_DIR"
            }
        );
    }

    #[test]
    fn layout_under_the_roots() {
        let p = Paths::from_roots(PathBuf::from("/h"), PathBuf::from("/d"));
        assert_eq!(p.config_file, PathBuf::from("/h/tau.toml"));
        assert_eq!(p.env_file, PathBuf::from("/h/.env"));
        assert_eq!(p.persona_dir, PathBuf::from("/h/persona"));
        assert_eq!(p.sessions_dir, PathBuf::from("/d/sessions"));
        assert_eq!(p.logs_dir, PathBuf::from("/d/logs"));
        assert_eq!(p.hub.dir, PathBuf::from("/d/hub"));
        assert_eq!(p.hub.lock_file, PathBuf::from("/d/hub/hub.lock"));
        assert_eq!(p.hub.state_file, PathBuf::from("/d/hub/state.json"));
        assert_eq!(p.hub.crash_file, PathBuf::from("/d/hub/crash.json"));
        assert_eq!(
            p.hub.crash_reports_file,
            PathBuf::from("/d/hub/crash_reports.jsonl")
        );
        assert_eq!(
            p.hub.last_crash_file,
            PathBuf::from("/d/hub/last_crash.json")
        );
        assert_eq!(p.hub.socket, PathBuf::from("/d/hub/taud.sock"));
        assert_eq!(p.hub.token_file, PathBuf::from("/d/hub/token"));
    }

    #[test]
    fn default_data_dir_is_under_local_share() {
        let p = Paths::resolve(
            &env(&[("TAU_HOME", "/h")]),
            Path::new("/"),
            Some(Path::new("/home/u")),
        )
        .unwrap();
        assert_eq!(p.data_dir, PathBuf::from("/home/u/.local/share/tau"));
    }
}
