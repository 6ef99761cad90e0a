//! Differential test of `ethers.providers` and the provider methods of `Wallet`: the cases
//! of `tests/data/provider-differential.js` run once in node with the real ethers 5.7.2
//! (its `JsonRpcProvider` talking over HTTP to `tests/data/provider-server.js`, which
//! answers from `tests/data/provider-fixtures.json`) and once as an action in the real
//! worker, whose `rpc` host calls this test answers from the same fixtures. Every
//! serialised result must be identical: formatted blocks, transactions, receipts, logs,
//! fee data, the transactions a wallet fills in and signs, and the errors' codes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use action_runtime::protocol::{HostRequest, JobLimits, ReplyOutcome, RpcReply, RpcTarget};
use serde_json::{Value, json};
use sha3::{Digest, Keccak256};
use test_support::action_worker::{Worker, job, ok};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
const MARKER: &str = "@@PROVIDER-DIFFERENTIAL@@";

fn fixtures() -> Vec<Value> {
    let text = std::fs::read_to_string(format!("{DATA}/provider-fixtures.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The answer to one JSON-RPC request on `chain`, by the rule of provider-server.js.
fn answer(fixtures: &[Value], chain: &str, req: &Value, unmatched: &mut Vec<Value>) -> Value {
    let id = req["id"].clone();
    let found = fixtures.iter().find(|f| {
        f["method"] == req["method"]
            && f["params"] == req["params"]
            && (f.get("chain").is_none() || f["chain"] == chain)
    });
    if let Some(f) = found {
        return match f.get("error") {
            Some(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
            None => json!({"jsonrpc": "2.0", "id": id, "result": f["result"]}),
        };
    }
    if req["method"] == "eth_sendRawTransaction" {
        let raw = req["params"][0].as_str().unwrap();
        let bytes = hex::decode(raw.trim_start_matches("0x")).unwrap();
        let hash = format!("0x{}", hex::encode(Keccak256::digest(&bytes)));
        return json!({"jsonrpc": "2.0", "id": id, "result": hash});
    }
    unmatched.push(json!({"chain": chain, "method": req["method"], "params": req["params"]}));
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no fixture"}})
}

fn run_node() -> (Vec<String>, Vec<Value>) {
    let ethers_dir = test_support::tools::node_package("ethers", "5.7.2");
    let out = Command::new("node")
        .arg(format!("{DATA}/provider-server.js"))
        .env("ETHERS_DIR", &ethers_dir)
        .env("FIXTURES", format!("{DATA}/provider-fixtures.json"))
        .env("CASES_FILE", format!("{DATA}/provider-differential.js"))
        .env("MARKER", MARKER)
        .output()
        .unwrap_or_else(|e| panic!("cannot run node ({e}); install nodejs and run scripts/setup"));
    assert!(
        out.status.success(),
        "node failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let (_, json) = stdout.split_once(MARKER).expect("node printed no result");
    let v: Value = serde_json::from_str(json).unwrap();
    let results = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_owned())
        .collect();
    (results, v["unmatched"].as_array().unwrap().clone())
}

/// The cases as one action; its `rpc` calls answered from the fixtures. Also returns the
/// requests that had no fixture and the targets seen.
fn run_worker() -> (Vec<String>, Vec<Value>, Vec<RpcTarget>) {
    let cases = std::fs::read_to_string(format!("{DATA}/provider-differential.js")).unwrap();
    let code = format!(
        "var URL_A = 'http://rpc.test/a'; var URL_B = 'http://rpc.test/b';\n{cases}\n\
         async function main() {{ return await runAll(); }}"
    );
    let mut j = job(&code, Value::Null);
    j.limits = JobLimits {
        max_fetches: 10_000,
        timeout_ms: Some(60_000),
        ..JobLimits::default()
    };
    let fixtures = fixtures();
    let mut unmatched = Vec::new();
    let mut targets = Vec::new();
    let mut w = Worker::spawn();
    let (done, _) = w.run_job(j, |call| {
        let HostRequest::Rpc(req) = &call.request else {
            panic!("unexpected host call {call:?}");
        };
        let RpcTarget::Url(url) = &req.target else {
            panic!("unexpected target {:?}", req.target);
        };
        targets.push(req.target.clone());
        let chain = url.rsplit('/').next().unwrap().to_owned();
        let body: Value = serde_json::from_str(&req.body).unwrap();
        let reply = answer(&fixtures, &chain, &body, &mut unmatched);
        ReplyOutcome::Ok(
            serde_json::to_value(RpcReply::Response {
                status: 200,
                body: reply.to_string(),
            })
            .unwrap(),
        )
    });
    let text = ok(&done)
        .as_str()
        .expect("runAll returns a string")
        .to_owned();
    let results = serde_json::from_str(&text).unwrap();
    (results, unmatched, targets)
}

fn case_texts() -> Vec<String> {
    // The expressions, for naming failures: the template literals of CASES, one per line
    // or several per line, in order.
    let cases = std::fs::read_to_string(format!("{DATA}/provider-differential.js")).unwrap();
    let start = cases.find("var CASES = [").unwrap();
    let end = start + cases[start..].find("\n];").unwrap();
    cases[start..end]
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn providers_and_wallets_match_real_ethers_5_7_2() {
    let (expected, node_unmatched) = run_node();
    let (got, unmatched, targets) = run_worker();
    let cases = case_texts();
    assert!(cases.len() >= 70, "the case list shrank to {}", cases.len());
    assert_eq!(
        expected.len(),
        cases.len(),
        "node ran a different number of cases"
    );
    assert_eq!(
        got.len(),
        cases.len(),
        "the worker ran a different number of cases"
    );
    assert!(
        node_unmatched.is_empty(),
        "ethers sent requests without a fixture: {node_unmatched:#?}"
    );
    assert!(
        unmatched.is_empty(),
        "the worker sent requests without a fixture: {unmatched:#?}"
    );
    assert!(
        targets
            .iter()
            .all(|t| matches!(t, RpcTarget::Url(u) if u.starts_with("http://rpc.test/"))),
        "every request went to the provider's URL"
    );
    test_support::node::assert_same_results(&cases, "ethers 5.7.2", &expected, &got);
}
