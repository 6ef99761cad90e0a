//! The `action-worker` process: memory limit, then the `ready` / `run` / `done` loop over
//! stdin and stdout.
//!
//! # Spawning (for the parent)
//! `action-worker --memory-limit-mb N [--recursion-limit N]`, empty environment, cwd an
//! empty directory, stdin/stdout the protocol pipes, stderr the parent's log. Wait for
//! `ready`, then send `run` and answer every `call` with a `reply` until `done`. Closing
//! stdin ends the worker with status 0. Any protocol violation ends it with status 2 and
//! one line on stderr; a bad command line with 64. Running out of memory (or stack) kills
//! it (SIGABRT, sometimes SIGSEGV): report `memory`, unless the parent killed it for the
//! deadline (`timeout`).
//!
//! At start the worker may re-execute itself once (same pid, arguments and pipes) to get
//! a larger main-thread stack ([`ensure_stack`]); then it keeps every thread on glibc's main
//! malloc arena ([`crate::heap::single_arena`]: a thread's own arena would reserve 64 MiB
//! of the limit), sets RLIMIT_AS to its VmSize plus `--memory-limit-mb`, locks itself down ([`crate::lockdown`]: no files, processes,
//! sockets or privileges; descriptors other than 0–2 closed), builds its first context and
//! sends `ready`. A worker that cannot lock itself down exits with status 3. Every `done`
//! carries the worker's live heap (`heap_bytes`, from its counting allocator,
//! [`crate::heap`]), which the parent may use to retire it. Its stderr
//! should be a pipe: once locked down the worker cannot grow a regular file
//! (`RLIMIT_FSIZE` 0), so lines it writes to a file are dropped.

use std::cell::RefCell;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt as _;
use std::rc::Rc;

use crate::protocol::{
    ActionError, ErrorKind, FrameReader, FrameWriter, FromWorker, HostCall, HostRequest, JobDone,
    ProtocolError, ReplyOutcome, ToWorker,
};
use crate::sandbox::{HostChannel, Sandbox, SandboxError, SandboxLimits};

/// Command-line options of the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerOptions {
    /// Address space the worker may add to what it uses at start-up, in MiB.
    pub memory_limit_mb: u64,
    /// Engine limits.
    pub limits: SandboxLimits,
}

/// Failures that end the worker.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// Bad command line (exit status 64).
    #[error("usage: action-worker --memory-limit-mb N [--recursion-limit N]: {0}")]
    Usage(String),
    /// The memory limit could not be applied (exit status 3).
    #[error("could not apply the memory limit: {0}")]
    MemoryLimit(String),
    /// The sandbox could not be set up (exit status 3).
    #[error(transparent)]
    Sandbox(SandboxError),
    /// The process could not lock itself down (exit status 3).
    #[error("lock-down: {0}")]
    Lockdown(#[from] crate::lockdown::LockdownError),
    /// The protocol stream broke (exit status 2).
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
}

impl From<SandboxError> for WorkerError {
    fn from(e: SandboxError) -> Self {
        match e {
            SandboxError::Channel(p) => Self::Protocol(p),
            other => Self::Sandbox(other),
        }
    }
}

impl WorkerError {
    /// The process exit status for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => 64,
            Self::MemoryLimit(_) | Self::Sandbox(_) | Self::Lockdown(_) => 3,
            Self::Protocol(_) => 2,
        }
    }
}

impl WorkerOptions {
    /// Parses the arguments after the program name.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, WorkerError> {
        let mut memory_limit_mb = None;
        let mut limits = SandboxLimits::default();
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            let (name, inline) = match flag.split_once('=') {
                Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
                None => (flag.clone(), None),
            };
            let mut value = || {
                inline
                    .clone()
                    .or_else(|| args.next())
                    .ok_or_else(|| WorkerError::Usage(format!("{name} needs a value")))
            };
            let number = |v: String| {
                v.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    WorkerError::Usage(format!("{name}: not a positive integer: {v}"))
                })
            };
            match name.as_str() {
                "--memory-limit-mb" => memory_limit_mb = Some(number(value()?)?),
                "--recursion-limit" => {
                    limits.recursion_limit = usize::try_from(number(value()?)?)
                        .map_err(|_| WorkerError::Usage("--recursion-limit too large".into()))?;
                }
                other => return Err(WorkerError::Usage(format!("unknown argument {other}"))),
            }
        }
        let memory_limit_mb = memory_limit_mb
            .ok_or_else(|| WorkerError::Usage("--memory-limit-mb is required".into()))?;
        Ok(Self {
            memory_limit_mb,
            limits,
        })
    }
}

/// Sets RLIMIT_AS to the current address-space size plus `extra_mb` MiB, so the limit
/// measures what the actions may add, whatever the binary's own footprint.
pub fn apply_memory_limit(extra_mb: u64) -> Result<u64, WorkerError> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| WorkerError::MemoryLimit(format!("reading /proc/self/status: {e}")))?;
    let vm_size_kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .ok_or_else(|| WorkerError::MemoryLimit("no VmSize in /proc/self/status".into()))?;
    let limit = vm_size_kb
        .saturating_mul(1024)
        .saturating_add(extra_mb.saturating_mul(1024 * 1024));
    rlimit::Resource::AS
        .set(limit, limit)
        .map_err(|e| WorkerError::MemoryLimit(format!("setrlimit(RLIMIT_AS, {limit}): {e}")))?;
    Ok(limit)
}

/// The worker's end of the pipes: the host channel during a job, the job source between
/// jobs.
pub struct PipeHost<R, W> {
    reader: FrameReader<R>,
    writer: FrameWriter<W>,
    next_id: u64,
}

impl<R: Read, W: Write> PipeHost<R, W> {
    /// Wraps the parent's pipes.
    pub fn new(reader: R, writer: W) -> Self {
        Self {
            reader: FrameReader::new(reader),
            writer: FrameWriter::new(writer),
            next_id: 1,
        }
    }

    fn send(&mut self, msg: &FromWorker) -> Result<(), ProtocolError> {
        self.writer.write(msg)
    }

    fn recv(&mut self) -> Result<Option<ToWorker>, ProtocolError> {
        self.reader.read()
    }
}

impl<R: Read, W: Write> HostChannel for PipeHost<R, W> {
    fn call(&mut self, request: HostRequest) -> Result<ReplyOutcome, ProtocolError> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&FromWorker::Call(HostCall { id, request }))?;
        match self.recv()? {
            Some(ToWorker::Reply(reply)) if reply.id == id => Ok(reply.outcome),
            Some(ToWorker::Reply(reply)) => Err(ProtocolError::Unexpected(format!(
                "reply to call {} while call {id} is pending",
                reply.id
            ))),
            Some(ToWorker::Run(_)) => Err(ProtocolError::Unexpected(format!(
                "run while call {id} is pending"
            ))),
            None => Err(ProtocolError::Unexpected(format!(
                "the parent closed the pipe while call {id} is pending"
            ))),
        }
    }
}

/// Main-thread stack the worker wants. Deep *JS* recursion is stopped by the recursion
/// limit, but some paths recurse natively without JS frames (the parser on deeply nested
/// code, `JSON.stringify` / `Array.prototype.join` on deeply nested data); a large stack
/// makes those fail only on absurd depths. Overflowing it kills the worker (SIGABRT or
/// SIGSEGV), which the parent reports as `memory`.
///
/// Actions run on the main thread, whose stack grows on demand and counts against
/// RLIMIT_AS. (A spawned thread with a big stack would not: with glibc its malloc arena
/// would be reserved before the limit is measured and would add up to 64 MiB of heap
/// beyond the limit.)
pub const STACK_BYTES: u64 = 64 * 1024 * 1024;

/// Makes sure the main thread may grow its stack to [`STACK_BYTES`]: the kernel sizes the
/// main stack at `exec` from RLIMIT_STACK, so if the soft limit is lower the worker raises
/// it and re-executes itself once, with the same arguments and descriptors. Returns only
/// if no re-exec was needed or possible (then the worker runs with the stack it has).
pub fn ensure_stack() {
    let Ok((soft, hard)) = rlimit::Resource::STACK.get() else {
        return;
    };
    if soft == rlimit::INFINITY || soft >= STACK_BYTES {
        return;
    }
    if hard != rlimit::INFINITY && hard < STACK_BYTES {
        eprintln!(
            "action-worker: RLIMIT_STACK hard limit {hard} is below {STACK_BYTES}; keeping the default stack"
        );
        return;
    }
    if let Err(e) = rlimit::Resource::STACK.set(STACK_BYTES, hard) {
        eprintln!("action-worker: raising RLIMIT_STACK failed: {e}; keeping the default stack");
        return;
    }
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| "action-worker".into());
    let err = std::process::Command::new("/proc/self/exe")
        .arg0(arg0)
        .args(args)
        .exec();
    eprintln!(
        "action-worker: re-exec with a larger stack failed: {err}; keeping the default stack"
    );
}

/// The whole worker after argument parsing: stack, memory limit, lock-down
/// ([`crate::lockdown`]), then the job loop on stdin/stdout.
pub fn run(options: WorkerOptions) -> Result<(), WorkerError> {
    ensure_stack();
    crate::heap::single_arena();
    apply_memory_limit(options.memory_limit_mb)?;
    crate::lockdown::apply()?;
    serve(
        std::io::stdin().lock(),
        std::io::stdout().lock(),
        options.limits,
    )
}

/// Serves jobs until the parent closes the pipe (`Ok`) or the protocol breaks (`Err`).
pub fn serve<R, W>(reader: R, writer: W, limits: SandboxLimits) -> Result<(), WorkerError>
where
    R: Read + 'static,
    W: Write + 'static,
{
    let mut sandbox = Sandbox::new(limits);
    sandbox.prepare()?;
    let pipes = Rc::new(RefCell::new(PipeHost::new(reader, writer)));
    pipes.borrow_mut().send(&FromWorker::Ready)?;
    loop {
        let msg = pipes.borrow_mut().recv()?;
        let job = match msg {
            None => return Ok(()),
            Some(ToWorker::Run(job)) => job,
            Some(ToWorker::Reply(reply)) => {
                return Err(ProtocolError::Unexpected(format!(
                    "reply {} while no call is pending",
                    reply.id
                ))
                .into());
            }
        };
        let done = sandbox.run(&job, Rc::clone(&pipes) as Rc<RefCell<dyn HostChannel>>)?;
        send_done(&mut pipes.borrow_mut(), done)?;
        sandbox.prepare()?;
    }
}

/// Sends `done` with the live heap ([`crate::heap::live_bytes`]); one too large for a
/// frame (the parent allowed limits beyond the frame size) is replaced by a `limit` error.
fn send_done<R: Read, W: Write>(
    pipes: &mut PipeHost<R, W>,
    mut done: JobDone,
) -> Result<(), ProtocolError> {
    done.heap_bytes = crate::heap::live_bytes();
    match pipes.send(&FromWorker::Done(done)) {
        Err(ProtocolError::FrameTooLarge(n)) => pipes.send(&FromWorker::Done(JobDone {
            response: serde_json::Value::Null,
            logs: String::new(),
            error: Some(ActionError {
                kind: ErrorKind::Limit,
                message: format!("response and logs together are {n} bytes, over the frame limit"),
            }),
            heap_bytes: crate::heap::live_bytes(),
        })),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<WorkerOptions, WorkerError> {
        WorkerOptions::parse(args.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn options() {
        let o = parse(&["--memory-limit-mb", "128"]).unwrap();
        assert_eq!(o.memory_limit_mb, 128);
        assert_eq!(o.limits, SandboxLimits::default());
        let o = parse(&["--recursion-limit=300", "--memory-limit-mb=64"]).unwrap();
        assert_eq!((o.memory_limit_mb, o.limits.recursion_limit), (64, 300));
        for bad in [
            &[][..],
            &["--memory-limit-mb"],
            &["--memory-limit-mb", "0"],
            &["--memory-limit-mb", "-1"],
            &["--memory-limit-mb", "64", "--recursion-limit", "x"],
            &["--memory-limit-mb", "64", "extra"],
        ] {
            let err = parse(bad).unwrap_err();
            assert_eq!(err.exit_code(), 64, "{bad:?}: {err}");
        }
    }
}
