//! Differential test: the cases of `tests/data/ethers-differential.js` run once in node
//! with the real ethers 5.7.2 (installed by `scripts/setup` into the tools cache) and once
//! in boa with our native subset; every serialised result must be identical.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use boa_engine::builtins::promise::PromiseState;
use boa_engine::{Context, Source};

const CASES_FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/ethers-differential.js"
);
const MARKER: &str = "\n@@ETHERS-DIFFERENTIAL-RESULT@@\n";

fn run_node() -> Vec<String> {
    let ethers_dir = test_support::tools::node_package("ethers", "5.7.2");
    let wrapper = format!(
        "const fs = require('fs');\
         globalThis.ethers = require(process.env.ETHERS_DIR);\
         (0, eval)(fs.readFileSync(process.env.CASES_FILE, 'utf8'));\
         runAll().then(s => process.stdout.write({marker} + s));",
        marker = serde_json::to_string(MARKER).expect("marker")
    );
    let out = Command::new("node")
        .arg("-e")
        .arg(&wrapper)
        .env("ETHERS_DIR", &ethers_dir)
        .env("CASES_FILE", CASES_FILE)
        .output()
        .unwrap_or_else(|e| panic!("cannot run node ({e}); install nodejs and run scripts/setup"));
    assert!(
        out.status.success(),
        "node failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).expect("utf-8 from node");
    let (_, json) = stdout.split_once(MARKER).expect("node printed no result");
    serde_json::from_str(json).expect("node result is a JSON array of strings")
}

fn run_boa() -> Vec<String> {
    let mut ctx = Context::default();
    action_runtime::ethers::install(&mut ctx).expect("install ethers");
    let script = std::fs::read_to_string(CASES_FILE).expect("cases file");
    ctx.eval(Source::from_bytes(&script))
        .unwrap_or_else(|e| panic!("evaluating the cases file in boa: {e}"));
    let p = ctx
        .eval(Source::from_bytes("runAll()"))
        .unwrap_or_else(|e| panic!("runAll in boa: {e}"));
    ctx.run_jobs().expect("jobs");
    let p = p.as_promise().expect("runAll returns a promise");
    let s = match p.state() {
        PromiseState::Fulfilled(v) => v.as_string().expect("string").to_std_string_escaped(),
        PromiseState::Rejected(e) => panic!("runAll rejected in boa: {}", e.display()),
        PromiseState::Pending => panic!("runAll still pending in boa"),
    };
    serde_json::from_str(&s).expect("boa result is a JSON array of strings")
}

fn case_texts() -> Vec<String> {
    // The expressions themselves, for naming failures: evaluate CASES in a plain context.
    let mut ctx = Context::default();
    action_runtime::ethers::install(&mut ctx).expect("install ethers");
    let script = std::fs::read_to_string(CASES_FILE).expect("cases file");
    ctx.eval(Source::from_bytes(&script)).expect("cases file");
    let v = ctx
        .eval(Source::from_bytes("JSON.stringify(CASES)"))
        .expect("CASES");
    serde_json::from_str(&v.as_string().expect("string").to_std_string_escaped())
        .expect("cases json")
}

#[test]
fn native_ethers_matches_real_ethers_5_7_2() {
    let expected = run_node();
    let got = run_boa();
    let cases = case_texts();
    assert!(
        cases.len() >= 300,
        "the case list shrank to {}",
        cases.len()
    );
    assert_eq!(
        expected.len(),
        cases.len(),
        "node ran a different number of cases"
    );
    assert_eq!(
        got.len(),
        cases.len(),
        "boa ran a different number of cases"
    );
    let failures: Vec<String> = cases
        .iter()
        .zip(expected.iter().zip(got.iter()))
        .filter(|(_, (e, g))| e != g)
        .map(|(c, (e, g))| format!("case {c}\n   ethers: {e}\n   ours:   {g}"))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from ethers 5.7.2:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
