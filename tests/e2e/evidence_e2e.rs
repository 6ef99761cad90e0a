//! End to end: the dev appliance with an ACME certificate from Pebble, its evidence
//! (`/attestation`, `/info`, `/evidences/`), CAA records served by pebble-challtestsrv,
//! and the governance contract on anvil, checked by the real `evidence verify` CLI.
//! Every check passes; removing the compose hash from the allow list fails `governance`;
//! a TLS leaf other than the evidence's fails `tls-certificate`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use alloy::primitives::B256;
use alloy::providers::ProviderBuilder;
use alloy::signers::local::PrivateKeySigner;
use chain_contracts::{IAppGovernance, deploy_app_governance};
use e2e::pebble::{Pebble, PebbleOptions, free_port};
use e2e::{Appliance, Launch, binary};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The certificate's names: the first is the domain whose CAA records govern issuance
/// (served by challtestsrv); the CLI connects to the second, which the system resolver
/// knows. (`localhost` itself has no CAA records: resolvers answer it locally, RFC 6761.)
const CAA_DOMAIN: &str = "appliance.acme.test";
const DOMAIN: &str = "localhost";

/// Runs `evidence verify … --json`; returns the exit code and the report.
fn verify(args: &[&str]) -> (i32, Value) {
    let out = Command::new(binary("evidence"))
        .arg("verify")
        .args(args)
        .arg("--allow-simulated")
        .arg("--json")
        .output()
        .expect("run evidence");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "evidence printed no JSON report ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), report)
}

fn check<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id} in {report:#}"))
}

fn statuses(report: &Value) -> Vec<(String, String)> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_owned(),
                c["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

async fn get(client: &reqwest::Client, url: &str) -> Option<(u16, Vec<u8>)> {
    let rsp = client.get(url).send().await.ok()?;
    let status = rsp.status().as_u16();
    Some((status, rsp.bytes().await.ok()?.to_vec()))
}

/// A TLS relay on a free port presenting its own certificate for `DOMAIN` (from a CA
/// whose PEM it returns) and forwarding every GET to `upstream_base`: a server whose
/// certificate is not the one in the evidence it passes on.
async fn impostor(upstream: reqwest::Client, upstream_base: String) -> (u16, String) {
    use std::sync::Arc;

    use http_body_util::Full;
    use hyper::service::service_fn;
    use rustls_pki_types::PrivateKeyDer;

    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec![DOMAIN.to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![leaf.der().clone()],
        PrivateKeyDer::try_from(leaf_key.serialize_der()).unwrap(),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, upstream, base) =
                (acceptor.clone(), upstream.clone(), upstream_base.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let (upstream, url) = (upstream.clone(), format!("{base}{}", req.uri()));
                    async move {
                        let rsp = upstream.get(url).send().await.unwrap();
                        let mut out = http::Response::builder().status(rsp.status().as_u16());
                        if let Some(ct) = rsp.headers().get("content-type") {
                            out = out.header("content-type", ct.as_bytes());
                        }
                        let body = rsp.bytes().await.unwrap();
                        Ok::<_, std::convert::Infallible>(out.body(Full::new(body)).unwrap())
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (port, ca.pem())
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_verify_passes_then_fails_the_named_checks() {
    // The governance contract on anvil.
    let anvil = e2e::chain::anvil();
    let owner = PrivateKeySigner::from(anvil.keys()[0].clone());
    let chain = ProviderBuilder::new()
        .wallet(owner)
        .connect_http(anvil.endpoint_url());
    let governance = deploy_app_governance(&chain).await.unwrap();

    // Pebble validating TLS-ALPN-01 on the appliance's port.
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let pebble = Pebble::start(PebbleOptions {
        tls_port: port,
        http_port: free_port(),
        ..PebbleOptions::default()
    })
    .await;
    let root = pebble.root_pem().await;
    let tmp = tempfile::tempdir().unwrap();
    let root_file = write(tmp.path(), "pebble-root.pem", &root);

    // The dev appliance (simulated quotes), app_id = the governance contract.
    let env: Vec<(String, String)> = [
        ("APPLIANCE_LISTEN", format!("127.0.0.1:{port}")),
        (
            "APPLIANCE_ACME__DIRECTORY_URL",
            pebble.directory_url.clone(),
        ),
        (
            "APPLIANCE_ACME__DOMAINS",
            format!("[\"{CAA_DOMAIN}\", \"{DOMAIN}\"]"),
        ),
        (
            "APPLIANCE_ACME__CA_BUNDLE",
            pebble.ca_file.display().to_string(),
        ),
        ("APPLIANCE_ACME__RETRY_INITIAL_MS", "200".into()),
        ("APPLIANCE_ACME__RETRY_MAX_MS", "2000".into()),
        (
            "APPLIANCE_CHAIN__GOVERNANCE_ADDRESS",
            governance.to_string(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let data = tempfile::tempdir().unwrap();
    let app = Appliance::launch(data.path(), Launch::DevWith { env }).await;

    // Wait for the ACME certificate and the evidence built for it.
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(root.as_bytes()).unwrap())
        .tls_built_in_root_certs(false)
        .resolve(DOMAIN, addr)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let base = format!("https://{DOMAIN}:{port}");
    let cert_name = format!("cert-{CAA_DOMAIN}.pem");
    let ready = e2e::eventually_async(Duration::from_secs(60), || {
        let (client, url, cert_name) = (client.clone(), format!("{base}/evidences/"), cert_name.clone());
        async move {
            matches!(get(&client, &url).await, Some((200, body)) if String::from_utf8_lossy(&body).contains(&cert_name))
        }
    })
    .await;
    assert!(
        ready,
        "no evidence for the ACME certificate; log:\n{}",
        app.log()
    );

    // The endpoints, as a client sees them.
    let (_, sums) = get(&client, &format!("{base}/evidences/sha256sum.txt"))
        .await
        .unwrap();
    let (_, cert_pem) = get(&client, &format!("{base}/evidences/{cert_name}"))
        .await
        .unwrap();
    let (_, account) = get(&client, &format!("{base}/evidences/acme-account.json"))
        .await
        .unwrap();
    let (_, quote) = get(&client, &format!("{base}/evidences/quote.json"))
        .await
        .unwrap();
    let sums = String::from_utf8(sums).unwrap();
    assert!(
        sums.contains(&format!(
            "{}  {cert_name}\n",
            hex::encode(Sha256::digest(&cert_pem))
        )),
        "{sums}"
    );
    let quote: Value = serde_json::from_slice(&quote).unwrap();
    assert_eq!(
        quote["report_data"]
            .as_str()
            .unwrap()
            .trim_start_matches("0x"),
        format!(
            "{}{}",
            hex::encode(Sha256::digest(sums.as_bytes())),
            "0".repeat(64)
        )
    );
    let account: Value = serde_json::from_slice(&account).unwrap();
    let account_uri = account["uri"].as_str().unwrap().to_owned();
    let (status, attestation) = get(&client, &format!("{base}/attestation")).await.unwrap();
    assert_eq!(status, 200);
    let attestation: Value = serde_json::from_slice(&attestation).unwrap();
    let events: Value = serde_json::from_str(attestation["event_log"].as_str().unwrap()).unwrap();
    assert!(events.as_array().is_some_and(|e| !e.is_empty()));
    let (_, info) = get(&client, &format!("{base}/info")).await.unwrap();
    let info: Value = serde_json::from_slice(&info).unwrap();
    let compose_hash = info["compose_hash"].as_str().unwrap().to_owned();
    let compose = std::fs::read(data.path().join("app-compose.json")).unwrap();
    assert_eq!(compose_hash, hex::encode(Sha256::digest(&compose)));
    assert_eq!(
        info["tcb_info"]["app_compose"].as_str().unwrap().as_bytes(),
        compose.as_slice()
    );
    assert_eq!(
        info["app_id"].as_str().unwrap(),
        hex::encode(governance.as_slice())
    );

    // CAA for the domain names the appliance's ACME account; governance allows the hash.
    pebble
        .add_caa(
            CAA_DOMAIN,
            "issue",
            &format!("pebble.letsencrypt.org; accounturi={account_uri}"),
        )
        .await;
    let hash = B256::from_slice(&hex::decode(&compose_hash).unwrap());
    let gov = IAppGovernance::new(governance, &chain);
    gov.addComposeHash(hash)
        .send()
        .await
        .unwrap()
        .get_receipt()
        .await
        .unwrap();

    let url = base.clone();
    let rpc = anvil.endpoint();
    let root_arg = root_file.display().to_string();
    let args = [
        "--url",
        url.as_str(),
        "--ca-file",
        root_arg.as_str(),
        "--dns",
        pebble.dns_addr.as_str(),
        "--domain",
        CAA_DOMAIN,
        "--rpc-url",
        rpc.as_str(),
    ];
    let (code, report) = verify(&args);
    assert_eq!(code, 0, "{report:#}");
    for (id, status) in statuses(&report) {
        assert_eq!(status, "pass", "check {id}: {report:#}");
    }

    // The compose hash leaves the allow list: `governance` fails, by name.
    gov.removeComposeHash(hash)
        .send()
        .await
        .unwrap()
        .get_receipt()
        .await
        .unwrap();
    let (code, report) = verify(&args);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(check(&report, "governance")["status"], "fail", "{report:#}");
    assert_eq!(check(&report, "tls-certificate")["status"], "pass");
    gov.addComposeHash(hash)
        .send()
        .await
        .unwrap()
        .get_receipt()
        .await
        .unwrap();

    // A server with another (valid) certificate for the domain relays the genuine
    // evidence: `tls-certificate` fails, by name.
    let (relay_port, relay_ca) = impostor(client.clone(), base.clone()).await;
    let both_roots = write(tmp.path(), "roots.pem", &format!("{root}{relay_ca}"));
    let relay_url = format!("https://{DOMAIN}:{relay_port}");
    let both_arg = both_roots.display().to_string();
    let (code, report) = verify(&[
        "--url",
        relay_url.as_str(),
        "--ca-file",
        both_arg.as_str(),
        "--dns",
        pebble.dns_addr.as_str(),
        "--domain",
        CAA_DOMAIN,
        "--rpc-url",
        rpc.as_str(),
    ]);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(
        check(&report, "tls-certificate")["status"],
        "fail",
        "{report:#}"
    );
    for other in ["report-data", "acme-caa", "governance", "quote"] {
        assert_eq!(
            check(&report, other)["status"],
            "pass",
            "{other}: {report:#}"
        );
    }

    // The same with a saved bundle whose TLS leaf was swapped afterwards.
    let bundle = tmp.path().join("bundle");
    let bundle_arg = bundle.display().to_string();
    let mut save_args = args.to_vec();
    save_args.extend(["--save", bundle_arg.as_str()]);
    let (code, _) = verify(&save_args);
    assert_eq!(code, 0);
    let leaf = std::fs::read_dir(&bundle)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("tls-leaf"))
        })
        .expect("the bundle keeps the TLS leaf");
    let other = rcgen::generate_simple_self_signed(vec![DOMAIN.to_owned()]).unwrap();
    if leaf.extension().is_some_and(|e| e == "pem") {
        std::fs::write(&leaf, other.cert.pem()).unwrap();
    } else {
        std::fs::write(&leaf, other.cert.der()).unwrap();
    }
    let rpc_args = [
        "--bundle",
        bundle_arg.as_str(),
        "--dns",
        pebble.dns_addr.as_str(),
        "--domain",
        CAA_DOMAIN,
        "--rpc-url",
        rpc.as_str(),
    ];
    let (code, report) = verify(&rpc_args);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(
        check(&report, "tls-certificate")["status"],
        "fail",
        "{report:#}"
    );
    assert_eq!(check(&report, "governance")["status"], "pass", "{report:#}");

    // A renewal (forced) replaces the certificate; the evidence follows and verifies.
    e2e::signal(app.pid(), "USR1");
    let cert_url = format!("{base}/evidences/{cert_name}");
    let renewed = e2e::eventually_async(Duration::from_secs(60), || {
        let (client, url, old) = (client.clone(), cert_url.clone(), cert_pem.clone());
        async move { matches!(get(&client, &url).await, Some((200, body)) if body != old) }
    })
    .await;
    assert!(renewed, "evidence not rebuilt; log:\n{}", app.log());
    let (_, new_sums) = get(&client, &format!("{base}/evidences/sha256sum.txt"))
        .await
        .unwrap();
    assert_ne!(new_sums, sums.as_bytes());
    let (code, report) = verify(&args);
    assert_eq!(code, 0, "{report:#}");
    drop(app);
}
