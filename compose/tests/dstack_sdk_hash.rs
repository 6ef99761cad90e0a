//! The compose hash `compose-pin` prints is the one dstack's own SDKs compute, for every
//! form and flag it renders: `getComposeHash` of npm `@phala/dstack-sdk` 0.5.8 and
//! `get_compose_hash` of PyPI `dstack-sdk` 0.5.4, both installed by `scripts/setup` into
//! the tools cache (`test_support::tools`).
//!
//! Each SDK parses the rendered file and hashes its own re-serialization (keys sorted,
//! compact), so an equal hash means our bytes are exactly that canonical form: a file
//! with other whitespace or key order hashes differently from what the SDK computes (the
//! re-indented control case shows the SDK does re-serialize).
//!
//! Where a tool is missing the test fails with the command to run (no test skips itself
//! for a missing tool: tests/README.md).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};
use test_support::compose_pin::{compose_pin, image, stdout};
use test_support::node::{assert_same_results, node_eval};
use test_support::tools::{node_package, tools_dir};

const NPM_SDK: &str = "@phala/dstack-sdk";
const NPM_SDK_VERSION: &str = "0.5.8";
const PYPI_SDK: &str = "dstack-sdk";
const PYPI_SDK_VERSION: &str = "0.5.4";

/// A KMS root CA public key in the form dstack's KMS reports it (`ca_pubkey`: the DER
/// SubjectPublicKeyInfo of a P-256 key; here the curve's base point), `0x` as a contract
/// shows it.
const CA_PUBKEY: &str = "0x3059301306072a8648ce3d020106082a8648ce3d03010703420004\
    6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c2964fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5";

/// One rendered file, and the hash `compose-pin` printed for it.
struct Case {
    name: String,
    path: PathBuf,
    hash: String,
}

/// The configuration of one variant: every character JSON escapes (quote, backslash,
/// tab, a control character) and some it must not (`/`, `<`, `'`, DEL).
const ODD_CONFIG: &str = "# \"quoted\" C:\\path\t<tab> </script> it's 100% ascii \u{1}\u{7f}\n\
    [chain]\nchain_name = \"base/sepolia\"\n";

/// Renders every variant with the real `compose-pin` into `dir`.
fn rendered_variants(dir: &Path) -> Vec<Case> {
    let config = dir.join("odd.toml");
    std::fs::write(&config, ODD_CONFIG).unwrap();
    let config = config.to_str().unwrap();
    let id = CA_PUBKEY;
    let variants: Vec<(&str, Vec<&str>)> = vec![
        ("current form, defaults", vec![]),
        ("legacy form", vec!["--legacy-compose"]),
        ("KMS pinned", vec!["--key-provider-id", id]),
        ("gateway on", vec!["--gateway"]),
        ("secure time on", vec!["--secure-time"]),
        ("public logs", vec!["--public-logs"]),
        (
            "own name and allowed envs",
            vec![
                "--name",
                "keys-prod_2",
                "--allowed-env",
                "APPLIANCE_STORE__URL",
                "--allowed-env",
                "EXTRA_SECRET",
            ],
        ),
        ("configuration with escapes", vec!["--config", config]),
        (
            "everything on",
            vec![
                "--key-provider-id",
                id,
                "--gateway",
                "--secure-time",
                "--public-logs",
                "--name",
                "all",
                "--config",
                config,
            ],
        ),
        (
            "legacy form, gateway and secure time",
            vec!["--legacy-compose", "--gateway", "--secure-time"],
        ),
    ];
    let image = image(0xc4);
    let mut cases = Vec::new();
    for (i, (name, flags)) in variants.into_iter().enumerate() {
        let path = dir.join(format!("variant-{i}.json"));
        let mut args = vec!["render", "--image", image.as_str()];
        args.extend(flags);
        args.extend(["--output", path.to_str().unwrap()]);
        let hash = stdout(&compose_pin(&args)).trim().to_owned();
        cases.push(Case {
            name: name.to_owned(),
            path,
            hash,
        });
    }
    // What `appliance dev` seals to.
    let path = dir.join("dev.json");
    let hash = stdout(&compose_pin(&["dev", "--output", path.to_str().unwrap()]))
        .trim()
        .to_owned();
    cases.push(Case {
        name: "development compose".to_owned(),
        path,
        hash,
    });

    for case in &cases {
        let bytes = std::fs::read(&case.path).unwrap();
        assert_eq!(
            case.hash,
            hex::encode(Sha256::digest(&bytes)),
            "{}: the printed hash is not SHA-256 of the file",
            case.name
        );
    }
    let mut distinct: Vec<&str> = cases.iter().map(|c| c.hash.as_str()).collect();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        cases.len(),
        "two variants rendered the same file"
    );

    // Control: the first file re-indented (other bytes, same object). The SDKs hash their
    // own serialization, so they give the canonical file's hash for it, and SHA-256 of
    // these bytes differs: a non-canonical rendering would show as a mismatch.
    let value: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&cases[0].path).unwrap()).unwrap();
    let pretty = serde_json::to_vec_pretty(&value).unwrap();
    assert_ne!(hex::encode(Sha256::digest(&pretty)), cases[0].hash);
    let path = dir.join("re-indented.json");
    std::fs::write(&path, pretty).unwrap();
    let hash = cases[0].hash.clone();
    cases.push(Case {
        name: "control: current form re-indented".to_owned(),
        path,
        hash,
    });
    cases
}

/// A missing tool fails the test, naming what to run.
fn missing(what: &str) {
    panic!("{what} is missing: run scripts/setup");
}

/// Compares the SDK's hashes (`expected`, one line per case) with ours.
fn compare(oracle: &str, cases: &[Case], output: &str) {
    let names: Vec<String> = cases.iter().map(|c| c.name.clone()).collect();
    let expected: Vec<String> = output.lines().map(|l| l.trim().to_owned()).collect();
    let ours: Vec<String> = cases.iter().map(|c| c.hash.clone()).collect();
    assert_same_results(&names, oracle, &expected, &ours);
}

fn paths(cases: &[Case]) -> Vec<String> {
    cases
        .iter()
        .map(|c| c.path.to_str().unwrap().to_owned())
        .collect()
}

#[test]
fn compose_hash_matches_the_npm_dstack_sdk_on_every_variant() {
    let node_works = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !node_works {
        missing("node (Node.js)");
        return;
    }
    let manifest = tools_dir()
        .join("node/node_modules")
        .join(NPM_SDK)
        .join("package.json");
    if !manifest.is_file() {
        missing(&format!(
            "{NPM_SDK}@{NPM_SDK_VERSION} ({})",
            manifest.display()
        ));
        return;
    }
    let package = node_package(NPM_SDK, NPM_SDK_VERSION);

    let dir = tempfile::tempdir().unwrap();
    let cases = rendered_variants(dir.path());
    let script = r#"
        const fs = require("fs");
        const { getComposeHash } = require(process.argv[1]);
        for (const path of process.argv.slice(2)) {
            const appCompose = JSON.parse(fs.readFileSync(path, "utf8"));
            console.log(getComposeHash(appCompose));
        }
    "#;
    let package = package.to_str().unwrap().to_owned();
    let mut args = vec![package.as_str()];
    let files = paths(&cases);
    args.extend(files.iter().map(String::as_str));
    let output = node_eval(script, &args);
    compare(
        &format!("{NPM_SDK} {NPM_SDK_VERSION} getComposeHash"),
        &cases,
        &output,
    );
}

#[test]
fn compose_hash_matches_the_pypi_dstack_sdk_on_every_variant() {
    let python = tools_dir().join("venv/bin/python");
    if !python.exists() {
        missing(&format!("the tools virtualenv ({})", python.display()));
        return;
    }
    let version = Command::new(&python)
        .args([
            "-c",
            "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))",
            PYPI_SDK,
        ])
        .output()
        .unwrap();
    if !version.status.success() {
        missing(&format!(
            "PyPI {PYPI_SDK}=={PYPI_SDK_VERSION} in {}",
            python.display()
        ));
        return;
    }
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        PYPI_SDK_VERSION,
        "{PYPI_SDK} in {} is not {PYPI_SDK_VERSION}: run scripts/setup",
        python.display()
    );

    let dir = tempfile::tempdir().unwrap();
    let cases = rendered_variants(dir.path());
    let script = "\
import json, sys
from dstack_sdk import get_compose_hash
for path in sys.argv[1:]:
    with open(path, encoding='utf-8') as f:
        print(get_compose_hash(json.load(f)))
";
    let out = Command::new(&python)
        .arg("-c")
        .arg(script)
        .args(paths(&cases))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{PYPI_SDK} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    compare(
        &format!("{PYPI_SDK} {PYPI_SDK_VERSION} get_compose_hash"),
        &cases,
        &String::from_utf8(out.stdout).unwrap(),
    );
}
