//! Runs node scripts that `require` the npm packages of the tools cache, for tests that
//! compare the service with the JavaScript libraries its clients use.

use std::process::Command;

use crate::tools::node_modules;

/// Runs `script` with node (`node -e script args…`), with `require` able to load the npm
/// packages of the tools cache; returns its standard output. Fails clearly when node or
/// the tools are missing, or when the script fails.
pub fn node_eval(script: &str, args: &[&str]) -> String {
    let out = Command::new("node")
        .arg("-e")
        .arg(script)
        .args(args)
        .env("NODE_PATH", node_modules())
        .output()
        .unwrap_or_else(|err| panic!("cannot run node ({err}): install Node.js"));
    assert!(
        out.status.success(),
        "node failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("node printed UTF-8")
}

/// The check of a differential test: `expected` (what `oracle` gave) and `got` (ours) have
/// one result per case of `cases`, and every result is the same; the failure names each
/// case that differs, with both results.
pub fn assert_same_results(cases: &[String], oracle: &str, expected: &[String], got: &[String]) {
    assert_eq!(
        expected.len(),
        cases.len(),
        "{oracle} ran a different number of cases"
    );
    assert_eq!(got.len(), cases.len(), "we ran a different number of cases");
    let failures: Vec<String> = cases
        .iter()
        .zip(expected.iter().zip(got.iter()))
        .filter(|(_, (e, g))| e != g)
        .map(|(c, (e, g))| format!("case {c}\n   {oracle}: {e}\n   ours: {g}"))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from {oracle}:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
