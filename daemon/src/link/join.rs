//! Pairing from the node's side, and the one way a node opens a TLS channel to its hub.
//!
//! `join`: make this node's new key (its certificate names it `tau-node:<name>`), connect
//! learning the hub's key, prove the code over both fingerprints, check the hub's proof over the
//! same, then pin the hub and keep the new key, in one write of the pairing store.
//!
//! Invariants: nothing is stored unless the hub proved it knows the code over the keys this node
//! saw; every step has a deadline ([`JOIN_DEADLINE`] in all).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tau_api::proto::v1 as pb;
use tokio::net::TcpStream;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::node::{
    HubKey, Identity, NodeRegistry, PairedHub, client_config, code_name, hub_proof, node_proof,
};

/// How long pairing may take in all.
pub const JOIN_DEADLINE: Duration = Duration::from_secs(20);
/// How long a connection to the hub may take.
pub const CONNECT_DEADLINE: Duration = Duration::from_secs(10);

/// A gRPC channel to `address` over TLS with `tls`.
pub async fn connect(
    address: &str,
    tls: Arc<rustls::ClientConfig>,
) -> Result<Channel, tonic::transport::Error> {
    let address = address.to_owned();
    let connector = tower::service_fn(move |_: Uri| {
        let tls = Arc::clone(&tls);
        let address = address.clone();
        async move {
            let tcp = TcpStream::connect(&address).await?;
            let _ = tcp.set_nodelay(true);
            let name = rustls::pki_types::ServerName::try_from("tau-hub")
                .map_err(std::io::Error::other)?;
            let stream = tokio_rustls::TlsConnector::from(tls)
                .connect(name, tcp)
                .await?;
            let stream = super::first_bytes::FirstBytes::read_ahead(stream).await?;
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
        }
    });
    Endpoint::from_static("http://tau-hub")
        .connect_timeout(CONNECT_DEADLINE)
        .timeout(CONNECT_DEADLINE)
        .connect_with_connector(connector)
        .await
}

/// Whether a failure (its debug text, which carries the TLS alert) says the hub refused this
/// node's key, or presented one other than the pinned one: then only pairing again helps.
pub(super) fn refused_key(text: &str) -> bool {
    [
        "AccessDenied",
        "BadCertificate",
        "CertificateUnknown",
        "InvalidCertificate",
        "not paired",
    ]
    .iter()
    .any(|mark| text.contains(mark))
}

/// Pairs this node with the hub at `address` using `code`; the name the hub knows it by and the
/// hub's fingerprint. Errors are one line for a person.
pub async fn join(
    registry: &NodeRegistry,
    address: &str,
    code: &str,
) -> Result<(String, String), String> {
    tokio::time::timeout(JOIN_DEADLINE, join_inner(registry, address, code))
        .await
        .map_err(|_| {
            format!(
                "{address} did not finish pairing within {} s",
                JOIN_DEADLINE.as_secs()
            )
        })?
}

async fn join_inner(
    registry: &NodeRegistry,
    address: &str,
    code: &str,
) -> Result<(String, String), String> {
    let (name, secret) = code_name(code).map_err(|e| e.to_string())?;
    let identity = Identity::generate(&format!("tau-node:{name}")).map_err(|e| e.to_string())?;
    let seen = Arc::new(Mutex::new(None));
    let tls =
        client_config(&identity, HubKey::Learn(Arc::clone(&seen))).map_err(|e| e.to_string())?;
    let channel = connect(address, tls).await.map_err(|e| {
        if refused_key(&format!("{e:?}")) {
            format!(
                "the hub at {address} refused this node's key at the handshake: it has no pairing code open; on the hub, run tau node pair {name}"
            )
        } else {
            format!("cannot reach the hub at {address}: {e}")
        }
    })?;
    let hub_fp = seen
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .ok_or_else(|| format!("{address} presented no key"))?;
    let proof = node_proof(&secret, identity.fingerprint(), &hub_fp);
    let answer = pb::node_link_client::NodeLinkClient::new(channel)
        .pair(pb::PairRequest {
            name: name.clone(),
            proof,
        })
        .await
        .map_err(|status| match status.code() {
            tonic::Code::FailedPrecondition => status.message().to_owned(),
            _ => format!("the hub at {address} refused pairing: {}", status.message()),
        })?
        .into_inner();
    let expected = hub_proof(&secret, identity.fingerprint(), &hub_fp);
    if !crate::node::proofs_match(&answer.proof, &expected) {
        return Err(format!(
            "{address} did not prove it knows the code; the connection may pass through another machine: not paired"
        ));
    }
    registry
        .pin_hub(
            &identity,
            PairedHub {
                name: name.clone(),
                address: address.to_owned(),
                fingerprint: hub_fp.clone(),
                paired_at: jiff::Timestamp::now().to_string(),
            },
        )
        .map_err(|e| e.to_string())?;
    Ok((name, hub_fp))
}
