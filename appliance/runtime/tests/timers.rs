//! `setTimeout`/`setInterval`/`clearTimeout`/`clearInterval` in the real worker: real
//! time, order of due time, the job's deadline.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use action_runtime::protocol::{ErrorKind, JobLimits};
use serde_json::{Value, json};
use test_support::action_worker::{Worker, failed, job, null, ok};

fn run(code: &str) -> Value {
    let mut w = Worker::spawn();
    ok(&w.run(code, null())).clone()
}

#[test]
fn awaiting_a_timeout_lets_real_time_pass() {
    let resp = run("async function main() {
        const t0 = Date.now();
        await new Promise(r => setTimeout(r, 100));
        return Date.now() - t0;
    }");
    let waited = resp.as_f64().unwrap();
    assert!(waited >= 95.0, "the timer fired after {waited} ms");
}

#[test]
fn callbacks_run_in_order_of_due_time_with_their_promise_jobs_between() {
    let resp = run("async function main() {
        const seen = [];
        setTimeout(() => { seen.push('c30'); Promise.resolve().then(() => seen.push('c30-job')); }, 30);
        setTimeout((a, b) => seen.push('a10:' + a + b), 10, 'x', 'y');
        setTimeout(() => seen.push('b10'), 10);
        setTimeout(() => seen.push('z0'));
        const cancelled = setTimeout(() => seen.push('never'), 20);
        clearTimeout(cancelled);
        clearTimeout(99999);
        Promise.resolve().then(() => seen.push('job'));
        await new Promise(r => setTimeout(r, 50));
        return seen;
    }");
    assert_eq!(
        resp,
        json!(["job", "z0", "a10:xy", "b10", "c30", "c30-job"])
    );
}

#[test]
fn an_interval_repeats_until_cleared_and_ids_are_distinct() {
    let resp = run("async function main() {
        let n = 0;
        const ids = [];
        await new Promise(done => {
            const id = setInterval(() => { n++; if (n === 3) { clearInterval(id); done(); } }, 5);
            ids.push(id, setTimeout(() => {}, 1));
        });
        await new Promise(r => setTimeout(r, 30));
        return {n, distinct: ids[0] !== ids[1], positive: ids.every(i => i > 0)};
    }");
    assert_eq!(resp, json!({"n": 3, "distinct": true, "positive": true}));
}

#[test]
fn code_without_main_runs_its_timers_and_a_settled_main_drops_the_rest() {
    let resp = run("setTimeout(() => Lit.Actions.setResponse({response: 'from a timer'}), 20);");
    assert_eq!(resp, json!("from a timer"));
    // A forgotten interval does not keep a finished action alive.
    let resp = run("async function main() { setInterval(() => {}, 10); return 'done'; }");
    assert_eq!(resp, json!("done"));
}

#[test]
fn a_throwing_callback_fails_the_action_and_a_non_function_is_refused() {
    let mut w = Worker::spawn();
    let done = w.run(
        "async function main() { setTimeout(() => { throw new Error('boom') }, 1); await new Promise(() => {}); }",
        null(),
    );
    let msg = failed(&done, ErrorKind::Exception);
    assert!(msg.contains("boom"), "{msg}");
    let resp = ok(&w.run(
        "async function main() { try { setTimeout('1+1', 1) } catch (e) { return e.name + ': ' + e.message } }",
        null(),
    ))
    .clone();
    assert_eq!(
        resp,
        json!("TypeError: setTimeout: the callback must be a function")
    );
}

#[test]
fn a_timer_due_after_the_deadline_ends_the_job_at_once_with_a_timeout() {
    let mut w = Worker::spawn();
    let mut j = job(
        "async function main() { console.log('waiting'); await new Promise(r => setTimeout(r, 600000)); return 'late' }",
        null(),
    );
    j.limits = JobLimits {
        timeout_ms: Some(2000),
        ..JobLimits::default()
    };
    // The harness waits 20 s at most for `done`: the worker must not sleep 10 minutes.
    let (done, _) = w.run_job(j, |call| panic!("unexpected host call {call:?}"));
    let msg = failed(&done, ErrorKind::Timeout);
    assert!(msg.contains("did not finish within 2000 ms"), "{msg}");
    assert_eq!(done.logs, "waiting\n");
    // The worker is fine afterwards, and a timer within the deadline still runs.
    let mut j = job(
        "async function main() { await new Promise(r => setTimeout(r, 10)); return 'on time' }",
        null(),
    );
    j.limits = JobLimits {
        timeout_ms: Some(2000),
        ..JobLimits::default()
    };
    let (done, _) = w.run_job(j, |call| panic!("unexpected host call {call:?}"));
    assert_eq!(ok(&done), &json!("on time"));
}

#[test]
fn a_flood_of_timers_is_refused_at_the_bound_and_cleared_timers_free_their_place() {
    let resp = run("async function main() {
        const ids = [];
        let refused = null;
        for (let i = 0; i < 20000; i++) {
            try { ids.push(setTimeout(() => {}, 60000)); }
            catch (e) { refused = {at: i, name: e.name, message: e.message}; break; }
        }
        let interval = null;
        try { setInterval(() => {}, 1000); } catch (e) { interval = e.message; }
        clearTimeout(ids[0]);
        const again = setTimeout(() => {}, 60000) > 0;
        ids.forEach(clearTimeout);
        return {refused, interval, again};
    }");
    assert_eq!(
        resp,
        json!({
            "refused": {
                "at": 10000,
                "name": "RangeError",
                "message": "setTimeout: too many pending timers (10000); clear some first"
            },
            "interval": "setInterval: too many pending timers (10000); clear some first",
            "again": true
        })
    );
}
