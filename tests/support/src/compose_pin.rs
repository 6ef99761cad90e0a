//! The real `compose-pin` binary in tests: run it ([`compose_pin`]), render the compose for
//! an image ([`render`]), and pinned image references made up for a test ([`image`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The `compose-pin` binary of this target directory, refused when older than its sources
/// ([`crate::binaries::workspace_binary`]).
pub fn binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| crate::binaries::workspace_binary("compose-pin"))
}

/// A pinned image reference with a digest made of `byte`.
pub fn image(byte: u8) -> String {
    format!(
        "ghcr.io/example/appliance@sha256:{}",
        hex::encode([byte; 32])
    )
}

/// Runs `compose-pin ARGS` without the caller's `RUST_LOG` and `GOVERNANCE_OWNER_KEY`.
pub fn compose_pin(args: &[&str]) -> Output {
    Command::new(binary())
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("GOVERNANCE_OWNER_KEY")
        .output()
        .unwrap()
}

/// The standard output of a run that must have succeeded.
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
