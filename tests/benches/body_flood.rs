//! Memory and `/health` latency under a flood of big request bodies (issue 18): for every
//! unauthenticated POST endpoint, `BENCH_FLOOD_CLIENTS` (40) concurrent bodies of
//! `BENCH_FLOOD_MIB` (10) MiB of nested JSON arrays, half with a Content-Length and half
//! streamed without one, against the real (release) appliance, while `/health` is polled
//! every 20 ms from its own thread; each flood is repeated `BENCH_FLOOD_ROUNDS` (5) times
//! back to back and a row reports the worst round. Prints a table: the appliance's peak resident memory (`VmHWM`) and the
//! slowest `/health` answer, per endpoint and for all endpoints at once. Targets: peak
//! RSS under 250 MB, `/health` under 100 ms.
//!
//! Run with `scripts/bench-body-flood` (it builds the release binaries first).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use e2e::Appliance;
use e2e::flood::{FloodReport, UNAUTHENTICATED_POSTS, flood, memory_of, nested_arrays};

fn row(name: &str, clients: usize, r: &FloodReport) {
    let statuses: Vec<String> = r.statuses.iter().map(|(s, n)| format!("{s}×{n}")).collect();
    println!(
        "| {name:<34} | {clients:>7} | {:>13} | {:>13} | {:>12.1} | {:>12.1} | {:>8.1} | {} |",
        r.peak_before / 1_000_000,
        r.peak_after / 1_000_000,
        r.health_max.as_secs_f64() * 1000.0,
        r.health_p50.as_secs_f64() * 1000.0,
        r.elapsed.as_secs_f64(),
        statuses.join(" "),
    );
}

/// `rounds` floods of `paths` back to back; the worst of each measure, statuses summed.
async fn rounds(
    app: &Appliance,
    paths: &[&str],
    clients: usize,
    body: &bytes::Bytes,
    rounds: usize,
) -> FloodReport {
    let mut worst = FloodReport::default();
    for round in 0..rounds.max(1) {
        let r = flood(app, paths, clients, body.clone()).await;
        if round == 0 {
            worst.peak_before = r.peak_before;
        }
        worst.peak_after = r.peak_after;
        worst.health_max = worst.health_max.max(r.health_max);
        worst.health_p50 = worst.health_p50.max(r.health_p50);
        worst.elapsed += r.elapsed;
        for (status, n) in r.statuses {
            *worst.statuses.entry(status).or_default() += n;
        }
    }
    worst
}

#[tokio::main]
async fn main() {
    let clients = e2e::load::env_or("BENCH_FLOOD_CLIENTS", 40);
    let n_rounds = e2e::load::env_or("BENCH_FLOOD_ROUNDS", 5);
    let mib = e2e::load::env_or("BENCH_FLOOD_MIB", 10);
    let app = Appliance::start().await;
    for path in UNAUTHENTICATED_POSTS {
        let _ = app.post(path, None, serde_json::json!({})).await;
    }
    let (start_peak, start_rss) = memory_of(app.pid());
    println!(
        "appliance pid {}: VmHWM {} MB, VmRSS {} MB at start; {clients} concurrent {mib} MiB bodies per endpoint, {n_rounds} rounds",
        app.pid(),
        start_peak / 1_000_000,
        start_rss / 1_000_000
    );
    println!();
    println!(
        "| endpoint                           | clients | VmHWM before MB | VmHWM after MB | max /health ms | worst round p50 ms | seconds | statuses |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---|");
    let body = nested_arrays(mib * 1024 * 1024, 30);
    let mut worst_health = std::time::Duration::ZERO;
    for path in UNAUTHENTICATED_POSTS {
        let r = rounds(&app, &[path], clients, &body, n_rounds).await;
        worst_health = worst_health.max(r.health_max);
        row(path, clients, &r);
    }
    // The targets are for `clients` bodies against each endpoint (the rows above). The
    // next row, every endpoint at once, is a harder stress reported beside them.
    let (per_endpoint_peak, _) = memory_of(app.pid());
    let r = rounds(&app, &UNAUTHENTICATED_POSTS, clients, &body, n_rounds).await;
    row("all four at once", clients * 4, &r);
    let (peak, _) = memory_of(app.pid());
    let verdict = |met: bool| if met { "met" } else { "MISSED" };
    println!();
    println!(
        "{clients} bodies per endpoint: peak RSS (VmHWM) {} MB (target < 250 MB: {}); slowest /health {:.1} ms (target < 100 ms: {})",
        per_endpoint_peak / 1_000_000,
        verdict(per_endpoint_peak < 250_000_000),
        worst_health.as_secs_f64() * 1000.0,
        verdict(worst_health.as_millis() < 100),
    );
    println!(
        "all four at once: peak RSS (VmHWM) {} MB; slowest /health {:.1} ms (no target; the load generator shares the machine)",
        peak / 1_000_000,
        r.health_max.as_secs_f64() * 1000.0,
    );
}
