//! `action-worker --memory-limit-mb N [--recursion-limit N]`: runs actions for a parent
//! process over stdin/stdout (see `action_runtime::worker`).

use std::io::Write as _;
use std::process::ExitCode;

use action_runtime::heap::CountingAllocator;
use action_runtime::worker::{self, WorkerOptions};

/// Counts live heap bytes, reported to the parent in every `done` (see
/// `action_runtime::heap`).
#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn main() -> ExitCode {
    match WorkerOptions::parse(std::env::args().skip(1)).and_then(worker::run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Not eprintln!: a locked-down worker cannot grow a file given as stderr, and
            // the failed write must not turn the exit status into a panic's.
            let _ = writeln!(std::io::stderr(), "action-worker: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
