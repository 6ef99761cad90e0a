//! The metrics listener: `GET /metrics` (or `HEAD`) in the Prometheus text format
//! (OpenMetrics), plain HTTP/1.1 on `metrics.listen`, an address of its own: never the
//! API's TLS port, never in the OpenAPI document. Any other path is 404, any other
//! method 405. With `metrics.bearer_token` set (required off loopback) a scrape without
//! `Authorization: Bearer <token>` gets 401.
//!
//! What a client can hold here is bounded: [`MAX_CONNECTIONS`] connections at once
//! (more are closed at accept), a request head within [`HEAD_TIMEOUT`], a connection at
//! most [`CONNECTION_LIFETIME`]; request bodies are never read; the answer's size is
//! bounded by the label sets, which are fixed by the code.
//!
//! Before answering, a scrape reads the gauges that describe state: the worker pool,
//! the outbox (one indexed query), the served certificate's expiry, the store's refused
//! rows, and whether keyservice answers (a `Status` call). Concurrent scrapes share
//! one reading, and readings are at most one per [`MIN_REFRESH`].

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::config::SecretString;
use crate::state::AppState;
use crate::telemetry::metrics::OutboxGauges;
use crate::tls::CertResolver;

/// Connections served at once; more are closed at accept.
pub const MAX_CONNECTIONS: usize = 16;
/// Time allowed for a request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest life of one connection (a scraper reconnects).
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(300);
/// Readings of the state gauges are at most this frequent.
pub const MIN_REFRESH: Duration = Duration::from_secs(1);
/// Time allowed for each state reading (keyservice, store) during a scrape.
const READING_TIMEOUT: Duration = Duration::from_secs(2);

/// The content type of the OpenMetrics text format.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What a scrape reads besides the counters.
pub struct Sources {
    pub state: AppState,
    pub certs: Arc<CertResolver>,
}

struct Shared {
    sources: Sources,
    token: Option<SecretString>,
    /// When the state gauges were last read; the lock also makes concurrent scrapes
    /// share one reading.
    refreshed: tokio::sync::Mutex<Option<Instant>>,
}

/// Serves the metrics endpoint on `listener` until the task is aborted.
pub async fn serve(listener: TcpListener, token: Option<SecretString>, sources: Sources) {
    let shared = Arc::new(Shared {
        sources,
        token,
        refreshed: tokio::sync::Mutex::new(None),
    });
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                tracing::warn!(error = %err, "metrics: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            tracing::debug!(%peer, "metrics: connection refused, {MAX_CONNECTIONS} already open");
            continue;
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |req| {
                let shared = Arc::clone(&shared);
                async move { Ok::<_, Infallible>(answer(&shared, req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .serve_connection(TokioIo::new(tcp), service);
            if let Ok(Err(err)) = tokio::time::timeout(CONNECTION_LIFETIME, conn).await {
                tracing::debug!(%peer, error = %err, "metrics: connection ended with an error");
            }
        });
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

async fn answer(shared: &Shared, req: Request<Incoming>) -> Response<Full<Bytes>> {
    if req.uri().path() != "/metrics" {
        return plain(
            StatusCode::NOT_FOUND,
            "not found: the metrics are at /metrics\n",
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "GET /metrics\n");
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    if let Some(token) = &shared.token
        && !authorized(&req, token)
    {
        let mut response = plain(
            StatusCode::UNAUTHORIZED,
            "send the metrics token: Authorization: Bearer <token>\n",
        );
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"metrics\""),
        );
        return response;
    }
    // The body is never read.
    let head = req.method() == Method::HEAD;
    drop(req);
    refresh(shared).await;
    let text = match shared.sources.state.metrics.encode() {
        Ok(text) => text,
        Err(_) => {
            return plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the metrics could not be encoded\n",
            );
        }
    };
    let body = if head {
        Bytes::new()
    } else {
        Bytes::from(text)
    };
    let mut response = Response::new(Full::new(body));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}

/// Whether `req` carries `Authorization: Bearer <token>` (compared in constant time).
fn authorized(req: &Request<Incoming>, token: &SecretString) -> bool {
    crate::http::auth::bearer_token(req.headers()).is_some_and(|p| SecretString::new(p) == *token)
}

/// Reads the state gauges, unless another scrape did within [`MIN_REFRESH`].
async fn refresh(shared: &Shared) {
    let mut refreshed = shared.refreshed.lock().await;
    if refreshed.is_some_and(|at| at.elapsed() < MIN_REFRESH) {
        return;
    }
    let state = &shared.sources.state;
    let m = &state.metrics;
    m.set_pool(state.executor.pool_stats());
    if let Some(expiry) = shared
        .sources
        .certs
        .current()
        .and_then(|key| key.cert.first().and_then(|leaf| not_after(leaf)))
    {
        m.set_certificate_expiry(expiry);
    }
    let writes = state.store.write_stats();
    m.set_store_writes(writes.batches, writes.writes, writes.round_trips);
    if let Some(report) = state.store.integrity_report() {
        m.set_store_refused_rows(report.failures());
        m.set_store_database_checks(
            report.rollbacks(),
            report.foreign_objects().map_or(0, |list| list.len() as u64),
        );
    }
    // keyservice_up follows the result (the client reports every call).
    let (_, backlog) = tokio::join!(
        tokio::time::timeout(READING_TIMEOUT, state.keys.check()),
        tokio::time::timeout(READING_TIMEOUT, state.store.outbox_backlog()),
    );
    match backlog {
        Ok(Ok(backlog)) => {
            let lag_seconds = backlog.oldest_unmined_at.map_or(0, |at| {
                u64::try_from(crate::store::now_unix().saturating_sub(at)).unwrap_or(0)
            });
            m.set_outbox(OutboxGauges {
                pending: backlog.pending,
                sent: backlog.sent,
                failed: backlog.failed,
                lag_seconds,
            });
        }
        Ok(Err(err)) => tracing::debug!(error = %err, "metrics: cannot read the outbox"),
        Err(_) => tracing::debug!("metrics: reading the outbox timed out"),
    }
    *refreshed = Some(Instant::now());
}

/// The expiry (Unix seconds) of a DER certificate.
fn not_after(der: &[u8]) -> Option<i64> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    Some(cert.validity().not_after.timestamp())
}

/// The bound address, for the start-up line.
pub fn describe(addr: SocketAddr) -> String {
    format!("http://{addr}/metrics")
}
