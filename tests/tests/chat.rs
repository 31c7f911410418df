//! `tau chat` end to end: the real `taud` with the offline fake model, the real `tau chat` on a
//! pseudo-terminal, typed the way a person types.

use std::process::Stdio;
use std::time::Duration;

use rexpect::session::PtySession;
use tau_e2e::chat::{ChatSandbox, HubGuard, message_text, wait_until};

const LAMP: &str = "turn on the lamp";
const TOOL: &str = "demo_physical_action";

/// rexpect reads the terminal byte by byte as Latin-1 characters: match UTF-8 text as its bytes.
fn see(chat: &mut PtySession, text: &str) -> anyhow::Result<String> {
    Ok(chat.exp_string(&latin1(text))?)
}

fn latin1(text: &str) -> String {
    text.bytes().map(char::from).collect()
}

/// Waits for the ready banner and returns the session id it names.
fn ready(chat: &mut PtySession) -> anyhow::Result<String> {
    see(chat, "is ready")?;
    let (_, matched) = chat.exp_regex(r"session [0-9A-Za-z_-]+")?;
    Ok(matched.trim_start_matches("session ").to_owned())
}

/// Ctrl-D at the prompt: the chat says goodbye and exits 0.
fn quit(chat: PtySession) -> anyhow::Result<()> {
    leave(chat, None)
}

/// Leaves with Ctrl-D (`None`) or by typing `command` (`/quit`); says goodbye and exits 0.
fn leave(mut chat: PtySession, command: Option<&str>) -> anyhow::Result<()> {
    // Once the input prompt is back (an end-of-file typed before the line editor took the
    // terminal would be lost, as on any terminal).
    see(&mut chat, "> ")?;
    match command {
        Some(line) => chat.send_line(line).map(drop)?,
        None => chat.send_control('d')?,
    }
    see(&mut chat, "Goodbye.")?;
    chat.exp_eof()?;
    let status = chat.process_mut().wait()?;
    anyhow::ensure!(
        matches!(status, rexpect::process::WaitStatus::Exited(_, 0)),
        "tau chat ended with {status:?}"
    );
    Ok(())
}

#[test]
fn no_start_without_a_hub_exits_non_zero_with_its_hint() {
    let env = ChatSandbox::new().unwrap();
    let output = env
        .command("tau")
        .unwrap()
        .args(["chat", "--no-start"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(69), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("No hub answers"), "{stderr}");
    assert!(stderr.contains("tau hub start"), "{stderr}");
    assert!(!env.socket().exists());
}

#[test]
fn approving_runs_the_tool_and_its_result_reaches_the_model() {
    let env = ChatSandbox::new().unwrap();
    let _hub = env.start_hub().unwrap();
    let mut chat = env.chat(&[]).unwrap();
    let session = ready(&mut chat).unwrap();
    chat.send_line(LAMP).unwrap();
    see(&mut chat, "Approval needed (tier 2)").unwrap();
    see(&mut chat, &format!("Tool: {TOOL}")).unwrap();
    see(&mut chat, "Approve? [y/N]").unwrap();
    chat.send_line("y").unwrap();
    see(&mut chat, &format!("✓ {TOOL}: approved")).unwrap();
    // The fake model quotes the tool's result after `Done.`: it reached the model.
    see(&mut chat, "Done. Simulated: ").unwrap();
    see(&mut chat, "This is a demo; no real device moved.").unwrap();
    quit(chat).unwrap();

    let events = env.events(&session).unwrap();
    let call = events
        .iter()
        .find(|e| e.r#type == "tool_call")
        .expect("a tool_call event");
    assert!(call.json.contains("\"approved\""), "{}", call.json);
    let stored = env.session(&session).unwrap();
    let result = stored
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .find_map(|b| match &b.block {
            Some(tau_api::proto::v1::content_block::Block::ToolResult(r)) => Some(r.text.clone()),
            _ => None,
        })
        .expect("a stored tool result");
    assert!(result.starts_with("Simulated: "), "{result}");
    let last = stored.messages.last().unwrap();
    assert_eq!(
        message_text(last).trim(),
        format!("Done. {result}"),
        "{last:?}"
    );
}

#[test]
fn rejecting_shows_the_cross_and_the_refusal_reaches_the_model() {
    let env = ChatSandbox::new().unwrap();
    let _hub = env.start_hub().unwrap();
    let mut chat = env.chat(&[]).unwrap();
    let session = ready(&mut chat).unwrap();
    chat.send_line(LAMP).unwrap();
    see(&mut chat, "Approve? [y/N]").unwrap();
    chat.send_line("n").unwrap();
    see(&mut chat, &format!("✗ {TOOL}: not approved")).unwrap();
    see(&mut chat, "the action was not approved").unwrap();
    quit(chat).unwrap();

    let stored = env.session(&session).unwrap();
    let refusal_reached_the_model = stored.messages.iter().any(|m| {
        m.content.iter().any(|b| {
            matches!(&b.block, Some(tau_api::proto::v1::content_block::Block::ToolResult(r))
                if r.text.starts_with("The user did not approve this action"))
        })
    });
    assert!(refusal_reached_the_model, "{:?}", stored.messages);
}

/// Input typed ahead of an approval prompt is covered by the scripted hub
/// (`client/tests/chat_fake_hub.rs`, `input_typed_during_a_reply_does_not_answer_the_next_approval`):
/// the fake model answers too fast to type between the reply and the prompt here, and a line typed
/// behind the message is read by the line editor, never by the prompt.
#[test]
fn ctrl_d_at_an_approval_prompt_rejects() {
    let env = ChatSandbox::new().unwrap();
    let _hub = env.start_hub().unwrap();
    let mut chat = env.chat(&[]).unwrap();
    ready(&mut chat).unwrap();
    chat.send_line(LAMP).unwrap();
    see(&mut chat, "Approve? [y/N]").unwrap();
    chat.send_control('d').unwrap();
    let (_, found) = chat
        .exp_any(vec![
            rexpect::ReadUntil::String(latin1(&format!("✓ {TOOL}: approved"))),
            rexpect::ReadUntil::String(latin1(&format!("✗ {TOOL}: not approved"))),
        ])
        .unwrap();
    assert_eq!(found, latin1(&format!("✗ {TOOL}: not approved")));
    see(&mut chat, "the action was not approved").unwrap();
    quit(chat).unwrap();
}

#[test]
fn a_chat_killed_while_an_approval_is_pending_rejects_it_and_the_turn_is_stored() {
    let env = ChatSandbox::new().unwrap();
    let _hub = env.start_hub().unwrap();
    let mut chat = env.chat(&[]).unwrap();
    let session = ready(&mut chat).unwrap();
    chat.send_line(LAMP).unwrap();
    see(&mut chat, "Approve? [y/N]").unwrap();
    chat.process_mut()
        .kill(rexpect::process::Signal::SIGKILL)
        .unwrap();

    let mut stored = None;
    wait_until(
        Duration::from_secs(30),
        "the turn to end and be stored",
        || {
            let detail = env.session(&session).unwrap();
            let done = !detail.busy
                && detail
                    .messages
                    .last()
                    .is_some_and(|m| message_text(m).contains("not approved"));
            stored = Some(detail);
            done
        },
    )
    .unwrap();
    let stored = stored.unwrap();
    assert!(stored.messages.len() >= 4, "{:?}", stored.messages);
    let events = env.events(&session).unwrap();
    let call = events
        .iter()
        .find(|e| e.r#type == "tool_call")
        .expect("a tool_call event");
    assert!(call.json.contains("\"refused\""), "{}", call.json);
    assert!(!call.json.contains("\"approved\""), "{}", call.json);
}

#[test]
fn resume_shows_the_history() {
    let env = ChatSandbox::new().unwrap();
    let _hub = env.start_hub().unwrap();
    let mut chat = env.chat(&[]).unwrap();
    let first = ready(&mut chat).unwrap();
    chat.send_line("hello there, remember the blue door")
        .unwrap();
    see(&mut chat, "You said").unwrap();
    quit(chat).unwrap();

    let mut chat = env.chat(&["--resume"]).unwrap();
    see(&mut chat, &format!("Resumed session {first}")).unwrap();
    see(&mut chat, "> hello there, remember the blue door").unwrap();
    see(&mut chat, "You said").unwrap();
    ready(&mut chat).unwrap();
    // A new session, then back with /sessions and /resume 1.
    chat.send_line("/new").unwrap();
    see(&mut chat, "New session").unwrap();
    chat.send_line("/sessions").unwrap();
    see(&mut chat, "Earlier sessions:").unwrap();
    see(&mut chat, &format!("1. {first}")).unwrap();
    see(&mut chat, "hello there, remember the blue door").unwrap();
    chat.send_line("/resume 1").unwrap();
    see(&mut chat, &format!("Resumed session {first}")).unwrap();
    see(&mut chat, "> hello there, remember the blue door").unwrap();
    chat.send_line("/session").unwrap();
    see(&mut chat, &format!("Id: {first}")).unwrap();
    leave(chat, Some("/quit")).unwrap();

    // By id, at start: `--resume ID` and `--session ID`.
    for option in ["--resume", "--session"] {
        let mut chat = env.chat(&[option, &first]).unwrap();
        see(&mut chat, &format!("Resumed session {first}")).unwrap();
        see(&mut chat, "> hello there, remember the blue door").unwrap();
        assert_eq!(ready(&mut chat).unwrap(), first, "{option}");
        leave(chat, Some("/exit")).unwrap();
    }
}

#[test]
fn lang_tr_switches_the_chrome_and_the_prompt() {
    let env = ChatSandbox::new().unwrap();
    let _hub = env.start_hub().unwrap();
    let mut chat = env.chat(&[]).unwrap();
    ready(&mut chat).unwrap();
    chat.send_line("/lang tr").unwrap();
    see(&mut chat, "Bu çalışma için arayüz dili: Türkçe.").unwrap();
    chat.send_line("/yardım").unwrap();
    see(&mut chat, "Komutlar:").unwrap();
    chat.send_line(LAMP).unwrap();
    see(&mut chat, "Onay gerekli (kademe 2)").unwrap();
    see(&mut chat, "Onaylıyor musunuz? [e/H]").unwrap();
    chat.send_line("e").unwrap();
    see(&mut chat, &format!("✓ {TOOL}: onaylandı")).unwrap();
    chat.send_line("/lang en").unwrap();
    see(&mut chat, "UI language for this run: English.").unwrap();
    quit(chat).unwrap();
}

#[test]
fn commands_show_tools_status_and_unknown_commands() {
    let env = ChatSandbox::new().unwrap();
    let _hub = env.start_hub().unwrap();
    let mut chat = env.chat(&[]).unwrap();
    let session = ready(&mut chat).unwrap();
    chat.send_line("/tools").unwrap();
    see(&mut chat, &format!("{TOOL} · tier 2 (physical)")).unwrap();
    see(&mut chat, "needs approval").unwrap();
    chat.send_line("/status").unwrap();
    see(&mut chat, "tau status").unwrap();
    see(&mut chat, &format!("Session: {session}")).unwrap();
    see(&mut chat, "UI language: en").unwrap();
    see(
        &mut chat,
        &format!("Hub: answers on http://127.0.0.1:{}/health", env.port),
    )
    .unwrap();
    chat.send_line("/nope").unwrap();
    see(&mut chat, "Unknown command: /nope").unwrap();
    chat.send_line("/help extra").unwrap();
    see(&mut chat, "/help takes no argument.").unwrap();
    quit(chat).unwrap();
}

#[test]
fn without_a_terminal_tier_two_calls_are_rejected() {
    let env = ChatSandbox::new().unwrap();
    let _hub = env.start_hub().unwrap();
    let mut child = env
        .command("tau")
        .unwrap()
        .arg("chat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{LAMP}").unwrap();
    }
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        stdout.contains(&format!(
            "{TOOL} needs approval, but there is no terminal to ask on"
        )),
        "{stdout}"
    );
    assert_eq!(
        stdout.matches(&format!("✗ {TOOL}: not approved")).count(),
        1,
        "one refusal line: {stdout}"
    );
    assert!(stdout.contains("the action was not approved"), "{stdout}");
    assert!(
        !stdout.contains('\x1b'),
        "escape sequences in a pipe: {stdout:?}"
    );
}

#[test]
fn chat_starts_the_hub_when_none_answers() {
    let env = ChatSandbox::new().unwrap();
    let mut chat = env.chat(&[]).unwrap();
    let (_, matched) = chat
        .exp_regex(r"Started the hub in the background \(pid [0-9]+\)")
        .unwrap();
    let pid: i32 = matched
        .rsplit("pid ")
        .next()
        .and_then(|rest| rest.trim_end_matches(')').parse().ok())
        .unwrap();
    let hub = HubGuard::Pid(pid);
    ready(&mut chat).unwrap();
    chat.send_line("hello").unwrap();
    see(&mut chat, "You said").unwrap();
    quit(chat).unwrap();
    // The hub outlives the chat that started it.
    assert!(env.socket().exists());
    drop(hub);
}

#[test]
fn compact_opens_a_new_session_and_keeps_the_old_one() {
    let env = ChatSandbox::new().unwrap();
    let _hub = env.start_hub().unwrap();
    let mut chat = env.chat(&[]).unwrap();
    let first = ready(&mut chat).unwrap();
    chat.send_line("hello there, remember the blue door")
        .unwrap();
    see(&mut chat, "You said").unwrap();
    chat.send_line("/compact the door").unwrap();
    see(&mut chat, "Compacted ").unwrap();
    let (_, matched) = chat.exp_regex(r"New session [0-9A-Za-z_-]+").unwrap();
    let second = matched.trim_start_matches("New session ").to_owned();
    assert_ne!(second, first);
    see(&mut chat, &format!("the previous session {first} is kept.")).unwrap();
    see(&mut chat, "Summary:").unwrap();
    chat.send_line("/session").unwrap();
    see(&mut chat, &format!("Id: {second}")).unwrap();
    chat.send_line("/sessions").unwrap();
    see(&mut chat, &format!("1. {first}")).unwrap();
    quit(chat).unwrap();

    let old = env.session(&first).unwrap().session.unwrap();
    assert_eq!(old.compacted_to, second);
    assert!(old.message_count >= 2, "{old:?}");
    let new = env.session(&second).unwrap().session.unwrap();
    assert_eq!(new.compacted_from, first);
}

#[test]
fn roles_are_pinned_switched_and_unknown_ones_refused() {
    let env = ChatSandbox::new().unwrap();
    let _hub = env.start_hub().unwrap();
    let mut chat = env.chat(&["--role", "fast"]).unwrap();
    let session = ready(&mut chat).unwrap();
    chat.send_line("/status").unwrap();
    see(&mut chat, "role fast").unwrap();
    chat.send_line("/model brain").unwrap();
    see(&mut chat, "Switched to role brain (fake, fake).").unwrap();
    chat.send_line("/model nope").unwrap();
    see(
        &mut chat,
        "Unknown model role: nope. Roles: brain, fast, local.",
    )
    .unwrap();
    chat.send_line("/model").unwrap();
    see(&mut chat, "brain → fake, fake (current)").unwrap();
    // /clear erases the screen, shows the banner again and keeps the session.
    chat.send_line("/clear").unwrap();
    see(&mut chat, "\x1b[2J").unwrap();
    assert_eq!(ready(&mut chat).unwrap(), session);
    // Ctrl-C at the input prompt quits.
    see(&mut chat, "> ").unwrap();
    chat.send_control('c').unwrap();
    see(&mut chat, "Goodbye.").unwrap();
    chat.exp_eof().unwrap();
}

#[test]
fn chat_over_tcp_with_the_token() {
    let env = ChatSandbox::new().unwrap();
    let _hub = env.start_hub().unwrap();
    let mut chat = env.chat(&["--tcp", "--no-start"]).unwrap();
    ready(&mut chat).unwrap();
    chat.send_line("hello over tcp").unwrap();
    see(&mut chat, "You said").unwrap();
    quit(chat).unwrap();
}

#[test]
fn a_session_of_another_context_mode_is_refused_in_the_ui_language() {
    let env = ChatSandbox::new().unwrap();
    let hub = env.start_hub().unwrap();
    let mut chat = env.chat(&[]).unwrap();
    let first = ready(&mut chat).unwrap();
    chat.send_line("hello").unwrap();
    see(&mut chat, "You said").unwrap();
    quit(chat).unwrap();
    drop(hub);

    // The same installation, now summarizing: the sliding session cannot be continued. An
    // installation with a tau.toml needs its own persona.
    let persona = env.sandbox.home().join("persona");
    std::fs::create_dir_all(&persona).unwrap();
    std::fs::write(
        persona.join("persona.md"),
        include_str!("../../persona/persona.md"),
    )
    .unwrap();
    std::fs::write(
        env.sandbox.home().join("tau.toml"),
        "[models.roles.brain]\nprovider = \"fake\"\nmodel_id = \"fake\"\n\n[agent]\ncontext = \"summarize\"\n",
    )
    .unwrap();
    let _hub = env.start_hub().unwrap();
    let mut chat = env
        .chat(&["--session", &first, "--no-start", "--lang", "tr"])
        .unwrap();
    see(
        &mut chat,
        &format!("{first} oturumu farklı bir [agent] context ayarıyla kaydedilmiş; ayarı yeniden sliding yapın"),
    )
    .unwrap();
    // The chat goes on in a new session.
    see(&mut chat, "hazır").unwrap();
    let (_, matched) = chat.exp_regex(r"oturum [0-9A-Za-z_-]+").unwrap();
    assert_ne!(matched.trim_start_matches("oturum "), first);
    see(&mut chat, "> ").unwrap();
    chat.send_control('d').unwrap();
    see(&mut chat, "Hoşça kalın.").unwrap();
    chat.exp_eof().unwrap();
}
