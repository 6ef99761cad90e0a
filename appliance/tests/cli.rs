//! The `appliance` command line: configuration loading and errors, through the real
//! binary. (Its presence also makes `cargo test --workspace` build the binary that the
//! end-to-end tests in `tests/` start.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn appliance() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_appliance"));
    // Start from a clean environment for APPLIANCE_* keys.
    for (key, _) in std::env::vars() {
        if key.starts_with("APPLIANCE_") {
            cmd.env_remove(key);
        }
    }
    cmd
}

#[test]
fn print_config_applies_file_then_environment() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("appliance.toml");
    std::fs::write(
        &file,
        "data_dir = \"/srv/appliance\"\n[http]\nmax_body_bytes = 1024\n",
    )
    .unwrap();
    let out = appliance()
        .args(["print-config", "--config"])
        .arg(&file)
        .env("APPLIANCE_HTTP__MAX_BODY_BYTES", "2048")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("data_dir = \"/srv/appliance\""), "{text}");
    assert!(
        text.contains("max_body_bytes = 2048"),
        "environment wins: {text}"
    );
    assert!(
        text.contains("listen = \"0.0.0.0:8443\""),
        "defaults fill the rest: {text}"
    );
}

#[test]
fn bad_configuration_is_a_clear_error_and_exit_code_2() {
    let out = appliance()
        .args(["serve"])
        .env("APPLIANCE_LISTN", "x")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("listn"), "{err}");

    let out = appliance()
        .args(["serve", "--config", "/nonexistent/appliance.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/appliance.toml"));
}

#[test]
fn serve_fails_cleanly_when_the_port_is_taken() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = appliance()
        .args(["serve"])
        .env("APPLIANCE_LISTEN", addr.to_string())
        .env("APPLIANCE_DATA_DIR", dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot listen"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn serve_gives_up_on_a_keyservice_that_never_answers() {
    let dir = tempfile::tempdir().unwrap();
    let out = appliance()
        .args(["serve"])
        .env("APPLIANCE_LISTEN", "127.0.0.1:0")
        .env("APPLIANCE_DATA_DIR", dir.path())
        .env(
            "APPLIANCE_KEYSERVICE__SOCKET",
            dir.path().join("absent.sock"),
        )
        .env("APPLIANCE_KEYSERVICE__START_WAIT_MS", "600")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    // It waited (and said so) before giving up, and names what it waited for.
    assert!(err.contains("waiting for it before serving"), "{err}");
    assert!(err.contains("absent.sock"), "{err}");
}
