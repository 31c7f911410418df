//! [`NodeRegistry`]: the one registry of nodes. On a hub: the pinned keys (from the pairing
//! store), the outstanding codes, each node's live link, when it was last heard, from where, and
//! the tools it claims; on a node: the hub it pinned and whether that link is up. `/status`
//! `nodes`, the Now block's "Live nodes:" line and `tau node list` all read it.
//!
//! Invariants: one std lock, never held across an `.await` or while the store is written... except
//! the short atomic write of the pairing store, which is rare (pairing, revoking, a new tool); a
//! node is live only when heard within two heartbeat intervals on a link that is up; at most
//! [`MAX_CODES`] codes are kept; a node that reconnects replaces its old link (closed at once);
//! revoking forgets the key and closes the link at once.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tau_api::config::{NodesConfig, is_valid_server_key};
use tokio::sync::mpsc;

use super::NodeError;
use super::claims::{ToolClaim, compare};
use super::identity::Identity;
use super::link_state::{LinkHandle, Outbound};
use super::node_tool::{NodeLinks, NodeTool, node_tool_name};
use super::pairing_code::{
    CODE_LIFETIME, PairError, code_name, hub_proof, new_code, node_proof, proofs_match,
};
use super::pairing_store::{PAIRING_FILE, PairedHub, PairedNode, PairingFile};
use super::tls::ClientKeys;
use crate::tool::Tool;

/// Codes kept at once (outstanding, used or expired, so a reuse is told apart from a typo).
pub const MAX_CODES: usize = 16;
/// Tools one node may claim.
pub const MAX_CLAIMS: usize = 64;

/// Whether a peer's key is the pinned one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerState {
    Paired,
    /// It presented another key: refused until paired again.
    KeyChanged,
}

impl PeerState {
    /// As `tau node list` shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            PeerState::Paired => "paired",
            PeerState::KeyChanged => "key changed: pair again",
        }
    }
}

/// A node (or, on a node, its hub) as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    pub name: String,
    pub live: bool,
    /// RFC 3339; empty when not heard since start.
    pub last_seen: String,
    pub address: String,
    pub state: PeerState,
    pub fingerprint: String,
    pub tools: Vec<LentToolView>,
}

/// A tool a node lends, with the hub owner's tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LentToolView {
    pub name: String,
    /// `None`: untiered, never offered.
    pub tier: Option<u8>,
    /// The name the model sees, when offered.
    pub offered_as: Option<String>,
    /// Claimed differently than first seen: not offered until paired again.
    pub changed: bool,
    /// The node's description of it; empty when not heard since this hub started.
    pub description: String,
}

struct IssuedCode {
    name: String,
    secret: String,
    expires: Instant,
    used: bool,
}

#[derive(Default)]
struct Peer {
    heard: Option<Instant>,
    last_seen: String,
    address: String,
    key_changed: bool,
    claims: Vec<ToolClaim>,
    changed: BTreeSet<String>,
    link: Option<LinkHandle>,
}

struct State {
    file: PairingFile,
    identity: Option<Identity>,
    codes: Vec<IssuedCode>,
    peers: BTreeMap<String, Peer>,
    hub: Peer,
}

/// The registry (share it as `Arc`).
pub struct NodeRegistry {
    store: PathBuf,
    config: NodesConfig,
    state: Mutex<State>,
    next_link: AtomicU64,
}

impl std::fmt::Debug for NodeRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeRegistry")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .unwrap_or_else(|_| jiff::Timestamp::now())
        .to_string()
}

impl NodeRegistry {
    /// The registry over the pairing store in `hub_dir`, with the hub's `[nodes]` settings.
    /// Nothing is written until a key is needed ([`NodeRegistry::ensure_identity`]).
    pub fn open(hub_dir: &Path, config: NodesConfig) -> Result<Self, NodeError> {
        let store = hub_dir.join(PAIRING_FILE);
        let file = PairingFile::load(&store)?;
        let identity = file.identity();
        Ok(Self {
            store,
            config,
            state: Mutex::new(State {
                file,
                identity,
                codes: Vec::new(),
                peers: BTreeMap::new(),
                hub: Peer::default(),
            }),
            next_link: AtomicU64::new(1),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The hub's `[nodes]` settings.
    pub fn config(&self) -> &NodesConfig {
        &self.config
    }

    /// Seconds between heartbeats.
    pub fn heartbeat(&self) -> Duration {
        Duration::from_secs(self.config.heartbeat_seconds.max(1))
    }

    /// How long a call may go without a result or progress.
    pub fn call_timeout(&self) -> Duration {
        Duration::from_secs(self.config.call_timeout_seconds.max(1))
    }

    /// This taud's own key, if it has one.
    pub fn identity(&self) -> Option<Identity> {
        self.lock().identity.clone()
    }

    /// This taud's own key, made and stored now if it has none (a hub's, at its listener's start,
    /// after the hub lock is held).
    pub fn ensure_identity(&self) -> Result<Identity, NodeError> {
        let mut state = self.lock();
        if let Some(identity) = &state.identity {
            return Ok(identity.clone());
        }
        let made = Identity::generate("tau-hub")?;
        state.file.set_identity(&made);
        state.file.save(&self.store)?;
        state.identity = Some(made.clone());
        Ok(made)
    }

    /// Ends every node's link (the hub is stopping).
    pub fn close_links(&self) {
        let mut state = self.lock();
        for peer in state.peers.values_mut() {
            if let Some(link) = peer.link.take() {
                link.close();
            }
        }
    }

    fn live(&self, peer: &Peer) -> bool {
        let window = self.heartbeat().saturating_mul(2);
        peer.link.is_some() && peer.heard.is_some_and(|t| t.elapsed() <= window)
    }

    // ---- the hub's side ----

    /// A one-time code for node `name`, and when it expires (RFC 3339).
    pub fn issue_code(&self, name: &str) -> Result<(String, String), NodeError> {
        if !is_valid_server_key(name) {
            return Err(NodeError::BadName(name.to_owned()));
        }
        self.ensure_identity()?;
        let code = new_code(name)?;
        let (_, secret) = code_name(&code)?;
        let expires_at = jiff::Timestamp::now()
            .checked_add(CODE_LIFETIME)
            .map(|t| t.round(jiff::Unit::Second).unwrap_or(t).to_string())
            .unwrap_or_default();
        let mut state = self.lock();
        let now = Instant::now();
        let outstanding = |c: &IssuedCode| !c.used && c.expires > now;
        if state.codes.iter().filter(|c| outstanding(c)).count() >= MAX_CODES {
            return Err(NodeError::TooManyCodes);
        }
        if state.codes.len() >= MAX_CODES
            && let Some(spent) = state.codes.iter().position(|c| !outstanding(c))
        {
            state.codes.remove(spent);
        }
        state.codes.push(IssuedCode {
            name: name.to_owned(),
            secret,
            expires: now.checked_add(CODE_LIFETIME).unwrap_or(now),
            used: false,
        });
        Ok((code, expires_at))
    }

    /// Whether an unknown key may finish a handshake to pair: while a code issued in the last
    /// two lifetimes is remembered (used or expired ones too, so their refusal says why rather
    /// than failing the handshake). Such a connection can only pair.
    fn pairing_open(state: &State) -> bool {
        let now = Instant::now();
        state.codes.iter().any(|c| {
            c.expires
                .checked_add(CODE_LIFETIME)
                .is_some_and(|t| t > now)
        })
    }

    /// The paired node whose key has `fingerprint`.
    pub fn pinned_name(&self, fingerprint: &str) -> Option<String> {
        self.lock()
            .file
            .nodes
            .iter()
            .find(|n| n.fingerprint == fingerprint)
            .map(|n| n.name.clone())
    }

    /// Checks a node's proof for a code issued for `name`, seen over a handshake where the node
    /// presented `node_fp`; on success pins that key (replacing an earlier one) and returns the
    /// hub's proof.
    pub fn redeem(&self, name: &str, proof: &str, node_fp: &str) -> Result<String, NodeError> {
        let mut state = self.lock();
        let hub_fp = state
            .identity
            .as_ref()
            .map(|i| i.fingerprint().to_owned())
            .ok_or_else(|| NodeError::Keys("this hub has no key".to_owned()))?;
        let now = Instant::now();
        let matched = state.codes.iter_mut().find(|c| {
            c.name == name && proofs_match(proof, &node_proof(&c.secret, node_fp, &hub_fp))
        });
        let Some(code) = matched else {
            return Err(PairError::Wrong.into());
        };
        if code.used {
            return Err(PairError::Reused(name.to_owned()).into());
        }
        if code.expires <= now {
            return Err(PairError::Expired(name.to_owned()).into());
        }
        code.used = true;
        let answer = hub_proof(&code.secret, node_fp, &hub_fp);
        state.file.nodes.retain(|n| n.name != name);
        state.file.nodes.push(PairedNode {
            name: name.to_owned(),
            fingerprint: node_fp.to_owned(),
            paired_at: now_rfc3339(),
            tools: BTreeMap::new(),
        });
        state.file.save(&self.store)?;
        if let Some(old) = state.peers.remove(name).and_then(|p| p.link) {
            old.close();
        }
        Ok(answer)
    }

    /// A node's link is up: it replaces any earlier link of that node (closed at once). The
    /// claims are compared with the first ones seen since pairing; a changed one is flagged.
    pub fn attach(
        &self,
        name: &str,
        address: &str,
        mut claims: Vec<ToolClaim>,
    ) -> Result<(LinkHandle, mpsc::Receiver<Outbound>), NodeError> {
        claims.truncate(MAX_CLAIMS);
        let id = self.next_link.fetch_add(1, Ordering::Relaxed);
        let (link, rx) = LinkHandle::new(id);
        let mut state = self.lock();
        let State { file, peers, .. } = &mut *state;
        let Some(paired) = file.nodes.iter_mut().find(|n| n.name == name) else {
            return Err(NodeError::NotPaired(name.to_owned()));
        };
        let (changed, learned) = compare(&mut paired.tools, &claims);
        let peer = peers.entry(name.to_owned()).or_default();
        if let Some(old) = peer.link.replace(link.clone()) {
            old.close();
        }
        peer.heard = Some(Instant::now());
        peer.last_seen = now_rfc3339();
        peer.address = address.to_owned();
        peer.key_changed = false;
        peer.claims = claims;
        peer.changed = changed;
        if learned {
            file.save(&self.store)?;
        }
        Ok((link, rx))
    }

    /// The node announced other claims on its live link `link_id` (an MCP server of it restarted
    /// or listed other tools): they replace the earlier ones, compared like a new link's.
    pub fn update_claims(
        &self,
        name: &str,
        link_id: u64,
        mut claims: Vec<ToolClaim>,
    ) -> Result<(), NodeError> {
        claims.truncate(MAX_CLAIMS);
        let mut state = self.lock();
        let State { file, peers, .. } = &mut *state;
        let Some(peer) = peers
            .get_mut(name)
            .filter(|p| p.link.as_ref().is_some_and(|l| l.id() == link_id))
        else {
            return Ok(());
        };
        let Some(paired) = file.nodes.iter_mut().find(|n| n.name == name) else {
            return Err(NodeError::NotPaired(name.to_owned()));
        };
        let (changed, learned) = compare(&mut paired.tools, &claims);
        peer.claims = claims;
        peer.changed = changed;
        if learned {
            file.save(&self.store)?;
        }
        Ok(())
    }

    /// The node was heard on link `link_id`.
    pub fn heard(&self, name: &str, link_id: u64) {
        let mut state = self.lock();
        if let Some(peer) = state.peers.get_mut(name)
            && peer.link.as_ref().is_some_and(|l| l.id() == link_id)
        {
            peer.heard = Some(Instant::now());
            peer.last_seen = now_rfc3339();
        }
    }

    /// Link `link_id` of the node ended (a newer link of it is left alone).
    pub fn detach(&self, name: &str, link_id: u64) {
        let mut state = self.lock();
        if let Some(peer) = state.peers.get_mut(name)
            && peer.link.as_ref().is_some_and(|l| l.id() == link_id)
            && let Some(link) = peer.link.take()
        {
            link.close();
        }
    }

    /// Forgets the node's key and closes its link at once.
    pub fn revoke(&self, name: &str) -> Result<(), NodeError> {
        let mut state = self.lock();
        let before = state.file.nodes.len();
        state.file.nodes.retain(|n| n.name != name);
        if state.file.nodes.len() == before {
            return Err(NodeError::NotPaired(name.to_owned()));
        }
        state.file.save(&self.store)?;
        if let Some(link) = state.peers.remove(name).and_then(|p| p.link) {
            link.close();
        }
        Ok(())
    }

    /// The link of node `name` when it is live; otherwise the line the model reads.
    pub fn live_link(&self, name: &str) -> Result<LinkHandle, String> {
        let state = self.lock();
        state
            .peers
            .get(name)
            .filter(|p| self.live(p))
            .and_then(|p| p.link.clone())
            .ok_or_else(|| format!("node {name} is not connected"))
    }

    /// The digest of node `node`'s claim of `tool` while it is offered: claimed now and unchanged
    /// since pairing.
    pub fn offered_digest(&self, node: &str, tool: &str) -> Option<String> {
        let state = self.lock();
        let peer = state
            .peers
            .get(node)
            .filter(|p| !p.changed.contains(tool))?;
        let claim = peer.claims.iter().find(|c| c.name == tool);
        claim.map(ToolClaim::digest)
    }

    /// The names of the live nodes, sorted.
    pub fn live_names(&self) -> Vec<String> {
        let state = self.lock();
        state
            .peers
            .iter()
            .filter(|(_, p)| self.live(p))
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// The paired nodes as `tau node list` shows them.
    pub fn list(&self) -> Vec<NodeView> {
        let state = self.lock();
        state
            .file
            .nodes
            .iter()
            .map(|paired| {
                let peer = state.peers.get(&paired.name);
                let tools = match peer.filter(|p| p.heard.is_some()) {
                    Some(p) => p
                        .claims
                        .iter()
                        .map(|c| self.lent_view(&paired.name, c, p.changed.contains(&c.name)))
                        .collect(),
                    // Not heard since this hub started: the tools first seen, by name.
                    None => paired
                        .tools
                        .keys()
                        .map(|name| self.lent_view(&paired.name, &ToolClaim::named(name), false))
                        .collect(),
                };
                NodeView {
                    name: paired.name.clone(),
                    live: peer.is_some_and(|p| self.live(p)),
                    last_seen: peer.map(|p| p.last_seen.clone()).unwrap_or_default(),
                    address: peer.map(|p| p.address.clone()).unwrap_or_default(),
                    state: if peer.is_some_and(|p| p.key_changed) {
                        PeerState::KeyChanged
                    } else {
                        PeerState::Paired
                    },
                    fingerprint: paired.fingerprint.clone(),
                    tools,
                }
            })
            .collect()
    }

    fn lent_view(&self, node: &str, claim: &ToolClaim, changed: bool) -> LentToolView {
        let tier = self.config.tier_of(node, &claim.name).map(|t| t.tier);
        LentToolView {
            name: claim.name.clone(),
            tier,
            offered_as: (tier.is_some() && !changed).then(|| node_tool_name(node, &claim.name)),
            changed,
            description: claim.description.clone(),
        }
    }

    /// The node tools offered to the model: each claimed tool the owner tiered, unless its claim
    /// changed since pairing. A node that is away keeps its tools listed (a call then fails at
    /// once saying so).
    pub fn tools(self: &Arc<Self>) -> Vec<Arc<dyn Tool>> {
        let state = self.lock();
        let mut out: Vec<Arc<dyn Tool>> = Vec::new();
        for (node, peer) in &state.peers {
            for claim in &peer.claims {
                if peer.changed.contains(&claim.name) {
                    continue;
                }
                if let Some(tier) = self.config.tier_of(node, &claim.name) {
                    let links = Arc::clone(self) as Arc<dyn NodeLinks>;
                    out.push(Arc::new(NodeTool::new(links, node, claim, tier)));
                }
            }
        }
        out
    }

    // ---- the node's side ----

    /// The hub this node pinned.
    pub fn hub(&self) -> Option<PairedHub> {
        self.lock().file.hub.clone()
    }

    /// Pins `hub` with this node's new `identity` (made for the pairing), in one write.
    pub fn pin_hub(&self, identity: &Identity, hub: PairedHub) -> Result<(), NodeError> {
        let mut state = self.lock();
        state.file.set_identity(identity);
        state.file.hub = Some(hub);
        state.file.save(&self.store)?;
        state.identity = Some(identity.clone());
        state.hub = Peer::default();
        Ok(())
    }

    /// The link to the hub is up (`up`), was heard from, or went down.
    pub fn hub_link(&self, up: Option<bool>) {
        let mut state = self.lock();
        match up {
            Some(true) => {
                let (link, _) = LinkHandle::new(0);
                state.hub.link = Some(link);
                state.hub.key_changed = false;
                state.hub.heard = Some(Instant::now());
                state.hub.last_seen = now_rfc3339();
            }
            Some(false) => state.hub.link = None,
            None => {
                state.hub.heard = Some(Instant::now());
                state.hub.last_seen = now_rfc3339();
            }
        }
    }

    /// The hub refused this node's key, or presented another one: pair again.
    pub fn hub_key_changed(&self) {
        let mut state = self.lock();
        state.hub.key_changed = true;
        state.hub.link = None;
    }

    /// The hub, as a node's `tau node list` shows it.
    pub fn hub_view(&self) -> Option<NodeView> {
        let state = self.lock();
        let hub = state.file.hub.as_ref()?;
        Some(NodeView {
            name: hub.name.clone(),
            live: self.live(&state.hub),
            last_seen: state.hub.last_seen.clone(),
            address: hub.address.clone(),
            state: if state.hub.key_changed {
                PeerState::KeyChanged
            } else {
                PeerState::Paired
            },
            fingerprint: hub.fingerprint.clone(),
            tools: Vec::new(),
        })
    }
}

impl ClientKeys for NodeRegistry {
    fn admit(&self, fingerprint: &str, claimed: Option<&str>) -> bool {
        let mut state = self.lock();
        if state
            .file
            .nodes
            .iter()
            .any(|n| n.fingerprint == fingerprint)
        {
            return true;
        }
        if let Some(name) = claimed
            && state.file.nodes.iter().any(|n| n.name == name)
        {
            state.peers.entry(name.to_owned()).or_default().key_changed = true;
        }
        Self::pairing_open(&state)
    }
}

#[cfg(test)]
#[path = "tests_node_registry.rs"]
mod tests;
