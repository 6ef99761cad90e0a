//! Every action example the reference service publishes (its `examples.mdx`,
//! `patterns.mdx` and `imports.mdx`, kept verbatim in `examples/actions/reference/`) runs
//! on the development stack: `tests/reference/run.mjs` starts `appliance dev` with its
//! anvil, an HTTPS stand-in for the ESM CDN and HTTP stand-ins for the services the
//! examples call, deploys an ERC-20 for the contract examples, and checks each answer as
//! a user would (signatures recover to the wallet, ETH arrives, ciphertexts open, module
//! output equals the package's under node). Changes to an example: addresses and keys only.
//!
//! Needs node, the npm test tools (`scripts/setup`), the SDK's build (`scripts/test` makes
//! it) and the workspace binaries.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use e2e::workspace_root;

#[test]
fn every_reference_example_runs_on_the_dev_stack() {
    for name in ["keyservice", "action-worker", "worker-launcher"] {
        e2e::binary(name);
    }
    let root = workspace_root();
    // the CDN stand-in's certificate (the appliance trusts it through its CA bundle)
    let dir = tempfile::tempdir().unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let (cert_file, key_file) = (dir.path().join("cdn.pem"), dir.path().join("cdn-key.pem"));
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    let mut child = Command::new("node")
        .arg(root.join("tests/reference/run.mjs"))
        .arg("--appliance")
        .arg(e2e::binary("appliance"))
        .arg("--anvil")
        .arg(test_support::tools::anvil_binary())
        .arg("--cdn-cert")
        .arg(&cert_file)
        .arg("--cdn-key")
        .arg(&key_file)
        .env_remove("NODE_OPTIONS")
        .env_remove("NODE_PATH")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs (install Node.js)");
    let (mut stdout, mut stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).unwrap();
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).unwrap();
        text
    });
    let deadline = Instant::now() + Duration::from_secs(600);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            // run.mjs stops what it started on SIGTERM
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            std::thread::sleep(Duration::from_secs(5));
            let _ = child.kill();
            panic!("tests/reference/run.mjs ran for 10 minutes");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    assert!(
        status.success(),
        "tests/reference/run.mjs failed ({status}):\n{stdout}\n{stderr}"
    );
    // every example file has its line, and runs (or is a gap docs/compatibility.md lists)
    let dir = root.join("examples/actions/reference");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|f| f.strip_suffix(".js").map(str::to_owned))
        .collect();
    names.sort();
    assert_eq!(
        names.len(),
        22,
        "the reference publishes 22 actions on those pages"
    );
    let compatibility = std::fs::read_to_string(root.join("docs/compatibility.md")).unwrap();
    for name in &names {
        let line = stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no result for {name}:\n{stdout}"));
        assert!(
            line.ends_with(" runs")
                || (line.contains("KNOWN GAP") && compatibility.contains(name.as_str())),
            "{name}: {line}"
        );
    }
}
