//! The HTTP layer's sections of the configuration: `[http]` (bodies, connections,
//! timeouts, the PROXY protocol) and `[rate_limits]` (the per-client buckets of the
//! endpoints that need no credential). Read by `crate::server` and `crate::http`.

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
