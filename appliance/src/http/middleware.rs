//! Middleware applied to every request: request and correlation ids, the access log,
//! the request's metrics and trace span, the request deadline, and the rewriting of any
//! stray non-JSON error into the standard error body.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use tracing::Instrument;

use crate::error::error_response;
use crate::state::AppState;
use crate::telemetry::{self, metrics, traces};

pub const REQUEST_ID: &str = "x-request-id";
pub const CORRELATION_ID: &str = "x-correlation-id";

/// Gives every response a fresh `X-Request-Id` (a client-supplied one is ignored), echoes
/// a non-empty `X-Correlation-Id`, runs the request inside a span carrying both (the
/// root of the request's trace when traces are on) and inside the request scope
/// (`telemetry`), enforces the request deadline, logs one access line, and counts the
/// request by its route template and status. Headers (which carry credentials) are
/// never logged.
pub async fn request_context(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let request_id: Arc<str> = Arc::from(uuid::Uuid::new_v4().to_string());
    telemetry::in_request(
        Arc::clone(&request_id),
        handle(state, request_id, req, next),
    )
    .await
}

async fn handle(state: AppState, request_id: Arc<str>, req: Request, next: Next) -> Response {
    let correlation = req
        .headers()
        .get(CORRELATION_ID)
        .filter(|v| !v.as_bytes().iter().all(u8::is_ascii_whitespace))
        .cloned();
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    // The route template (bounded), never the path (which a caller chooses).
    let route = req.extensions().get::<MatchedPath>().cloned();
    let route = route.as_ref().map(MatchedPath::as_str);
    let span = tracing::info_span!(
        "request",
        id = %request_id,
        %method,
        %path,
        otel.name = tracing::field::Empty,
        otel.kind = tracing::field::Empty,
    );
    traces::describe_request(
        &span,
        &request_id,
        method.as_str(),
        route.unwrap_or(metrics::UNMATCHED_ROUTE),
    );
    let started = Instant::now();
    let _in_flight = state.metrics.request_in_flight();
    let deadline = Duration::from_millis(state.config.http.request_timeout_ms);

    let mut response =
        match tokio::time::timeout(deadline, next.run(req).instrument(span.clone())).await {
            Ok(response) => response,
            Err(_) => error_response(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the request did not complete within {} ms",
                    deadline.as_millis()
                ),
            ),
        };
    let status = response.status();
    state
        .metrics
        .observe_request(route, &method, status.as_u16(), started.elapsed());
    if let Some(cents) = telemetry::billed_cents() {
        if status.is_success() {
            state
                .metrics
                .charged(metrics::BillingKind::ManagementWrite, cents);
        } else if status == StatusCode::PAYMENT_REQUIRED {
            state
                .metrics
                .payment_required(metrics::BillingKind::ManagementWrite);
        }
    }
    traces::describe_response(&span, status.as_u16());

    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        headers.insert(REQUEST_ID, value);
    }
    if let Some(value) = correlation {
        headers.insert(CORRELATION_ID, value);
    }
    span.in_scope(|| {
        tracing::info!(
            status = response.status().as_u16(),
            elapsed_us = started.elapsed().as_micros() as u64,
            "served"
        );
    });
    response
}

/// Replaces any error response that is not already JSON (from routing, a library
/// layer, a panic) with the standard body for its status.
pub async fn normalize_errors(req: Request, next: Next) -> Response {
    let response = next.run(req).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        return response;
    }
    let description = match status {
        StatusCode::NOT_FOUND => "no such path".to_owned(),
        StatusCode::METHOD_NOT_ALLOWED => "this path does not accept that method".to_owned(),
        StatusCode::PAYLOAD_TOO_LARGE => "the request body is too large".to_owned(),
        other => other.canonical_reason().unwrap_or("error").to_lowercase(),
    };
    let allow = response.headers().get(header::ALLOW).cloned();
    let mut out = error_response(status, description);
    if let Some(allow) = allow {
        out.headers_mut().insert(header::ALLOW, allow);
    }
    out
}

/// The response for a panic inside a handler: a 500, never a dropped connection.
pub fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response<Body> {
    tracing::error!("a handler panicked");
    error_response(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal error; the server logged the details under this request's X-Request-Id",
    )
    .into_response()
}
