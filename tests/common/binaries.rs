//! The workspace binaries under test (`appliance`, `keyservice`, `action-worker`, `worker-launcher`,
//! `evidence`), found next to this test executable and refused when older than their
//! sources.

use std::path::{Path, PathBuf};

pub use test_support::binaries::bin_dir;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_owned()
}

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
    let package = match name {
        "action-worker" => "appliance/runtime",
        "worker-launcher" => "appliance/worker-launcher",
        "appliance-cli" => "client/cli",
        other => other,
    };
    let root = workspace_root();
    let mut sources = vec![root.join(package).join("src")];
    if name == "appliance" {
        // The crates the appliance is made of beside its own `src`.
        for lower in [
            "appliance/store",
            "appliance/domain",
            "appliance/chain",
            "appliance/execution",
        ] {
            sources.push(root.join(lower).join("src"));
        }
    }
    let sources: Vec<&Path> = sources.iter().map(PathBuf::as_path).collect();
    test_support::binaries::fresh_binary_of(
        name,
        &sources,
        "run the tests with `cargo test --workspace` (or `scripts/test`)",
    )
}
