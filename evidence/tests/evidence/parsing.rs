//! Quote parsing, event-log replay and identity extraction on the near-mpc vectors.

use crate::fixtures::*;
use evidence::event_log::{EventLog, EventLogError, RawEvent, runtime_digest};
use evidence::quote::{QuoteParseError, TdxQuote};
use sha2::{Digest, Sha256};

#[test]
fn near_mpc_quote_parses_as_v4_with_the_measurements_of_tcb_info() {
    let q = TdxQuote::parse(&near_quote()).unwrap();
    let tcb = near_tcb_info();
    assert_eq!(q.header.version, 4);
    assert_eq!(q.header.tee_type, 0x81);
    assert_eq!(q.signed_len, 632);
    assert!(!q.is_simulated());
    assert_eq!(hex::encode(q.report.mr_td), tcb["mrtd"].as_str().unwrap());
    for i in 0..4 {
        assert_eq!(
            hex::encode(q.report.rtmr(i).unwrap()),
            tcb[format!("rtmr{i}")].as_str().unwrap(),
            "rtmr{i}"
        );
    }
    // mr_config_id = 0x01 ‖ compose_hash ‖ 0…
    assert_eq!(q.report.mr_config_id[0], 1);
    assert_eq!(
        hex::encode(&q.report.mr_config_id[1..33]),
        NEAR_MPC_COMPOSE_HASH
    );
    assert!(q.report.mr_config_id[33..].iter().all(|b| *b == 0));
}

#[test]
fn dcap_sample_quotes_parse() {
    for f in [
        "dcap-qvl-sample/tdx_quote",
        "dcap-qvl-sample/tdx_quote_outdated",
    ] {
        let q = TdxQuote::parse(&read(f)).unwrap();
        assert_eq!(q.header.tee_type, 0x81, "{f}");
    }
}

#[test]
fn truncated_and_foreign_quotes_are_errors_not_panics() {
    let q = near_quote();
    // dstack pads its quotes with zeros after the signature data; those bytes are ignored.
    let end = 636 + TdxQuote::parse(&q).unwrap().signature_data.len();
    assert!(end < q.len() && q[end..].iter().all(|b| *b == 0));
    for len in [0, 1, 47, 48, 100, 631, 632, 635, end - 1] {
        assert!(TdxQuote::parse(&q[..len]).is_err(), "len {len}");
    }
    let mut v3 = q.clone();
    v3[0] = 3;
    assert_eq!(
        TdxQuote::parse(&v3),
        Err(QuoteParseError::UnsupportedVersion(3))
    );
    let mut sgx = q.clone();
    sgx[4] = 0;
    assert_eq!(TdxQuote::parse(&sgx), Err(QuoteParseError::NotTdx(0)));
}

#[test]
fn v5_quote_with_td_report_10_body_parses_to_the_same_report() {
    // v5 = v4 header with version 5, then (body type 2, size 584), then the same body.
    let v4 = near_quote();
    let mut v5 = v4[..48].to_vec();
    v5[0] = 5;
    v5.extend_from_slice(&2u16.to_le_bytes());
    v5.extend_from_slice(&584u32.to_le_bytes());
    v5.extend_from_slice(&v4[48..]);
    let a = TdxQuote::parse(&v4).unwrap();
    let b = TdxQuote::parse(&v5).unwrap();
    assert_eq!(a.report, b.report);
    assert_eq!(b.signed_len, 638);
    assert_eq!(a.signature_data, b.signature_data);
}

#[test]
fn near_mpc_event_log_replays_to_the_quotes_rtmr0_to_3_in_both_forms() {
    let q = TdxQuote::parse(&near_quote()).unwrap();
    let full = EventLog::from_value(&near_tcb_info()["event_log"]).unwrap();
    // The GetQuote form: runtime digests empty, recomputed by the parser.
    let blank = EventLog::parse(&near_getquote_event_log()).unwrap();
    assert_eq!(full, blank);
    let rtmrs = blank.replay();
    for (i, r) in rtmrs.iter().enumerate() {
        assert_eq!(Some(r), q.report.rtmr(i), "RTMR{i}");
    }
}

#[test]
fn a_supplied_runtime_digest_that_disagrees_is_refused() {
    let mut events: Vec<RawEvent> =
        serde_json::from_value(near_tcb_info()["event_log"].clone()).unwrap();
    let i = events
        .iter()
        .position(|e| e.event == "key-provider")
        .unwrap();
    // Change the payload but keep the (now stale) digest: the log was altered.
    events[i].event_payload = flip_hex_byte(&events[i].event_payload, 3);
    assert!(matches!(
        EventLog::from_raw(&events),
        Err(EventLogError::DigestMismatch { .. })
    ));
}

#[test]
fn runtime_digest_is_sha384_of_type_name_and_payload() {
    let tcb = near_tcb_info();
    let e = tcb["event_log"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"] == "compose-hash")
        .unwrap();
    let payload = hex::decode(e["event_payload"].as_str().unwrap()).unwrap();
    assert_eq!(
        hex::encode(runtime_digest(0x0800_0001, "compose-hash", &payload)),
        e["digest"].as_str().unwrap()
    );
}

#[test]
fn identity_is_read_before_system_ready_and_matches_the_compose_file() {
    let log = EventLog::from_value(&near_tcb_info()["event_log"]).unwrap();
    let id = log.identity().unwrap();
    let compose = read("dstack-near-mpc/app_compose.json");
    assert_eq!(hex::encode(Sha256::digest(&compose)), NEAR_MPC_COMPOSE_HASH);
    assert_eq!(id.compose_hash.as_deref(), Some(NEAR_MPC_COMPOSE_HASH));
    assert_eq!(
        id.app_id.as_deref(),
        Some("2911e1f733466216dedb862d6d669e11256ee7a3")
    );
    assert_eq!(id.instance_id.as_deref(), Some(""));
    assert!(id.key_provider.unwrap().contains("local-sgx"));
    assert!(id.system_ready);
}

#[test]
fn events_after_system_ready_cannot_change_the_identity() {
    let mut events: Vec<RawEvent> =
        serde_json::from_value(near_tcb_info()["event_log"].clone()).unwrap();
    // The application extends RTMR3 with its own "compose-hash" after system-ready.
    events.push(RawEvent {
        imr: 3,
        event_type: 0x0800_0001,
        digest: String::new(),
        event: "compose-hash".to_owned(),
        event_payload: "00".repeat(32),
    });
    let id = EventLog::from_raw(&events).unwrap().identity().unwrap();
    assert_eq!(id.compose_hash.as_deref(), Some(NEAR_MPC_COMPOSE_HASH));

    // …whereas a second one before system-ready makes the identity ambiguous.
    let ready = events
        .iter()
        .position(|e| e.event == "system-ready")
        .unwrap();
    let extra = events.pop().unwrap();
    events.insert(ready, extra);
    assert!(matches!(
        EventLog::from_raw(&events).unwrap().identity(),
        Err(EventLogError::DuplicateIdentity { .. })
    ));
}

#[test]
fn malformed_event_logs_are_errors() {
    assert!(EventLog::parse("not json").is_err());
    assert!(
        EventLog::parse(r#"[{"imr":4,"event_type":1,"digest":"","event":"","event_payload":""}]"#)
            .is_err()
    );
    assert!(
        EventLog::parse(
            r#"[{"imr":0,"event_type":1,"digest":"abcd","event":"","event_payload":""}]"#
        )
        .is_err()
    );
    assert!(
        EventLog::parse(
            r#"[{"imr":3,"event_type":134217729,"digest":"","event":"x","event_payload":"zz"}]"#
        )
        .is_err()
    );
    assert_eq!(EventLog::parse("[]").unwrap().replay(), [[0u8; 48]; 4]);
}
