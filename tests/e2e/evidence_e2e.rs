//! End to end: the dev appliance with an ACME certificate from Pebble, its evidence
//! (`/attestation`, `/info`, `/evidences/`), CAA records served by pebble-challtestsrv,
//! and the governance contract on anvil, checked by the real `evidence verify` CLI.
//! Every check passes; removing the compose hash from the allow list fails `governance`;
//! a TLS leaf other than the evidence's fails `tls-certificate`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use e2e::attested::{AttestedStack, CAA_DOMAIN, DOMAIN};
use e2e::binary;
use e2e::evidence_report::check;
use e2e::relay::Relay;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Runs `evidence verify … --json`; returns the exit code and the report.
fn verify(args: &[&str]) -> (i32, Value) {
    let mut command = Command::new(binary("evidence"));
    command
        .arg("verify")
        .args(args)
        .arg("--allow-simulated")
        .arg("--json");
    e2e::evidence_report::run(command)
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

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_verify_passes_then_fails_the_named_checks() {
    // The whole chain (tests/common/attested.rs): Pebble ACME certificate (TLS-ALPN-01),
    // the dev appliance (simulated quotes) with app_id = the governance contract on anvil,
    // CAA naming its ACME account, its compose hash allowed.
    let stack = AttestedStack::start().await;
    let (client, base, cert_name) = (
        stack.plain.clone(),
        stack.base.clone(),
        stack.cert_name.clone(),
    );
    let (pebble, root, root_file, tmp) =
        (&stack.pebble, &stack.root_pem, &stack.root_file, &stack.tmp);

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
    assert!(account["uri"].as_str().is_some(), "{account}");
    let (status, attestation) = get(&client, &format!("{base}/attestation")).await.unwrap();
    assert_eq!(status, 200);
    let attestation: Value = serde_json::from_slice(&attestation).unwrap();
    let events: Value = serde_json::from_str(attestation["event_log"].as_str().unwrap()).unwrap();
    assert!(events.as_array().is_some_and(|e| !e.is_empty()));
    let (_, info) = get(&client, &format!("{base}/info")).await.unwrap();
    let info: Value = serde_json::from_slice(&info).unwrap();
    let compose_hash = info["compose_hash"].as_str().unwrap().to_owned();
    let compose = std::fs::read(stack.app.data_dir.join("app-compose.json")).unwrap();
    assert_eq!(compose_hash, hex::encode(Sha256::digest(&compose)));
    assert_eq!(
        info["tcb_info"]["app_compose"].as_str().unwrap().as_bytes(),
        compose.as_slice()
    );
    assert_eq!(
        info["app_id"].as_str().unwrap(),
        hex::encode(stack.governance.as_slice())
    );

    let url = base.clone();
    let rpc = stack.rpc_url();
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
        // A simulated quote has no OS measurement: os-image is N/A.
        let expected = if id == "os-image" { "n/a" } else { "pass" };
        assert_eq!(status, expected, "check {id}: {report:#}");
    }

    // The compose hash leaves the allow list: `governance` fails, by name.
    stack.allow(false).await;
    let (code, report) = verify(&args);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(check(&report, "governance")["status"], "fail", "{report:#}");
    assert_eq!(check(&report, "tls-certificate")["status"], "pass");
    stack.allow(true).await;

    // A server with another (valid) certificate for the domain relays the genuine
    // evidence: `tls-certificate` fails, by name.
    let relay = Relay::start(DOMAIN, client.clone(), base.clone(), None).await;
    let (relay_port, relay_ca) = (relay.port, relay.ca_pem.clone());
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
    e2e::signal(stack.app.pid(), "USR1");
    let cert_url = format!("{base}/evidences/{cert_name}");
    let renewed = e2e::eventually_async(Duration::from_secs(60), || {
        let (client, url, old) = (client.clone(), cert_url.clone(), cert_pem.clone());
        async move { matches!(get(&client, &url).await, Some((200, body)) if body != old) }
    })
    .await;
    assert!(renewed, "evidence not rebuilt; log:\n{}", stack.app.log());
    let (_, new_sums) = get(&client, &format!("{base}/evidences/sha256sum.txt"))
        .await
        .unwrap();
    assert_ne!(new_sums, sums.as_bytes());
    let (code, report) = verify(&args);
    assert_eq!(code, 0, "{report:#}");
    drop(stack);
}
