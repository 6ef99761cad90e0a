//! Every metric the appliance exports, in one registry, and the calls the code records
//! them through.
//!
//! Names follow the Prometheus conventions: the `appliance_` prefix (the process
//! metrics keep their standard `process_` names), the unit in the name (`_seconds`,
//! `_bytes`, `_cents`, `_blocks`), `_total` on counters (added by the encoder). Every
//! label has a bounded set of values fixed by the code: a route template (never a
//! path), a status code, an operation, an outcome, a reason. No label ever carries an
//! account, a key, a wallet, a CID or anything else a caller chooses.
//!
//! Most metrics are recorded where the event happens (a counter or histogram update is
//! an atomic or a short lock). Gauges that describe state (the worker pool, the outbox,
//! the certificate, the process) are read when scraped (`crate::metrics_listener`).
//!
//! One registry per appliance, made by the composition root (`crate::startup`) and
//! handed in: to the state handlers reach (`AppState::metrics`), the accept loop, the
//! keyservice client, the executor, the trace exporter, and to the lower crates through
//! the telemetry traits they define (`StoreTelemetry`, `ChainTelemetry`,
//! `PoolTelemetry`, implemented in `crate::telemetry`). Nothing reaches it through a
//! global, so two appliances in one process (tests) never share counters.

use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

/// Bucket bounds, in seconds, of every latency histogram: 100 µs to 60 s in 1-2-5 steps,
/// so a quantile from them is within a factor of about two (closer by interpolation).
pub const LATENCY_BUCKETS: [f64; 18] = [
    0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0,
    10.0, 30.0, 60.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// The route label of a request that matched no route (any unknown path): one value,
/// whatever the path was.
pub const UNMATCHED_ROUTE: &str = "unmatched";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    /// The matched route template (`/core/v1/list_groups`), or [`UNMATCHED_ROUTE`].
    route: String,
    method: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabel {
    source: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassLabel {
    class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KeyserviceLabels {
    op: &'static str,
    result: &'static str,
}

/// What a billing counter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BillingKind {
    /// A billed management write (`Billed` handlers).
    ManagementWrite,
    /// An action's run time.
    Action,
}

impl BillingKind {
    fn label(self) -> KindLabel {
        KindLabel {
            kind: match self {
                Self::ManagementWrite => "management_write",
                Self::Action => "action",
            },
        }
    }
}

/// The worker pool as it is at one moment (read when scraped).
pub use appliance_execution::pool::PoolStats;

/// The chain outbox as it is at one moment (read when scraped).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboxGauges {
    pub pending: u64,
    pub sent: u64,
    pub failed: u64,
    /// Age of the oldest entry not yet on chain (pending or sent), in seconds; 0 when
    /// there is none.
    pub lag_seconds: u64,
}

/// A gauge incremented while this lives.
pub struct GaugeGuard(Gauge);

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The registry and every metric in it.
pub struct Metrics {
    registry: Registry,

    http_requests: Family<HttpLabels, Counter>,
    http_duration: Family<HttpLabels, Histogram, fn() -> Histogram>,
    http_in_flight: Gauge,
    connections_open: Gauge,
    connections_refused: Family<ReasonLabel, Counter>,
    tls_handshakes: Family<KindLabel, Counter>,
    tls_handshake_failures: Family<ReasonLabel, Counter>,
    rate_limited: Family<ClassLabel, Counter>,

    pool_size: Gauge,
    pool_idle: Gauge,
    pool_busy: Gauge,
    pool_queued: Gauge,
    workers_started: Counter,
    worker_start_failures: Counter,
    workers_retired: Family<ReasonLabel, Counter>,
    actions: Family<OutcomeLabel, Counter>,
    /// Code refused because it did not hash to the CID it would run as, by source.
    action_code_refused: Family<SourceLabel, Counter>,
    action_run: Histogram,
    action_queue_wait: Histogram,

    keyservice_duration: Family<KeyserviceLabels, Histogram, fn() -> Histogram>,
    keyservice_up: Gauge,

    store_duration: Family<KindLabel, Histogram, fn() -> Histogram>,
    store_refused_rows: Gauge,
    store_rollbacks: Gauge,
    store_foreign_objects: Gauge,
    store_write_batches: Gauge,
    store_writes: Gauge,
    store_write_round_trips: Gauge,

    outbox_entries: Family<StateLabel, Gauge>,
    mirror_lag_seconds: Gauge,
    chain_head_block: Gauge,
    chain_indexed_block: Gauge,
    indexer_lag_blocks: Gauge,

    certificate_expiry: Gauge,

    billing_charges: Family<KindLabel, Counter>,
    billing_charged_cents: Family<KindLabel, Counter>,
    payment_required: Family<KindLabel, Counter>,

    trace_exports: Family<OutcomeLabel, Counter>,
}

impl Metrics {
    /// A fresh registry with every metric at zero. The composition root
    /// (`crate::startup`) makes one per appliance and hands it to everything that
    /// records.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(ProcessCollector::new()));
        let metrics = Self {
            registry: Registry::default(),
            http_requests: Family::default(),
            http_duration: Family::new_with_constructor(latency_histogram),
            http_in_flight: Gauge::default(),
            connections_open: Gauge::default(),
            connections_refused: Family::default(),
            tls_handshakes: Family::default(),
            tls_handshake_failures: Family::default(),
            rate_limited: Family::default(),
            pool_size: Gauge::default(),
            pool_idle: Gauge::default(),
            pool_busy: Gauge::default(),
            pool_queued: Gauge::default(),
            workers_started: Counter::default(),
            worker_start_failures: Counter::default(),
            workers_retired: Family::default(),
            actions: Family::default(),
            action_code_refused: Family::default(),
            action_run: latency_histogram(),
            action_queue_wait: latency_histogram(),
            keyservice_duration: Family::new_with_constructor(latency_histogram),
            keyservice_up: Gauge::default(),
            store_duration: Family::new_with_constructor(latency_histogram),
            store_refused_rows: Gauge::default(),
            store_rollbacks: Gauge::default(),
            store_foreign_objects: Gauge::default(),
            store_write_batches: Gauge::default(),
            store_writes: Gauge::default(),
            store_write_round_trips: Gauge::default(),
            outbox_entries: Family::default(),
            mirror_lag_seconds: Gauge::default(),
            chain_head_block: Gauge::default(),
            chain_indexed_block: Gauge::default(),
            indexer_lag_blocks: Gauge::default(),
            certificate_expiry: Gauge::default(),
            billing_charges: Family::default(),
            billing_charged_cents: Family::default(),
            payment_required: Family::default(),
            trace_exports: Family::default(),
        };
        let app = registry.sub_registry_with_prefix("appliance");
        app.register(
            "build",
            "The running build (value 1)",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        metrics.register_http(app);
        metrics.register_workers(app);
        metrics.register_dependencies(app);
        metrics.register_money(app);
        Self {
            registry,
            ..metrics
        }
    }

    fn register_http(&self, r: &mut Registry) {
        r.register(
            "http_requests",
            "Requests answered by the HTTPS API, by route template, method and status code",
            self.http_requests.clone(),
        );
        r.register(
            "http_request_duration_seconds",
            "Time from a request's head to its response, by route template, method and status code",
            self.http_duration.clone(),
        );
        r.register(
            "http_requests_in_flight",
            "Requests being handled",
            self.http_in_flight.clone(),
        );
        r.register(
            "http_connections_open",
            "TLS connections open (handshaking or established)",
            self.connections_open.clone(),
        );
        r.register(
            "http_connections_refused",
            "Connections closed at accept, by reason (per_ip_limit, proxy_header)",
            self.connections_refused.clone(),
        );
        r.register(
            "tls_handshakes",
            "Completed TLS handshakes, by kind (full, resumed, acme_tls_alpn)",
            self.tls_handshakes.clone(),
        );
        r.register(
            "tls_handshake_failures",
            "TLS handshakes that failed, by reason (error, timeout)",
            self.tls_handshake_failures.clone(),
        );
        r.register(
            "rate_limit_refusals",
            "Requests refused with 429 by the per-IP rate limits, by class",
            self.rate_limited.clone(),
        );
    }

    fn register_workers(&self, r: &mut Registry) {
        r.register(
            "worker_pool_size",
            "Action workers the pool keeps",
            self.pool_size.clone(),
        );
        r.register(
            "worker_pool_idle",
            "Started action workers waiting for a job",
            self.pool_idle.clone(),
        );
        r.register(
            "worker_pool_busy",
            "Actions holding a place in the pool (running or taking a worker)",
            self.pool_busy.clone(),
        );
        r.register(
            "worker_pool_queued",
            "Actions waiting for a place in the pool",
            self.pool_queued.clone(),
        );
        r.register(
            "workers_started",
            "Action workers started",
            self.workers_started.clone(),
        );
        r.register(
            "worker_start_failures",
            "Attempts to start an action worker that failed",
            self.worker_start_failures.clone(),
        );
        r.register(
            "workers_retired",
            "Action workers retired, by reason (max_jobs, failed, heap, broken, timeout, refused, abandoned, evicted, idle)",
            self.workers_retired.clone(),
        );
        r.register(
            "actions",
            "Action requests by outcome: ok, or the code's error kind (exception, timeout, memory, limit), or why it did not run or finish (busy, insufficient_credit, denied, wallet_refused, invalid, unknown_code, gateway, integrity, abandoned, unavailable, error)",
            self.actions.clone(),
        );
        r.register(
            "action_code_refused",
            "Action code refused because it does not hash to the CID it would run as, by where it came from (store, gateway, inline): a store or gateway changed outside the service",
            self.action_code_refused.clone(),
        );
        r.register(
            "action_run_duration_seconds",
            "Time an action ran on its worker (queueing excluded)",
            self.action_run.clone(),
        );
        r.register(
            "action_queue_wait_seconds",
            "Time an action waited for a worker",
            self.action_queue_wait.clone(),
        );
    }

    fn register_dependencies(&self, r: &mut Registry) {
        r.register(
            "keyservice_request_duration_seconds",
            "Round trip of keyservice calls, by operation and result (ok, refused, unavailable, timeout, protocol)",
            self.keyservice_duration.clone(),
        );
        r.register(
            "keyservice_up",
            "1 when keyservice answered its last call, 0 when it could not be reached",
            self.keyservice_up.clone(),
        );
        r.register(
            "store_transaction_duration_seconds",
            "Store transactions, by kind (read; write: from submission to durable commit)",
            self.store_duration.clone(),
        );
        r.register(
            "store_refused_rows",
            "Rows the store refused for a failed integrity check since start (PostgreSQL)",
            self.store_refused_rows.clone(),
        );
        r.register(
            "store_rollbacks",
            "Reads and write batches refused since start because the database showed an older write epoch than this replica had seen (rolled back; PostgreSQL)",
            self.store_rollbacks.clone(),
        );
        r.register(
            "store_foreign_objects",
            "Triggers, rules, functions and event triggers in the database that no migration created, at the last check (PostgreSQL)",
            self.store_foreign_objects.clone(),
        );
        r.register(
            "store_write_batches",
            "Write transactions the store's writer committed since start (each holds one or more writes)",
            self.store_write_batches.clone(),
        );
        r.register(
            "store_writes",
            "Writes in the transactions the store's writer committed since start",
            self.store_writes.clone(),
        );
        r.register(
            "store_write_round_trips",
            "Round trips the store's writer made to PostgreSQL since start, for every batch, committed or not (0 on SQLite)",
            self.store_write_round_trips.clone(),
        );
        r.register(
            "chain_outbox_entries",
            "Chain outbox entries not (yet) on chain, by state (pending, sent, failed)",
            self.outbox_entries.clone(),
        );
        r.register(
            "chain_mirror_lag_seconds",
            "Age of the oldest outbox entry not yet mined (0 when the mirror is caught up)",
            self.mirror_lag_seconds.clone(),
        );
        r.register(
            "chain_head_block",
            "The settlement chain's latest block, as the indexer last saw it",
            self.chain_head_block.clone(),
        );
        r.register(
            "chain_indexed_block",
            "The last block whose AccountConfig events the indexer applied",
            self.chain_indexed_block.clone(),
        );
        r.register(
            "chain_indexer_lag_blocks",
            "Blocks between the chain's head and the last block the indexer applied",
            self.indexer_lag_blocks.clone(),
        );
        r.register(
            "tls_certificate_expiry_timestamp_seconds",
            "When the served certificate expires (Unix time)",
            self.certificate_expiry.clone(),
        );
        r.register(
            "trace_exports",
            "OTLP trace export requests, by outcome (ok, failed)",
            self.trace_exports.clone(),
        );
    }

    fn register_money(&self, r: &mut Registry) {
        r.register(
            "billing_charges",
            "Charges applied, by kind (management_write, action)",
            self.billing_charges.clone(),
        );
        r.register(
            "billing_charged_cents",
            "Cents charged, by kind (management_write, action)",
            self.billing_charged_cents.clone(),
        );
        r.register(
            "billing_payment_required",
            "Calls refused with 402 for too little credit, by kind (management_write, action)",
            self.payment_required.clone(),
        );
    }

    /// The text exposition (OpenMetrics) of every metric.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::with_capacity(16 * 1024);
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }

    // ---- HTTP ---------------------------------------------------------------------

    /// One answered request: `route` is the matched template (`None`: no route matched).
    pub fn observe_request(
        &self,
        route: Option<&str>,
        method: &http::Method,
        status: u16,
        elapsed: Duration,
    ) {
        let labels = HttpLabels {
            route: route.unwrap_or(UNMATCHED_ROUTE).to_owned(),
            method: method_label(method),
            status,
        };
        self.http_requests.get_or_create(&labels).inc();
        self.http_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }

    /// Counts a request in flight until the guard is dropped.
    pub fn request_in_flight(&self) -> GaugeGuard {
        self.http_in_flight.inc();
        GaugeGuard(self.http_in_flight.clone())
    }

    /// Counts an open connection until the guard is dropped.
    pub fn connection_open(&self) -> GaugeGuard {
        self.connections_open.inc();
        GaugeGuard(self.connections_open.clone())
    }

    pub fn connection_refused(&self, reason: &'static str) {
        self.connections_refused
            .get_or_create(&ReasonLabel { reason })
            .inc();
    }

    pub fn tls_handshake(&self, kind: &'static str) {
        self.tls_handshakes.get_or_create(&KindLabel { kind }).inc();
    }

    pub fn tls_handshake_failed(&self, reason: &'static str) {
        self.tls_handshake_failures
            .get_or_create(&ReasonLabel { reason })
            .inc();
    }

    pub fn rate_limited(&self, class: &'static str) {
        self.rate_limited.get_or_create(&ClassLabel { class }).inc();
    }

    // ---- workers and actions ------------------------------------------------------

    pub fn set_pool(&self, stats: PoolStats) {
        self.pool_size.set(gauge(stats.size as u64));
        self.pool_idle.set(gauge(stats.idle as u64));
        self.pool_busy.set(gauge(stats.busy as u64));
        self.pool_queued.set(gauge(stats.queued as u64));
    }

    pub fn worker_started(&self) {
        self.workers_started.inc();
    }

    pub fn worker_start_failed(&self) {
        self.worker_start_failures.inc();
    }

    pub fn worker_retired(&self, reason: &'static str) {
        self.workers_retired
            .get_or_create(&ReasonLabel { reason })
            .inc();
    }

    pub fn action_finished(&self, outcome: &'static str) {
        self.actions.get_or_create(&OutcomeLabel { outcome }).inc();
    }

    /// Code that did not hash to the CID it would run as was refused (`source`: store,
    /// gateway or inline).
    pub fn action_code_refused(&self, source: &'static str) {
        self.action_code_refused
            .get_or_create(&SourceLabel { source })
            .inc();
    }

    pub fn action_ran(&self, run_time: Duration) {
        self.action_run.observe(run_time.as_secs_f64());
    }

    pub fn action_waited(&self, wait: Duration) {
        self.action_queue_wait.observe(wait.as_secs_f64());
    }

    // ---- dependencies -------------------------------------------------------------

    /// One keyservice call: `result` is `ok`, `refused`, `unavailable`, `timeout` or
    /// `protocol`. Whether keyservice is up follows the result.
    pub fn keyservice_call(&self, op: &'static str, result: &'static str, elapsed: Duration) {
        self.keyservice_duration
            .get_or_create(&KeyserviceLabels { op, result })
            .observe(elapsed.as_secs_f64());
        let down = matches!(result, "unavailable" | "timeout");
        self.keyservice_up.set(i64::from(!down));
    }

    /// One store transaction (`read` or `write`).
    pub fn store_transaction(&self, kind: &'static str, elapsed: Duration) {
        self.store_duration
            .get_or_create(&KindLabel { kind })
            .observe(elapsed.as_secs_f64());
    }

    pub fn set_store_refused_rows(&self, rows: u64) {
        self.store_refused_rows.set(gauge(rows));
    }

    /// The store's rollback refusals and foreign database objects (`store::integrity`).
    pub fn set_store_database_checks(&self, rollbacks: u64, foreign_objects: u64) {
        self.store_rollbacks.set(gauge(rollbacks));
        self.store_foreign_objects.set(gauge(foreign_objects));
    }

    /// What the store's writer has done since start (`store::WriteStats`).
    pub fn set_store_writes(&self, batches: u64, writes: u64, round_trips: u64) {
        self.store_write_batches.set(gauge(batches));
        self.store_writes.set(gauge(writes));
        self.store_write_round_trips.set(gauge(round_trips));
    }

    pub fn set_outbox(&self, outbox: OutboxGauges) {
        for (state, n) in [
            ("pending", outbox.pending),
            ("sent", outbox.sent),
            ("failed", outbox.failed),
        ] {
            self.outbox_entries
                .get_or_create(&StateLabel { state })
                .set(gauge(n));
        }
        self.mirror_lag_seconds.set(gauge(outbox.lag_seconds));
    }

    /// The indexer's view: the chain's head and the last block it applied.
    pub fn chain_indexer(&self, head: u64, indexed: u64) {
        self.chain_head_block.set(gauge(head));
        self.chain_indexed_block.set(gauge(indexed));
        self.indexer_lag_blocks
            .set(gauge(head.saturating_sub(indexed)));
    }

    pub fn set_certificate_expiry(&self, unix_seconds: i64) {
        self.certificate_expiry.set(unix_seconds);
    }

    pub fn trace_export(&self, ok: bool) {
        let outcome = if ok { "ok" } else { "failed" };
        self.trace_exports
            .get_or_create(&OutcomeLabel { outcome })
            .inc();
    }

    // ---- money ----------------------------------------------------------------------

    /// A charge of `cents` applied (zero-cent charges, billing off, are not counted).
    pub fn charged(&self, kind: BillingKind, cents: u64) {
        if cents == 0 {
            return;
        }
        self.billing_charges.get_or_create(&kind.label()).inc();
        self.billing_charged_cents
            .get_or_create(&kind.label())
            .inc_by(cents);
    }

    /// A call refused with 402.
    pub fn payment_required(&self, kind: BillingKind) {
        self.payment_required.get_or_create(&kind.label()).inc();
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn gauge(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A bounded method label: the methods the API has, anything else as `other`.
fn method_label(method: &http::Method) -> &'static str {
    match *method {
        http::Method::GET => "GET",
        http::Method::POST => "POST",
        http::Method::PUT => "PUT",
        http::Method::DELETE => "DELETE",
        http::Method::PATCH => "PATCH",
        http::Method::HEAD => "HEAD",
        http::Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// The standard process metrics, read from `/proc/self` when scraped (Linux; on other
/// systems, or when `/proc` is not readable, they are left out).
#[derive(Debug)]
struct ProcessCollector {
    /// Fallback start time: when the registry was made (early in `main`).
    created: i64,
}

impl ProcessCollector {
    fn new() -> Self {
        Self {
            created: crate::store::now_unix(),
        }
    }
}

/// What `/proc/self` tells about this process.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ProcessStats {
    pub resident_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
    pub cpu_seconds: Option<f64>,
    pub start_time: Option<i64>,
}

/// Clock ticks per second of `/proc/<pid>/stat` times (`USER_HZ`, fixed at 100 by the
/// Linux ABI on every architecture the appliance is built for).
const USER_HZ: f64 = 100.0;

impl ProcessStats {
    /// Reads `/proc/self`.
    pub fn read() -> Self {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let kib = |field: &str| {
            status.lines().find_map(|line| {
                let rest = line.strip_prefix(field)?.strip_prefix(':')?;
                let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
                Some(kib * 1024)
            })
        };
        let open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|dir| dir.count() as u64);
        let max_fds = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|limits| {
                let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
                line["Max open files".len()..]
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            });
        let (cpu_seconds, start_time) = Self::stat_times();
        Self {
            resident_bytes: kib("VmRSS"),
            virtual_bytes: kib("VmSize"),
            open_fds,
            max_fds,
            cpu_seconds,
            start_time,
        }
    }

    /// CPU seconds (user + system) and the start time (Unix seconds) from
    /// `/proc/self/stat` and the boot time in `/proc/stat`.
    fn stat_times() -> (Option<f64>, Option<i64>) {
        let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
            return (None, None);
        };
        // The command name (field 2) is in parentheses and may contain spaces: count
        // the fields after its closing parenthesis (field 3 is the first of them).
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            return (None, None);
        };
        let fields: Vec<&str> = after.split_whitespace().collect();
        let field = |n: usize| -> Option<f64> { fields.get(n - 3)?.parse().ok() };
        let cpu = match (field(14), field(15)) {
            (Some(user), Some(system)) => Some((user + system) / USER_HZ),
            _ => None,
        };
        let boot: Option<f64> = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|v| v.trim().parse().ok())
        });
        let start = match (boot, field(22)) {
            (Some(boot), Some(ticks)) => Some((boot + ticks / USER_HZ) as i64),
            _ => None,
        };
        (cpu, start)
    }
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stats = ProcessStats::read();
        let mut emit = |name: &str, help: &str, value: Option<i64>| {
            let Some(value) = value else {
                return Ok(());
            };
            let metric = ConstGauge::new(value);
            metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
        };
        let bytes = |v: Option<u64>| v.map(gauge);
        emit(
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            bytes(stats.resident_bytes),
        )?;
        emit(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes",
            bytes(stats.virtual_bytes),
        )?;
        emit(
            "process_open_fds",
            "Open file descriptors",
            bytes(stats.open_fds),
        )?;
        emit(
            "process_max_fds",
            "Most open file descriptors allowed",
            bytes(stats.max_fds),
        )?;
        emit(
            "process_start_time_seconds",
            "Start time of the process since the Unix epoch, in seconds",
            Some(stats.start_time.unwrap_or(self.created)),
        )?;
        if let Some(cpu) = stats.cpu_seconds {
            let metric = ConstCounter::new(cpu);
            metric.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent, in seconds",
                None,
                metric.metric_type(),
            )?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of the sample `name{labels}` in `text`, where `labels` is the exact
    /// label text between the braces (empty: none).
    fn sample(text: &str, name: &str, labels: &str) -> Option<f64> {
        let key = if labels.is_empty() {
            name.to_owned()
        } else {
            format!("{name}{{{labels}}}")
        };
        text.lines().find_map(|line| {
            let (k, v) = line.rsplit_once(' ')?;
            (k == key).then(|| v.parse().ok()).flatten()
        })
    }

    #[test]
    fn a_request_moves_its_counter_and_histogram_by_route_and_status() {
        let m = Metrics::new();
        m.observe_request(
            Some("/core/v1/list_groups"),
            &http::Method::GET,
            200,
            Duration::from_micros(300),
        );
        m.observe_request(None, &http::Method::GET, 404, Duration::from_millis(3));
        let text = m.encode().unwrap();
        let ok = r#"route="/core/v1/list_groups",method="GET",status="200""#;
        assert_eq!(
            sample(&text, "appliance_http_requests_total", ok),
            Some(1.0)
        );
        assert_eq!(
            sample(&text, "appliance_http_request_duration_seconds_count", ok),
            Some(1.0)
        );
        // 300 µs falls in the 0.0005 bucket, not the 0.0002 one.
        let le = |b: &str| format!("le=\"{b}\",{ok}");
        assert_eq!(
            sample(
                &text,
                "appliance_http_request_duration_seconds_bucket",
                &le("0.0002")
            ),
            Some(0.0)
        );
        assert_eq!(
            sample(
                &text,
                "appliance_http_request_duration_seconds_bucket",
                &le("0.0005")
            ),
            Some(1.0)
        );
        let unknown = r#"route="unmatched",method="GET",status="404""#;
        assert_eq!(
            sample(&text, "appliance_http_requests_total", unknown),
            Some(1.0)
        );
    }

    /// Metrics with every family holding a sample (a family shows only once it has one).
    fn every_family_touched() -> Metrics {
        let m = Metrics::new();
        let d = Duration::from_millis(1);
        m.observe_request(None, &http::Method::POST, 500, d);
        drop(m.request_in_flight());
        drop(m.connection_open());
        m.connection_refused("per_ip_limit");
        m.tls_handshake("full");
        m.tls_handshake_failed("timeout");
        m.rate_limited("public");
        m.set_pool(PoolStats::default());
        m.worker_started();
        m.worker_start_failed();
        m.worker_retired("max_jobs");
        m.action_finished("ok");
        m.action_code_refused("store");
        m.action_ran(d);
        m.action_waited(d);
        m.keyservice_call("status", "ok", d);
        m.store_transaction("read", d);
        m.set_store_refused_rows(0);
        m.set_store_database_checks(0, 0);
        m.set_store_writes(0, 0, 0);
        m.set_outbox(OutboxGauges::default());
        m.chain_indexer(2, 1);
        m.set_certificate_expiry(1);
        m.trace_export(true);
        m.charged(BillingKind::Action, 1);
        m.payment_required(BillingKind::Action);
        m
    }

    #[test]
    fn names_follow_the_prometheus_conventions() {
        let text = every_family_touched().encode().unwrap();
        let mut families = 0;
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("# TYPE ") else {
                continue;
            };
            families += 1;
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(
                name.starts_with("appliance_") || name.starts_with("process_"),
                "{name}: no namespace"
            );
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{name}: not snake_case"
            );
            assert!(!name.ends_with("_total"), "{name}: the encoder adds _total");
            if kind == "histogram" {
                assert!(name.ends_with("_seconds"), "{name}: a histogram of seconds");
            }
            if name.contains("duration") || name.contains("lag_seconds") {
                assert!(name.ends_with("_seconds"), "{name}: unit in the name");
            }
        }
        assert!(families >= 39, "{families} families");
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn process_metrics_are_read_from_proc() {
        let stats = ProcessStats::read();
        assert!(stats.resident_bytes.unwrap() > 1024 * 1024, "{stats:?}");
        assert!(stats.open_fds.unwrap() >= 3, "{stats:?}");
        assert!(stats.cpu_seconds.unwrap() >= 0.0, "{stats:?}");
        let start = stats.start_time.unwrap();
        assert!(
            (crate::store::now_unix() - start).abs() < 24 * 3600,
            "{stats:?}"
        );
        let text = Metrics::new().encode().unwrap();
        assert!(sample(&text, "process_resident_memory_bytes", "").unwrap() > 0.0);
        assert!(sample(&text, "process_cpu_seconds_total", "").is_some());
    }

    /// The sample names a scrape of `text` can have, from its `# TYPE` lines.
    fn sample_names(text: &str) -> std::collections::BTreeSet<String> {
        let mut names = std::collections::BTreeSet::new();
        for line in text.lines() {
            let Some((name, kind)) = line.strip_prefix("# TYPE ").and_then(|r| r.split_once(' '))
            else {
                continue;
            };
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_count", "_sum"],
                "info" => &["_info"],
                _ => &[""],
            };
            names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
        }
        names
    }

    /// The metric names (`appliance_…`, `process_…`) a PromQL expression uses.
    fn metrics_in(expr: &str) -> Vec<String> {
        expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .filter(|w| w.starts_with("appliance_") || w.starts_with("process_"))
            .map(str::to_owned)
            .collect()
    }

    fn strings_under(value: &serde_json::Value, keys: &[&str], out: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    match v {
                        serde_json::Value::String(s) if keys.contains(&k.as_str()) => {
                            out.push(s.clone());
                        }
                        other => strings_under(other, keys, out),
                    }
                }
            }
            serde_json::Value::Array(items) => {
                items.iter().for_each(|v| strings_under(v, keys, out));
            }
            _ => {}
        }
    }

    #[test]
    fn the_dashboard_and_the_alerts_query_only_exported_metrics() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap();
        let text = every_family_touched().encode().unwrap();
        let exported = sample_names(&text);
        let dashboard: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(root.join("docs/grafana/appliance.json")).unwrap(),
        )
        .expect("the dashboard is JSON");
        let mut queries = Vec::new();
        strings_under(&dashboard, &["expr", "definition"], &mut queries);
        assert!(queries.len() > 30, "{} queries", queries.len());
        let mut used = std::collections::BTreeSet::new();
        for query in &queries {
            for name in metrics_in(query) {
                assert!(
                    exported.contains(&name),
                    "the dashboard queries {name}: not exported"
                );
                used.insert(name);
            }
        }
        // Every appliance family has a panel.
        for line in text.lines() {
            let Some(family) = line
                .strip_prefix("# TYPE appliance_")
                .and_then(|r| r.split(' ').next())
            else {
                continue;
            };
            let family = format!("appliance_{family}");
            assert!(
                used.iter().any(|u| u.starts_with(&family)),
                "no panel shows {family}"
            );
        }
        // The alerts in docs/operators.md too.
        let operators = std::fs::read_to_string(root.join("docs/operators.md")).unwrap();
        let mut rules = 0;
        for block in operators.split("```promql").skip(1) {
            let block = block.split("```").next().unwrap_or_default();
            for line in block.lines().filter(|l| !l.trim_start().starts_with('#')) {
                let names = metrics_in(line);
                rules += usize::from(!names.is_empty());
                for name in names {
                    assert!(
                        exported.contains(&name),
                        "an alert queries {name}: not exported"
                    );
                }
            }
        }
        assert!(rules >= 8, "{rules} alert expressions in promql blocks");
    }

    #[test]
    fn zero_cent_charges_are_not_counted() {
        let m = Metrics::new();
        m.charged(BillingKind::ManagementWrite, 0);
        m.charged(BillingKind::ManagementWrite, 3);
        m.payment_required(BillingKind::Action);
        let text = m.encode().unwrap();
        let write = r#"kind="management_write""#;
        assert_eq!(
            sample(&text, "appliance_billing_charges_total", write),
            Some(1.0)
        );
        assert_eq!(
            sample(&text, "appliance_billing_charged_cents_total", write),
            Some(3.0)
        );
        assert_eq!(
            sample(
                &text,
                "appliance_billing_payment_required_total",
                r#"kind="action""#
            ),
            Some(1.0)
        );
    }
}
