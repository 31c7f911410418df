//! One installation of tau as a binary sees it at start-up: the environment (process variables plus
//! `<TAU_HOME>/.env`, which never overrides a variable already set), the resolved paths, the loaded
//! `tau.toml` (or the built-in defaults) and the settings derived from both.
//!
//! Invariant: discovery never writes the process environment. `.env` values live only in
//! [`Installation::env`], which callers pass to whatever reads a variable, so there is no global
//! state and no unsafe `set_var` while threads may be running.

use std::path::Path;

use crate::config::{Config, ConfigError, KnownNames, Settings};
use crate::dotenv::{self, DotenvError, DotenvProblem};
use crate::env::Env;
use crate::paths::{self, Paths, PathsError};

/// Why an installation could not be discovered. Each message is one line naming what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum InstallationError {
    /// TAU_HOME or TAU_DATA_DIR could not be resolved.
    #[error(transparent)]
    Paths(#[from] PathsError),
    /// `.env` exists but could not be read.
    #[error(transparent)]
    Dotenv(#[from] DotenvError),
    /// `tau.toml` or an environment override is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// Everything a binary needs to know about its installation.
#[derive(Debug, Clone)]
pub struct Installation {
    /// The process environment with `.env` filled in.
    pub env: Env,
    /// TAU_HOME, TAU_DATA_DIR and the files under them.
    pub paths: Paths,
    /// The validated configuration.
    pub config: Config,
    /// Profile, host role, hub port and UI language after every override.
    pub settings: Settings,
    /// Lines of `.env` that were skipped (each `file:line: message`), for the caller to report.
    pub dotenv_problems: Vec<DotenvProblem>,
}

impl Installation {
    /// Discovers the installation from `env` (normally [`Env::from_process`]) and the current
    /// directory, with the built-in provider and backend names.
    pub fn discover(env: Env, cwd: &Path) -> Result<Self, InstallationError> {
        Self::discover_with(env, cwd, &KnownNames::builtin())
    }

    /// As [`Installation::discover`], validating names against `known` (code registrations).
    pub fn discover_with(
        env: Env,
        cwd: &Path,
        known: &KnownNames,
    ) -> Result<Self, InstallationError> {
        let Located {
            env,
            paths,
            dotenv_problems,
        } = Located::discover(env, cwd)?;
        let config = Config::load_with(&paths.config_file, &env, known)?;
        let settings = Settings::resolve(&env, &config)?;
        Ok(Self {
            env,
            paths,
            config,
            settings,
            dotenv_problems,
        })
    }
}

/// The environment and paths of an installation without its configuration: what commands need
/// that must work even when `tau.toml` is broken (`tau hub status`, `tau hub stop`, `tau doctor`).
#[derive(Debug, Clone)]
pub struct Located {
    /// The process environment with `.env` filled in.
    pub env: Env,
    /// TAU_HOME, TAU_DATA_DIR and the files under them.
    pub paths: Paths,
    /// Lines of `.env` that were skipped.
    pub dotenv_problems: Vec<DotenvProblem>,
}

impl Located {
    /// Resolves TAU_HOME, reads its `.env` into the overlay, then resolves the remaining paths.
    pub fn discover(mut env: Env, cwd: &Path) -> Result<Self, InstallationError> {
        let user_home = env.user_home();
        let home = paths::resolve_home(&env, cwd, user_home.as_deref())?;
        let mut dotenv_problems = Vec::new();
        if let Some(file) = dotenv::load(&home.join(paths::ENV_FILE_NAME))? {
            let to_set = file.pairs_to_set(&env);
            env.fill_from(&to_set, &file.path);
            dotenv_problems = file.problems;
        }
        let paths = Paths::for_home(home, &env, cwd, user_home.as_deref())?;
        Ok(Self {
            env,
            paths,
            dotenv_problems,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::Lang;

    fn env_for(root: &Path, extra: &[(&str, &str)]) -> Env {
        let mut env: Env = [
            ("HOME", root.join("user").to_str().unwrap()),
            ("TAU_HOME", root.join("home").to_str().unwrap()),
            ("TAU_DATA_DIR", root.join("data").to_str().unwrap()),
        ]
        .into_iter()
        .collect();
        for (name, value) in extra {
            env.set(*name, *value);
        }
        env
    }

    #[test]
    fn dotenv_fills_the_overlay_without_overriding() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::write(
            dir.path().join("home/.env"),
            "TAU_LANG=tr\nANTHROPIC_API_KEY=from-file\nbroken line\n",
        )
        .unwrap();
        let env = env_for(dir.path(), &[("ANTHROPIC_API_KEY", "from-env")]);
        let found = Installation::discover(env, dir.path()).unwrap();
        assert_eq!(found.env.get("ANTHROPIC_API_KEY"), Some("from-env"));
        assert_eq!(found.settings.lang, Lang::Tr);
        assert_eq!(found.config.ui.language, Lang::Tr);
        assert_eq!(found.dotenv_problems.len(), 1);
        assert!(found.config.source().is_defaults());
        assert_eq!(found.paths.data_dir, dir.path().join("data"));
    }

    #[test]
    fn dotenv_values_remember_their_file() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join(".env"), "TAU_DATA_DIR=state\n").unwrap();
        let mut env = env_for(dir.path(), &[]);
        env = env
            .names()
            .filter(|n| *n != "TAU_DATA_DIR")
            .map(|n| (n.to_string(), env.get(n).unwrap().to_string()))
            .collect();
        let found = Installation::discover(env.clone(), Path::new("/")).unwrap();
        assert_eq!(found.paths.data_dir, home.join("state"), "under TAU_HOME");

        std::fs::write(home.join(".env"), "TAU_PROFILE=office\n").unwrap();
        let error = Installation::discover(env, dir.path()).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                r#"environment variable TAU_PROFILE = "office" (from {}): expected "home", "travel" or "sport""#,
                home.join(".env").display()
            )
        );
    }

    #[test]
    fn a_bad_config_is_one_line_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::write(
            dir.path().join("home/tau.toml"),
            "[agent]\ncontext = \"auto\"\n",
        )
        .unwrap();
        let error = Installation::discover(env_for(dir.path(), &[]), dir.path()).unwrap_err();
        let text = error.to_string();
        assert!(!text.contains('\n'), "{text}");
        assert!(text.contains("tau.toml"), "{text}");
        assert!(text.contains("agent.context"), "{text}");
    }
}
