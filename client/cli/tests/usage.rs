//! The binary as a user first meets it: `--help` documents the exit statuses, a usage
//! error exits 2, and a command without a profile says how to make one (exit 6) without
//! sending anything. (Cargo also builds the binary for the end-to-end tests through this
//! test: `tests/e2e/cli.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn cli(config: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_appliance-cli"))
        .args(args)
        .env_clear()
        .env("APPLIANCE_CLI_CONFIG_DIR", config)
        .output()
        .unwrap()
}

#[test]
fn help_documents_the_exit_statuses() {
    let tmp = tempfile::tempdir().unwrap();
    let out = cli(tmp.path(), &["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for status in [
        "3 the deployment did not verify",
        "6 the profile",
        "7 an action",
    ] {
        assert!(text.contains(status), "{status:?} missing from:\n{text}");
    }
}

#[test]
fn usage_errors_exit_2_and_a_missing_profile_exits_6() {
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(cli(tmp.path(), &["frobnicate"]).status.code(), Some(2));
    let out = cli(tmp.path(), &["wallets", "list"]);
    assert_eq!(out.status.code(), Some(6));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("profile set --url"), "{err}");
    // Nothing was written: the config directory stays empty.
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}
