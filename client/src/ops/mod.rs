//! The install and operations room of `tau`: the commands that set up, inspect and run an
//! installation rather than talk to tau. `tau init` ([`init`], with [`shipped_files`], the files
//! it writes), `tau doctor` ([`doctor`], read-only checks), `tau hub …` ([`hubctl`]: run, start,
//! status, stop, install and uninstall as a service), `tau components`, `tau version`,
//! `tau mcp …` (the MCP servers and their tiers), `tau telegram …` (pairing the channel),
//! `tau web …` (the web client's devices), and `tau completions` / `tau man` ([`shell_docs`]).
//!
//! May import: `cli`, `context`, `environment`, `hub_link`, `http_get`, `plugin_commands` and the
//! client library; nothing of the conversation commands (`chat`, `tui`, `ask`, `approvals`), and
//! none of them imports this room (a hub is started through `crate::hub_link::auto_start`).
//!
//! Invariants: the client never links the daemon (`tau hub run` execs `taud`); nothing here
//! decides an approval; `doctor`, `components`, `version` and `hub status` only read; a command
//! that needs a hub says so in one line when none answers; no secret is ever printed.

pub mod components;
pub mod doctor;
pub mod hubctl;
pub mod init;
pub mod mcp;
pub mod shell_docs;
pub mod shipped_files;
pub mod telegram;
pub mod version;
pub mod web;
