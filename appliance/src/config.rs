//! The appliance's configuration: one typed struct, loaded once at start.
//!
//! Sources, later ones winning: built-in defaults, the TOML file given to
//! `appliance serve --config FILE`, then environment variables. Every key can be set
//! from the environment as `APPLIANCE_<KEY>`, with `__` between nesting levels and the
//! value written as in TOML (strings may be bare): `APPLIANCE_LISTEN=0.0.0.0:443`,
//! `APPLIANCE_HTTP__MAX_BODY_BYTES=1048576`, `APPLIANCE_TLS__HOSTNAMES='["a.example"]'`.
//! Unknown keys, from the file or the environment, are errors, so a typo cannot
//! silently fall back to a default. `config.example.toml` lists every key with its
//! default and is checked by a test.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The prefix of environment overrides.
pub const ENV_PREFIX: &str = "APPLIANCE_";

/// Variables with [`ENV_PREFIX`] that belong to the repository's scripts and tests, not to
/// the configuration (the tool cache, CI's fuzzing time and reproducibility work
/// directory): skipped, so that setting one does not make every appliance started from
/// that shell refuse its configuration. Any other unknown `APPLIANCE_*` is still an error
/// (a misspelt override must not be ignored).
pub const NOT_CONFIGURATION: &[&str] = &[
    "APPLIANCE_TOOLS_DIR",
    "APPLIANCE_CI_FUZZ_SECONDS",
    "APPLIANCE_REPRODUCE_DIR",
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where the HTTPS API listens.
    pub listen: SocketAddr,
    /// Directory for the database and generated TLS material. Created if missing.
    pub data_dir: PathBuf,
    pub store: StoreConfig,
    pub tls: TlsConfig,
    pub acme: AcmeConfig,
    pub attestation: AttestationConfig,
    pub http: HttpConfig,
    pub keyservice: KeyserviceConfig,
    pub actions: ActionsConfig,
    pub chain: ChainConfig,
    pub billing: BillingConfig,
    pub rate_limits: RateLimitsConfig,
    pub log: LogConfig,
    pub metrics: MetricsConfig,
    pub traces: TracesConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([0, 0, 0, 0], 8443)),
            data_dir: PathBuf::from("/var/lib/appliance"),
            store: StoreConfig::default(),
            tls: TlsConfig::default(),
            acme: AcmeConfig::default(),
            attestation: AttestationConfig::default(),
            http: HttpConfig::default(),
            keyservice: KeyserviceConfig::default(),
            actions: ActionsConfig::default(),
            chain: ChainConfig::default(),
            billing: BillingConfig::default(),
            rate_limits: RateLimitsConfig::default(),
            log: LogConfig::default(),
            metrics: MetricsConfig::default(),
            traces: TracesConfig::default(),
        }
    }
}

/// Which database holds the appliance's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoreEngine {
    /// SQLite at `<data_dir>/state.db`, on the CVM's own (encrypted) volume: one replica.
    Sqlite,
    /// PostgreSQL at `store.url`, shared by every replica of the app; outside the TEE, so
    /// every authorizing row carries a MAC (`docs/operators.md`, "Replicas").
    Postgres,
}

/// The store. The engine is part of the measured configuration (keyservice reads it too:
/// with PostgreSQL it takes its root from the database instead of creating one); the
/// URL, which holds the database password, comes from the encrypted environment
/// (`APPLIANCE_STORE__URL`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    pub engine: StoreEngine,
    /// postgres: `postgres://user:password@host:5432/database?sslmode=require`. Anything
    /// but a loopback host must use `sslmode=require` (verified TLS). Never logged.
    pub url: Option<SecretString>,
    /// postgres: PEM of the CA that signs the server's certificate (default: the public
    /// web PKI).
    pub ca_pem: Option<String>,
    /// postgres: most read connections open at once (the writer, the change feed and
    /// each singleton hold one more each).
    pub max_connections: usize,
    /// postgres: how long a read waits for a free connection before answering 503.
    pub acquire_timeout_ms: u64,
    /// postgres: the server-side limit of any one statement (and of lock waits).
    pub statement_timeout_ms: u64,
    /// postgres: how often the store looks for triggers, rules and functions it did not
    /// create and checks that the database has not been rolled back (also at start).
    pub integrity_check_interval_secs: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            engine: StoreEngine::Sqlite,
            url: None,
            ca_pem: None,
            max_connections: 16,
            acquire_timeout_ms: 5_000,
            statement_timeout_ms: 30_000,
            integrity_check_interval_secs: 60,
        }
    }
}

impl StoreConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        match (self.engine, &self.url) {
            (StoreEngine::Postgres, None) => Err(ConfigError::Invalid(
                "store.engine = \"postgres\" needs store.url (set APPLIANCE_STORE__URL in the encrypted environment)".into(),
            )),
            (StoreEngine::Sqlite, Some(_)) => Err(ConfigError::Invalid(
                "store.url is set but store.engine is \"sqlite\"; set store.engine = \"postgres\" in the (measured) configuration".into(),
            )),
            _ if self.max_connections == 0 => Err(ConfigError::Invalid(
                "store.max_connections must be at least 1".into(),
            )),
            _ => Ok(()),
        }
    }
}

/// How the appliance reaches the key service, the only process holding private keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KeyserviceConfig {
    /// The keyservice's Unix socket. In production keyservice runs as its own
    /// container/user and the appliance connects to this socket. At start the appliance
    /// waits for it (`start_wait_ms`); if it goes down later, key operations answer 503
    /// until it is back.
    pub socket: PathBuf,
    /// Start keyservice as a supervised child process on the `dev` platform
    /// (development only: its sealing is NOT confidential).
    pub spawn: bool,
    /// spawn: the keyservice binary. Default: `keyservice` next to the appliance binary.
    pub binary: Option<PathBuf>,
    /// spawn: the compose file whose SHA-256 seals the root.
    pub compose_file: Option<PathBuf>,
    /// spawn: where keyservice keeps its sealed root and dev secret.
    /// Default: `<data_dir>/keyservice`.
    pub state_dir: Option<PathBuf>,
    /// spawn: the dev platform's secret (default: `<state_dir>/dev-secret`). Replicas
    /// of one dev deployment share it, as dstack replicas share the KMS's app key.
    pub dev_secret: Option<PathBuf>,
    /// Time allowed for one key operation.
    pub request_timeout_ms: u64,
    /// How long start waits for keyservice to answer (it may be a container that starts
    /// after this one) before giving up with an error. The root must be confirmed before
    /// the appliance serves anything, so it does not serve until then.
    pub start_wait_ms: u64,
}

impl Default for KeyserviceConfig {
    fn default() -> Self {
        Self {
            socket: PathBuf::from("/run/keyservice/keyservice.sock"),
            spawn: false,
            binary: None,
            compose_file: None,
            state_dir: None,
            dev_secret: None,
            request_timeout_ms: 10_000,
            start_wait_ms: 60_000,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TlsMode {
    /// A self-signed certificate generated at start for `hostnames` (development).
    SelfSigned,
    /// A certificate chain and key read from PEM files.
    Files,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    pub mode: TlsMode,
    /// Names (DNS names or IP addresses) the certificate is for.
    pub hostnames: Vec<String>,
    /// PEM certificate chain, leaf first (mode `files`).
    pub cert_file: Option<PathBuf>,
    /// PEM private key (mode `files`).
    pub key_file: Option<PathBuf>,
}

impl Default for TlsConfig {
    fn default() -> Self {
        Self {
            mode: TlsMode::SelfSigned,
            hostnames: vec!["localhost".into(), "127.0.0.1".into()],
            cert_file: None,
            key_file: None,
        }
    }
}

/// How ACME proves control of the domains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AcmeChallenge {
    /// TLS-ALPN-01 (RFC 8737), answered by the HTTPS listener itself (`acme-tls/1`).
    #[serde(rename = "tls-alpn-01")]
    TlsAlpn01,
    /// HTTP-01, answered by a small plain-HTTP listener on `http01_listen`.
    #[serde(rename = "http-01")]
    Http01,
}

/// A certificate from an ACME CA for `domains`, renewed before it expires. Active when
/// `directory_url` is set; it then replaces `tls.mode` (a self-signed certificate is
/// served only until the first one is issued).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AcmeConfig {
    /// The ACME directory (e.g. `https://acme-v02.api.letsencrypt.org/directory`).
    pub directory_url: Option<String>,
    /// DNS names the certificate is for (the first is the evidence's `cert-<domain>.pem`).
    pub domains: Vec<String>,
    /// Account contacts, e.g. `mailto:ops@example.com`.
    pub contact: Vec<String>,
    pub challenge: AcmeChallenge,
    /// http-01: where the plain-HTTP challenge listener binds (the CA connects to port 80).
    pub http01_listen: SocketAddr,
    /// PEM CA certificates to trust for the directory instead of the public roots
    /// (a test CA such as Pebble's).
    pub ca_bundle: Option<PathBuf>,
    /// Renew when this fraction of the certificate's lifetime has passed.
    pub renew_at: f64,
    /// First retry delay after a failure; doubled after each further failure.
    pub retry_initial_ms: u64,
    /// Longest retry delay.
    pub retry_max_ms: u64,
    /// Time limit of one request to the CA.
    pub request_timeout_ms: u64,
    /// Time allowed for the CA to validate the challenges and issue.
    pub order_timeout_ms: u64,
}

impl Default for AcmeConfig {
    fn default() -> Self {
        Self {
            directory_url: None,
            domains: Vec::new(),
            contact: Vec::new(),
            challenge: AcmeChallenge::TlsAlpn01,
            http01_listen: SocketAddr::from(([0, 0, 0, 0], 80)),
            ca_bundle: None,
            renew_at: 2.0 / 3.0,
            retry_initial_ms: 5_000,
            retry_max_ms: 3_600_000,
            request_timeout_ms: 30_000,
            order_timeout_ms: 120_000,
        }
    }
}

/// Where keyservice gets quotes and the deployment's identity from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QuoteProviderKind {
    /// The dstack guest agent (keyservice's `--agent-socket`).
    Dstack,
    /// Linux configfs-tsm (`tsm_dir`) with keyservice's compose file.
    Tsm,
    /// Simulated TDX quotes from the local compose file: development only, NOT
    /// confidential (`evidence verify` refuses them without `--allow-simulated`).
    Simulated,
}

/// The quote provider behind `/attestation`, `/info` and the `/evidences/` files.
///
/// The appliance never talks to a quote provider: it asks keyservice for quotes over
/// report data keyservice builds itself. These keys are keyservice's settings, read from
/// this same (measured) file by `keyservice run --chain-config`, and passed by
/// `appliance dev` to the keyservice child it starts; the appliance itself ignores them,
/// except `quote_refresh_secs`, which is the appliance's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AttestationConfig {
    pub provider: QuoteProviderKind,
    /// The appliance's: `/attestation` serves a quote at most this old (and `/info` a
    /// body at most this old), so unauthenticated GETs do not each cost a hardware
    /// quote. 0 asks keyservice on every request.
    pub quote_refresh_secs: u64,
    /// tsm: the configfs-tsm report directory.
    pub tsm_dir: PathBuf,
    /// tsm, simulated: the app id (40 hex digits). Default: `chain.governance_address`
    /// when set (so verifiers find the governance contract at 0x‖app_id).
    pub app_id: Option<String>,
}

impl Default for AttestationConfig {
    fn default() -> Self {
        Self {
            provider: QuoteProviderKind::Dstack,
            quote_refresh_secs: 60,
            tsm_dir: PathBuf::from("/sys/kernel/config/tsm/report"),
            app_id: None,
        }
    }
}

impl QuoteProviderKind {
    /// keyservice's spelling (`--quote-provider`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Dstack => "dstack",
            Self::Tsm => "tsm",
            Self::Simulated => "simulated",
        }
    }
}

/// Keys the appliance once read and no longer does, with the reason: refused with that
/// reason rather than as an unknown key.
const RETIRED_KEYS: [(&str, &str, &str); 2] = [
    (
        "attestation",
        "dstack_socket",
        "the appliance no longer talks to the dstack guest agent; keyservice does (its --agent-socket)",
    ),
    (
        "attestation",
        "compose_file",
        "the app-compose.json behind simulated and configfs-tsm quotes is keyservice's --compose-file",
    ),
];

fn refuse_retired_keys(table: &toml::Table) -> Result<(), ConfigError> {
    for (section, key, why) in RETIRED_KEYS {
        if let Some(toml::Value::Table(t)) = table.get(section)
            && t.contains_key(key)
        {
            return Err(ConfigError::Invalid(format!(
                "{section}.{key} is retired: {why}"
            )));
        }
    }
    Ok(())
}

impl AcmeConfig {
    /// True when an ACME directory is configured.
    pub fn enabled(&self) -> bool {
        self.directory_url.is_some()
    }
}

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
    pub proxy_protocol_from: Vec<crate::proxy_protocol::IpNet>,
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

impl RateLimitsConfig {
    fn validate(&self) -> Result<(), ConfigError> {
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
                return Err(ConfigError::Invalid(format!(
                    "rate_limits.{name}_per_minute must be a positive number and rate_limits.{name}_burst at least 1 (set rate_limits.enabled = false to turn limits off)"
                )));
            }
        }
        if self.max_clients == 0 {
            return Err(ConfigError::Invalid(
                "rate_limits.max_clients must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// Action execution: code limits, the sandbox's limits and the worker pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ActionsConfig {
    /// Largest action code accepted, in bytes.
    pub max_code_bytes: usize,
    /// Bytes of anonymous action code kept by CID for execution by `ipfs_id`: what
    /// `get_lit_action_ipfs_id` receives without a key. Beyond it, the least recently
    /// used anonymous code is evicted. An account's code is kept apart, within
    /// `code_quota_bytes_per_account`, so anonymous uploads never evict it.
    pub code_cache_bytes: u64,
    /// Bytes of action code kept for one account: code it ran inline, code fetched for
    /// it from the gateway, code sent to `get_lit_action_ipfs_id` with its key, and the
    /// code of its registered actions (pinned: never evicted, but counted). Beyond it,
    /// the account's least recently used unpinned code is evicted; registering an action
    /// whose known code would push its pinned code past it is refused with 409.
    pub code_quota_bytes_per_account: u64,
    /// Wall-clock limit of one action; the worker running it is killed after it.
    pub timeout_ms: u64,
    /// Memory an action may allocate (the worker's address-space limit above its
    /// start-up size).
    pub memory_limit_mb: u64,
    /// Largest `response` an action may produce.
    pub max_response_bytes: usize,
    /// Largest `logs` an action may produce.
    pub max_log_bytes: usize,
    /// Largest `js_params`, serialized.
    pub max_js_params_bytes: usize,
    /// Fetches per action.
    pub max_fetches: u32,
    /// Time limit of one fetch.
    pub fetch_timeout_ms: u64,
    /// Largest fetch response body.
    pub fetch_max_response_bytes: usize,
    /// Let actions fetch private, loopback and link-local addresses (off: they could
    /// reach services on the host or cloud metadata endpoints).
    pub fetch_allow_private: bool,
    /// Worker processes kept ready; 0 = two per CPU (at least 2).
    pub workers: usize,
    /// Actions one account may run at once; more wait in the account's own queue, and
    /// waiting accounts are served in turn (round-robin between accounts, FIFO within
    /// one). 0 = half the pool, rounded down, at least 1.
    pub max_concurrent_per_account: usize,
    /// Actions one account may have waiting for a worker; beyond it the account's new
    /// actions are refused with 429 (other accounts are not affected).
    pub max_queued_per_account: usize,
    /// Actions waiting for a worker in all; beyond it an action that cannot run at once
    /// is refused with 429.
    pub max_queued: usize,
    /// Longest wait for a worker, in ms; an action still waiting then is refused with 429.
    pub queue_timeout_ms: u64,
    /// Jobs one worker runs before it is retired and replaced (at least 1; 1 = a fresh
    /// worker for every job). A worker is also retired after any job that hit a limit
    /// (timeout, memory, size or depth limits).
    pub worker_max_jobs: u32,
    /// Live heap, in MiB, past which a worker is retired after its job (as the worker
    /// reports it; advisory). 0 = a quarter of `memory_limit_mb`. Must be below
    /// `memory_limit_mb`. An action on a reused worker can count on about
    /// `memory_limit_mb` minus this.
    pub worker_retire_heap_mb: u64,
    /// A worker serves one account only: the account of its first job. Once bound, it is
    /// retired (and a fresh one started for anyone) after waiting this many ms idle for
    /// that account's next job (at least 1). It is also retired sooner when another
    /// account's job needs its place.
    pub worker_bound_idle_ms: u64,
    /// The worker binary. Default: `action-worker` next to the appliance binary.
    /// Not used when workers come from the launcher (it names its own).
    pub worker_binary: Option<PathBuf>,
    /// The `worker-launcher` socket: workers are started by the launcher, under its uid
    /// (the image's third uid, no supplementary groups), and their pipes handed over.
    /// The launcher takes the memory limit from its own copy of this file. Unset (and
    /// `spawn_worker_launcher` off): workers are the appliance's own children, under
    /// its uid and groups (development only; logged at start).
    pub worker_launcher_socket: Option<PathBuf>,
    /// Development: start `worker-launcher` as a supervised child (same uid, reported at
    /// start) on `worker_launcher_socket`, by default `<data_dir>/worker-launcher.sock`,
    /// so development drives workers through the same path as the image.
    pub spawn_worker_launcher: bool,
    /// spawn_worker_launcher: the launcher binary. Default: next to the appliance binary.
    pub worker_launcher_binary: Option<PathBuf>,
    /// An IPFS HTTP gateway (e.g. `https://ipfs.io`) from which unknown CIDs are
    /// fetched for execution; the content is accepted only if its CID matches.
    pub ipfs_gateway: Option<String>,
}

impl Default for ActionsConfig {
    fn default() -> Self {
        Self {
            max_code_bytes: 1024 * 1024,
            code_cache_bytes: 64 * 1024 * 1024,
            code_quota_bytes_per_account: 16 * 1024 * 1024,
            timeout_ms: 30_000,
            memory_limit_mb: 128,
            max_response_bytes: 100 * 1024,
            max_log_bytes: 100 * 1024,
            max_js_params_bytes: 64 * 1024,
            max_fetches: 50,
            fetch_timeout_ms: 10_000,
            fetch_max_response_bytes: 1024 * 1024,
            fetch_allow_private: false,
            workers: 0,
            max_concurrent_per_account: 0,
            max_queued_per_account: 64,
            max_queued: 1024,
            queue_timeout_ms: 10_000,
            worker_max_jobs: 1000,
            worker_retire_heap_mb: 0,
            worker_bound_idle_ms: 30_000,
            worker_binary: None,
            worker_launcher_socket: None,
            spawn_worker_launcher: false,
            worker_launcher_binary: None,
            ipfs_gateway: None,
        }
    }
}

impl ActionsConfig {
    /// The heap threshold of [`Self::worker_retire_heap_mb`] in bytes, the default
    /// (a quarter of the memory limit) applied.
    pub fn worker_retire_heap_bytes(&self) -> u64 {
        let mb = match self.worker_retire_heap_mb {
            0 => self.memory_limit_mb / 4,
            mb => mb,
        };
        mb.saturating_mul(1024 * 1024)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.memory_limit_mb == 0 {
            return Err(ConfigError::Invalid(
                "actions.memory_limit_mb must be positive".into(),
            ));
        }
        if self.max_queued_per_account == 0 || self.max_queued == 0 {
            return Err(ConfigError::Invalid(
                "actions.max_queued_per_account and actions.max_queued must be at least 1".into(),
            ));
        }
        if self.worker_max_jobs == 0 {
            return Err(ConfigError::Invalid(
                "actions.worker_max_jobs must be at least 1 (1 = a fresh worker for every job)"
                    .into(),
            ));
        }
        if self.worker_bound_idle_ms == 0 {
            return Err(ConfigError::Invalid(
                "actions.worker_bound_idle_ms must be at least 1".into(),
            ));
        }
        if self.worker_retire_heap_mb >= self.memory_limit_mb {
            return Err(ConfigError::Invalid(format!(
                "actions.worker_retire_heap_mb ({}) must be below actions.memory_limit_mb ({}); 0 = a quarter of it",
                self.worker_retire_heap_mb, self.memory_limit_mb
            )));
        }
        Ok(())
    }
}

/// The settlement chain: where administrative state is mirrored (`AccountConfig`) and
/// where ChainSecured accounts are administered by their owners.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChainConfig {
    /// JSON-RPC URL of the chain. Unset: no chain; API-mode writes wait in the outbox
    /// until one is configured. Never returned by the API.
    pub rpc_url: Option<String>,
    /// The chain id; the RPC endpoint must report the same one.
    pub chain_id: u64,
    /// Shown by `get_node_chain_config`.
    pub chain_name: String,
    pub testnet: bool,
    /// The native token's symbol.
    pub token: String,
    /// The `AccountConfig` contract (written by `appliance deploy`).
    pub account_config_address: Option<alloy::primitives::Address>,
    /// The `AppGovernance` contract (written by `appliance deploy`).
    pub governance_address: Option<alloy::primitives::Address>,
    /// The block `AccountConfig` was deployed in: where the indexer starts.
    pub deploy_block: u64,
    /// Blocks an event must be buried under before the indexer applies it.
    pub confirmations: u64,
    /// How often the relayer and the indexer poll the chain.
    pub poll_interval_ms: u64,
    /// Outbox entries mirrored per transaction (`AccountConfig.multicall`).
    pub batch_size: usize,
    /// Time limit of one JSON-RPC request.
    pub request_timeout_ms: u64,
    /// Development only: an anvil binary that `appliance dev` starts (on a free loopback
    /// port), funds the payers on and deploys the contracts to.
    pub dev_anvil: Option<PathBuf>,
}

impl Default for ChainConfig {
    fn default() -> Self {
        Self {
            rpc_url: None,
            chain_id: 31337,
            chain_name: "anvil".into(),
            testnet: true,
            token: "ETH".into(),
            account_config_address: None,
            governance_address: None,
            deploy_block: 0,
            confirmations: 2,
            poll_interval_ms: 1000,
            batch_size: 32,
            request_timeout_ms: 10_000,
            dev_anvil: None,
        }
    }
}

impl ChainConfig {
    /// How the chain followers run, from these settings.
    pub fn follower_settings(&self) -> appliance_chain::FollowerSettings {
        appliance_chain::FollowerSettings {
            poll: std::time::Duration::from_millis(self.poll_interval_ms),
            batch_size: self.batch_size,
            deploy_block: self.deploy_block,
            confirmations: self.confirmations,
        }
    }
}

/// A secret configuration value (the Stripe secret key): never shown by `Debug` (so
/// never in logs) nor by `appliance print-config`; compared in constant time.
#[derive(Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SecretString(String);

impl SecretString {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretString(<redacted>)")
    }
}

impl PartialEq for SecretString {
    fn eq(&self, other: &Self) -> bool {
        use subtle::ConstantTimeEq as _;
        self.0.as_bytes().ct_eq(other.0.as_bytes()).into()
    }
}

/// Prepaid credit: card payments through Stripe payment intents, charged per billed
/// call. Enabled when both Stripe keys are set; otherwise (the development default)
/// nothing is charged and the billing endpoints other than `balance` answer 503.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BillingConfig {
    /// Stripe secret key (`sk_…`); never logged or shown.
    pub stripe_secret_key: Option<SecretString>,
    /// Stripe publishable key (`pk_…`), given to browsers by `/billing/stripe_config`.
    pub stripe_publishable_key: Option<String>,
    /// The Stripe API's base URL (https; http only for a loopback test server such as
    /// localstripe).
    pub stripe_api_base: String,
    /// Time limit of one request to Stripe.
    pub stripe_timeout_ms: u64,
    /// Time limit for connecting to Stripe.
    pub stripe_connect_timeout_ms: u64,
    /// Retries of a request that failed to connect, timed out or got a 5xx/429 (with
    /// exponential backoff; POSTs keep their Idempotency-Key).
    pub stripe_max_retries: u32,
    /// Credit granted to each new account (a ledger row like any top-up).
    pub initial_credit_cents: u64,
    /// Price of each billed management write.
    pub management_write_cents: u64,
    /// Price of each started second of an action's run time (at least one second).
    pub action_second_cents: u64,
    /// Where the dashboard (`/dashboard`) loads Stripe.js from for a card top-up, only
    /// while billing is on; its origin is the one other origin the dashboard's
    /// Content-Security-Policy admits (https; http only on a loopback address, e.g. a
    /// localstripe's stand-in at `http://127.0.0.1:PORT/js.stripe.com/v3/`).
    pub stripe_js_url: String,
}

impl Default for BillingConfig {
    fn default() -> Self {
        Self {
            stripe_secret_key: None,
            stripe_publishable_key: None,
            stripe_api_base: "https://api.stripe.com".into(),
            stripe_timeout_ms: 10_000,
            stripe_connect_timeout_ms: 5_000,
            stripe_max_retries: 2,
            initial_credit_cents: 0,
            management_write_cents: 1,
            action_second_cents: 1,
            stripe_js_url: "https://js.stripe.com/v3/".into(),
        }
    }
}

/// `https://…`, or `http://` on a loopback address (a local test server).
fn https_or_loopback_http(url: &str) -> bool {
    let loopback_http = ["http://127.0.0.1:", "http://localhost:", "http://[::1]:"]
        .iter()
        .any(|p| url.starts_with(p));
    url.starts_with("https://") || loopback_http
}

impl BillingConfig {
    /// Whether billing is on (both Stripe keys configured).
    pub fn enabled(&self) -> bool {
        self.stripe_secret_key.is_some() && self.stripe_publishable_key.is_some()
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.stripe_secret_key.is_some() != self.stripe_publishable_key.is_some() {
            return Err(ConfigError::Invalid(
                "billing needs both billing.stripe_secret_key and billing.stripe_publishable_key (or neither, to disable it)".into(),
            ));
        }
        if !https_or_loopback_http(self.stripe_api_base.trim_end_matches('/')) {
            return Err(ConfigError::Invalid(
                "billing.stripe_api_base must be an https URL (http only on a loopback address)"
                    .into(),
            ));
        }
        if !https_or_loopback_http(&self.stripe_js_url)
            || self.stripe_js_url.parse::<http::Uri>().is_err()
            || self
                .stripe_js_url
                .chars()
                .any(|c| c.is_whitespace() || c == ';' || c == ',')
        {
            return Err(ConfigError::Invalid(
                "billing.stripe_js_url must be an https URL (http only on a loopback address)"
                    .into(),
            ));
        }
        if self.stripe_timeout_ms == 0 || self.stripe_connect_timeout_ms == 0 {
            return Err(ConfigError::Invalid(
                "billing.stripe_timeout_ms and billing.stripe_connect_timeout_ms must be positive"
                    .into(),
            ));
        }
        if self.stripe_max_retries > 10 {
            return Err(ConfigError::Invalid(
                "billing.stripe_max_retries is at most 10".into(),
            ));
        }
        Ok(())
    }
}

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
    fn validate(&self) -> Result<(), ConfigError> {
        if let Some(token) = &self.bearer_token
            && token.expose().chars().count() < MIN_METRICS_TOKEN_CHARS
        {
            return Err(ConfigError::Invalid(format!(
                "metrics.bearer_token must be at least {MIN_METRICS_TOKEN_CHARS} characters"
            )));
        }
        let loopback = self.listen.ip().to_canonical().is_loopback();
        if self.enabled && !loopback && self.bearer_token.is_none() {
            return Err(ConfigError::Invalid(format!(
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

    fn validate(&self) -> Result<(), ConfigError> {
        if let Some(url) = self.traces_url() {
            let uri = url.parse::<http::Uri>().ok();
            let usable = uri.as_ref().is_some_and(|u| {
                matches!(u.scheme_str(), Some("http" | "https")) && u.authority().is_some()
            });
            if !usable {
                return Err(ConfigError::Invalid(
                    "traces.endpoint must be an http or https URL (the collector's OTLP/HTTP endpoint, e.g. http://127.0.0.1:4318)".into(),
                ));
            }
        }
        if !(self.sample_ratio.is_finite() && (0.0..=1.0).contains(&self.sample_ratio)) {
            return Err(ConfigError::Invalid(
                "traces.sample_ratio must be between 0 and 1".into(),
            ));
        }
        if self.max_queue_spans == 0
            || self.max_queue_spans > MAX_TRACE_QUEUE_SPANS
            || self.max_batch_spans == 0
            || self.max_batch_spans > self.max_queue_spans
        {
            return Err(ConfigError::Invalid(format!(
                "traces.max_queue_spans must be 1 to {MAX_TRACE_QUEUE_SPANS}, and traces.max_batch_spans 1 to traces.max_queue_spans"
            )));
        }
        if self.export_timeout_ms == 0 || self.batch_delay_ms == 0 {
            return Err(ConfigError::Invalid(
                "traces.export_timeout_ms and traces.batch_delay_ms must be positive".into(),
            ));
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("cannot read the config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the config file {path} is not valid TOML: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("environment variable {var} does not name a config key")]
    BadEnvKey { var: String },
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

impl Config {
    /// The development configuration of `appliance dev`: a keyservice child on the dev
    /// platform, sealed to `compose_file`.
    pub fn dev(listen: SocketAddr, data_dir: PathBuf, compose_file: PathBuf) -> Self {
        let keyservice = KeyserviceConfig {
            socket: data_dir.join("keyservice.sock"),
            spawn: true,
            compose_file: Some(compose_file),
            ..KeyserviceConfig::default()
        };
        // The dev chain (anvil) mines a block per transaction and no others: waiting for
        // confirmations there would wait for the next write.
        let chain = ChainConfig {
            confirmations: 0,
            ..ChainConfig::default()
        };
        let attestation = AttestationConfig {
            provider: QuoteProviderKind::Simulated,
            ..AttestationConfig::default()
        };
        // Workers through a launcher child, as in the image (there under another uid).
        let actions = ActionsConfig {
            spawn_worker_launcher: true,
            ..ActionsConfig::default()
        };
        // Metrics on a free loopback port (printed at start): several dev appliances
        // (the tests run many at once) never compete for one port.
        let metrics = MetricsConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            ..MetricsConfig::default()
        };
        Self {
            listen,
            data_dir,
            keyservice,
            chain,
            attestation,
            actions,
            metrics,
            ..Self::default()
        }
    }

    /// Applies `APPLIANCE_*` overrides from `env` on top of this configuration (used by
    /// `appliance dev`, whose defaults are not a file).
    pub fn with_env(
        self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let mut table =
            toml::Table::try_from(&self).map_err(|e| ConfigError::Invalid(e.to_string()))?;
        apply_env(&mut table, env)?;
        refuse_retired_keys(&table)?;
        let config: Config = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError::Invalid(e.message().to_owned()))?;
        config.validate()?;
        Ok(config)
    }

    /// Loads `path` (if given) and applies the process environment.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        Self::load_with_env(path, std::env::vars())
    }

    /// As `load`, with the environment given explicitly (for tests).
    pub fn load_with_env(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let mut table = match path {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_owned(),
                    source,
                })?;
                text.parse::<toml::Table>()
                    .map_err(|e| ConfigError::Syntax {
                        path: path.to_owned(),
                        message: e.to_string(),
                    })?
            }
            None => toml::Table::new(),
        };
        apply_env(&mut table, env)?;
        refuse_retired_keys(&table)?;
        let config: Config = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError::Invalid(e.message().to_owned()))?;
        config.validate()?;
        Ok(config)
    }

    /// This configuration with its secrets replaced, for `appliance print-config`.
    pub fn redacted(&self) -> Self {
        let mut out = self.clone();
        if out.billing.stripe_secret_key.is_some() {
            out.billing.stripe_secret_key = Some(SecretString::new("<redacted>"));
        }
        if out.store.url.is_some() {
            out.store.url = Some(SecretString::new("<redacted>"));
        }
        if out.metrics.bearer_token.is_some() {
            out.metrics.bearer_token = Some(SecretString::new("<redacted>"));
        }
        out
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.store.validate()?;
        self.billing.validate()?;
        self.actions.validate()?;
        self.rate_limits.validate()?;
        self.metrics.validate()?;
        self.traces.validate()?;
        if self.tls.mode == TlsMode::Files
            && (self.tls.cert_file.is_none() || self.tls.key_file.is_none())
        {
            return Err(ConfigError::Invalid(
                "tls.mode = \"files\" needs tls.cert_file and tls.key_file".into(),
            ));
        }
        if self.tls.hostnames.is_empty() {
            return Err(ConfigError::Invalid(
                "tls.hostnames must name at least one host".into(),
            ));
        }
        if self.acme.enabled() {
            if self.acme.domains.is_empty() {
                return Err(ConfigError::Invalid(
                    "acme.directory_url needs acme.domains".into(),
                ));
            }
            if !(self.acme.renew_at > 0.0 && self.acme.renew_at < 1.0) {
                return Err(ConfigError::Invalid(
                    "acme.renew_at must be between 0 and 1 (exclusive)".into(),
                ));
            }
            if self.acme.retry_initial_ms == 0
                || self.acme.retry_max_ms < self.acme.retry_initial_ms
            {
                return Err(ConfigError::Invalid(
                    "acme.retry_initial_ms must be positive and at most acme.retry_max_ms".into(),
                ));
            }
        }
        if self.keyservice.spawn && self.keyservice.compose_file.is_none() {
            return Err(ConfigError::Invalid(
                "keyservice.spawn needs keyservice.compose_file".into(),
            ));
        }
        if self.chain.batch_size == 0 || self.chain.poll_interval_ms == 0 {
            return Err(ConfigError::Invalid(
                "chain.batch_size and chain.poll_interval_ms must be positive".into(),
            ));
        }
        let h = &self.http;
        if h.max_body_bytes == 0
            || h.max_connections == 0
            || h.max_connections_per_ip == 0
            || h.max_json_depth == 0
            || h.http2_max_concurrent_streams == 0
            || h.tls_handshake_timeout_ms == 0
            || h.first_request_timeout_ms == 0
            || h.header_read_timeout_ms == 0
            || h.http1_idle_timeout_ms == 0
            || h.http2_idle_timeout_ms == 0
        {
            return Err(ConfigError::Invalid(
                "http limits and timeouts must be positive".into(),
            ));
        }
        if h.max_buffered_body_bytes < h.max_body_bytes {
            return Err(ConfigError::Invalid(
                "http.max_buffered_body_bytes must be at least http.max_body_bytes".into(),
            ));
        }
        if h.http2_keep_alive_interval_ms > 0 && h.http2_keep_alive_timeout_ms == 0 {
            return Err(ConfigError::Invalid(
                "http.http2_keep_alive_timeout_ms must be positive when pings are on".into(),
            ));
        }
        Ok(())
    }
}

/// Writes each `APPLIANCE_A__B=value` into `table` at `a.b`.
fn apply_env(
    table: &mut toml::Table,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<(), ConfigError> {
    let mut vars: Vec<(String, String)> = env
        .into_iter()
        .filter(|(k, _)| k.starts_with(ENV_PREFIX) && !NOT_CONFIGURATION.contains(&k.as_str()))
        .collect();
    vars.sort();
    for (var, raw) in vars {
        let path: Vec<String> = var[ENV_PREFIX.len()..]
            .split("__")
            .map(str::to_ascii_lowercase)
            .collect();
        if path.iter().any(String::is_empty) {
            return Err(ConfigError::BadEnvKey { var });
        }
        let value = parse_env_value(&raw);
        let mut node = &mut *table;
        for key in &path[..path.len() - 1] {
            let entry = node
                .entry(key.clone())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            node = match entry {
                toml::Value::Table(t) => t,
                _ => return Err(ConfigError::BadEnvKey { var }),
            };
        }
        node.insert(path[path.len() - 1].clone(), value);
    }
    Ok(())
}

/// A TOML literal if the text is one (`42`, `true`, `["a"]`), else the text as a string.
fn parse_env_value(raw: &str) -> toml::Value {
    format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn example_file_lists_exactly_the_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.toml");
        let loaded = Config::load_with_env(Some(&path), env(&[])).unwrap();
        assert_eq!(loaded, Config::default());
    }

    #[test]
    fn the_scripts_variables_are_not_configuration_but_a_misspelt_override_is_refused() {
        let mut vars = env(&[("APPLIANCE_LISTEN", "127.0.0.1:9443")]);
        for name in NOT_CONFIGURATION {
            vars.push(((*name).to_owned(), "/somewhere".to_owned()));
        }
        let config = Config::load_with_env(None, vars).unwrap();
        assert_eq!(config.listen, SocketAddr::from(([127, 0, 0, 1], 9443)));

        let err =
            Config::load_with_env(None, env(&[("APPLIANCE_LISTN", "127.0.0.1:9443")])).unwrap_err();
        assert!(err.to_string().contains("unknown field `listn`"), "{err}");
    }

    #[test]
    fn environment_overrides_file_and_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "listen = \"127.0.0.1:1\"\n[http]\nmax_body_bytes = 5\n",
        )
        .unwrap();
        let c = Config::load_with_env(
            Some(&path),
            env(&[
                ("APPLIANCE_LISTEN", "127.0.0.1:9"),
                ("APPLIANCE_DATA_DIR", "/tmp/x"),
                ("APPLIANCE_TLS__HOSTNAMES", "[\"a.example\"]"),
                ("APPLIANCE_LOG__FORMAT", "json"),
                ("OTHER", "ignored"),
            ]),
        )
        .unwrap();
        assert_eq!(c.listen, "127.0.0.1:9".parse().unwrap());
        assert_eq!(c.data_dir, PathBuf::from("/tmp/x"));
        assert_eq!(c.http.max_body_bytes, 5, "file value kept");
        assert_eq!(c.tls.hostnames, vec!["a.example".to_string()]);
        assert_eq!(c.log.format, LogFormat::Json);
    }

    #[test]
    fn proxy_protocol_balancers_are_parsed_and_checked() {
        assert!(
            Config::default().http.proxy_protocol_from.is_empty(),
            "off by default"
        );
        let c = Config::load_with_env(
            None,
            env(&[(
                "APPLIANCE_HTTP__PROXY_PROTOCOL_FROM",
                "[\"10.0.0.5\", \"10.1.0.0/24\"]",
            )]),
        )
        .unwrap();
        let balancers = &c.http.proxy_protocol_from;
        assert_eq!(balancers.len(), 2);
        assert!(balancers[1].contains("10.1.0.77".parse().unwrap()));
        assert!(!balancers[0].contains("10.0.0.6".parse().unwrap()));
        let bad = Config::load_with_env(
            None,
            env(&[("APPLIANCE_HTTP__PROXY_PROTOCOL_FROM", "[\"10.1.0.0/40\"]")]),
        );
        assert!(bad.is_err(), "a prefix longer than the address is refused");
    }

    #[test]
    fn dev_defaults_take_environment_overrides() {
        let dev = Config::dev(
            "127.0.0.1:0".parse().unwrap(),
            "/tmp/d".into(),
            "/tmp/d/c.json".into(),
        );
        let c = dev
            .clone()
            .with_env(env(&[("APPLIANCE_ACTIONS__MAX_CODE_BYTES", "7")]))
            .unwrap();
        assert_eq!(c.actions.max_code_bytes, 7);
        assert!(c.keyservice.spawn, "dev settings kept");
        assert!(
            c.actions.spawn_worker_launcher,
            "dev runs its workers through a launcher child"
        );
        assert!(!Config::default().actions.spawn_worker_launcher);
        assert_eq!(c.keyservice.socket, dev.keyservice.socket);
        assert!(dev.with_env(env(&[("APPLIANCE_NOPE", "1")])).is_err());
    }

    #[test]
    fn unknown_keys_are_errors() {
        let err = Config::load_with_env(None, env(&[("APPLIANCE_LISTN", "x")])).unwrap_err();
        assert!(err.to_string().contains("listn"), "{err}");
        let err = Config::load_with_env(None, env(&[("APPLIANCE_HTTP__", "1")])).unwrap_err();
        assert!(matches!(err, ConfigError::BadEnvKey { .. }));
    }

    #[test]
    fn retired_attestation_keys_are_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "[attestation]\nprovider = \"dstack\"\ndstack_socket = \"/var/run/dstack.sock\"\n",
        )
        .unwrap();
        let err = Config::load_with_env(Some(&path), env(&[])).unwrap_err();
        assert!(
            err.to_string()
                .contains("attestation.dstack_socket is retired")
                && err.to_string().contains("keyservice does"),
            "{err}"
        );
        let err = Config::load_with_env(
            None,
            env(&[("APPLIANCE_ATTESTATION__COMPOSE_FILE", "/x.json")]),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("attestation.compose_file is retired"),
            "{err}"
        );
        // Positive control: the keys keyservice reads from this file still load.
        std::fs::write(
            &path,
            "[attestation]\nprovider = \"tsm\"\ntsm_dir = \"/t\"\n",
        )
        .unwrap();
        let c = Config::load_with_env(Some(&path), env(&[])).unwrap();
        assert_eq!(c.attestation.provider, QuoteProviderKind::Tsm);
    }

    #[test]
    fn acme_section_from_environment() {
        let c = Config::load_with_env(
            None,
            env(&[
                (
                    "APPLIANCE_ACME__DIRECTORY_URL",
                    "https://127.0.0.1:14000/dir",
                ),
                ("APPLIANCE_ACME__DOMAINS", "[\"a.test\"]"),
                ("APPLIANCE_ACME__CHALLENGE", "http-01"),
                ("APPLIANCE_ACME__HTTP01_LISTEN", "127.0.0.1:5002"),
            ]),
        )
        .unwrap();
        assert!(c.acme.enabled());
        assert_eq!(c.acme.challenge, AcmeChallenge::Http01);
        assert!((c.acme.renew_at - 2.0 / 3.0).abs() < 1e-12);
        let err = Config::load_with_env(
            None,
            env(&[("APPLIANCE_ACME__DIRECTORY_URL", "https://x/dir")]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("acme.domains"), "{err}");
        let err = Config::load_with_env(
            None,
            env(&[
                ("APPLIANCE_ACME__DIRECTORY_URL", "https://x/dir"),
                ("APPLIANCE_ACME__DOMAINS", "[\"a.test\"]"),
                ("APPLIANCE_ACME__RENEW_AT", "1.5"),
            ]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("renew_at"), "{err}");
    }

    #[test]
    fn worker_retirement_settings_are_checked() {
        let c = Config::load_with_env(None, env(&[])).unwrap();
        assert_eq!(c.actions.worker_max_jobs, 1000);
        assert_eq!(
            c.actions.worker_retire_heap_bytes(),
            32 << 20,
            "a quarter of 128 MiB"
        );
        let c = Config::load_with_env(
            None,
            env(&[
                ("APPLIANCE_ACTIONS__WORKER_MAX_JOBS", "1"),
                ("APPLIANCE_ACTIONS__WORKER_RETIRE_HEAP_MB", "127"),
            ]),
        )
        .unwrap();
        assert_eq!(c.actions.worker_max_jobs, 1);
        assert_eq!(c.actions.worker_retire_heap_bytes(), 127 << 20);

        let err = Config::load_with_env(None, env(&[("APPLIANCE_ACTIONS__WORKER_MAX_JOBS", "0")]))
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("actions.worker_max_jobs must be at least 1"),
            "{err}"
        );
        assert_eq!(
            Config::default().actions.worker_bound_idle_ms,
            30_000,
            "a bound worker waits 30 s for its account"
        );
        let err = Config::load_with_env(
            None,
            env(&[("APPLIANCE_ACTIONS__WORKER_BOUND_IDLE_MS", "0")]),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("actions.worker_bound_idle_ms must be at least 1"),
            "{err}"
        );
        for (heap, limit) in [("128", "128"), ("200", "128"), ("64", "64")] {
            let err = Config::load_with_env(
                None,
                env(&[
                    ("APPLIANCE_ACTIONS__WORKER_RETIRE_HEAP_MB", heap),
                    ("APPLIANCE_ACTIONS__MEMORY_LIMIT_MB", limit),
                ]),
            )
            .unwrap_err();
            assert!(
                err.to_string().contains(&format!(
                    "actions.worker_retire_heap_mb ({heap}) must be below actions.memory_limit_mb ({limit})"
                )),
                "{err}"
            );
        }
        // The default threshold follows the memory limit, so lowering the limit alone is
        // never refused.
        let c = Config::load_with_env(None, env(&[("APPLIANCE_ACTIONS__MEMORY_LIMIT_MB", "32")]))
            .unwrap();
        assert_eq!(c.actions.worker_retire_heap_bytes(), 8 << 20);
    }

    #[test]
    fn a_metrics_listener_off_loopback_needs_a_token() {
        let c = Config::load_with_env(None, env(&[])).unwrap();
        assert_eq!(c.metrics.listen, "127.0.0.1:9464".parse().unwrap());
        assert!(c.metrics.enabled && c.metrics.bearer_token.is_none());
        for public in ["0.0.0.0:9464", "[::]:9464", "192.0.2.7:9464"] {
            let err = Config::load_with_env(None, env(&[("APPLIANCE_METRICS__LISTEN", public)]))
                .unwrap_err();
            assert!(err.to_string().contains("metrics.bearer_token"), "{err}");
        }
        let token = "k".repeat(MIN_METRICS_TOKEN_CHARS);
        let c = Config::load_with_env(
            None,
            env(&[
                ("APPLIANCE_METRICS__LISTEN", "0.0.0.0:9464"),
                ("APPLIANCE_METRICS__BEARER_TOKEN", &token),
            ]),
        )
        .unwrap();
        assert_eq!(
            c.metrics.bearer_token,
            Some(SecretString::new(token.clone()))
        );
        let printed = toml::to_string(&c.redacted()).unwrap();
        assert!(!printed.contains(&token), "{printed}");
        let err = Config::load_with_env(None, env(&[("APPLIANCE_METRICS__BEARER_TOKEN", "short")]))
            .unwrap_err();
        assert!(err.to_string().contains("at least 32"), "{err}");
        // Loopback in any spelling is loopback; a disabled endpoint listens nowhere.
        for ok in [
            vec![("APPLIANCE_METRICS__LISTEN", "[::1]:9464")],
            vec![("APPLIANCE_METRICS__LISTEN", "[::ffff:127.0.0.1]:9464")],
            vec![
                ("APPLIANCE_METRICS__LISTEN", "0.0.0.0:9464"),
                ("APPLIANCE_METRICS__ENABLED", "false"),
            ],
        ] {
            Config::load_with_env(None, env(&ok)).unwrap();
        }
        let dev = Config::dev(
            "127.0.0.1:0".parse().unwrap(),
            "/tmp/d".into(),
            "/tmp/d/c.json".into(),
        );
        assert_eq!(dev.metrics.listen.port(), 0, "dev picks a free port");
    }

    #[test]
    fn trace_settings_are_checked() {
        let c = Config::load_with_env(None, env(&[])).unwrap();
        assert_eq!(c.traces.traces_url(), None, "off by default");
        let c = Config::load_with_env(
            None,
            env(&[("APPLIANCE_TRACES__ENDPOINT", "http://127.0.0.1:4318/")]),
        )
        .unwrap();
        assert_eq!(
            c.traces.traces_url().as_deref(),
            Some("http://127.0.0.1:4318/v1/traces")
        );
        let c = Config::load_with_env(
            None,
            env(&[(
                "APPLIANCE_TRACES__ENDPOINT",
                "https://otel.example/v1/traces",
            )]),
        )
        .unwrap();
        assert_eq!(
            c.traces.traces_url().as_deref(),
            Some("https://otel.example/v1/traces")
        );
        for (key, value, says) in [
            ("APPLIANCE_TRACES__ENDPOINT", "ftp://x", "traces.endpoint"),
            (
                "APPLIANCE_TRACES__ENDPOINT",
                "localhost:4318",
                "traces.endpoint",
            ),
            ("APPLIANCE_TRACES__SAMPLE_RATIO", "1.5", "sample_ratio"),
            ("APPLIANCE_TRACES__MAX_QUEUE_SPANS", "0", "max_queue_spans"),
            (
                "APPLIANCE_TRACES__MAX_QUEUE_SPANS",
                "10000000",
                "max_queue_spans",
            ),
            (
                "APPLIANCE_TRACES__MAX_BATCH_SPANS",
                "4096",
                "max_batch_spans",
            ),
            (
                "APPLIANCE_TRACES__EXPORT_TIMEOUT_MS",
                "0",
                "export_timeout_ms",
            ),
        ] {
            let err = Config::load_with_env(None, env(&[(key, value)])).unwrap_err();
            assert!(err.to_string().contains(says), "{key}={value}: {err}");
        }
    }

    #[test]
    fn files_mode_needs_paths() {
        let err =
            Config::load_with_env(None, env(&[("APPLIANCE_TLS__MODE", "files")])).unwrap_err();
        assert!(err.to_string().contains("cert_file"), "{err}");
    }
}
