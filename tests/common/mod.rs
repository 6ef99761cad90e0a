//! The end-to-end test harness: start the real binaries (`appliance`, `keyservice`,
//! anvil, Pebble, …), talk to them over HTTPS as a client would (trusting the appliance's
//! self-signed certificate, never skipping verification), and stop them when a test ends.
//!
//! The tests themselves are in `tests/e2e/`, one module per area. Where the test tools
//! live is known only by the `test-support` crate (`tests/support`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod appliance;
pub mod attested;
pub mod binaries;
pub mod chain;
pub mod container;
pub mod dev_stack;
pub mod evidence_report;
pub mod flood;
pub mod http;
pub mod ids;
pub mod keyservice;
pub mod ledger;
pub mod load;
pub mod localstripe;
pub mod pebble;
pub mod process;
pub mod relay;
pub mod replicas;
pub mod resources;
pub mod rng;
pub mod stall;
pub mod viem;

/// Held by a test while it changes the machine's network interfaces (the container
/// test's own dockerd: bridges, veth pairs) or while it drives Chromium, so the two never
/// overlap: Chromium abandons requests in flight with `ERR_NETWORK_CHANGED` whenever an
/// interface appears or goes (all e2e tests run in one process, so one lock serves).
pub static NETWORK_CHANGES: std::sync::LazyLock<tokio::sync::Mutex<()>> =
    std::sync::LazyLock::new(|| tokio::sync::Mutex::new(()));

pub use appliance::{Appliance, Launch};
pub use binaries::{appliance_command, bin_dir, binary, workspace_root};
pub use dev_stack::DevStack;
pub use http::{Reply, client_trusting, json_string_body, read, streamed_body};
pub use ids::{base32_lower, base58btc, cid_v0, cid_v1, eip55, is_lower_hex, keccak_hex, zeros};
pub use keyservice::KeyService;
pub use localstripe::LocalStripe;
pub use process::{
    alive, children_of, command_name, descendants_of, eventually, eventually_async,
    processes_matching, signal,
};
pub use resources::{NewWallet, group_id_from, wallet_from};
pub use test_support::node::node_eval;
