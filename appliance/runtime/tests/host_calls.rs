//! Lit.Actions operations and fetch: the `call` frames sent and how replies settle promises.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use action_runtime::protocol::{
    ErrorKind, FetchRequest, FetchResponse, HostRequest, JobLimits, ReplyOutcome,
};
use serde_json::{Value, json};
use test_support::action_worker::{Worker, failed, job, null, ok};

/// Runs `code` answering every call with `reply`; returns the response and the requests.
fn run_with_reply(code: &str, reply: Value) -> (Value, Vec<HostRequest>) {
    let mut w = Worker::spawn();
    let (done, calls) = w.run_job(job(code, null()), |_| ReplyOutcome::Ok(reply.clone()));
    let response = ok(&done).clone();
    (response, calls.into_iter().map(|c| c.request).collect())
}

#[test]
fn get_private_key() {
    let key = format!("0x{}", "11".repeat(32));
    let (resp, calls) = run_with_reply(
        "async function main() { return await Lit.Actions.getPrivateKey({pkpId: '0xabc'}) }",
        json!(key),
    );
    assert_eq!(resp, json!(key));
    assert_eq!(
        calls,
        [HostRequest::GetPrivateKey {
            pkp_id: "0xabc".into()
        }]
    );
}

#[test]
fn sign_ecdsa_with_hex_and_bytes() {
    let sig = format!("0x{}1b", "22".repeat(64));
    let digest = format!("0x{}", "ab".repeat(32));
    let (resp, calls) = run_with_reply(
        &format!(
            "async function main() {{
                const a = await Lit.Actions.signEcdsa({{pkpId: 'w', toSign: '{digest}'}});
                const b = await LitActions.signEcdsa({{pkpId: 'w', toSign: new Uint8Array(32).fill(0xab)}});
                const c = await Lit.Actions.signEcdsa({{pkpId: 'w', toSign: Array(32).fill(171)}});
                return [a, b === a, c === a]
            }}"
        ),
        json!(sig),
    );
    assert_eq!(resp, json!([sig, true, true]));
    let expected = HostRequest::SignEcdsa {
        pkp_id: "w".into(),
        to_sign: digest,
    };
    assert_eq!(calls, [expected.clone(), expected.clone(), expected]);
}

#[test]
fn encrypt_and_decrypt() {
    let mut w = Worker::spawn();
    let code = "async function main() {
        const ct = await Lit.Actions.Encrypt({pkpId: 'p1', message: 'héllo'});
        const pt = await Lit.Actions.Decrypt({pkpId: 'p1', ciphertext: ct});
        return {ct, pt}
    }";
    let (done, calls) = w.run_job(job(code, null()), |call| match &call.request {
        HostRequest::Encrypt { message, .. } => {
            assert_eq!(message, "héllo");
            ReplyOutcome::Ok(json!("00aa11"))
        }
        HostRequest::Decrypt { ciphertext, .. } => {
            assert_eq!(ciphertext, "00aa11");
            ReplyOutcome::Ok(json!("héllo"))
        }
        other => panic!("unexpected {other:?}"),
    });
    assert_eq!(ok(&done), &json!({"ct": "00aa11", "pt": "héllo"}));
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].request.op(), "encrypt");
    assert_eq!(calls[1].request.op(), "decrypt");
    assert_ne!(calls[0].id, calls[1].id);
}

#[test]
fn lit_action_keys() {
    let mut w = Worker::spawn();
    let code = "async function main() {
        return [
            await Lit.Actions.getLitActionPrivateKey(),
            await Lit.Actions.getLitActionPrivateKey({ipfsId: 'QmOther'}),
            await Lit.Actions.getLitActionPublicKey({ipfsId: 'QmA'}),
            await Lit.Actions.getLitActionWalletAddress({ipfsId: 'QmB'}),
            await Lit.Actions.getLitActionPublicKey({}),
        ]
    }";
    let (done, calls) = w.run_job(job(code, null()), |call| {
        ReplyOutcome::Ok(json!(call.request.op()))
    });
    assert_eq!(
        ok(&done),
        &json!([
            "getLitActionPrivateKey",
            "getLitActionPrivateKey",
            "getLitActionPublicKey",
            "getLitActionWalletAddress",
            "getLitActionPublicKey"
        ])
    );
    let requests: Vec<_> = calls.into_iter().map(|c| c.request).collect();
    assert_eq!(
        requests,
        [
            HostRequest::GetLitActionPrivateKey { ipfs_id: None },
            HostRequest::GetLitActionPrivateKey {
                ipfs_id: Some("QmOther".into())
            },
            HostRequest::GetLitActionPublicKey {
                ipfs_id: Some("QmA".into())
            },
            HostRequest::GetLitActionWalletAddress {
                ipfs_id: Some("QmB".into())
            },
            HostRequest::GetLitActionPublicKey { ipfs_id: None },
        ]
    );
}

#[test]
fn an_err_reply_rejects_the_promise() {
    let mut w = Worker::spawn();
    let code = "async function main() {
        try { await Lit.Actions.getPrivateKey({pkpId: 'x'}) }
        catch (e) { return [e instanceof Error, e.message] }
    }";
    let (done, _) = w.run_job(job(code, null()), |_| {
        ReplyOutcome::Err("wallet not permitted".into())
    });
    assert_eq!(ok(&done), &json!([true, "wallet not permitted"]));

    // Uncaught, it is the action's exception.
    let code =
        "async function main() { await Lit.Actions.signEcdsa({pkpId: 'x', toSign: '0x00'}) }";
    let (done, _) = w.run_job(job(code, null()), |_| {
        ReplyOutcome::Err("bad digest".into())
    });
    let msg = failed(&done, ErrorKind::Exception);
    assert!(msg.starts_with("Error: bad digest"), "{msg}");
}

#[test]
fn bad_arguments_reject_without_a_call() {
    let mut w = Worker::spawn();
    let code = "async function main() {
        const out = [];
        for (const f of [() => Lit.Actions.getPrivateKey(), () => Lit.Actions.getPrivateKey({pkpId: 5}),
                         () => Lit.Actions.Encrypt({pkpId: 'a'}), () => Lit.Actions.signEcdsa({pkpId: 'a', toSign: {}})]) {
            const p = f();
            out.push(p instanceof Promise);
            try { await p } catch (e) { out.push(e.name) }
        }
        return out
    }";
    let done = w.run(code, null());
    assert_eq!(
        ok(&done),
        &json!([
            true,
            "TypeError",
            true,
            "TypeError",
            true,
            "TypeError",
            true,
            "TypeError"
        ])
    );
}

#[test]
fn actions_are_async_and_set_response_is_sync() {
    let mut w = Worker::spawn();
    let code = "async function main() {
        const p = Lit.Actions.getPrivateKey({pkpId: 'k'});
        const r = Lit.Actions.setResponse({response: 'x'});
        return [p instanceof Promise, r === undefined]
    }";
    let (done, _) = w.run_job(job(code, null()), |_| ReplyOutcome::Ok(json!("k")));
    // setResponse won.
    assert_eq!(ok(&done), &json!("x"));
}

fn fetch_reply(body: &str) -> ReplyOutcome {
    ReplyOutcome::Ok(
        serde_json::to_value(FetchResponse {
            status: 201,
            status_text: "Created".into(),
            headers: [("Content-Type".to_owned(), "application/json".to_owned())].into(),
            body: body.into(),
        })
        .unwrap(),
    )
}

#[test]
fn fetch_sends_the_request_and_builds_a_response() {
    let mut w = Worker::spawn();
    let code = r#"async function main() {
        const r = await fetch('https://api.example/x', {method: 'post', headers: {'X-A': '1', b: 2},
                                                         body: JSON.stringify({q: 1})});
        const j = await r.json();
        const t = await r.text();
        const entries = [...r.headers];
        return {status: r.status, statusText: r.statusText, ok: r.ok, url: r.url,
                ct: r.headers.get('content-type'), CT: r.headers.get('Content-Type'),
                missing: r.headers.get('nope'), has: r.headers.has('CONTENT-TYPE'),
                j, t, entries}
    }"#;
    let (done, calls) = w.run_job(job(code, null()), |_| fetch_reply(r#"{"hello":"world"}"#));
    assert_eq!(
        ok(&done),
        &json!({"status": 201, "statusText": "Created", "ok": true, "url": "https://api.example/x",
                "ct": "application/json", "CT": "application/json", "missing": null, "has": true,
                "j": {"hello": "world"}, "t": "{\"hello\":\"world\"}",
                "entries": [["content-type", "application/json"]]})
    );
    assert_eq!(
        calls[0].request,
        HostRequest::Fetch(FetchRequest {
            url: "https://api.example/x".into(),
            method: "POST".into(),
            headers: [
                ("X-A".to_owned(), "1".to_owned()),
                ("b".to_owned(), "2".to_owned())
            ]
            .into(),
            body: Some("{\"q\":1}".into()),
        })
    );
}

#[test]
fn fetch_defaults_and_errors() {
    let mut w = Worker::spawn();
    let code = r#"async function main() {
        const r = await fetch('https://a.example/');
        let jsonError;
        try { await r.json() } catch (e) { jsonError = e.name }
        let netError;
        try { await fetch('https://down.example/') } catch (e) { netError = e.message }
        return {jsonError, netError}
    }"#;
    let (done, calls) = w.run_job(job(code, null()), |call| match &call.request {
        HostRequest::Fetch(req) if req.url.contains("down") => {
            ReplyOutcome::Err("connection refused".into())
        }
        _ => fetch_reply("not json"),
    });
    assert_eq!(
        ok(&done),
        &json!({"jsonError": "SyntaxError", "netError": "connection refused"})
    );
    let HostRequest::Fetch(first) = &calls[0].request else {
        panic!()
    };
    assert_eq!(first.method, "GET");
    assert!(first.headers.is_empty());
    assert_eq!(first.body, None);
}

#[test]
fn the_fetch_after_the_limit_fails() {
    let mut w = Worker::spawn();
    // Caught: the action goes on.
    let code = "async function main() {
        let n = 0, err;
        for (let i = 0; i < 51; i++) {
            try { await fetch('https://x.example/' + i); n++ } catch (e) { err = e.message }
        }
        return {n, err}
    }";
    let (done, calls) = w.run_job(job(code, null()), |_| fetch_reply("ok"));
    let resp = ok(&done);
    assert_eq!(resp["n"], json!(50));
    assert!(
        resp["err"].as_str().unwrap().contains("fetch limit"),
        "{resp}"
    );
    assert_eq!(calls.len(), 50);

    // Uncaught: kind `limit`.
    let code =
        "async function main() { for (let i = 0; i < 51; i++) await fetch('https://x.example/') }";
    let (done, calls) = w.run_job(job(code, null()), |_| fetch_reply("ok"));
    let msg = failed(&done, ErrorKind::Limit);
    assert!(msg.contains("fetch limit reached: at most 50"), "{msg}");
    assert_eq!(calls.len(), 50);

    // A custom limit from the parent.
    let mut j = job(
        "async function main() { await fetch('a'); await fetch('b') }",
        null(),
    );
    j.limits = JobLimits {
        max_fetches: 1,
        ..JobLimits::default()
    };
    let (done, calls) = w.run_job(j, |_| fetch_reply("ok"));
    failed(&done, ErrorKind::Limit);
    assert_eq!(calls.len(), 1);
}

#[test]
fn host_call_ids_increase_across_jobs() {
    let mut w = Worker::spawn();
    let code = "async function main() { await Lit.Actions.getPrivateKey({pkpId: 'a'}) }";
    let (_, first) = w.run_job(job(code, null()), |_| ReplyOutcome::Ok(json!("k")));
    let (_, second) = w.run_job(job(code, null()), |_| ReplyOutcome::Ok(json!("k")));
    assert!(second[0].id > first[0].id);
}
