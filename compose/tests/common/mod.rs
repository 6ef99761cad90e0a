//! Helpers of the compose-pin integration tests: the real binaries (compose-pin from
//! Cargo, keyservice from the same target directory) and anvil from `scripts/setup`
//! (found by the `test-support` crate).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const COMPOSE_PIN: &str = env!("CARGO_BIN_EXE_compose-pin");

/// A pinned image reference with a digest made of `byte`.
pub fn image(byte: u8) -> String {
    format!(
        "ghcr.io/example/appliance@sha256:{}",
        hex::encode([byte; 32])
    )
}

/// Runs `compose-pin ARGS`.
pub fn compose_pin(args: &[&str]) -> Output {
    Command::new(COMPOSE_PIN)
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("GOVERNANCE_OWNER_KEY")
        .output()
        .unwrap()
}

pub fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// `compose-pin render --image IMAGE --output FILE`; returns the printed hash.
pub fn render(image: &str, output: &Path) -> String {
    let out = compose_pin(&[
        "render",
        "--image",
        image,
        "--output",
        output.to_str().unwrap(),
    ]);
    stdout(&out).trim().to_owned()
}

/// The `keyservice` binary of the same target directory (`cargo test --workspace` builds
/// every binary first; alone, `cargo build -p keyservice`).
pub fn keyservice_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap();
    let bin = dir.join("keyservice");
    assert!(
        bin.is_file(),
        "{} not found: cargo build -p keyservice",
        bin.display()
    );
    bin
}

/// The anvil binary `scripts/setup` installs.
pub fn anvil_binary() -> PathBuf {
    test_support::tools::anvil_binary()
}
