//! A local anvil chain for tests, from the binary `scripts/setup` installs.

use alloy::node_bindings::{Anvil, AnvilInstance};

use crate::tools::anvil_binary;

/// A fresh anvil on a free 127.0.0.1 port (anvil picks it), stopped when dropped.
pub fn spawn() -> AnvilInstance {
    Anvil::new()
        .path(anvil_binary())
        .host("127.0.0.1")
        .port(0u16)
        .try_spawn()
        .unwrap_or_else(|err| panic!("anvil did not start: {err}"))
}
