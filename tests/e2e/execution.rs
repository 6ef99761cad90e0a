//! Running actions: the JavaScript contract, keys through keyservice, permissions,
//! fetch, and the sandbox's limits, against the real appliance, keyservice and workers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use e2e::{Appliance, Reply, node_eval};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn run(app: &Appliance, key: &str, body: Value) -> Reply {
    app.post("/lit_action", Some(key), body).await
}

/// Runs `code` and returns the successful response.
async fn ok(app: &Appliance, key: &str, code: &str, params: Value) -> Value {
    let reply = run(app, key, json!({"code": code, "js_params": params})).await;
    let body = reply.assert_ok().clone();
    assert_eq!(body["has_error"], json!(false), "{}", reply.text);
    body["response"].clone()
}

/// Runs `code` expecting the code to fail; returns (kind, message, logs).
async fn failed(app: &Appliance, key: &str, code: &str) -> (String, String, String) {
    let reply = run(app, key, json!({"code": code})).await;
    let body = reply.assert_ok().clone();
    assert_eq!(body["has_error"], json!(true), "{}", reply.text);
    assert_eq!(body["response"], Value::Null, "{}", reply.text);
    (
        body["error"]["kind"].as_str().unwrap().to_owned(),
        body["error"]["message"].as_str().unwrap().to_owned(),
        body["logs"].as_str().unwrap().to_owned(),
    )
}

async fn account_wallet_pkp(app: &Appliance, key: &str) -> (String, String) {
    let wallets = app
        .get("/list_wallets", Some(key))
        .await
        .assert_ok()
        .clone();
    (
        wallets[0]["pkp_id"].as_str().unwrap().to_owned(),
        wallets[0]["wallet_address"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn hello_params_response_and_logs() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("js").await;

    assert_eq!(
        ok(
            &app,
            &key,
            r#"async function main() { return "hello"; }"#,
            Value::Null
        )
        .await,
        json!("hello")
    );
    let params = json!({"a": {"b": 2}, "c": [1, 3], "s": "x"});
    let got = ok(
        &app,
        &key,
        "async function main(p) { return {sum: p.a.b + p.c[1], echo: p}; }",
        params.clone(),
    )
    .await;
    assert_eq!(got, json!({"sum": 5, "echo": params}));
    // No params: main gets null. Top-level code runs first.
    let got = ok(
        &app,
        &key,
        "let seen = 'top'; async function main(p) { return [seen, p]; }",
        Value::Null,
    )
    .await;
    assert_eq!(got, json!(["top", null]));
    // setResponse wins over a return value; a string stays a string.
    let code = r#"async function main() { Lit.Actions.setResponse({response: JSON.stringify({a: 1})}); return "returned"; }"#;
    assert_eq!(ok(&app, &key, code, Value::Null).await, json!("{\"a\":1}"));
    // Logs: every console method, a line each.
    let reply = run(&app, &key, json!({"code": r#"async function main() {
        console.log("a", 1); console.info("b"); console.warn("c"); console.error("d"); console.debug("e");
        return null; }"#})).await;
    let body = reply.assert_ok();
    assert_eq!(body["logs"], json!("a 1\nb\nc\nd\ne\n"), "{}", reply.text);
    assert_eq!(body["has_error"], json!(false));
    // LitActions is the same object as Lit.
    assert_eq!(
        ok(
            &app,
            &key,
            "async function main() { return LitActions === Lit && Object.isFrozen(Lit); }",
            Value::Null
        )
        .await,
        json!(true)
    );
    // An exception is a 200 with the logs so far.
    let (kind, message, logs) = failed(
        &app,
        &key,
        r#"async function main() { console.log("before"); throw new Error("boom"); }"#,
    )
    .await;
    assert_eq!(kind, "exception");
    assert!(message.contains("boom"), "{message}");
    assert_eq!(logs, "before\n");
}

#[tokio::test]
async fn runs_by_ipfs_id() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("js").await;
    let code = r#"async function main(p) { return "by cid " + p.n; }"#;
    let cid = app
        .post("/get_lit_action_ipfs_id", None, json!(code))
        .await
        .assert_ok()
        .clone();
    let reply = run(&app, &key, json!({"ipfs_id": cid, "js_params": {"n": 7}})).await;
    assert_eq!(reply.assert_ok()["response"], json!("by cid 7"));
    // Code and a CID that does not match it: 422 (both well-formed, the pair invalid).
    // An unknown CID: 404.
    run(
        &app,
        &key,
        json!({"code": "async function main(){}", "ipfs_id": cid}),
    )
    .await
    .assert_error(422);
    let d = run(
        &app,
        &key,
        json!({"ipfs_id": "QmZr5qtNmcxBdpXF7K7hSkLbxK2wUVhMhZn29PKzhynvcR"}),
    )
    .await
    .assert_error(404);
    assert!(d.contains("QmZr5qtN"), "{d}");
    run(&app, &key, json!({})).await.assert_error(400);
}

#[tokio::test]
async fn private_key_signatures_match_real_ethers() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("signer").await;
    let (pkp, address) = account_wallet_pkp(&app, &key).await;
    let message = "Chipotle Rocks! ✓";
    let code = r#"async function main(p) {
        const pk = await Lit.Actions.getPrivateKey({pkpId: p.pkpId});
        const w = new ethers.Wallet(pk);
        const sig = await w.signMessage(p.m);
        const inKeyservice = await Lit.Actions.signEcdsa({pkpId: p.pkpId, toSign: ethers.utils.hashMessage(p.m)});
        return {pk, sig, inKeyservice, address: w.address};
    }"#;
    let got = ok(&app, &key, code, json!({"pkpId": pkp, "m": message})).await;
    assert_eq!(got["address"], json!(address), "the key is the wallet's");
    let expected = node_eval(
        "const {ethers} = require('ethers'); const w = new ethers.Wallet(process.argv[1]); w.signMessage(process.argv[2]).then(s => process.stdout.write(s));",
        &[got["pk"].as_str().unwrap(), message],
    );
    assert_eq!(got["sig"], json!(expected), "ethers 5.7.2 signs the same");
    assert_eq!(
        got["inKeyservice"],
        json!(expected),
        "signEcdsa inside keyservice agrees"
    );
    // A wallet named by its address works too.
    let got = ok(
        &app,
        &key,
        "async function main(p) { return await Lit.Actions.getPrivateKey({pkpId: p.a}); }",
        json!({"a": address}),
    )
    .await;
    assert!(got.as_str().unwrap().starts_with("0x"));
}

#[tokio::test]
async fn action_identity_is_consistent() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("identity").await;
    let code = r#"async function main(p) {
        const pk = await Lit.Actions.getLitActionPrivateKey();
        const pub = await Lit.Actions.getLitActionPublicKey({ipfsId: p.cid});
        const addr = await Lit.Actions.getLitActionWalletAddress({ipfsId: p.cid});
        let other;
        try { await Lit.Actions.getLitActionPrivateKey({ipfsId: p.other}); other = "leaked"; }
        catch (e) { other = "refused"; }
        return {fromKey: new ethers.Wallet(pk).address, fromPub: ethers.utils.computeAddress(pub), addr, pubLen: pub.length, other};
    }"#;
    let cid = app.cid_of(code).await;
    let other = "QmZr5qtNmcxBdpXF7K7hSkLbxK2wUVhMhZn29PKzhynvcR";
    let got = ok(&app, &key, code, json!({"cid": cid, "other": other})).await;
    assert_eq!(got["fromKey"], got["addr"]);
    assert_eq!(got["fromPub"], got["addr"]);
    assert_eq!(got["pubLen"], json!(68), "0x + 33 compressed bytes");
    assert_eq!(
        got["other"],
        json!("refused"),
        "an action may not take another action's key"
    );
    // The identity belongs to the code: another code has another address.
    let code2 = format!("{code}\n// another action");
    let cid2 = app.cid_of(&code2).await;
    let got2 = ok(&app, &key, &code2, json!({"cid": cid2, "other": other})).await;
    assert_ne!(got2["addr"], got["addr"]);
}

#[tokio::test]
async fn encrypt_and_decrypt() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("crypto").await;
    let (pkp, _) = account_wallet_pkp(&app, &key).await;
    let code = r#"async function main(p) {
        const c = await Lit.Actions.Encrypt({pkpId: p.pkpId, message: "attack at dawn"});
        const d = await Lit.Actions.Decrypt({pkpId: p.pkpId, ciphertext: c});
        const flipped = c.slice(0, 30) + (c[30] === "0" ? "1" : "0") + c.slice(31);
        let tampered;
        try { await Lit.Actions.Decrypt({pkpId: p.pkpId, ciphertext: flipped}); tampered = "accepted"; }
        catch (e) { tampered = String(e.message || e); }
        return {c, d, tampered};
    }"#;
    let got = ok(&app, &key, code, json!({"pkpId": pkp})).await;
    assert_eq!(got["d"], json!("attack at dawn"));
    let c = got["c"].as_str().unwrap();
    assert_eq!(
        c.len(),
        2 * (12 + "attack at dawn".len() + 16),
        "nonce ‖ ciphertext ‖ tag, hex"
    );
    assert!(
        got["tampered"]
            .as_str()
            .unwrap()
            .contains("decryption failed"),
        "{}",
        got["tampered"]
    );
}

#[tokio::test]
async fn wallets_outside_the_keys_groups_are_refused() {
    let app = Appliance::start().await;
    let (account, _) = app.new_account("groups").await;
    let code = r#"async function main(p) { return await Lit.Actions.signEcdsa({pkpId: p.pkpId, toSign: "0x" + "11".repeat(32)}); }"#;
    let cid = app.cid_of(code).await;
    let w_in = app.create_wallet(&account).await;
    let w_out = app.create_wallet(&account).await;
    let x = app
        .add_group(
            &account,
            json!({"group_name": "X", "pkp_ids_permitted": [w_in.pkp_id]}),
        )
        .await;
    app.add_action_to_group(&account, x, &cid).await;
    let (runner, _) = app
        .add_usage_key(&account, json!({"execute_in_groups": [x]}))
        .await;

    // The permitted wallet signs; the other one is refused with 403.
    let sig = ok(&app, &runner, code, json!({"pkpId": w_in.pkp_id})).await;
    assert_eq!(sig.as_str().unwrap().len(), 132);
    let d = run(
        &app,
        &runner,
        json!({"code": code, "js_params": {"pkpId": w_out.pkp_id}}),
    )
    .await
    .assert_error(403);
    assert!(d.contains("not available"), "{d}");
    // The account key may use every wallet of the account.
    ok(&app, &account, code, json!({"pkpId": w_out.pkp_id})).await;
    // Code that no group of the key permits is refused before it runs.
    let d = run(
        &app,
        &runner,
        json!({"code": "async function main() { return 1; }"}),
    )
    .await
    .assert_error(403);
    assert!(d.contains("execute_in_groups"), "{d}");
    // Another account's wallet does not exist for this account.
    let (other, _) = app.new_account("other").await;
    let (foreign, _) = account_wallet_pkp(&app, &other).await;
    run(
        &app,
        &account,
        json!({"code": code, "js_params": {"pkpId": foreign}}),
    )
    .await
    .assert_error(403);
    // A key without execution rights runs nothing.
    let (reader, _) = app.add_usage_key(&account, json!({})).await;
    run(
        &app,
        &reader,
        json!({"code": code, "js_params": {"pkpId": w_in.pkp_id}}),
    )
    .await
    .assert_error(403);
}

/// A minimal HTTP server on loopback answering every request with `body`; returns its
/// base URL and stops when the test ends.
async fn local_http_server(body: &'static str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nx-test: yes\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn fetch_with_limits() {
    let url = local_http_server("pong").await;
    let app = Appliance::start_with(&[("APPLIANCE_ACTIONS__FETCH_ALLOW_PRIVATE", "true")]).await;
    let (key, _) = app.new_account("fetcher").await;
    let got = ok(
        &app,
        &key,
        r#"async function main(p) {
        const r = await fetch(p.url + "/ping");
        return {status: r.status, ok: r.ok, text: await r.text(), header: r.headers.get("x-test")};
    }"#,
        json!({"url": url}),
    )
    .await;
    assert_eq!(
        got,
        json!({"status": 200, "ok": true, "text": "pong", "header": "yes"})
    );
    // 50 fetches are allowed; the 51st fails.
    let got = ok(
        &app,
        &key,
        r#"async function main(p) {
        let done = 0, error = null;
        for (let i = 0; i < 51; i++) {
            try { await fetch(p.url); done++; } catch (e) { error = String(e.message || e); }
        }
        return {done, error};
    }"#,
        json!({"url": url}),
    )
    .await;
    assert_eq!(got["done"], json!(50), "{got}");
    assert!(got["error"].as_str().unwrap().contains("50"), "{got}");

    // By default, private addresses are out of reach of actions.
    let strict = Appliance::start().await;
    let (key, _) = strict.new_account("strict").await;
    let got = ok(
        &strict,
        &key,
        r#"async function main(p) {
        try { await fetch(p.url); return "reached"; } catch (e) { return String(e.message || e); }
    }"#,
        json!({"url": url}),
    )
    .await;
    assert!(
        got.as_str().unwrap().contains("not allowed")
            || got.as_str().unwrap().contains("no address"),
        "{got}"
    );
}

#[tokio::test]
async fn infinite_loop_times_out_while_others_run() {
    let app = Appliance::start_with(&[("APPLIANCE_ACTIONS__TIMEOUT_MS", "3000")]).await;
    let (key, _) = app.new_account("loop").await;
    let started = Instant::now();
    let looping = {
        let client = app.client.clone();
        let url = app.api("/lit_action");
        let key = key.clone();
        tokio::spawn(async move {
            let r = client
                .post(url)
                .bearer_auth(key)
                .json(&json!({"code": "async function main() { while (true) {} }"}))
                .send()
                .await
                .unwrap();
            let elapsed = started.elapsed();
            (r.json::<Value>().await.unwrap(), elapsed)
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut hellos = Vec::new();
    for i in 0..50 {
        let client = app.client.clone();
        let url = app.api("/lit_action");
        let key = key.clone();
        hellos.push(tokio::spawn(async move {
            let r = client
                .post(url)
                .bearer_auth(key)
                .json(&json!({"code": "async function main(p) { return p; }", "js_params": i}))
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }));
    }
    for (i, h) in hellos.into_iter().enumerate() {
        let (status, body) = h.await.unwrap();
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["response"], json!(i), "{body}");
    }
    let (body, elapsed) = looping.await.unwrap();
    assert_eq!(body["has_error"], json!(true));
    assert_eq!(body["error"]["kind"], json!("timeout"), "{body}");
    assert!(
        elapsed < Duration::from_millis(3500),
        "timed out after {elapsed:?}, more than deadline + 0.5 s"
    );
    assert!(
        elapsed >= Duration::from_millis(2900),
        "ended early: {elapsed:?}"
    );
}

#[tokio::test]
async fn memory_recursion_and_size_limits_fail_cleanly() {
    let app = Appliance::start_with(&[("APPLIANCE_ACTIONS__MEMORY_LIMIT_MB", "64")]).await;
    let (key, _) = app.new_account("limits").await;

    let (kind, _, _) = failed(&app, &key, "async function main() { const a = []; while (true) { a.push('x'.repeat(1 << 20) + a.length); } }").await;
    assert_eq!(kind, "memory");
    let (kind, message, _) = failed(
        &app,
        &key,
        "function f(n) { return f(n + 1) + 1; } async function main() { return f(0); }",
    )
    .await;
    assert_eq!(kind, "limit", "{message}");
    let (kind, _, _) = failed(
        &app,
        &key,
        "async function main() { return 'x'.repeat(200 * 1024); }",
    )
    .await;
    assert_eq!(kind, "limit");
    let (kind, _, logs) = failed(&app, &key, "async function main() { for (let i = 0; i < 200; i++) console.log('y'.repeat(1024)); return 1; }").await;
    assert_eq!(kind, "limit");
    assert!(logs.len() <= 100 * 1024, "logs are capped: {}", logs.len());

    // The service is healthy and still runs actions.
    let health = app
        .send(app.request(reqwest::Method::GET, &app.url("/health")))
        .await;
    health.assert_ok();
    assert_eq!(
        ok(
            &app,
            &key,
            "async function main() { return 'alive'; }",
            Value::Null
        )
        .await,
        json!("alive")
    );
}

/// Registers 150 global symbols with 40 Ki-character keys, distinct per `run`. boa's
/// symbol registry is process-wide: about 35 MiB stay in the worker after each run.
const SYMBOL_FOR_LEAK: &str = "async function main(run) { const base = 'k'.repeat(40 * 1024); for (let i = 0; i < 150; i++) Symbol.for(run + ':' + i + ':' + base); return 'registered'; }";
/// An ordinary action of another tenant: 48 strings of 1 MiB, well within the default
/// 128 MiB on a worker of its own.
const ORDINARY: &str = "async function main() { const a = []; for (let i = 0; i < 48; i++) a.push('o'.repeat(1 << 20) + i); return a.length; }";

#[tokio::test]
async fn symbol_for_leftovers_never_make_another_tenants_action_fail() {
    // The reproduction: one worker, never retired on its own (no job count, the heap
    // threshold at its highest). The leaks add up in the worker, until an action run
    // there runs out of memory. A worker only ever serves one account
    // (`worker_binding::`), so that can only be the leaking account's own action: the
    // other tenant's job takes the place of the leaker's worker with a fresh one.
    let app = Appliance::start_with(&[
        ("APPLIANCE_ACTIONS__WORKERS", "1"),
        ("APPLIANCE_ACTIONS__WORKER_MAX_JOBS", "1000000"),
        ("APPLIANCE_ACTIONS__WORKER_RETIRE_HEAP_MB", "127"),
    ])
    .await;
    let (leaker, _) = app.new_account("leaker").await;
    let (tenant, _) = app.new_account("tenant").await;
    let mut failures = Vec::new();
    for round in 0..6 {
        // The leaking action itself may run out on the worker it has filled (the worker
        // is then replaced and the leaks start again).
        let reply = run(
            &app,
            &leaker,
            json!({"code": SYMBOL_FOR_LEAK, "js_params": round}),
        )
        .await;
        let body = reply.assert_ok().clone();
        if body["has_error"] == json!(true) {
            assert_eq!(body["error"]["kind"], json!("memory"), "{body}");
            continue;
        }
        let reply = run(&app, &leaker, json!({"code": ORDINARY})).await;
        let body = reply.assert_ok().clone();
        if body["has_error"] == json!(true) {
            assert_eq!(body["error"]["kind"], json!("memory"), "{body}");
            failures.push(round);
            break;
        }
        assert_eq!(body["response"], json!(48), "{body}");
    }
    assert!(
        !failures.is_empty(),
        "without retirement the leak should have reached the leaker's next action"
    );
    let reply = run(&app, &tenant, json!({"code": ORDINARY})).await;
    assert_eq!(
        reply.assert_ok()["response"],
        json!(48),
        "the other tenant runs on a fresh worker: {}",
        reply.text
    );
    drop(app);

    // The defaults: a worker is retired once its heap report passes a quarter of the
    // memory limit, so every ordinary action succeeds, round after round, the leaking
    // account's own included.
    let app = Appliance::start_with(&[("APPLIANCE_ACTIONS__WORKERS", "1")]).await;
    let (leaker, _) = app.new_account("leaker").await;
    let (tenant, _) = app.new_account("tenant").await;
    for round in 0..4 {
        let reply = run(
            &app,
            &leaker,
            json!({"code": SYMBOL_FOR_LEAK, "js_params": round}),
        )
        .await;
        assert_eq!(
            reply.assert_ok()["response"],
            json!("registered"),
            "round {round}: {}",
            reply.text
        );
        for key in [&leaker, &tenant] {
            let reply = run(&app, key, json!({"code": ORDINARY})).await;
            assert_eq!(
                reply.assert_ok()["response"],
                json!(48),
                "round {round}: {}",
                reply.text
            );
        }
    }
}

#[tokio::test]
async fn a_busy_worker_exits_when_the_appliance_is_killed() {
    let mut app = Appliance::start().await;
    let (key, _) = app.new_account("orphans").await;
    // `appliance dev` starts its workers through a worker-launcher child.
    let launcher = dev_launcher(&app);
    let workers = e2e::children_of(launcher, "action-worker");
    assert!(
        !workers.is_empty(),
        "the appliance keeps pre-started workers"
    );

    // One worker spins in an infinite loop: it never reads its pipe, so only the parent watch
    // can notice that the appliance is gone.
    let request = app
        .request(reqwest::Method::POST, &app.api("/lit_action"))
        .bearer_auth(&key)
        .json(&json!({"code": "async function main() { while (true) {} }"}));
    let busy = tokio::spawn(request.send());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !busy.is_finished(),
        "the looping action should still be running"
    );
    let mut workers = e2e::children_of(launcher, "action-worker");
    workers.push(launcher);
    app.kill9();
    let _ = busy.await;
    assert!(
        e2e::eventually(Duration::from_secs(3), || workers
            .iter()
            .all(|pid| !e2e::alive(*pid)))
        .await,
        "orphaned workers (or their launcher) kept running: {workers:?}"
    );
}

/// The one worker-launcher child of a dev appliance.
fn dev_launcher(app: &Appliance) -> u32 {
    let launchers = e2e::children_of(app.pid(), "worker-launcher");
    assert_eq!(launchers.len(), 1, "one launcher child: {launchers:?}");
    launchers[0]
}

/// Workers (action-worker processes, not a launcher naming the binary) whose parent is
/// `parent`.
fn worker_children(parent: u32) -> Vec<u32> {
    e2e::children_of(parent, "action-worker")
        .into_iter()
        .filter(|pid| {
            // argv[0] (the worker may re-execute itself through /proc/self/exe, which
            // renames its `comm`, but keeps its arguments).
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|raw| {
                raw.split(|b| *b == 0)
                    .next()
                    .is_some_and(|argv0| argv0.ends_with(b"action-worker"))
            })
        })
        .collect()
}

#[tokio::test]
async fn dev_runs_workers_through_its_launcher_child_and_serve_without_one_directly() {
    let dev = Appliance::start().await;
    let (key, _) = dev.new_account("dev-launcher").await;
    let launcher = dev_launcher(&dev);
    assert!(
        e2e::eventually(Duration::from_secs(10), || !worker_children(launcher)
            .is_empty())
        .await,
        "the launcher holds the pre-started workers"
    );
    assert!(
        worker_children(dev.pid()).is_empty(),
        "no worker is the appliance's own child"
    );
    let reply = dev
        .post(
            "/lit_action",
            Some(&key),
            json!({"code": "async function main() { return 6 * 7 }"}),
        )
        .await;
    assert_eq!(reply.assert_ok()["response"], json!(42));
    assert!(
        dev.log()
            .contains("action workers are started by the worker launcher")
    );
    assert!(
        dev.log().contains("--allow-same-uid-dev"),
        "the same-uid launcher says so"
    );

    // Positive control of the process check: `serve` with no launcher configured has
    // direct worker children, and says that this is for development only.
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("ks.sock");
    let _keyservice = e2e::KeyService::start(
        &socket,
        &dir.path().join("ks-state"),
        &dir.path().join("compose.json"),
    )
    .await;
    let env = vec![
        (
            "APPLIANCE_KEYSERVICE__SOCKET".to_owned(),
            socket.display().to_string(),
        ),
        // `serve` listens for metrics on 127.0.0.1:9464 by default: tests run side by side.
        (
            "APPLIANCE_METRICS__LISTEN".to_owned(),
            "127.0.0.1:0".to_owned(),
        ),
    ];
    let serve = Appliance::launch(dir.path(), e2e::Launch::Serve { env }).await;
    assert!(
        e2e::eventually(Duration::from_secs(10), || !worker_children(serve.pid())
            .is_empty())
        .await,
        "direct workers"
    );
    assert!(e2e::children_of(serve.pid(), "worker-launcher").is_empty());
    assert!(serve.log().contains("development only"));
}

#[tokio::test]
async fn serve_runs_actions_through_a_separate_launcher() {
    // The production shape: the launcher is its own process (its own container and uid
    // in the image); the appliance is only told its socket.
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("ks.sock");
    let _keyservice = e2e::KeyService::start(
        &socket,
        &dir.path().join("ks-state"),
        &dir.path().join("compose.json"),
    )
    .await;
    let launcher_socket = dir.path().join("wl.sock");
    let cwd = dir.path().join("empty");
    std::fs::create_dir(&cwd).unwrap();
    let launcher = std::process::Command::new(e2e::binary("worker-launcher"))
        .arg("--socket")
        .arg(&launcher_socket)
        .arg("--worker-binary")
        .arg(e2e::binary("action-worker"))
        .arg("--worker-cwd")
        .arg(&cwd)
        .args([
            "--memory-limit-mb",
            "64",
            "--max-workers",
            "8",
            "--allow-same-uid-dev",
            // Gone with this test process even if it is killed.
            "--exit-with-parent",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let launcher = KillOnDrop(launcher);
    assert!(
        e2e::eventually(Duration::from_secs(10), || launcher_socket.exists()).await,
        "the launcher listens"
    );
    let env = vec![
        (
            "APPLIANCE_KEYSERVICE__SOCKET".to_owned(),
            socket.display().to_string(),
        ),
        (
            "APPLIANCE_ACTIONS__WORKER_LAUNCHER_SOCKET".to_owned(),
            launcher_socket.display().to_string(),
        ),
        ("APPLIANCE_ACTIONS__WORKERS".to_owned(), "2".to_owned()),
        (
            "APPLIANCE_ACTIONS__TIMEOUT_MS".to_owned(),
            "1500".to_owned(),
        ),
        // `serve` listens for metrics on 127.0.0.1:9464 by default: tests run side by side.
        (
            "APPLIANCE_METRICS__LISTEN".to_owned(),
            "127.0.0.1:0".to_owned(),
        ),
    ];
    let app = Appliance::launch(dir.path(), e2e::Launch::Serve { env }).await;
    let (key, _) = app.new_account("launcher").await;
    let run = |code: &'static str| {
        let app = &app;
        let key = key.clone();
        async move {
            app.post("/lit_action", Some(&key), json!({ "code": code }))
                .await
        }
    };
    let reply = run("async function main() { return 'through the launcher' }").await;
    assert_eq!(reply.assert_ok()["response"], json!("through the launcher"));
    let workers = worker_children(launcher.0.id());
    assert!(
        !workers.is_empty(),
        "the workers are the launcher's children"
    );
    assert!(worker_children(app.pid()).is_empty());
    // A timeout kills the worker through the launcher; the next action runs.
    let reply = run("async function main() { while (true) {} }").await;
    assert_eq!(reply.assert_ok()["error"]["kind"], json!("timeout"));
    // Running out of memory is still `memory`: the launcher passes the signal back.
    let reply = run("async function main() { const a = []; while (true) { a.push('x'.repeat(1 << 20) + a.length); } }").await;
    assert_eq!(reply.assert_ok()["error"]["kind"], json!("memory"));
    let reply = run("async function main() { return 1 }").await;
    assert_eq!(reply.assert_ok()["response"], json!(1));
    drop(app);
    // The appliance gone, its connections closed: the launcher killed every worker.
    assert!(
        e2e::eventually(Duration::from_secs(10), || worker_children(launcher.0.id())
            .is_empty())
        .await,
        "workers outlived the appliance's connections"
    );
}

/// A process the test started, killed when the test ends (also when it fails).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Issue 33: code runs only if it hashes to the CID it runs as. An operator who edits
/// the stored code of a victim's CID gets a refusal (422, logged, counted), not a run of
/// the edited code with the victim's scope.
#[tokio::test]
async fn code_changed_in_the_database_is_refused_not_run() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let app = Appliance::start_with(&[("APPLIANCE_METRICS__LISTEN", listen.as_str())]).await;
    let (key, _) = app.new_account("victim").await;
    let code = r#"async function main() { return "the victim's code"; }"#;
    let cid = app
        .post("/get_lit_action_ipfs_id", Some(&key), json!(code))
        .await
        .assert_ok()
        .clone();
    let by_cid = json!({"ipfs_id": cid});
    assert_eq!(
        run(&app, &key, by_cid.clone()).await.assert_ok()["response"],
        json!("the victim's code")
    );

    // The operator edits the code kept under the victim's CID, in the live database.
    let evil = r#"async function main() { return "the operator's code"; }"#;
    let db = rusqlite::Connection::open(app.data_dir.join("state.db")).unwrap();
    db.busy_timeout(Duration::from_secs(10)).unwrap();
    let changed = db
        .execute(
            "UPDATE code_store SET code = ?1 WHERE cid = ?2",
            rusqlite::params![evil.as_bytes(), cid.as_str().unwrap()],
        )
        .unwrap();
    assert!(changed >= 1);
    drop(db);

    let reply = run(&app, &key, by_cid).await;
    assert!(
        !reply.text.contains("the operator's code"),
        "the edited code ran: {}",
        reply.text
    );
    let message = reply.assert_error(422);
    assert!(message.contains("does not hash"), "{message}");
    let metrics = reqwest::get(format!("http://{listen}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("appliance_action_code_refused_total{source=\"store\"} 1"),
        "{metrics}"
    );
    assert!(
        app.log()
            .contains("does not hash to the CID it would run as"),
        "not logged"
    );
    // The code itself, sent again, still runs (and hashes to the CID).
    assert_eq!(
        run(&app, &key, json!({"code": code})).await.assert_ok()["response"],
        json!("the victim's code")
    );
}
