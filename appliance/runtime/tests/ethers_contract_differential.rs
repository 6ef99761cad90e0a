//! `ethers.utils.Interface` (with the ABI fragments) and `ethers.Contract`.
//!
//! * Differential: the cases of `tests/data/ethers-contract-differential.js` run once in
//!   node with the real ethers 5.7.2 (installed by `scripts/setup` into the tools cache)
//!   and once in boa with our native subset; every serialised result must be identical.
//!   Contract cases use a provider/signer stub written in that file, which records each
//!   request it gets, so what ethers sends is compared as well as what it returns.
//! * In the sandbox: the reference service's two action examples (read a contract, send an
//!   ERC-20 transfer) against the same kind of stub, and what is deliberately not
//!   supported (ENS names, event listeners).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod differential;

use serde_json::json;
use test_support::action_worker::{Worker, failed, null, ok};

const CASES_FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/ethers-contract-differential.js"
);

#[test]
fn interface_and_contract_match_real_ethers_5_7_2() {
    differential::assert_same_as_node(CASES_FILE, 250);
}

/// A provider stub answering `eth_call` for an ERC-20 and recording what it is sent.
const STUB: &str = r#"
const TOKEN = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const seen = [];
const erc20 = new ethers.utils.Interface([
  "function balanceOf(address owner) view returns (uint256)",
  "function decimals() view returns (uint8)",
  "function transfer(address to, uint amount) returns (bool)",
]);
const provider = {
  _isProvider: true,
  call: async (tx, blockTag) => {
    seen.push({ to: tx.to, data: tx.data, blockTag: blockTag === undefined ? null : blockTag });
    const f = erc20.getFunction(tx.data.substring(0, 10));
    if (f.name === "decimals") return erc20.encodeFunctionResult(f, [6]);
    return erc20.encodeFunctionResult(f, [ethers.utils.parseUnits("1234.5", 6)]);
  },
};
"#;

#[test]
fn the_read_a_contract_example_runs_unchanged() {
    let mut w = Worker::spawn();
    let code = format!(
        r#"{STUB}
        async function main({{ owner }}) {{
            const abi = ["function balanceOf(address owner) view returns (uint256)",
                         "function decimals() view returns (uint8)"];
            const contract = new ethers.Contract(TOKEN, abi, provider);
            const balance = await contract.balanceOf(owner);
            const decimals = await contract.decimals();
            console.log("balance", balance.toString());
            return {{ balance: ethers.utils.formatUnits(balance, decimals), decimals, seen }};
        }}"#
    );
    let done = w.run(
        &code,
        json!({"owner": "0x8ba1f109551bD432803012645Ac136ddd64DBA72"}),
    );
    let owner_word = "0000000000000000000000008ba1f109551bd432803012645ac136ddd64dba72";
    assert_eq!(
        ok(&done),
        &json!({
            "balance": "1234.5",
            "decimals": 6,
            "seen": [
                {"to": "0x5FbDB2315678afecb367f032d93F642f64180aa3",
                 "data": format!("0x70a08231{owner_word}"), "blockTag": null},
                {"to": "0x5FbDB2315678afecb367f032d93F642f64180aa3",
                 "data": "0x313ce567", "blockTag": null},
            ]
        })
    );
    assert_eq!(done.logs, "balance 1234500000\n");
}

#[test]
fn the_erc20_transfer_example_sends_through_the_signer() {
    let mut w = Worker::spawn();
    let code = format!(
        r#"{STUB}
        const sent = [];
        const signer = {{
          _isSigner: true, provider,
          getAddress: async () => "0x8ba1f109551bD432803012645Ac136ddd64DBA72",
          sendTransaction: async (tx) => {{
            sent.push({{ to: tx.to, from: tx.from, data: tx.data, gasLimit: tx.gasLimit.toString() }});
            return {{ hash: "0x" + "ab".repeat(32), wait: async () => ({{ logs: [], status: 1 }}) }};
          }},
        }};
        async function main() {{
            const token = new ethers.Contract(TOKEN, ["function transfer(address to, uint amount) returns (bool)"], signer);
            const tx = await token.transfer("0x0000000000000000000000000000000000001234",
                                            ethers.utils.parseUnits("2", 18), {{ gasLimit: 60000 }});
            const receipt = await tx.wait();
            return {{ hash: tx.hash, status: receipt.status, events: receipt.events, sent }};
        }}"#
    );
    let done = w.run(&code, null());
    let amount = "0000000000000000000000000000000000000000000000001bc16d674ec80000";
    let to_word = "0000000000000000000000000000000000000000000000000000000000001234";
    assert_eq!(
        ok(&done),
        &json!({
            "hash": format!("0x{}", "ab".repeat(32)),
            "status": 1,
            "events": [],
            "sent": [{
                "to": "0x5FbDB2315678afecb367f032d93F642f64180aa3",
                "from": "0x8ba1f109551bD432803012645Ac136ddd64DBA72",
                "data": format!("0xa9059cbb{to_word}{amount}"),
                "gasLimit": "60000",
            }]
        })
    );
}

#[test]
fn a_wallet_is_the_signer_of_reads_and_estimates() {
    // What the provider receives is what ethers 5.7.2 sends for the same code (checked in
    // node): the Wallet adds its address as `from`.
    let mut w = Worker::spawn();
    let code = r#"
        const seen = [];
        const iface = new ethers.utils.Interface(["function balanceOf(address) view returns (uint256)",
            "function transfer(address to, uint amount) returns (bool)"]);
        const provider = {
          _isProvider: true,
          call: async (tx, blockTag) => {
            seen.push(["call", JSON.stringify(tx), blockTag === undefined ? null : blockTag]);
            return iface.encodeFunctionResult("balanceOf", [42]);
          },
          estimateGas: async (tx) => { seen.push(["estimateGas", JSON.stringify(tx)]); return ethers.BigNumber.from(50000); },
        };
        async function main() {
          const wallet = new ethers.Wallet("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d", provider);
          const c = new ethers.Contract("0x5FbDB2315678afecb367f032d93F642f64180aa3", iface, wallet);
          const b = await c.balanceOf(wallet.address);
          const g = await c.estimateGas.transfer(wallet.address, 1);
          return { b: b.toString(), g: g.toString(), seen };
        }"#;
    let done = w.run(code, null());
    let from = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
    let word = "00000000000000000000000070997970c51812dc3a010c7d01b50e0d17dc79c8";
    let to = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
    // Key order as JSON.stringify shows it: data, to, from.
    let call = format!(r#"{{"data":"0x70a08231{word}","to":"{to}","from":"{from}"}}"#);
    let one = format!("{:064x}", 1);
    let estimate = format!(r#"{{"data":"0xa9059cbb{word}{one}","to":"{to}","from":"{from}"}}"#);
    assert_eq!(
        ok(&done),
        &json!({"b": "42", "g": "50000", "seen": [["call", call, null], ["estimateGas", estimate]]})
    );
}

#[test]
fn a_write_without_a_signer_and_a_revert_fail_as_in_ethers() {
    let mut w = Worker::spawn();
    let code = format!(
        r#"{STUB}
        async function main() {{
            const c = new ethers.Contract(TOKEN, ["function transfer(address to, uint amount) returns (bool)"], provider);
            try {{ await c.transfer(TOKEN, 1); }} catch (e) {{ return [e.code, e.operation, e.message]; }}
        }}"#
    );
    let done = w.run(&code, null());
    assert_eq!(
        ok(&done),
        &json!([
            "UNSUPPORTED_OPERATION",
            "sendTransaction",
            "sending a transaction requires a signer (operation=\"sendTransaction\", code=UNSUPPORTED_OPERATION, version=contracts/5.7.0)"
        ])
    );

    let code = r#"
        const reason = ethers.utils.defaultAbiCoder.encode(["string"], ["not enough"]);
        const provider = { _isProvider: true, call: async () => "0x08c379a0" + reason.substring(2) };
        async function main() {
            const c = new ethers.Contract("0x5FbDB2315678afecb367f032d93F642f64180aa3",
                ["function balanceOf(address) view returns (uint256)"], provider);
            await c.balanceOf("0x5FbDB2315678afecb367f032d93F642f64180aa3");
        }"#;
    let done = w.run(code, null());
    let message = failed(&done, action_runtime::protocol::ErrorKind::Exception);
    assert!(
        message.starts_with(
            "Error: call revert exception; VM Exception while processing transaction: reverted with \
             reason string \"not enough\" [ See: https://links.ethers.org/v5-errors-CALL_EXCEPTION ] \
             (method=\"balanceOf(address)\", "
        ),
        "{message}"
    );
}

#[test]
fn ens_names_are_refused_with_a_clear_error() {
    let mut w = Worker::spawn();
    let code = format!(
        r#"{STUB}
        async function main() {{
            const out = [];
            try {{ new ethers.Contract("vitalik.eth", ["function f()"], provider); }}
            catch (e) {{ out.push(e.message); }}
            const c = new ethers.Contract(TOKEN, ["function balanceOf(address) view returns (uint256)"], provider);
            try {{ await c.balanceOf("vitalik.eth"); }} catch (e) {{ out.push(e.code + " " + e.operation); }}
            try {{ await c.balanceOf("0x1234"); }} catch (e) {{ out.push(e.reason); }}
            return {{ out, seen }};
        }}"#
    );
    let done = w.run(&code, null());
    assert_eq!(
        ok(&done),
        &json!({
            "out": [
                "ENS names are not supported in actions (there is no ENS resolver); use a 0x address \
                 (operation=\"resolveName\", name=\"vitalik.eth\", code=UNSUPPORTED_OPERATION, version=contracts/5.7.0)",
                "UNSUPPORTED_OPERATION resolveName",
                "invalid address",
            ],
            "seen": []
        })
    );
}

#[test]
fn event_listeners_are_refused_and_query_filter_is_the_way() {
    let mut w = Worker::spawn();
    let code = r#"
        async function main() {
            const c = new ethers.Contract("0x5FbDB2315678afecb367f032d93F642f64180aa3",
                ["event Transfer(address indexed from, address indexed to, uint256 value)"]);
            try { c.on("Transfer", () => {}); } catch (e) { return [e.code, e.operation, e.reason]; }
        }"#;
    let done = w.run(code, null());
    assert_eq!(
        ok(&done),
        &json!([
            "UNSUPPORTED_OPERATION",
            "on",
            "contract event listeners are not supported in actions; use queryFilter"
        ])
    );
}

#[test]
fn the_abi_classes_are_lazy_members_that_read_and_assign_like_data() {
    let mut w = Worker::spawn();
    // Listed before use; read at one site again and again (the first read builds them);
    // an assignment stores the value.
    let code = r#"
        function main() {
            const E = ethers;
            const listed = ["Interface", "FunctionFragment", "ParamType"].every((k) => Object.keys(E.utils).includes(k))
                && Object.keys(E).includes("Contract");
            const read = () => E.utils.Interface;
            const contract = () => E.Contract;
            const got = [read(), read(), read()];
            const same = got.every((v) => v === got[0]) && contract() === contract();
            const iface = new got[2](["function f(uint256)"]);
            E.Contract = 5;
            const d = Object.getOwnPropertyDescriptor(E.utils, "Interface");
            return [listed, typeof got[0], same, iface.getSighash("f"), d.enumerable && d.configurable,
                    E.Contract, contract(), typeof E.BaseContract];
        }"#;
    let done = w.run(code, null());
    assert_eq!(
        ok(&done),
        &json!([true, "function", true, "0xb3de648b", true, 5, 5, "function"])
    );
}
