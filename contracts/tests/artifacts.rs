//! The committed artifacts must be what the committed sources compile to: a fast check of
//! their source hashes, then a full recompilation by `build.js --check` with the pinned
//! solc-js that `scripts/setup` installs.

use std::{path::Path, process::Command};

use sha2::{Digest, Sha256};

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `sourceHash` and `sources` of each artifact match the Solidity files on disk.
#[test]
fn artifact_source_hashes_match_the_sources() {
    for name in ["AccountConfig", "AppGovernance"] {
        let path = manifest_dir().join(format!("artifacts/{name}.json"));
        let artifact: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let sources = artifact["sources"].as_object().expect("sources");
        assert!(
            sources.contains_key(&format!("src/{name}.sol"))
                && sources.contains_key(&format!("src/I{name}.sol"))
        );
        let mut manifest = String::new();
        for (file, recorded) in sources {
            let content = std::fs::read(manifest_dir().join(file)).unwrap();
            assert_eq!(
                recorded.as_str(),
                Some(sha256_hex(&content).as_str()),
                "{file} changed since artifacts/{name}.json was built: run `node contracts/build.js`"
            );
            manifest.push_str(&format!("{file}\n{}\n", sha256_hex(&content)));
        }
        assert_eq!(
            artifact["sourceHash"].as_str(),
            Some(sha256_hex(manifest.as_bytes()).as_str())
        );
        assert!(
            artifact["compiler"]["version"]
                .as_str()
                .unwrap()
                .starts_with("0.8.35+")
        );
    }
}

/// Recompiles in memory and compares every byte of both artifacts.
#[test]
fn artifacts_are_what_the_sources_compile_to() {
    let output = Command::new("node")
        .arg("build.js")
        .arg("--check")
        .current_dir(manifest_dir())
        .output()
        .unwrap_or_else(|e| {
            panic!("running node failed ({e}): install Node.js and run scripts/setup")
        });
    assert!(
        output.status.success(),
        "`node contracts/build.js --check` failed (if solc-js is missing, run scripts/setup; if the \
         artifacts are stale, run `node contracts/build.js`):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn embedded_artifacts_are_the_committed_ones() {
    for (name, bytecode, deployed, abi) in [
        (
            "AccountConfig",
            chain_contracts::artifacts::account_config_bytecode(),
            chain_contracts::artifacts::account_config_deployed_bytecode(),
            chain_contracts::artifacts::account_config_abi_json(),
        ),
        (
            "AppGovernance",
            chain_contracts::artifacts::app_governance_bytecode(),
            chain_contracts::artifacts::app_governance_deployed_bytecode(),
            chain_contracts::artifacts::app_governance_abi_json(),
        ),
    ] {
        let path = manifest_dir().join(format!("artifacts/{name}.json"));
        let artifact: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(artifact["bytecode"].as_str().unwrap(), bytecode.to_string());
        assert_eq!(
            artifact["deployedBytecode"].as_str().unwrap(),
            deployed.to_string()
        );
        assert_eq!(
            artifact["abi"],
            serde_json::from_str::<serde_json::Value>(abi).unwrap()
        );
        assert_eq!(
            artifact["compiler"]["version"].as_str().unwrap(),
            chain_contracts::artifacts::SOLC_VERSION
        );
    }
}
