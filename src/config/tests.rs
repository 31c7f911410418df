//! Loading behaviour and the exact text of every configuration error.

use std::path::{Path, PathBuf};

use super::*;
use crate::lang::Lang;

const FILE: &str = "/home/u/.tau/tau.toml";

fn env(pairs: &[(&str, &str)]) -> Env {
    pairs.iter().copied().collect()
}

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml_str(text, Path::new(FILE), &env(&[]), &KnownNames::builtin())
}

fn err(text: &str) -> String {
    match load(text) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

const BRAIN: &str = "[models.roles.brain]\nprovider = \"fake\"\nmodel_id = \"m\"\n";

#[test]
fn every_key_is_read() {
    let text = r#"
[models.roles.brain]
provider = "bedrock"
model_id = "b-id"
max_tokens = 8000
cache = { strategy = "anthropic", ttl = "1h", system_prompt_ttl = "5m", tools_ttl = "1h" }
fallback = { provider = "anthropic", model_id = "a-id", max_tokens = 1000 }

[models.roles.fast]
provider = "fake"
model_id = "f"
fallback = { provider = "fake", model_id = "g" }

[agent]
max_turns = 3
context = "summarize"
window_size = 10
max_total_tokens = 200000
approval_timeout_seconds = 600

[ui]
language = "tr"

[sessions]
backend = "sqlite"

[hub]
heartbeat_seconds = 5
control_port = 9100
idle_session_close = "90s"

[components]
context = ["nodes"]
[components.tools]
disabled = ["demo_physical_action", "dist:tau-example-tool"]
[components.hub]
services = ["telegram"]

[component.matrix]
chat_id_env = "MATRIX_CHAT_ID"
nested = { a = 1 }
"#;
    let c = load(text).unwrap();
    let brain = c.role("brain").unwrap();
    assert_eq!(
        brain,
        &RoleConfig {
            provider: "bedrock".into(),
            model_id: "b-id".into(),
            max_tokens: 8000,
            cache: Some(CacheConfig {
                strategy: CacheStrategy::Anthropic,
                ttl: Some(CacheTtl::OneHour),
                system_prompt_ttl: Some(CacheTtl::FiveMinutes),
                tools_ttl: Some(CacheTtl::OneHour),
            }),
            fallback: Some(FallbackConfig {
                provider: "anthropic".into(),
                model_id: "a-id".into(),
                max_tokens: Some(1000),
            }),
            tuning: Default::default(),
        }
    );
    let fast = c.role("fast").unwrap();
    assert_eq!(fast.max_tokens, DEFAULT_MAX_TOKENS);
    assert_eq!(fast.cache, None);
    assert_eq!(fast.fallback.as_ref().unwrap().max_tokens, None);
    assert_eq!(
        c.agent,
        AgentConfig {
            max_turns: 3,
            context: ContextMode::Summarize,
            window_size: 10,
            max_total_tokens: Some(200_000),
            approval_timeout_seconds: Some(600),
        }
    );
    assert_eq!(c.ui.language, Lang::Tr);
    assert_eq!(c.sessions.backend, "sqlite");
    assert_eq!(
        c.hub,
        HubConfig {
            heartbeat_seconds: 5,
            control_port: 9100,
            idle_session_close_seconds: 90,
            role: None,
        }
    );
    assert_eq!(c.components.context, ["nodes"]);
    assert_eq!(
        c.components.tools.disabled,
        ["demo_physical_action", "dist:tau-example-tool"]
    );
    assert_eq!(c.components.hub.services, ["telegram"]);
    let matrix = c.component("matrix").unwrap();
    assert_eq!(matrix["chat_id_env"].as_str(), Some("MATRIX_CHAT_ID"));
    assert!(matrix["nested"].is_table());
    assert!(c.component("other").is_none());
    assert_eq!(c.source(), &ConfigSource::File(PathBuf::from(FILE)));
    assert!(c.warnings.is_empty());
}

#[test]
fn an_empty_file_means_every_default() {
    let c = load("").unwrap();
    assert!(c.models.roles.is_empty());
    assert_eq!(c.agent, AgentConfig::default());
    assert_eq!(c.agent.max_turns, 12);
    assert_eq!(c.agent.context, ContextMode::Sliding);
    assert_eq!(c.agent.window_size, 60);
    assert_eq!(c.agent.max_total_tokens, None);
    assert_eq!(c.ui.language, Lang::En);
    assert_eq!(c.sessions.backend, "file");
    assert_eq!(c.hub.heartbeat_seconds, 30);
    assert_eq!(c.hub.control_port, 7877);
    assert_eq!(c.hub.idle_session_close_seconds, 600);
    assert_eq!(c.components, ComponentsConfig::default());
    assert!(!c.source().is_defaults());
}

#[test]
fn no_file_means_the_template_on_the_provider_credentials_allow() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("tau.toml");
    let cases: &[(&[(&str, &str)], BuiltinProvider)] = &[
        (&[], BuiltinProvider::Fake),
        (&[("ANTHROPIC_API_KEY", "k")], BuiltinProvider::Anthropic),
        (
            &[("AWS_ACCESS_KEY_ID", "a"), ("AWS_SECRET_ACCESS_KEY", "s")],
            BuiltinProvider::Bedrock,
        ),
    ];
    for (vars, provider) in cases {
        let c = Config::load(&missing, &env(vars)).unwrap();
        assert_eq!(
            c.source(),
            &ConfigSource::Defaults {
                provider: *provider
            }
        );
        assert!(c.source().is_defaults() && c.source().file().is_none());
        let roles: Vec<&str> = c.models.roles.keys().map(String::as_str).collect();
        assert_eq!(roles, ["brain", "fast", "local"]);
        assert!(
            c.models
                .roles
                .values()
                .all(|r| r.provider == provider.as_str())
        );
        assert_eq!(c.agent, AgentConfig::default());
        assert_eq!(c.hub, HubConfig::default());
    }
}

#[test]
fn an_existing_file_wins_over_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tau.toml");
    std::fs::write(&file, BRAIN).unwrap();
    let c = Config::load(&file, &env(&[("ANTHROPIC_API_KEY", "k")])).unwrap();
    assert_eq!(c.source(), &ConfigSource::File(file.clone()));
    assert_eq!(c.source().file(), Some(file.as_path()));
    assert_eq!(c.role("brain").unwrap().provider, "fake");
}

#[test]
fn an_unreadable_file_is_an_error_not_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let e = Config::load(dir.path(), &env(&[])).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{}: cannot read: ", dir.path().display())),
        "{e}"
    );
    assert!(!e.contains('\n'));
}

#[test]
fn tau_hub_port_and_tau_lang_override_the_file() {
    let text = "[hub]\ncontrol_port = 9000\n[ui]\nlanguage = \"en\"\n";
    let known = KnownNames::builtin();
    let path = Path::new(FILE);
    let c = Config::from_toml_str(text, path, &env(&[]), &known).unwrap();
    assert_eq!((c.hub.control_port, c.ui.language), (9000, Lang::En));
    let e = env(&[("TAU_HUB_PORT", "7999"), ("TAU_LANG", "tr")]);
    let c = Config::from_toml_str(text, path, &e, &known).unwrap();
    assert_eq!((c.hub.control_port, c.ui.language), (7999, Lang::Tr));
    // Also on the built-in defaults.
    let c = Config::defaults(&env(&[("TAU_HUB_PORT", "0")])).unwrap();
    assert_eq!(c.hub.control_port, 0);
    let bad = Config::from_toml_str(text, path, &env(&[("TAU_HUB_PORT", "-1")]), &known)
        .unwrap_err()
        .to_string();
    assert_eq!(
        bad,
        r#"environment variable TAU_HUB_PORT = "-1": expected a port number from 0 to 65535 (0: any free port)"#
    );
    let bad = Config::from_toml_str(text, path, &env(&[("TAU_LANG", "fr")]), &known)
        .unwrap_err()
        .to_string();
    assert_eq!(
        bad,
        r#"environment variable TAU_LANG = "fr": expected "en" or "tr""#
    );
}

#[test]
fn unknown_top_level_tables_are_one_warning_each_and_ignored() {
    let text = format!(
        "{BRAIN}[telegram]\ntoken_env = \"X\"\n[plugins.a]\nx = 1\n[plugins.b]\ny = 2\n[[things]]\nz = 1\n[[things]]\nz = 2\n"
    );
    let logs = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let writer = {
        let logs = logs.clone();
        move || LogWriter(logs.clone())
    };
    let subscriber = tracing_subscriber::fmt()
        .with_writer(writer)
        .with_ansi(false)
        .finish();
    let c = tracing::subscriber::with_default(subscriber, || load(&text)).unwrap();
    assert_eq!(
        c.warnings,
        [
            format!("{FILE}: unknown table [plugins] ignored"),
            format!("{FILE}: unknown table [telegram] ignored"),
            format!("{FILE}: unknown table [things] ignored"),
        ]
    );
    let logged = String::from_utf8(logs.lock().unwrap().clone()).unwrap();
    assert!(
        !logged.contains("unknown table"),
        "the warnings are data for the caller to report once, not logged while loading: {logged}"
    );
    assert_eq!(c.role("brain").unwrap().model_id, "m");
}

/// A `std::io::Write` into a shared buffer, for capturing log output.
struct LogWriter(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn registered_names_are_accepted() {
    let text = "[models.roles.local]\nprovider = \"vllm\"\nmodel_id = \"qwen3:8b\"\n[sessions]\nbackend = \"cloud\"\n";
    let known = KnownNames::builtin()
        .with_provider("vllm")
        .with_session_backend("cloud");
    let c = Config::from_toml_str(text, Path::new(FILE), &env(&[]), &known).unwrap();
    assert_eq!(c.role("local").unwrap().provider, "vllm");
    assert_eq!(c.sessions.backend, "cloud");
    assert!(PLANNED_PROVIDERS.is_empty());
}

#[test]
fn syntax_errors_name_file_line_and_column() {
    assert_eq!(
        err("[agent]\nmax_turns = = 3\n"),
        format!("{FILE}:2:13: invalid TOML: extra `=`, expected nothing")
    );
    assert_eq!(
        err("[agent]\nmax_turns = 3\n[agent]\n"),
        format!("{FILE}:3:2: invalid TOML: duplicate key")
    );
}

/// Every semantic error, by its exact one-line text.
#[test]
fn error_texts() {
    let cases: &[(&str, &str)] = &[
        // [agent]
        (
            "[agent]\ncontext = \"auto\"\n",
            r#"agent.context = "auto": expected "sliding" or "summarize" ("auto" and "agentic" are SDK presets that register untiered tools, which the tier gate would refuse)"#,
        ),
        (
            "[agent]\ncontext = \"agentic\"\n",
            r#"agent.context = "agentic": expected "sliding" or "summarize" ("auto" and "agentic" are SDK presets that register untiered tools, which the tier gate would refuse)"#,
        ),
        (
            "[agent]\ncontext = \"rolling\"\n",
            r#"agent.context = "rolling": expected "sliding" or "summarize""#,
        ),
        (
            "[agent]\nmax_turn = 5\n",
            "agent.max_turn = 5: unknown key (expected max_turns, context, window_size, max_total_tokens or approval_timeout_seconds)",
        ),
        (
            "[agent]\napproval_timeout_seconds = 0\n",
            "agent.approval_timeout_seconds = 0: expected a whole number from 1 to 4294967295",
        ),
        (
            "[agent]\nmax_turns = 0\n",
            "agent.max_turns = 0: expected a whole number from 1 to 4294967295",
        ),
        (
            "[agent]\nwindow_size = \"60\"\n",
            r#"agent.window_size = "60": expected a whole number from 1 to 4294967295"#,
        ),
        (
            "[agent]\nmax_total_tokens = 1.5\n",
            "agent.max_total_tokens = 1.5: expected a whole number of tokens, at least 1",
        ),
        (
            "agent = 5\n",
            "agent = 5: expected a table with keys max_turns, context, window_size, max_total_tokens or approval_timeout_seconds",
        ),
        // [models]
        (
            "[models.roles.brain]\nprovider = \"vllm\"\nmodel_id = \"m\"\n",
            r#"models.roles.brain.provider = "vllm": Unknown model provider (expected "bedrock", "anthropic", "fake", "ollama" or "openai")"#,
        ),
        (
            "[models.roles.brain]\nprovider = \"ollama\"\nmodel_id = \"m\"\nnum_ctx = 0\n",
            "models.roles.brain.num_ctx = 0: expected a whole number from 1 to 4294967295",
        ),
        (
            "[models.roles.brain]\nprovider = \"ollama\"\nmodel_id = \"m\"\nkeep_alive = \"forever\"\n",
            r#"models.roles.brain.keep_alive = "forever": expected whole seconds or a duration such as "30m", "1h30m" or "-1" (keep loaded)"#,
        ),
        (
            "[component.ollama]\nbase_url = \"127.0.0.1:11434\"\n",
            r#"component.ollama.base_url = "127.0.0.1:11434": expected an http:// or https:// URL"#,
        ),
        (
            "[component.openai]\nbase_url = \"http://127.0.0.1:8080/v1\"\napi_key = \"sk\"\n",
            r#"component.openai.api_key = "sk": unknown key (expected base_url)"#,
        ),
        (
            "[component.telegram]\napi_base = \"api.telegram.org\"\n",
            r#"component.telegram.api_base = "api.telegram.org": expected an https:// URL (http:// only for a loopback host: 127.0.0.1, ::1 or localhost)"#,
        ),
        (
            "[component.telegram]\napi_base = \"http://api.telegram.org\"\n",
            r#"component.telegram.api_base = "http://api.telegram.org": expected an https:// URL (http:// only for a loopback host: 127.0.0.1, ::1 or localhost)"#,
        ),
        (
            // The host is what follows the user info, not what precedes it.
            "[component.telegram]\napi_base = \"http://localhost:80@evil.example/\"\n",
            r#"component.telegram.api_base = "http://localhost:80@evil.example/": expected an https:// URL (http:// only for a loopback host: 127.0.0.1, ::1 or localhost)"#,
        ),
        (
            "[component.telegram]\nowner_chat_id = 123456789\n",
            "component.telegram.owner_chat_id = 123456789: expected component.telegram.owner_user_id as well: owner_chat_id and owner_user_id pin the owner together (or set neither and run `tau telegram pair`)",
        ),
        (
            "[component.telegram]\nowner_user_id = 123456789\n",
            "component.telegram.owner_user_id = 123456789: expected component.telegram.owner_chat_id as well: owner_user_id and owner_chat_id pin the owner together (or set neither and run `tau telegram pair`)",
        ),
        (
            "[component.telegram]\napproval_timeout_seconds = 5\n",
            "component.telegram.approval_timeout_seconds = 5: expected a whole number of seconds from 10 to 86400",
        ),
        (
            "[component.telegram]\nowner_user_id = \"@me\"\n",
            r#"component.telegram.owner_user_id = "@me": expected a numeric Telegram id (a username is never accepted)"#,
        ),
        (
            "[component.telegram]\ntoken = \"123:abc\"\n",
            r#"component.telegram.token = "123:abc": unknown key (expected api_base, approval_timeout_seconds, poll_timeout_seconds, owner_user_id or owner_chat_id)"#,
        ),
        (
            "[models.roles.brain]\nprovider = \"openai\"\nmodel_id = \"m\"\ntemperature = 2.5\n",
            "models.roles.brain.temperature = 2.5: expected a number from 0 to 2",
        ),
        (
            "[models.roles.brain]\nmodel_id = \"m\"\n",
            r#"models.roles.brain.provider is missing: expected a provider name: "bedrock", "anthropic", "fake", "ollama" or "openai""#,
        ),
        (
            "[models.roles.brain]\nprovider = 3\nmodel_id = \"m\"\n",
            r#"models.roles.brain.provider = 3: expected a provider name: "bedrock", "anthropic", "fake", "ollama" or "openai""#,
        ),
        (
            "[models.roles.brain]\nprovider = \"fake\"\n",
            "models.roles.brain.model_id is missing: expected the provider's model id (a non-empty string)",
        ),
        (
            "[models.roles.brain]\nprovider = \"fake\"\nmodel_id = \"\"\n",
            r#"models.roles.brain.model_id = "": expected the provider's model id (a non-empty string)"#,
        ),
        (
            "[models.roles.brain]\nprovider = \"fake\"\nmodel_id = \"m\"\nmax_tokens = 0\n",
            "models.roles.brain.max_tokens = 0: expected a whole number from 1 to 4294967295",
        ),
        (
            "[models.roles.brain]\nprovider = \"fake\"\nmodel_id = \"m\"\nmodel = \"x\"\n",
            r#"models.roles.brain.model = "x": unknown key (expected provider, model_id, max_tokens, cache, fallback, num_ctx, keep_alive, temperature or price)"#,
        ),
        (
            "[models.roles.brain]\nprovider = \"fake\"\nmodel_id = \"m\"\ncache = { ttl = \"2h\" }\n",
            r#"models.roles.brain.cache.ttl = "2h": expected "5m" or "1h""#,
        ),
        (
            "[models.roles.brain]\nprovider = \"fake\"\nmodel_id = \"m\"\ncache = { strategy = \"always\" }\n",
            r#"models.roles.brain.cache.strategy = "always": expected "auto" or "anthropic""#,
        ),
        (
            "[models.roles.brain]\nprovider = \"fake\"\nmodel_id = \"m\"\ncache = { tll = \"1h\" }\n",
            r#"models.roles.brain.cache.tll = "1h": unknown key (expected strategy, ttl, system_prompt_ttl or tools_ttl)"#,
        ),
        (
            "[models.roles.brain]\nprovider = \"fake\"\nmodel_id = \"m\"\ncache = true\n",
            "models.roles.brain.cache = true: expected a table with keys strategy, ttl, system_prompt_ttl or tools_ttl",
        ),
        (
            "[models.roles.brain]\nprovider = \"fake\"\nmodel_id = \"m\"\nfallback = { provider = \"vllm\", model_id = \"x\" }\n",
            r#"models.roles.brain.fallback.provider = "vllm": Unknown model provider (expected "bedrock", "anthropic", "fake", "ollama" or "openai")"#,
        ),
        (
            "[models.roles.brain]\nprovider = \"fake\"\nmodel_id = \"m\"\nfallback = { provider = \"fake\" }\n",
            "models.roles.brain.fallback.model_id is missing: expected the provider's model id (a non-empty string)",
        ),
        (
            "[models.roles]\nbrain = \"fake\"\n",
            r#"models.roles.brain = "fake": expected a table with provider and model_id"#,
        ),
        (
            "[models.roles.\"my role\"]\nprovider = \"fake\"\nmodel_id = \"m\"\n",
            r#"models.roles = [models.roles."my role"]: expected role names of 1 to 64 letters, digits, '-' or '_'"#,
        ),
        (
            "[models]\nbrain = { provider = \"fake\" }\n",
            r#"models.brain = { provider = "fake" }: unknown key (expected roles)"#,
        ),
        (
            "[models]\nroles = []\n",
            "models.roles = []: expected a table of roles, e.g. [models.roles.brain]",
        ),
        // [ui], [sessions], [hub]
        (
            "[ui]\nlanguage = \"de\"\n",
            r#"ui.language = "de": expected "en" or "tr""#,
        ),
        (
            "[ui]\nlang = \"tr\"\n",
            r#"ui.lang = "tr": unknown key (expected language)"#,
        ),
        (
            "[sessions]\nbackend = \"redis\"\n",
            r#"sessions.backend = "redis": expected "file" or "sqlite" (unknown session backend)"#,
        ),
        (
            "[sessions]\nbackend = 1\n",
            r#"sessions.backend = 1: expected "file" or "sqlite""#,
        ),
        (
            "[hub]\nheartbeat_seconds = 0\n",
            "hub.heartbeat_seconds = 0: expected a whole number of seconds from 1 to 86400",
        ),
        (
            "[hub]\ncontrol_port = 70000\n",
            "hub.control_port = 70000: expected a port number from 0 to 65535 (0: any free port)",
        ),
        (
            "[hub]\nport = 1\n",
            "hub.port = 1: unknown key (expected heartbeat_seconds, control_port, idle_session_close or role)",
        ),
        (
            "[hub]\nidle_session_close = \"10 minutes\"\n",
            "hub.idle_session_close = \"10 minutes\": expected a duration from 1s to 7d: a whole number of seconds, or a number and a unit (s, m, h, d) such as \"10m\"",
        ),
        (
            "[hub]\nidle_session_close = 0\n",
            "hub.idle_session_close = 0: expected a duration from 1s to 7d: a whole number of seconds, or a number and a unit (s, m, h, d) such as \"10m\"",
        ),
        (
            "[hub]\nidle_session_close = \"8d\"\n",
            "hub.idle_session_close = \"8d\": expected a duration from 1s to 7d: a whole number of seconds, or a number and a unit (s, m, h, d) such as \"10m\"",
        ),
        // [components], [component.<name>]
        (
            "[components]\ncontext = \"nodes\"\n",
            r#"components.context = "nodes": expected a list of component names, e.g. ["nodes"]"#,
        ),
        (
            "[components.tools]\ndisabled = [\"a\", 1]\n",
            r#"components.tools.disabled = ["a", 1]: expected a list of tool names or "dist:<package>", e.g. ["demo_physical_action"]"#,
        ),
        (
            "[components.tools]\nenabled = [\"a\"]\n",
            r#"components.tools.enabled = ["a"]: unknown key (expected disabled)"#,
        ),
        (
            "[components.hub]\nservices = [\"\"]\n",
            r#"components.hub.services = [""]: expected a list of component names, e.g. ["nodes"]"#,
        ),
        (
            "[components]\nchannels = []\n",
            "components.channels = []: unknown key (expected context, tools or hub)",
        ),
        (
            "[component]\ntelegram = 5\n",
            "component.telegram = 5: expected a table of the component's settings, e.g. [component.telegram]",
        ),
        (
            "component = 5\n",
            "component = 5: expected tables of component settings, e.g. [component.telegram]",
        ),
        // Top level
        (
            "max_turns = 5\n",
            "max_turns = 5: unknown key (expected a table; settings belong in one of [models], [agent], [ui], [sessions], [hub], [routines], [components], [component.<name>], [mcp], [budget.<role>], [nodes], [node] or [web])",
        ),
    ];
    for (text, want) in cases {
        let got = err(text);
        assert_eq!(got, format!("{FILE}: {want}"), "for:\n{text}");
        assert!(!got.contains('\n'));
    }
}

/// The start-up sequence a binary runs, on temporary directories and an explicit environment:
/// TAU_HOME from the current directory, `.env` filling only unset variables, then paths, config
/// and settings from the filled environment.
#[test]
fn start_up_flow_with_dotenv() {
    let cwd = tempfile::tempdir().unwrap();
    let user = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("tau.toml"), BRAIN).unwrap();
    std::fs::write(
        cwd.path().join(".env"),
        "TAU_DATA_DIR=state\nTAU_HUB_PORT=7990\nTAU_PROFILE=sport\nTAU_LANG=en\nbroken line\n",
    )
    .unwrap();
    let mut e = env(&[("TAU_LANG", "tr")]);
    let home = crate::paths::resolve_home(&e, cwd.path(), Some(user.path())).unwrap();
    assert_eq!(home, cwd.path());
    let file = crate::dotenv::load(&home.join(crate::paths::ENV_FILE_NAME))
        .unwrap()
        .unwrap();
    assert_eq!(
        file.problems
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [format!(
            "{}:5: expected NAME=VALUE, found \"broken line\"",
            cwd.path().join(".env").display()
        )]
    );
    let to_set = file.pairs_to_set(&e);
    let names: Vec<&str> = to_set.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["TAU_DATA_DIR", "TAU_HUB_PORT", "TAU_PROFILE"]);
    e.fill(&to_set);

    let paths = crate::paths::Paths::for_home(home, &e, cwd.path(), Some(user.path())).unwrap();
    assert_eq!(paths.data_dir, cwd.path().join("state"));
    let config = Config::load(&paths.config_file, &e).unwrap();
    assert_eq!(config.source().file(), Some(paths.config_file.as_path()));
    assert_eq!(config.hub.control_port, 7990);
    assert_eq!(config.ui.language, Lang::Tr, "the environment beats .env");
    let settings = Settings::resolve(&e, &config).unwrap();
    assert_eq!(settings.profile, Profile::Sport);
    assert_eq!(settings.role, NodeRole::Hub);
    assert_eq!(settings.hub_port, 7990);
}

mod tables;
