//! Telemetry's sections of the configuration: `[log]`, `[metrics]` (the Prometheus
//! endpoint) and `[traces]` (the OTLP exporter). Read by `crate::telemetry`.

use std::net::SocketAddr;

use appliance_domain::settings::{InvalidSetting, SecretString};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// A `tracing` filter, e.g. `info` or `appliance=debug,info`. `RUST_LOG` wins if set.
    pub filter: String,
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            filter: "info".into(),
            format: LogFormat::Text,
        }
    }
}

/// The Prometheus metrics endpoint (`docs/operators.md`, "Metrics"): `GET /metrics` in
/// the text exposition format, plain HTTP on a listener of its own, never on the API's
/// TLS port and never in the OpenAPI document. Loopback by default; any other address
/// is refused unless `bearer_token` is set, and then every scrape must present it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// Serve the endpoint (the counters are kept either way; they cost next to nothing).
    pub enabled: bool,
    /// Where it listens. A non-loopback address needs `bearer_token`.
    pub listen: SocketAddr,
    /// A token every scrape must send as `Authorization: Bearer <token>`, at least 32
    /// characters; required when `listen` is not a loopback address. Set it from the
    /// encrypted environment (`APPLIANCE_METRICS__BEARER_TOKEN`), not in the measured
    /// file. Never logged or shown.
    pub bearer_token: Option<SecretString>,
}

/// Shortest metrics bearer token accepted.
pub const MIN_METRICS_TOKEN_CHARS: usize = 32;

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: SocketAddr::from(([127, 0, 0, 1], 9464)),
            bearer_token: None,
        }
    }
}

impl MetricsConfig {
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if let Some(token) = &self.bearer_token
            && token.expose().chars().count() < MIN_METRICS_TOKEN_CHARS
        {
            return Err(InvalidSetting(format!(
                "metrics.bearer_token must be at least {MIN_METRICS_TOKEN_CHARS} characters"
            )));
        }
        let loopback = self.listen.ip().to_canonical().is_loopback();
        if self.enabled && !loopback && self.bearer_token.is_none() {
            return Err(InvalidSetting(format!(
                "metrics.listen = {} is not a loopback address: set metrics.bearer_token (APPLIANCE_METRICS__BEARER_TOKEN in the encrypted environment), which every scrape must then present, or listen on 127.0.0.1",
                self.listen
            )));
        }
        Ok(())
    }
}

/// OpenTelemetry traces (`docs/operators.md`, "Traces"): one span per request with
/// children for authorization, store transactions, the worker run and keyservice
/// calls, exported over OTLP/HTTP (protobuf) to a collector. Off unless `endpoint` is
/// set. The export runs on a thread of its own from a bounded queue: a slow or dead
/// collector loses spans, never memory or request time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TracesConfig {
    /// The collector's OTLP/HTTP base URL (`http://127.0.0.1:4318`); spans are POSTed
    /// to `<endpoint>/v1/traces` (an endpoint that already ends so is used as it is).
    /// Unset: no traces, and nothing of the exporter runs.
    pub endpoint: Option<String>,
    /// The `service.name` resource attribute of every span.
    pub service_name: String,
    /// Share of requests traced, 0 to 1 (decided at random per request).
    pub sample_ratio: f64,
    /// Time limit of one export, retries included.
    pub export_timeout_ms: u64,
    /// Finished spans held for export; beyond it new spans are dropped.
    pub max_queue_spans: usize,
    /// Spans sent in one export request.
    pub max_batch_spans: usize,
    /// Longest a finished span waits before it is sent.
    pub batch_delay_ms: u64,
}

impl Default for TracesConfig {
    fn default() -> Self {
        Self {
            endpoint: None,
            service_name: "appliance".into(),
            sample_ratio: 1.0,
            export_timeout_ms: 10_000,
            max_queue_spans: 2048,
            max_batch_spans: 512,
            batch_delay_ms: 5_000,
        }
    }
}

/// Most spans `traces.max_queue_spans` may hold (a bound on the exporter's memory).
pub const MAX_TRACE_QUEUE_SPANS: usize = 65_536;

impl TracesConfig {
    /// The URL spans are POSTed to, when traces are on.
    pub fn traces_url(&self) -> Option<String> {
        let endpoint = self.endpoint.as_deref()?.trim_end_matches('/');
        Some(if endpoint.ends_with("/v1/traces") {
            endpoint.to_owned()
        } else {
            format!("{endpoint}/v1/traces")
        })
    }

    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if let Some(url) = self.traces_url() {
            let uri = url.parse::<http::Uri>().ok();
            let usable = uri.as_ref().is_some_and(|u| {
                matches!(u.scheme_str(), Some("http" | "https")) && u.authority().is_some()
            });
            if !usable {
                return Err(InvalidSetting::new(
                    "traces.endpoint must be an http or https URL (the collector's OTLP/HTTP endpoint, e.g. http://127.0.0.1:4318)",
                ));
            }
        }
        if !(self.sample_ratio.is_finite() && (0.0..=1.0).contains(&self.sample_ratio)) {
            return Err(InvalidSetting::new(
                "traces.sample_ratio must be between 0 and 1",
            ));
        }
        if self.max_queue_spans == 0
            || self.max_queue_spans > MAX_TRACE_QUEUE_SPANS
            || self.max_batch_spans == 0
            || self.max_batch_spans > self.max_queue_spans
        {
            return Err(InvalidSetting(format!(
                "traces.max_queue_spans must be 1 to {MAX_TRACE_QUEUE_SPANS}, and traces.max_batch_spans 1 to traces.max_queue_spans"
            )));
        }
        if self.export_timeout_ms == 0 || self.batch_delay_ms == 0 {
            return Err(InvalidSetting::new(
                "traces.export_timeout_ms and traces.batch_delay_ms must be positive",
            ));
        }
        Ok(())
    }
}
