//! Chains from actions, on the development stack (`appliance dev` with its anvil):
//!
//! * the start-up output names the URL actions use for the dev chain;
//! * an action written with `new ethers.providers.JsonRpcProvider(url)` reads the block
//!   number, a balance and the chain id, through the appliance (the dev chain is on
//!   `[actions.rpc]`'s list although it is on loopback), and by chain id too;
//! * an action sends ETH from a wallet (PKP) that a dev account funded, with
//!   `wallet.sendTransaction` and `tx.wait()`, and the recipient's balance on anvil
//!   changes by exactly that value;
//! * a loopback URL that is not on the list is refused, whoever serves it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e::DevStack;
use serde_json::json;

/// Anvil's development account #8 (unlocked: anvil signs for it).
const FUNDER: &str = "0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f";
/// Anvil's development account #9, which nothing in the dev stack spends from.
const BYSTANDER: &str = "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_read_and_write_the_dev_chain_through_the_appliance() {
    let stack = DevStack::start();
    assert!(
        stack.rpc_url.starts_with("http://127.0.0.1:"),
        "{}",
        stack.rpc_url
    );
    let reply = stack
        .post("/new_account", None, json!({"account_name": "chains"}))
        .await;
    let key = reply.assert_ok()["api_key"].as_str().unwrap().to_owned();

    // Reads, by URL and by chain id.
    let read = "async function main({url, who}) {
        const p = new ethers.providers.JsonRpcProvider(url);
        const [n, balance, network] = [await p.getBlockNumber(), await p.getBalance(who), await p.getNetwork()];
        const byId = new ethers.providers.JsonRpcProvider(undefined, 31337);
        return {n, balance: balance.toString(), chainId: network.chainId,
                byIdBalance: (await byId.getBalance(who)).toString()};
    }";
    let resp = stack
        .run(&key, read, json!({"url": stack.rpc_url, "who": BYSTANDER}))
        .await;
    let latest = u64::from_str_radix(
        stack
            .anvil("eth_blockNumber", json!([]))
            .await
            .as_str()
            .unwrap()[2..]
            .as_ref(),
        16,
    )
    .unwrap();
    let n = resp["n"].as_u64().unwrap();
    assert!(
        n >= 1 && n <= latest,
        "block {n}, anvil at {latest}: {resp}"
    );
    let expected = stack.balance(BYSTANDER).await.to_string();
    assert_eq!(resp["balance"], expected.as_str());
    assert_eq!(resp["byIdBalance"], expected.as_str());
    assert_eq!(resp["chainId"], 31337);

    // A wallet, funded from a dev account, pays a fresh address.
    let reply = stack.post("/create_wallet", Some(&key), json!({})).await;
    let wallet = e2e::wallet_from(reply.assert_ok());
    let funding = stack
        .anvil(
            "eth_sendTransaction",
            json!([{"from": FUNDER, "to": wallet.address, "value": "0xde0b6b3a7640000"}]),
        )
        .await;
    // Anvil answers with the hash and mines on its own task: wait for the receipt.
    let mined = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while stack
        .anvil("eth_getTransactionReceipt", json!([funding]))
        .await
        .is_null()
    {
        assert!(
            tokio::time::Instant::now() < mined,
            "funding {funding} never mined"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(stack.balance(&wallet.address).await, 10u128.pow(18));
    let recipient = "0x1111111111111111111111111111111111111111";
    let before = stack.balance(recipient).await;
    let send = "async function main({url, pkpId, to}) {
        const key = await Lit.Actions.getPrivateKey({pkpId});
        const provider = new ethers.providers.JsonRpcProvider(url);
        const wallet = new ethers.Wallet(key).connect(provider);
        const tx = await wallet.sendTransaction({to, value: ethers.utils.parseEther('0.25')});
        const receipt = await tx.wait();
        return {hash: tx.hash, from: tx.from, type: tx.type, status: receipt.status,
                mined: receipt.blockNumber, confirmations: receipt.confirmations,
                left: (await wallet.getBalance()).toString()};
    }";
    let resp = stack
        .run(
            &key,
            send,
            json!({"url": stack.rpc_url, "pkpId": wallet.pkp_id, "to": recipient}),
        )
        .await;
    assert_eq!(resp["from"], wallet.address.as_str(), "{resp}");
    assert_eq!(resp["status"], 1, "{resp}");
    assert_eq!(
        resp["type"], 2,
        "anvil has a base fee: an EIP-1559 transaction"
    );
    assert!(resp["confirmations"].as_u64().unwrap() >= 1);
    let after = stack.balance(recipient).await;
    assert_eq!(
        after - before,
        25 * 10u128.pow(16),
        "the recipient got 0.25 ETH"
    );
    let mined = stack
        .anvil("eth_getTransactionByHash", json!([resp["hash"]]))
        .await;
    assert_eq!(
        mined["from"].as_str().unwrap(),
        wallet.address.to_lowercase(),
        "{mined}"
    );
    let left: u128 = resp["left"].as_str().unwrap().parse().unwrap();
    assert_eq!(left, stack.balance(&wallet.address).await);

    // `wait()` polls again 50 ms after a miss, then ever more slowly, never pausing the
    // whole `pollingInterval` at first: with an interval far longer than an action may
    // run, a send to a chain that mines at once still completes (it timed out before).
    let patient = send.replace(
        "const wallet =",
        "provider.pollingInterval = 600000;\n        const wallet =",
    );
    assert_ne!(patient, send);
    let resp = stack
        .run(
            &key,
            &patient,
            json!({"url": stack.rpc_url, "pkpId": wallet.pkp_id, "to": recipient}),
        )
        .await;
    assert_eq!(resp["status"], 1, "{resp}");
    assert_eq!(
        stack.balance(recipient).await - after,
        25 * 10u128.pow(16),
        "the second payment arrived too"
    );
    assert!(
        left < 75 * 10u128.pow(16),
        "the value and the gas were paid"
    );

    // Loopback URLs that are not on the list are refused before anything is sent, even
    // the dev chain's own port under another name.
    let refused = "async function main({urls}) {
        const out = [];
        for (const url of urls) {
            try { await new ethers.providers.JsonRpcProvider(url).getBlockNumber(); out.push('answered') }
            catch (e) { out.push(e.code + ': ' + e.message) }
        }
        return out;
    }";
    let other_name = stack.rpc_url.replace("127.0.0.1", "localhost");
    let resp = stack
        .run(
            &key,
            refused,
            json!({"urls": ["http://127.0.0.1:9/", other_name]}),
        )
        .await;
    let out: Vec<String> = serde_json::from_value(resp).unwrap();
    assert!(
        out[0].starts_with("NETWORK_ERROR")
            && out[0].contains("JSON-RPC to 127.0.0.1 is not allowed"),
        "{out:?}"
    );
    assert!(
        out[1].starts_with("NETWORK_ERROR") && out[1].contains("no address an action may reach"),
        "{out:?}"
    );
}
