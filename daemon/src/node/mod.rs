//! Nodes, the domain side: a second `taud` (TAU_ROLE=node) lends its tools to one hub over a link
//! both sides authenticate. This room owns the keys (`identity.rs`), the one pairing store
//! (`pairing_store.rs`, `nodes.json` in the hub directory), one-time codes and their proofs
//! (`pairing_code.rs`), the TLS 1.3 configurations that pin the peer's key (`tls.rs`), the one
//! registry every view of the nodes reads (`node_registry.rs` `NodeRegistry`), a live link's calls in
//! flight (`link_state.rs` `LinkHandle`), the tools a node claims and how a new claim compares with
//! the first one (`claims.rs` `ToolClaim`), a node's tool as the hub's gate sees it
//! (`node_tool.rs` `NodeTool`) and the hub core's lender (`lender.rs` `NodeLender`), with the
//! claims not offered as `ListTools` shows them (`lent_listing.rs`). The wire (tonic) is the
//! `link` room's.
//!
//! Invariants: one pairing store and one flow (`tau node pair` on the hub, `tau node join` on the
//! node); a code is single use, lives 10 minutes and is bound to both certificates' fingerprints;
//! a key that is not pinned is refused at the TLS handshake unless a code is outstanding, and
//! then it may only pair; liveness comes from heartbeats, never from a socket that exists; a tool
//! a node claims is offered only once the hub's owner tiered it, and a claim that changed is not
//! offered again until the node is paired again; a call runs only the claim it was offered for
//! (its digest travels with it); a call whose link drops is "outcome unknown", never retried.

mod claims;
mod identity;
mod lender;
mod lent_listing;
mod link_state;
mod node_registry;
mod node_tool;
mod pairing_code;
mod pairing_store;
mod tls;

pub use claims::ToolClaim;
pub use identity::{Identity, fingerprint};
pub use lender::NodeLender;
pub use link_state::{CallEvent, LinkHandle, MAX_CALLS_IN_FLIGHT, OUTBOUND_QUEUE, Outbound};
pub use node_registry::{LentToolView, NodeRegistry, NodeView, PeerState};
pub use node_tool::{NodeLinks, NodeTool, node_distribution, node_tool_name};
pub use pairing_code::{CODE_LIFETIME, PairError, code_name, hub_proof, node_proof, proofs_match};
pub use pairing_store::{PAIRING_FILE, PAIRING_VERSION, PairedHub, PairedNode, PairingFile};
pub use tls::{ClientKeys, HubKey, client_config, server_config};

/// A node operation failed; each displays as one line.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The pairing store cannot be read or written.
    #[error("{path}: {reason}")]
    Store {
        /// The file.
        path: String,
        /// What went wrong, in one line.
        reason: String,
    },
    /// A key or TLS set-up failed.
    #[error("node keys: {0}")]
    Keys(String),
    /// A name that cannot be a node's.
    #[error("'{0}' cannot name a node: use {rule}", rule = tau_api::config::SERVER_KEY_RULE)]
    BadName(String),
    /// Not paired with such a node.
    #[error("no node called '{0}' is paired")]
    NotPaired(String),
    /// Too many codes are outstanding.
    #[error("too many pairing codes are outstanding; use one or wait until they expire")]
    TooManyCodes,
    /// A pairing code was refused.
    #[error(transparent)]
    Pair(#[from] PairError),
}
