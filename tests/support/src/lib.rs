//! The test harness of every crate in the workspace, one crate so that no crate keeps a
//! harness module of its own: the workspace binaries a test starts, checked fresh
//! ([`binaries`]); the one place that knows where `scripts/setup` installs the test tools
//! ([`tools`]), a node runner that can load those npm packages ([`node`]), a stand-in
//! dstack guest agent on a Unix socket ([`dstack_agent`]), a private PostgreSQL server
//! ([`postgres`]), loopback ports never handed out twice ([`ports`]), the real
//! `compose-pin` ([`compose_pin`]); and, each behind a feature so that a crate's tests
//! compile only what they use, a local chain (`anvil`), contracts on
//! it (`chain`), a TLS listener with a certificate the test controls (`tls`), the
//! appliance's metrics endpoint scraped (`metrics`), the real keyservice (`keyservice`),
//! action worker (`action_worker`, feature `action-worker`) and worker launcher
//! (`worker_launcher`, feature `worker-launcher`).
//!
//! May depend on: `chain-contracts` with the chain feature, `keyservice-api` with the
//! keyservice feature, `action-runtime` (without its interpreter) with the action-worker and
//! worker-launcher features, and `worker-launcher` with the worker-launcher feature.
//!
//! The integration tests of `chain-contracts`, `action-runtime` and `worker-launcher` use
//! those features through a dev-dependency cycle (the crate → `test-support` → the crate),
//! which cargo allows: the test binary and this crate link the one library of the crate
//! under test. A crate's unit tests could not pass its types to this crate (they are
//! compiled as another copy of it), so only integration tests do.
//!
//! Every helper fails loudly (with the command that fixes it) instead of skipping a test,
//! except [`postgres`] where PostgreSQL is not installed (outside CI: see its docs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[cfg(feature = "action-worker")]
pub mod action_worker;
#[cfg(feature = "anvil")]
pub mod anvil;
pub mod binaries;
#[cfg(feature = "chain")]
pub mod chain;
pub mod compose_pin;
pub mod dstack_agent;
#[cfg(feature = "keyservice")]
pub mod keyservice;
#[cfg(feature = "metrics")]
pub mod metrics;
pub mod node;
pub mod ports;
pub mod postgres;
#[cfg(feature = "rust-source")]
pub mod rust_source;
#[cfg(feature = "tls")]
pub mod tls;
pub mod tools;
#[cfg(feature = "worker-launcher")]
pub mod worker_launcher;
