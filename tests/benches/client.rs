//! `cargo bench -p e2e --bench client`: what the attested-TLS client costs.
//!
//! 1. One verification with offline collateral: the checks of `evidence verify` over the
//!    near-mpc deployment's real TDX evidence (`evidence/tests/data/dstack-near-mpc`,
//!    DCAP with its saved collateral, RTMR replay, compose hash and event), in-process.
//! 2. One online verification of the whole local chain (`e2e::attested::AttestedStack`:
//!    Pebble ACME certificate, CAA in challtestsrv, governance on anvil, simulated
//!    quote): fetch the evidence over HTTPS, then every check.
//! 3. A call on a verified, pinned keep-alive connection (`appliance-client`) against the
//!    same call through a plain reqwest client with the same rustls roots and the same
//!    60 s request timeout
//!    (`GET /core/v1/account_exists` with the account key, one client, sequential), in
//!    alternating rounds so that drift hits both sides alike.
//!
//! `BENCH_CALLS` sets the calls per side (default 4000).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use appliance_client::evidence::bundle::Bundle;
use appliance_client::evidence::check::{Options, run};
use appliance_client::{Client, Credential, Policy};
use e2e::attested::{AttestedStack, CAA_DOMAIN};
use serde_json::{Value, json};

const NEAR_MPC_AT: u64 = 1_786_622_400;

fn near_bundle() -> Bundle {
    let dir = e2e::workspace_root().join("evidence/tests/data/dstack-near-mpc");
    let read = |f: &str| std::fs::read(dir.join(f)).unwrap();
    let tcb: Value = serde_json::from_slice(&read("tcb_info.json")).unwrap();
    let quote: Vec<u8> = serde_json::from_slice(&read("quote.json")).unwrap();
    let mut events = tcb["event_log"].clone();
    for e in events.as_array_mut().unwrap() {
        if e["event_type"] == json!(0x0800_0001u32) {
            e["digest"] = json!("");
        }
    }
    Bundle {
        info: Some(json!({
            "app_id": "2911e1f733466216dedb862d6d669e11256ee7a3",
            "instance_id": "",
            "compose_hash": tcb["compose_hash"],
            "tcb_info": tcb,
        })),
        attestation: Some(json!({
            "quote": hex::encode(quote),
            "event_log": events.to_string(),
            "vm_config": "",
        })),
        collateral_json: Some(read("collateral.json")),
        ..Default::default()
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

struct Row {
    name: &'static str,
    samples: Vec<Duration>,
}

impl Row {
    fn print(&mut self) {
        self.samples.sort();
        let mean = self.samples.iter().sum::<Duration>() / self.samples.len() as u32;
        println!(
            "| {} | {} | {:.1} µs | {:.1} µs | {:.1} µs |",
            self.name,
            self.samples.len(),
            micros(mean),
            micros(percentile(&self.samples, 0.5)),
            micros(percentile(&self.samples, 0.99)),
        );
    }
    fn mean(&self) -> f64 {
        micros(self.samples.iter().sum::<Duration>() / self.samples.len() as u32)
    }
}

/// The measured call through the pinned client.
async fn pinned_call(pinned: &Client) -> Value {
    pinned
        .request(
            http::Method::GET,
            "/core/v1/account_exists",
            None,
            None,
            Credential::ApiKey,
        )
        .await
        .unwrap()
}

/// The same call through the plain client.
async fn plain_call(plain: &reqwest::Client, url: &str, key: &str) -> Value {
    plain
        .get(url)
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let calls: usize = std::env::var("BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000);

    // 1. Offline verification of real TDX evidence.
    let bundle = near_bundle();
    let options = Options {
        at: NEAR_MPC_AT,
        // The vectors have no /evidences/, TLS leaf, domain or chain.
        skip: ["report-data", "tls-certificate", "acme-caa", "governance"]
            .map(str::to_owned)
            .to_vec(),
        // The vectors pin no OS image (what the bench measures is the rest).
        allow_unpinned_os: true,
        ..Options::default()
    };
    let report = run(&bundle, &options).await;
    assert!(report.ok, "{}", report.to_text());
    let mut offline = Row {
        name: "verification, offline collateral (near-mpc, real DCAP)",
        samples: Vec::new(),
    };
    for _ in 0..200 {
        let t = Instant::now();
        let r = run(&bundle, &options).await;
        offline.samples.push(t.elapsed());
        assert!(r.ok);
    }

    // 2. Online verification of the whole local chain.
    let stack = AttestedStack::start().await;
    let policy = Policy {
        allow_simulated: true,
        rpc_url: Some(stack.rpc_url()),
        dns_server: Some(stack.dns()),
        caa_domain: Some(CAA_DOMAIN.to_owned()),
        ..Policy::default()
    };
    let anon = Client::builder(&stack.base)
        .ca_file(&stack.root_file)
        .policy(policy.clone())
        .build()
        .unwrap();
    let mut online = Row {
        name: "verification, online (local chain: fetch + every check)",
        samples: Vec::new(),
    };
    for _ in 0..20 {
        let t = Instant::now();
        anon.verify().await.unwrap();
        online.samples.push(t.elapsed());
    }
    let account: Value = anon
        .post_json(
            "/core/v1/new_account",
            &json!({"account_name": "bench"}),
            Credential::None,
        )
        .await
        .unwrap();
    let key = account["api_key"].as_str().unwrap().to_owned();

    // 3. Pinned calls against plain HTTPS calls.
    let pinned = Client::builder(&stack.base)
        .ca_file(&stack.root_file)
        .policy(policy)
        .api_key(&key)
        .build()
        .unwrap();
    pinned.verify().await.unwrap();
    // The same request timeout as the pinned client's default (a bounded wait is not part
    // of the pin, and costs a timer per request on either side).
    let plain = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(stack.root_pem.as_bytes()).unwrap())
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let url = format!("{}/core/v1/account_exists", stack.base);
    let mut pinned_row = Row {
        name: "call, pinned (appliance-client)",
        samples: Vec::with_capacity(calls),
    };
    let mut plain_row = Row {
        name: "call, plain HTTPS (reqwest)",
        samples: Vec::with_capacity(calls),
    };
    let round = 200;
    // Warm-up: both connections open.
    for _ in 0..round {
        let _: Value = pinned_call(&pinned).await;
        let _: Value = plain_call(&plain, &url, &key).await;
    }
    while pinned_row.samples.len() < calls {
        for _ in 0..round {
            let t = Instant::now();
            let v: Value = pinned_call(&pinned).await;
            pinned_row.samples.push(t.elapsed());
            assert_eq!(v, json!(true));
        }
        for _ in 0..round {
            let t = Instant::now();
            let v: Value = plain_call(&plain, &url, &key).await;
            plain_row.samples.push(t.elapsed());
            assert_eq!(v, json!(true));
        }
    }
    assert_eq!(
        pinned.verification_count(),
        1,
        "no re-verification during the run"
    );

    println!("| row | samples | mean | p50 | p99 |");
    println!("|---|---:|---:|---:|---:|");
    offline.print();
    online.print();
    pinned_row.print();
    plain_row.print();
    println!();
    println!(
        "- pinned call overhead against plain HTTPS (mean): {:+.1} %",
        (pinned_row.mean() / plain_row.mean() - 1.0) * 100.0
    );
    println!(
        "- pinned call overhead against plain HTTPS (p50): {:+.1} %",
        (micros(percentile(&pinned_row.samples, 0.5))
            / micros(percentile(&plain_row.samples, 0.5))
            - 1.0)
            * 100.0
    );
    println!(
        "- machine: {} CPUs",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    );
}
