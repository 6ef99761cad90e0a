//! Actions that reach a chain, against the development stack's anvil (release binaries,
//! `appliance dev`): a contract read (`new ethers.Contract(…).balanceOf(who)` through
//! `ethers.providers.JsonRpcProvider`: network detection and one `eth_call`) at 1 and 8
//! clients, and a send-and-wait (`wallet.sendTransaction({to, value})` then `tx.wait()`:
//! chain id, nonce, fee data, gas estimate, the raw transaction and the receipt polls) at
//! one client, each wallet's transactions being sequential by nature. Every JSON-RPC
//! request goes from the worker to the appliance, which sends it to anvil. Prints a table
//! (p50, p99, actions per second, from the closed-loop clients of `e2e::load`).
//!
//! Run with `scripts/bench` (it builds the release binaries first), or
//! `cargo bench -p e2e --bench chain_actions` after `cargo build --release --bins`.
//! `BENCH_SECONDS` sets each row's duration (default 5).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::net::SocketAddr;
use std::time::Duration;

use e2e::DevStack;
use e2e::load::{self, Connections, Request, Target};
use serde_json::json;

/// Anvil's development account #8 (unlocked: anvil signs for it).
const FUNDER: &str = "0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f";

/// Creation code of a contract whose every call returns the word 42: `CODECOPY` of the
/// 10-byte runtime `PUSH1 42 PUSH1 0 MSTORE PUSH1 32 PUSH1 0 RETURN`, returned. Read as
/// an ERC-20, `balanceOf(anyone)` is 42.
const ANSWER_42: &str = "0x600a600c600039600a6000f3602a60005260206000f3";

const READ: &str = r#"async function main({ rpc, token, who }) {
  const provider = new ethers.providers.JsonRpcProvider(rpc);
  const erc20 = new ethers.Contract(token, ["function balanceOf(address) view returns (uint256)"], provider);
  return (await erc20.balanceOf(who)).toString();
}"#;

const SEND: &str = r#"async function main({ rpc, pkpId, to }) {
  const provider = new ethers.providers.JsonRpcProvider(rpc);
  const wallet = new ethers.Wallet(await Lit.Actions.getPrivateKey({ pkpId }), provider);
  const tx = await wallet.sendTransaction({ to, value: 1 });
  const receipt = await tx.wait();
  return { status: receipt.status };
}"#;

/// Waits for `hash` to be mined; its receipt.
async fn mined(stack: &DevStack, hash: &serde_json::Value) -> serde_json::Value {
    for _ in 0..600 {
        let receipt = stack
            .anvil("eth_getTransactionReceipt", json!([hash]))
            .await;
        if !receipt.is_null() {
            return receipt;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{hash} was not mined in 30 s");
}

/// `clients` keep-alive clients sending `requests` in turn for `duration`.
async fn measure(
    target: &Target,
    requests: &[Request],
    clients: usize,
    duration: Duration,
) -> load::Outcome {
    load::run_rotating(target, requests, Connections::KeepAlive, clients, duration).await
}

#[tokio::main]
async fn main() {
    let stack = DevStack::start();
    let reply = stack
        .post("/new_account", None, json!({"account_name": "bench"}))
        .await;
    let key = reply.assert_ok()["api_key"].as_str().unwrap().to_owned();
    let wallet = e2e::wallet_from(
        stack
            .post("/create_wallet", Some(&key), json!({}))
            .await
            .assert_ok(),
    );
    let funding = stack
        .anvil(
            "eth_sendTransaction",
            // 100 ETH
            json!([{"from": FUNDER, "to": wallet.address, "value": "0x56bc75e2d63100000"}]),
        )
        .await;
    mined(&stack, &funding).await;
    let deploy = stack
        .anvil(
            "eth_sendTransaction",
            json!([{"from": FUNDER, "data": ANSWER_42}]),
        )
        .await;
    let token = mined(&stack, &deploy).await["contractAddress"].clone();

    let addr: SocketAddr = stack
        .base_url
        .trim_start_matches("https://")
        .parse()
        .unwrap();
    let pem = std::fs::read(stack.certificate()).unwrap();
    let target = Target::new(addr, &pem);
    let read = [load::action(
        READ,
        json!({"rpc": stack.rpc_url, "token": token, "who": FUNDER}),
        &key,
    )
    .expecting(r#""response":"42""#)];
    let send = [load::action(
        SEND,
        json!({"rpc": stack.rpc_url, "pkpId": wallet.pkp_id, "to": FUNDER}),
        &key,
    )
    .expecting(r#""status":1"#)];

    // warm up workers, connections and the worker's code cache
    measure(&target, &read, 2, Duration::from_secs(1)).await;
    measure(&target, &send, 1, Duration::from_secs(1)).await;

    let seconds: u64 = load::env_or("BENCH_SECONDS", 5);
    let duration = Duration::from_secs(seconds);
    let rows = [
        (
            "contract read",
            1,
            measure(&target, &read, 1, duration).await,
        ),
        (
            "contract read",
            8,
            measure(&target, &read, 8, duration).await,
        ),
        ("send + wait", 1, measure(&target, &send, 1, duration).await),
    ];
    println!(
        "{:<14} {:>8} {:>9} {:>9} {:>10} {:>10} {:>10}",
        "action", "clients", "requests", "failures", "p50 (ms)", "p99 (ms)", "actions/s"
    );
    for (name, clients, outcome) in &rows {
        println!(
            "{:<14} {:>8} {:>9} {:>9} {:>10.2} {:>10.2} {:>10.1}",
            name,
            clients,
            outcome.requests,
            outcome.failures,
            outcome.p50.as_secs_f64() * 1e3,
            outcome.p99.as_secs_f64() * 1e3,
            outcome.per_second
        );
    }
    for (name, _, outcome) in &rows {
        assert_eq!(outcome.failures, 0, "{name}: {:?}", outcome.first_failure);
    }
    println!("against anvil (automine) on loopback; every JSON-RPC request through the appliance");
}
