//! Helpers shared by the tests of every crate in the workspace: the workspace binaries a
//! test starts, checked fresh ([`binaries`]); the one place that knows
//! where `scripts/setup` installs the test tools ([`tools`]), a node runner that can load
//! those npm packages ([`node`]), with the `anvil` feature a local chain ([`anvil`]), and a
//! stand-in dstack guest agent on a Unix socket ([`dstack_agent`]), a private PostgreSQL
//! server ([`postgres`]), and with the `tls` feature a TLS listener with a certificate the
//! test controls (`tls`).
//!
//! Every helper fails loudly (with the command that fixes it) instead of skipping a test,
//! except [`postgres`] where PostgreSQL is not installed (outside CI: see its docs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[cfg(feature = "anvil")]
pub mod anvil;
pub mod binaries;
pub mod dstack_agent;
pub mod node;
pub mod postgres;
#[cfg(feature = "tls")]
pub mod tls;
pub mod tools;
