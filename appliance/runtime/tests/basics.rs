//! Entry point, response, errors and isolation.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use action_runtime::protocol::ErrorKind;
use serde_json::json;
use test_support::action_worker::{Worker, failed, null, ok};

#[test]
fn hello_world() {
    let mut w = Worker::spawn();
    let done = w.run(r#"async function main() { return "hello" }"#, null());
    assert_eq!(ok(&done), &json!("hello"));
    assert_eq!(done.logs, "");
}

#[test]
fn main_gets_nested_js_params() {
    let mut w = Worker::spawn();
    let params = json!({"a": {"b": [1, 2, {"c": "d"}]}, "n": 1.5, "t": true, "z": null});
    let done = w.run(
        "async function main(p) { return { echo: p, c: p.a.b[2].c, sum: p.a.b[0] + p.a.b[1] } }",
        params.clone(),
    );
    assert_eq!(ok(&done), &json!({"echo": params, "c": "d", "sum": 3}));
}

#[test]
fn js_params_default_to_null() {
    let mut w = Worker::spawn();
    let done = w.run("function main(p) { return p === null }", null());
    assert_eq!(ok(&done), &json!(true));
}

#[test]
fn sync_main_and_const_arrow_main() {
    let mut w = Worker::spawn();
    let done = w.run("function main() { return [1, 'two'] }", null());
    assert_eq!(ok(&done), &json!([1, "two"]));
    let done = w.run("const main = async (p) => p.x * 2;", json!({"x": 21}));
    assert_eq!(ok(&done), &json!(42));
}

#[test]
fn no_main_runs_top_level_code_only() {
    let mut w = Worker::spawn();
    let done = w.run(
        "console.log('top'); Lit.Actions.setResponse({response: 'set at top level'});",
        null(),
    );
    assert_eq!(ok(&done), &json!("set at top level"));
    assert_eq!(done.logs, "top\n");
    let done = w.run("1 + 1", null());
    assert_eq!(ok(&done), &null());
}

#[test]
fn top_level_runs_before_main() {
    let mut w = Worker::spawn();
    let done = w.run(
        "let order = []; order.push('top'); async function main() { order.push('main'); return order }",
        null(),
    );
    assert_eq!(ok(&done), &json!(["top", "main"]));
}

#[test]
fn set_response_wins_over_return_value() {
    let mut w = Worker::spawn();
    let done = w.run(
        r#"async function main() { Lit.Actions.setResponse({response: "explicit"}); return "returned" }"#,
        null(),
    );
    assert_eq!(ok(&done), &json!("explicit"));
    // The last call wins; objects are stored as JSON, strings stay strings.
    let done = w.run(
        r#"async function main() {
            LitActions.setResponse({response: "first"});
            Lit.Actions.setResponse({response: {a: [1, 2]}});
        }"#,
        null(),
    );
    assert_eq!(ok(&done), &json!({"a": [1, 2]}));
    let done = w.run(
        r#"async function main() { Lit.Actions.setResponse({response: JSON.stringify({a: 1})}) }"#,
        null(),
    );
    assert_eq!(ok(&done), &json!("{\"a\":1}"));
}

#[test]
fn undefined_and_unserialisable_returns() {
    let mut w = Worker::spawn();
    assert_eq!(ok(&w.run("async function main() {}", null())), &null());
    assert_eq!(
        ok(&w.run("function main() { return undefined }", null())),
        &null()
    );
    assert_eq!(
        ok(&w.run("function main() { return () => 1 }", null())),
        &null()
    );
    let done = w.run(
        "function main() { return {d: new Date(0), u: undefined, n: NaN} }",
        null(),
    );
    assert_eq!(
        ok(&done),
        &json!({"d": "1970-01-01T00:00:00.000Z", "n": null})
    );
    let msg = failed(
        &w.run("function main() { return 1n }", null()),
        ErrorKind::Exception,
    );
    assert!(msg.contains("not JSON-serialisable"), "{msg}");
    let msg = failed(
        &w.run(
            "function main() { const a = {}; a.a = a; return a }",
            null(),
        ),
        ErrorKind::Exception,
    );
    assert!(msg.contains("not JSON-serialisable"), "{msg}");
}

#[test]
fn thrown_errors_are_exceptions_with_stack() {
    let mut w = Worker::spawn();
    let done = w.run(
        "console.log('before'); async function main() { null.x }",
        null(),
    );
    let msg = failed(&done, ErrorKind::Exception);
    assert!(msg.starts_with("TypeError"), "{msg}");
    assert_eq!(done.logs, "before\n");

    let done = w.run(
        "function helper() { throw new RangeError('out of range') }\nasync function main() { helper() }",
        null(),
    );
    let msg = failed(&done, ErrorKind::Exception);
    assert!(msg.starts_with("RangeError: out of range"), "{msg}");
    assert!(msg.contains("helper"), "stack missing: {msg}");
    assert!(msg.contains("action.js"), "file name missing: {msg}");

    let msg = failed(
        &w.run(
            "async function main() { await null; throw new Error('later') }",
            null(),
        ),
        ErrorKind::Exception,
    );
    assert!(msg.starts_with("Error: later"), "{msg}");

    let msg = failed(
        &w.run("throw new Error('at top level')", null()),
        ErrorKind::Exception,
    );
    assert!(msg.starts_with("Error: at top level"), "{msg}");

    let msg = failed(
        &w.run("class MyError extends Error { constructor(m) { super(m); this.name = 'MyError' } }\nfunction main() { throw new MyError('custom') }", null()),
        ErrorKind::Exception,
    );
    assert!(msg.starts_with("MyError: custom"), "{msg}");
}

#[test]
fn thrown_non_error_values() {
    let mut w = Worker::spawn();
    let cases = [
        ("throw 'boom'", "Uncaught 'boom'"),
        ("throw 42", "Uncaught 42"),
        (
            "throw {code: 7, why: 'x'}",
            "Uncaught { code: 7, why: 'x' }",
        ),
        ("throw null", "Uncaught null"),
        ("throw undefined", "Uncaught undefined"),
        ("return Promise.reject('no')", "Uncaught 'no'"),
    ];
    for (body, expected) in cases {
        let code = format!("async function main() {{ {body} }}");
        let msg = failed(&w.run(&code, null()), ErrorKind::Exception);
        assert_eq!(msg, expected, "for {body}");
    }
}

#[test]
fn syntax_errors_are_exceptions_with_position() {
    let mut w = Worker::spawn();
    let msg = failed(
        &w.run("async function main() {\n  return 1 +;\n}", null()),
        ErrorKind::Exception,
    );
    assert!(msg.starts_with("SyntaxError"), "{msg}");
    assert!(msg.contains("line 2"), "no position in: {msg}");
    let msg = failed(&w.run("let x = ;", null()), ErrorKind::Exception);
    assert!(msg.starts_with("SyntaxError"), "{msg}");
}

#[test]
fn a_promise_that_never_settles_is_reported() {
    let mut w = Worker::spawn();
    let done = w.run(
        "async function main() { await new Promise(() => {}); return 1 }",
        null(),
    );
    let msg = failed(&done, ErrorKind::Exception);
    assert_eq!(msg, "the action's promise never settled");
    // The worker is still usable.
    assert_eq!(
        ok(&w.run("function main() { return 2 }", null())),
        &json!(2)
    );
}

#[test]
fn no_state_leaks_between_jobs() {
    let mut w = Worker::spawn();
    let done = w.run(
        r#"globalThis.leak = 'secret'; var v = 1; Object.prototype.polluted = true;
           Array.prototype.push = () => 0; JSON.stringify = () => 'hijacked';
           console.log = () => {}; Math.random = () => 4;
           async function main() { return 'one' }"#,
        null(),
    );
    assert_eq!(ok(&done), &json!("one"));
    let done = w.run(
        r#"async function main() {
            const a = []; a.push(1);
            console.log('logged');
            return { leak: typeof leak, v: typeof v, polluted: ({}).polluted === undefined,
                     push: a.length, random: Math.random() < 1 }
        }"#,
        null(),
    );
    assert_eq!(
        ok(&done),
        &json!({"leak": "undefined", "v": "undefined", "polluted": true, "push": 1, "random": true})
    );
    assert_eq!(done.logs, "logged\n");
}

#[test]
fn user_code_cannot_hijack_the_response_encoding() {
    let mut w = Worker::spawn();
    let done = w.run(
        "JSON.stringify = () => '\"hijacked\"'; async function main() { return {a: 1} }",
        null(),
    );
    assert_eq!(ok(&done), &json!({"a": 1}));
}

#[test]
fn lit_is_frozen_and_shared() {
    let mut w = Worker::spawn();
    let done = w.run(
        r#""use strict";
        async function main() {
            let threw = false;
            try { Lit.Actions.getPrivateKey = null } catch (e) { threw = e instanceof TypeError }
            return { same: Lit === LitActions, frozen: Object.isFrozen(Lit),
                     actionsFrozen: Object.isFrozen(Lit.Actions), threw,
                     alias: LitActions.setResponse === Lit.Actions.setResponse,
                     fns: Object.keys(Lit.Actions).sort() }
        }"#,
        null(),
    );
    assert_eq!(
        ok(&done),
        &json!({"same": true, "frozen": true, "actionsFrozen": true, "threw": true, "alias": true,
                "fns": ["Actions", "Decrypt", "Encrypt", "getLitActionPrivateKey", "getLitActionPublicKey",
                        "getLitActionWalletAddress", "getPrivateKey", "setResponse", "showImportDetails",
                        "signEcdsa"]})
    );
}

#[test]
fn user_code_running_while_the_result_is_converted() {
    let mut w = Worker::spawn();
    // toJSON of the returned value logs and calls setResponse.
    let done = w.run(
        "function main() { return { toJSON() { console.log('in toJSON'); return {converted: true} } } }",
        null(),
    );
    assert_eq!(ok(&done), &json!({"converted": true}));
    assert_eq!(done.logs, "in toJSON\n");
    // Getters of a thrown error log while the message is built.
    let done = w.run(
        "function main() { const e = new Error('m'); Object.defineProperty(e, 'name', { get() { console.log('name read'); return 'Custom' } }); throw e }",
        null(),
    );
    let msg = failed(&done, ErrorKind::Exception);
    assert!(msg.starts_with("Custom: m"), "{msg}");
    assert!(done.logs.contains("name read"), "{}", done.logs);
    // A toJSON that floods the logs is a limit.
    let done = w.run(
        "function main() { return { toJSON() { for (;;) console.log('x'.repeat(1000)) } } }",
        null(),
    );
    failed(&done, ErrorKind::Limit);
}
