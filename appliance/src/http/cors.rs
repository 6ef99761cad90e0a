//! CORS: which web pages, besides the appliance's own, may read the API's answers in a
//! browser (`http.cors_allowed_origins`).
//!
//! The layer is the outermost of the service, so it answers a preflight before the rate
//! limits, the credential checks or the routes see it, and it marks every other
//! response, errors included (a 401, a 429, the deadline's 503, a panic's 500).
//!
//! * No origin configured (the default): the layer is not installed; no response carries
//!   a CORS header and browsers let only the appliance's own pages read its answers.
//! * A preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) from an
//!   allowed origin: 204 with `Access-Control-Allow-Origin` (that origin),
//!   `Access-Control-Allow-Methods`, `Access-Control-Allow-Headers` (the API's
//!   credential headers among them), `Access-Control-Max-Age` and `Vary: Origin`. From
//!   any other origin: 403 in the API's error shape, with no CORS header.
//! * Any other request from an allowed origin: the response gets
//!   `Access-Control-Allow-Origin` (that origin) and `Access-Control-Expose-Headers`
//!   (`X-Request-Id`, `X-Correlation-Id`, `Retry-After`, which a page could not read
//!   otherwise). From another origin, or with no `Origin`, no CORS header: the browser
//!   then refuses the page the answer. Every response gets `Vary: Origin`, since what it
//!   carries depends on that header.
//!
//! `Access-Control-Allow-Credentials` is never sent: the API takes its credentials from
//! headers the page sets (`Authorization`, `X-Api-Key`, `X-Wallet-Auth`), never from
//! cookies, so a page can use only a key it holds.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};

use crate::config::HttpConfig;
use crate::error::error_response;
use crate::http::auth::{API_KEY_HEADER, WALLET_AUTH_HEADER};
use crate::http::middleware::{CORRELATION_ID, REQUEST_ID};

/// The methods the API serves.
pub const ALLOW_METHODS: &str = "GET, HEAD, POST";

/// The request headers a page may send: the credentials the API reads (`auth`), the
/// JSON body's type and the correlation id (`middleware`).
pub fn allow_headers() -> String {
    [
        header::AUTHORIZATION.as_str(),
        header::CONTENT_TYPE.as_str(),
        API_KEY_HEADER,
        WALLET_AUTH_HEADER,
        CORRELATION_ID,
    ]
    .join(", ")
}

/// The response headers a page may read beyond the CORS-safelisted ones.
pub fn expose_headers() -> String {
    [REQUEST_ID, CORRELATION_ID, header::RETRY_AFTER.as_str()].join(", ")
}

/// The allowed origins and the fixed header values of the answers.
#[derive(Debug)]
pub struct CorsPolicy {
    origins: Vec<HeaderValue>,
    max_age: HeaderValue,
    allow_headers: HeaderValue,
    expose_headers: HeaderValue,
}

impl CorsPolicy {
    /// The policy of `config`, or `None` when it allows no origin (no layer at all).
    pub fn from_config(config: &HttpConfig) -> Option<Self> {
        // Configured origins are checked ASCII (`CorsOrigin`), so each fits a header.
        let origins: Vec<HeaderValue> = config
            .cors_allowed_origins
            .iter()
            .filter_map(|o| HeaderValue::from_str(o.as_str()).ok())
            .collect();
        if origins.is_empty() {
            return None;
        }
        Some(Self {
            origins,
            max_age: HeaderValue::from(config.cors_max_age_secs),
            allow_headers: HeaderValue::from_str(&allow_headers()).ok()?,
            expose_headers: HeaderValue::from_str(&expose_headers()).ok()?,
        })
    }

    /// The request's `Origin`, if it is one of the allowed (byte for byte: browsers
    /// send the canonical spelling the configuration is held to).
    fn allowed<'a>(&self, headers: &'a HeaderMap) -> Option<&'a HeaderValue> {
        headers
            .get(header::ORIGIN)
            .filter(|origin| self.origins.iter().any(|o| o == *origin))
    }

    fn preflight(&self, origin: Option<&HeaderValue>) -> Response {
        let Some(origin) = origin else {
            let mut response = error_response(
                StatusCode::FORBIDDEN,
                "this origin may not call the API from a browser (http.cors_allowed_origins)",
            );
            response
                .headers_mut()
                .append(header::VARY, HeaderValue::from_static("origin"));
            return response;
        };
        let mut response = Response::new(axum::body::Body::empty());
        *response.status_mut() = StatusCode::NO_CONTENT;
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static(ALLOW_METHODS),
        );
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            self.allow_headers.clone(),
        );
        headers.insert(header::ACCESS_CONTROL_MAX_AGE, self.max_age.clone());
        headers.append(header::VARY, HeaderValue::from_static("origin"));
        response
    }
}

fn is_preflight(req: &Request) -> bool {
    req.method() == Method::OPTIONS
        && req.headers().contains_key(header::ORIGIN)
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}

/// The middleware: answers preflights, marks every other response (see the module).
pub async fn cors(State(policy): State<Arc<CorsPolicy>>, req: Request, next: Next) -> Response {
    let origin = policy.allowed(req.headers()).cloned();
    if is_preflight(&req) {
        return policy.preflight(origin.as_ref());
    }
    let mut response = next.run(req).await;
    let headers = response.headers_mut();
    headers.append(header::VARY, HeaderValue::from_static("origin"));
    if let Some(origin) = origin {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            policy.expose_headers.clone(),
        );
    }
    response
}

/// `router` with the CORS layer outermost, when `config` allows any origin; unchanged
/// otherwise.
pub fn outermost<S>(router: Router<S>, config: &HttpConfig) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    match CorsPolicy::from_config(config) {
        Some(policy) => {
            tracing::info!(
                origins = policy.origins.len(),
                "CORS: browsers may call the API from the configured origins"
            );
            router.layer(axum::middleware::from_fn_with_state(Arc::new(policy), cors))
        }
        None => router,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::body::Body;
    use axum::routing::{get, post};
    use tower::ServiceExt as _;

    use super::*;
    use crate::config::CorsOrigin;
    use crate::error::ApiError;

    const APP: &str = "https://app.example.com";
    const OTHER: &str = "https://evil.example.net";

    fn config(origins: &[&str]) -> HttpConfig {
        HttpConfig {
            cors_allowed_origins: origins.iter().map(|o| o.parse().unwrap()).collect(),
            cors_max_age_secs: 321,
            ..HttpConfig::default()
        }
    }

    /// A service like the real one: a public GET, a POST that needs a key (401 without),
    /// a handler that fails, under a layer standing for the rate limits and credential
    /// checks that refuses every request it sees with 429 once `open` is false. Returns
    /// the router and how many requests reached that inner layer.
    fn service(origins: &[&str], open: bool) -> (Router, Arc<AtomicUsize>) {
        let reached = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&reached);
        let inner = Router::new()
            .route("/core/v1/get_node_chain_config", get(|| async { "{}" }))
            .route(
                "/core/v1/list_groups",
                post(|| async { ApiError::Unauthorized("missing API key".into()) }),
            )
            .layer(axum::middleware::from_fn(
                move |req: Request, next: Next| {
                    let counter = Arc::clone(&counter);
                    async move {
                        counter.fetch_add(1, Ordering::SeqCst);
                        if open {
                            next.run(req).await
                        } else {
                            let mut r = error_response(StatusCode::TOO_MANY_REQUESTS, "slow down");
                            r.headers_mut()
                                .insert(header::RETRY_AFTER, HeaderValue::from_static("7"));
                            r
                        }
                    }
                },
            ))
            .layer(axum::middleware::from_fn(
                |req: Request, next: Next| async move {
                    let mut r = next.run(req).await;
                    r.headers_mut()
                        .insert(REQUEST_ID, HeaderValue::from_static("req-1"));
                    r
                },
            ));
        (outermost(inner, &config(origins)), reached)
    }

    fn preflight(path: &str, origin: &str) -> Request {
        Request::builder()
            .method(Method::OPTIONS)
            .uri(path)
            .header(header::ORIGIN, origin)
            .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
            .header(
                header::ACCESS_CONTROL_REQUEST_HEADERS,
                "authorization, content-type",
            )
            .body(Body::empty())
            .unwrap()
    }

    fn request(method: Method, path: &str, origin: Option<&str>) -> Request {
        let mut b = Request::builder().method(method).uri(path);
        if let Some(origin) = origin {
            b = b.header(header::ORIGIN, origin);
        }
        b.body(Body::empty()).unwrap()
    }

    fn h(r: &Response, name: header::HeaderName) -> Option<&str> {
        r.headers().get(name).map(|v| v.to_str().unwrap())
    }

    fn cors_headers(r: &Response) -> Vec<String> {
        r.headers()
            .keys()
            .map(|k| k.as_str().to_owned())
            .filter(|k| k.starts_with("access-control-"))
            .collect()
    }

    #[tokio::test]
    async fn an_allowed_preflight_is_answered_before_limits_and_credentials() {
        let (app, reached) = service(&[APP, "http://localhost:5173"], false);
        for _ in 0..50 {
            let r = app
                .clone()
                .oneshot(preflight("/core/v1/list_groups", APP))
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::NO_CONTENT);
            assert_eq!(h(&r, header::ACCESS_CONTROL_ALLOW_ORIGIN), Some(APP));
            assert_eq!(h(&r, header::VARY), Some("origin"));
            assert_eq!(
                h(&r, header::ACCESS_CONTROL_ALLOW_METHODS),
                Some("GET, HEAD, POST")
            );
            let allowed = h(&r, header::ACCESS_CONTROL_ALLOW_HEADERS).unwrap();
            for name in [
                "authorization",
                "content-type",
                "x-api-key",
                "x-wallet-auth",
                "x-correlation-id",
            ] {
                assert!(allowed.split(", ").any(|a| a == name), "{name}: {allowed}");
            }
            assert_eq!(h(&r, header::ACCESS_CONTROL_MAX_AGE), Some("321"));
            assert_eq!(h(&r, header::ACCESS_CONTROL_ALLOW_CREDENTIALS), None);
        }
        // A path with no route, and the second origin, are answered alike.
        let r = app
            .clone()
            .oneshot(preflight("/core/v1/nope", "http://localhost:5173"))
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
        assert_eq!(
            h(&r, header::ACCESS_CONTROL_ALLOW_ORIGIN),
            Some("http://localhost:5173")
        );
        assert_eq!(reached.load(Ordering::SeqCst), 0, "a preflight went inside");
    }

    #[tokio::test]
    async fn a_preflight_from_another_origin_gets_no_cors_header() {
        let (app, reached) = service(&[APP], true);
        // Not allowed: another host, another scheme, another port, another spelling.
        for origin in [
            OTHER,
            "http://app.example.com",
            "https://app.example.com:8443",
            "https://APP.example.com",
            "null",
        ] {
            let r = app
                .clone()
                .oneshot(preflight("/core/v1/list_groups", origin))
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::FORBIDDEN, "{origin}");
            assert!(cors_headers(&r).is_empty(), "{origin}: {:?}", r.headers());
            assert_eq!(h(&r, header::VARY), Some("origin"));
        }
        assert_eq!(reached.load(Ordering::SeqCst), 0);
        // An OPTIONS that is no preflight goes to the routes (405 there).
        let r = app
            .clone()
            .oneshot(request(Method::OPTIONS, "/core/v1/list_groups", Some(APP)))
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(reached.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn responses_to_an_allowed_origin_expose_the_request_id_errors_included() {
        let expose = expose_headers();
        for open in [true, false] {
            let (app, _) = service(&[APP], open);
            let ok = app
                .clone()
                .oneshot(request(
                    Method::GET,
                    "/core/v1/get_node_chain_config",
                    Some(APP),
                ))
                .await
                .unwrap();
            let unauthorized = app
                .clone()
                .oneshot(request(Method::POST, "/core/v1/list_groups", Some(APP)))
                .await
                .unwrap();
            let missing = app
                .clone()
                .oneshot(request(Method::GET, "/core/v1/nope", Some(APP)))
                .await
                .unwrap();
            let expected = if open {
                [
                    StatusCode::OK,
                    StatusCode::UNAUTHORIZED,
                    StatusCode::NOT_FOUND,
                ]
            } else {
                [StatusCode::TOO_MANY_REQUESTS; 3]
            };
            for (r, status) in [ok, unauthorized, missing].iter().zip(expected) {
                assert_eq!(r.status(), status);
                assert_eq!(h(r, header::ACCESS_CONTROL_ALLOW_ORIGIN), Some(APP));
                assert_eq!(
                    h(r, header::ACCESS_CONTROL_EXPOSE_HEADERS),
                    Some(expose.as_str())
                );
                assert_eq!(h(r, header::VARY), Some("origin"));
                assert_eq!(h(r, header::ACCESS_CONTROL_ALLOW_CREDENTIALS), None);
                assert_eq!(h(r, header::ACCESS_CONTROL_ALLOW_METHODS), None);
                assert_eq!(h(r, REQUEST_ID.parse().unwrap()), Some("req-1"));
            }
        }
        assert_eq!(expose, "x-request-id, x-correlation-id, retry-after");
    }

    #[tokio::test]
    async fn other_origins_and_no_origin_get_no_cors_header_but_the_same_answer() {
        let (app, _) = service(&[APP], true);
        for origin in [Some(OTHER), None] {
            let r = app
                .clone()
                .oneshot(request(
                    Method::GET,
                    "/core/v1/get_node_chain_config",
                    origin,
                ))
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::OK, "{origin:?}");
            assert!(cors_headers(&r).is_empty(), "{origin:?}: {:?}", r.headers());
            assert_eq!(h(&r, header::VARY), Some("origin"));
        }
    }

    #[tokio::test]
    async fn with_no_origin_configured_nothing_changes() {
        let (app, reached) = service(&[], true);
        let r = app
            .clone()
            .oneshot(preflight("/core/v1/list_groups", APP))
            .await
            .unwrap();
        // The routes answer (no OPTIONS there), with no CORS header and no Vary.
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert!(cors_headers(&r).is_empty(), "{:?}", r.headers());
        assert_eq!(h(&r, header::VARY), None);
        let r = app
            .oneshot(request(
                Method::GET,
                "/core/v1/get_node_chain_config",
                Some(APP),
            ))
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert!(cors_headers(&r).is_empty(), "{:?}", r.headers());
        assert_eq!(h(&r, header::VARY), None);
        assert_eq!(reached.load(Ordering::SeqCst), 2);
        assert!(CorsPolicy::from_config(&HttpConfig::default()).is_none());
    }

    #[test]
    fn origins_must_be_spelt_as_browsers_send_them() {
        for ok in [
            "https://app.example.com",
            "http://localhost:5173",
            "http://127.0.0.1:8080",
            "https://[::1]:8443",
            "https://xn--bcher-kva.example",
            "https://a-b.c1.example:65535",
        ] {
            let origin: CorsOrigin = ok.parse().unwrap_or_else(|e| panic!("{ok}: {e}"));
            assert_eq!(origin.as_str(), ok);
        }
        for (bad, says) in [
            ("*", "any origin"),
            ("null", "sandboxed"),
            (
                "https://App.Example.com",
                "write \"https://app.example.com\"",
            ),
            (
                "https://app.example.com/",
                "write \"https://app.example.com\"",
            ),
            (
                "https://app.example.com:443",
                "write \"https://app.example.com\"",
            ),
            (
                "http://app.example.com:80",
                "write \"http://app.example.com\"",
            ),
            ("HTTP://localhost:05173", "write \"http://localhost:5173\""),
            ("https://[0:0:0:0:0:0:0:1]", "write \"https://[::1]\""),
            ("https://app.example.com/path", "not a web origin"),
            ("ftp://app.example.com", "not a web origin"),
            ("app.example.com", "not a web origin"),
            ("https://user@app.example.com", "not a web origin"),
            ("https://", "not a web origin"),
            ("https://a..b", "not a web origin"),
            ("https://app.example.com:70000", "not a web origin"),
            ("https://app.example.com:", "not a web origin"),
            ("https://app.example.com?x", "not a web origin"),
            ("https://*.example.com", "not a web origin"),
        ] {
            let err = bad.parse::<CorsOrigin>().unwrap_err();
            assert!(
                err.contains(says) && err.contains("http.cors_allowed_origins"),
                "{bad}: {err}"
            );
        }
    }
}
