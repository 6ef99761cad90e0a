//! Rule 5 over real DNS: a small authoritative DNS server on 127.0.0.1 (UDP, built from
//! hickory-proto's message types) serves CAA records, and the verifier's resolver, pointed
//! at it with `dns_server`, looks them up with RFC 8659 tree climbing.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;

use crate::fixtures::*;
use evidence::check::{Options, Status, run};
use evidence::verify::Policy;
use hickory_resolver::proto::op::{Message, MessageType, ResponseCode};
use hickory_resolver::proto::rr::rdata::caa::{CAA, KeyValue};
use hickory_resolver::proto::rr::{Name, RData, Record, RecordType};

const ACCOUNT: &str = "https://acme.test/acme/acct/1234";

/// Serves CAA records: name (no trailing dot) → accounturi values of `issue` records.
async fn dns(zone: HashMap<String, Vec<String>>) -> SocketAddr {
    let socket = Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
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
                if q.query_type() != RecordType::CAA {
                    continue;
                }
                for uri in zone.get(&name).into_iter().flatten() {
                    let caa = CAA::new_issue(
                        false,
                        Some(Name::from_str("acme.test").unwrap()),
                        vec![KeyValue::new("accounturi", uri.clone())],
                    );
                    resp.add_answer(Record::from_rdata(q.name().clone(), 60, RData::CAA(caa)));
                }
            }
            let _ = socket.send_to(&resp.to_vec().unwrap(), peer).await;
        }
    });
    addr
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
