//! The workspace binaries under test (`appliance`, `keyservice`, `action-worker`, `worker-launcher`,
//! `evidence`), found next to this test executable and refused when older than their
//! sources.

use std::path::{Path, PathBuf};

/// The directory holding the workspace's built binaries (`target/debug`), found from
/// this test executable's own path (`target/debug/deps/<test>`).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("target dir")
        .to_owned()
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_owned()
}

/// The newest modification time of any file under `dir`.
fn newest_mtime(dir: &Path) -> Option<std::time::SystemTime> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let time = if path.is_dir() {
            newest_mtime(&path)
        } else {
            entry.metadata().ok()?.modified().ok()
        };
        newest = newest.max(time);
    }
    newest
}

/// Path of a workspace binary. `cargo test --workspace` builds it before any test runs
/// (`cargo test -p e2e` alone does not rebuild other packages' binaries, so a binary
/// older than its sources is refused rather than silently tested).
pub fn binary(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    let hint = "run the tests with `cargo test --workspace` (or `scripts/test`)";
    let built = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| panic!("{} is not built; {hint}", path.display()));
    let package = match name {
        "action-worker" => "appliance/runtime",
        "worker-launcher" => "appliance/worker-launcher",
        other => other,
    };
    let sources = workspace_root().join(package).join("src");
    if let Some(newest) = newest_mtime(&sources) {
        assert!(
            built >= newest,
            "{} is older than {}; {hint}",
            path.display(),
            sources.display()
        );
    }
    path
}
