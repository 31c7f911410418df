//! `tau chat` end to end with an MCP server: the real `taud` starts the fake MCP server of the
//! daemon's tests (`daemon/tests/fixtures/fake_mcp.py`, Python's standard library only), the
//! offline demo model calls its tier-2 tool when the user names it, and the person approves or
//! rejects it on a pseudo-terminal.

use std::time::Duration;

use rexpect::session::PtySession;
use tau_e2e::chat::{ChatSandbox, HubGuard, wait_until};

const TOOL: &str = "mcp__fake__lamp";
const EFFECT: &str = "Switches the test lamp.";

/// rexpect reads the terminal byte by byte as Latin-1 characters: match UTF-8 text as its bytes.
fn see(chat: &mut PtySession, text: &str) -> anyhow::Result<String> {
    let latin1: String = text.bytes().map(char::from).collect();
    Ok(chat.exp_string(&latin1)?)
}

/// An installation whose tau.toml runs the fake MCP server with `lamp` at tier 2, and its hub,
/// once the server is ready.
fn hub_with_mcp(env: &ChatSandbox) -> anyhow::Result<HubGuard> {
    let home = env.sandbox.home();
    std::fs::create_dir_all(home.join("persona"))?;
    std::fs::write(
        home.join("persona/persona.md"),
        include_str!("../../persona/persona.md"),
    )?;
    let server = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../daemon/tests/fixtures/fake_mcp.py")
        .canonicalize()?;
    let calls = home.join("mcp-calls.jsonl");
    std::fs::write(
        home.join("tau.toml"),
        format!(
            "[models.roles.brain]\nprovider = \"fake\"\nmodel_id = \"fake\"\n\n\
             [mcp.servers.fake]\ncommand = \"python3\"\nargs = [{server:?}, \"--calls\", {calls:?}]\n\n\
             [mcp.servers.fake.tools.lamp]\ntier = 2\neffect = \"{EFFECT}\"\n",
            server = server.display().to_string(),
            calls = calls.display().to_string(),
        ),
    )?;
    let hub = env.start_hub()?;
    wait_until(
        Duration::from_secs(30),
        "the MCP server to be ready",
        || {
            env.command("tau")
                .and_then(|mut c| Ok(c.args(["mcp", "list", "--json"]).output()?))
                .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("\"ready\""))
        },
    )?;
    Ok(hub)
}

fn calls(env: &ChatSandbox) -> String {
    std::fs::read_to_string(env.sandbox.home().join("mcp-calls.jsonl")).unwrap_or_default()
}

#[test]
fn approving_a_tier_two_mcp_tool_runs_it_with_the_exact_arguments() {
    let env = ChatSandbox::new().unwrap();
    let _hub = hub_with_mcp(&env).unwrap();
    let mut chat = env.chat(&[]).unwrap();
    see(&mut chat, "is ready").unwrap();
    chat.send_line(&format!("call {TOOL} {{\"text\": \"on\"}}"))
        .unwrap();
    see(&mut chat, "Approval needed (tier 2)").unwrap();
    see(&mut chat, &format!("Tool: {TOOL}")).unwrap();
    see(&mut chat, EFFECT).unwrap();
    see(&mut chat, "Approve? [y/N]").unwrap();
    chat.send_line("y").unwrap();
    see(&mut chat, &format!("✓ {TOOL}: approved")).unwrap();
    // The server's answer reached the model, which quotes it.
    see(&mut chat, "lamp ok: {\"text\": \"on\"}").unwrap();
    see(&mut chat, "> ").unwrap();
    chat.send_control('d').unwrap();
    chat.exp_eof().unwrap();
    let seen = calls(&env);
    assert_eq!(
        seen.trim(),
        r#"{"name": "lamp", "arguments": {"text": "on"}}"#,
        "the server ran it once with exactly these arguments"
    );
}

#[test]
fn rejecting_a_tier_two_mcp_tool_never_calls_the_server() {
    let env = ChatSandbox::new().unwrap();
    let _hub = hub_with_mcp(&env).unwrap();
    let mut chat = env.chat(&[]).unwrap();
    see(&mut chat, "is ready").unwrap();
    chat.send_line(&format!("call {TOOL} {{\"text\": \"off\"}}"))
        .unwrap();
    see(&mut chat, "Approve? [y/N]").unwrap();
    chat.send_line("n").unwrap();
    see(&mut chat, &format!("✗ {TOOL}: not approved")).unwrap();
    see(&mut chat, "the action was not approved").unwrap();
    see(&mut chat, "> ").unwrap();
    chat.send_control('d').unwrap();
    chat.exp_eof().unwrap();
    assert_eq!(calls(&env), "", "a rejected call never reaches the server");
}
