//! `tau hub` commands against fake launchctl/systemctl and a temporary installation.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

use clap::Parser;

use super::service_manager::fakes::{Calls, FakeLaunchctl, FakeSystemctl};
use super::*;

struct Setup {
    tmp: tempfile::TempDir,
    calls: Calls,
}

impl Setup {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let taud = bin.join("taud");
        std::fs::write(&taud, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&taud, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self {
            tmp,
            calls: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn root(&self) -> std::path::PathBuf {
        self.tmp.path().canonicalize().unwrap()
    }

    fn ctx_with(
        &self,
        platform: Platform,
        launchctl: FakeLaunchctl,
        systemctl: FakeSystemctl,
    ) -> HubContext {
        let root = self.root();
        HubContext {
            paths: Paths::from_roots(root.join("home"), root.join("data")),
            user_home: root.join("user"),
            config_home: root.join("user/.config"),
            platform,
            uid: 501,
            exe_dir: Some(root.join("bin")),
            path_var: None,
            child_env: Vec::new(),
            verbose: false,
            env: tau_api::env::Env::new(),
            launchctl: Box::new(launchctl),
            systemctl: Box::new(systemctl),
        }
    }

    fn linux(&self) -> HubContext {
        self.ctx_with(
            Platform::Linux,
            FakeLaunchctl::default(),
            FakeSystemctl {
                calls: self.calls.clone(),
                enabled: "enabled".into(),
                active: "active".into(),
                unavailable: false,
            },
        )
    }

    fn mac(&self, loaded: Option<&str>) -> HubContext {
        self.ctx_with(
            Platform::MacOs,
            FakeLaunchctl {
                calls: self.calls.clone(),
                loaded: loaded.map(Into::into),
                bootout_fails: loaded.is_none(),
            },
            FakeSystemctl::default(),
        )
    }

    fn calls(&self) -> Vec<String> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

fn run_to_string(cmd: HubCommand, ctx: &HubContext) -> (anyhow::Result<ExitCode>, String) {
    let mut out = Vec::new();
    let result = run_with(cmd, ctx, &mut out);
    (result, String::from_utf8(out).unwrap())
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn linux_install_writes_the_unit_and_enables_it_and_uninstall_undoes_it() {
    let s = Setup::new();
    let ctx = s.linux();
    let (result, out) = run_to_string(HubCommand::Install { role: None }, &ctx);
    result.unwrap();
    let unit_path = s.root().join("user/.config/systemd/user/taud.service");
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    assert!(unit.contains(&format!(
        "ExecStart=\"{}\"",
        s.root().join("bin/taud").display()
    )));
    assert!(unit.contains(&format!(
        "Environment=\"TAU_DATA_DIR={}\"",
        s.root().join("data").display()
    )));
    assert_eq!(s.calls(), ["daemon-reload", "enable --now taud.service"]);
    assert!(out.contains("started taud.service"), "{out}");
    assert!(out.contains("enable-linger"), "{out}");
    assert_eq!(mode(&s.root().join("data")), 0o700);
    assert_eq!(mode(&s.root().join("data/logs")), 0o700);

    let (result, out) = run_to_string(HubCommand::Uninstall, &ctx);
    result.unwrap();
    assert!(!unit_path.exists());
    assert_eq!(s.calls(), ["disable --now taud.service", "daemon-reload"]);
    assert!(out.contains("removed"), "{out}");

    let (result, out) = run_to_string(HubCommand::Uninstall, &ctx);
    result.unwrap();
    assert!(out.contains("not installed"), "{out}");
    assert!(s.calls().is_empty());
}

#[test]
fn mac_install_bootstraps_the_agent_and_uninstall_boots_it_out() {
    let s = Setup::new();
    let ctx = s.mac(None);
    let (result, out) = run_to_string(HubCommand::Install { role: None }, &ctx);
    result.unwrap();
    let plist = s
        .root()
        .join("user/Library/LaunchAgents/dev.tau.taud.plist");
    let text = std::fs::read_to_string(&plist).unwrap();
    assert!(text.contains(&format!(
        "<string>{}</string>",
        s.root().join("bin/taud").display()
    )));
    assert!(text.contains(&format!(
        "<string>{}</string>",
        s.root().join("data/logs/taud.launchd.log").display()
    )));
    assert_eq!(
        s.calls(),
        [
            "bootout gui/501/dev.tau.taud".to_owned(),
            "enable gui/501/dev.tau.taud".to_owned(),
            format!("bootstrap gui/501 {}", plist.display()),
        ]
    );
    assert!(out.contains("loaded gui/501/dev.tau.taud"), "{out}");

    let loaded = s.mac(Some("state = running\n"));
    let (result, _) = run_to_string(HubCommand::Uninstall, &loaded);
    result.unwrap();
    assert!(!plist.exists());
    assert_eq!(s.calls(), ["bootout gui/501/dev.tau.taud"]);
}

#[test]
fn install_refuses_other_platforms_and_a_missing_taud() {
    let s = Setup::new();
    let other = s.ctx_with(
        Platform::Other,
        FakeLaunchctl::default(),
        FakeSystemctl::default(),
    );
    let err = run_to_string(HubCommand::Install { role: None }, &other)
        .0
        .unwrap_err();
    assert!(err.to_string().contains("supports macOS"), "{err}");

    let mut ctx = s.linux();
    ctx.exe_dir = Some(s.root().join("nowhere"));
    let err = run_to_string(HubCommand::Install { role: None }, &ctx)
        .0
        .unwrap_err();
    assert!(err.to_string().contains("cannot find taud"), "{err}");
    assert!(s.calls().is_empty(), "nothing was enabled");
}

#[test]
fn taud_is_found_beside_tau_then_on_path() {
    let s = Setup::new();
    let mut ctx = s.linux();
    assert_eq!(ctx.find_taud(), Some(s.root().join("bin/taud")));
    ctx.exe_dir = Some(s.root().join("elsewhere"));
    ctx.path_var =
        Some(std::env::join_paths([s.root().join("nope"), s.root().join("bin")]).unwrap());
    assert_eq!(ctx.find_taud(), Some(s.root().join("bin/taud")));
    ctx.path_var = Some("relative/bin".into());
    assert_eq!(ctx.find_taud(), None, "relative PATH entries are ignored");

    let mut ctx = s.linux();
    ctx.verbose = true;
    ctx.child_env = vec![("TAU_LANG", "tr".into())];
    let cmd = ctx.taud_command().unwrap();
    assert_eq!(cmd.get_program(), s.root().join("bin/taud"));
    assert_eq!(cmd.get_args().collect::<Vec<_>>(), ["--verbose"]);
    assert!(
        cmd.get_envs()
            .any(|(k, v)| k == "TAU_LANG" && v == Some("tr".as_ref()))
    );
}

#[test]
fn status_of_a_stopped_hub_exits_3_and_has_json() {
    let s = Setup::new();
    let ctx = s.linux();
    let (code, text) = run_to_string(HubCommand::Status { json: false }, &ctx);
    assert_eq!(code.unwrap(), ExitCode::from(NOT_RUNNING));
    assert!(text.starts_with("tau hub: not running\n"), "{text}");
    assert!(
        text.contains("systemd:    taud.service not installed"),
        "{text}"
    );

    let (code, json) = run_to_string(HubCommand::Status { json: true }, &ctx);
    assert_eq!(code.unwrap(), ExitCode::from(NOT_RUNNING));
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["running"], false);
    assert_eq!(value["service_manager"]["installed"], false);
}

/// Writes the `state.json` of a hub `pid` that started and beat just now.
fn write_state(ctx: &HubContext, pid: u32, listening_port: Option<u16>, ready_at: Option<&str>) {
    let now = jiff::Timestamp::now().to_string();
    let state = tau_api::hub_files::HubState {
        version: tau_api::hub_files::FORMAT_VERSION,
        pid,
        started_at: now.clone(),
        heartbeat_at: now,
        stopped_at: None,
        heartbeat_seconds: 30,
        control_port: 0,
        listening_port,
        ready_at: ready_at.map(Into::into),
        profile: "home".into(),
        role: "hub".into(),
        tau_version: "0.1.0".into(),
    };
    std::fs::write(
        &ctx.paths.hub.state_file,
        serde_json::to_string(&state).unwrap(),
    )
    .unwrap();
}

#[test]
fn status_of_a_running_hub_reads_the_lock_and_state() {
    let s = Setup::new();
    let ctx = s.linux();
    let _held = super::probe::tests::hold_lock(&ctx.paths.hub, 4242);
    write_state(&ctx, 4242, Some(40123), Some("2026-12-01T00:00:00Z"));
    std::fs::create_dir_all(ctx.config_home.join("systemd/user")).unwrap();
    std::fs::write(ctx.config_home.join("systemd/user/taud.service"), "").unwrap();
    let (code, text) = run_to_string(HubCommand::Status { json: false }, &ctx);
    assert_eq!(code.unwrap(), ExitCode::SUCCESS);
    assert!(text.starts_with("tau hub: running (pid 4242)\n"), "{text}");
    assert!(
        text.contains("control:    http://127.0.0.1:40123"),
        "{text}"
    );
    assert!(
        text.contains("systemd:    taud.service enabled, active"),
        "{text}"
    );
    assert_eq!(
        s.calls(),
        ["is-enabled taud.service", "is-active taud.service"]
    );
}

#[test]
fn status_of_a_hub_still_starting_says_so() {
    let s = Setup::new();
    let ctx = s.linux();
    let _held = super::probe::tests::hold_lock(&ctx.paths.hub, 4243);
    write_state(&ctx, 4243, None, None);
    let (code, text) = run_to_string(HubCommand::Status { json: false }, &ctx);
    assert_eq!(code.unwrap(), ExitCode::SUCCESS, "a starting hub runs");
    assert!(text.starts_with("tau hub: starting (pid 4243): "), "{text}");
    let (_, json) = run_to_string(HubCommand::Status { json: true }, &ctx);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["running"], true);
    assert_eq!(json["ready"], false);
}

#[test]
fn status_reports_an_unreachable_systemd() {
    let s = Setup::new();
    let ctx = s.ctx_with(
        Platform::Linux,
        FakeLaunchctl::default(),
        FakeSystemctl {
            unavailable: true,
            ..FakeSystemctl::default()
        },
    );
    std::fs::create_dir_all(ctx.config_home.join("systemd/user")).unwrap();
    std::fs::write(ctx.config_home.join("systemd/user/taud.service"), "").unwrap();
    let (_, text) = run_to_string(HubCommand::Status { json: false }, &ctx);
    assert!(
        text.contains("systemctl: Failed to connect to bus"),
        "{text}"
    );
}

#[test]
fn install_says_what_it_wrote_when_systemd_is_unreachable() {
    let s = Setup::new();
    let ctx = s.ctx_with(
        Platform::Linux,
        FakeLaunchctl::default(),
        FakeSystemctl {
            unavailable: true,
            ..FakeSystemctl::default()
        },
    );
    let err = run_to_string(HubCommand::Install { role: None }, &ctx)
        .0
        .unwrap_err();
    let unit = s.root().join("user/.config/systemd/user/taud.service");
    assert_eq!(
        err.to_string(),
        format!(
            "wrote {}, but could not start it: `systemctl --user daemon-reload` failed: Failed to connect to bus: No medium found",
            unit.display()
        )
    );
    assert!(unit.exists());
}

#[test]
fn status_on_a_mac_shows_launchd() {
    let s = Setup::new();
    let ctx = s.mac(Some("\tstate = running\n\tpid = 99\n"));
    let (_, text) = run_to_string(HubCommand::Status { json: false }, &ctx);
    assert!(
        text.contains("launchd:    dev.tau.taud loaded, running, pid 99"),
        "{text}"
    );
}

#[test]
fn stop_without_a_hub_says_so() {
    let s = Setup::new();
    let (code, text) = run_to_string(HubCommand::Stop { timeout: 1 }, &s.linux());
    assert_eq!(code.unwrap(), ExitCode::SUCCESS);
    assert_eq!(text, "tau hub is not running\n");
}

#[test]
fn systemd_unit_prints_this_installations_unit() {
    let s = Setup::new();
    let (code, text) = run_to_string(HubCommand::SystemdUnit { role: None }, &s.mac(None));
    code.unwrap();
    assert!(text.starts_with("# tau hub (taud)"), "{text}");
    assert!(text.contains(&s.root().join("data").display().to_string()));
    assert!(s.calls().is_empty(), "printing calls no service manager");
}

/// How the lead wires `HubCommand` into the CLI: `#[command(subcommand)] Hub(HubCommand)`.
#[test]
fn hub_command_nests_under_a_cli() {
    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        command: Top,
    }
    #[derive(Debug, clap::Subcommand)]
    enum Top {
        #[command(subcommand)]
        Hub(HubCommand),
    }
    let parse = |args: &[&str]| match Cli::try_parse_from(args).unwrap().command {
        Top::Hub(cmd) => cmd,
    };
    assert_eq!(
        parse(&["tau", "hub", "stop", "--timeout", "3"]),
        HubCommand::Stop { timeout: 3 }
    );
    assert_eq!(
        parse(&["tau", "hub", "stop"]),
        HubCommand::Stop { timeout: 15 }
    );
    assert_eq!(
        parse(&["tau", "hub", "status", "--json"]),
        HubCommand::Status { json: true }
    );
    assert_eq!(
        parse(&["tau", "hub", "systemd-unit"]),
        HubCommand::SystemdUnit { role: None }
    );
    assert_eq!(
        parse(&["tau", "hub", "install", "--role", "node"]),
        HubCommand::Install {
            role: Some(crate::cli::RoleArg::Node)
        }
    );
    assert_eq!(
        parse(&["tau", "hub", "install"]),
        HubCommand::Install { role: None }
    );
    assert_eq!(parse(&["tau", "hub", "run"]), HubCommand::Run);
}

#[test]
fn install_over_a_running_hub_says_how_to_hand_over_to_the_service() {
    let s = Setup::new();
    let ctx = s.linux();
    let _held = super::probe::tests::hold_lock(&ctx.paths.hub, 4242);
    let (result, out) = run_to_string(HubCommand::Install { role: None }, &ctx);
    result.unwrap();
    assert!(out.contains("a hub is already running (pid 4242)"), "{out}");
    assert!(
        out.contains("run `tau hub stop`, then `systemctl --user restart taud.service`"),
        "{out}"
    );
    assert!(!out.contains("starts once it stops"), "{out}");

    let ctx = s.mac(None);
    let (result, out) = run_to_string(HubCommand::Install { role: None }, &ctx);
    result.unwrap();
    assert!(
        out.contains(&format!(
            "run `tau hub stop`, then `launchctl kickstart -k gui/{}/dev.tau.taud`",
            ctx.uid
        )),
        "{out}"
    );
}

#[test]
fn start_runs_through_the_one_auto_start_and_reports_a_hub_that_exits_at_once() {
    let s = Setup::new();
    let ctx = s.linux();
    let (code, out) = run_to_string(
        HubCommand::Start {
            timeout: 5,
            json: false,
        },
        &ctx,
    );
    // The fake taud exits at once without answering: no hub, said on stderr, nothing on stdout.
    assert_eq!(
        format!("{:?}", code.unwrap()),
        format!("{:?}", ExitCode::from(crate::hub_link::EXIT_NO_HUB))
    );
    assert_eq!(out, "");
    let log = ctx.paths.logs_dir.join("taud.out");
    assert!(log.exists(), "the started taud's output goes to {log:?}");
    assert_eq!(mode(&log), 0o600);
}

/// The `Environment=` lines of the unit `tau hub install` wrote on Linux.
fn installed_environment(
    s: &Setup,
    ctx: &HubContext,
    role: Option<crate::cli::RoleArg>,
) -> Vec<String> {
    let (result, out) = run_to_string(HubCommand::Install { role }, ctx);
    result.unwrap();
    let unit =
        std::fs::read_to_string(s.root().join("user/.config/systemd/user/taud.service")).unwrap();
    let lines: Vec<String> = unit
        .lines()
        .filter_map(|l| l.strip_prefix("Environment="))
        .map(str::to_owned)
        .collect();
    let says = out.contains("the service runs taud as a node (TAU_ROLE=node)");
    assert_eq!(
        says,
        lines.iter().any(|l| l == "\"TAU_ROLE=node\""),
        "{out}"
    );
    lines
}

#[test]
fn install_on_a_node_writes_tau_role_from_the_flag_the_environment_or_tau_toml() {
    let role_line = "\"TAU_ROLE=node\"".to_owned();
    // A hub: no role written, the output says nothing of one.
    let s = Setup::new();
    let env = installed_environment(&s, &s.linux(), None);
    assert_eq!(env.len(), 2, "{env:?}");

    // `[hub] role = "node"` in tau.toml.
    let s = Setup::new();
    let ctx = s.linux();
    std::fs::create_dir_all(&ctx.paths.home).unwrap();
    std::fs::write(&ctx.paths.config_file, "[hub]\nrole = \"node\"\n").unwrap();
    assert_eq!(installed_environment(&s, &ctx, None)[2], role_line);
    // --role hub wins over tau.toml.
    let env = installed_environment(&s, &ctx, Some(crate::cli::RoleArg::Hub));
    assert_eq!(env[2], "\"TAU_ROLE=hub\"");

    // TAU_ROLE in the environment of `tau hub install` (a service does not inherit it).
    let s = Setup::new();
    let mut ctx = s.linux();
    ctx.env.set("TAU_ROLE", "node");
    assert_eq!(installed_environment(&s, &ctx, None)[2], role_line);
    // Spelled as taud reads it (any case, spaces around it).
    let s = Setup::new();
    let mut ctx = s.linux();
    ctx.env.set("TAU_ROLE", " Node ");
    assert_eq!(installed_environment(&s, &ctx, None)[2], role_line);

    // --role node alone.
    let s = Setup::new();
    let env = installed_environment(&s, &s.linux(), Some(crate::cli::RoleArg::Node));
    assert_eq!(env[2], role_line);

    // The plist of a node on a Mac.
    let s = Setup::new();
    let mut ctx = s.mac(Some("state = running"));
    ctx.env.set("TAU_ROLE", "node");
    let (result, out) = run_to_string(HubCommand::Install { role: None }, &ctx);
    result.unwrap();
    assert!(out.contains("TAU_ROLE=node"), "{out}");
    let plist = std::fs::read_to_string(
        s.root()
            .join("user/Library/LaunchAgents/dev.tau.taud.plist"),
    )
    .unwrap();
    assert!(
        plist.contains("<key>TAU_ROLE</key>\n    <string>node</string>"),
        "{plist}"
    );

    // `tau hub systemd-unit` prints what install writes.
    let (code, unit) = run_to_string(HubCommand::SystemdUnit { role: None }, &ctx);
    code.unwrap();
    assert!(
        unit.lines().any(|l| l == "Environment=\"TAU_ROLE=node\""),
        "{unit}"
    );
}

#[test]
fn install_refuses_a_bad_tau_role_and_warns_of_a_broken_tau_toml() {
    let s = Setup::new();
    let mut ctx = s.linux();
    ctx.env.set("TAU_ROLE", "server");
    let err = run_to_string(HubCommand::Install { role: None }, &ctx)
        .0
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "environment variable TAU_ROLE = \"server\": expected \"hub\" or \"node\""
    );
    assert!(s.calls().is_empty(), "nothing installed");

    let s = Setup::new();
    let ctx = s.linux();
    std::fs::create_dir_all(&ctx.paths.home).unwrap();
    std::fs::write(&ctx.paths.config_file, "[hub]\nrole = \"satellite\"\n").unwrap();
    let (result, out) = run_to_string(HubCommand::Install { role: None }, &ctx);
    result.unwrap();
    assert!(out.starts_with("warning: "), "{out}");
    assert!(out.contains("hub.role"), "{out}");
    assert!(
        out.contains("taud will refuse to start until it is fixed"),
        "{out}"
    );
}
