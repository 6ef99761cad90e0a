//! The real `action-worker` in tests (feature `action-worker`): [`Worker`] starts the binary
//! and plays the parent over its stdin and stdout (the worker protocol of
//! `action_runtime::protocol`), answering host calls as the test says; [`ok`] and [`failed`]
//! check a job's outcome.
//!
//! It links `action-runtime` without its `worker` feature (the protocol only), so the tests
//! of `action-runtime` itself use it through a dev-dependency cycle (`action-runtime` →
//! `test-support` → `action-runtime`), which cargo allows for integration tests: the test
//! binary and this crate see the one `action-runtime` library.

use std::io::Write;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use action_runtime::protocol::{
    FrameReader, FromWorker, HostCall, HostReply, JobDone, JobLimits, ProtocolError, ReplyOutcome,
    RunJob, ToWorker, encode,
};
use serde_json::{Value, json};

/// How long any single frame may take to arrive in a test.
pub const FRAME_TIMEOUT: Duration = Duration::from_secs(20);

/// A running `action-worker`, killed when dropped.
pub struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    frames: Receiver<Result<FromWorker, String>>,
}

impl Worker {
    /// A worker with a 256 MiB memory limit.
    pub fn spawn() -> Self {
        Self::spawn_with(&["--memory-limit-mb", "256"])
    }

    pub fn spawn_with(args: &[&str]) -> Self {
        let mut w = Self::spawn_raw(args);
        match w.recv() {
            Some(FromWorker::Ready) => w,
            other => panic!("expected ready, got {other:?}"),
        }
    }

    /// Spawns without waiting for `ready`.
    pub fn spawn_raw(args: &[&str]) -> Self {
        let mut child = Command::new(crate::binaries::workspace_binary("action-worker"))
            .args(args)
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn action-worker");
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut reader = FrameReader::new(stdout);
            loop {
                match reader.read::<FromWorker>() {
                    Ok(Some(msg)) => {
                        if tx.send(Ok(msg)).is_err() {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(ProtocolError::Io(_)) | Err(ProtocolError::Truncated) => return,
                    Err(e) => {
                        let _ = tx.send(Err(e.to_string()));
                        return;
                    }
                }
            }
        });
        Self {
            child,
            stdin,
            frames: rx,
        }
    }

    pub fn send(&mut self, msg: &ToWorker) {
        let frame = encode(msg).unwrap();
        self.send_bytes(&frame);
    }

    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// Closes the worker's stdin (EOF).
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// The next frame; `None` if the worker closed its stdout.
    pub fn recv(&mut self) -> Option<FromWorker> {
        self.recv_timeout(FRAME_TIMEOUT)
            .unwrap_or_else(|| panic!("no frame from the worker within {FRAME_TIMEOUT:?}"))
    }

    /// `None` on timeout; `Some(None)` when the stream ended.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Option<Option<FromWorker>> {
        match self.frames.recv_timeout(timeout) {
            Ok(Ok(msg)) => Some(Some(msg)),
            Ok(Err(e)) => panic!("bad frame from the worker: {e}"),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(None),
        }
    }

    pub fn start(&mut self, code: &str, js_params: Value) {
        self.send(&ToWorker::Run(job(code, js_params)));
    }

    /// Runs an action that must not make host calls.
    pub fn run(&mut self, code: &str, js_params: Value) -> JobDone {
        self.run_job(job(code, js_params), |call| {
            panic!("unexpected host call {call:?}")
        })
        .0
    }

    /// Runs a job, answering host calls with `answer`; returns `done` and the calls seen.
    pub fn run_job(
        &mut self,
        job: RunJob,
        mut answer: impl FnMut(&HostCall) -> ReplyOutcome,
    ) -> (JobDone, Vec<HostCall>) {
        self.send(&ToWorker::Run(job));
        let mut calls = Vec::new();
        loop {
            match self.recv() {
                Some(FromWorker::Done(done)) => return (done, calls),
                Some(FromWorker::Call(call)) => {
                    let outcome = answer(&call);
                    self.send(&ToWorker::Reply(HostReply {
                        id: call.id,
                        outcome,
                    }));
                    calls.push(call);
                }
                Some(FromWorker::Ready) => panic!("second ready"),
                None => panic!(
                    "worker ended during a job: {:?}",
                    self.wait_exit(Duration::from_secs(5))
                ),
            }
        }
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn kill(&mut self) -> ExitStatus {
        let _ = self.child.kill();
        self.child.wait().unwrap()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A job running `code` with `js_params` and the default limits.
pub fn job(code: &str, js_params: Value) -> RunJob {
    RunJob {
        code: code.to_owned(),
        js_params,
        action_cid: "QmTestCid".to_owned(),
        limits: JobLimits::default(),
    }
}

/// Asserts success and returns the response.
#[track_caller]
pub fn ok(done: &JobDone) -> &Value {
    assert!(
        done.error.is_none(),
        "action failed: {:?}\nlogs: {}",
        done.error,
        done.logs
    );
    &done.response
}

/// Asserts a failure of `kind` and returns its message.
#[track_caller]
pub fn failed(done: &JobDone, kind: action_runtime::protocol::ErrorKind) -> String {
    let err = done
        .error
        .as_ref()
        .unwrap_or_else(|| panic!("expected a {kind:?} error, got response {}", done.response));
    assert_eq!(err.kind, kind, "message: {}", err.message);
    assert_eq!(done.response, Value::Null);
    err.message.clone()
}

/// JSON `null`, the parameters of an action that takes none.
pub fn null() -> Value {
    json!(null)
}
