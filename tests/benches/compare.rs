//! The appliance against the machine's limit (issue 19): each row's throughput and
//! latency through the real (release) appliance, keyservice and workers, beside a bare
//! hyper + rustls server on the same stack (`benches/bare/server.rs`, its own process)
//! answering the same requests with a fixed JSON or one secp256k1 signature. The ratio
//! (appliance req/s ÷ bare req/s) is how close to the machine's limit a row is.
//!
//! Measured: closed-loop HTTPS clients (`e2e::load`: hyper HTTP/1.1 over tokio-rustls,
//! one keep-alive connection per client unless a row makes one per request) on this
//! process's runtime, so the load generator shares the machine's cores with the server,
//! equally for both servers. Each row runs a one-second warm-up, then `BENCH_SECONDS`
//! (default 5) against the appliance, then the same against the bare server. Rows:
//! hello-world and signing actions (`/core/v1/lit_action`; the bare server signs
//! keccak256 of the body), `list_groups` (an account with 10 groups), `list_wallets`,
//! `account_exists` and `add_group` (against the bare hello, for reference), at 1 and 16
//! clients (each action row also against its own limit: the same action in a fresh realm
//! per request inside the bare server, its `/action`, issue 38); then full and resumed TLS handshakes (a new connection per `GET /version`;
//! the resumed row shares one client session store). Also: the resident memory
//! (`VmRSS`) of the appliance, keyservice, worker launcher and workers (the appliance's
//! descendants) idle and halfway through the 16-client signing row, and the start-up
//! time of `appliance dev` (the harness's mode: serve with self-signed TLS and a
//! supervised keyservice) to its first answered request and first answered action.
//!
//! The appliance's own figures come from its metrics endpoint, as an operator's
//! Prometheus would read them: for each row, the requests it counted, those it answered
//! with an error status, and the p50 and p99 of `appliance_http_request_duration_seconds`
//! for the row's route over the measured run (interpolated within the histogram's 1-2-5
//! buckets), and its resident memory (`process_resident_memory_bytes`); the other
//! processes' memory is read from `/proc`.
//!
//! `BENCH_ROWS=<text>` keeps only the rows whose name contains that text (e.g.
//! `BENCH_ROWS=TLS` for the two handshake rows, to compare variants quickly).
//!
//! Prints one markdown table, then the memory, start-up, date and machine lines. Run
//! with `scripts/bench` (it builds the release binaries first).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use e2e::Appliance;
use e2e::flood::{memory_of, socket_addr};
use e2e::load::{self, Connections, Outcome, Request, Target};
use serde_json::{Value, json};

use test_support::metrics;

const WARM_UP: Duration = Duration::from_secs(1);

/// One row: the same load against the appliance and the bare server.
struct Row {
    name: &'static str,
    clients: usize,
    connections: Connections,
    appliance: Request,
    bare: Request,
    /// Connect without session resumption.
    full_handshakes: bool,
    /// For the action rows: the same action run by the bare server's `/action` (a fresh
    /// realm per request in its own process: the isolation model's own limit).
    limit: Option<Request>,
}

/// A row's results.
struct Measured {
    row: Row,
    appliance: Outcome,
    /// The appliance's own view of the measured run, from its metrics endpoint.
    server: Server,
    bare: Outcome,
    /// The row's `limit`, measured.
    limit: Option<Outcome>,
}

/// What the appliance's metrics say about one measured run of one route.
#[derive(Default)]
struct Server {
    /// Requests it answered.
    requests: f64,
    /// Of those, answered with a status other than 2xx.
    errors: f64,
    p50: Option<f64>,
    p99: Option<f64>,
}

impl Server {
    /// The figures for `route` between two scrapes.
    fn between(route: &str, before: &metrics::Scrape, after: &metrics::Scrape) -> Self {
        let labels = [("route", route)];
        let total = "appliance_http_requests_total";
        let requests = after.sum(total, &labels) - before.sum(total, &labels);
        let ok: f64 = ["200", "201", "204"]
            .iter()
            .map(|s| {
                let l = [("route", route), ("status", *s)];
                after.sum(total, &l) - before.sum(total, &l)
            })
            .sum();
        let base = "appliance_http_request_duration_seconds";
        let latency = after
            .histogram(base, &labels)
            .since(&before.histogram(base, &labels));
        Self {
            requests,
            errors: requests - ok,
            p50: latency.quantile(0.5),
            p99: latency.quantile(0.99),
        }
    }
}

/// What the rows send: the accounts and wallet they use.
struct Fixture {
    /// An account with one wallet and 10 groups (actions and reads).
    key: String,
    pkp_id: Value,
    /// An account that only `add_group` writes to.
    writer: String,
}

/// Resident memory of the appliance and its descendants, in bytes.
#[derive(Default)]
struct Memory {
    appliance: u64,
    keyservice: u64,
    launcher: u64,
    workers: u64,
    worker_count: usize,
    other: u64,
}

/// The start-up times, from spawning the appliance.
struct StartUp {
    spawned: Instant,
    listening: Duration,
    first_request: Duration,
    first_action: Duration,
    new_account: Duration,
}

/// The bare server process, killed when dropped.
struct BareServer {
    child: Child,
    target: Target,
    _dir: tempfile::TempDir,
}

impl BareServer {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let pem_path = dir.path().join("bare.pem");
        let mut child = Command::new(env!("CARGO_BIN_EXE_bare-server"))
            .arg(&pem_path)
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn bare-server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line.trim().trim_start_matches("https://").parse().unwrap();
        let pem = std::fs::read(&pem_path).unwrap();
        Self {
            child,
            target: Target::new(addr, &pem),
            _dir: dir,
        }
    }
}

impl Drop for BareServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::main]
async fn main() {
    let duration = Duration::from_secs(load::env_or("BENCH_SECONDS", 5));
    let (app, metrics_addr, mut startup) = start_appliance().await;
    let fixture = Fixture::new(&app, &mut startup).await;
    let idle = memory(app.pid(), metrics_addr).await;
    let bare = BareServer::start();
    let pem = std::fs::read(app.data_dir.join("tls").join("self-signed.pem")).unwrap();
    let appliance = Target::new(socket_addr(&app), &pem);

    let mut measured = Vec::new();
    let mut loaded = None;
    let only = std::env::var("BENCH_ROWS").unwrap_or_default();
    for row in rows(&fixture)
        .into_iter()
        .filter(|row| row.name.contains(only.as_str()))
    {
        let sample = (row.name == "sign action" && row.clients == 16).then_some(app.pid());
        let route = row.appliance.path.clone();
        let (appliance, memory, server) = measure(
            &appliance,
            &row,
            &row.appliance,
            duration,
            sample,
            Some((metrics_addr, route.as_str())),
        )
        .await;
        loaded = loaded.or(memory);
        let (bare_outcome, _, _) =
            measure(&bare.target, &row, &row.bare, duration, None, None).await;
        let limit = match &row.limit {
            Some(request) => Some(
                measure(&bare.target, &row, request, duration, None, None)
                    .await
                    .0,
            ),
            None => None,
        };
        measured.push(Measured {
            row,
            appliance,
            server,
            bare: bare_outcome,
            limit,
        });
    }

    print_table(&measured, duration);
    print_memory("idle", &idle);
    print_memory("16-client sign load", &loaded.unwrap_or_default());
    print_startup(&startup);
    print_machine();
}

/// Starts the appliance (its metrics on a free loopback port) and times it to its first
/// answered request.
async fn start_appliance() -> (Appliance, SocketAddr, StartUp) {
    // The harness checks the binaries are fresh before it spawns: time that apart.
    let checked = Instant::now();
    for name in ["appliance", "action-worker", "worker-launcher"] {
        e2e::binary(name);
    }
    // `Appliance::start` repeats that check, then spawns.
    let spawned = Instant::now() + checked.elapsed();
    // One account drives every action row: let it use the whole pool (by default an
    // account gets half, leaving room for others; the bare server has no tenants).
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pool = (2 * cpus).max(2).to_string();
    let (metrics_addr, (metrics_key, metrics_value)) = metrics::metrics_listen();
    let mut env = vec![
        (
            "APPLIANCE_ACTIONS__MAX_CONCURRENT_PER_ACCOUNT",
            pool.as_str(),
        ),
        (metrics_key, metrics_value.as_str()),
    ];
    // BENCH_TRACES_ENDPOINT: export traces (every request sampled) to that OTLP/HTTP
    // collector, to measure what tracing costs.
    let traces = std::env::var("BENCH_TRACES_ENDPOINT").ok();
    if let Some(endpoint) = &traces {
        env.push(("APPLIANCE_TRACES__ENDPOINT", endpoint.as_str()));
        println!("traces: exported to {endpoint}");
    }
    let app = Appliance::start_with(&env).await;
    let listening = spawned.elapsed();
    loop {
        let answered = app.client.get(app.url("/version")).send().await;
        if answered.is_ok_and(|r| r.status().is_success()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let first_request = spawned.elapsed();
    let startup = StartUp {
        spawned,
        listening,
        first_request,
        first_action: Duration::ZERO,
        new_account: Duration::ZERO,
    };
    (app, metrics_addr, startup)
}

impl Fixture {
    /// Creates the accounts and groups; runs the first action (finishing `startup`).
    async fn new(app: &Appliance, startup: &mut StartUp) -> Self {
        let account_started = Instant::now();
        let (key, _) = app.new_account("bench").await;
        startup.new_account = account_started.elapsed();
        let hello = json!({"code": load::HELLO_ACTION, "js_params": null});
        let reply = app.post("/lit_action", Some(&key), hello).await;
        assert_eq!(
            reply.assert_ok()["has_error"],
            json!(false),
            "{}",
            reply.text
        );
        startup.first_action = startup.spawned.elapsed();

        let wallets = app.get("/list_wallets", Some(&key)).await;
        let pkp_id = wallets.assert_ok()[0]["pkp_id"].clone();
        for i in 0..10 {
            app.add_group(&key, json!({"group_name": format!("group {i}")}))
                .await;
        }
        let (writer, _) = app.new_account("bench writer").await;
        Self {
            key,
            pkp_id,
            writer,
        }
    }
}

/// Every row, in the order printed.
fn rows(fixture: &Fixture) -> Vec<Row> {
    let key = fixture.key.as_str();
    let hello = load::action(load::HELLO_ACTION, Value::Null, key);
    let sign = load::action(load::SIGN_ACTION, json!({"pkpId": fixture.pkp_id}), key);
    let add_group = Request::post("/core/v1/add_group", &json!({"group_name": "bench"}))
        .with_key(&fixture.writer)
        .expecting("group_id");
    let keyed = |path: &str| Request::get(path).with_key(key);
    let mut rows = Vec::new();
    for clients in [1, 16] {
        let row = |name, appliance: Request, bare: Request| Row {
            name,
            clients,
            connections: Connections::KeepAlive,
            appliance,
            bare,
            full_handshakes: false,
            limit: None,
        };
        let with_limit = |row: Row| Row {
            limit: Some(row.appliance.at("/action")),
            ..row
        };
        rows.push(with_limit(row(
            "hello-world action",
            hello.clone(),
            bare_hello(&hello),
        )));
        let bare_sign = sign.at("/sign").expecting("signature");
        rows.push(with_limit(row("sign action", sign.clone(), bare_sign)));
        for path in ["list_groups", "list_wallets", "account_exists"] {
            let request = keyed(&format!("/core/v1/{path}"));
            rows.push(row(path, request.clone(), bare_hello(&request)));
        }
        rows.push(row("add_group", add_group.clone(), bare_hello(&add_group)));
    }
    for (name, full_handshakes) in [
        ("full TLS handshakes", true),
        ("resumed TLS handshakes", false),
    ] {
        let version = Request::get("/version");
        rows.push(Row {
            name,
            clients: 16,
            connections: Connections::PerRequest,
            appliance: version.clone(),
            bare: bare_hello(&version),
            full_handshakes,
            limit: None,
        });
    }
    rows
}

/// `request` as the bare server answers it: with its fixed hello.
fn bare_hello(request: &Request) -> Request {
    request.clone().expecting("hello world")
}

/// One side of a row: a warm-up, then the measured run; with `sample`, the memory of
/// that process tree halfway through; with `metrics` (the appliance's endpoint and the
/// row's route), what the appliance counted during the measured run.
async fn measure(
    target: &Target,
    row: &Row,
    request: &Request,
    duration: Duration,
    sample: Option<u32>,
    metrics: Option<(SocketAddr, &str)>,
) -> (Outcome, Option<Memory>, Server) {
    let target = if row.full_handshakes {
        target.without_resumption()
    } else {
        target.clone()
    };
    load::run(&target, request, row.connections, row.clients, WARM_UP).await;
    let before = match metrics {
        Some((addr, _)) => Some(metrics::scrape(addr).await),
        None => None,
    };
    let halfway = async {
        let pid = sample?;
        let (addr, _) = metrics?;
        tokio::time::sleep(duration / 2).await;
        Some(memory(pid, addr).await)
    };
    let (outcome, memory) = tokio::join!(
        load::run(&target, request, row.connections, row.clients, duration),
        halfway
    );
    let server = match (metrics, before) {
        (Some((addr, route)), Some(before)) => {
            Server::between(route, &before, &metrics::scrape(addr).await)
        }
        _ => Server::default(),
    };
    (outcome, memory, server)
}

/// The resident memory of the appliance (`process_resident_memory_bytes` from its
/// metrics endpoint at `metrics`) and, from `/proc`, `VmRSS` of its descendants by
/// command name.
async fn memory(pid: u32, metrics: SocketAddr) -> Memory {
    let scraped = metrics::scrape(metrics).await;
    let mut memory = Memory {
        appliance: scraped
            .value("process_resident_memory_bytes")
            .map_or(0, |bytes| bytes as u64),
        ..Memory::default()
    };
    for child in e2e::descendants_of(pid) {
        let rss = memory_of(child).1;
        match e2e::command_name(child).as_deref() {
            Some("keyservice") => memory.keyservice += rss,
            Some("worker-launcher") => memory.launcher += rss,
            // A worker re-executes itself through /proc/self/exe (a bigger stack).
            Some("action-worker" | "exe") => {
                memory.workers += rss;
                memory.worker_count += 1;
            }
            _ => memory.other += rss,
        }
    }
    memory
}

fn print_table(measured: &[Measured], duration: Duration) {
    println!(
        "\nEach row: {} s after a {} s warm-up, appliance then bare server.\n",
        duration.as_secs(),
        WARM_UP.as_secs()
    );
    println!(
        "| row | clients | appliance req/s | appliance p50 | appliance p99 | server p50 | server p99 | server errors | bare req/s | bare p50 | ratio (req/s) | own limit req/s | own limit p50 | ÷ own limit |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for m in measured {
        let (limit, limit_p50, of_limit) = match &m.limit {
            Some(limit) => (
                format!("{:.0}", limit.per_second),
                ms(limit.p50),
                format!("{:.2}", m.appliance.per_second / limit.per_second),
            ),
            None => ("-".to_owned(), "-".to_owned(), "-".to_owned()),
        };
        println!(
            "| {} | {} | {:.0} | {} | {} | {} | {} | {:.0} of {:.0} | {:.0} | {} | {:.2} | {limit} | {limit_p50} | {of_limit} |",
            m.row.name,
            m.row.clients,
            m.appliance.per_second,
            ms(m.appliance.p50),
            ms(m.appliance.p99),
            seconds_ms(m.server.p50),
            seconds_ms(m.server.p99),
            m.server.errors,
            m.server.requests,
            m.bare.per_second,
            ms(m.bare.p50),
            m.appliance.per_second / m.bare.per_second,
        );
    }
    println!(
        "\nappliance p50/p99: the load generator's; server p50/p99 and errors: the appliance's own metrics endpoint over the same run (appliance_http_request_duration_seconds and appliance_http_requests_total for the row's route). Own limit: the same action in a fresh boa realm per request inside the bare server's process (no worker, pipes or keyservice; `/action` of benches/bare/server.rs)."
    );
    println!();
    for m in measured {
        print_notes(&m.row, "appliance", &m.appliance);
        print_notes(&m.row, "bare server", &m.bare);
        if let Some(limit) = &m.limit {
            print_notes(&m.row, "own limit", limit);
        }
    }
}

/// Failures, and the share of resumed handshakes where connections were per request.
fn print_notes(row: &Row, side: &str, outcome: &Outcome) {
    let name = format!("{} ({} clients), {side}", row.name, row.clients);
    if outcome.failures > 0 {
        let first = outcome.first_failure.as_deref().unwrap_or_default();
        let first: String = first.chars().take(200).collect();
        println!(
            "- {name}: {} failed requests; first: {first}",
            outcome.failures
        );
    }
    if row.connections == Connections::PerRequest {
        println!(
            "- {name}: {} of {} handshakes resumed",
            outcome.resumed, outcome.handshakes
        );
    }
}

fn print_memory(when: &str, m: &Memory) {
    let mib = |bytes: u64| format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0));
    let other = if m.other > 0 {
        format!(", other descendants {}", mib(m.other))
    } else {
        String::new()
    };
    println!(
        "memory, {when}: appliance {} (process_resident_memory_bytes), keyservice {}, worker-launcher {}, workers {} ({} processes; VmRSS){other}",
        mib(m.appliance),
        mib(m.keyservice),
        mib(m.launcher),
        mib(m.workers),
        m.worker_count,
    );
}

fn print_startup(s: &StartUp) {
    println!(
        "start-up (appliance dev, from spawn): URL printed {}, first answered request (GET /version) {}, first answered hello-world action {} (includes creating its account: {})",
        ms(s.listening),
        ms(s.first_request),
        ms(s.first_action),
        ms(s.new_account),
    );
}

fn print_machine() {
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|rest| rest.split_once(':'))
        .map_or("unknown", |(_, model)| model.trim());
    println!("date: {date}; machine: {cpus} CPUs (nproc), {model}");
}

fn seconds_ms(s: Option<f64>) -> String {
    s.map_or_else(|| "-".to_owned(), |s| format!("{:.2} ms", s * 1e3))
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}
