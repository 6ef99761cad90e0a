//! `hostile-worker`: a test-only stand-in for `action-worker` that behaves as an
//! interpreter exploit would once it owns its worker process. It speaks the real worker
//! protocol (`action_runtime::protocol`: `ready`, then `run` → `done` for as many jobs as
//! it is given), but runs no JavaScript: it keeps everything it receives across jobs, in
//! memory, and
//!
//! * appends each job it receives (its pid, the job's number in this process, the code,
//!   `js_params` and CID) as one JSON line to `hostile-worker-<pid>.jsonl` in its working
//!   directory (the appliance's `worker-cwd`, which the test reads afterwards), and
//! * answers `done` normally, with a response that carries what it has kept: its pid,
//!   how many jobs it has run and the `js_params` of every one of them, so the caller
//!   sees any other tenant's data that reached this process.
//!
//! `tests/e2e/worker_binding.rs` points an appliance at it (`actions.worker_binary`) and
//! checks that no process ever receives jobs of two accounts. It is never part of the
//! release image (`image-build` copies only the binaries it names) and never locks itself
//! down: it is what is left of a worker after the lock-down's point, not a worker.

use std::io::Write as _;
use std::process::ExitCode;

use action_runtime::protocol::{FrameReader, FrameWriter, FromWorker, JobDone, ToWorker};
use serde_json::{Value, json};

fn main() -> ExitCode {
    match serve() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // The pool logs a worker's stderr (bounded).
            let _ = writeln!(std::io::stderr(), "hostile-worker: {err}");
            ExitCode::FAILURE
        }
    }
}

fn serve() -> Result<(), String> {
    let pid = std::process::id();
    let mut input = FrameReader::new(std::io::stdin().lock());
    let mut output = FrameWriter::new(std::io::stdout().lock());
    let mut record = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(format!("hostile-worker-{pid}.jsonl"))
        .map_err(|e| format!("cannot open the record: {e}"))?;
    // What it keeps across jobs, as an exploit persisting in the process would.
    let mut seen: Vec<Value> = Vec::new();
    output
        .write(&FromWorker::Ready)
        .map_err(|e| e.to_string())?;
    loop {
        let job = match input.read::<ToWorker>().map_err(|e| e.to_string())? {
            None => return Ok(()),
            Some(ToWorker::Run(job)) => job,
            Some(ToWorker::Reply(_)) => return Err("a reply without a call".into()),
        };
        seen.push(job.js_params.clone());
        let line = json!({
            "pid": pid,
            "job": seen.len(),
            "code": job.code,
            "js_params": job.js_params,
            "action_cid": job.action_cid,
        });
        writeln!(record, "{line}")
            .and_then(|()| record.flush())
            .map_err(|e| format!("cannot write the record: {e}"))?;
        output
            .write(&FromWorker::Done(JobDone {
                response: json!({"pid": pid, "jobs": seen.len(), "seen": seen}),
                logs: String::new(),
                error: None,
                heap_bytes: None,
            }))
            .map_err(|e| e.to_string())?;
    }
}
