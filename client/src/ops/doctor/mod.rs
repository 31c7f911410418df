//! `tau doctor`: checks an installation without starting anything and prints one line per check
//! (ok / warn / fail), with the fix in one line when something is wrong; exit 1 when a check fails.
//!
//! The checks, in order: where TAU_HOME and TAU_DATA_DIR are and whether `.env` reads; the
//! configuration (and the TAU_* variables); each model role's provider and credentials (no client
//! is built); for roles on ollama or openai, whether the model server answers and has the model
//! (two seconds per server, `http://` servers only); the session store; the persona files; the names in `.env` against `.env.example`;
//! components that failed to register (hub services that failed to build or start, as a running
//! hub reports them in `GET /status`; without a hub, the built-in table only) and names in
//! `[components]` that nothing provides; who may read the private files; and whether a hub answers
//! on the control port (one second for both requests, information only).
//!
//! On a node (TAU_ROLE=node, or `[hub] role = "node"`, resolved by `Settings` as taud resolves
//! it) the checks only a hub needs (model roles and their servers, sessions, persona, Telegram,
//! routines) are skipped with one line saying so, and the node's pairing with its hub is checked
//! instead (`node_checks`); the configuration, `.env`, components, MCP servers, permissions and
//! the control port are checked as on a hub.
//!
//! Invariants: the doctor only reads (it creates, changes and deletes nothing, and contacts
//! nothing but 127.0.0.1 and the `http://` model servers the roles name); a problem in one area does not hide the checks that do not depend on it
//! (a broken `tau.toml` still gets its persona, `.env`, permission and hub lines); a planned
//! provider such as ollama and an unknown component name are warnings, not failures; no line shows
//! a variable's value.

mod credentials;
mod file_checks;
mod mcp_checks;
pub(crate) mod model_server;
mod node_checks;
mod report;
mod routine_checks;
mod store;
mod telegram_checks;

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use tau_api::components::{HubServiceReport, component_states, merge_hub_report, unknown_names};
use tau_api::config::{
    Config, ConfigSource, DEFAULT_CONTROL_PORT, KnownNames, NodeRole, PLANNED_PROVIDERS, Settings,
    hub_port_from_env, role_from_env,
};
use tau_api::dotenv::{self, Dotenv};
use tau_api::env::Env;
use tau_api::paths::{self, ENV_FILE_NAME, Paths};

use crate::cli::DoctorArgs;
use crate::context::Context;
use crate::environment;
use crate::hub_link::control_http as hub;

pub use self::report::{Check, Report, Status};

/// How long the hub probe may take in all.
const HUB_PROBE_DEADLINE: Duration = Duration::from_secs(1);

/// Runs `tau doctor`.
pub fn run(args: &DoctorArgs, ctx: &Context) -> anyhow::Result<ExitCode> {
    let env = environment::snapshot(ctx);
    let cwd = environment::current_dir()?;
    let report = diagnose(env, &cwd);
    if args.json {
        outln!("{}", report.to_json()?);
    } else {
        out!("{}", report.to_text());
    }
    Ok(report.exit_code())
}

/// Every check for the installation that `env` and `cwd` point at.
pub fn diagnose(mut env: Env, cwd: &Path) -> Report {
    let mut report = Report::default();
    let user_home = env.user_home();
    let home = match paths::resolve_home(&env, cwd, user_home.as_deref()) {
        Ok(home) => home,
        Err(e) => {
            report.push(Check::fail("paths", e.to_string()).fix("set HOME, or TAU_HOME"));
            return report;
        }
    };
    let mut dotenv_file: Option<Dotenv> = None;
    let env_file = home.join(ENV_FILE_NAME);
    match dotenv::load(&env_file) {
        Ok(Some(file)) => {
            let to_set = file.pairs_to_set(&env);
            env.fill_from(&to_set, &file.path);
            dotenv_file = Some(file);
        }
        Ok(None) => {}
        Err(e) => report.push(
            Check::fail(".env", e.to_string())
                .fix(format!("make {} a file you can read", env_file.display())),
        ),
    }
    let paths = match Paths::for_home(home, &env, cwd, user_home.as_deref()) {
        Ok(paths) => paths,
        Err(e) => {
            report.push(Check::fail("paths", e.to_string()).fix("set HOME, or TAU_DATA_DIR"));
            return report;
        }
    };

    let (config, role) = match config_checks(&mut report, &env, &paths) {
        Some((config, settings)) => (Some(config), settings.role),
        // Without a configuration, TAU_ROLE alone says (taud would not start either way).
        None => (None, role_from_env(&env).ok().flatten().unwrap_or_default()),
    };
    let node = role == NodeRole::Node;
    if node {
        // A node has no model and no agent: taud in the node role needs none of these.
        report.push(node_checks::skipped());
        report.push(node_checks::pairing(&paths.hub.dir));
    } else {
        if let Some(config) = &config {
            role_checks(&mut report, config, &env, &paths);
            for check in model_server::checks(config, &env) {
                report.push(check);
            }
            report.push(file_checks::sessions(config, &paths));
        }
        for check in file_checks::persona(&paths) {
            report.push(check);
        }
    }
    let problems = dotenv_file
        .as_ref()
        .map(|f| f.problems.clone())
        .unwrap_or_default();
    for check in file_checks::env_names(&paths, dotenv_file.as_ref(), &problems) {
        report.push(check);
    }
    let port = match &config {
        Some(config) => config.hub.control_port,
        None => hub_port_from_env(&env)
            .ok()
            .flatten()
            .unwrap_or(DEFAULT_CONTROL_PORT),
    };
    let (hub_line, services) = hub_check(port, &paths.hub.token_file);
    if let Some(config) = &config {
        component_checks(&mut report, config, services);
        for check in mcp_checks::checks(config, &env, &paths.hub.token_file) {
            report.push(check);
        }
        if !node {
            let telegram =
                telegram_checks::checks(config, &env, &paths.data_dir, &paths.hub.token_file);
            for check in telegram {
                report.push(check);
            }
        }
    }
    for check in file_checks::permissions(&paths) {
        report.push(check);
    }
    if !node {
        for check in routine_checks::checks(port, &paths.hub.token_file) {
            report.push(check);
        }
    }
    report.push(hub_line);
    report
}

/// Loads `tau.toml` (a planned provider is accepted here and warned about per role) and the TAU_*
/// variables; the config and the settings (the role among them, resolved as taud resolves it)
/// when they loaded.
fn config_checks(report: &mut Report, env: &Env, paths: &Paths) -> Option<(Config, Settings)> {
    let known = PLANNED_PROVIDERS
        .iter()
        .fold(KnownNames::builtin(), |k, p| k.with_provider(*p));
    let config = match Config::load_with(&paths.config_file, env, &known) {
        Ok(config) => config,
        Err(e) => {
            report.push(Check::fail("config", e.to_string()).fix(format!(
                "correct {} as the message says (`tau init --force` writes a fresh one)",
                paths.config_file.display()
            )));
            return None;
        }
    };
    let settings = match Settings::resolve(env, &config) {
        Ok(settings) => settings,
        Err(e) => {
            report.push(
                Check::fail("config", e.to_string())
                    .fix("correct the variable in the environment or .env, or unset it"),
            );
            return None;
        }
    };
    let summary = format!(
        "profile {}, role {}, UI language {}",
        settings.profile, settings.role, settings.lang
    );
    match config.source() {
        ConfigSource::File(file) => {
            report.push(Check::ok(
                "config",
                format!("{} ({summary})", file.display()),
            ));
        }
        ConfigSource::Defaults { provider } => report.push(
            Check::warn(
                "config",
                format!(
                    "no {}: running on the built-in defaults with provider {provider} ({summary})",
                    paths.config_file.display()
                ),
            )
            .fix("run `tau init` to write tau.toml and the persona files"),
        ),
    }
    for warning in &config.warnings {
        report.push(Check::warn("config", warning.clone()).fix(format!(
            "remove or rename that table in {}",
            paths.config_file.display()
        )));
    }
    Some((config, settings))
}

/// One line per model role (and per fallback): provider, model and credentials.
fn role_checks(report: &mut Report, config: &Config, env: &Env, paths: &Paths) {
    if config.role("brain").is_none() {
        report.push(
            Check::warn(
                "role brain",
                "no [models.roles.brain]: tau chat uses the brain role",
            )
            .fix(format!(
                "add [models.roles.brain] to {}",
                paths.config_file.display()
            )),
        );
    }
    for (name, role) in &config.models.roles {
        let verdict = credentials::check(&role.provider, env, &paths.env_file);
        let mut check = Check::new(
            format!("role {name}"),
            verdict.status,
            format!("{} ({}): {}", role.provider, role.model_id, verdict.message),
        );
        if let Some(fix) = verdict.fix {
            check = check.fix(fix);
        }
        report.push(check);
        if let Some(fallback) = &role.fallback {
            let verdict = credentials::check(&fallback.provider, env, &paths.env_file);
            // The role still has its first choice, so a fallback that cannot work is a warning.
            let status = verdict.status.min(Status::Warn);
            let mut check = Check::new(
                format!("role {name} fallback"),
                status,
                format!(
                    "{} ({}): {}",
                    fallback.provider, fallback.model_id, verdict.message
                ),
            );
            if let Some(fix) = verdict.fix {
                check = check.fix(fix);
            }
            report.push(check);
        }
    }
}

/// Components that failed to register (the built-in table, with what a running hub reports about
/// its services merged in), and `[components]` names that nothing provides.
///
/// `hub` is what the running hub reported, or why there is no report (`hub not running: built-in
/// table only`, or why a hub that answers did not list its services).
fn component_checks(
    report: &mut Report,
    config: &Config,
    hub: Result<Vec<HubServiceReport>, String>,
) {
    let mut states = component_states(config);
    let source = match &hub {
        Ok(reports) => {
            merge_hub_report(&mut states, reports);
            "with the running hub's services".to_string()
        }
        Err(why) => why.clone(),
    };
    let failed: Vec<_> = states.iter().filter(|s| s.load_error.is_some()).collect();
    if failed.is_empty() {
        report.push(Check::ok(
            "components",
            format!(
                "{} components, none failed to register ({source})",
                states.len()
            ),
        ));
    }
    for state in failed {
        report.push(
            Check::fail(
                "components",
                format!(
                    "{} '{}' from {} failed to load: {}",
                    state.kind.as_str(),
                    state.name,
                    state.distribution,
                    state.load_error.as_deref().unwrap_or_default()
                ),
            )
            .fix("run `tau components` for the details, and the hub's log (tau.log) for the cause"),
        );
    }
    let file = config
        .source()
        .file()
        .map(|f| f.display().to_string())
        .unwrap_or_else(|| "tau.toml".to_string());
    for unknown in unknown_names(&config.components) {
        report.push(
            Check::warn(
                "components",
                format!(
                    "{} names '{}', which no component provides",
                    unknown.key, unknown.name
                ),
            )
            .fix(format!(
                "check the spelling in {file} (`tau components` lists every name)"
            )),
        );
    }
}

/// The hub line, and the services a hub that answers reports (within the same one-second
/// deadline).
fn hub_check(port: u16, token_file: &Path) -> (Check, Result<Vec<HubServiceReport>, String>) {
    if port == 0 {
        let check = Check::ok(
            "hub",
            "the control port is 0 (chosen when the hub starts), so it was not probed",
        );
        return (check, Err(hub::NO_HUB.to_string()));
    }
    let until = Instant::now() + HUB_PROBE_DEADLINE;
    let probe = hub::probe(port, HUB_PROBE_DEADLINE);
    let answered = matches!(probe, hub::Probe::Hub { .. });
    let check = match probe {
        hub::Probe::Hub { pid, uptime_s } => {
            let mut about = Vec::new();
            if let Some(pid) = pid {
                about.push(format!("pid {pid}"));
            }
            if let Some(up) = uptime_s {
                about.push(format!("up {} s", up.round()));
            }
            let about = if about.is_empty() {
                String::new()
            } else {
                format!(" ({})", about.join(", "))
            };
            Check::ok("hub", format!("a hub answers on 127.0.0.1:{port}{about}"))
        }
        hub::Probe::NotRunning => Check::ok(
            "hub",
            format!("no hub on 127.0.0.1:{port} (`tau hub start` starts one, as tau chat does)"),
        ),
        hub::Probe::Unexpected(why) => Check::warn(
            "hub",
            format!("127.0.0.1:{port} does not answer like a tau hub: {why}"),
        )
        .fix("stop what listens there, or move the hub with TAU_HUB_PORT or [hub] control_port"),
    };
    if !answered {
        return (check, Err(hub::NO_HUB.to_string()));
    }
    let left = until.saturating_duration_since(Instant::now());
    let services = match hub::services(port, token_file, left) {
        hub::HubServices::Answered(reports) => Ok(reports),
        hub::HubServices::NotRunning => Err(hub::NO_HUB.to_string()),
        hub::HubServices::Unexpected(why) => Err(format!(
            "the hub did not list its services ({why}): built-in table only"
        )),
    };
    (check, services)
}
