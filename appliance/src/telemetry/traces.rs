//! The process's `tracing` subscriber: the log lines, and, when `traces.endpoint` is
//! set, OpenTelemetry spans exported over OTLP/HTTP (protobuf).
//!
//! * Without an endpoint the subscriber is exactly the log formatter with its filter:
//!   nothing of OpenTelemetry is built, and the child spans (`debug` level) are disabled
//!   at their call sites, which costs one cached check each.
//! * With one, a second layer turns the appliance's spans (its own targets, `debug` and
//!   above; never events, so no log line goes into a trace) into OpenTelemetry spans.
//!   Finished spans go to the SDK's batch processor: a bounded queue
//!   (`traces.max_queue_spans`; a full queue drops new spans, so a slow or dead
//!   collector costs spans, never memory or request time) emptied by a thread of its own
//!   every `traces.batch_delay_ms` or `traces.max_batch_spans` spans.
//! * The export request is sent by the appliance's own reqwest client (rustls with the
//!   ring provider, the public web roots for https), on the tokio runtime, within
//!   `traces.export_timeout_ms` (retries included). No other HTTP client or TLS stack is
//!   built for it.
//!
//! Incoming trace context (`traceparent`) is not honoured: callers are not trusted to
//! choose what is sampled. Each request starts a trace of its own, sampled at
//! `traces.sample_ratio`.

use std::future::Future;
use std::io::Write as _;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracerProvider,
};
use tracing::Level;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::config::{LogConfig, LogFormat, TracesConfig};
use crate::log_output::BatchedLog;

use super::metrics::Metrics;

/// Largest answer read from the collector (it says only whether it took the spans).
const MAX_COLLECTOR_ANSWER: usize = 64 * 1024;

/// Whether spans are exported (set once, at start).
static ENABLED: AtomicBool = AtomicBool::new(false);

/// True when traces are exported.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    #[error("cannot set up the trace exporter: {0}")]
    Exporter(String),
    #[error("cannot install the log subscriber: {0}")]
    Subscriber(String),
}

/// Keeps the trace pipeline; dropping it sends the spans still queued (within the
/// export timeout) and stops the export thread.
pub struct TracesGuard {
    provider: SdkTracerProvider,
}

impl Drop for TracesGuard {
    fn drop(&mut self) {
        if let Err(err) = self.provider.shutdown() {
            // The log may already be closing: say it on stderr directly.
            let _ = writeln!(
                std::io::stderr(),
                "appliance: trace export did not finish: {err}"
            );
        }
        ENABLED.store(false, Ordering::Relaxed);
    }
}

/// Installs the process's subscriber: log lines to `writer` as `log` says (`RUST_LOG`
/// wins over `log.filter`), plus the OTLP pipeline when `traces.endpoint` is set (then
/// the guard returned must be kept until the end). Must run inside the tokio runtime
/// when traces are on (the exporter sends through it).
pub fn install(
    log: &LogConfig,
    traces: &TracesConfig,
    writer: BatchedLog,
    metrics: Arc<Metrics>,
) -> Result<Option<TracesGuard>, TelemetryError> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&log.filter));
    // Colour codes only for a terminal, not in log files and collectors.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let subscriber_err =
        |e: tracing_subscriber::util::TryInitError| TelemetryError::Subscriber(e.to_string());
    let Some(url) = traces.traces_url() else {
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(writer)
            .with_ansi(ansi);
        match log.format {
            LogFormat::Json => builder.json().finish().try_init(),
            LogFormat::Text => builder.finish().try_init(),
        }
        .map_err(subscriber_err)?;
        return Ok(None);
    };

    let provider = provider(traces, &url, metrics)?;
    let tracer = provider.tracer("appliance");
    let otel = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_tracked_inactivity(false)
        .with_threads(false)
        .with_location(false)
        .with_context_activation(false)
        .with_filter(filter_fn(|meta| {
            let ours = meta.target().starts_with("appliance")
                || meta.target().starts_with("keyservice_api");
            meta.is_span() && ours && *meta.level() != Level::TRACE
        }));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(ansi);
    let fmt = match log.format {
        LogFormat::Json => fmt.json().with_filter(filter).boxed(),
        LogFormat::Text => fmt.with_filter(filter).boxed(),
    };
    tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .try_init()
        .map_err(subscriber_err)?;
    ENABLED.store(true, Ordering::Relaxed);
    tracing::info!(
        collector = %collector_host(&url),
        sample_ratio = traces.sample_ratio,
        "exporting traces over OTLP/HTTP"
    );
    Ok(Some(TracesGuard { provider }))
}

/// The collector's scheme, host and port, for the log (an endpoint URL may carry
/// credentials in its user part or query).
fn collector_host(url: &str) -> String {
    url.parse::<http::Uri>()
        .ok()
        .and_then(|u| Some(format!("{}://{}", u.scheme_str()?, u.authority()?.host())))
        .unwrap_or_else(|| "?".to_owned())
}

fn provider(
    traces: &TracesConfig,
    url: &str,
    metrics: Arc<Metrics>,
) -> Result<SdkTracerProvider, TelemetryError> {
    let err = |e: &dyn std::fmt::Display| TelemetryError::Exporter(e.to_string());
    let timeout = Duration::from_millis(traces.export_timeout_ms);
    let runtime = tokio::runtime::Handle::try_current().map_err(|e| err(&e))?;
    let client = reqwest::Client::builder()
        .use_rustls_tls()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .user_agent(concat!("appliance/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| err(&e))?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url)
        .with_timeout(timeout)
        .with_http_client(ExportClient {
            client,
            runtime,
            metrics,
        })
        .build()
        .map_err(|e| err(&e))?;
    let batch = BatchConfigBuilder::default()
        .with_max_queue_size(traces.max_queue_spans)
        .with_max_export_batch_size(traces.max_batch_spans)
        .with_scheduled_delay(Duration::from_millis(traces.batch_delay_ms))
        .build();
    let processor = BatchSpanProcessor::builder(exporter)
        .with_batch_config(batch)
        .build();
    let resource = Resource::builder()
        .with_service_name(traces.service_name.clone())
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    Ok(SdkTracerProvider::builder()
        .with_sampler(Sampler::TraceIdRatioBased(traces.sample_ratio))
        .with_resource(resource)
        .with_span_processor(processor)
        .build())
}

/// Names a request's span for OpenTelemetry, once its route is known: `POST
/// /core/v1/lit_action`, a server span, with the request id, method and route as
/// attributes. Nothing is recorded while traces are off (the log lines stay as they
/// were).
pub fn describe_request(span: &tracing::Span, request_id: &str, method: &str, route: &str) {
    if !enabled() || span.is_disabled() {
        return;
    }
    span.record("otel.name", format!("{method} {route}"));
    span.record("otel.kind", "server");
    span.set_attribute("request_id", request_id.to_owned());
    span.set_attribute("http.request.method", method.to_owned());
    span.set_attribute("http.route", route.to_owned());
}

/// Adds the response's status to a request's span (an error status for a 5xx).
pub fn describe_response(span: &tracing::Span, status: u16) {
    if !enabled() || span.is_disabled() {
        return;
    }
    span.set_attribute("http.response.status_code", i64::from(status));
    if status >= 500 {
        span.set_status(opentelemetry::trace::Status::error(format!(
            "answered {status}"
        )));
    }
}

/// The exporter's HTTP client: the request is sent by reqwest on the tokio runtime
/// (the batch processor's own thread only waits for it), and the answer is read up to
/// [`MAX_COLLECTOR_ANSWER`] bytes.
struct ExportClient {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for ExportClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportClient").finish_non_exhaustive()
    }
}

type Exported = Result<http::Response<Bytes>, HttpError>;

impl HttpClient for ExportClient {
    fn send_bytes<'life0, 'async_trait>(
        &'life0 self,
        request: http::Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Exported> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let client = self.client.clone();
        let metrics = Arc::clone(&self.metrics);
        let sent = self.runtime.spawn(send(client, request));
        Box::pin(async move {
            let answer = match sent.await {
                Ok(answer) => answer,
                Err(err) => Err(Box::new(err) as HttpError),
            };
            let ok = answer.as_ref().is_ok_and(|r| r.status().is_success());
            metrics.trace_export(ok);
            answer
        })
    }
}

async fn send(client: reqwest::Client, request: http::Request<Bytes>) -> Exported {
    let request = reqwest::Request::try_from(request)?;
    let mut response = client.execute(request).await?;
    let mut answer = http::Response::builder().status(response.status());
    for (name, value) in response.headers() {
        answer = answer.header(name, value);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = MAX_COLLECTOR_ANSWER.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if room <= chunk.len() {
            break;
        }
    }
    Ok(answer.body(Bytes::from(body))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_collector_is_logged_without_credentials() {
        assert_eq!(
            collector_host("https://user:secret@otel.example:4318/v1/traces?key=x"),
            "https://otel.example"
        );
        assert_eq!(
            collector_host("http://127.0.0.1:4318/v1/traces"),
            "http://127.0.0.1"
        );
    }
}
