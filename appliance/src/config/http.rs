//! The HTTP layer's sections of the configuration: `[http]` (bodies, connections,
//! timeouts, the PROXY protocol, the web origins allowed to call the API from a browser)
//! and `[rate_limits]` (the per-client buckets of the
//! endpoints that need no credential). Read by `crate::server` and `crate::http`.

use std::fmt;
use std::str::FromStr;

use appliance_domain::settings::InvalidSetting;
use serde::{Deserialize, Serialize};

use crate::proxy_protocol::IpNet;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// The ceiling of every endpoint's body limit. Each endpoint has its own, smaller
    /// limit (`docs/compatibility.md`, "Request bodies"); larger bodies get 413.
    pub max_body_bytes: usize,
    /// Bytes of request bodies held in memory at once, across all requests. A body that
    /// cannot get its share within `body_budget_wait_ms` gets 503 with `Retry-After`.
    pub max_buffered_body_bytes: usize,
    /// How long a request waits for its share of `max_buffered_body_bytes`.
    pub body_budget_wait_ms: u64,
    /// Deepest nesting of arrays and objects accepted in a JSON body (deeper: 400).
    pub max_json_depth: usize,
    /// Connections served at once. When all are taken, the connection idle the longest
    /// is closed to make room; if none is idle, new ones wait in the kernel's accept
    /// queue.
    pub max_connections: usize,
    /// Live connections from one client IP address; over it a new connection is closed
    /// at once, before the TLS handshake.
    pub max_connections_per_ip: usize,
    /// Time allowed for a TLS handshake.
    pub tls_handshake_timeout_ms: u64,
    /// Time from the end of the TLS handshake until the first complete request head
    /// (either HTTP version); a connection that sends none in time is closed.
    pub first_request_timeout_ms: u64,
    /// HTTP/1: time allowed to send a request head once it has begun.
    pub header_read_timeout_ms: u64,
    /// HTTP/1: a keep-alive connection with no request in progress for this long is
    /// closed.
    pub http1_idle_timeout_ms: u64,
    /// HTTP/2: a connection with no open stream for this long is closed gracefully
    /// (GOAWAY).
    pub http2_idle_timeout_ms: u64,
    /// HTTP/2: interval of keep-alive pings (0: none).
    pub http2_keep_alive_interval_ms: u64,
    /// HTTP/2: a connection whose keep-alive ping is not answered within this is closed.
    pub http2_keep_alive_timeout_ms: u64,
    /// HTTP/2: streams (requests) one connection may have open at once.
    pub http2_max_concurrent_streams: u32,
    /// Time allowed for a whole request (handler included).
    pub request_timeout_ms: u64,
    /// The L4 load balancers (addresses or networks, `"10.0.0.5"`, `"10.0.0.0/24"`) whose
    /// connections start with a PROXY protocol v2 header naming the real client
    /// (`crate::proxy_protocol`). From these peers the header is required (a connection
    /// without a valid one is closed) and its client address is the one every
    /// per-client limit, log and trace uses; their own connections count only toward
    /// `max_connections`. From any other peer a header is never read. Empty (the
    /// default): off.
    pub proxy_protocol_from: Vec<IpNet>,
    /// The web origins whose pages may call the API from a browser (CORS,
    /// `crate::http::cors`), each exactly as a browser sends it in `Origin`:
    /// `"https://app.example.com"`, `"http://localhost:5173"` (scheme `http` or `https`,
    /// lowercase host, a port only if not the scheme's default, no path). `"*"` is
    /// refused (see [`CorsOrigin`]). Empty (the default): no CORS headers at all, so
    /// browsers let only the appliance's own pages (the dashboard) read its answers.
    pub cors_allowed_origins: Vec<CorsOrigin>,
    /// How long a browser may reuse a preflight answer (`Access-Control-Max-Age`), in
    /// seconds; at most 86400 (browsers cap it lower themselves: Chromium at 7200).
    pub cors_max_age_secs: u32,
}

/// Longest `http.cors_max_age_secs` accepted (a day: the longest any browser honours).
pub const MAX_CORS_MAX_AGE_SECS: u32 = 86_400;

/// One web origin allowed to call the API from a browser: its serialization as browsers
/// send it in `Origin` (`scheme://host[:port]`), so that matching is a byte comparison.
///
/// Refused: `"*"` (any origin), because the API's callers are told apart by their
/// network address too (rate limits per client IP; an appliance reachable only on a
/// private network): with it, any page a person opens could use their browser to create
/// accounts from their address, or read a private appliance's answers. `"null"` (the
/// origin of sandboxed frames and local files, shared by every such page), schemes
/// other than `http` and `https`, paths, user names and non-canonical spellings
/// (uppercase, a trailing slash, the default port) are refused too, the last with the
/// spelling to write instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorsOrigin(String);

impl CorsOrigin {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CorsOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for CorsOrigin {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let key = "http.cors_allowed_origins";
        if s.trim() == "*" {
            return Err(format!(
                "{key}: \"*\" (any origin) is not accepted: list each web origin that may call the API from a browser, e.g. \"https://app.example.com\""
            ));
        }
        if s.trim().eq_ignore_ascii_case("null") {
            return Err(format!(
                "{key}: \"null\" is the origin of every sandboxed frame and local file, so it cannot name one site; serve the page from an origin of its own"
            ));
        }
        if canonical_origin(s) {
            return Ok(Self(s.to_owned()));
        }
        match normalized_origin(s) {
            Some(fixed) => Err(format!(
                "{key}: {s:?} is not spelt as a browser sends it; write {fixed:?}"
            )),
            None => Err(format!(
                "{key}: {s:?} is not a web origin: write scheme://host[:port] with scheme http or https and no path, e.g. \"https://app.example.com\""
            )),
        }
    }
}

impl Serialize for CorsOrigin {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for CorsOrigin {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Whether `s` is an origin exactly as a browser serializes it: `http` or `https`,
/// `://`, a lowercase host name, IPv4 address or bracketed IPv6 address in its shortest
/// form, then a port only if it is not the scheme's default, and nothing else.
fn canonical_origin(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once("://") else {
        return false;
    };
    let default_port = match scheme {
        "http" => 80,
        "https" => 443,
        _ => return false,
    };
    let (host, port) = split_host_port(rest);
    let port_ok = match port {
        None => true,
        Some(p) => {
            !p.starts_with('0')
                && p.bytes().all(|b| b.is_ascii_digit())
                && p.parse::<u16>().is_ok_and(|n| n != default_port)
        }
    };
    port_ok && canonical_host(host)
}

/// `host[:port]` split at the port's colon (an IPv6 host keeps its brackets).
fn split_host_port(rest: &str) -> (&str, Option<&str>) {
    if rest.starts_with('[') {
        return match rest.find(']') {
            Some(end) => {
                let (host, after) = rest.split_at(end + 1);
                match after.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    None if after.is_empty() => (host, None),
                    // Anything else after the address: not a port; fails the checks.
                    None => (rest, None),
                }
            }
            None => (rest, None),
        };
    }
    match rest.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (rest, None),
    }
}

fn canonical_host(host: &str) -> bool {
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return inner
            .parse::<std::net::Ipv6Addr>()
            .is_ok_and(|ip| ip.to_string() == inner);
    }
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

/// The canonical spelling of an origin written with uppercase letters, a trailing
/// slash or the scheme's default port, if that is all that is wrong with it.
fn normalized_origin(s: &str) -> Option<String> {
    let trimmed = s.trim().strip_suffix('/').unwrap_or(s.trim());
    let (scheme, rest) = trimmed.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let (host, port) = split_host_port(rest);
    let mut host = host.to_ascii_lowercase();
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        host = format!("[{}]", inner.parse::<std::net::Ipv6Addr>().ok()?);
    }
    let default = match scheme.as_str() {
        "http" => "80",
        "https" => "443",
        _ => return None,
    };
    let fixed = match port {
        Some(p) if p.trim_start_matches('0') != default => {
            format!("{scheme}://{host}:{}", p.trim_start_matches('0'))
        }
        _ => format!("{scheme}://{host}"),
    };
    canonical_origin(&fixed).then_some(fixed)
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: 10 * 1024 * 1024,
            max_buffered_body_bytes: 64 * 1024 * 1024,
            body_budget_wait_ms: 1_000,
            max_json_depth: 64,
            max_connections: 10_000,
            max_connections_per_ip: 256,
            tls_handshake_timeout_ms: 10_000,
            first_request_timeout_ms: 10_000,
            header_read_timeout_ms: 10_000,
            http1_idle_timeout_ms: 60_000,
            http2_idle_timeout_ms: 60_000,
            http2_keep_alive_interval_ms: 30_000,
            http2_keep_alive_timeout_ms: 20_000,
            http2_max_concurrent_streams: 100,
            request_timeout_ms: 60_000,
            proxy_protocol_from: Vec::new(),
            cors_allowed_origins: Vec::new(),
            cors_max_age_secs: 600,
        }
    }
}

/// Per-client-IP token buckets on the endpoints that need no credential (see
/// `crate::http::rate_limit`). Each class has a sustained rate (requests per minute)
/// and a burst (the bucket's size). A client over its bucket gets 429 with
/// `Retry-After`. IPv4 clients are counted per address, IPv6 clients per /64.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitsConfig {
    /// Off: no endpoint is rate-limited.
    pub enabled: bool,
    /// Clients (per class) whose buckets are remembered. Buckets that have refilled are
    /// forgotten first (losing nothing); beyond the cap, new clients share one bucket
    /// per class, so many addresses cannot grow memory without bound.
    pub max_clients: usize,
    /// `new_account` (queues on-chain work and grants starting credit).
    pub new_account_per_minute: f64,
    pub new_account_burst: u32,
    /// `create_wallet_with_signature`, `add_usage_api_key_with_signature` (each mints a
    /// key in keyservice).
    pub signature_per_minute: f64,
    pub signature_burst: u32,
    /// `get_lit_action_ipfs_id` (hashes and may store up to `actions.max_code_bytes`).
    pub code_per_minute: f64,
    pub code_burst: u32,
    /// The other unauthenticated reads: `get_node_chain_config`, `get_api_payers`,
    /// `get_admin_api_payer`, `/billing/stripe_config`, `/billing/prices`,
    /// `get_lit_action_client_config`, `/attestation`, `/info`, `/evidences/…`.
    pub public_per_minute: f64,
    pub public_burst: u32,
    /// Fresh quotes (`?nonce=` on `/attestation`, `/evidences/quote.json`): each costs
    /// a hardware quote, so they are limited apart, on top of `public`.
    pub fresh_quote_per_minute: f64,
    pub fresh_quote_burst: u32,
}

impl Default for RateLimitsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_clients: 100_000,
            new_account_per_minute: 2.0,
            new_account_burst: 10,
            signature_per_minute: 20.0,
            signature_burst: 20,
            code_per_minute: 60.0,
            code_burst: 30,
            public_per_minute: 600.0,
            public_burst: 120,
            fresh_quote_per_minute: 6.0,
            fresh_quote_burst: 3,
        }
    }
}

impl HttpConfig {
    /// Checks that every limit and timeout is positive and the body budget holds at
    /// least one largest body.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if self.max_body_bytes == 0
            || self.max_connections == 0
            || self.max_connections_per_ip == 0
            || self.max_json_depth == 0
            || self.http2_max_concurrent_streams == 0
            || self.tls_handshake_timeout_ms == 0
            || self.first_request_timeout_ms == 0
            || self.header_read_timeout_ms == 0
            || self.http1_idle_timeout_ms == 0
            || self.http2_idle_timeout_ms == 0
        {
            return Err(InvalidSetting::new(
                "http limits and timeouts must be positive",
            ));
        }
        if self.max_buffered_body_bytes < self.max_body_bytes {
            return Err(InvalidSetting::new(
                "http.max_buffered_body_bytes must be at least http.max_body_bytes",
            ));
        }
        if self.http2_keep_alive_interval_ms > 0 && self.http2_keep_alive_timeout_ms == 0 {
            return Err(InvalidSetting::new(
                "http.http2_keep_alive_timeout_ms must be positive when pings are on",
            ));
        }
        if self.cors_max_age_secs > MAX_CORS_MAX_AGE_SECS {
            return Err(InvalidSetting(format!(
                "http.cors_max_age_secs must be at most {MAX_CORS_MAX_AGE_SECS} (a day)"
            )));
        }
        Ok(())
    }
}

impl RateLimitsConfig {
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        let classes = [
            (
                "new_account",
                self.new_account_per_minute,
                self.new_account_burst,
            ),
            ("signature", self.signature_per_minute, self.signature_burst),
            ("code", self.code_per_minute, self.code_burst),
            ("public", self.public_per_minute, self.public_burst),
            (
                "fresh_quote",
                self.fresh_quote_per_minute,
                self.fresh_quote_burst,
            ),
        ];
        for (name, rate, burst) in classes {
            if !(rate.is_finite() && rate > 0.0) || burst == 0 {
                return Err(InvalidSetting(format!(
                    "rate_limits.{name}_per_minute must be a positive number and rate_limits.{name}_burst at least 1 (set rate_limits.enabled = false to turn limits off)"
                )));
            }
        }
        if self.max_clients == 0 {
            return Err(InvalidSetting::new(
                "rate_limits.max_clients must be at least 1",
            ));
        }
        Ok(())
    }
}
