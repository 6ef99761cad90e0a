//! The confidential-VM key appliance: the HTTPS front end, and the crate that composes
//! the crates below it into one server.
//!
//! Map (follow one request in `docs/architecture.md`):
//! * start-up: `startup`, the composition root (every part built, configured and handed
//!   its telemetry in one place);
//! * transport: `server` (the TLS accept loop, `proxy_protocol`), `tls` (certificates),
//!   `acme`, `http` (middleware, rate limits, authentication in `http::auth`, billed calls
//!   in `http::billed`, body extractors, the dashboard), `state` (what handlers reach);
//! * the API: `api` (handlers by domain and the route table), `error` (the one mapping of
//!   errors to HTTP), `openapi`;
//! * the service's decisions: `execution` (who may run which action, its code, its
//!   billing; the worker pool is `appliance-execution`), `billing` (prices, Stripe, action
//!   credit), `attest` (quotes and evidence files), `shared_root` (one root for every
//!   replica);
//! * keys: `keyservice_client` (the connection to the keyservice process);
//! * operation: `config`, `telemetry` (metrics, traces), `metrics_listener`,
//!   `log_output`, `commands` (the operator commands: `appliance deploy`,
//!   `backup`/`restore`, `root export`/`import`), `dev` (development mode only: the
//!   keyservice and worker-launcher children, the local chain, the child guard).
//!
//! The crates below keep their old module names here: `store` and `wallet` are
//! `appliance-store`, `chain` is `appliance-chain`, `authz`, `api_keys` and `cid` are
//! `appliance-domain`, and `typed_data` is `typed-data`.
//!
//! May depend on: every crate below it: `appliance-store`, `appliance-chain`,
//! `appliance-execution`, `appliance-domain`, `appliance-api`, `keyservice-api`,
//! `action-runtime` (the worker protocol), `worker-launcher` (its client), `evidence`,
//! `chain-contracts`, `compose-pin`, `typed-data`, `usage-key-permissions` and
//! `operator-auth` (the operator endpoints' signed requests). No
//! workspace crate depends on it, so nothing below can reach the HTTP layer.

pub mod acme;
pub mod api;
pub use appliance_domain::api_keys;
pub mod attest;
pub use appliance_domain::authz;
pub mod billing;
pub use appliance_chain as chain;
pub use appliance_domain::cid;
pub mod commands;
pub mod config;
pub mod dev;
pub mod error;
pub mod execution;
pub mod http;
pub mod keyservice_client;
pub mod log_output;
pub mod metrics_listener;
pub mod openapi;
pub mod proxy_protocol;
pub mod server;
pub mod shared_root;
pub mod startup;
pub mod state;
pub use appliance_store as store;
pub mod telemetry;
pub mod tls;
pub use appliance_store::wallet;
/// The EIP-712 envelope (its own crate, `appliance/typed-data`, so it can be fuzzed alone).
pub use typed_data;

pub use startup::{Running, StartError, start, start_dev};
