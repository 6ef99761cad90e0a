//! Wallet signatures made live by viem (`privateKeyToAccount(key).signTypedData`, what a
//! wallet's `eth_signTypedData_v4` returns), over the spec's typed-data envelope.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// Signs `typed_data` with `key`; a `null` `message.address` is first set to the key's
/// own address. Prints `{typed_data, signature, address}`.
const SIGN_JS: &str = r#"
const { privateKeyToAccount } = require('viem/accounts');
const { key, typed_data } = JSON.parse(process.argv[1]);
const account = privateKeyToAccount(key);
if (typed_data.message.address === null) typed_data.message.address = account.address;
account.signTypedData({
  domain: typed_data.domain,
  types: typed_data.types,
  primaryType: typed_data.primaryType,
  message: typed_data.message,
}).then((signature) => {
  process.stdout.write(JSON.stringify({ typed_data, signature, address: account.address }));
}).catch((e) => { console.error(e); process.exit(1); });
"#;

fn run(key: &str, typed_data: &Value) -> Value {
    let arg = json!({"key": key, "typed_data": typed_data}).to_string();
    serde_json::from_str(&test_support::node::node_eval(SIGN_JS, &[&arg])).expect("viem's output")
}

/// viem's signature of `typed_data` by `key`, exactly as given.
pub fn sign_typed_data(key: &str, typed_data: &Value) -> String {
    run(key, typed_data)["signature"]
        .as_str()
        .expect("a signature")
        .to_owned()
}

/// The address of `key`, as viem derives it (EIP-55).
pub fn address(key: &str) -> String {
    let script = "const { privateKeyToAccount } = require('viem/accounts'); \
                  process.stdout.write(privateKeyToAccount(process.argv[1]).address);";
    test_support::node::node_eval(script, &[key])
}

/// The spec's envelope for `primary`, as a wallet library sends it (numbers).
pub fn envelope(primary: &str, chain_id: u64, address: &str, issued_at: i64) -> Value {
    json!({
        "types": {
            "EIP712Domain": [
                {"name": "name", "type": "string"},
                {"name": "version", "type": "string"},
                {"name": "chainId", "type": "uint256"}
            ],
            primary: [
                {"name": "address", "type": "address"},
                {"name": "issuedAt", "type": "uint256"}
            ]
        },
        "primaryType": primary,
        "domain": {"name": "Service ChainSecured", "version": "1", "chainId": chain_id},
        "message": {"address": address, "issuedAt": issued_at}
    })
}

/// The request body `{typed_data, signature}` for `primary`, signed by `key` about
/// itself (`message.address` is the key's address; one node run).
pub fn signed(key: &str, primary: &str, chain_id: u64, issued_at: i64) -> Value {
    let mut typed_data = envelope(primary, chain_id, "", issued_at);
    typed_data["message"]["address"] = Value::Null;
    let out = run(key, &typed_data);
    json!({"typed_data": out["typed_data"], "signature": out["signature"]})
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_secs() as i64
}
