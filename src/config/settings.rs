//! The process-level view tau runs with: profile, node role, hub port and UI language, from the
//! TAU_* environment variables over `tau.toml`.
//!
//! Invariants: a variable set to `""` counts as unset; any other value outside its closed set is a
//! one-line [`ConfigError::Env`] naming the variable, never silently replaced by a default.

use std::fmt;

use super::Config;
use super::error::{ConfigError, one_of_quoted};
use crate::env::Env;
use crate::lang::Lang;

/// TAU_PROFILE: where the installation is being used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Profile {
    /// `home` (default).
    #[default]
    Home,
    /// `travel`.
    Travel,
    /// `sport`.
    Sport,
}

impl Profile {
    /// Every profile.
    pub const ALL: [Profile; 3] = [Profile::Home, Profile::Travel, Profile::Sport];

    /// The profile's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Home => "home",
            Profile::Travel => "travel",
            Profile::Sport => "sport",
        }
    }

    /// The profile with this name (ASCII case ignored), or `None`.
    pub fn parse(name: &str) -> Option<Profile> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// TAU_ROLE: what this machine is in a tau mesh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum NodeRole {
    /// `hub` (default): runs the agents and owns the state.
    #[default]
    Hub,
    /// `node`: a satellite of a hub.
    Node,
}

impl NodeRole {
    /// Every role.
    pub const ALL: [NodeRole; 2] = [NodeRole::Hub, NodeRole::Node];

    /// The role's name.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeRole::Hub => "hub",
            NodeRole::Node => "node",
        }
    }

    /// The role with this name (ASCII case ignored), or `None`.
    pub fn parse(name: &str) -> Option<NodeRole> {
        Self::ALL
            .into_iter()
            .find(|r| r.as_str().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for NodeRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a process runs with, after the environment has had its say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// TAU_PROFILE (default home).
    pub profile: Profile,
    /// TAU_ROLE, else `[hub] role` (default hub).
    pub role: NodeRole,
    /// TAU_HUB_PORT, else `[hub] control_port`.
    pub hub_port: u16,
    /// TAU_LANG, else `[ui] language`.
    pub lang: Lang,
}

impl Settings {
    /// Resolves the settings from `env` over `config`.
    pub fn resolve(env: &Env, config: &Config) -> Result<Self, ConfigError> {
        Ok(Self {
            profile: profile_from_env(env)?,
            role: match role_from_env(env)? {
                Some(role) => role,
                None => config.hub.role.unwrap_or_default(),
            },
            hub_port: hub_port_from_env(env)?.unwrap_or(config.hub.control_port),
            lang: lang_from_env(env)?.unwrap_or(config.ui.language),
        })
    }
}

/// TAU_PROFILE, default home.
pub fn profile_from_env(env: &Env) -> Result<Profile, ConfigError> {
    closed_set(env, "TAU_PROFILE", &Profile::ALL.map(|p| (p.as_str(), p)))
        .map(Option::unwrap_or_default)
}

/// TAU_ROLE, if set (it overrides `[hub] role`; with neither, the role is hub). Every reader of
/// the role (taud, `tau doctor`, `tau hub install`) parses it here, so they agree on its spelling.
pub fn role_from_env(env: &Env) -> Result<Option<NodeRole>, ConfigError> {
    closed_set(env, "TAU_ROLE", &NodeRole::ALL.map(|r| (r.as_str(), r)))
}

/// TAU_LANG, if set.
pub fn lang_from_env(env: &Env) -> Result<Option<Lang>, ConfigError> {
    closed_set(env, "TAU_LANG", &Lang::ALL.map(|l| (l.as_str(), l)))
}

/// TAU_HUB_PORT, if set.
pub fn hub_port_from_env(env: &Env) -> Result<Option<u16>, ConfigError> {
    let Some(value) = env.non_empty("TAU_HUB_PORT") else {
        return Ok(None);
    };
    value.trim().parse::<u16>().map(Some).map_err(|_| {
        ConfigError::env(
            "TAU_HUB_PORT",
            value,
            env.origin("TAU_HUB_PORT"),
            "a port number from 0 to 65535 (0: any free port)",
        )
    })
}

fn closed_set<T: Copy>(
    env: &Env,
    name: &str,
    options: &[(&str, T)],
) -> Result<Option<T>, ConfigError> {
    let Some(value) = env.non_empty(name) else {
        return Ok(None);
    };
    if let Some((_, t)) = options
        .iter()
        .find(|(o, _)| o.eq_ignore_ascii_case(value.trim()))
    {
        return Ok(Some(*t));
    }
    let names: Vec<&str> = options.iter().map(|(o, _)| *o).collect();
    Err(ConfigError::env(
        name,
        value,
        env.origin(name),
        one_of_quoted(&names),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::KnownNames;
    use std::path::Path;

    fn env(pairs: &[(&str, &str)]) -> Env {
        pairs.iter().copied().collect()
    }

    fn config(text: &str, e: &Env) -> Config {
        Config::from_toml_str(text, Path::new("/h/tau.toml"), e, &KnownNames::builtin()).unwrap()
    }

    #[test]
    fn defaults_without_variables() {
        let e = env(&[]);
        let s = Settings::resolve(&e, &config("", &e)).unwrap();
        assert_eq!(
            s,
            Settings {
                profile: Profile::Home,
                role: NodeRole::Hub,
                hub_port: 7877,
                lang: Lang::En
            }
        );
    }

    #[test]
    fn variables_override_the_file() {
        let text = "[hub]\ncontrol_port = 9000\n[ui]\nlanguage = \"en\"\n";
        let e = env(&[
            ("TAU_PROFILE", "travel"),
            ("TAU_ROLE", "node"),
            ("TAU_HUB_PORT", "7999"),
            ("TAU_LANG", "tr"),
        ]);
        let s = Settings::resolve(&e, &config(text, &env(&[]))).unwrap();
        assert_eq!(s.profile, Profile::Travel);
        assert_eq!(s.role, NodeRole::Node);
        assert_eq!(s.hub_port, 7999);
        assert_eq!(s.lang, Lang::Tr);
        let s = Settings::resolve(&env(&[("TAU_HUB_PORT", "")]), &config(text, &env(&[]))).unwrap();
        assert_eq!(s.hub_port, 9000);
    }

    #[test]
    fn the_role_comes_from_tau_role_over_the_file() {
        let node = config("[hub]\nrole = \"node\"\n", &env(&[]));
        assert_eq!(
            Settings::resolve(&env(&[]), &node).unwrap().role,
            NodeRole::Node
        );
        let as_hub = Settings::resolve(&env(&[("TAU_ROLE", "hub")]), &node).unwrap();
        assert_eq!(as_hub.role, NodeRole::Hub);
        let unset = Settings::resolve(&env(&[("TAU_ROLE", "")]), &node).unwrap();
        assert_eq!(unset.role, NodeRole::Node);
    }

    #[test]
    fn bad_values_name_the_variable() {
        let cases = [
            (
                "TAU_PROFILE",
                "office",
                r#"environment variable TAU_PROFILE = "office": expected "home", "travel" or "sport""#,
            ),
            (
                "TAU_ROLE",
                "server",
                r#"environment variable TAU_ROLE = "server": expected "hub" or "node""#,
            ),
            (
                "TAU_LANG",
                "de",
                r#"environment variable TAU_LANG = "de": expected "en" or "tr""#,
            ),
            (
                "TAU_HUB_PORT",
                "70000",
                r#"environment variable TAU_HUB_PORT = "70000": expected a port number from 0 to 65535 (0: any free port)"#,
            ),
            (
                "TAU_HUB_PORT",
                "http",
                r#"environment variable TAU_HUB_PORT = "http": expected a port number from 0 to 65535 (0: any free port)"#,
            ),
        ];
        let cfg = config("", &env(&[]));
        for (name, value, want) in cases {
            let err = Settings::resolve(&env(&[(name, value)]), &cfg).unwrap_err();
            assert_eq!(err.to_string(), want);
        }
    }

    #[test]
    fn a_bad_value_from_dotenv_names_the_file() {
        let cfg = config("", &env(&[]));
        for (name, value, expected) in [
            (
                "TAU_PROFILE",
                "office",
                r#"expected "home", "travel" or "sport""#,
            ),
            (
                "TAU_HUB_PORT",
                "http",
                "expected a port number from 0 to 65535 (0: any free port)",
            ),
        ] {
            let mut e = env(&[]);
            e.fill_from(
                &[(name.to_string(), value.to_string())],
                Path::new("/h/.env"),
            );
            let err = Settings::resolve(&e, &cfg).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(r#"environment variable {name} = "{value}" (from /h/.env): {expected}"#)
            );
        }
    }
}
