//! `evidence verify --json` as the tests read it: the exit code and the JSON report
//! ([`run`]), and one check of the report by its id ([`check`]).

use std::process::Command;

use serde_json::Value;

/// Runs `command` (an `evidence verify … --json`) and returns its exit code and report; a
/// run that printed no JSON fails the test with what it printed.
pub fn run(mut command: Command) -> (i32, Value) {
    let out = command.output().expect("run evidence");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "evidence printed no JSON report ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), report)
}

/// The check `id` of `report` (its `status`, `detail`, …); a missing check fails the test.
pub fn check<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .expect("the report has a checks array")
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id} in {report:#}"))
}
