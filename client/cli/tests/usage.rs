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

/// `appliance-cli --json profile show` (or `set`) with exactly `env` (and the config
/// directory): the shown profile and stderr.
fn with_env(
    config: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_appliance-cli"))
        .args(args)
        .env_clear()
        .env("APPLIANCE_CLI_CONFIG_DIR", config)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{args:?}: {stderr}");
    let shown = serde_json::from_slice(&out.stdout).unwrap();
    (shown, stderr)
}

#[test]
fn the_clis_own_variables_set_the_profile_and_the_former_names_still_work_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let set = ["--json", "profile", "set"];

    // The APPLIANCE_CLI_* names: used, nothing said.
    let (shown, stderr) = with_env(
        tmp.path(),
        &set,
        &[
            ("APPLIANCE_CLI_URL", "https://new.example"),
            ("APPLIANCE_CLI_API_KEY", "new-key"),
            ("APPLIANCE_CLI_PROFILE", "work"),
        ],
    );
    assert_eq!(shown["profile"], "work");
    assert_eq!(shown["settings"]["url"], "https://new.example");
    assert_eq!(shown["settings"]["api_key"], "(set, not shown)");
    assert!(stderr.is_empty(), "{stderr}");

    // The former names: still used, with a warning naming the new one (never the key).
    let (shown, stderr) = with_env(
        tmp.path(),
        &set,
        &[
            ("APPLIANCE_URL", "https://old.example"),
            ("APPLIANCE_API_KEY", "old-key"),
            ("APPLIANCE_PROFILE", "legacy"),
        ],
    );
    assert_eq!(shown["profile"], "legacy");
    assert_eq!(shown["settings"]["url"], "https://old.example");
    assert_eq!(shown["settings"]["api_key"], "(set, not shown)");
    for (old, new) in [
        ("APPLIANCE_URL", "APPLIANCE_CLI_URL"),
        ("APPLIANCE_API_KEY", "APPLIANCE_CLI_API_KEY"),
        ("APPLIANCE_PROFILE", "APPLIANCE_CLI_PROFILE"),
    ] {
        assert!(
            stderr.contains(&format!(
                "appliance-cli: warning: {old} is deprecated: rename it {new}"
            )),
            "{old}: {stderr}"
        );
    }
    assert!(!stderr.contains("old-key"), "{stderr}");
    let stored = std::fs::read_to_string(tmp.path().join("profiles.toml")).unwrap();
    assert!(stored.contains("old-key") && stored.contains("new-key"));

    // Both set: the new name wins; the old one is reported as ignored.
    let (shown, stderr) = with_env(
        tmp.path(),
        &["--json", "profile", "show"],
        &[
            ("APPLIANCE_CLI_PROFILE", "work"),
            ("APPLIANCE_PROFILE", "legacy"),
        ],
    );
    assert_eq!(shown["profile"], "work");
    assert_eq!(shown["settings"]["url"], "https://new.example");
    assert!(
        stderr.contains("APPLIANCE_PROFILE is ignored (APPLIANCE_CLI_PROFILE or --profile is set)"),
        "{stderr}"
    );
}
