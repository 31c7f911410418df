//! Model-visible names of MCP tools: the rule is `tau_api::mcp_names` (`mcp__<server>__<tool>`,
//! a hash suffix for a tool name that is not plain or too long; stated there once, shared with
//! `tau`), and this module makes sure each name has one owner.
//!
//! The rule is a pure function of (server key, raw tool name), injective given valid server keys,
//! so names are stable across restarts and never depend on which other tools or servers there are.
//! What it leaves is found here, never resolved by dropping a tool: the catalog counts names that
//! differ only in `-` versus `_` as one (see [`crate::tool::fold_name`]), so a server's `a-b` and
//! `a_b` clash, as would a hash collision or a name of a built-in tool (none starts with `mcp__`,
//! but the table holds them all the same); so could a server key that tau.toml would refuse, in
//! specs built by other means.
//!
//! Invariants: [`check_names`] refuses such a configuration at hub start (taud exits 78 naming both
//! servers and tools); a [`NameTable`], built once from the configuration, gives every name its one
//! owner, and a listed tool whose name another owns is refused visibly (logged, `refused` in the
//! status) whoever is running, so a name never changes meaning when a server comes, goes or adds a
//! tool. Routing never re-parses a name.

use std::collections::BTreeMap;

use super::server_spec::McpServerSpec;
use crate::tool::builtin::BUILTIN_NAMES;
use crate::tool::fold_name;

pub use tau_api::mcp_names::{MAX_NAME_LEN, model_name};

/// Why a configuration's MCP tool names cannot all be told apart: the hub refuses to start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Two configured tools would share a name (or names that differ only in `-` versus `_`).
    #[error(
        "MCP server '{first_server}' tool '{first_tool}' and MCP server '{second_server}' tool '{second_tool}' would both reach the model as '{name}' (names that differ only in '-' versus '_' count as one): rename a server or tier only one of them"
    )]
    Clash {
        name: String,
        first_server: String,
        first_tool: String,
        second_server: String,
        second_tool: String,
    },
    /// A configured tool would take a built-in tool's name.
    #[error(
        "MCP server '{server}' tool '{tool}' would reach the model as '{name}', the name of a built-in tool: rename the server or do not tier the tool"
    )]
    Builtin {
        name: String,
        server: String,
        tool: String,
    },
    /// A server key that could make names ambiguous.
    #[error("MCP server key '{0}' is not valid: expected {rule}", rule = tau_api::config::SERVER_KEY_RULE)]
    ServerKey(String),
    /// Two server keys that differ only in `-` versus `_`.
    #[error(
        "MCP server keys '{first}' and '{second}' differ only in '-' versus '_': their tools' names would clash; rename one"
    )]
    ServerKeys { first: String, second: String },
}

/// Why a listed tool is not offered under its name: another owns it (the text is its status
/// warning).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameTaken {
    #[error("its name {name} belongs to MCP server '{server}' tool '{tool}'")]
    Mcp {
        name: String,
        server: String,
        tool: String,
    },
    #[error("its name {0} is a built-in tool's")]
    Builtin(String),
}

/// Who a name belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owner {
    Builtin,
    Mcp { server: String, tool: String },
}

/// Every name the configuration gives, with its one owner: the built-in tools, then each server's
/// tiered tools in configuration order. Keyed by the name with `-` read as `_`.
#[derive(Debug, Clone, Default)]
pub struct NameTable {
    owners: BTreeMap<String, Owner>,
}

impl NameTable {
    /// The table of `specs` (and of the built-in tools), with every problem [`check_names`]
    /// reports: a name already owned keeps its first owner.
    pub fn build(specs: &[McpServerSpec]) -> (Self, Vec<NameError>) {
        let mut table = Self::default();
        let mut problems = Vec::new();
        for name in BUILTIN_NAMES {
            table.owners.insert(fold_name(name), Owner::Builtin);
        }
        for spec in specs {
            for tool in spec.tools.keys() {
                let name = model_name(&spec.key, tool);
                let folded = fold_name(&name);
                match table.owners.get(&folded) {
                    None => {
                        table.owners.insert(
                            folded,
                            Owner::Mcp {
                                server: spec.key.clone(),
                                tool: tool.clone(),
                            },
                        );
                    }
                    Some(Owner::Builtin) => problems.push(NameError::Builtin {
                        name,
                        server: spec.key.clone(),
                        tool: tool.clone(),
                    }),
                    Some(Owner::Mcp {
                        server: first_server,
                        tool: first_tool,
                    }) => problems.push(NameError::Clash {
                        name,
                        first_server: first_server.clone(),
                        first_tool: first_tool.clone(),
                        second_server: spec.key.clone(),
                        second_tool: tool.clone(),
                    }),
                }
            }
        }
        let mut keys: BTreeMap<String, &str> = BTreeMap::new();
        for spec in specs {
            if !tau_api::config::is_valid_server_key(&spec.key) {
                problems.push(NameError::ServerKey(spec.key.clone()));
            }
            let folded = tau_api::config::fold_server_key(&spec.key);
            if let Some(first) = keys.get(&folded) {
                if *first != spec.key {
                    problems.push(NameError::ServerKeys {
                        first: (*first).to_owned(),
                        second: spec.key.clone(),
                    });
                }
            } else {
                keys.insert(folded, &spec.key);
            }
        }
        (table, problems)
    }

    /// Whether `server`'s tool `tool`, named `name`, may be offered: `Err` says who owns the name
    /// instead. A name the table does not hold is free (every tiered tool is in it).
    pub fn claim(&self, name: &str, server: &str, tool: &str) -> Result<(), NameTaken> {
        match self.owners.get(&fold_name(name)) {
            None => Ok(()),
            Some(Owner::Mcp { server: s, tool: t }) if s == server && t == tool => Ok(()),
            Some(Owner::Mcp { server: s, tool: t }) => Err(NameTaken::Mcp {
                name: name.to_owned(),
                server: s.clone(),
                tool: t.clone(),
            }),
            Some(Owner::Builtin) => Err(NameTaken::Builtin(name.to_owned())),
        }
    }
}

/// The first reason `specs` cannot all be offered under names of their own (see the module's
/// rule): a clash of names, a name of a built-in tool, or a server key that could make names
/// ambiguous. One line, naming both servers and tools.
pub fn check_names(specs: &[McpServerSpec]) -> Result<(), NameError> {
    match NameTable::build(specs).1.into_iter().next() {
        Some(problem) => Err(problem),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::Tier;
    use tau_api::env::Env;

    fn spec(key: &str, tools: &[&str]) -> McpServerSpec {
        tools
            .iter()
            .fold(McpServerSpec::new(key, "x", &Env::new()), |spec, tool| {
                spec.tool(tool, Tier::Read, None)
            })
    }

    #[test]
    fn a_with_dunder_b_and_a_underscore_with_underscore_b_never_share_a_name() {
        // Both were offered as `mcp__a____b`; with `a` down, an approval for `a`'s tool fired
        // `a_`'s. tau.toml no longer takes the key `a_`; specs built otherwise are refused here.
        assert!(!tau_api::config::is_valid_server_key("a_"));
        let specs = [spec("a", &["__b"]), spec("a_", &["_b"])];
        let err = check_names(&specs).unwrap_err();
        assert_eq!(
            err.to_string(),
            "MCP server 'a' tool '__b' and MCP server 'a_' tool '_b' would both reach the model as 'mcp__a____b' (names that differ only in '-' versus '_' count as one): rename a server or tier only one of them"
        );
        // Whichever server is up, the name stays `a`'s.
        let (table, problems) = NameTable::build(&specs);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert_eq!(problems[1], NameError::ServerKey("a_".into()));
        assert_eq!(table.claim("mcp__a____b", "a", "__b"), Ok(()));
        assert_eq!(
            table
                .claim("mcp__a____b", "a_", "_b")
                .unwrap_err()
                .to_string(),
            "its name mcp__a____b belongs to MCP server 'a' tool '__b'"
        );
    }

    #[test]
    fn sanitised_names_of_one_server_get_names_of_their_own() {
        // `a.b` was `mcp__home__a_b` while alone; now it is hashed, always, and `a_b` keeps
        // the plain name.
        check_names(&[
            spec("home", &["lamp", "a.b", "a_b", "a b", "ü"]),
            spec("away", &["lamp", "a.b"]),
        ])
        .unwrap();
        assert_ne!(model_name("home", "a.b"), "mcp__home__a_b");
        assert_eq!(model_name("home", "a.b"), model_name("home", "a.b"));
        assert_ne!(model_name("home", "a.b"), model_name("home", "a b"));
    }

    #[test]
    fn clashes_left_are_refused_naming_both() {
        let err = check_names(&[spec("home", &["a-b", "a_b"])]).unwrap_err();
        assert_eq!(
            err,
            NameError::Clash {
                name: "mcp__home__a_b".into(),
                first_server: "home".into(),
                first_tool: "a-b".into(),
                second_server: "home".into(),
                second_tool: "a_b".into(),
            }
        );
        assert!(!err.to_string().contains('\n'));
        assert_eq!(
            check_names(&[
                spec("home", &["x"]),
                spec("home_lab", &[]),
                spec("home-lab", &[])
            ]),
            Err(NameError::ServerKeys {
                first: "home_lab".into(),
                second: "home-lab".into()
            })
        );
        assert_eq!(
            check_names(&[spec("Home", &[])]),
            Err(NameError::ServerKey("Home".into()))
        );
    }

    #[test]
    fn a_name_someone_else_owns_is_refused_at_listing() {
        let (table, problems) =
            NameTable::build(&[spec("home", &["lamp"]), spec("away", &["lamp"])]);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(table.claim("mcp__home__lamp", "home", "lamp"), Ok(()));
        assert_eq!(
            table.claim("mcp__home__lamp", "home", "lamp2"),
            Err(NameTaken::Mcp {
                name: "mcp__home__lamp".into(),
                server: "home".into(),
                tool: "lamp".into()
            })
        );
        assert_eq!(
            table
                .claim("current-time", "x", "y")
                .unwrap_err()
                .to_string(),
            "its name current-time is a built-in tool's"
        );
    }
}
