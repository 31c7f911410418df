//! The English texts of the built-in UI messages: the reference every other language follows.
//!
//! Invariants: keys are sorted bytewise and unique (looked up by binary search; a test checks the
//! order); every built-in key has a text here; placeholders are `{name}`, `{{`/`}}` are braces.
//!
//! What callers pass: `{command}` is a command as shown, with its slash (`/x`); `{hint}` is
//! `commands::command_hint()`; `{available}` is `Lang::codes()`; `{lang}` a language's code or
//! native name; `{date}` a date already formatted for the person; `{tier}` a tier number and
//! `{tier_label}` its `tier.<n>` text; `{count}`, `{n}`, `{limit}`, `{seconds}` are numbers.

/// Built-in messages in English, sorted by key.
pub(super) const EN: &[(&str, &str)] = &[
    (
        "approval.already_decided",
        "This approval was already decided.",
    ),
    ("approval.approved", "✓ {tool}: approved"),
    ("approval.arguments", "Arguments:"),
    ("approval.arming", "(arming…)"),
    (
        "approval.awaiting_other_channel",
        "Awaiting approval on {channel}.",
    ),
    (
        "approval.bidi_warning",
        "Contains bidirectional control characters, shown escaped.",
    ),
    ("approval.button_approve", "Approve once"),
    ("approval.button_reject", "Reject"),
    ("approval.decided_elsewhere", "= {tool}: decided elsewhere"),
    (
        "approval.disconnected",
        "Disconnected from the hub; approving is off until the connection is back.",
    ),
    ("approval.effect", "Effect:"),
    (
        "approval.enlarge_terminal",
        "Enlarge the terminal to see the whole request before approving.",
    ),
    (
        "approval.exempt",
        "{tool}: ran without a prompt (registered routine).",
    ),
    (
        "approval.expired",
        "✗ {tool}: the approval expired; not run.",
    ),
    (
        "approval.expired_by_restart",
        "✗ {tool}: the hub restarted while this approval was pending; not run.",
    ),
    ("approval.keys", "Tab switch · Enter choose · Esc reject"),
    (
        "approval.no_terminal",
        "{tool} needs approval, but there is no terminal to ask on (input is not a terminal)",
    ),
    ("approval.not_found", "There is no such pending approval."),
    (
        "approval.not_your_channel",
        "This approval belongs to {channel}; answer it there.",
    ),
    ("approval.paste_ignored", "Paste ignored."),
    ("approval.question", "Approve? [y/N]"),
    ("approval.queue", "Next approval ({n} of {total})"),
    ("approval.rejected", "✗ {tool}: not approved"),
    ("approval.sending", "Sending…"),
    (
        "approval.timed_out",
        "✗ {tool}: no answer in time; not approved",
    ),
    ("approval.title", "⚠️  Approval needed (tier {tier})"),
    ("approval.tool", "Tool:"),
    (
        "approval.truncated",
        "Truncated ({bytes} bytes, sha256 {digest}).",
    ),
    ("banner.commands", "Commands: {hint} · Ctrl-D quits"),
    (
        "banner.fake_model",
        "No model credentials found; using the offline fake model.",
    ),
    (
        "banner.history",
        "History of session {id} ({count} messages):",
    ),
    (
        "banner.hub_profile",
        "The hub runs profile {profile}; this session uses it.",
    ),
    (
        "banner.no_config",
        "No tau.toml found; running on built-in defaults. `tau init` writes a config.",
    ),
    (
        "banner.ready",
        "tau {version} is ready · profile {profile} · session {session}",
    ),
    (
        "chat.cancelling",
        "Cancelling the turn… (Ctrl-C again stops waiting)",
    ),
    ("chat.ctrl_c_again", "Press Ctrl-C again to quit."),
    (
        "chat.detached",
        "Stopped watching the turn; the hub finishes and stores it.",
    ),
    ("chat.goodbye", "Goodbye."),
    (
        "chat.interrupted",
        "Cancelled; stopped waiting for the hub.",
    ),
    (
        "chat.output_discarded",
        "(The reply above was discarded; the model answers again.)",
    ),
    (
        "chat.stream_lost",
        "Lost the turn's stream: {reason}. The hub finishes and stores the turn.",
    ),
    ("chat.thinking", "Thinking…"),
    (
        "command.clear.help",
        "Clear the screen; the session goes on.",
    ),
    (
        "command.compact.help",
        "Summarize the conversation into a new session (optional focus).",
    ),
    ("command.help.help", "Show the commands."),
    (
        "command.lang.help",
        "Show the UI language, or switch it (en, tr) for this run.",
    ),
    (
        "command.model.help",
        "List the model roles, or switch to one.",
    ),
    ("command.new.help", "Start a new session."),
    ("command.no_argument", "{command} takes no argument."),
    ("command.quit.help", "Leave (Ctrl-D does too)."),
    (
        "command.resume.help",
        "Resume the latest session, the n-th of the list, or a session by id.",
    ),
    ("command.session.help", "Show the current session."),
    (
        "command.sessions.help",
        "List the last 10 earlier sessions.",
    ),
    (
        "command.status.help",
        "Show the profile, session, model, tools, language and hub.",
    ),
    ("command.tools.help", "List the tools and their tiers."),
    ("command.unavailable", "{command} is not available here."),
    (
        "command.unknown",
        "Unknown command: {command}. Commands: {hint}",
    ),
    ("command.usage", "Usage: {usage}"),
    (
        "compact.done",
        "Compacted {n} messages into a summary. New session {id}; the previous session {old} is kept.",
    ),
    (
        "compact.empty",
        "Nothing to compact: the session has no messages yet.",
    ),
    (
        "compact.failed",
        "Could not compact the session: {reason}. Nothing changed.",
    ),
    ("compact.running", "Summarizing {n} messages…"),
    ("compact.summary", "Summary:"),
    (
        "help.footer",
        "Anything else you type goes to tau. Ctrl-D quits.",
    ),
    ("help.title", "Commands:"),
    ("history.earlier", "({count} earlier messages not shown)"),
    (
        "history.repaired",
        "↺ Repaired the unfinished history: {notice}",
    ),
    ("history.tool_call", "→ {tool}"),
    ("history.tool_result", "← {tool}: {result}"),
    (
        "hub.disconnected",
        "Lost the connection to the hub; reconnecting…",
    ),
    ("hub.down", "no answer on {url}"),
    (
        "hub.not_running",
        "No hub answers. Start one with `tau hub start`, or run `tau chat` without --no-start.",
    ),
    ("hub.reconnected", "Reconnected to the hub."),
    ("hub.start_failed", "Could not start the hub: {reason}"),
    (
        "hub.started",
        "Started the hub in the background (pid {pid}).",
    ),
    (
        "hub.timed_out",
        "The hub did not answer within {seconds} s; stopped waiting.",
    ),
    ("hub.up", "answers on {url}"),
    ("label.approvals_pending", "Pending approvals"),
    ("label.backend", "Store"),
    ("label.channel", "Channel"),
    ("label.context", "Context"),
    ("label.hub", "Hub"),
    ("label.id", "Id"),
    ("label.language", "UI language"),
    ("label.messages", "Messages"),
    ("label.model", "Model"),
    ("label.profile", "Profile"),
    ("label.role", "Role"),
    ("label.routines", "Routines"),
    ("label.session", "Session"),
    ("label.spend", "Spend today"),
    ("label.title", "Title"),
    ("label.tools", "Tools"),
    ("label.versions", "Versions"),
    (
        "lang.current",
        "UI language: {lang}. Available: {available}.",
    ),
    ("lang.switched", "UI language for this run: {lang}."),
    (
        "lang.unknown",
        "Unknown language: {lang}. Available: {available}.",
    ),
    ("model.already", "Already on role {role}."),
    ("model.current", "(current)"),
    ("model.fallback", "fallback {provider}, {model_id}"),
    ("model.fallback_in_use", "fallback in use"),
    ("model.fallback_standby", "not in use"),
    ("model.header", "Model roles:"),
    ("model.line", "{role} → {provider}, {model_id}"),
    (
        "model.switch_failed",
        "Could not switch to role {role}: {reason}. The current model stays.",
    ),
    (
        "model.switched",
        "Switched to role {role} ({provider}, {model_id}).",
    ),
    (
        "model.unknown_role",
        "Unknown model role: {role}. Roles: {roles}.",
    ),
    (
        "notice.busy",
        "Another turn is running in this session; this one waits for it.",
    ),
    ("notice.cancelled", "Cancelled."),
    (
        "notice.content_filtered",
        "The provider stopped the reply (content filter).",
    ),
    ("notice.error", "Error: {error}"),
    (
        "notice.interrupt_refused",
        "A component asked to pause the turn for input; that is not supported, so it was refused.",
    ),
    (
        "notice.max_tokens",
        "The reply reached the model's output limit and was cut off.",
    ),
    (
        "notice.max_turns",
        "Stopped: this turn reached its limit of {limit} model calls ([agent] max_turns).",
    ),
    ("notice.model_error", "The model call failed: {error}"),
    ("notice.throttled", "Throttled; retrying in {seconds} s…"),
    (
        "notice.token_budget",
        "Stopped: this turn used up its budget of {limit} tokens ([agent] max_total_tokens).",
    ),
    (
        "session.context_mismatch",
        "Session {id} was recorded with a different [agent] context setting; set it back to {mode} or start a new session.",
    ),
    ("session.invalid_id", "Not a valid session id: {id}."),
    ("session.kept", "The current session is kept."),
    ("session.new", "New session {id}."),
    (
        "session.no_such_index",
        "There is no session {n} in the list; /sessions lists {count}.",
    ),
    (
        "session.none_to_resume",
        "There is no earlier session to resume.",
    ),
    ("session.not_found", "Session not found: {id}."),
    (
        "session.resumed",
        "Resumed session {id}: {title} ({count} messages).",
    ),
    ("session.untitled", "(untitled)"),
    (
        "sessions.empty",
        "There are no earlier sessions with messages.",
    ),
    ("sessions.header", "Earlier sessions:"),
    (
        "sessions.line",
        "{n}. {id} {date} {channel} {title} ({count} messages)",
    ),
    (
        "status.context",
        "{mode}, window {window}, {count} messages in memory",
    ),
    ("status.routines", "{count} ({paused} paused){warnings}"),
    (
        "status.session",
        "{id} · {title} · {count} messages · role {role}",
    ),
    ("status.spend_tokens", "{role} {count} tokens"),
    ("status.title", "tau status"),
    (
        "status.tools",
        "{count} registered, {approval} need approval",
    ),
    ("tier.0", "read"),
    ("tier.1", "digital write"),
    ("tier.2", "physical"),
    ("tier.label", "tier {tier}"),
    ("tier.needs_approval", "needs approval"),
    ("tool.failed", "✗ {tool}: failed: {error}"),
    ("tool.progress", "⋯ {tool}: {progress}"),
    ("tool.running", "Running {tool}…"),
    ("tool.unknown", "✗ {tool}: not a registered tool; not run"),
    ("tools.effect", "effect: {effect}"),
    ("tools.empty", "No tools are registered."),
    ("tools.header", "Tools:"),
    (
        "tools.line",
        "{name} · tier {tier} ({tier_label}) · {description}",
    ),
    ("tools.line_untiered", "{name} · no tier · {description}"),
    ("tools.node", "node {node}"),
    (
        "tools.state.changed",
        "not offered: changed since pairing (pair the node again)",
    ),
    (
        "tools.state.missing",
        "not offered: its server does not list it",
    ),
    (
        "tools.state.offline",
        "its node is not connected: a call fails at once",
    ),
    (
        "tools.state.refused",
        "not offered: another tool has its name",
    ),
    (
        "tools.state.untiered",
        "not offered: no tier in the hub's tau.toml",
    ),
    ("tui.composer", "Message"),
    ("tui.conn.connecting", "Connecting to the hub…"),
    ("tui.conn.failed", "Cannot reach the hub."),
    ("tui.conn.retry", "Reconnecting in {seconds} s…"),
    ("tui.conversation", "Conversation"),
    ("tui.events", "Events"),
    ("tui.filter", "Filter"),
    (
        "tui.keys",
        "Enter send · Alt-↑/↓ sessions · / filter · Ctrl-C quit",
    ),
    ("tui.sessions", "Sessions"),
    ("tui.state.awaiting_approval", "awaiting approval"),
    ("tui.state.idle", "idle"),
    ("tui.state.running", "running"),
    ("value.no", "no"),
    ("value.none", "none"),
    ("value.unknown", "unknown"),
    ("value.yes", "yes"),
];
