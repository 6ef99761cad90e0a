//! Where the test tools live. `scripts/setup` fills one cache directory,
//! `$APPLIANCE_TOOLS_DIR` or else `~/.cache/appliance-tools` (the same default as
//! `appliance dev` uses for its anvil): npm packages under `<tools>/node/`, PyPI packages in a
//! virtualenv under `<tools>/venv/`. Pebble comes from Debian and lives on the system.

use std::path::{Path, PathBuf};

/// The tools cache `scripts/setup` fills.
pub fn tools_dir() -> PathBuf {
    match std::env::var_os("APPLIANCE_TOOLS_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => {
            let home = std::env::var_os("HOME").unwrap_or_else(|| {
                panic!("HOME is not set: set APPLIANCE_TOOLS_DIR and run scripts/setup")
            });
            PathBuf::from(home).join(".cache").join("appliance-tools")
        }
    }
}

/// The npm packages of the tools cache (what `NODE_PATH` should name), which must exist.
pub fn node_modules() -> PathBuf {
    let modules = tools_dir().join("node").join("node_modules");
    assert!(
        modules.is_dir(),
        "{} is missing: run scripts/setup (it installs the npm test tools)",
        modules.display()
    );
    modules
}

/// The directory of npm package `name`, after checking it is installed at `version`
/// (tests that compare against a package pin its version).
pub fn node_package(name: &str, version: &str) -> PathBuf {
    let dir = node_modules().join(name);
    let manifest = dir.join("package.json");
    let text = std::fs::read_to_string(&manifest).unwrap_or_else(|err| {
        panic!(
            "{name}@{version} is not installed ({}: {err}); run scripts/setup",
            manifest.display()
        )
    });
    let manifest_json: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|err| {
        panic!(
            "{} is not JSON ({err}); run scripts/setup",
            manifest.display()
        )
    });
    assert_eq!(
        manifest_json["version"].as_str(),
        Some(version),
        "{} is not {name}@{version}; run scripts/setup",
        manifest.display()
    );
    dir
}

/// The anvil binary (npm `@foundry-rs/anvil-linux-amd64`).
pub fn anvil_binary() -> PathBuf {
    let path = tools_dir().join("node/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil");
    assert!(
        path.is_file(),
        "anvil not found at {}: run scripts/setup (it installs @foundry-rs/anvil-linux-amd64)",
        path.display()
    );
    path
}

/// A command of the tools' Python virtualenv (`python`, `openapi-spec-validator`, …).
pub fn venv_bin(name: &str) -> PathBuf {
    let path = tools_dir().join("venv").join("bin").join(name);
    assert!(
        path.exists(),
        "{} is missing: run scripts/setup (it installs the PyPI test tools)",
        path.display()
    );
    path
}

/// A command of Debian's `pebble` package (`pebble`, `pebble-challtestsrv`).
pub fn pebble_tool(name: &str) -> PathBuf {
    for dir in ["/usr/bin", "/usr/local/bin"] {
        let path = Path::new(dir).join(name);
        if path.exists() {
            return path;
        }
    }
    panic!("{name} is not installed: run scripts/setup (it installs Debian's pebble package)");
}
