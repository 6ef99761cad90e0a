//! The runnable examples of `examples/`, each against the development stack as a user
//! runs it (`examples/README.md`):
//!
//! * the SDK packs: a copy of `sdk/js` as a fresh checkout has it (no build output) goes
//!   through `npm pack`, whose `prepare` script builds it; the tarball installs into an
//!   empty folder, and `examples/node/quickstart.mjs` runs from there (account, group,
//!   wallet, action, a usage key that runs it and may do nothing else);
//! * `examples/verify-pin-run` (Rust, `appliance-client`) verifies the dev stack's
//!   evidence with the same inputs as the `evidence verify` command it prints, pins its
//!   certificate and runs an action;
//! * the actions of `examples/actions/reference/` run in `reference_examples`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

use e2e::{DevStack, workspace_root};

fn check(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `npm` with nothing of the caller's npm or node settings that could change the result.
fn npm(dir: &Path) -> Command {
    let mut cmd = Command::new("npm");
    cmd.current_dir(dir)
        .env_remove("NODE_OPTIONS")
        .env_remove("NODE_PATH")
        .env_remove("npm_config_prefix");
    cmd
}

/// Copies `from` into `to` (files and directories, `skip` left out).
fn copy_tree(from: &Path, to: &Path, skip: &[&str]) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if skip.contains(&name.to_string_lossy().as_ref()) {
            continue;
        }
        let target = to.join(&name);
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target, skip);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_packs_and_the_node_quickstart_runs_from_a_fresh_folder() {
    let root = workspace_root();
    let sdk = root.join("sdk/js");
    assert!(
        sdk.join("node_modules").is_dir(),
        "sdk/js/node_modules is missing: run scripts/setup"
    );
    // A checkout-like copy: the SDK's sources, the OpenAPI snapshot its build reads, the
    // directory its browser bundle goes to; its npm packages linked, not copied.
    let work = tempfile::tempdir().unwrap();
    let copy = work.path().join("checkout/sdk/js");
    copy_tree(&sdk, &copy, &["node_modules", "dist"]);
    std::os::unix::fs::symlink(sdk.join("node_modules"), copy.join("node_modules")).unwrap();
    let snapshot = work.path().join("checkout/appliance/tests/data");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::copy(
        root.join("appliance/tests/data/openapi.json"),
        snapshot.join("openapi.json"),
    )
    .unwrap();
    std::fs::create_dir_all(work.path().join("checkout/appliance/dashboard/assets")).unwrap();

    let packed = work.path().join("packed");
    std::fs::create_dir_all(&packed).unwrap();
    let out = npm(&copy)
        .args(["pack", "--loglevel=error", "--pack-destination"])
        .arg(&packed)
        .output()
        .expect("npm runs (install Node.js and npm)");
    check(&out, "npm pack (with its prepare build)");
    let tarball = std::fs::read_dir(&packed)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "tgz"))
        .expect("npm pack wrote a tarball");

    let fresh = work.path().join("fresh");
    std::fs::create_dir_all(&fresh).unwrap();
    std::fs::write(
        fresh.join("package.json"),
        r#"{"private": true, "type": "module"}"#,
    )
    .unwrap();
    let out = npm(&fresh)
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--prefer-offline",
            "--loglevel=error",
        ])
        .arg(&tarball)
        .output()
        .unwrap();
    check(&out, "npm install of the packed SDK");
    assert!(
        fresh
            .join("node_modules/@appliance/sdk/dist/index.js")
            .is_file(),
        "the installed package has its build"
    );
    std::fs::copy(
        root.join("examples/node/quickstart.mjs"),
        fresh.join("quickstart.mjs"),
    )
    .unwrap();

    let stack = DevStack::start();
    let out = Command::new("node")
        .arg("quickstart.mjs")
        .arg(&stack.base_url)
        .current_dir(&fresh)
        .env_remove("NODE_OPTIONS")
        .env_remove("NODE_PATH")
        .env("NODE_EXTRA_CA_CERTS", stack.certificate())
        .output()
        .unwrap();
    let stdout = check(&out, "examples/node/quickstart.mjs");
    let signer = stdout
        .lines()
        .find_map(|l| l.strip_prefix("action logs: signing as "))
        .unwrap_or_else(|| panic!("no signer in:\n{stdout}"));
    let holds = stdout
        .lines()
        .find_map(|l| l.split_once(" holds wallet ").map(|(_, w)| w))
        .unwrap_or_else(|| panic!("no wallet in:\n{stdout}"));
    assert_eq!(signer, holds, "the action signed with the group's wallet");
    assert!(
        stdout.contains(r#"action response: {"message":"hello from quickstart","signature":"0x"#),
        "{stdout}"
    );
    assert!(
        stdout.contains("as expected, the usage key may not create groups (403)"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_example_verifies_pins_and_runs() {
    let stack = DevStack::start();
    // the inputs of the verify command the dev stack prints, to the example's flags
    let words: Vec<&str> = stack.verify_command.split_whitespace().collect();
    let after = |flag: &str| {
        words
            .iter()
            .position(|w| *w == flag)
            .and_then(|i| words.get(i + 1))
            .map(|v| (*v).to_owned())
            .unwrap_or_else(|| panic!("no {flag} in {:?}", stack.verify_command))
    };
    let (url, ca_file, rpc_url) = (after("--url"), after("--ca-file"), after("--rpc-url"));
    assert!(words.contains(&"--allow-simulated"), "{words:?}");

    let out = Command::new(e2e::binary("verify-pin-run"))
        .args([&url, "--ca-file", &ca_file, "--rpc-url", &rpc_url])
        .arg("--allow-simulated")
        .output()
        .unwrap();
    let stdout = check(&out, "examples/verify-pin-run");
    assert!(stdout.starts_with(&format!("verified {url}\n")), "{stdout}");
    assert!(
        stdout.contains("quote: SIMULATED (development stack, NOT confidential)"),
        "{stdout}"
    );
    assert!(stdout.contains("  pinned certificate: sha256 "), "{stdout}");
    assert!(
        stdout.contains("action logs: running with 21\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(r#"action response: {"doubled":42}"#),
        "{stdout}"
    );

    // Without --allow-simulated the same stack is refused, before any account exists.
    let out = Command::new(e2e::binary("verify-pin-run"))
        .args([&url, "--ca-file", &ca_file, "--rpc-url", &rpc_url])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("account created"), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("did not verify") && stderr.contains("quote"),
        "the simulated quote is what fails: {stderr}"
    );
}
