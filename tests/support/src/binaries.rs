//! Workspace binaries a test starts as real processes (`action-worker`, `keyservice`, …),
//! found in the target directory of the running test and refused when missing or older
//! than their sources: `cargo test -p X` builds only X's own binaries, and a stale binary
//! of another package would otherwise be tested silently.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The directory of the workspace's built binaries (`target/debug`), from this test
/// executable's own path (`target/debug/deps/<test>`).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test executable is in <target>/<profile>/deps")
        .to_owned()
}

/// The newest modification time of any file under `dir` (`None` for an empty or
/// unreadable directory).
pub fn newest_mtime(dir: &Path) -> Option<SystemTime> {
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

/// `name` in [`bin_dir`], refused (a panic naming `hint`, the command that fixes it) when
/// it is not built or is older than any file under `sources`.
pub fn fresh_binary(name: &str, sources: &Path, hint: &str) -> PathBuf {
    fresh_binary_of(name, &[sources], hint)
}

/// [`fresh_binary`] for a binary built from several source folders (its package's and
/// those of the workspace crates it is made of).
pub fn fresh_binary_of(name: &str, sources: &[&Path], hint: &str) -> PathBuf {
    let path = bin_dir().join(name);
    let built = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| panic!("{} is not built; {hint}", path.display()));
    for dir in sources {
        if let Some(newest) = newest_mtime(dir) {
            assert!(
                built >= newest,
                "{} is older than {}; {hint}",
                path.display(),
                dir.display()
            );
        }
    }
    path
}

/// The root of the workspace (this crate is `tests/support`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tests/support is two levels below the workspace root")
        .to_owned()
}

/// The package of each workspace binary a test starts, and the source folders it is
/// built from (its package's, and the workspace crates it is made of).
fn package_of(name: &str) -> (&'static str, &'static [&'static str]) {
    match name {
        "appliance" => (
            "appliance",
            &[
                "appliance/src",
                "appliance/store/src",
                "appliance/domain/src",
                "appliance/chain/src",
                "appliance/execution/src",
            ],
        ),
        "keyservice" => ("keyservice", &["keyservice/src", "keyservice/api/src"]),
        "action-worker" => ("action-runtime", &["appliance/runtime/src"]),
        "worker-launcher" => ("worker-launcher", &["appliance/worker-launcher/src"]),
        "compose-pin" => ("compose-pin", &["compose/src"]),
        "appliance-cli" => ("appliance-cli", &["client/cli/src", "client/src"]),
        "evidence" => ("evidence", &["evidence/src"]),
        "verify-pin-run" => (
            "verify-pin-run",
            &["examples/verify-pin-run/src", "client/src"],
        ),
        other => panic!("{other} is not a binary test-support knows"),
    }
}

/// A workspace binary (`appliance`, `keyservice`, `action-worker`, `worker-launcher`,
/// `compose-pin`, `appliance-cli`, `evidence`, the example `verify-pin-run`), checked
/// fresh against the sources it is built from; the panic names the command that builds it.
pub fn workspace_binary(name: &str) -> PathBuf {
    let (package, folders) = package_of(name);
    let root = workspace_root();
    let sources: Vec<PathBuf> = folders.iter().map(|f| root.join(f)).collect();
    let sources: Vec<&Path> = sources.iter().map(PathBuf::as_path).collect();
    fresh_binary_of(
        name,
        &sources,
        &format!(
            "build it first: cargo build -p {package} --bin {name} (`cargo test --workspace` and `scripts/test` do)"
        ),
    )
}
