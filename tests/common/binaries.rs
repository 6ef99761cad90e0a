//! The workspace binaries under test (`appliance`, `keyservice`, `action-worker`, `worker-launcher`,
//! `evidence`), found next to this test executable and refused when older than their
//! sources.

use std::path::PathBuf;

pub use test_support::binaries::{bin_dir, workspace_root};

/// `appliance`, to run with arguments, without this process's `APPLIANCE_*` variables
/// (a developer's environment never leaks into a test's configuration).
pub fn appliance_command() -> std::process::Command {
    let mut cmd = std::process::Command::new(binary("appliance"));
    for (key, _) in std::env::vars() {
        if key.starts_with("APPLIANCE_") {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// Path of a workspace binary. `cargo test --workspace` builds it before any test runs
/// (`cargo test -p e2e` alone does not rebuild other packages' binaries, so a binary
/// older than its sources is refused rather than silently tested).
pub fn binary(name: &str) -> PathBuf {
    test_support::binaries::workspace_binary(name)
}
