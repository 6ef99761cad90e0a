//! A development stack serving a self-signed certificate publishes no ACME account, so
//! `acme-caa` cannot apply. The report says so (N/A, with the reason and how to get a
//! stack where it applies), and tolerates it only for a simulated quote the caller
//! allowed: otherwise the N/A is a failure.

use evidence::check::{Options, Status, run};
use evidence::verify::Policy;

async fn self_signed_dev_bundle() -> evidence::bundle::Bundle {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    crate::fixtures::simulated_bundle_with(&cert, "localhost", false).await
}

fn options(allow_simulated: bool) -> Options {
    Options {
        policy: Policy {
            allow_simulated,
            ..Policy::default()
        },
        at: crate::fixtures::NEAR_MPC_AT,
        online: true,
        ..Options::default()
    }
}

#[tokio::test]
async fn a_self_signed_dev_stack_is_verified_for_development_with_the_reason() {
    let bundle = self_signed_dev_bundle().await;
    let r = run(&bundle, &options(true)).await;
    let caa = r.get("acme-caa").unwrap();
    assert_eq!(caa.status, Status::NotApplicable, "{}", r.to_text());
    assert!(caa.detail.contains("self-signed"), "{}", caa.detail);
    assert!(caa.detail.contains("scripts/dev --acme"), "{}", caa.detail);
    // Report data still binds the certificate into the quote; only the account is absent.
    assert_eq!(
        r.get("report-data").unwrap().status,
        Status::Pass,
        "{}",
        r.to_text()
    );
    assert!(r.ok, "{}", r.to_text());
    // A simulated quote has no OS measurement either.
    assert_eq!(r.not_applicable(), vec!["acme-caa", "os-image"]);
    let text = r.to_text();
    assert!(text.contains("N/A   acme-caa"), "{text}");
    assert!(text.contains("verified for DEVELOPMENT only"), "{text}");
    let json = serde_json::to_value(&r).unwrap();
    assert!(
        json["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == "acme-caa" && c["status"] == "n/a"),
        "{json}"
    );
}

#[tokio::test]
async fn without_simulated_quotes_allowed_not_applicable_is_a_failure() {
    let bundle = self_signed_dev_bundle().await;
    let r = run(&bundle, &options(false)).await;
    let caa = r.get("acme-caa").unwrap();
    assert_eq!(caa.status, Status::Fail, "{}", r.to_text());
    assert!(caa.detail.contains("cannot apply"), "{}", caa.detail);
    assert!(!r.ok);
    assert!(r.failed().contains(&"acme-caa"), "{}", r.to_text());
}

/// With an ACME account published, a self-signed certificate gets no N/A: the CAA check
/// runs (here offline without a DNS server, so it is skipped, as for any deployment).
#[tokio::test]
async fn a_published_account_is_always_checked() {
    let bundle = crate::fixtures::simulated_bundle().await;
    let offline = Options {
        online: false,
        ..options(true)
    };
    let r = run(&bundle, &offline).await;
    assert_eq!(
        r.get("acme-caa").unwrap().status,
        Status::Skipped,
        "{}",
        r.to_text()
    );
    assert!(!r.not_applicable().contains(&"acme-caa"));
}
