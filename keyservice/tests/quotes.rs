//! The quote operations through the socket: keyservice builds the report data itself
//! (`AttestationQuote`: 64 zero bytes; `EvidenceQuote`: SHA-256 of the exact
//! `sha256sum.txt` bytes ‖ 32 zero bytes), and nothing a client sends reaches the guest
//! agent's `GetKey` or `EmitEvent`, or a `GetQuote` over report data the client chose. The
//! fake agent (`test_support::dstack_agent`) records every call it receives.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keyservice_api::{
    DerivationPath, ErrorCode, KeyClient, KeyError, MAX_EVIDENCE_SUMS_LEN, QuoteSource,
    ServicePurpose,
};
use sha2::{Digest, Sha256};
use test_support::dstack_agent::{
    AgentConfig, FAKE_APP_ID, FAKE_VM_CONFIG, StandInAgent, fake_quote,
};
use test_support::keyservice::{Env, raw_connect, raw_frame, read_raw_frame, write_all};

const COMPOSE: &str =
    "{\"manifest_version\":2,\"name\":\"appliance\",\"docker_compose_file\":\"q\"}";

/// A `sha256sum.txt` as the appliance writes it, naming a certificate registered for a
/// keyservice TLS key (keyservice quotes no other listing: `tls_keys.rs`).
async fn sums(socket: &std::path::Path) -> Vec<u8> {
    test_support::keyservice::registered_sums(socket).await
}

fn evidence_report_data(bytes: &[u8]) -> Vec<u8> {
    let mut rd = Sha256::digest(bytes).to_vec();
    rd.extend_from_slice(&[0u8; 32]);
    rd
}

/// The report data of every `GetQuote` the agent received.
fn quoted(agent: &StandInAgent) -> Vec<Vec<u8>> {
    agent
        .calls()
        .iter()
        .filter(|(m, _)| m == "GetQuote")
        .map(|(_, body)| hex::decode(body["report_data"].as_str().unwrap()).unwrap())
        .collect()
}

fn dstack_env(config: AgentConfig) -> (Env, StandInAgent) {
    let mut env = Env::new();
    let agent = StandInAgent::start_in(env.dir.path(), "agent.sock", config);
    env.use_dstack(&agent.socket);
    (env, agent)
}

#[tokio::test]
async fn keyservice_builds_the_report_data_of_both_quotes() {
    let config = AgentConfig::new(COMPOSE, 1);
    let event_log = config.quoted_event_log();
    let (env, agent) = dstack_env(config);
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();

    let sums = sums(&ks.socket).await;
    let q = client.evidence_quote(&sums).await.unwrap();
    let expected = evidence_report_data(&sums);
    assert_eq!(quoted(&agent), vec![expected.clone()]);
    assert_eq!(q.source, QuoteSource::Dstack);
    assert_eq!(q.quote, fake_quote(&expected));
    assert_eq!(q.event_log, event_log);
    assert_eq!(q.vm_config, FAKE_VM_CONFIG);

    // One byte more is another report data: it is the exact bytes that count.
    let mut longer = sums.clone();
    longer.extend_from_slice(format!("{}  x\n", "00".repeat(32)).as_bytes());
    client.evidence_quote(&longer).await.unwrap();

    let a = client.attestation_quote().await.unwrap();
    assert_eq!(a.quote, fake_quote(&[0u8; 64]));
    assert_eq!(
        quoted(&agent),
        vec![expected, evidence_report_data(&longer), vec![0u8; 64]]
    );

    // The identity comes from the agent's Info, relayed unchanged.
    let info = client.attestation_info().await.unwrap();
    assert_eq!(info.app_id, FAKE_APP_ID);
    assert_eq!(info.app_compose, COMPOSE);
    assert_eq!(
        info.compose_hash,
        hex::encode(Sha256::digest(COMPOSE.as_bytes()))
    );
}

/// Every operation of the protocol, with ordinary arguments, then every op byte with
/// garbage: afterwards the agent has seen only `GetQuote` over the two report data
/// keyservice builds, and `Info` — never `GetKey` (beyond sealing at start) or `EmitEvent`.
#[tokio::test]
async fn no_operation_reaches_get_key_emit_event_or_chosen_report_data() {
    let (env, agent) = dstack_env(AgentConfig::new(COMPOSE, 2));
    let ks = env.start();
    // Positive control: start-up's sealing key was a recorded GetKey.
    let at_start = agent.calls();
    assert!(at_start.iter().any(|(m, _)| m == "GetKey"), "{at_start:?}");

    let client = KeyClient::connect(&ks.socket).await.unwrap();
    let chosen = [0x41u8; 32];
    client.status().await.unwrap();
    let w = client.create_wallet().await.unwrap();
    client.wallet(&w.derivation_path).await.unwrap();
    client
        .sign_digest(&w.derivation_path, &chosen)
        .await
        .unwrap();
    client.export_private_key(&w.derivation_path).await.unwrap();
    let ct = client.encrypt(&w.derivation_path, &chosen).await.unwrap();
    client.decrypt(&w.derivation_path, &ct).await.unwrap();
    client.action_identity("QmQuoteTest").await.unwrap();
    client
        .action_sign_digest("QmQuoteTest", &chosen)
        .await
        .unwrap();
    client
        .action_export_private_key("QmQuoteTest")
        .await
        .unwrap();
    client.payers().await.unwrap();
    client.random_bytes(32).await.unwrap();
    let sealed = client
        .service_seal(ServicePurpose::AcmeAccount, &chosen)
        .await
        .unwrap();
    client
        .service_unseal(ServicePurpose::AcmeAccount, &sealed)
        .await
        .unwrap();
    let _ = client
        .sign_digest(&DerivationPath(chosen), &chosen)
        .await
        .unwrap();
    client.attestation_quote().await.unwrap();
    let listing = sums(&ks.socket).await;
    client.evidence_quote(&listing).await.unwrap();
    client
        .fresh_evidence_quote(&listing, FRESH_NONCE)
        .await
        .unwrap();
    client.attestation_info().await.unwrap();

    // Every op byte, with payloads a client might use to smuggle report data or a key
    // path: 64 chosen bytes, a JSON GetKey body, an event.
    let payloads: [&[u8]; 4] = [
        &[0x41; 64],
        br#"{"path":"keyservice/seal/v1/00","purpose":"keyservice-root-sealing"}"#,
        br#"{"event":"compose-hash","payload":"00"}"#,
        &[],
    ];
    let mut raw = raw_connect(&ks.socket);
    let mut id = 1u64;
    for op in 0u8..=255 {
        for payload in payloads {
            write_all(&mut raw, &raw_frame(1, op, 0, id, payload));
            let (_, _, got, _) = read_raw_frame(&mut raw).expect("an answer");
            assert_eq!(got, id);
            id += 1;
        }
    }

    let after: Vec<_> = agent.calls()[at_start.len()..].to_vec();
    let methods: Vec<&str> = after.iter().map(|(m, _)| m.as_str()).collect();
    assert!(
        methods.iter().all(|m| matches!(*m, "GetQuote" | "Info")),
        "unexpected agent calls: {methods:?}"
    );
    assert!(methods.contains(&"Info"), "{methods:?}");
    for (m, body) in &after {
        if m == "GetQuote" {
            let rd = hex::decode(body["report_data"].as_str().unwrap()).unwrap();
            assert!(
                rd == vec![0u8; 64]
                    || rd == evidence_report_data(&listing)
                    || rd == fresh_report_data(&listing, &FRESH_NONCE),
                "a quote over report data keyservice did not build: {}",
                hex::encode(&rd)
            );
        }
    }
    // Both kinds of quote were in fact requested (the check above is not vacuous).
    let rds = quoted(&agent);
    assert!(rds.contains(&vec![0u8; 64]));
    assert!(rds.contains(&evidence_report_data(&listing)));
    assert!(rds.contains(&fresh_report_data(&listing, &FRESH_NONCE)));
}

/// The nonce of the fresh-quote tests.
const FRESH_NONCE: [u8; 32] = [0xc3; 32];

fn fresh_report_data(bytes: &[u8], nonce: &[u8; 32]) -> Vec<u8> {
    let mut rd = Sha256::digest(bytes).to_vec();
    rd.extend_from_slice(nonce);
    rd
}

/// `FreshEvidenceQuote`: the report data is SHA-256(listing) ‖ nonce, built by keyservice;
/// the listing is checked exactly as for `EvidenceQuote`, so the nonce is the only part
/// the caller picks, and it is a typed 32-byte field (a frame of 64 chosen bytes is not a
/// checksum listing and is refused before the agent).
#[tokio::test]
async fn keyservice_builds_the_fresh_report_data_from_listing_and_nonce() {
    let (env, agent) = dstack_env(AgentConfig::new(COMPOSE, 6));
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();

    let sums = sums(&ks.socket).await;
    let q = client
        .fresh_evidence_quote(&sums, FRESH_NONCE)
        .await
        .unwrap();
    let expected = fresh_report_data(&sums, &FRESH_NONCE);
    assert_eq!(&expected[32..], &FRESH_NONCE);
    assert_eq!(quoted(&agent), vec![expected.clone()]);
    assert_eq!(q.source, QuoteSource::Dstack);
    assert_eq!(q.quote, fake_quote(&expected));
    // Another nonce, another report data; same first half.
    let other = [0x01u8; 32];
    client.fresh_evidence_quote(&sums, other).await.unwrap();
    assert_eq!(
        quoted(&agent),
        vec![expected, fresh_report_data(&sums, &other)]
    );

    // Raw frames: a nonce with no listing, 64 chosen bytes, and a nonce before
    // something that is not sha256sum output are refused; none reaches the agent.
    let mut raw = raw_connect(&ks.socket);
    let mut not_listing = FRESH_NONCE.to_vec();
    not_listing.extend_from_slice(b"hello\n");
    for (id, bad) in [
        (1u64, FRESH_NONCE.to_vec()),
        (2, vec![0x41; 64]),
        (3, not_listing),
        (4, vec![0x41; 31]),
    ] {
        write_all(&mut raw, &raw_frame(1, 0x1C, 0, id, &bad));
        let (op, status, got, msg) = read_raw_frame(&mut raw).unwrap();
        assert_eq!((op, got), (0x1C, id));
        assert_ne!(status, 0, "{bad:?} accepted");
        assert!(!msg.is_empty());
    }
    assert_eq!(quoted(&agent).len(), 2);

    // The client refuses an empty listing before sending it.
    assert!(matches!(
        client.fresh_evidence_quote(&[], FRESH_NONCE).await,
        Err(KeyError::InvalidArgument(_))
    ));
}

/// The development platform's simulated quote carries the nonce in its report data too.
#[tokio::test]
async fn dev_platform_fresh_quote_carries_the_nonce() {
    let env = Env::new();
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    let sums = sums(&ks.socket).await;
    let q = client
        .fresh_evidence_quote(&sums, FRESH_NONCE)
        .await
        .unwrap();
    assert_eq!(q.source, QuoteSource::Simulated);
    let parsed = evidence::quote::TdxQuote::parse(&q.quote).unwrap();
    assert_eq!(
        parsed.report.report_data.to_vec(),
        fresh_report_data(&sums, &FRESH_NONCE)
    );
}

#[tokio::test]
async fn evidence_input_is_bounded_and_must_be_a_checksum_listing() {
    let (env, agent) = dstack_env(AgentConfig::new(COMPOSE, 3));
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();

    // The largest accepted input: a registered certificate's line and one line with a
    // long name, exactly the limit.
    let listing = sums(&ks.socket).await;
    let name = "n".repeat(MAX_EVIDENCE_SUMS_LEN - listing.len() - 64 - 2 - 1);
    let mut max = listing.clone();
    max.extend_from_slice(format!("{}  {name}\n", "ab".repeat(32)).as_bytes());
    assert_eq!(max.len(), MAX_EVIDENCE_SUMS_LEN);
    client.evidence_quote(&max).await.unwrap();
    assert_eq!(quoted(&agent), vec![evidence_report_data(&max)]);

    // One byte more: the client refuses, and so does the server for a raw frame.
    let mut over = listing.clone();
    over.extend_from_slice(format!("{}  {name}n\n", "ab".repeat(32)).as_bytes());
    assert!(matches!(
        client.evidence_quote(&over).await,
        Err(KeyError::InvalidArgument(m)) if m.contains("expected 1..=8192")
    ));
    let mut raw = raw_connect(&ks.socket);
    write_all(&mut raw, &raw_frame(1, 0x12, 0, 7, &over));
    let (op, status, id, msg) = read_raw_frame(&mut raw).unwrap();
    assert_eq!((op, status, id), (0x12, ErrorCode::BadRequest as u8, 7));
    assert!(
        String::from_utf8_lossy(&msg).contains("sha256sum.txt must be 1..=8192 bytes"),
        "{}",
        String::from_utf8_lossy(&msg)
    );
    // Empty, raw report data, and anything else that is not sha256sum output.
    for bad in [
        Vec::new(),
        vec![0x41; 64],
        b"hello\n".to_vec(),
        format!("{}  ../x\n", "ab".repeat(32)).into_bytes(),
    ] {
        write_all(&mut raw, &raw_frame(1, 0x12, 0, 8, &bad));
        let (_, status, _, msg) = read_raw_frame(&mut raw).unwrap();
        assert_ne!(status, 0, "{bad:?} accepted");
        assert!(!msg.is_empty());
    }
    // None of the refused inputs reached the agent.
    assert_eq!(quoted(&agent).len(), 1);
}

#[tokio::test]
async fn one_quote_at_a_time_and_a_bounded_queue() {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let mut config = AgentConfig::new(COMPOSE, 4);
    config.quote_gate = Some(Arc::new(Mutex::new(rx)));
    let (env, agent) = dstack_env(config);
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();

    // The first quote reaches the agent and is held there.
    let first = tokio::spawn({
        let client = client.clone();
        async move { client.attestation_quote().await }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while quoted(&agent).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no quote reached the agent"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // 16 more may wait; the 17th is refused at once.
    let waiting = keyservice::attest::MAX_QUOTES_WAITING;
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..=waiting {
        let (client, done) = (client.clone(), done_tx.clone());
        tokio::spawn(async move {
            let _ = done.send(client.attestation_quote().await);
        });
    }
    let refused = done_rx.recv().await.unwrap();
    match refused {
        Err(KeyError::Rejected {
            code: ErrorCode::QuoteUnavailable,
            message,
        }) => assert!(
            message.contains("too many quote requests waiting"),
            "{message}"
        ),
        other => panic!("expected a refusal, got {other:?}"),
    }
    // While the first is held, the agent has seen exactly one GetQuote: one at a time.
    assert_eq!(quoted(&agent).len(), 1);
    drop(tx);
    first.await.unwrap().unwrap();
    for _ in 0..waiting {
        done_rx.recv().await.unwrap().unwrap();
    }
    assert_eq!(quoted(&agent).len(), 1 + waiting);
}

#[tokio::test]
async fn dev_platform_serves_simulated_quotes_marked_as_such() {
    let env = Env::new();
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    let sums = sums(&ks.socket).await;
    let q = client.evidence_quote(&sums).await.unwrap();
    assert_eq!(q.source, QuoteSource::Simulated);
    let parsed = evidence::quote::TdxQuote::parse(&q.quote).unwrap();
    assert_eq!(
        parsed.report.report_data.to_vec(),
        evidence_report_data(&sums)
    );
    let a = client.attestation_quote().await.unwrap();
    let parsed = evidence::quote::TdxQuote::parse(&a.quote).unwrap();
    assert_eq!(parsed.report.report_data, [0u8; 64]);
    let info = client.attestation_info().await.unwrap();
    let compose = std::fs::read(&env.compose_file).unwrap();
    assert_eq!(info.compose_hash, hex::encode(Sha256::digest(&compose)));
    assert!(
        info.key_provider
            .as_deref()
            .unwrap_or_default()
            .contains("NOT-CONFIDENTIAL"),
        "{info:?}"
    );
    assert!(ks.log_text().contains("SIMULATED quotes, NOT confidential"));
}

/// The provider and app id come from the measured appliance configuration
/// (`--chain-config`), the one the compose also hands the appliance.
#[tokio::test]
async fn quote_settings_come_from_the_appliance_configuration() {
    let (mut env, agent) = dstack_env(AgentConfig::new(COMPOSE, 5));
    let toml = env.dir.path().join("appliance.toml");
    std::fs::write(
        &toml,
        "[attestation]\nprovider = \"simulated\"\n[chain]\ngovernance_address = \"0x1111111111111111111111111111111111111111\"\n",
    )
    .unwrap();
    env.run_extra
        .extend(["--chain-config".into(), toml.clone().into_os_string()]);
    env.platform_args.extend([
        "--compose-file".into(),
        env.compose_file.clone().into_os_string(),
    ]);
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    let q = client.attestation_quote().await.unwrap();
    assert_eq!(q.source, QuoteSource::Simulated);
    assert_eq!(
        client.attestation_info().await.unwrap().app_id,
        "11".repeat(20)
    );
    assert!(quoted(&agent).is_empty());
    drop(ks);

    // Positive control: without the setting, the same keyservice asks the agent.
    std::fs::write(&toml, "[chain]\nchain_id = 31337\n").unwrap();
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    assert_eq!(
        client.attestation_quote().await.unwrap().source,
        QuoteSource::Dstack
    );
    assert_eq!(quoted(&agent), vec![vec![0u8; 64]]);
}

/// configfs-tsm is keyservice's too: a missing report directory is a clear
/// `QuoteUnavailable`, not a crash, and names configfs-tsm.
#[tokio::test]
async fn tsm_provider_is_used_by_keyservice() {
    let mut env = Env::new();
    let missing = env.dir.path().join("no-tsm");
    env.run_extra.extend([
        "--quote-provider".into(),
        "tsm".into(),
        "--tsm-dir".into(),
        missing.into_os_string(),
    ]);
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    match client.attestation_quote().await {
        Err(KeyError::Rejected {
            code: ErrorCode::QuoteUnavailable,
            message,
        }) => assert!(message.contains("configfs-tsm"), "{message}"),
        other => panic!("expected QuoteUnavailable, got {other:?}"),
    }
    // The rest of keyservice is unaffected.
    client.create_wallet().await.unwrap();
}

/// A real dstack event log (29 events, from a production deployment; see
/// `tests/data/README.md`) travels through unchanged; an answer too large for one frame is
/// a clear `QuoteUnavailable` naming its size, and keyservice keeps serving.
#[tokio::test]
async fn quote_answers_must_fit_in_a_frame() {
    let tcb: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/dstack-tcb-info.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let real_log = tcb["event_log"].to_string();
    let mut config = AgentConfig::new(COMPOSE, 6);
    config.quote_event_log = Some(real_log.clone());
    let (env, _agent) = dstack_env(config);
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    let q = client.attestation_quote().await.unwrap();
    assert_eq!(q.event_log, real_log);

    let mut config = AgentConfig::new(COMPOSE, 6);
    config.quote_event_log = Some(format!(
        "[\"{}\"]",
        "e".repeat(keyservice_api::MAX_FRAME_LEN)
    ));
    let (env, agent) = dstack_env(config);
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    match client.attestation_quote().await {
        Err(KeyError::Rejected {
            code: ErrorCode::QuoteUnavailable,
            message,
        }) => assert!(
            message.contains("exceeds the 65536-byte frame"),
            "{message}"
        ),
        other => panic!("expected QuoteUnavailable, got {other:?}"),
    }
    assert_eq!(quoted(&agent).len(), 1);
    client.status().await.unwrap();
}
