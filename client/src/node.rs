//! `tau node pair NAME [--json]`, `tau node join HOST:PORT CODE`, `tau node list [--json]` and
//! `tau node revoke NAME`: the one pairing flow between a hub and a machine that lends it tools,
//! through the `tau.v1.Nodes` service of the local `taud` (the hub's, or the node's).
//!
//! Invariants: the client holds no key and decides nothing: codes, keys and pins live in `taud`;
//! every hub call has a deadline ([`CALL_DEADLINE`], longer for a join, which dials the hub); a
//! refusal is printed as the one line `taud` gave.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use serde_json::{Value, json};
use tau_api::installation::Installation;
use tau_api::proto::v1 as pb;

use crate::context::Context;
use crate::environment;
use crate::hub_link::{self, EXIT_NO_HUB};

/// How long one call to the local taud may take.
const CALL_DEADLINE: Duration = Duration::from_secs(10);
/// How long a join may take (the local taud dials the hub and pairs).
const JOIN_DEADLINE: Duration = Duration::from_secs(30);

/// `tau node …`.
#[derive(Debug, clap::Subcommand)]
#[command(defer = true)]
pub enum NodeCommand {
    /// On the hub: print a one-time code (single use, valid 10 minutes) for node NAME.
    Pair {
        /// The node's name: 1 to 24 lowercase letters, digits, '-' or '_'.
        name: String,
        /// Print {"code": …, "expires_at": …}.
        #[arg(long)]
        json: bool,
    },
    /// On the node (TAU_ROLE=node): pair with the hub's node listener using the code it printed.
    Join {
        /// HOST:PORT of the hub's `[nodes] listen`.
        address: String,
        /// The code `tau node pair` printed on the hub.
        code: String,
    },
    /// The paired nodes (on a node: its hub), whether live, and the tools they lend.
    List {
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// On the hub: forget a node's key and close its link at once.
    Revoke {
        /// The node's name.
        name: String,
    },
}

/// Runs `tau node …`.
pub fn run(command: &NodeCommand, ctx: &Context) -> anyhow::Result<ExitCode> {
    let installation =
        Installation::discover(environment::snapshot(ctx), &environment::current_dir()?)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let socket = installation.paths.hub.socket.clone();
        let mut client = match hub_link::connect_nodes(&socket).await {
            Ok(client) => client,
            Err(not_running) => {
                eprintln!("tau node: {not_running}. Start it with `tau hub start`.");
                return Ok(ExitCode::from(EXIT_NO_HUB));
            }
        };
        let result = match command {
            NodeCommand::Pair { name, json } => pair(&mut client, name, *json).await,
            NodeCommand::Join { address, code } => join(&mut client, address, code).await,
            NodeCommand::List { json } => list(&mut client, *json).await,
            NodeCommand::Revoke { name } => revoke(&mut client, name).await,
        };
        match result {
            Ok(()) => Ok(ExitCode::SUCCESS),
            Err(message) => {
                eprintln!("tau node: {message}");
                Ok(ExitCode::FAILURE)
            }
        }
    })
}

type Client = pb::nodes_client::NodesClient<tonic::transport::Channel>;

async fn call<T>(
    deadline: Duration,
    future: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, String> {
    match tokio::time::timeout(deadline, future).await {
        Ok(Ok(response)) => Ok(response.into_inner()),
        Ok(Err(status)) => Err(status.message().to_owned()),
        Err(_) => Err(format!(
            "taud did not answer within {} s",
            deadline.as_secs()
        )),
    }
}

async fn pair(client: &mut Client, name: &str, json: bool) -> Result<(), String> {
    let request = pb::PairNodeRequest {
        name: name.to_owned(),
    };
    let answer = call(CALL_DEADLINE, client.pair_node(request)).await?;
    if json {
        outln!(
            "{}",
            json!({"code": answer.code, "expires_at": answer.expires_at})
        );
    } else {
        outln!(
            "Pairing code for node {name} (single use, valid until {}):",
            answer.expires_at
        );
        outln!("  {}", answer.code);
        outln!(
            "On the node: tau node join HUB_ADDRESS:PORT {}",
            answer.code
        );
    }
    Ok(())
}

async fn join(client: &mut Client, address: &str, code: &str) -> Result<(), String> {
    let request = pb::JoinHubRequest {
        address: address.to_owned(),
        code: code.to_owned(),
    };
    let answer = call(JOIN_DEADLINE, client.join_hub(request)).await?;
    let short: String = answer.hub_fingerprint.chars().take(16).collect();
    outln!(
        "Paired with the hub at {address} as node {} (hub key {short}…); the link stays up from now on.",
        answer.name
    );
    Ok(())
}

async fn revoke(client: &mut Client, name: &str) -> Result<(), String> {
    let request = pb::RevokeNodeRequest {
        name: name.to_owned(),
    };
    call(CALL_DEADLINE, client.revoke_node(request)).await?;
    outln!("Revoked node {name}: its key is forgotten and its link closed.");
    Ok(())
}

async fn list(client: &mut Client, json: bool) -> Result<(), String> {
    let answer = call(CALL_DEADLINE, client.list_nodes(pb::ListNodesRequest {})).await?;
    if json {
        outln!("{}", list_json(&answer));
    } else {
        out!("{}", list_text(&answer));
    }
    Ok(())
}

fn tier_number(tool: &pb::LentTool) -> Option<u8> {
    tool.tiered.then(|| match pb::Tier::try_from(tool.tier) {
        Ok(pb::Tier::Read) => 0,
        Ok(pb::Tier::DigitalWrite) => 1,
        _ => 2,
    })
}

fn list_json(answer: &pb::ListNodesResponse) -> Value {
    let nodes: Vec<Value> = answer
        .nodes
        .iter()
        .map(|n| {
            let tools: Vec<Value> = n
                .tools
                .iter()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "tier": tier_number(t),
                        "offered_as": (!t.offered_as.is_empty()).then_some(&t.offered_as),
                        "changed": t.changed,
                    })
                })
                .collect();
            json!({
                "name": n.name,
                "live": n.live,
                "last_seen": (!n.last_seen.is_empty()).then_some(&n.last_seen),
                "address": n.address,
                "state": n.state,
                "fingerprint": n.fingerprint,
                "tools": tools,
            })
        })
        .collect();
    json!({"role": answer.role, "nodes": nodes})
}

fn list_text(answer: &pb::ListNodesResponse) -> String {
    let mut out = String::new();
    if answer.nodes.is_empty() {
        out.push_str(if answer.role == "node" {
            "This node is not paired with a hub: run tau node join HOST:PORT CODE.\n"
        } else {
            "No nodes are paired: run tau node pair NAME.\n"
        });
        return out;
    }
    for n in &answer.nodes {
        let what = if answer.role == "node" {
            "hub for node"
        } else {
            "node"
        };
        let live = if n.live { "live" } else { "not live" };
        let seen = if n.last_seen.is_empty() {
            "never seen since start"
        } else {
            &n.last_seen
        };
        out.push_str(&format!(
            "{what} {}: {live}, last seen {seen}, address {}, {}\n",
            n.name,
            if n.address.is_empty() {
                "-"
            } else {
                &n.address
            },
            n.state
        ));
        for t in &n.tools {
            let how = match (tier_number(t), t.changed) {
                (_, true) => "changed since pairing: not offered; pair again".to_owned(),
                (None, false) => {
                    "untiered: never offered (tier it in the hub's tau.toml)".to_owned()
                }
                (Some(tier), false) => format!("tier {tier}, offered as {}", t.offered_as),
            };
            out.push_str(&format!("  {}: {how}\n", t.name));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> pb::ListNodesResponse {
        pb::ListNodesResponse {
            role: "hub".into(),
            nodes: vec![pb::NodeInfo {
                name: "pi".into(),
                live: true,
                last_seen: "2026-12-06T07:00:00Z".into(),
                address: "127.0.0.1:5000".into(),
                state: "paired".into(),
                fingerprint: "ab".into(),
                tools: vec![
                    pb::LentTool {
                        name: "current_time".into(),
                        tier: pb::Tier::Read as i32,
                        tiered: true,
                        offered_as: "node__pi__current_time".into(),
                        changed: false,
                    },
                    pb::LentTool {
                        name: "door".into(),
                        tier: pb::Tier::Unspecified as i32,
                        tiered: false,
                        offered_as: String::new(),
                        changed: false,
                    },
                    pb::LentTool {
                        name: "lamp".into(),
                        tier: pb::Tier::Physical as i32,
                        tiered: true,
                        offered_as: String::new(),
                        changed: true,
                    },
                ],
            }],
        }
    }

    #[test]
    fn the_list_shows_tiers_untiered_and_changed_tools() {
        let text = list_text(&sample());
        assert!(
            text.starts_with(
                "node pi: live, last seen 2026-12-06T07:00:00Z, address 127.0.0.1:5000, paired\n"
            ),
            "{text}"
        );
        assert!(text.contains("  current_time: tier 0, offered as node__pi__current_time\n"));
        assert!(text.contains("  door: untiered: never offered"));
        assert!(text.contains("  lamp: changed since pairing: not offered; pair again"));
        let json = list_json(&sample());
        assert_eq!(json["nodes"][0]["tools"][0]["tier"], 0);
        assert_eq!(json["nodes"][0]["tools"][1]["tier"], Value::Null);
        assert_eq!(json["nodes"][0]["tools"][2]["changed"], true);
        let empty = pb::ListNodesResponse {
            role: "node".into(),
            nodes: vec![],
        };
        assert!(list_text(&empty).contains("not paired with a hub"));
    }
}
