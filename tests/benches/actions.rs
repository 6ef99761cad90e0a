//! Action latency and throughput over HTTPS on loopback with keep-alive, against the
//! real (release) appliance, keyservice and workers. Prints a table.
//!
//! Run with `scripts/bench` (it builds the release binaries first). `BENCH_WORKER_MAX_JOBS`
//! sets `actions.worker_max_jobs` of the appliance under test (the cost of retiring
//! workers: one worker start per that many jobs).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use e2e::Appliance;
use serde_json::{Value, json};

const HELLO: &str = r#"async function main() { return "hello world"; }"#;
const SIGN: &str = r#"async function main(p) {
    const pk = await Lit.Actions.getPrivateKey({pkpId: p.pkpId});
    return await new ethers.Wallet(pk).signMessage("hello world");
}"#;

struct Row {
    name: &'static str,
    clients: usize,
    requests: usize,
    p50: Duration,
    p99: Duration,
    per_second: f64,
}

async fn measure(
    app: &Appliance,
    key: &str,
    name: &'static str,
    code: &str,
    params: Value,
    clients: usize,
    duration: Duration,
) -> Row {
    let body = json!({"code": code, "js_params": params});
    // One keep-alive connection per client.
    let mut tasks = Vec::new();
    let started = Instant::now();
    for _ in 0..clients {
        let client = app.client_with(reqwest::Version::HTTP_11);
        let url = app.api("/lit_action");
        let key = key.to_owned();
        let body = body.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while started.elapsed() < duration {
                let t = Instant::now();
                let r = client
                    .post(&url)
                    .bearer_auth(&key)
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                let status = r.status();
                let v: Value = r.json().await.unwrap();
                assert!(status.is_success() && v["has_error"] == json!(false), "{v}");
                latencies.push(t.elapsed());
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let elapsed = started.elapsed();
    all.sort();
    let pick = |q: f64| all[((all.len() as f64 - 1.0) * q).round() as usize];
    Row {
        name,
        clients,
        requests: all.len(),
        p50: pick(0.50),
        p99: pick(0.99),
        per_second: all.len() as f64 / elapsed.as_secs_f64(),
    }
}

#[tokio::main]
async fn main() {
    // BENCH_WORKERS=direct: workers as the appliance's own children instead of through
    // the worker launcher (the image's path, and `appliance dev`'s), for comparison;
    // BENCH_WORKER_MAX_JOBS: actions.worker_max_jobs (the cost of worker retirement).
    let direct = std::env::var("BENCH_WORKERS").is_ok_and(|v| v == "direct");
    let max_jobs = std::env::var("BENCH_WORKER_MAX_JOBS").ok();
    let mut env: Vec<(&str, &str)> = Vec::new();
    if direct {
        env.push(("APPLIANCE_ACTIONS__SPAWN_WORKER_LAUNCHER", "false"));
    }
    if let Some(n) = &max_jobs {
        env.push(("APPLIANCE_ACTIONS__WORKER_MAX_JOBS", n));
    }
    let app = if env.is_empty() {
        Appliance::start().await
    } else {
        Appliance::start_with(&env).await
    };
    println!(
        "workers: {}",
        if direct {
            "direct children"
        } else {
            "through worker-launcher"
        }
    );
    let (key, _) = app.new_account("bench").await;
    let wallets = app
        .get("/list_wallets", Some(&key))
        .await
        .assert_ok()
        .clone();
    let pkp = wallets[0]["pkp_id"].clone();
    let seconds: u64 = std::env::var("BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);

    // Warm up workers, connections and caches.
    measure(
        &app,
        &key,
        "warm-up",
        HELLO,
        Value::Null,
        8,
        Duration::from_secs(1),
    )
    .await;
    measure(
        &app,
        &key,
        "warm-up",
        SIGN,
        json!({"pkpId": pkp}),
        8,
        Duration::from_secs(1),
    )
    .await;

    let mut rows = Vec::new();
    for clients in [1, 8, 64] {
        rows.push(
            measure(
                &app,
                &key,
                "hello-world",
                HELLO,
                Value::Null,
                clients,
                Duration::from_secs(seconds),
            )
            .await,
        );
        rows.push(
            measure(
                &app,
                &key,
                "sign-message",
                SIGN,
                json!({"pkpId": pkp}),
                clients,
                Duration::from_secs(seconds),
            )
            .await,
        );
    }
    println!(
        "actions.worker_max_jobs = {}",
        max_jobs.as_deref().unwrap_or("default")
    );
    println!(
        "{:<14} {:>8} {:>9} {:>10} {:>10} {:>12}",
        "action", "clients", "requests", "p50 (ms)", "p99 (ms)", "actions/s"
    );
    for r in rows {
        println!(
            "{:<14} {:>8} {:>9} {:>10.2} {:>10.2} {:>12.0}",
            r.name,
            r.clients,
            r.requests,
            r.p50.as_secs_f64() * 1e3,
            r.p99.as_secs_f64() * 1e3,
            r.per_second
        );
    }
}
