//! What several areas share: the vectors in `tests/data` (see `tests/data/PROVENANCE.md`)
//! and bundles built from them, and a simulated deployment's bundle.

use std::path::PathBuf;

use evidence::bundle::Bundle;
use hickory_resolver::proto::op::{Message, MessageType, ResponseCode};
use hickory_resolver::proto::rr::{RData, Record, RecordType};
use serde_json::{Value, json};

/// 2026-08-13: the near-mpc collateral is current.
pub const NEAR_MPC_AT: u64 = 1_786_622_400;
/// A day after the near-mpc QE identity's nextUpdate (2026-09-11T23:57:43Z).
pub const NEAR_MPC_EXPIRED: u64 = 1_789_171_063 + 86_400;
/// The compose hash of the near-mpc deployment.
pub const NEAR_MPC_COMPOSE_HASH: &str =
    "2911e1f733466216dedb862d6d669e11256ee7a34ce4dbc66c4b807ba7a9c895";

pub fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(rel)
}

pub fn read(rel: &str) -> Vec<u8> {
    std::fs::read(data(rel)).unwrap()
}

/// Standard base64 (padding optional), as dstack's fixtures carry binary fields.
pub fn b64(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    let engine = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    engine.decode(text).unwrap()
}

pub fn near_quote() -> Vec<u8> {
    serde_json::from_slice(&read("dstack-near-mpc/quote.json")).unwrap()
}

pub fn near_tcb_info() -> Value {
    serde_json::from_slice(&read("dstack-near-mpc/tcb_info.json")).unwrap()
}

pub fn near_collateral() -> dcap_qvl::QuoteCollateralV3 {
    evidence::collateral::parse(&read("dstack-near-mpc/collateral.json")).unwrap()
}

/// The event log as `GetQuote` returns it: a JSON string, runtime digests left empty.
pub fn near_getquote_event_log() -> String {
    let mut events = near_tcb_info()["event_log"].clone();
    for e in events.as_array_mut().unwrap() {
        if e["event_type"] == json!(0x0800_0001u32) {
            e["digest"] = json!("");
        }
    }
    events.to_string()
}

/// The near-mpc deployment as a bundle of /info and /attestation responses (no /evidences:
/// the vectors have none), with its collateral.
pub fn near_bundle() -> Bundle {
    let tcb = near_tcb_info();
    let info = json!({
        "app_id": "2911e1f733466216dedb862d6d669e11256ee7a3",
        "instance_id": "",
        "compose_hash": tcb["compose_hash"],
        "tcb_info": tcb,
    });
    let attestation = json!({
        "quote": hex::encode(near_quote()),
        "event_log": near_getquote_event_log(),
        "vm_config": "",
    });
    Bundle {
        info: Some(info),
        attestation: Some(attestation),
        collateral_json: Some(read("dstack-near-mpc/collateral.json")),
        ..Default::default()
    }
}

/// A policy file pinning the near-mpc deployment's OS: its `tcb_info` names the image
/// (`os_image_hash`) and its MRTD and RTMR0-2 (values taken from the deployment itself,
/// as an operator publishing them would).
pub fn near_os_policy() -> evidence::os_image::OsPolicy {
    let tcb = near_tcb_info();
    let s = |k: &str| tcb[k].as_str().unwrap().to_owned();
    evidence::os_image::OsPolicy {
        entries: vec![evidence::os_image::OsEntry {
            os_image_hash: s("os_image_hash"),
            version: None,
            is_dev: None,
            vm_shape: Default::default(),
            mrtd: vec![s("mrtd")],
            rtmr0: Some(s("rtmr0")),
            rtmr1: s("rtmr1"),
            rtmr2: s("rtmr2"),
        }],
    }
}

/// Writes [`near_os_policy`] as os-measurements.json in `dir`; returns the path.
pub fn write_near_os_policy(dir: &std::path::Path) -> PathBuf {
    let path = dir.join("os-measurements.json");
    std::fs::write(&path, serde_json::to_vec(&near_os_policy()).unwrap()).unwrap();
    path
}

/// Flips one byte of a hex string at byte index `i`.
pub fn flip_hex_byte(hex_str: &str, i: usize) -> String {
    let mut b = hex::decode(hex_str).unwrap();
    b[i] ^= 0x01;
    hex::encode(b)
}

/// A complete, consistent bundle from the simulated provider: /info, /attestation, and
/// /evidences/ with sha256sum.txt, quote.json bound to it, a certificate and the ACME
/// account; the TLS leaf is the evidence certificate.
pub async fn simulated_bundle() -> Bundle {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["appliance.test".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    simulated_bundle_with_cert(&cert, "appliance.test").await
}

/// As [`simulated_bundle`], publishing `cert` as the evidence (and TLS) certificate.
pub async fn simulated_bundle_with_cert(cert: &rcgen::Certificate, domain: &str) -> Bundle {
    simulated_bundle_with(cert, domain, true).await
}

/// As [`simulated_bundle_with_cert`]; `acme`: whether an `acme-account.json` is published
/// (a self-signed development stack publishes none).
pub async fn simulated_bundle_with(cert: &rcgen::Certificate, domain: &str, acme: bool) -> Bundle {
    let provider = evidence::SimulatedProvider::new(simulated_app_compose().into_bytes());
    simulated_bundle_of(provider, cert, domain, acme).await
}

/// As [`simulated_bundle_with`], from `provider` (its own app_compose, app id, instance id).
pub async fn simulated_bundle_of(
    provider: evidence::SimulatedProvider,
    cert: &rcgen::Certificate,
    domain: &str,
    acme: bool,
) -> Bundle {
    let provider: evidence::QuoteProvider = provider.into();
    let info = provider.info().await.unwrap();
    let att = provider.quote([0u8; 64]).await.unwrap();

    let cert_pem = cert.pem();
    let cert_name = format!("cert-{domain}.pem");
    let acme_json = json!({ "uri": "https://acme.test/acme/acct/1234" }).to_string();
    let mut sums = format!(
        "{}  {cert_name}\n",
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(cert_pem.as_bytes())),
    );
    if acme {
        sums.push_str(&format!(
            "{}  acme-account.json\n",
            hex::encode(<sha2::Sha256 as sha2::Digest>::digest(acme_json.as_bytes())),
        ));
    }
    let ev_quote = provider
        .quote(evidence::report_data_for(sums.as_bytes()))
        .await
        .unwrap();
    let mut files = std::collections::BTreeMap::new();
    files.insert("sha256sum.txt".to_owned(), sums.into_bytes());
    files.insert(
        "quote.json".to_owned(),
        ev_quote.evidence_quote_json().to_string().into_bytes(),
    );
    if acme {
        files.insert("acme-account.json".to_owned(), acme_json.into_bytes());
    }
    files.insert(cert_name, cert_pem.into_bytes());
    Bundle {
        info: Some(info.info_json()),
        attestation: Some(att.attestation_json()),
        evidence_files: files,
        tls_leaf_der: Some(cert.der().to_vec()),
        domain: Some(domain.to_owned()),
        collateral_json: None,
        nonce: None,
    }
}

pub fn simulated_app_compose() -> String {
    json!({
        "manifest_version": 2,
        "name": "appliance",
        "runner": "docker-compose",
        "docker_compose_file": "services:\n  appliance:\n    image: ghcr.io/example/appliance@sha256:5618a93a78c9ac9173e7ebf7c8af173bd675be6832a2f8c2a9a7149ac2678f54\n  keyservice:\n    image: \"ghcr.io/example/keyservice@sha256:564a5aebc33495d5610626d23cb9e3da8e9d531d0edff9e38aa1ccaf059c15d3\"\n",
    })
    .to_string()
}

/// A small authoritative DNS server on 127.0.0.1 (UDP, built from hickory-proto's message
/// types): `answer(name, type)` gives the records of a name (lowercase, no trailing dot).
/// Stops when the runtime ends.
pub async fn dns_server(
    answer: impl Fn(&str, RecordType) -> Vec<RData> + Send + Sync + 'static,
) -> std::net::SocketAddr {
    let socket = std::sync::Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let addr = socket.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        loop {
            let Ok((n, peer)) = socket.recv_from(&mut buf).await else {
                return;
            };
            let Ok(query) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            let mut resp = Message::new();
            resp.set_id(query.id())
                .set_message_type(MessageType::Response)
                .set_op_code(query.op_code())
                .set_recursion_desired(query.recursion_desired())
                .set_recursion_available(true)
                .set_authoritative(true)
                .set_response_code(ResponseCode::NoError);
            for q in query.queries() {
                resp.add_query(q.clone());
                let name = q
                    .name()
                    .to_ascii()
                    .trim_end_matches('.')
                    .to_ascii_lowercase();
                for data in answer(&name, q.query_type()) {
                    resp.add_answer(Record::from_rdata(q.name().clone(), 60, data));
                }
            }
            let _ = socket.send_to(&resp.to_vec().unwrap(), peer).await;
        }
    });
    addr
}
