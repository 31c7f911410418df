//! The registry's pairing rules: codes single use and bound to the keys, liveness from being
//! heard, changed claims flagged and not offered (at a link's start or announced on it later),
//! revoke closing the link.

use super::*;
use crate::node::pairing_code::code_name;

fn registry(dir: &Path) -> Arc<NodeRegistry> {
    let mut config = NodesConfig::default();
    let text = "[nodes.pi.tools.clock]\ntier = 0\n";
    let parsed = tau_api::config::Config::from_toml_str(
        text,
        Path::new("/t/tau.toml"),
        &tau_api::env::Env::new(),
        &tau_api::config::KnownNames::builtin(),
    )
    .unwrap();
    config.nodes = parsed.nodes.nodes;
    Arc::new(NodeRegistry::open(dir, config).unwrap())
}

fn prove(registry: &NodeRegistry, code: &str, node_fp: &str) -> String {
    let (_, secret) = code_name(code).unwrap();
    let hub_fp = registry.identity().unwrap().fingerprint().to_owned();
    node_proof(&secret, node_fp, &hub_fp)
}

fn claim(name: &str, description: &str) -> ToolClaim {
    ToolClaim {
        name: name.into(),
        description: description.into(),
        input_schema_json: "{}".into(),
    }
}

#[test]
fn a_code_pairs_once_and_only_with_the_keys_it_was_proved_over() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path());
    assert!(
        !reg.admit("nodekey", Some("pi")),
        "no code outstanding: refused"
    );
    let (code, _) = reg.issue_code("pi").unwrap();
    assert!(
        reg.admit("nodekey", None),
        "a code is outstanding: may pair"
    );
    let relayed = prove(&reg, &code, "relaykey");
    assert!(matches!(
        reg.redeem("pi", &relayed, "nodekey"),
        Err(NodeError::Pair(PairError::Wrong))
    ));
    let good = prove(&reg, &code, "nodekey");
    assert!(reg.redeem("pi", &good, "nodekey").is_ok());
    assert!(matches!(
        reg.redeem("pi", &good, "nodekey"),
        Err(NodeError::Pair(PairError::Reused(_)))
    ));
    assert_eq!(reg.pinned_name("nodekey").as_deref(), Some("pi"));
    // A used code is remembered for a while, so a new key may still ask (and hear why not).
    assert!(reg.admit("otherkey", Some("pi")));
    assert_eq!(reg.list()[0].state, PeerState::KeyChanged);
    reg.lock().codes.clear();
    assert!(
        !reg.admit("otherkey", Some("pi")),
        "no code remembered: refused"
    );
    // The pin is in the store: a new registry over it admits the key.
    let again = registry(dir.path());
    assert!(again.admit("nodekey", None));
    assert!(reg.issue_code("Not A Name").is_err());
}

#[test]
fn an_expired_code_is_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path());
    let (code, _) = reg.issue_code("pi").unwrap();
    reg.lock().codes[0].expires = Instant::now();
    let proof = prove(&reg, &code, "k");
    assert!(matches!(
        reg.redeem("pi", &proof, "k"),
        Err(NodeError::Pair(PairError::Expired(_)))
    ));
}

#[test]
fn live_tiered_and_changed_tools() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path());
    let (code, _) = reg.issue_code("pi").unwrap();
    reg.redeem("pi", &prove(&reg, &code, "k"), "k").unwrap();
    let claims = vec![claim("clock", "tells the time"), claim("door", "opens it")];
    let (link, _rx) = reg.attach("pi", "127.0.0.1:5", claims).unwrap();
    assert_eq!(reg.live_names(), ["pi"]);
    let names: Vec<String> = reg.tools().iter().map(|t| t.spec().name.clone()).collect();
    assert_eq!(
        names,
        ["node__pi__clock"],
        "the untiered door is never offered"
    );
    let view = &reg.list()[0];
    assert_eq!(view.tools[1].tier, None);
    // Reconnecting with a changed claim: flagged, not offered; the old link is closed.
    let (_newer, _rx2) = reg
        .attach(
            "pi",
            "127.0.0.1:6",
            vec![claim("clock", "now opens the door")],
        )
        .unwrap();
    assert!(link.closed().is_cancelled());
    assert!(reg.tools().is_empty());
    assert!(reg.list()[0].tools[0].changed);
    // The old link ending leaves the newer one alone; revoking closes it.
    reg.detach("pi", link.id());
    assert_eq!(reg.live_names(), ["pi"]);
    reg.revoke("pi").unwrap();
    assert!(reg.live_names().is_empty() && reg.list().is_empty());
    assert!(matches!(reg.revoke("pi"), Err(NodeError::NotPaired(_))));
    assert_eq!(
        reg.live_link("pi").err().as_deref(),
        Some("node pi is not connected")
    );
}

#[test]
fn claims_announced_on_a_live_link_replace_the_old_ones_under_the_same_rule() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(dir.path());
    let (code, _) = reg.issue_code("pi").unwrap();
    reg.redeem("pi", &prove(&reg, &code, "k"), "k").unwrap();
    let clock = claim("clock", "tells the time");
    let (link, _rx) = reg.attach("pi", "127.0.0.1:5", vec![]).unwrap();
    assert!(reg.tools().is_empty());
    assert_eq!(reg.offered_digest("pi", "clock"), None);
    // The tool arrives later on the same link (an MCP server became ready): offered.
    reg.update_claims("pi", link.id(), vec![clock.clone()])
        .unwrap();
    assert_eq!(reg.tools().len(), 1);
    assert_eq!(reg.offered_digest("pi", "clock"), Some(clock.digest()));
    // It changes on the same link: flagged and no longer offered, so a call made for the old
    // claim finds no digest to match.
    let changed = claim("clock", "now opens the door");
    reg.update_claims("pi", link.id(), vec![changed]).unwrap();
    assert!(reg.tools().is_empty());
    assert!(reg.list()[0].tools[0].changed);
    assert_eq!(reg.offered_digest("pi", "clock"), None);
    // An announcement on a link that was replaced is ignored.
    let (newer, _rx2) = reg.attach("pi", "127.0.0.1:6", vec![]).unwrap();
    reg.update_claims("pi", link.id(), vec![clock.clone()])
        .unwrap();
    assert!(reg.list()[0].tools.is_empty());
    // Back as first seen: offered again.
    reg.update_claims("pi", newer.id(), vec![clock.clone()])
        .unwrap();
    assert_eq!(reg.offered_digest("pi", "clock"), Some(clock.digest()));
}
