//! Action latency and throughput over HTTPS on loopback with keep-alive (the closed-loop
//! clients of `e2e::load`), against the real (release) appliance, keyservice and
//! workers, at 1, 8 and 64 clients. Prints a table. The `hello, 64 accts` rows send the
//! same hello-world action for 64 accounts in turn (round-robin across all clients): a
//! worker serves one account only, so these rows show what that binding costs when
//! tenants outnumber the workers (most jobs need a fresh worker). (`compare` measures the same actions
//! at 1 and 16 clients beside a bare server; this one varies the worker set-up.)
//!
//! Run with `scripts/bench` (it builds the release binaries first). `BENCH_WORKER_MAX_JOBS`
//! sets `actions.worker_max_jobs` of the appliance under test (the cost of retiring
//! workers: one worker start per that many jobs).
//!
//! Beside the load generator's latency, each row shows the appliance's own: p50 and p99
//! of `appliance_http_request_duration_seconds` for `/core/v1/lit_action` over the run,
//! and the requests it answered with an error status, read from its metrics endpoint.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::net::SocketAddr;
use std::time::Duration;

use e2e::Appliance;
use e2e::load::{self, Connections, Request, Target};
use serde_json::{Value, json};

use test_support::metrics;

const ROUTE: &str = "/core/v1/lit_action";
/// Accounts of the many-tenant rows.
const TENANTS: usize = 64;

struct Row {
    name: &'static str,
    clients: usize,
    outcome: load::Outcome,
    /// The appliance's p50 and p99 (seconds) and error answers, from its metrics.
    server_p50: Option<f64>,
    server_p99: Option<f64>,
    server_errors: f64,
}

/// `clients` keep-alive clients sending `requests` in turn for `duration`.
async fn measure(
    target: &Target,
    metrics_addr: SocketAddr,
    name: &'static str,
    requests: &[Request],
    clients: usize,
    duration: Duration,
) -> Row {
    let before = metrics::scrape(metrics_addr).await;
    let outcome =
        load::run_rotating(target, requests, Connections::KeepAlive, clients, duration).await;
    let after = metrics::scrape(metrics_addr).await;
    assert_eq!(outcome.failures, 0, "{name}: {:?}", outcome.first_failure);
    let base = "appliance_http_request_duration_seconds";
    let latency = after
        .histogram(base, &[("route", ROUTE)])
        .since(&before.histogram(base, &[("route", ROUTE)]));
    let answered =
        |m: &metrics::Scrape| m.sum("appliance_http_requests_total", &[("route", ROUTE)]);
    let ok = |m: &metrics::Scrape| {
        m.sum(
            "appliance_http_requests_total",
            &[("route", ROUTE), ("status", "200")],
        )
    };
    Row {
        name,
        clients,
        outcome,
        server_p50: latency.quantile(0.5),
        server_p99: latency.quantile(0.99),
        server_errors: (answered(&after) - answered(&before)) - (ok(&after) - ok(&before)),
    }
}

#[tokio::main]
async fn main() {
    // BENCH_WORKERS=direct: workers as the appliance's own children instead of through
    // the worker launcher (the image's path, and `appliance dev`'s), for comparison;
    // BENCH_WORKER_MAX_JOBS: actions.worker_max_jobs (the cost of worker retirement).
    let direct = std::env::var("BENCH_WORKERS").is_ok_and(|v| v == "direct");
    let max_jobs = std::env::var("BENCH_WORKER_MAX_JOBS").ok();
    let (metrics_addr, (metrics_key, metrics_value)) = metrics::metrics_listen();
    let mut env: Vec<(&str, &str)> = vec![(metrics_key, &metrics_value)];
    if direct {
        env.push(("APPLIANCE_ACTIONS__SPAWN_WORKER_LAUNCHER", "false"));
    }
    if let Some(n) = &max_jobs {
        env.push(("APPLIANCE_ACTIONS__WORKER_MAX_JOBS", n));
    }
    let app = Appliance::start_with(&env).await;
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
    let seconds: u64 = e2e::load::env_or("BENCH_SECONDS", 5);
    let pem = std::fs::read(app.data_dir.join("tls").join("self-signed.pem")).unwrap();
    let target = Target::new(e2e::flood::socket_addr(&app), &pem);
    let hello = [load::action(load::HELLO_ACTION, Value::Null, &key)];
    let sign = [load::action(load::SIGN_ACTION, json!({"pkpId": pkp}), &key)];
    // 64 more accounts, each sending the same hello-world action.
    let mut tenants = Vec::new();
    for i in 0..TENANTS {
        let (key, _) = app.new_account(&format!("tenant-{i}")).await;
        tenants.push(load::action(load::HELLO_ACTION, Value::Null, &key));
    }

    // Warm up workers, connections and caches.
    let warm_up = Duration::from_secs(1);
    measure(&target, metrics_addr, "warm-up", &hello, 8, warm_up).await;
    measure(&target, metrics_addr, "warm-up", &sign, 8, warm_up).await;
    measure(&target, metrics_addr, "warm-up", &tenants, 8, warm_up).await;

    let duration = Duration::from_secs(seconds);
    let mut rows = Vec::new();
    for clients in [1, 8, 64] {
        rows.push(
            measure(
                &target,
                metrics_addr,
                "hello-world",
                &hello,
                clients,
                duration,
            )
            .await,
        );
        rows.push(
            measure(
                &target,
                metrics_addr,
                "sign-message",
                &sign,
                clients,
                duration,
            )
            .await,
        );
        rows.push(
            measure(
                &target,
                metrics_addr,
                "hello, 64 accts",
                &tenants,
                clients,
                duration,
            )
            .await,
        );
    }
    println!(
        "actions.worker_max_jobs = {}",
        max_jobs.as_deref().unwrap_or("default")
    );
    println!(
        "{:<16} {:>8} {:>9} {:>10} {:>10} {:>12} {:>12} {:>10} {:>12}",
        "action",
        "clients",
        "requests",
        "p50 (ms)",
        "p99 (ms)",
        "server p50",
        "server p99",
        "errors",
        "actions/s"
    );
    let ms = |s: Option<f64>| s.map_or_else(|| "-".to_owned(), |s| format!("{:.2}", s * 1e3));
    for r in rows {
        println!(
            "{:<16} {:>8} {:>9} {:>10.2} {:>10.2} {:>12} {:>12} {:>10.0} {:>12.0}",
            r.name,
            r.clients,
            r.outcome.requests,
            r.outcome.p50.as_secs_f64() * 1e3,
            r.outcome.p99.as_secs_f64() * 1e3,
            ms(r.server_p50),
            ms(r.server_p99),
            r.server_errors,
            r.outcome.per_second
        );
    }
    println!(
        "p50/p99: the load generator's; server p50/p99 and errors: the appliance's metrics endpoint (appliance_http_request_duration_seconds, appliance_http_requests_total) over the same run"
    );
}
