//! The HTTP transport: who the caller is (`auth`), what a billed call costs (`billed`),
//! request extractors (`extract`), the middleware every request passes (`middleware`),
//! which web origins may call the API from a browser (`cors`), and [`app`], which wraps
//! the API's routes into the complete service.
//!
//! The routes themselves are the API's (`crate::api::routes`), registered through
//! `utoipa_axum::routes!`, which records each handler's OpenAPI description as it mounts
//! it, so the served `openapi.json` cannot drift from what the router serves. The web
//! dashboard (`dashboard`, at `/dashboard`) is merged beside them and is not in that
//! document.

pub mod auth;
pub mod billed;
pub mod cors;
pub mod dashboard;
pub mod extract;
pub mod middleware;
pub mod rate_limit;

use axum::Router;
use tower_http::catch_panic::CatchPanicLayer;
use utoipa_swagger_ui::SwaggerUi;

use crate::error::ApiError;
use crate::state::AppState;

/// The client of the connection a request came on, put into every request's
/// extensions by the accept loop (`crate::server`): the TCP peer, or, for a connection
/// from a configured load balancer (`http.proxy_protocol_from`), the client its PROXY v2
/// header names. Per-client limits key on its IP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub std::net::SocketAddr);

/// The API's path prefix.
pub const API_PREFIX: &str = "/core/v1";

/// The complete service: `routes` (the router and the OpenAPI document describing it, as
/// `crate::api::routes` builds them) with the OpenAPI document and Swagger UI, the
/// fallbacks and the middleware. CORS (`cors`), when configured, is the outermost layer:
/// preflights are answered before the rate limits and credentials are looked at, and
/// every response, the deadline's 503 included, is marked.
pub fn app(state: AppState, routes: (Router<AppState>, utoipa::openapi::OpenApi)) -> Router {
    let (router, openapi) = routes;
    let docs = SwaggerUi::new(format!("{API_PREFIX}/swagger-ui"))
        .url(format!("{API_PREFIX}/openapi.json"), openapi);
    let service = router
        .merge(docs)
        .merge(dashboard::routes(&state.config.billing))
        .fallback(|| async { ApiError::NotFound("no such path".into()) })
        .method_not_allowed_fallback(|| async {
            ApiError::MethodNotAllowed("this path does not accept that method".into())
        })
        .layer(CatchPanicLayer::custom(middleware::panic_response))
        .layer(axum::middleware::from_fn_with_state(
            std::sync::Arc::new(rate_limit::Limits {
                limiter: rate_limit::RateLimiter::new(&state.config.rate_limits),
                metrics: std::sync::Arc::clone(&state.metrics),
            }),
            rate_limit::limit,
        ))
        .layer(axum::middleware::from_fn(middleware::normalize_errors))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            middleware::request_context,
        ));
    cors::outermost(service, &state.config.http).with_state(state)
}
