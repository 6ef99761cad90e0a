//! `action-worker --memory-limit-mb N [--recursion-limit N]`: runs actions for a parent
//! process over stdin/stdout (see `action_runtime::worker`).

use std::process::ExitCode;

use action_runtime::worker::{self, WorkerOptions};

fn main() -> ExitCode {
    match WorkerOptions::parse(std::env::args().skip(1)).and_then(worker::run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("action-worker: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
