//! Rule 5 over real DNS: a small authoritative DNS server on 127.0.0.1 (UDP, built from
//! hickory-proto's message types) serves CAA records, and the verifier's resolver, pointed
//! at it with `dns_server`, looks them up with RFC 8659 tree climbing.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::str::FromStr;

use crate::fixtures::*;
use evidence::check::{Options, Status, run};
use evidence::verify::Policy;
use hickory_resolver::proto::rr::rdata::caa::{CAA, KeyValue};
use hickory_resolver::proto::rr::{Name, RData, RecordType};

const ACCOUNT: &str = "https://acme.test/acme/acct/1234";

/// Serves CAA records: name (no trailing dot) → accounturi values of `issue` records.
async fn dns(zone: HashMap<String, Vec<String>>) -> SocketAddr {
    dns_server(move |name, record_type| {
        if record_type != RecordType::CAA {
            return Vec::new();
        }
        zone.get(name)
            .into_iter()
            .flatten()
            .map(|uri| {
                RData::CAA(CAA::new_issue(
                    false,
                    Some(Name::from_str("acme.test").unwrap()),
                    vec![KeyValue::new("accounturi", uri.clone())],
                ))
            })
            .collect()
    })
    .await
}

fn opts(dns: SocketAddr, domain: &str) -> Options {
    Options {
        at: NEAR_MPC_AT,
        policy: Policy {
            allow_simulated: true,
            ..Policy::default()
        },
        dns_server: Some(dns),
        domain: Some(domain.to_owned()),
        ..Options::default()
    }
}

#[tokio::test]
async fn acme_account_must_be_an_accounturi_of_the_governing_caa_set() {
    let zone = HashMap::from([
        // The parent governs appliance.example.test (no CAA of its own).
        ("example.test".to_owned(), vec![ACCOUNT.to_owned()]),
        (
            "other.test".to_owned(),
            vec!["https://acme.test/acme/acct/9".to_owned()],
        ),
    ]);
    let dns = dns(zone).await;
    let bundle = simulated_bundle().await; // acme-account.json names ACCOUNT

    let r = run(&bundle, &opts(dns, "appliance.example.test")).await;
    let c = r.get("acme-caa").unwrap();
    assert_eq!(c.status, Status::Pass, "{}", r.to_text());
    assert!(c.detail.contains("example.test"), "{}", c.detail);
    assert!(r.ok, "{}", r.to_text());

    let r = run(&bundle, &opts(dns, "appliance.other.test")).await;
    let c = r.get("acme-caa").unwrap();
    assert_eq!(c.status, Status::Fail);
    assert!(c.detail.contains("acct/9"), "{}", c.detail);
    assert_eq!(r.failed(), vec!["acme-caa"]);

    let r = run(&bundle, &opts(dns, "nowhere.test")).await;
    let c = r.get("acme-caa").unwrap();
    assert_eq!(c.status, Status::Fail);
    assert!(c.detail.contains("no CAA accounturi"), "{}", c.detail);
}

#[tokio::test]
async fn offline_without_a_dns_server_the_caa_check_is_skipped() {
    let bundle = simulated_bundle().await;
    let r = run(
        &bundle,
        &Options {
            dns_server: None,
            ..opts("127.0.0.1:9".parse().unwrap(), "appliance.test")
        },
    )
    .await;
    assert_eq!(r.get("acme-caa").unwrap().status, Status::Skipped);
}
