//! The verifier's checks over bundles: the near-mpc deployment (real TDX evidence) and a
//! complete simulated deployment. Each tampering makes the named check fail.

use crate::fixtures::*;
use evidence::check::{Options, Report, Status, run};
use evidence::verify::Policy;
use serde_json::json;

/// Judged at `at`, the near-mpc OS pinned by its policy entry.
fn opts(at: u64) -> Options {
    Options {
        at,
        os_policy: Some(near_os_policy()),
        ..Options::default()
    }
}

fn status(r: &Report, id: &str) -> Status {
    r.get(id).unwrap().status
}

#[tokio::test]
async fn near_mpc_deployment_passes_every_check_it_has_evidence_for() {
    let r = run(&near_bundle(), &opts(NEAR_MPC_AT)).await;
    for id in [
        "compose-hash",
        "images-pinned",
        "quote",
        "rtmr-replay",
        "os-image",
        "compose-hash-event",
    ] {
        assert_eq!(status(&r, id), Status::Pass, "{id}: {}", r.to_text());
    }
    assert_eq!(r.tcb_status.as_deref(), Some("UpToDate"));
    // The vectors have no /evidences/: rule 3 fails, the rest is skipped as not asked for.
    assert_eq!(status(&r, "report-data"), Status::Fail);
    for id in ["tls-certificate", "acme-caa", "governance"] {
        assert_eq!(status(&r, id), Status::Skipped, "{id}");
    }
    assert!(!r.ok);
    let skipped = Options {
        skip: vec!["report-data".into()],
        ..opts(NEAR_MPC_AT)
    };
    let r = run(&near_bundle(), &skipped).await;
    assert!(r.ok, "{}", r.to_text());
    // --strict turns skipped checks into failures.
    let strict = Options {
        strict: true,
        ..skipped
    };
    assert!(!run(&near_bundle(), &strict).await.ok);
}

#[tokio::test]
async fn near_mpc_fails_the_quote_check_after_the_collateral_expires() {
    let r = run(&near_bundle(), &opts(NEAR_MPC_EXPIRED)).await;
    assert_eq!(status(&r, "quote"), Status::Fail);
    assert_eq!(status(&r, "rtmr-replay"), Status::Pass);
}

#[tokio::test]
async fn flipping_a_byte_of_app_compose_fails_the_compose_hash_check() {
    let mut b = near_bundle();
    let info = b.info.as_mut().unwrap();
    let compose = info["tcb_info"]["app_compose"].as_str().unwrap().to_owned();
    // Inside the "name" value, so the JSON stays valid.
    let mut bytes = compose.into_bytes();
    bytes[50] ^= 0x01;
    info["tcb_info"]["app_compose"] = json!(String::from_utf8(bytes).unwrap());
    let r = run(&b, &opts(NEAR_MPC_AT)).await;
    assert_eq!(status(&r, "compose-hash"), Status::Fail, "{}", r.to_text());
    for id in [
        "images-pinned",
        "quote",
        "rtmr-replay",
        "compose-hash-event",
    ] {
        assert_eq!(status(&r, id), Status::Pass, "{id}");
    }
}

#[tokio::test]
async fn flipping_a_byte_of_an_rtmr3_event_payload_fails_the_replay() {
    let mut b = near_bundle();
    let att = b.attestation.as_mut().unwrap();
    let mut events: serde_json::Value =
        serde_json::from_str(att["event_log"].as_str().unwrap()).unwrap();
    let e = events
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|e| e["event"] == "key-provider")
        .unwrap();
    e["event_payload"] = json!(flip_hex_byte(e["event_payload"].as_str().unwrap(), 5));
    att["event_log"] = json!(events.to_string());
    let r = run(&b, &opts(NEAR_MPC_AT)).await;
    assert_eq!(status(&r, "rtmr-replay"), Status::Fail, "{}", r.to_text());
    let detail = &r.get("rtmr-replay").unwrap().detail;
    assert!(
        detail.contains("RTMR3") && !detail.contains("RTMR0"),
        "{detail}"
    );
    assert_eq!(status(&r, "quote"), Status::Pass);
}

#[tokio::test]
async fn a_forged_compose_hash_event_fails_the_replay_and_the_event_check() {
    let mut b = near_bundle();
    let att = b.attestation.as_mut().unwrap();
    let mut events: serde_json::Value =
        serde_json::from_str(att["event_log"].as_str().unwrap()).unwrap();
    let e = events
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|e| e["event"] == "compose-hash")
        .unwrap();
    e["event_payload"] = json!("11".repeat(32));
    att["event_log"] = json!(events.to_string());
    let r = run(&b, &opts(NEAR_MPC_AT)).await;
    assert_eq!(status(&r, "rtmr-replay"), Status::Fail);
    assert_eq!(status(&r, "compose-hash-event"), Status::Fail);
}

#[tokio::test]
async fn flipping_a_byte_of_the_quote_fails_the_quote_check() {
    let mut b = near_bundle();
    let att = b.attestation.as_mut().unwrap();
    // In report_data: signed, but not an RTMR, so only the signature check can notice.
    att["quote"] = json!(flip_hex_byte(att["quote"].as_str().unwrap(), 600));
    let r = run(&b, &opts(NEAR_MPC_AT)).await;
    assert_eq!(status(&r, "quote"), Status::Fail, "{}", r.to_text());
    assert_eq!(status(&r, "rtmr-replay"), Status::Pass);
}

#[tokio::test]
async fn simulated_deployment_is_refused_by_default_and_passes_with_allow_simulated() {
    let b = simulated_bundle().await;
    let r = run(&b, &opts(NEAR_MPC_AT)).await;
    assert_eq!(status(&r, "quote"), Status::Fail);
    assert!(r.get("quote").unwrap().detail.contains("--allow-simulated"));
    assert!(!r.ok);

    let allow = Options {
        policy: Policy {
            allow_simulated: true,
            ..Policy::default()
        },
        ..opts(NEAR_MPC_AT)
    };
    let r = run(&b, &allow).await;
    for id in [
        "compose-hash",
        "images-pinned",
        "report-data",
        "tls-certificate",
        "quote",
        "rtmr-replay",
        "compose-hash-event",
    ] {
        assert_eq!(status(&r, id), Status::Pass, "{id}: {}", r.to_text());
    }
    assert!(r.ok, "{}", r.to_text());
    assert_eq!(r.tcb_status.as_deref(), Some("Simulated"));
}

#[tokio::test]
async fn evidence_tampering_fails_rules_2_3_and_4() {
    let allow = Options {
        policy: Policy {
            allow_simulated: true,
            ..Policy::default()
        },
        ..opts(NEAR_MPC_AT)
    };
    // Rule 3: a changed ACME account no longer matches sha256sum.txt.
    let mut b = simulated_bundle().await;
    b.evidence_files.insert(
        "acme-account.json".into(),
        br#"{"uri":"https://acme.test/acme/acct/666"}"#.to_vec(),
    );
    let r = run(&b, &allow).await;
    assert_eq!(r.failed(), vec!["report-data"], "{}", r.to_text());

    // Rule 3: a changed sha256sum.txt no longer matches the quote's report_data.
    let mut b = simulated_bundle().await;
    b.evidence_files
        .get_mut("sha256sum.txt")
        .unwrap()
        .extend_from_slice(b"\n");
    let r = run(&b, &allow).await;
    assert_eq!(r.failed(), vec!["report-data"], "{}", r.to_text());

    // Rule 4: a different certificate served over TLS.
    let mut b = simulated_bundle().await;
    let other = rcgen::generate_simple_self_signed(vec!["other.test".to_owned()]).unwrap();
    b.tls_leaf_der = Some(other.cert.der().to_vec());
    let r = run(&b, &allow).await;
    assert_eq!(r.failed(), vec!["tls-certificate"], "{}", r.to_text());

    // Rule 2: an image by tag. The compose hash is recomputed so only rule 2 trips.
    let compose = simulated_app_compose().replace(
        "ghcr.io/example/keyservice@sha256:564a5aebc33495d5610626d23cb9e3da8e9d531d0edff9e38aa1ccaf059c15d3",
        "ghcr.io/example/keyservice:latest",
    );
    let provider: evidence::QuoteProvider =
        evidence::SimulatedProvider::new(compose.into_bytes()).into();
    let mut b = simulated_bundle().await;
    b.info = Some(provider.info().await.unwrap().info_json());
    b.attestation = Some(provider.quote([0; 64]).await.unwrap().attestation_json());
    let r = run(&b, &allow).await;
    assert_eq!(status(&r, "images-pinned"), Status::Fail, "{}", r.to_text());
    assert!(
        r.get("images-pinned")
            .unwrap()
            .detail
            .contains("keyservice:latest")
    );
}

#[test]
fn image_pinning_rules() {
    use evidence::check::{compose_images, image_is_pinned};
    let dc = "services:\n  a:\n    image: x/y@sha256:5618a93a78c9ac9173e7ebf7c8af173bd675be6832a2f8c2a9a7149ac2678f54\n  b:\n    image: 'x/z:1.0'\n";
    let imgs = compose_images(dc);
    assert_eq!(imgs.len(), 2);
    assert!(image_is_pinned(&imgs[0]));
    assert!(!image_is_pinned(&imgs[1]));
    assert!(!image_is_pinned("x@sha256:abc"));
    assert!(!image_is_pinned(
        "@sha256:5618a93a78c9ac9173e7ebf7c8af173bd675be6832a2f8c2a9a7149ac2678f54"
    ));
}

/// The simulated deployment with its evidence quote over `in_quote` (`None`: the
/// unnonced form), fetched as if with nonce `sent`.
async fn nonced_bundle(
    in_quote: Option<[u8; 32]>,
    sent: Option<[u8; 32]>,
) -> evidence::bundle::Bundle {
    let mut b = simulated_bundle().await;
    let sums = b.evidence_files["sha256sum.txt"].clone();
    let report_data = match in_quote {
        Some(n) => evidence::fresh_report_data_for(&sums, &n),
        None => evidence::report_data_for(&sums),
    };
    let provider: evidence::QuoteProvider =
        evidence::SimulatedProvider::new(simulated_app_compose().into_bytes()).into();
    let quote = provider.quote(report_data).await.unwrap();
    b.evidence_files.insert(
        "quote.json".into(),
        quote.evidence_quote_json().to_string().into_bytes(),
    );
    b.nonce = sent;
    b
}

#[tokio::test]
async fn freshness_needs_the_nonce_sent_online_and_is_not_applicable_offline() {
    let online = Options {
        policy: Policy {
            allow_simulated: true,
            ..Policy::default()
        },
        online: true,
        // No DNS in this test.
        skip: vec!["acme-caa".into()],
        ..opts(NEAR_MPC_AT)
    };
    let sent = [0x42u8; 32];

    // The quote carries the nonce sent: fresh, and rule 3 accepts the nonced form.
    let fresh = nonced_bundle(Some(sent), Some(sent)).await;
    let r = run(&fresh, &online).await;
    assert_eq!(status(&r, "freshness"), Status::Pass, "{}", r.to_text());
    assert_eq!(status(&r, "report-data"), Status::Pass, "{}", r.to_text());
    assert!(
        r.get("freshness")
            .unwrap()
            .detail
            .contains(&hex::encode(sent))
    );
    assert!(r.ok, "{}", r.to_text());

    // An unnonced quote although a nonce was sent (a replay, or a deployment that
    // ignores the nonce): freshness fails, and only freshness.
    let stale = nonced_bundle(None, Some(sent)).await;
    let r = run(&stale, &online).await;
    assert_eq!(r.failed(), vec!["freshness"], "{}", r.to_text());
    let detail = &r.get("freshness").unwrap().detail;
    assert!(
        detail.contains("no nonce") && detail.contains("--allow-stale"),
        "{detail}"
    );

    // A quote made for another nonce (replayed from someone else's verification).
    let other = nonced_bundle(Some([7u8; 32]), Some(sent)).await;
    let r = run(&other, &online).await;
    assert_eq!(status(&r, "freshness"), Status::Fail, "{}", r.to_text());
    assert!(r.get("freshness").unwrap().detail.contains("another nonce"));

    // --allow-stale: the stale quote passes, freshness is skipped on request; --strict
    // still counts that skip.
    let lenient = Options {
        allow_stale: true,
        ..online.clone()
    };
    let r = run(&stale, &lenient).await;
    assert_eq!(status(&r, "freshness"), Status::Skipped);
    assert!(r.get("freshness").unwrap().detail.contains("--allow-stale"));
    assert!(r.ok, "{}", r.to_text());
    let strict = Options {
        strict: true,
        ..lenient
    };
    assert!(!run(&stale, &strict).await.ok);

    // Offline: a saved bundle cannot show freshness now, whatever it carries; the nonce
    // it was fetched with survives a save and load, and the report says so.
    let dir = tempfile::tempdir().unwrap();
    fresh.save(dir.path()).unwrap();
    let loaded = evidence::bundle::Bundle::load(dir.path()).unwrap();
    assert_eq!(loaded.nonce, Some(sent));
    let offline = Options {
        online: false,
        ..online.clone()
    };
    let r = run(&loaded, &offline).await;
    assert_eq!(status(&r, "freshness"), Status::Skipped);
    let detail = &r.get("freshness").unwrap().detail;
    assert!(
        detail.contains("not applicable offline") && detail.contains("carries it"),
        "{detail}"
    );
    assert!(r.ok, "{}", r.to_text());
    // The real TDX vectors (unnonced) offline: freshness not applicable, nothing fails
    // that did not before.
    let r = run(&near_bundle(), &opts(NEAR_MPC_AT)).await;
    assert_eq!(status(&r, "freshness"), Status::Skipped);
}
