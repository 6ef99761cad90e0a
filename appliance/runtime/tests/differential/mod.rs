//! The harness the differential tests share: a cases file (`tests/data/*.js`, defining
//! `CASES` and `runAll()`, which resolves to a JSON array of one serialised result per
//! case) run once in node (with the real ethers 5.7.2 from the tools cache that
//! `scripts/setup` fills, and its own ICU `Intl`, in UTC) and once in boa with this
//! crate's native ethers and `Intl`, and the two lists compared case by case.

use std::process::Command;

use boa_engine::builtins::promise::PromiseState;
use boa_engine::{Context, Source};

/// Printed by node before its result, so that anything a case logs is not parsed.
const MARKER: &str = "\n@@ETHERS-DIFFERENTIAL-RESULT@@\n";

/// `cases_file`'s results under node (the real ethers 5.7.2, node's `Intl`).
pub fn node_results(cases_file: &str) -> Vec<String> {
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
        .env("CASES_FILE", cases_file)
        .env("TZ", "UTC")
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

/// A boa context with the native ethers and `Intl`, and `cases_file` evaluated.
pub fn boa_context(cases_file: &str) -> Context {
    let mut ctx = Context::default();
    action_runtime::ethers::install(&mut ctx).expect("install ethers");
    action_runtime::intl::install(&mut ctx).expect("install Intl");
    let script = std::fs::read_to_string(cases_file).expect("cases file");
    ctx.eval(Source::from_bytes(&script))
        .unwrap_or_else(|e| panic!("evaluating the cases file in boa: {e}"));
    ctx
}

/// `cases_file`'s results in boa (the native ethers and `Intl`).
pub fn boa_results(cases_file: &str) -> Vec<String> {
    let mut ctx = boa_context(cases_file);
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

/// The cases' own text (`CASES`), to name the ones that differ.
pub fn case_texts(cases_file: &str) -> Vec<String> {
    let mut ctx = boa_context(cases_file);
    let v = ctx
        .eval(Source::from_bytes("JSON.stringify(CASES)"))
        .expect("CASES");
    serde_json::from_str(&v.as_string().expect("string").to_std_string_escaped())
        .expect("cases json")
}

/// Runs `cases_file` in both and fails, naming each differing case, unless every result
/// is identical; `at_least` guards against a case list that shrank.
pub fn assert_same_as_node(cases_file: &str, at_least: usize) {
    let expected = node_results(cases_file);
    let got = boa_results(cases_file);
    let cases = case_texts(cases_file);
    assert!(
        cases.len() >= at_least,
        "the case list shrank to {}",
        cases.len()
    );
    test_support::node::assert_same_results(&cases, "node", &expected, &got);
}
