//! The web dashboard at `/dashboard`: a single-page app of plain JavaScript modules and
//! CSS, embedded in the binary (`appliance/dashboard/`), that calls `/core/v1` from the
//! browser through the JavaScript SDK's bundle
//! (`appliance/dashboard/assets/appliance-sdk.js`, built from `sdk/js`). It is not part of
//! the API: no route here is in the OpenAPI document.
//!
//! Every response under `/dashboard` carries the same strict headers: a
//! Content-Security-Policy allowing only this origin (plus, while billing is on, the
//! origin of `billing.stripe_js_url`, for a card top-up), `nosniff`, `no-referrer` and no
//! framing. Assets are revalidated on every load (`no-cache`) against an ETag of their
//! SHA-256, so an upgraded appliance never serves a stale page. `/dashboard/config.json`
//! tells the page whether billing is on and where Stripe.js is.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use sha2::{Digest, Sha256};

use crate::config::BillingConfig;
use crate::error::ApiError;
use crate::state::AppState;

/// Where the dashboard is served.
pub const DASHBOARD_PREFIX: &str = "/dashboard";

/// One embedded file.
struct Asset {
    name: &'static str,
    bytes: &'static [u8],
    content_type: &'static str,
}

macro_rules! asset {
    ($name:literal, $content_type:expr) => {
        Asset {
            name: $name,
            bytes: include_bytes!(concat!("../../dashboard/", $name)),
            content_type: $content_type,
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file the dashboard serves; nothing else under `/dashboard` exists.
const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("assets/style.css", "text/css; charset=utf-8"),
    asset!("assets/icon.svg", "image/svg+xml"),
    asset!("assets/app.js", JS),
    asset!("assets/dom.js", JS),
    asset!("assets/pages.js", JS),
    asset!("assets/billing.js", JS),
    asset!("assets/usage.js", JS),
    asset!("assets/chainsecured.js", JS),
    asset!("assets/wallet.js", JS),
    asset!("assets/chain.js", JS),
    asset!("assets/evidence.js", JS),
    asset!("assets/evidence-page.js", JS),
    asset!("assets/appliance-sdk.js", JS),
];

/// An asset with its validator.
struct Served {
    asset: &'static Asset,
    etag: HeaderValue,
}

/// What the dashboard's handlers share, computed once from the configuration.
struct Dashboard {
    files: Vec<Served>,
    csp: HeaderValue,
    config_json: Vec<u8>,
}

impl Dashboard {
    fn new(billing: &BillingConfig) -> Self {
        let files = ASSETS
            .iter()
            .map(|asset| {
                let digest = Sha256::digest(asset.bytes);
                let etag = format!("\"{}\"", hex::encode(&digest[..16]));
                Served {
                    asset,
                    // Hex in quotes is always a valid header value.
                    etag: HeaderValue::from_str(&etag)
                        .unwrap_or_else(|_| HeaderValue::from_static("\"0\"")),
                }
            })
            .collect();
        let stripe = billing
            .enabled()
            .then(|| origin_of(&billing.stripe_js_url))
            .flatten();
        let csp = content_security_policy(stripe.as_deref());
        let config_json = serde_json::json!({
            "billing_enabled": billing.enabled(),
            "stripe_js_url": billing.enabled().then_some(billing.stripe_js_url.as_str()),
            "api_base": crate::http::API_PREFIX,
        })
        .to_string()
        .into_bytes();
        Self {
            files,
            csp: HeaderValue::from_str(&csp).unwrap_or_else(|_| {
                // Origins come from a validated URL; should one not fit a header,
                // the page is served with the policy that admits no other origin.
                tracing::warn!("the Stripe.js origin does not fit a CSP header; left out");
                HeaderValue::from_static(BASE_POLICY)
            }),
            config_json,
        }
    }

    fn get(&self, name: &str) -> Option<&Served> {
        self.files.iter().find(|f| f.asset.name == name)
    }
}

/// The policy with no origin but the appliance's own.
const BASE_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The Content-Security-Policy of every dashboard response: only `'self'`, plus the
/// Stripe.js origin (scripts, its frames and its API calls) while billing is on. Stripe's
/// own service also needs its API and 3-D Secure hosts, which it documents for CSP.
pub fn content_security_policy(stripe_origin: Option<&str>) -> String {
    let Some(origin) = stripe_origin else {
        return BASE_POLICY.to_owned();
    };
    let (connect, frame) = if origin == "https://js.stripe.com" {
        (
            format!("{origin} https://api.stripe.com"),
            format!("{origin} https://hooks.stripe.com"),
        )
    } else {
        (origin.to_owned(), origin.to_owned())
    };
    format!(
        "default-src 'none'; script-src 'self' {origin}; style-src 'self'; img-src 'self' data:; connect-src 'self' {connect}; frame-src {frame}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
}

/// `scheme://host[:port]` of a URL, lower-cased; `None` if it has no authority.
pub fn origin_of(url: &str) -> Option<String> {
    let uri: http::Uri = url.parse().ok()?;
    let scheme = uri.scheme_str()?;
    let authority = uri.authority()?;
    if authority.as_str().contains('@') {
        return None;
    }
    Some(format!("{scheme}://{authority}").to_ascii_lowercase())
}

/// The dashboard's routes (merged into the service by [`crate::http::app`]).
pub fn routes(billing: &BillingConfig) -> Router<AppState> {
    let dashboard = Arc::new(Dashboard::new(billing));
    let index = |State(d): State<Arc<Dashboard>>, headers: HeaderMap| async move {
        file(&d, "index.html", &headers)
    };
    Router::new()
        .route(DASHBOARD_PREFIX, get(index))
        .route(&format!("{DASHBOARD_PREFIX}/"), get(index))
        .route(
            &format!("{DASHBOARD_PREFIX}/config.json"),
            get(|State(d): State<Arc<Dashboard>>| async move {
                (
                    [
                        (header::CONTENT_TYPE, "application/json"),
                        (header::CACHE_CONTROL, "no-store"),
                    ],
                    d.config_json.clone(),
                )
                    .into_response()
            }),
        )
        .route(
            &format!("{DASHBOARD_PREFIX}/assets/{{file}}"),
            get(
                |State(d): State<Arc<Dashboard>>,
                 Path(name): Path<String>,
                 headers: HeaderMap| async move {
                    file(&d, &format!("assets/{name}"), &headers)
                },
            ),
        )
        .route(
            &format!("{DASHBOARD_PREFIX}/{{*rest}}"),
            get(|| async { not_found() }),
        )
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&dashboard),
            security_headers,
        ))
        .with_state(dashboard)
}

fn not_found() -> Response {
    ApiError::NotFound(
        "no such dashboard file: open /dashboard (the page's links are under #/)".into(),
    )
    .into_response()
}

/// An embedded file, or 304 when the browser's copy is current.
fn file(d: &Dashboard, name: &str, headers: &HeaderMap) -> Response {
    let Some(served) = d.get(name) else {
        return not_found();
    };
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| {
            tags.split(',')
                .any(|t| t.trim().trim_start_matches("W/") == served.etag)
        });
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut r = Response::new(Body::from(served.asset.bytes));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(served.asset.content_type),
        );
        r
    };
    let h = response.headers_mut();
    h.insert(header::ETAG, served.etag.clone());
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// The headers of every dashboard response, errors included.
async fn security_headers(State(d): State<Arc<Dashboard>>, req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let h = response.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, d.csp.clone());
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn policy_admits_only_self_without_billing() {
        let csp = content_security_policy(None);
        assert_eq!(csp, BASE_POLICY);
        assert!(!csp.contains("unsafe"));
        assert!(!csp.contains('*'));
    }

    #[test]
    fn policy_adds_the_stripe_origin_only_where_needed() {
        let csp = content_security_policy(Some("http://127.0.0.1:4242"));
        assert!(csp.contains("script-src 'self' http://127.0.0.1:4242;"));
        assert!(csp.contains("connect-src 'self' http://127.0.0.1:4242;"));
        assert!(csp.contains("frame-src http://127.0.0.1:4242;"));
        assert!(csp.contains("style-src 'self';"));
        let real = content_security_policy(Some("https://js.stripe.com"));
        assert!(real.contains("connect-src 'self' https://js.stripe.com https://api.stripe.com;"));
    }

    #[test]
    fn origins_of_urls() {
        assert_eq!(
            origin_of("https://js.stripe.com/v3/").as_deref(),
            Some("https://js.stripe.com")
        );
        assert_eq!(
            origin_of("http://127.0.0.1:9/js.stripe.com/v3/").as_deref(),
            Some("http://127.0.0.1:9")
        );
        assert_eq!(origin_of("/relative"), None);
        assert_eq!(origin_of("https://u:p@x.example/"), None);
    }

    #[test]
    fn every_asset_is_embedded_with_a_type() {
        let d = Dashboard::new(&BillingConfig::default());
        for name in ["index.html", "assets/app.js", "assets/evidence.js"] {
            let served = d.get(name).unwrap();
            assert!(!served.asset.bytes.is_empty());
            assert!(served.etag.to_str().unwrap().starts_with('"'));
        }
        let config: serde_json::Value = serde_json::from_slice(&d.config_json).unwrap();
        assert_eq!(config["billing_enabled"], false);
        assert_eq!(config["stripe_js_url"], serde_json::Value::Null);
    }

    /// No inline script or style in the page: the policy would block it anyway.
    #[test]
    fn the_page_has_no_inline_script_or_style() {
        let html = std::str::from_utf8(ASSETS[0].bytes).unwrap();
        assert!(!html.contains("<script>"), "inline script");
        assert!(!html.contains("style="), "inline style");
        assert!(!html.contains("<style"), "inline style sheet");
        assert!(!html.contains("http://") && !html.contains("https://"));
    }
}
