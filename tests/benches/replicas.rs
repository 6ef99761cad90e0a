//! Replicas on PostgreSQL (issue 22's figures): hello-world action throughput with one
//! and with two replicas against one PostgreSQL, and management-write (`add_group`)
//! latency and throughput on PostgreSQL against SQLite, all on this machine, against the
//! real (release) appliance, keyservice and workers over HTTPS with keep-alive clients
//! (`e2e::load`). Prints a table; for the `add_group` rows it adds what the first
//! replica's store writer did meanwhile (from its metrics): writes per committed batch,
//! and round trips to PostgreSQL per write.
//!
//! Run with `scripts/bench` (it builds the release binaries first), or alone:
//! `cargo build --release -p appliance -p keyservice -p action-runtime -p worker-launcher
//! && cargo bench -p e2e --bench replicas`. `BENCH_SECONDS` sets each row's duration.
//!
//! Every replica here shares the same cores with the other replica, PostgreSQL and the
//! load generator: the two-replica row shows what replication costs and how the work
//! spreads, not how it scales on separate machines.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::net::SocketAddr;
use std::time::Duration;

use e2e::Appliance;
use e2e::load::{self, Connections, Request, Target};
use e2e::replicas::Cluster;
use serde_json::{Value, json};
use test_support::metrics;

struct Row {
    setup: &'static str,
    what: &'static str,
    clients: usize,
    outcome: load::Outcome,
    /// The first replica's writer during the row (scraped from its metrics), if known.
    writer: Option<Writer>,
}

/// What the first replica's store writer did during a row: writes per committed batch,
/// and round trips to PostgreSQL per write (the profile `docs/performance.md` keeps).
#[derive(Clone, Copy)]
struct Writer {
    writes_per_batch: f64,
    round_trips_per_write: f64,
}

/// The store writer's counters on `addr` (batches, writes, round trips).
async fn writer_counters(addr: SocketAddr) -> [f64; 3] {
    // The endpoint reads the store's counters at most once a second.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let scraped = metrics::scrape(addr).await;
    [
        "appliance_store_write_batches",
        "appliance_store_writes",
        "appliance_store_write_round_trips",
    ]
    .map(|name| scraped.value(name).unwrap_or(0.0))
}

fn target(app: &Appliance) -> Target {
    let pem = std::fs::read(app.data_dir.join("tls").join("self-signed.pem")).unwrap();
    Target::new(e2e::flood::socket_addr(app), &pem)
}

/// `clients` keep-alive clients for `duration`, spread evenly over `targets` (at least
/// one each: the row reports how many ran), counted together.
async fn measure(
    targets: &[Target],
    setup: &'static str,
    what: &'static str,
    request: &Request,
    clients: usize,
    duration: Duration,
) -> Row {
    let per = clients / targets.len();
    let runs = targets
        .iter()
        .map(|t| load::run(t, request, Connections::KeepAlive, per.max(1), duration));
    let outcomes = futures_util::future::join_all(runs).await;
    let mut total = load::Outcome::default();
    let mut p50 = Duration::ZERO;
    let mut p99 = Duration::ZERO;
    for o in &outcomes {
        assert_eq!(o.failures, 0, "{setup} {what}: {:?}", o.first_failure);
        total.requests += o.requests;
        total.per_second += o.per_second;
        p50 = p50.max(o.p50);
        p99 = p99.max(o.p99);
    }
    total.p50 = p50;
    total.p99 = p99;
    Row {
        setup,
        what,
        clients: per.max(1) * targets.len(),
        outcome: total,
        writer: None,
    }
}

/// [`measure`], with what the first target's writer did meanwhile (from its metrics at
/// `metrics`).
async fn measure_writes(
    targets: &[Target],
    metrics: Option<SocketAddr>,
    setup: &'static str,
    request: &Request,
    clients: usize,
    duration: Duration,
) -> Row {
    let Some(addr) = metrics else {
        return measure(targets, setup, "add_group", request, clients, duration).await;
    };
    let before = writer_counters(addr).await;
    let mut row = measure(targets, setup, "add_group", request, clients, duration).await;
    let after = writer_counters(addr).await;
    let [batches, writes, trips] = [0, 1, 2].map(|i| after[i] - before[i]);
    if writes > 0.0 && batches > 0.0 {
        row.writer = Some(Writer {
            writes_per_batch: writes / batches,
            round_trips_per_write: trips / writes,
        });
    }
    row
}

/// An `add_group` request (a billed management write: one row, its members, the outbox
/// entry, in one transaction).
fn add_group(key: &str) -> Request {
    Request::post(
        "/core/v1/add_group",
        &json!({"group_name": "bench", "group_description": "",
                "pkp_ids_permitted": [], "cid_hashes_permitted": []}),
    )
    .with_key(key)
}

async fn rows_for(
    targets: &[Target],
    metrics: Option<SocketAddr>,
    setup: &'static str,
    key: &str,
    writes: bool,
    duration: Duration,
) -> Vec<Row> {
    let hello = load::action(load::HELLO_ACTION, Value::Null, key);
    let warm_up = Duration::from_secs(1);
    measure(targets, setup, "warm-up", &hello, 8, warm_up).await;
    let mut rows = Vec::new();
    if writes {
        let write = add_group(key);
        measure(targets, setup, "warm-up", &write, 2, warm_up).await;
        rows.push(measure_writes(targets, metrics, setup, &write, 1, duration).await);
        rows.push(measure_writes(targets, metrics, setup, &write, 16, duration).await);
    }
    rows.push(measure(targets, setup, "hello-world", &hello, 16, duration).await);
    rows.push(measure(targets, setup, "hello-world", &hello, 64, duration).await);
    rows
}

#[tokio::main]
async fn main() {
    let seconds: u64 = e2e::load::env_or("BENCH_SECONDS", 5);
    let duration = Duration::from_secs(seconds);
    let mut rows = Vec::new();

    // SQLite, one appliance.
    {
        let (addr, (name, value)) = metrics::metrics_listen();
        let app = Appliance::start_with(&[(name, &value)]).await;
        let (key, _) = app.new_account("bench").await;
        rows.extend(rows_for(&[target(&app)], Some(addr), "sqlite", &key, true, duration).await);
    }

    // PostgreSQL: one replica, then two.
    let (addr, (name, value)) = metrics::metrics_listen();
    let Some(mut cluster) =
        Cluster::start_each(Vec::new(), vec![vec![(name.to_owned(), value)]]).await
    else {
        println!("PostgreSQL is not installed: no PostgreSQL rows");
        return;
    };
    let (key, _) = cluster.a().new_account("bench").await;
    rows.extend(
        rows_for(
            &[target(cluster.a())],
            Some(addr),
            "postgres, 1 replica",
            &key,
            true,
            duration,
        )
        .await,
    );
    cluster.add_replica().await;
    let both = [target(cluster.a()), target(cluster.b())];
    rows.extend(
        rows_for(
            &both,
            Some(addr),
            "postgres, 2 replicas",
            &key,
            true,
            duration,
        )
        .await,
    );

    println!(
        "{:<22} {:<12} {:>8} {:>9} {:>10} {:>10} {:>10} {:>12} {:>14}",
        "setup",
        "request",
        "clients",
        "requests",
        "p50 (ms)",
        "p99 (ms)",
        "per s",
        "writes/batch",
        "round trips/w"
    );
    for r in rows {
        let (per_batch, trips) = match r.writer {
            Some(w) => (
                format!("{:.1}", w.writes_per_batch),
                format!("{:.1}", w.round_trips_per_write),
            ),
            None => (String::new(), String::new()),
        };
        println!(
            "{:<22} {:<12} {:>8} {:>9} {:>10.2} {:>10.2} {:>10.0} {:>12} {:>14}",
            r.setup,
            r.what,
            r.clients,
            r.outcome.requests,
            r.outcome.p50.as_secs_f64() * 1e3,
            r.outcome.p99.as_secs_f64() * 1e3,
            r.outcome.per_second,
            per_batch,
            trips
        );
    }
}
