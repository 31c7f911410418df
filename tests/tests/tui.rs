//! `tau tui` end to end: the real `taud` with the offline fake model, the real `tau tui` in a
//! private tmux server (a terminal emulator that answers the TUI's queries and brackets pastes),
//! typed the way a person types. Skipped, with a message, when tmux is not installed.

use std::process::Command;
use std::time::Duration;

use tau_api::proto::v1 as pb;
use tau_e2e::chat::{ChatSandbox, wait_until};

const LAMP: &str = "turn on the lamp";
const TOOL: &str = "demo_physical_action";

/// A private tmux server running `tau tui`; killed on drop.
struct Screen {
    server: String,
}

impl Screen {
    fn start(env: &ChatSandbox) -> anyhow::Result<Self> {
        let tau = env.command("tau")?;
        let server = format!("tau-tui-test-{}-{}", std::process::id(), env.port);
        let mut command = Command::new("tmux");
        command.args(["-L", &server, "-f", "/dev/null", "new-session", "-d"]);
        command.args(["-x", "160", "-y", "45", "-s", "t", "--", "env", "-i"]);
        for (key, value) in tau.get_envs() {
            if let Some(value) = value {
                command.arg(format!(
                    "{}={}",
                    key.to_string_lossy(),
                    value.to_string_lossy()
                ));
            }
        }
        command.arg("TERM=xterm-256color");
        command.arg(tau.get_program()).arg("tui");
        if let Some(dir) = tau.get_current_dir() {
            command.current_dir(dir);
        }
        let status = command.status()?;
        anyhow::ensure!(status.success(), "tmux new-session failed: {status}");
        Ok(Self { server })
    }

    fn tmux(&self, args: &[&str]) -> anyhow::Result<String> {
        let output = Command::new("tmux")
            .args(["-L", &self.server])
            .args(args)
            .output()?;
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    fn contents(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "t"])
            .unwrap_or_default()
    }

    fn see(&self, text: &str) -> String {
        let mut last = String::new();
        let found = wait_until(Duration::from_secs(30), text, || {
            last = self.contents();
            last.contains(text)
        });
        assert!(found.is_ok(), "never saw {text:?}:\n{last}");
        last
    }

    fn type_text(&self, text: &str) -> anyhow::Result<()> {
        self.tmux(&["send-keys", "-t", "t", "-l", text])?;
        Ok(())
    }

    fn key(&self, key: &str) -> anyhow::Result<()> {
        self.tmux(&["send-keys", "-t", "t", key])?;
        Ok(())
    }

    /// A bracketed paste of `text`.
    fn paste(&self, text: &str) -> anyhow::Result<()> {
        self.tmux(&["set-buffer", "--", text])?;
        self.tmux(&["paste-buffer", "-p", "-t", "t"])?;
        Ok(())
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// Whether tmux runs here; CI (`TAU_REQUIRE_TMUX=1`, set by `.ci/run`, which installs it) fails
/// instead of skipping.
fn tmux_available() -> bool {
    let available = Command::new("tmux").arg("-V").output().is_ok();
    assert!(
        available || std::env::var_os("TAU_REQUIRE_TMUX").is_none_or(|v| v != "1"),
        "TAU_REQUIRE_TMUX=1 but tmux does not run"
    );
    available
}

/// How the hub recorded the approval of each call of [`TOOL`], in order (`approved`, `rejected`).
fn approvals(env: &ChatSandbox) -> Vec<String> {
    let Ok(listing) = env.with_client(async |client| {
        Ok(client
            .list_sessions(pb::ListSessionsRequest::default())
            .await?
            .into_inner()
            .sessions)
    }) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for session in listing {
        for event in env.events(&session.session_id).unwrap_or_default() {
            let Ok(record) = serde_json::from_str::<serde_json::Value>(&event.json) else {
                continue;
            };
            if event.r#type == "tool_call" && record["tool"] == TOOL {
                out.push(record["approval"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    out
}

/// The ids of the hub's sessions.
fn session_ids(env: &ChatSandbox) -> Vec<String> {
    env.with_client(async |client| {
        Ok(client
            .list_sessions(pb::ListSessionsRequest::default())
            .await?
            .into_inner()
            .sessions
            .into_iter()
            .map(|s| s.session_id)
            .collect())
    })
    .unwrap_or_default()
}

#[test]
fn the_approval_card_ignores_early_keys_and_pastes_and_enter_rejects() {
    if !tmux_available() {
        eprintln!("skipped: tmux is not installed");
        return;
    }
    let env = ChatSandbox::new().unwrap();
    let _hub = env.start_hub().unwrap();
    let screen = Screen::start(&env).unwrap();
    screen.see("is ready");
    // The status line: profile, role → provider, context mode, hub, state, pending approvals.
    screen.see("→ fake");
    screen.see("idle · !0");

    // `y` typed at once does not approve; `y` after the delay does, and the tool runs.
    screen.type_text(LAMP).unwrap();
    screen.key("Enter").unwrap();
    screen.see("(arming…)");
    screen.type_text("y").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let shown = screen.see("(arming…)");
    assert!(!shown.contains(&format!("{TOOL}: approved")), "{shown}");
    assert!(approvals(&env).is_empty(), "an early y decided something");
    screen.see("Tab switch");
    screen.type_text("y").unwrap();
    screen.see(&format!("✓ {TOOL}: approved · tier 2"));
    // Typed right after the decision: every key is the composer's, none dismisses the card.
    screen.type_text("hello there").unwrap();
    screen.see("Done. Simulated");
    // The live line names the tier people read (2), not the wire enum's number.
    screen.see(&format!("✓ {TOOL} · tier 2 · success"));
    wait_until(Duration::from_secs(10), "the approval stored", || {
        approvals(&env) == ["approved"]
    })
    .unwrap();
    screen.key("Enter").unwrap();
    screen.see("You said: \"hello there\"");

    // A bracketed paste containing `y` and Enter never approves; then Enter (focus on Reject)
    // rejects, and the refusal reaches the reply.
    screen.type_text(LAMP).unwrap();
    screen.key("Enter").unwrap();
    screen.see("(arming…)");
    screen.see("Tab switch");
    screen.paste("y\r").unwrap();
    screen.see("Paste ignored.");
    std::thread::sleep(Duration::from_millis(200));
    screen.see("(arming…)");
    assert_eq!(approvals(&env), ["approved"], "the paste decided something");
    screen.see("Tab switch");
    screen.key("Enter").unwrap();
    screen.see(&format!("✗ {TOOL}: not approved · tier 2"));
    screen.see("the action was not approved");
    wait_until(Duration::from_secs(10), "the rejection stored", || {
        approvals(&env) == ["approved", "rejected"]
    })
    .unwrap();

    // `/resume` replays the session's stored events into the events pane.
    let session = screen
        .contents()
        .lines()
        .find_map(|l| {
            l.split("session ").nth(1).map(|rest| {
                rest.split_whitespace()
                    .next()
                    .unwrap_or("")
                    .trim_end_matches('.')
                    .to_owned()
            })
        })
        .unwrap_or_default();
    screen.type_text("/new").unwrap();
    screen.key("Enter").unwrap();
    wait_until(Duration::from_secs(10), "a fresh events pane", || {
        !screen.contents().contains(&format!("✓ {TOOL} · tier"))
    })
    .unwrap();
    let stored = session_ids(&env);
    assert!(stored.contains(&session), "{session:?} not in {stored:?}");
    screen.type_text(&format!("/resume {session}")).unwrap();
    screen.key("Enter").unwrap();
    screen.see(&format!("✓ {TOOL} · tier 2"));
    screen.see(&format!("✗ {TOOL} · tier 2"));
    // The TUI's resident memory, for the record (`--nocapture` shows it).
    let pid = screen
        .tmux(&["display-message", "-p", "-t", "t", "#{pane_pid}"])
        .unwrap_or_default();
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", pid.trim())).unwrap_or_default();
    if let Some(rss) = status.lines().find(|l| l.starts_with("VmRSS")) {
        eprintln!("tau tui {rss}");
    }

    screen.type_text("/quit").unwrap();
    screen.key("Enter").unwrap();
    wait_until(Duration::from_secs(10), "tau tui to leave", || {
        !screen.contents().contains("Conversation")
    })
    .unwrap();
}

#[test]
fn sigterm_with_the_card_open_restores_the_terminal_and_approves_nothing() {
    if !tmux_available() {
        eprintln!("skipped: tmux is not installed");
        return;
    }
    let env = ChatSandbox::new().unwrap();
    let _hub = env.start_hub().unwrap();
    let screen = Screen::start(&env).unwrap();
    screen
        .tmux(&["set-option", "-t", "t", "remain-on-exit", "on"])
        .unwrap();
    screen.see("is ready");
    let format = |f: &str| {
        screen
            .tmux(&["display-message", "-p", "-t", "t", f])
            .unwrap()
            .trim()
            .to_owned()
    };
    assert_eq!(
        format("#{alternate_on}"),
        "1",
        "the TUI uses the alternate screen"
    );
    screen.type_text(LAMP).unwrap();
    screen.key("Enter").unwrap();
    screen.see("Tab switch");
    let pid: i32 = format("#{pane_pid}").parse().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    wait_until(Duration::from_secs(10), "tau tui to exit", || {
        format("#{pane_dead}") == "1"
    })
    .unwrap();
    assert_eq!(format("#{alternate_on}"), "0", "left the alternate screen");
    // The hub rejects the call when the channel goes away; nothing approved it.
    wait_until(Duration::from_secs(20), "the call recorded", || {
        !approvals(&env).is_empty()
    })
    .unwrap();
    assert!(
        approvals(&env).iter().all(|a| a != "approved"),
        "{:?}",
        approvals(&env)
    );
}
