//! Per-client-IP token buckets on the endpoints that need no credential
//! (`[rate_limits]` of the configuration).
//!
//! Each such endpoint belongs to a [`Class`]; each (class, client) pair has a bucket of
//! `burst` tokens refilled at `per_minute`. A request takes one token or is answered 429
//! with `Retry-After` (whole seconds until a token is back) and the standard error body,
//! before its body is read. The client is the connection's client address
//! ([`super::ClientAddr`]: its TCP peer, or behind a configured L4 balancer the client
//! the balancer's PROXY v2 header named, so clients behind one balancer keep separate
//! buckets): an IPv4 address, or the /64 of an IPv6 address (one subscriber usually
//! holds a whole /64); an IPv4-mapped IPv6 peer counts as its IPv4.
//!
//! A request for a fresh quote (`?nonce=` on `/attestation` or `/evidences/…`) takes a
//! token of its own class, [`Class::FreshQuote`], besides its `public` one: each costs a
//! hardware quote, which keyservice makes one at a time.
//!
//! Memory is bounded: at most `max_clients` buckets per class are kept. A bucket that
//! has refilled to its burst is indistinguishable from a new one and is forgotten first;
//! when every remembered bucket is still in use, further clients share one overflow
//! bucket per class (they are limited together, never unlimited).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, Method, header};

use super::{API_PREFIX, ClientAddr};
use crate::config::RateLimitsConfig;
use crate::error::ApiError;
use crate::telemetry::metrics::Metrics;

/// The endpoint classes, each with its own rate and burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// `new_account`.
    NewAccount,
    /// The signature endpoints that mint keys.
    Signature,
    /// `get_lit_action_ipfs_id`.
    Code,
    /// Unauthenticated reads.
    Public,
    /// Fresh quotes (`?nonce=` on `/attestation`, `/evidences/quote.json`), on top of
    /// `Public`.
    FreshQuote,
}

impl Class {
    const ALL: [Class; 5] = [
        Class::NewAccount,
        Class::Signature,
        Class::Code,
        Class::Public,
        Class::FreshQuote,
    ];

    /// The class's name, as in `[rate_limits]` (and the refusals metric's label).
    pub fn name(self) -> &'static str {
        match self {
            Self::NewAccount => "new_account",
            Self::Signature => "signature",
            Self::Code => "code",
            Self::Public => "public",
            Self::FreshQuote => "fresh_quote",
        }
    }

    fn index(self) -> usize {
        match self {
            Self::NewAccount => 0,
            Self::Signature => 1,
            Self::Code => 2,
            Self::Public => 3,
            Self::FreshQuote => 4,
        }
    }

    /// Whether a request asks for a fresh quote: a GET of `/attestation` or
    /// `/evidences/quote.json` with a well-formed `nonce` (64 hex digits). A malformed
    /// nonce costs no quote (the handler answers 400), so it takes no token here.
    pub fn is_fresh_quote(method: &Method, path: &str, query: Option<&str>) -> bool {
        method == Method::GET
            && matches!(path, "/attestation" | "/evidences/quote.json")
            && query.is_some_and(|q| {
                q.split('&').any(|pair| {
                    pair.strip_prefix("nonce=")
                        .is_some_and(|v| v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
                })
            })
    }

    /// The class of a request, or `None` for endpoints that are not rate-limited here
    /// (those that need a credential, `/health`, `/version`, the OpenAPI document).
    pub fn of(method: &Method, path: &str) -> Option<Self> {
        if let Some(rest) = path.strip_prefix(API_PREFIX) {
            return match (method.as_str(), rest) {
                ("POST", "/new_account") => Some(Self::NewAccount),
                ("POST", "/create_wallet_with_signature" | "/add_usage_api_key_with_signature") => {
                    Some(Self::Signature)
                }
                ("POST", "/get_lit_action_ipfs_id") => Some(Self::Code),
                (
                    "GET",
                    "/get_node_chain_config"
                    | "/get_api_payers"
                    | "/get_admin_api_payer"
                    | "/billing/stripe_config"
                    | "/billing/prices"
                    | "/get_lit_action_client_config",
                ) => Some(Self::Public),
                _ => None,
            };
        }
        match (method.as_str(), path) {
            ("GET", "/attestation" | "/info" | "/evidences" | "/evidences/") => Some(Self::Public),
            ("GET", p) if p.starts_with("/evidences/") => Some(Self::Public),
            _ => None,
        }
    }
}

/// The key a client's buckets are kept under: an IPv4 address or an IPv6 /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientKey {
    V4(u32),
    V6Net(u64),
}

impl ClientKey {
    pub fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Self::V4(u32::from(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self::V4(u32::from(v4)),
                None => Self::V6Net((u128::from(v6) >> 64) as u64),
            },
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

#[derive(Debug, Clone, Copy)]
struct Rule {
    per_second: f64,
    burst: f64,
}

impl Rule {
    /// Refills `bucket` to `now`, then takes a token: `Ok` or the wait until one is back.
    fn take(&self, bucket: &mut Bucket, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.per_second).min(self.burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64(
                (1.0 - bucket.tokens) / self.per_second,
            ))
        }
    }

    /// True when `bucket` would be full by `now`: forgetting it loses nothing.
    fn refilled(&self, bucket: &Bucket, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens + elapsed * self.per_second >= self.burst
    }
}

struct Table {
    rule: Rule,
    buckets: HashMap<ClientKey, Bucket>,
    overflow: Bucket,
    /// When the last sweep found nothing to forget (sweeps are then at most one a
    /// second, so a full table does not cost a scan per request).
    last_futile_sweep: Option<Instant>,
}

/// The rate limiter: one table of buckets per class.
pub struct RateLimiter {
    enabled: bool,
    max_clients: usize,
    tables: [Mutex<Table>; 5],
}

impl RateLimiter {
    pub fn new(config: &RateLimitsConfig) -> Self {
        let now = Instant::now();
        let table = |per_minute: f64, burst: u32| {
            let rule = Rule {
                per_second: per_minute / 60.0,
                burst: f64::from(burst),
            };
            Mutex::new(Table {
                rule,
                buckets: HashMap::new(),
                overflow: Bucket {
                    tokens: rule.burst,
                    at: now,
                },
                last_futile_sweep: None,
            })
        };
        Self {
            enabled: config.enabled,
            max_clients: config.max_clients,
            tables: [
                table(config.new_account_per_minute, config.new_account_burst),
                table(config.signature_per_minute, config.signature_burst),
                table(config.code_per_minute, config.code_burst),
                table(config.public_per_minute, config.public_burst),
                table(config.fresh_quote_per_minute, config.fresh_quote_burst),
            ],
        }
    }

    /// Takes a token for `client` in `class`: `Ok`, or how long until one is back.
    pub fn check(&self, class: Class, client: ClientKey, now: Instant) -> Result<(), Duration> {
        if !self.enabled {
            return Ok(());
        }
        let mut guard = match self.tables[class.index()].lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let table = &mut *guard;
        let rule = table.rule;
        if let Some(bucket) = table.buckets.get_mut(&client) {
            return rule.take(bucket, now);
        }
        if table.buckets.len() >= self.max_clients {
            let may_sweep = table
                .last_futile_sweep
                .is_none_or(|at| now.saturating_duration_since(at) >= Duration::from_secs(1));
            if may_sweep {
                table.buckets.retain(|_, b| !rule.refilled(b, now));
                table.last_futile_sweep = (table.buckets.len() >= self.max_clients).then_some(now);
            }
            if table.buckets.len() >= self.max_clients {
                return rule.take(&mut table.overflow, now);
            }
        }
        let mut bucket = Bucket {
            tokens: rule.burst,
            at: now,
        };
        let answer = rule.take(&mut bucket, now);
        table.buckets.insert(client, bucket);
        answer
    }

    /// Buckets remembered, over all classes (for tests and metrics).
    pub fn tracked(&self) -> usize {
        Class::ALL
            .iter()
            .map(|c| match self.tables[c.index()].lock() {
                Ok(t) => t.buckets.len(),
                Err(p) => p.into_inner().buckets.len(),
            })
            .sum()
    }
}

/// What the rate-limit layer holds: the buckets, and the registry refusals are counted
/// in. Built by `http::app` from the configuration; nothing else reaches the buckets.
pub struct Limits {
    pub limiter: RateLimiter,
    pub metrics: std::sync::Arc<Metrics>,
}

/// The middleware: 429 with `Retry-After` for a client over its bucket.
pub async fn limit(
    State(limits): State<std::sync::Arc<Limits>>,
    req: Request,
    next: Next,
) -> Response {
    let Some(class) = Class::of(req.method(), req.uri().path()) else {
        return next.run(req).await;
    };
    let Some(ClientAddr(peer)) = req.extensions().get::<ClientAddr>().copied() else {
        // Every accepted connection carries its peer; a request without one (an
        // in-process test router) is not limited.
        return next.run(req).await;
    };
    let client = ClientKey::of(peer.ip());
    let now = Instant::now();
    let mut taken = limits
        .limiter
        .check(class, client, now)
        .map_err(|w| (class, w));
    if taken.is_ok() && Class::is_fresh_quote(req.method(), req.uri().path(), req.uri().query()) {
        taken = limits
            .limiter
            .check(Class::FreshQuote, client, now)
            .map_err(|w| (Class::FreshQuote, w));
    }
    match taken {
        Ok(()) => next.run(req).await,
        Err((class, wait)) => {
            limits.metrics.rate_limited(class.name());
            too_many(wait)
        }
    }
}

fn too_many(wait: Duration) -> Response {
    let seconds = wait.as_secs_f64().ceil().max(1.0) as u64;
    let mut response = ApiError::TooManyRequests(format!(
        "too many requests from this address; retry in {seconds} s"
    ))
    .into_response();
    if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(per_minute: f64, burst: u32, max_clients: usize) -> RateLimitsConfig {
        RateLimitsConfig {
            enabled: true,
            max_clients,
            new_account_per_minute: per_minute,
            new_account_burst: burst,
            ..RateLimitsConfig::default()
        }
    }

    fn v4(last: u8) -> ClientKey {
        ClientKey::of(IpAddr::from([203, 0, 113, last]))
    }

    #[test]
    fn a_bucket_allows_its_burst_then_refills_at_its_rate() {
        let limiter = RateLimiter::new(&config(60.0, 3, 100));
        let t0 = Instant::now();
        for _ in 0..3 {
            limiter.check(Class::NewAccount, v4(1), t0).unwrap();
        }
        let wait = limiter.check(Class::NewAccount, v4(1), t0).unwrap_err();
        assert!(wait > Duration::from_millis(900) && wait <= Duration::from_secs(1));
        // Another client and another class are unaffected.
        limiter.check(Class::NewAccount, v4(2), t0).unwrap();
        limiter.check(Class::Public, v4(1), t0).unwrap();
        // One token a second comes back.
        let t1 = t0 + Duration::from_millis(1001);
        limiter.check(Class::NewAccount, v4(1), t1).unwrap();
        assert!(limiter.check(Class::NewAccount, v4(1), t1).is_err());
    }

    #[test]
    fn ipv6_clients_are_counted_per_64() {
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(ClientKey::of(a), ClientKey::of(b));
        assert_ne!(ClientKey::of(a), ClientKey::of(c));
        let mapped: IpAddr = "::ffff:203.0.113.1".parse().unwrap();
        assert_eq!(ClientKey::of(mapped), v4(1));
        let limiter = RateLimiter::new(&config(1.0, 1, 100));
        let now = Instant::now();
        limiter
            .check(Class::NewAccount, ClientKey::of(a), now)
            .unwrap();
        assert!(
            limiter
                .check(Class::NewAccount, ClientKey::of(b), now)
                .is_err()
        );
        limiter
            .check(Class::NewAccount, ClientKey::of(c), now)
            .unwrap();
    }

    #[test]
    fn memory_stays_bounded_under_many_addresses() {
        let limiter = RateLimiter::new(&config(1.0, 2, 50));
        let t0 = Instant::now();
        for i in 0..10_000u32 {
            let key = ClientKey::V4(i);
            let _ = limiter.check(Class::NewAccount, key, t0);
        }
        assert_eq!(limiter.tracked(), 50);
        // Beyond the cap, new clients share the overflow bucket: limited, not free.
        let overflowed = (0..10)
            .filter(|i| {
                limiter
                    .check(Class::NewAccount, ClientKey::V4(20_000 + i), t0)
                    .is_ok()
            })
            .count();
        assert_eq!(overflowed, 0, "the overflow bucket was emptied above");
        // Once the buckets have refilled they are forgotten, and new clients get their own.
        let later = t0 + Duration::from_secs(121);
        limiter
            .check(Class::NewAccount, ClientKey::V4(30_000), later)
            .unwrap();
        assert_eq!(limiter.tracked(), 1);
    }

    #[test]
    fn disabled_limits_nothing() {
        let mut c = config(1.0, 1, 10);
        c.enabled = false;
        let limiter = RateLimiter::new(&c);
        let now = Instant::now();
        for _ in 0..100 {
            limiter.check(Class::NewAccount, v4(1), now).unwrap();
        }
    }

    #[test]
    fn classes_of_paths() {
        let get = Method::GET;
        let post = Method::POST;
        assert_eq!(
            Class::of(&post, "/core/v1/new_account"),
            Some(Class::NewAccount)
        );
        assert_eq!(
            Class::of(&post, "/core/v1/get_lit_action_ipfs_id"),
            Some(Class::Code)
        );
        assert_eq!(
            Class::of(&post, "/core/v1/add_usage_api_key_with_signature"),
            Some(Class::Signature)
        );
        assert_eq!(Class::of(&get, "/attestation"), Some(Class::Public));
        assert_eq!(
            Class::of(&get, "/evidences/quote.json"),
            Some(Class::Public)
        );
        assert_eq!(Class::of(&get, "/health"), None);
        assert_eq!(Class::of(&post, "/core/v1/lit_action"), None);
        assert_eq!(Class::of(&get, "/core/v1/new_account"), None);
    }

    #[test]
    fn fresh_quote_requests_are_those_with_a_nonce() {
        let get = Method::GET;
        let nonce = format!("nonce={}", "aB".repeat(32));
        let after = format!("x=1&{nonce}");
        for (path, query) in [
            ("/attestation", nonce.as_str()),
            ("/evidences/quote.json", after.as_str()),
        ] {
            assert!(
                Class::is_fresh_quote(&get, path, Some(query)),
                "{path}?{query}"
            );
        }
        let short = format!("nonce={}", "ab".repeat(31));
        for (method, path, query) in [
            (&get, "/attestation", None),
            (&get, "/attestation", Some(short.as_str())),
            (&get, "/evidences/quote.json", Some("nonce=zz")),
            (&get, "/evidences/quote.json", Some("nonces=1")),
            (&get, "/evidences/sha256sum.txt", Some(nonce.as_str())),
            (&get, "/info", Some(nonce.as_str())),
            (&Method::POST, "/attestation", Some(nonce.as_str())),
        ] {
            assert!(
                !Class::is_fresh_quote(method, path, query),
                "{path} {query:?}"
            );
        }
        // Their own bucket: spending it leaves the public class untouched.
        let limiter = RateLimiter::new(&RateLimitsConfig {
            fresh_quote_per_minute: 1.0,
            fresh_quote_burst: 2,
            ..RateLimitsConfig::default()
        });
        let now = Instant::now();
        limiter.check(Class::FreshQuote, v4(1), now).unwrap();
        limiter.check(Class::FreshQuote, v4(1), now).unwrap();
        assert!(limiter.check(Class::FreshQuote, v4(1), now).is_err());
        limiter.check(Class::Public, v4(1), now).unwrap();
        limiter.check(Class::FreshQuote, v4(2), now).unwrap();
    }

    #[test]
    fn the_answer_is_429_with_retry_after() {
        let response = too_many(Duration::from_millis(1500));
        assert_eq!(response.status(), http::StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::RETRY_AFTER], "2");
    }
}
