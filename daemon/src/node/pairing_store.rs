//! The one pairing store: `nodes.json` in the hub directory (0600, replaced atomically), holding
//! this `taud`'s own key, the nodes it pinned (on a hub), the hub it pinned (on a node), and the
//! first claim seen of each tool a node lends.
//!
//! Invariants: versioned (`version`, now [`PAIRING_VERSION`]); a newer version is refused, unknown
//! keys are ignored; a damaged file is an error, never silently replaced (it holds keys).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::NodeError;
use super::identity::Identity;

pub use tau_api::hub_files::{PAIRING_FILE, PAIRING_VERSION};

/// The whole file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PairingFile {
    /// The format version.
    pub version: u32,
    /// This `taud`'s key and certificate, hex DER.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<StoredIdentity>,
    /// On a hub: the nodes whose keys it pinned.
    #[serde(default)]
    pub nodes: Vec<PairedNode>,
    /// On a node: the hub whose key it pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub: Option<PairedHub>,
}

/// A stored key pair.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredIdentity {
    /// The certificate, hex DER.
    pub cert: String,
    /// The PKCS#8 private key, hex DER.
    pub key: String,
}

/// A node a hub pinned.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PairedNode {
    pub name: String,
    /// SHA-256 of its certificate, hex.
    pub fingerprint: String,
    /// RFC 3339.
    pub paired_at: String,
    /// The digest of each tool's first claim after pairing (name, description, schema).
    #[serde(default)]
    pub tools: BTreeMap<String, String>,
}

/// The hub a node pinned.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PairedHub {
    /// The name the hub knows this node by.
    pub name: String,
    /// HOST:PORT of the hub's node listener.
    pub address: String,
    /// SHA-256 of its certificate, hex.
    pub fingerprint: String,
    /// RFC 3339.
    pub paired_at: String,
}

impl PairingFile {
    /// Reads `path`; a missing file is an empty store.
    pub fn load(path: &Path) -> Result<Self, NodeError> {
        let failed = |reason: String| NodeError::Store {
            path: path.display().to_string(),
            reason,
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Self {
                    version: PAIRING_VERSION,
                    ..Self::default()
                });
            }
            Err(e) => return Err(failed(e.to_string())),
        };
        let file: Self = serde_json::from_str(&text).map_err(|e| failed(e.to_string()))?;
        if file.version == 0 || file.version > PAIRING_VERSION {
            return Err(failed(format!(
                "version {} is not one this taud reads (it reads 1 to {PAIRING_VERSION})",
                file.version
            )));
        }
        Ok(file)
    }

    /// Writes the store to `path` atomically (0600).
    pub fn save(&self, path: &Path) -> Result<(), NodeError> {
        let failed = |reason: String| NodeError::Store {
            path: path.display().to_string(),
            reason,
        };
        let mut file = self.clone();
        file.version = PAIRING_VERSION;
        let text = serde_json::to_vec_pretty(&file).map_err(|e| failed(e.to_string()))?;
        tau_api::durable_file::write_atomic(path, &text).map_err(|e| failed(e.to_string()))
    }

    /// The stored identity, if any and readable.
    pub fn identity(&self) -> Option<Identity> {
        let stored = self.identity.as_ref()?;
        let cert = hex::decode(&stored.cert).ok()?;
        let key = hex::decode(&stored.key).ok()?;
        Some(Identity::from_der(cert, key))
    }

    /// Keeps `identity` as this store's own.
    pub fn set_identity(&mut self, identity: &Identity) {
        self.identity = Some(StoredIdentity {
            cert: hex::encode(identity.cert_der()),
            key: hex::encode(identity.key_der()),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version-1 file as this build first wrote it.
    const V1: &str = r#"{
  "version": 1,
  "nodes": [
    {"name": "pi", "fingerprint": "ab12", "paired_at": "2026-12-06T07:00:00Z",
     "tools": {"current_time": "d1"}}
  ],
  "hub": {"name": "pi", "address": "10.0.0.2:7878", "fingerprint": "cd34",
          "paired_at": "2026-12-06T07:00:00Z"},
  "later_key": true
}"#;

    #[test]
    fn version_1_is_read_and_a_newer_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PAIRING_FILE);
        std::fs::write(&path, V1).unwrap();
        let file = PairingFile::load(&path).unwrap();
        assert_eq!(file.nodes[0].name, "pi");
        assert_eq!(file.nodes[0].tools["current_time"], "d1");
        assert_eq!(file.hub.as_ref().unwrap().address, "10.0.0.2:7878");
        std::fs::write(&path, V1.replace("\"version\": 1", "\"version\": 2")).unwrap();
        let e = PairingFile::load(&path).unwrap_err().to_string();
        assert!(e.contains("version 2 is not one this taud reads"), "{e}");
        std::fs::write(&path, "{").unwrap();
        assert!(
            PairingFile::load(&path).is_err(),
            "a damaged store is an error"
        );
    }

    #[test]
    fn a_saved_store_round_trips_with_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PAIRING_FILE);
        let empty = PairingFile::load(&path).unwrap();
        assert_eq!(empty.version, PAIRING_VERSION);
        assert!(empty.identity().is_none());
        let mut file = empty;
        let identity = Identity::generate("tau-hub").unwrap();
        file.set_identity(&identity);
        file.save(&path).unwrap();
        let back = PairingFile::load(&path).unwrap();
        assert_eq!(
            back.identity().unwrap().fingerprint(),
            identity.fingerprint()
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
