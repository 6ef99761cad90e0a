//! Every entry of `tests/data/ethers-v5.json` (computed with ethers 5.7.2) through the
//! native `ethers` subset, each in a fresh boa context.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use boa_engine::builtins::promise::PromiseState;
use boa_engine::{Context, Source};
use serde_json::Value;

/// Evaluates `code` (an expression yielding a promise of a string) with `ethers` installed.
fn eval_async_string(code: &str) -> Result<String, String> {
    let mut ctx = Context::default();
    action_runtime::ethers::install(&mut ctx).map_err(|e| format!("install: {e}"))?;
    let v = ctx
        .eval(Source::from_bytes(code))
        .map_err(|e| format!("eval: {e}"))?;
    ctx.run_jobs().map_err(|e| format!("jobs: {e}"))?;
    let p = v.as_promise().ok_or_else(|| "not a promise".to_owned())?;
    match p.state() {
        PromiseState::Fulfilled(v) => v
            .as_string()
            .map(|s| s.to_std_string_escaped())
            .ok_or_else(|| "not a string".to_owned()),
        PromiseState::Rejected(e) => Err(format!("rejected: {}", e.display())),
        PromiseState::Pending => Err("pending".to_owned()),
    }
}

#[test]
fn every_vector_matches_ethers_5_7_2() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/ethers-v5.json"
    ))
    .expect("vectors");
    let data: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(data["generator"], "ethers 5.7.2");
    let vectors = data["vectors"].as_array().expect("vectors array");
    assert!(vectors.len() >= 6, "expected the full vector set");
    let mut failures = Vec::new();
    for (i, v) in vectors.iter().enumerate() {
        let pk = serde_json::to_string(&v["private_key"]).expect("pk");
        let msg = serde_json::to_string(&v["message"]).expect("msg");
        let code = format!(
            r#"(async () => {{
                const w = new ethers.Wallet({pk});
                const m = {msg};
                const sig = await w.signMessage(m);
                return JSON.stringify({{
                    address: w.address,
                    public_key: w.publicKey,
                    private_key: w.privateKey,
                    hash_message: ethers.utils.hashMessage(m),
                    signature: sig,
                    keccak_utf8: ethers.utils.keccak256(ethers.utils.toUtf8Bytes(m)),
                    id: ethers.utils.id(m),
                    verified: ethers.utils.verifyMessage(m, sig),
                    recovered: ethers.utils.recoverAddress(ethers.utils.hashMessage(m), sig),
                    computed: ethers.utils.computeAddress({pk}),
                    bytes_sig: await w.signMessage(ethers.utils.toUtf8Bytes(m)),
                }});
            }})()"#
        );
        let out = match eval_async_string(&code) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("vector {i}: {e}"));
                continue;
            }
        };
        let got: Value = serde_json::from_str(&out).expect("result json");
        for key in [
            "address",
            "public_key",
            "private_key",
            "hash_message",
            "signature",
            "keccak_utf8",
            "id",
        ] {
            if got[key] != v[key] {
                failures.push(format!(
                    "vector {i} ({:?}): {key}: got {} want {}",
                    v["message"], got[key], v[key]
                ));
            }
        }
        // Derived checks: recovery gives the signer; bytes of the same text sign the same.
        for key in ["verified", "recovered", "computed"] {
            if got[key] != v["address"] {
                failures.push(format!(
                    "vector {i}: {key}: got {} want {}",
                    got[key], v["address"]
                ));
            }
        }
        if got["bytes_sig"] != v["signature"] {
            failures.push(format!(
                "vector {i}: signMessage(bytes) differs from signMessage(string)"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `install` defines `ethers` lazily; it must still look like a plain global.
#[test]
fn lazy_global_behaves_like_a_plain_global() {
    let eval = |code: &str| -> String {
        let mut ctx = Context::default();
        action_runtime::ethers::install(&mut ctx).expect("install");
        let v = ctx.eval(Source::from_bytes(code)).expect("eval");
        v.to_string(&mut ctx)
            .expect("string")
            .to_std_string_escaped()
    };
    assert_eq!(eval("typeof ethers"), "object");
    assert_eq!(
        eval("ethers === ethers && ethers.utils === globalThis.ethers.utils"),
        "true"
    );
    assert_eq!(eval("ethers.version"), "ethers/5.7.2");
    assert_eq!(eval("ethers = 5; ethers"), "5");
    assert_eq!(eval("ethers; ethers = 6; ethers"), "6");
    // It stays an accessor (a data property swapped in by its getter trips boa's inline
    // cache): configurable, not enumerable, readable and assignable.
    assert_eq!(
        eval(
            "typeof ethers; var d = Object.getOwnPropertyDescriptor(globalThis, 'ethers'); [typeof d.get, typeof d.set, d.configurable, d.enumerable].join()"
        ),
        "function,function,true,false"
    );
    // Read again and again at one site: the first read builds it, the others must not
    // trip over that (a function called twice, a loop, a member that is lazy as well).
    assert_eq!(
        eval(
            "function f() { return ethers.utils.id('a') } var out = [f(), f()]; for (var i = 0; i < 3; i++) out.push(typeof ethers.providers.JsonRpcProvider); out.join()"
        ),
        format!(
            "{0},{0},function,function,function",
            "0x3ac225168df54212a25c1c01fd35bebfea408fdac2e31ddd6f80a4bbf9a5f1cb"
        )
    );
    assert_eq!(
        eval("var a = ethers; ethers = 7; var b = ethers; ethers = a; [b, ethers === a].join()"),
        "7,true"
    );
    assert_eq!(eval("delete globalThis.ethers; typeof ethers"), "undefined");
    assert_eq!(eval("Object.keys(globalThis).includes('ethers')"), "false");
}

/// Error texts use the realm's original `JSON.stringify`, even when user code replaced it
/// before its first use of `ethers`.
#[test]
fn errors_do_not_use_a_replaced_json_stringify() {
    let mut ctx = Context::default();
    action_runtime::ethers::install(&mut ctx).expect("install");
    let v = ctx
        .eval(Source::from_bytes(
            "JSON.stringify = () => 'evil'; try { ethers.utils.getAddress('0x12') } catch (e) { e.message }",
        ))
        .expect("eval");
    assert_eq!(
        v.to_string(&mut ctx)
            .expect("string")
            .to_std_string_escaped(),
        "invalid address (argument=\"address\", value=\"0x12\", code=INVALID_ARGUMENT, version=address/5.7.0)"
    );
}
