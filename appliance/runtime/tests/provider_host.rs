//! `ethers.providers` and the parent: which `rpc` calls a provider makes, how they count
//! against the action's fetches, and how the parent's refusals, timeouts and budget
//! limits reach the action.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use action_runtime::protocol::{
    ErrorKind, HostCall, HostRequest, JobLimits, ReplyOutcome, RpcReply, RpcTarget,
};
use serde_json::{Value, json};
use test_support::action_worker::{Worker, failed, job, ok};

/// A chain with id 31337 at block 16.
fn chain(call: &HostCall) -> ReplyOutcome {
    let HostRequest::Rpc(req) = &call.request else {
        panic!("unexpected host call {call:?}");
    };
    let body: Value = serde_json::from_str(&req.body).unwrap();
    let result = match body["method"].as_str().unwrap() {
        "eth_chainId" => json!("0x7a69"),
        "eth_blockNumber" => json!("0x10"),
        "eth_getBalance" => json!("0x2a"),
        other => panic!("unexpected method {other}"),
    };
    reply(RpcReply::Response {
        status: 200,
        body: json!({"jsonrpc": "2.0", "id": body["id"], "result": result}).to_string(),
    })
}

fn reply(r: RpcReply) -> ReplyOutcome {
    ReplyOutcome::Ok(serde_json::to_value(r).unwrap())
}

fn targets(calls: &[HostCall]) -> Vec<RpcTarget> {
    calls
        .iter()
        .map(|c| match &c.request {
            HostRequest::Rpc(r) => r.target.clone(),
            other => panic!("not rpc: {other:?}"),
        })
        .collect()
}

#[test]
fn a_provider_names_its_endpoint_by_url_by_chain_id_or_by_default() {
    let mut w = Worker::spawn();
    let code = "async function main() {
        const P = ethers.providers;
        return [
            await new P.JsonRpcProvider('https://rpc.example/v1').getBlockNumber(),
            await new P.JsonRpcProvider(undefined, 31337).getBlockNumber(),
            await new P.JsonRpcProvider('chain:31337').getBlockNumber(),
            await new P.StaticJsonRpcProvider({url: 'https://other.example'}).getBlockNumber(),
            await new P.JsonRpcProvider().getBlockNumber(),
            new P.JsonRpcProvider(undefined, 31337).connection.url,
        ];
    }";
    let (done, calls) = w.run_job(job(code, Value::Null), chain);
    assert_eq!(ok(&done), &json!([16, 16, 16, 16, 16, "chain:31337"]));
    let url = |u: &str| RpcTarget::Url(u.to_owned());
    // Each provider asks for the chain id once, then the block number.
    assert_eq!(
        targets(&calls),
        [
            url("https://rpc.example/v1"),
            url("https://rpc.example/v1"),
            RpcTarget::Chain(31337),
            RpcTarget::Chain(31337),
            RpcTarget::Chain(31337),
            RpcTarget::Chain(31337),
            url("https://other.example"),
            url("https://other.example"),
            url("http://localhost:8545"),
            url("http://localhost:8545"),
        ]
    );
}

#[test]
fn requests_count_against_the_fetch_limit() {
    let mut w = Worker::spawn();
    let mut j = job(
        "async function main() {
            const p = new ethers.providers.JsonRpcProvider('https://rpc.example');
            const balance = await p.getBalance('0x8ba1f109551bD432803012645Ac136ddd64DBA72');
            await fetch('https://api.example/');
            return await p.getBlockNumber();
        }",
        Value::Null,
    );
    j.limits = JobLimits {
        max_fetches: 3,
        ..JobLimits::default()
    };
    let (done, calls) = w.run_job(j, |call| match &call.request {
        HostRequest::Fetch(_) => ReplyOutcome::Ok(json!({"status": 200, "body": ""})),
        _ => chain(call),
    });
    let msg = failed(&done, ErrorKind::Limit);
    assert!(msg.contains("fetch limit reached: at most 3"), "{msg}");
    assert_eq!(calls.len(), 3, "eth_chainId, eth_getBalance, the fetch");
}

#[test]
fn the_parents_refusal_timeout_and_budget_reach_the_action() {
    let mut w = Worker::spawn();
    let code = "async function main() {
        const p = new ethers.providers.JsonRpcProvider('http://127.0.0.1:8545');
        try { await p.getBlockNumber() } catch (e) { return [e.code, e.event, e.message] }
    }";
    let refusal = "JSON-RPC to 127.0.0.1 is not allowed (not globally reachable: loopback)";
    let (done, _) = w.run_job(job(code, Value::Null), |_| {
        reply(RpcReply::Failed {
            message: refusal.into(),
        })
    });
    let resp = ok(&done).clone();
    assert_eq!(resp[0], "NETWORK_ERROR");
    assert_eq!(resp[1], "noNetwork");
    assert!(resp[2].as_str().unwrap().contains(refusal), "{resp}");

    // A timeout while sending: ethers' TIMEOUT, with the bound.
    let code = "async function main() {
        const p = new ethers.providers.StaticJsonRpcProvider('https://rpc.example', 31337);
        try { await p.getBlockNumber() } catch (e) { return [e.code, e.reason, e.timeout] }
    }";
    let (done, _) = w.run_job(job(code, Value::Null), |_| {
        reply(RpcReply::Timeout { timeout_ms: 10_000 })
    });
    assert_eq!(ok(&done), &json!(["TIMEOUT", "timeout", 10000]));

    // The action's RPC budget: catchable, and a `limit` if it ends the action.
    let budget = "JSON-RPC limit reached: an action may send and receive at most 100 bytes";
    let code = "async function main() {
        const p = new ethers.providers.StaticJsonRpcProvider('https://rpc.example', 31337);
        let caught;
        try { await p.getBlockNumber() } catch (e) { caught = e.message }
        console.log(caught);
        await p.getBlockNumber();
    }";
    let (done, _) = w.run_job(job(code, Value::Null), |_| {
        reply(RpcReply::Limit {
            message: budget.into(),
        })
    });
    let msg = failed(&done, ErrorKind::Limit);
    assert!(msg.contains(budget), "{msg}");
    assert_eq!(done.logs, format!("{budget}\n"));
}
