//! `gateway-route` and `--connect`: a simulated deployment whose attested app_compose
//! enables dstack-gateway and publishes port 443, its app-address TXT records served by a
//! local DNS server the test changes between runs (the gateway's lookup order: the
//! record, the legacy `_tapp-address` one, the parent's wildcard), and the binary
//! reaching a server under a name that resolves nowhere, through `--connect`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use crate::fixtures::*;
use crate::online::{pki_for, serve, verify};
use evidence::bundle::Bundle;
use evidence::check::{Options, Report, Status, run};
use evidence::verify::Policy;
use hickory_resolver::proto::rr::rdata::TXT;
use hickory_resolver::proto::rr::{RData, RecordType};
use serde_json::json;

const DOMAIN: &str = "appliance.gateway.test";
const RECORD: &str = "_dstack-app-address.appliance.gateway.test";
const INSTANCE: [u8; 20] = [0x11; 20];

/// TXT records by name (lowercase, no trailing dot), changed by the test as it goes.
type Zone = Arc<Mutex<HashMap<String, Vec<String>>>>;

async fn txt_server() -> (Zone, SocketAddr) {
    let zone: Zone = Arc::default();
    let served = zone.clone();
    let addr = dns_server(move |name, record_type| {
        if record_type != RecordType::TXT {
            return Vec::new();
        }
        served
            .lock()
            .unwrap()
            .get(name)
            .into_iter()
            .flatten()
            .map(|v| RData::TXT(TXT::new(vec![v.clone()])))
            .collect()
    })
    .await;
    (zone, addr)
}

fn set(zone: &Zone, records: &[(&str, String)]) {
    let mut z = zone.lock().unwrap();
    z.clear();
    for (name, value) in records {
        z.entry((*name).to_owned()).or_default().push(value.clone());
    }
}

/// An app_compose for dstack: gateway on or off, the appliance publishing 443.
fn app_compose(gateway: bool) -> String {
    json!({
        "manifest_version": 2,
        "name": "appliance",
        "runner": "docker-compose",
        "gateway_enabled": gateway,
        "docker_compose_file": "services:\n  appliance:\n    image: ghcr.io/example/appliance@sha256:5618a93a78c9ac9173e7ebf7c8af173bd675be6832a2f8c2a9a7149ac2678f54\n    ports:\n      - \"443:8443\"\n",
    })
    .to_string()
}

/// The provider of a deployment with the gateway on or off, and its app id (hex).
fn provider(gateway: bool) -> (evidence::SimulatedProvider, String) {
    let p = evidence::SimulatedProvider::new(app_compose(gateway).into_bytes())
        .with_instance_id(INSTANCE);
    let app_id = p.info().app_id;
    (p, app_id)
}

async fn bundle(gateway: bool, domain: &str) -> (Bundle, String) {
    let (p, app_id) = provider(gateway);
    let cert = rcgen::generate_simple_self_signed(vec![domain.to_owned()]).unwrap();
    (
        simulated_bundle_of(p, &cert.cert, domain, true).await,
        app_id,
    )
}

fn opts(dns: Option<SocketAddr>) -> Options {
    Options {
        at: NEAR_MPC_AT,
        policy: Policy {
            allow_simulated: true,
            ..Policy::default()
        },
        dns_server: dns,
        skip: vec!["acme-caa".into()],
        ..Options::default()
    }
}

fn route(r: &Report) -> (Status, String) {
    let c = r.get("gateway-route").unwrap();
    (c.status, c.detail.clone())
}

#[tokio::test]
async fn the_route_record_must_name_this_app_and_a_published_port() {
    let (zone, dns) = txt_server().await;
    let (b, app) = bundle(true, DOMAIN).await;
    let instance = hex::encode(INSTANCE);
    let other = "22".repeat(20);
    let opts = opts(Some(dns));

    // No record anywhere: the gateway cannot route the name; the report says what to publish.
    let r = run(&b, &opts).await;
    let (status, detail) = route(&r);
    assert_eq!(status, Status::Fail, "{}", r.to_text());
    assert!(
        detail.contains(&format!("publish `{RECORD}. TXT \"{app}:443\"`")),
        "{detail}"
    );
    assert_eq!(r.failed(), vec!["gateway-route"], "{}", r.to_text());

    // The record names this app and the port its compose publishes: every check passes.
    set(&zone, &[(RECORD, format!("{app}:443"))]);
    let r = run(&b, &opts).await;
    let (status, detail) = route(&r);
    assert_eq!(status, Status::Pass, "{}", r.to_text());
    assert!(
        detail.contains(&format!("routes {DOMAIN} to this app (app id {app}"))
            && detail.contains("port 443, which the attested compose publishes"),
        "{detail}"
    );
    assert!(r.ok, "{}", r.to_text());

    // Another app: what the record says and what the evidence says, side by side.
    set(&zone, &[(RECORD, format!("{other}:443"))]);
    let (status, detail) = route(&run(&b, &opts).await);
    assert_eq!(status, Status::Fail);
    assert!(
        detail.contains(&format!("TXT says \"{other}:443\" (id {other}, port 443)"))
            && detail.contains(&format!(
                "the evidence attests app id {app} (instance id {instance})"
            ))
            && detail.contains("routes appliance.gateway.test to another app"),
        "{detail}"
    );

    // This app written as the gateway would not find it.
    set(&zone, &[(RECORD, format!("0x{}:443", app.to_uppercase()))]);
    let (status, detail) = route(&run(&b, &opts).await);
    assert_eq!(status, Status::Fail);
    assert!(detail.contains("lowercase hex without 0x"), "{detail}");

    // A port the compose does not publish.
    set(&zone, &[(RECORD, format!("{app}:8443"))]);
    let (status, detail) = route(&run(&b, &opts).await);
    assert_eq!(status, Status::Fail);
    assert!(
        detail.contains(
            "names port 8443, which the attested compose does not publish (it publishes 443)"
        ),
        "{detail}"
    );

    // Not an app address.
    set(&zone, &[(RECORD, "keys".to_owned())]);
    let (status, detail) = route(&run(&b, &opts).await);
    assert_eq!(status, Status::Fail);
    assert!(detail.contains("is not <id>:<port>"), "{detail}");

    // This instance (dstack-ingress names the instance for TLS-ALPN-01).
    set(&zone, &[(RECORD, format!("{instance}:443"))]);
    let (status, detail) = route(&run(&b, &opts).await);
    assert_eq!(status, Status::Pass);
    assert!(
        detail.contains(&format!("this instance (instance id {instance}")),
        "{detail}"
    );

    // Two records, one elsewhere: the gateway may take either.
    set(
        &zone,
        &[
            (RECORD, format!("{app}:443")),
            (RECORD, format!("{other}:443")),
        ],
    );
    let (status, detail) = route(&run(&b, &opts).await);
    assert_eq!(status, Status::Fail);
    assert!(detail.contains("has 2 TXT records"), "{detail}");

    // The legacy name, then the parent's wildcard, as the gateway falls back to them.
    set(
        &zone,
        &[("_tapp-address.appliance.gateway.test", format!("{app}:443"))],
    );
    let (status, detail) = route(&run(&b, &opts).await);
    assert_eq!(status, Status::Pass);
    assert!(
        detail.starts_with("_tapp-address.appliance.gateway.test TXT"),
        "{detail}"
    );
    set(
        &zone,
        &[(
            "_dstack-app-address-wildcard.gateway.test",
            format!("{other}:443"),
        )],
    );
    let (status, detail) = route(&run(&b, &opts).await);
    assert_eq!(status, Status::Fail);
    assert!(
        detail.starts_with("_dstack-app-address-wildcard.gateway.test TXT says"),
        "{detail}"
    );
    // The record itself wins over the wildcard.
    set(
        &zone,
        &[
            (
                "_dstack-app-address-wildcard.gateway.test",
                format!("{other}:443"),
            ),
            (RECORD, format!("{app}:443")),
        ],
    );
    assert_eq!(route(&run(&b, &opts).await).0, Status::Pass);
}

#[tokio::test]
async fn where_the_gateway_cannot_route_there_is_nothing_to_check_unless_required() {
    // The attested compose does not enable the gateway: passes without a lookup.
    let (b, _) = bundle(false, DOMAIN).await;
    let r = run(&b, &opts(None)).await;
    let (status, detail) = route(&r);
    assert_eq!(status, Status::Pass, "{}", r.to_text());
    assert!(detail.starts_with("not behind dstack-gateway"), "{detail}");
    // --gateway: it must be behind the gateway.
    let required = Options {
        gateway: true,
        ..opts(None)
    };
    let (status, detail) = route(&run(&b, &required).await);
    assert_eq!(status, Status::Fail);
    assert!(detail.contains("gateway_enabled false"), "{detail}");

    // Behind the gateway, offline without --dns: skipped, as acme-caa is.
    let (b, app) = bundle(true, DOMAIN).await;
    let (status, detail) = route(&run(&b, &opts(None)).await);
    assert_eq!(status, Status::Skipped);
    assert!(detail.contains("no --dns"), "{detail}");
    // An IP address has no name to route.
    let (ip, _) = bundle(true, "127.0.0.1").await;
    assert_eq!(route(&run(&ip, &opts(None)).await).0, Status::Skipped);

    // The gateway's own names route by the name: no record needed.
    let own = |label: &str| format!("{label}.dstack.gw.test");
    let (b, _) = bundle(true, &own(&format!("{app}-443s"))).await;
    let (status, detail) = route(&run(&b, &opts(None)).await);
    assert_eq!(status, Status::Pass, "{detail}");
    assert!(detail.contains("TLS passed through"), "{detail}");
    // Without `s` the gateway terminates TLS itself: not the appliance's certificate.
    let (b, _) = bundle(true, &own(&format!("{app}-443"))).await;
    let (status, detail) = route(&run(&b, &opts(None)).await);
    assert_eq!(status, Status::Fail);
    assert!(
        detail.contains(&format!("use {app}-443s.dstack.gw.test")),
        "{detail}"
    );
    let (b, _) = bundle(true, &own(&format!("{}-443s", "33".repeat(20)))).await;
    let (status, detail) = route(&run(&b, &opts(None)).await);
    assert_eq!(status, Status::Fail);
    assert!(
        detail.contains(&format!("attests app id {app}")),
        "{detail}"
    );
}

/// The binary: `--connect` reaches a server under a name that resolves nowhere (the name
/// still the TLS server name the certificate is checked against), and `--gateway --dns`
/// checks that name's route record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_keeps_the_name_and_the_route_record_is_checked() {
    let pki = pki_for(DOMAIN);
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let ca = ca.to_str().unwrap().to_owned();
    let (p, app) = provider(true);
    let port = serve(simulated_bundle_of(p, &pki.leaf, DOMAIN, true).await, &pki).await;
    let (zone, dns) = txt_server().await;
    set(&zone, &[(RECORD, format!("{app}:443"))]);
    let connect = format!("127.0.0.1:{port}");
    let dns = dns.to_string();
    let url = format!("https://{DOMAIN}");
    let run = |extra: Vec<String>| {
        let (ca, dns) = (ca.clone(), dns.clone());
        tokio::task::spawn_blocking(move || {
            let mut args: Vec<String> = [
                "verify",
                "--ca-file",
                ca.as_str(),
                "--allow-simulated",
                "--skip",
                "acme-caa",
                // This server serves a fixed bundle: it ignores the nonce.
                "--allow-stale",
                "--dns",
                dns.as_str(),
                "--gateway",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            args.extend(extra);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            verify(&args)
        })
    };

    let (code, out) = run(vec![
        "--url".into(),
        url.clone(),
        "--connect".into(),
        connect.clone(),
    ])
    .await
    .unwrap();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("PASS  tls-certificate"), "{out}");
    assert!(
        out.contains(&format!(
            "PASS  gateway-route       {RECORD} TXT \"{app}:443\": dstack-gateway routes {DOMAIN} to this app"
        )),
        "{out}"
    );

    // The record names another app: the check fails, saying both.
    let other = "22".repeat(20);
    set(&zone, &[(RECORD, format!("{other}:443"))]);
    let (code, out) = run(vec![
        "--url".into(),
        url.clone(),
        "--connect".into(),
        connect.clone(),
    ])
    .await
    .unwrap();
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAIL  gateway-route")
            && out.contains(&format!("TXT says \"{other}:443\""))
            && out.contains(&format!("attests app id {app}")),
        "{out}"
    );
    assert!(
        out.contains("NOT verified: failed checks: gateway-route\n"),
        "{out}"
    );

    // Without --connect the name resolves nowhere: nothing could be fetched.
    let (code, out) = run(vec!["--url".into(), url.clone()]).await.unwrap();
    assert_eq!(code, 2, "{out}");
    // The URL's port and --connect's must agree; an IP address has no name to keep.
    let (code, out) = run(vec![
        "--url".into(),
        format!("https://{DOMAIN}:9"),
        "--connect".into(),
        connect.clone(),
    ])
    .await
    .unwrap();
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("the URL names port 9"), "{out}");
    let (code, out) = run(vec![
        "--url".into(),
        format!("https://127.0.0.1:{port}"),
        "--connect".into(),
        connect,
    ])
    .await
    .unwrap();
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("the URL names an IP address"), "{out}");
}
