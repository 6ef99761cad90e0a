//! Hot-path timings of the action runtime (run with `cargo bench -p action-runtime`):
//! building a fresh context, and hello-world / host-call / import jobs through the real
//! worker process over pipes (an import answered at once, as the appliance answers one
//! from its cache: what remains is the worker's parse and evaluation of the module). `BENCH_WORKER=path` benchmarks another `action-worker` binary.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::hint::black_box;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use action_runtime::protocol::{
    FrameReader, FromWorker, HostReply, HostRequest, ImportedModule, JobLimits, ReplyOutcome,
    RunJob, ToWorker, encode,
};
use action_runtime::sandbox::{SandboxLimits, new_context};
use serde_json::{Value, json};

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 200 } else { 3000 };
    context_creation(n);
    worker_start(if quick { 5 } else { 30 });
    round_trips(n);
}

/// Spawn → `ready` (what replacing a killed worker costs).
fn worker_start(n: usize) {
    let samples = (0..n)
        .map(|_| {
            let t = Instant::now();
            let mut child = spawn_worker();
            let mut reader = FrameReader::new(child.stdout.take().unwrap());
            assert_eq!(
                reader.read::<FromWorker>().unwrap(),
                Some(FromWorker::Ready)
            );
            let elapsed = t.elapsed();
            drop(child.stdin.take());
            let _ = child.wait();
            elapsed
        })
        .collect();
    report("worker start (spawn to ready)", samples);
}

/// The worker under test: this crate's, or `BENCH_WORKER` (to compare another build).
fn spawn_worker() -> std::process::Child {
    let binary = std::env::var_os("BENCH_WORKER")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_action-worker").into());
    Command::new(binary)
        .args(["--memory-limit-mb", "128"])
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn worker")
}

fn report(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let pct = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{what:<40} n={:<5} mean {:>9.1?}  p50 {:>9.1?}  p99 {:>9.1?}  max {:>9.1?}",
        samples.len(),
        mean,
        pct(0.5),
        pct(0.99),
        samples[samples.len() - 1]
    );
}

fn context_creation(n: usize) {
    let limits = SandboxLimits::default();
    let (mut build, mut drop_) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let t = Instant::now();
        let ctx = new_context(&limits).expect("context");
        build.push(t.elapsed());
        // As the worker does between jobs: drop the spent context and collect.
        let t = Instant::now();
        drop(black_box(ctx));
        boa_engine::gc::force_collect();
        drop_.push(t.elapsed());
    }
    report("context: build (all globals)", build);
    report("context: drop + GC", drop_);

    // The engine's own part: a bare boa context, no action globals.
    let mut bare = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let ctx = boa_engine::Context::default();
        bare.push(t.elapsed());
        drop(black_box(ctx));
        boa_engine::gc::force_collect();
    }
    report("context: build (engine only)", bare);
}

fn round_trips(n: usize) {
    let mut child = spawn_worker();
    let mut stdin = child.stdin.take().expect("stdin");
    let mut reader = FrameReader::new(child.stdout.take().expect("stdout"));
    assert_eq!(
        reader.read::<FromWorker>().expect("ready"),
        Some(FromWorker::Ready)
    );

    // The modules the import cases load: a one-liner, and about 90 KB of small functions.
    let small = "export const twice = (x) => 2 * x;".to_owned();
    let large: String = (0..2000)
        .map(|i| format!("export function f{i}(x) {{ return x + {i}; }}\n"))
        .collect();
    let module = |specifier: &str| {
        let source = if specifier.starts_with("large") {
            large.clone()
        } else {
            small.clone()
        };
        serde_json::to_value(ImportedModule {
            url: format!("https://cdn.bench/{specifier}"),
            integrity: "sha384-bench".to_owned(),
            source: Some(source),
        })
        .expect("module")
    };
    let mut run = |code: &str| -> Duration {
        let job = ToWorker::Run(RunJob {
            code: code.to_owned(),
            js_params: Value::Null,
            action_cid: "QmBench".to_owned(),
            limits: JobLimits::default(),
        });
        let t = Instant::now();
        stdin
            .write_all(&encode(&job).expect("encode"))
            .expect("write");
        loop {
            match reader.read::<FromWorker>().expect("read") {
                Some(FromWorker::Done(done)) => {
                    assert!(done.error.is_none(), "{:?}", done.error);
                    return t.elapsed();
                }
                Some(FromWorker::Call(call)) => {
                    let value = match &call.request {
                        HostRequest::Import(import) => module(&import.specifier),
                        _ => json!(format!("0x{}", "11".repeat(32))),
                    };
                    let reply = ToWorker::Reply(HostReply {
                        id: call.id,
                        outcome: ReplyOutcome::Ok(value),
                    });
                    stdin
                        .write_all(&encode(&reply).expect("encode"))
                        .expect("write");
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    };

    let cases = [
        (
            "job: hello world",
            r#"async function main() { return "hello" }"#,
        ),
        (
            "job: 1 host call",
            "async function main() { return await Lit.Actions.getPrivateKey({pkpId: 'a'}) }",
        ),
        (
            "job: 10 host calls + log",
            "async function main() { let k; for (let i = 0; i < 10; i++) k = await Lit.Actions.signEcdsa({pkpId: 'a', toSign: '0x' + '00'.repeat(32)}); console.log(k); return k }",
        ),
    ];
    let imports = [
        (
            "job: import, 34 B module",
            "import { twice } from 'small@1.0.0'; function main() { return twice(2) }",
            n,
        ),
        (
            "job: import, 90 KB module (2000 fns)",
            "import { f1 } from 'large@1.0.0'; function main() { return f1(2) }",
            n / 30,
        ),
    ];
    let cases = cases
        .into_iter()
        .map(|(what, code)| (what, code, n))
        .chain(imports);
    for (what, code, n) in cases {
        for _ in 0..20.min(n) {
            run(code);
        }
        // Back to back: each job also waits for the worker to finish preparing the next
        // context after the previous `done` (throughput of one worker).
        let samples = (0..n).map(|_| run(code)).collect();
        report(&format!("{what}, back to back"), samples);
        // Idle worker: the next context is ready when the job arrives (request latency
        // with a warm pool).
        let samples = (0..n / 3)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(2));
                run(code)
            })
            .collect();
        report(&format!("{what}, idle worker"), samples);
    }
    drop(stdin);
    let _ = child.wait();
}
