//! The client describes taud's components from `tau_api::components` without linking taud; this keeps
//! that table in step with the tools taud really ships (names, order, tiers and distribution).

use std::sync::Arc;

use tau_api::components::{BUILTIN_DISTRIBUTION, ComponentKind, builtin_of};
use taud::tool::builtin::{SystemClock, shipped};

#[test]
fn the_tool_table_matches_the_shipped_tools() {
    let shipped: Vec<(String, u8, String)> = shipped(Arc::new(SystemClock))
        .iter()
        .map(|tool| {
            let spec = tool.spec();
            let tier = spec.tier().expect("a shipped tool has a tier");
            (
                spec.name.clone(),
                tier.number(),
                tool.distribution().to_owned(),
            )
        })
        .collect();
    let table: Vec<(String, u8, String)> = builtin_of(ComponentKind::Tool)
        .map(|c| {
            (
                c.name.to_owned(),
                c.tier.expect("a tool in the table has a tier"),
                BUILTIN_DISTRIBUTION.to_owned(),
            )
        })
        .collect();
    assert_eq!(table, shipped);
    assert_eq!(BUILTIN_DISTRIBUTION, taud::tool::BUILTIN_DISTRIBUTION);
}

#[test]
fn the_shipped_tools_catalog_disables_like_the_table() {
    let disabled = vec!["demo_physical_action".to_string()];
    let catalog = taud::tool::builtin::shipped_catalog(Arc::new(SystemClock), &disabled).unwrap();
    let config = tau_api::config::Config::from_toml_str(
        "[components.tools]\ndisabled = [\"demo_physical_action\"]\n",
        std::path::Path::new("/t/tau.toml"),
        &tau_api::env::Env::new(),
        &tau_api::config::KnownNames::builtin(),
    )
    .unwrap();
    let enabled: Vec<String> = tau_api::components::component_states(&config)
        .into_iter()
        .filter(|s| s.kind == ComponentKind::Tool && s.enabled)
        .map(|s| s.name)
        .collect();
    assert_eq!(enabled, catalog.names());
}

/// `tau components` (the table) and taud (the registry) agree on which hub services run: the core
/// ones always, whatever `[components.hub] services` lists, and the web client when `[web] listen`
/// is set and the list is empty or names it.
#[test]
fn the_hub_service_flags_match_what_the_registry_builds() {
    let web = "[web]\nlisten = \"127.0.0.1:8480\"\n";
    for (list, web_table, expected) in [
        ("[]", "", &["control-api", "grpc"][..]),
        ("[\"control-api\"]", "", &["control-api", "grpc"]),
        ("[\"telegram\"]", "", &["control-api", "grpc"]),
        ("[]", web, &["control-api", "grpc", "web"]),
        ("[\"web\"]", web, &["control-api", "grpc", "web"]),
        ("[\"grpc\"]", web, &["control-api", "grpc"]),
    ] {
        let config = tau_api::config::Config::from_toml_str(
            &format!("{web_table}[components.hub]\nservices = {list}\n"),
            std::path::Path::new("/t/tau.toml"),
            &tau_api::env::Env::new(),
            &tau_api::config::KnownNames::builtin(),
        )
        .unwrap();
        let listed: Vec<String> = tau_api::components::component_states(&config)
            .into_iter()
            .filter(|s| s.kind == ComponentKind::HubService && s.enabled)
            .map(|s| s.name)
            .collect();
        let mut options = taud::host::HubOptions::new(std::path::PathBuf::from("/d"));
        options.services = config.components.hub.services.clone();
        let mut registry = taud::services::builtin_services();
        if config.web.listen.is_some() {
            let launch = taud::web::WebLaunch {
                config: config.web.clone(),
                lang: config.ui.language,
                session_ttl: taud::web::SESSION_TTL,
                nodes: None,
            };
            taud::services::register_web(&mut registry, launch);
        }
        let built: Vec<String> = registry
            .build(&options)
            .iter()
            .map(|s| s.name().to_owned())
            .collect();
        let case = format!("{web_table}services = {list}");
        assert_eq!(listed, built, "{case}");
        assert_eq!(built, expected, "{case}");
    }
}
