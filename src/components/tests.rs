//! The component table's rules: what each configuration switches on or off, and which names
//! nothing provides.

use super::*;
use crate::config::{BUILTIN_SESSION_BACKENDS, BuiltinProvider, KnownNames, PLANNED_PROVIDERS};
use crate::env::Env;
use std::path::Path;

fn config(text: &str) -> Config {
    Config::from_toml_str(
        text,
        Path::new("/h/tau.toml"),
        &Env::new(),
        &KnownNames::builtin(),
    )
    .unwrap()
}

const ROLES: &str = "[models.roles.brain]\nprovider = \"fake\"\nmodel_id = \"fake\"\n\
                     fallback = { provider = \"anthropic\", model_id = \"claude\" }\n";

fn names(kind: ComponentKind) -> Vec<&'static str> {
    builtin_of(kind).map(|c| c.name).collect()
}

#[test]
fn the_table_matches_the_config_names() {
    let mut providers: Vec<&str> = BuiltinProvider::ALL.iter().map(|p| p.as_str()).collect();
    providers.extend(PLANNED_PROVIDERS);
    assert_eq!(names(ComponentKind::Provider), providers);
    for c in builtin_of(ComponentKind::Provider) {
        let planned = PLANNED_PROVIDERS.contains(&c.name);
        assert_eq!(
            c.availability == Availability::Planned,
            planned,
            "{}",
            c.name
        );
    }
    assert_eq!(
        names(ComponentKind::SessionBackend),
        BUILTIN_SESSION_BACKENDS
    );
    assert_eq!(
        names(ComponentKind::HubService),
        [CORE_HUB_SERVICES, &[TELEGRAM_COMPONENT, WEB_COMPONENT]].concat()
    );
    for c in BUILTIN_COMPONENTS {
        assert_eq!(
            c.tier.is_some(),
            c.kind == ComponentKind::Tool,
            "{}",
            c.name
        );
    }
}

#[test]
fn states_follow_the_config() {
    let cfg = config(&format!(
        "{ROLES}[sessions]\nbackend = \"sqlite\"\n[components.tools]\ndisabled = [\"demo_physical_action\"]\n"
    ));
    let states = component_states(&cfg);
    let get = |name: &str| states.iter().find(|s| s.name == name).unwrap();
    assert!(get("fake").enabled);
    assert_eq!(get("fake").note.as_deref(), Some("used by brain"));
    assert_eq!(
        get("anthropic").note.as_deref(),
        Some("used by brain (fallback)")
    );
    assert_eq!(get("bedrock").note, None);
    assert!(get("ollama").enabled && get("openai").enabled);
    assert_eq!(get("ollama").note, None);
    assert!(get("sqlite").note.as_deref().unwrap().starts_with("in use"));
    assert!(get("file").enabled);
    assert!(get("current_time").enabled);
    assert_eq!(get("current_time").tier, Some(0));
    let demo = get("demo_physical_action");
    assert!(!demo.enabled);
    assert_eq!(demo.tier, Some(2));
    assert!(
        demo.note
            .as_deref()
            .unwrap()
            .contains("demo_physical_action")
    );
    assert!(get("grpc").enabled && get("control-api").enabled);
    let web = get("web");
    assert!(!web.enabled, "the web client is off without [web] listen");
    assert_eq!(web.note.as_deref(), Some("not served: set [web] listen"));
    assert!(
        states
            .iter()
            .all(|s| s.version == crate::VERSION && s.load_error.is_none())
    );
    let groups: Vec<&str> = states.iter().map(|s| s.group).collect();
    let mut sorted = groups.clone();
    sorted.sort_by_key(|g| {
        ComponentKind::ALL
            .iter()
            .position(|k| k.group() == *g)
            .unwrap()
    });
    assert_eq!(groups, sorted, "grouped by kind in order");
}

#[test]
fn the_web_client_follows_its_listen_and_the_services_list() {
    let served = config("[web]\nlisten = \"127.0.0.1:8480\"\n");
    let web = |cfg: &Config| {
        component_states(cfg)
            .into_iter()
            .find(|s| s.name == WEB_COMPONENT)
            .unwrap()
    };
    assert!(web(&served).enabled);
    assert_eq!(web(&served).note, None);
    let left_out =
        config("[web]\nlisten = \"127.0.0.1:8480\"\n[components.hub]\nservices = [\"grpc\"]\n");
    assert!(!web(&left_out).enabled);
    let named = config("[components.hub]\nservices = [\"web\"]\n");
    assert!(unknown_names(&named.components).is_empty());
}

#[test]
fn the_telegram_channel_follows_its_table_and_the_services_list() {
    let row = |cfg: &Config| {
        component_states(cfg)
            .into_iter()
            .find(|s| s.kind == ComponentKind::HubService && s.name == TELEGRAM_COMPONENT)
            .unwrap()
    };
    let absent = row(&config(""));
    assert!(!absent.enabled);
    assert_eq!(
        absent.note.as_deref(),
        Some("not configured: add [component.telegram]")
    );
    let table = "[component.telegram]\nowner_user_id = 1\nowner_chat_id = 1\n";
    assert!(row(&config(table)).enabled);
    let left_out = config(&format!("{table}[components.hub]\nservices = [\"grpc\"]\n"));
    assert!(!row(&left_out).enabled);
    let named = config(&format!(
        "{table}[components.hub]\nservices = [\"telegram\"]\n"
    ));
    assert!(row(&named).enabled);
    assert!(unknown_names(&named.components).is_empty());
}

#[test]
fn dist_taud_switches_every_tool_off() {
    let cfg = config("[components.tools]\ndisabled = [\"dist:taud\"]\n");
    let tools: Vec<bool> = component_states(&cfg)
        .into_iter()
        .filter(|s| s.kind == ComponentKind::Tool)
        .map(|s| s.enabled)
        .collect();
    assert_eq!(tools, [false, false]);
}

#[test]
fn unknown_names_are_those_nothing_provides() {
    let cfg = config(
        "[components]\ncontext = [\"nodes\"]\n[components.tools]\n\
         disabled = [\"current_time\", \"dist:taud\", \"dist:other\", \"no_such_tool\"]\n\
         [components.hub]\nservices = [\"grpc\", \"telegram\", \"fax\"]\n",
    );
    let unknown = unknown_names(&cfg.components);
    let got: Vec<(&str, &str)> = unknown.iter().map(|u| (u.key, u.name.as_str())).collect();
    assert_eq!(
        got,
        [
            ("components.context", "nodes"),
            ("components.tools.disabled", "dist:other"),
            ("components.tools.disabled", "no_such_tool"),
            ("components.hub.services", "fax"),
        ]
    );
    assert!(unknown_names(&config("").components).is_empty());
}

#[test]
fn serializes_with_snake_case_kinds() {
    let cfg = config("");
    let json = serde_json::to_value(component_states(&cfg)).unwrap();
    assert_eq!(json[0]["kind"], "provider");
    assert_eq!(json[0]["group"], "providers");
    assert!(json[0]["load_error"].is_null());
    assert!(json[0].get("tier").is_none());
    let tool = json
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "tool")
        .unwrap();
    assert_eq!(tool["tier"], 0);
}

#[test]
fn mcp_tool_names_in_disabled_are_not_unknown() {
    let mut components = ComponentsConfig::default();
    components.tools.disabled = vec![
        "mcp__home__lamp".into(),
        "dist:mcp:home".into(),
        "nope".into(),
    ];
    let unknown: Vec<String> = unknown_names(&components)
        .into_iter()
        .map(|u| u.name)
        .collect();
    assert_eq!(unknown, vec!["nope"]);
}
