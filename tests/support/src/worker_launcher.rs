//! The real `worker-launcher` in tests (feature `worker-launcher`): the binary on a socket in
//! a temporary directory ([`Launcher`]), the real `action-worker` it starts, and the
//! appliance's side of both protocols ([`Driven`]: the launcher's, and the worker's frames
//! over the handed-over pipes).
//!
//! It links `worker-launcher` (its client), so the launcher's own tests use it through a
//! dev-dependency cycle (`worker-launcher` → `test-support` → `worker-launcher`), which
//! cargo allows for integration tests: the test binary and this crate see the one
//! `worker-launcher` library.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use action_runtime::protocol::{
    self, FromWorker, HEADER_LEN, JobDone, JobLimits, RunJob, ToWorker,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::unix::pipe;
use worker_launcher::client::{self, Connection, LaunchError};

/// How long anything a test waits for may take before the test fails.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// The `action-worker` binary of this target directory, refused when missing or older
/// than its sources (`cargo test -p worker-launcher` does not build other packages).
pub fn action_worker() -> PathBuf {
    crate::binaries::workspace_binary("action-worker")
}

/// A running launcher, stopped (SIGKILL) when dropped.
pub struct Launcher {
    pub child: Child,
    pub socket: PathBuf,
}

impl Launcher {
    /// Starts `cmd` (a launcher command line) and waits for its socket.
    pub fn start(mut cmd: Command, socket: PathBuf) -> Self {
        let mut child = cmd
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn worker-launcher");
        let deadline = Instant::now() + PATIENCE;
        while !socket.exists() {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("the launcher exited before listening: {status}");
            }
            assert!(Instant::now() < deadline, "the launcher did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { child, socket }
    }

    /// The usual development launcher (this test's uid) in `dir`.
    pub fn dev(dir: &Path, extra: &[&str]) -> Self {
        let socket = dir.join("launcher.sock");
        let cwd = dir.join("worker-cwd");
        std::fs::create_dir_all(&cwd).unwrap();
        let mut cmd = Command::new(crate::binaries::workspace_binary("worker-launcher"));
        cmd.arg("--socket")
            .arg(&socket)
            .arg("--worker-binary")
            .arg(action_worker())
            .arg("--worker-cwd")
            .arg(&cwd)
            .arg("--allow-same-uid-dev")
            .args(extra);
        Self::start(cmd, socket)
    }

    pub async fn launch(&self) -> Result<Driven, LaunchError> {
        Driven::launch(&self.socket).await
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A launched worker, driven as the appliance drives it.
pub struct Driven {
    pub pid: u32,
    pub memory_limit_mb: u64,
    pub stdin: Option<pipe::Sender>,
    pub stdout: pipe::Receiver,
    pub connection: Option<Connection>,
}

impl Driven {
    /// Asks the launcher at `socket` for a worker and forwards its stderr to ours.
    pub async fn launch(socket: &Path) -> Result<Self, LaunchError> {
        let launched = client::launch(socket).await?;
        let stderr = pipe::Receiver::from_owned_fd(launched.stderr).unwrap();
        tokio::spawn(forward_stderr(stderr, launched.pid));
        Ok(Self {
            pid: launched.pid,
            memory_limit_mb: launched.memory_limit_mb,
            stdin: Some(pipe::Sender::from_owned_fd(launched.stdin).unwrap()),
            stdout: pipe::Receiver::from_owned_fd(launched.stdout).unwrap(),
            connection: Some(launched.connection),
        })
    }

    /// The next frame, `None` when the worker's stdout ended.
    pub async fn recv(&mut self) -> Option<FromWorker> {
        let mut header = [0u8; HEADER_LEN];
        if self.stdout.read_exact(&mut header).await.is_err() {
            return None;
        }
        let len = protocol::frame_len(header).unwrap();
        let mut body = vec![0u8; len];
        self.stdout.read_exact(&mut body).await.ok()?;
        Some(protocol::decode(&body).unwrap())
    }

    pub async fn ready(&mut self) {
        match tokio::time::timeout(PATIENCE, self.recv()).await {
            Ok(Some(FromWorker::Ready)) => {}
            other => panic!("expected ready, got {other:?}"),
        }
    }

    /// Sends `run` for `code` (no host calls).
    pub async fn start(&mut self, code: &str) {
        let frame = protocol::encode(&ToWorker::Run(RunJob {
            code: code.to_owned(),
            js_params: serde_json::Value::Null,
            action_cid: "QmLauncherTest".to_owned(),
            limits: JobLimits::default(),
        }))
        .unwrap();
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(&frame).await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// Runs `code` to its `done`.
    pub async fn run(&mut self, code: &str) -> JobDone {
        self.start(code).await;
        match tokio::time::timeout(PATIENCE, self.recv()).await {
            Ok(Some(FromWorker::Done(done))) => done,
            other => panic!("expected done, got {other:?}"),
        }
    }

    pub fn connection(&mut self) -> &mut Connection {
        self.connection.as_mut().unwrap()
    }
}

async fn forward_stderr(mut stderr: pipe::Receiver, pid: u32) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            break;
        }
        eprint!("[worker {pid}] {}", String::from_utf8_lossy(&buf[..n]));
    }
}

/// Whether a process with `pid` exists (a zombie counts: it is not reaped yet).
pub fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Waits until `pid` is gone (reaped), failing the test after [`PATIENCE`].
pub async fn wait_gone(pid: u32) {
    let deadline = Instant::now() + PATIENCE;
    while alive(pid) {
        assert!(Instant::now() < deadline, "process {pid} is still there");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A field of `/proc/<pid>/status` (the text after `Name:`), trimmed.
pub fn proc_status(pid: u32, name: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"))
        .trim()
        .to_owned()
}

/// Keeps `_fd` open (a descriptor a test must not close early).
pub fn keep(_fd: OwnedFd) {}
