//! Nodes end to end: two real `taud` on loopback (temporary homes, free ports), one a hub with a
//! node listener, one with TAU_ROLE=node. Pairing (single use, bound to both keys; reused and
//! wrong codes refused in one line; an unpaired or changed key refused), the link's liveness in
//! `tau.v1.Nodes` and `GetStatus`, tier-0 and tier-2 node calls through the hub's gate, untiered
//! tools never offered, a node killed mid-call (outcome unknown), restarts of either side, a hub
//! gone silent (the node ends the link and dials again), and revoke.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support;

use support::api::*;
use support::nodes::*;
use support::process::{Install, free_port};
use tau_api::proto::v1 as pb;
use tonic::Code;

const EFFECT: &str = "Moves the demo actuator on the node.";

fn hub_install(listen: u16, tier_physical: bool) -> Install {
    let mut config = format!(
        "[hub]\nheartbeat_seconds = 1\n[nodes]\nlisten = \"127.0.0.1:{listen}\"\nheartbeat = 1\ncall_timeout = 10\n[nodes.pi.tools.current_time]\ntier = 0\n"
    );
    if tier_physical {
        config.push_str(&format!(
            "[nodes.pi.tools.demo_physical_action]\ntier = 2\neffect = \"{EFFECT}\"\n"
        ));
    }
    Install::with_config(&config)
}

fn node_install() -> Install {
    Install::with_config("[hub]\nheartbeat_seconds = 1\nrole = \"node\"\n[nodes]\nheartbeat = 1\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairing_is_single_use_bound_to_both_keys_and_refuses_in_one_line() {
    let listen = free_port();
    let hub_home = hub_install(listen, false);
    let hub = hub_home.spawn();
    hub_home.wait_ready(hub.pid());
    let node_home = node_install();
    let node = node_home.spawn();
    node_home.wait_ready(node.pid());
    let mut hub_nodes = nodes(&hub_home).await;
    let mut node_nodes = nodes(&node_home).await;

    // A key nobody paired is refused at the handshake while no code is open.
    let stranger = taud::node::Identity::generate("tau-node:pi").unwrap();
    let tls = taud::node::client_config(
        &stranger,
        taud::node::HubKey::Learn(Arc::new(Mutex::new(None))),
    )
    .unwrap();
    let refused = try_link(listen, tls.clone()).await;
    assert!(refused.is_err(), "an unpaired key got a link");

    // Each side's role is its own.
    let wrong_side = join(&mut hub_nodes, listen, "pi:00000-00000-00000-00000").await;
    assert_eq!(wrong_side.unwrap_err().code(), Code::FailedPrecondition);
    let wrong_side = node_nodes
        .pair_node(pb::PairNodeRequest { name: "pi".into() })
        .await;
    assert_eq!(wrong_side.unwrap_err().code(), Code::FailedPrecondition);

    let closed = join(&mut node_nodes, listen, "pi:00000-00000-00000-00000")
        .await
        .unwrap_err();
    let closed = closed.message();
    assert!(
        closed.contains("refused this node's key at the handshake"),
        "{closed}"
    );

    let code = code(&mut hub_nodes).await;
    let wrong = join(&mut node_nodes, listen, "pi:00000-00000-00000-00000")
        .await
        .unwrap_err();
    assert!(
        wrong.message().starts_with("this pairing code is wrong"),
        "{}",
        wrong.message()
    );
    let joined = join(&mut node_nodes, listen, &code).await.unwrap();
    assert_eq!(joined.name, "pi");

    let listed = wait_live(&mut hub_nodes, "pi", true).await;
    assert_eq!(listed.state, "paired");
    let time = listed
        .tools
        .iter()
        .find(|t| t.name == "current_time")
        .unwrap();
    assert_eq!(
        (time.tiered, time.offered_as.as_str()),
        (true, "node__pi__current_time")
    );
    let action = listed
        .tools
        .iter()
        .find(|t| t.name == "demo_physical_action")
        .unwrap();
    assert!(
        !action.tiered && action.offered_as.is_empty(),
        "untiered: {action:?}"
    );
    let hub_seen = wait_live(&mut node_nodes, "pi", true).await;
    assert_eq!(hub_seen.fingerprint, joined.hub_fingerprint);

    // The hub's status names the live node; the untiered tool is never offered to the model.
    let mut client = socket_client(&hub_home).await;
    let status = client
        .get_status(pb::GetStatusRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.nodes, ["pi"]);
    let session = new_session(&mut client, "terminal").await;
    let (call, text) = one_call(&mut client, &session, "use node__pi__demo_physical_action").await;
    assert!(call.is_none(), "an untiered node tool was called: {call:?}");
    assert!(text.contains("You said"), "{text}");

    // The code again (the node makes a new key for it): refused, and pi flagged, since another
    // key claimed to be it; so is another key asking for a link.
    let reused = join(&mut node_nodes, listen, &code).await.unwrap_err();
    let reused = reused.message();
    assert!(
        reused.starts_with("this pairing code was already used"),
        "{reused}"
    );
    assert!(!reused.contains('\n'));
    let refused = try_link(listen, tls).await;
    assert!(refused.is_err());
    let flagged = wait_state(&mut hub_nodes, "key changed: pair again").await;
    assert_eq!(flagged.name, "pi");
}

/// Opens a link with `tls` as a node would: the hello, then the hub's first frame.
async fn try_link(listen: u16, tls: Arc<rustls::ClientConfig>) -> Result<(), String> {
    let address = format!("127.0.0.1:{listen}");
    let connector = tower::service_fn(move |_: tonic::transport::Uri| {
        let tls = Arc::clone(&tls);
        let address = address.clone();
        async move {
            let tcp = tokio::net::TcpStream::connect(&address).await?;
            let name = rustls::pki_types::ServerName::try_from("tau-hub").unwrap();
            let tls = tokio_rustls::TlsConnector::from(tls)
                .connect(name, tcp)
                .await?;
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(tls))
        }
    });
    let channel = tonic::transport::Endpoint::from_static("http://tau-hub")
        .connect_with_connector(connector)
        .await
        .map_err(|e| format!("{e:?}"))?;
    let hello = pb::NodeFrame {
        frame: Some(pb::node_frame::Frame::Hello(pb::NodeHello {
            tools: vec![],
        })),
    };
    let outbound = tokio_stream::iter(vec![hello]);
    let mut client = pb::node_link_client::NodeLinkClient::new(channel);
    let mut inbound = tokio::time::timeout(Duration::from_secs(10), client.link(outbound))
        .await
        .map_err(|_| "no answer".to_owned())?
        .map_err(|s| format!("{s:?}"))?
        .into_inner();
    match tokio::time::timeout(Duration::from_secs(10), inbound.message()).await {
        Ok(Ok(Some(_))) => Ok(()),
        other => Err(format!("{other:?}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_calls_go_through_the_hubs_gate_and_survive_restarts() {
    let listen = free_port();
    let hub_home = hub_install(listen, true);
    let mut hub = hub_home.spawn();
    hub_home.wait_ready(hub.pid());
    let node_home = node_install();
    let mut node = node_home.spawn();
    node_home.wait_ready(node.pid());
    let mut hub_nodes = nodes(&hub_home).await;
    let code = code(&mut hub_nodes).await;
    join(&mut nodes(&node_home).await, listen, &code)
        .await
        .unwrap();
    wait_live(&mut hub_nodes, "pi", true).await;

    let mut client = socket_client(&hub_home).await;
    let session = new_session(&mut client, "terminal").await;
    let (call, _) = one_call(&mut client, &session, "use node__pi__current_time").await;
    let call = call.expect("a tier-0 node call");
    assert_eq!(
        (call.tier, call.status),
        (pb::Tier::Read as i32, pb::ToolCallStatus::Success as i32)
    );
    assert!(
        call.result_summary.contains("ISO 8601"),
        "{}",
        call.result_summary
    );

    // Tier 2: asked on the hub; run once when approved, not at all when rejected.
    for (decision, status) in [
        (pb::ApprovalDecision::Approved, pb::ToolCallStatus::Success),
        (pb::ApprovalDecision::Rejected, pb::ToolCallStatus::Refused),
    ] {
        let text = "use node__pi__demo_physical_action {\"action\": \"lamp on\"}";
        let (mut stream, accepted) = start(&mut client, turn(&session, text, "terminal")).await;
        let approval = until_approval(&mut stream).await;
        assert_eq!(approval.tool, "node__pi__demo_physical_action");
        assert_eq!(approval.effect, EFFECT);
        decide(
            &mut client,
            &approval.approval_id,
            decision,
            &accepted.attachment_id,
        )
        .await;
        let kinds = rest(&mut stream).await;
        assert_eq!(tool_call(&kinds).status, status as i32, "{kinds:?}");
    }
    assert_eq!(
        node_calls(&node_home, "demo_physical_action"),
        1,
        "run once, when approved"
    );

    // The node killed mid-call: outcome unknown, not retried.
    node.signal(nix::sys::signal::Signal::SIGSTOP);
    let killer = {
        let pid = node.pid();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let pid = nix::unistd::Pid::from_raw(pid as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        })
    };
    let (call, _) = one_call(&mut client, &session, "use node__pi__current_time").await;
    killer.await.unwrap();
    let call = call.expect("the call was made");
    assert_eq!(call.status, pb::ToolCallStatus::Error as i32);
    assert!(
        call.result_summary
            .contains("outcome unknown: node pi disconnected during the call; it was not retried"),
        "{}",
        call.result_summary
    );
    node.wait_exit();
    wait_live(&mut hub_nodes, "pi", false).await;
    let (call, _) = one_call(&mut client, &session, "use node__pi__current_time").await;
    assert!(
        call.unwrap()
            .result_summary
            .contains("node pi is not connected")
    );

    // The node comes back, then the hub restarts: the link comes back each time.
    let node = node_home.spawn();
    node_home.wait_ready(node.pid());
    wait_live(&mut hub_nodes, "pi", true).await;
    hub.signal(nix::sys::signal::Signal::SIGTERM);
    hub.wait_exit();
    let hub = hub_home.spawn();
    hub_home.wait_ready(hub.pid());
    let mut hub_nodes = nodes(&hub_home).await;
    wait_live(&mut hub_nodes, "pi", true).await;

    // Revoked: forgotten at once, and the node is refused from then on.
    hub_nodes
        .revoke_node(pb::RevokeNodeRequest { name: "pi".into() })
        .await
        .unwrap();
    let listed = hub_nodes
        .list_nodes(pb::ListNodesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(listed.nodes.is_empty());
    let mut client = socket_client(&hub_home).await;
    let status = client
        .get_status(pb::GetStatusRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(status.nodes.is_empty());
    let again = hub_nodes
        .revoke_node(pb::RevokeNodeRequest { name: "pi".into() })
        .await;
    assert_eq!(again.unwrap_err().code(), Code::NotFound);
    let mut node_nodes = nodes(&node_home).await;
    wait_state(&mut node_nodes, "key changed: pair again").await;
    drop(hub);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_ends_a_link_its_hub_went_silent_on_and_dials_again() {
    let listen = free_port();
    let hub_home = hub_install(listen, false);
    let hub = hub_home.spawn();
    hub_home.wait_ready(hub.pid());
    let node_home = node_install();
    let node = node_home.spawn();
    node_home.wait_ready(node.pid());
    let mut hub_nodes = pair(&hub_home, &node_home, listen).await;

    // The hub stops answering (heartbeats every second): within two, the node gives the link up,
    // though its own heartbeats keep going out.
    hub.signal(nix::sys::signal::Signal::SIGSTOP);
    let log = node_home.data.join("logs/tau.log");
    let end = tokio::time::Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("the hub was silent for two heartbeats")
    {
        assert!(
            tokio::time::Instant::now() < end,
            "the node never gave up the silent link"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    hub.signal(nix::sys::signal::Signal::SIGCONT);
    wait_live(&mut hub_nodes, "pi", true).await;
    let mut node_nodes = nodes(&node_home).await;
    wait_live(&mut node_nodes, "pi", true).await;
    drop((hub, node));
}
