//! The example's command line: without a URL it prints its usage, and a flag it does not
//! know is refused, both with exit status 2 and before any connection. (Its run against
//! the development stack is `cargo test -p e2e examples::`, which needs this binary built:
//! cargo builds a package's binaries for the package's own integration tests.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_verify-pin-run"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn without_a_url_it_prints_its_usage() {
    let (code, stderr) = run(&[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.starts_with("usage: verify-pin-run <base-url>"),
        "{stderr}"
    );
}

#[test]
fn an_unknown_flag_is_refused() {
    let (code, stderr) = run(&["https://localhost:8443", "--trust-me"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("unexpected argument \"--trust-me\""),
        "{stderr}"
    );
    let (code, stderr) = run(&["https://localhost:8443", "--ca-file"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--ca-file needs a file"), "{stderr}");
}
