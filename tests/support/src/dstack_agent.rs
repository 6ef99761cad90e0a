//! The stand-in dstack guest agent of every crate's tests: a small HTTP/1.1 server on a
//! Unix socket answering the documented `/Info`, `/GetKey`, `/GetQuote` and `/EmitEvent`
//! endpoints (github.com/Dstack-TEE/dstack `sdk/curl/api.md`), so `keyservice --platform
//! dstack` runs its real code path without TDX hardware — in a process started by a test
//! (keyservice's own tests), or in a container that has the socket bind-mounted at
//! `/var/run/dstack.sock` (the container test of `tests/e2e`).
//!
//! Its keys are `sha256(app_seed ‖ path)`: like the real agent's, a deterministic function
//! of the app's key and the requested path, so another seed is another app key. `/GetKey`
//! answers with chunked transfer encoding and `/Info` with a Content-Length, so both
//! framings of a client are exercised. Its quotes are not TDX quotes: `quote` is the hex
//! of [`fake_quote`] (`"fake-quote:" ‖ report_data`), so a test sees the report data
//! travel back unchanged. Every call is recorded (method and JSON body), and every
//! `/GetKey` also as `(path, purpose)`, so a test can show which agent calls an operation
//! can cause. [`AgentConfig`] can make it contradict itself (a top-level compose hash
//! that is not the hash of its compose) or hold a quote in progress.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use sha2::{Digest, Sha256};

/// `(path, purpose)` of every `/GetKey` request, in arrival order.
pub type KeyRequests = Arc<Mutex<Vec<(String, String)>>>;

/// `(method, JSON body)` of every call, in arrival order (`method` without the leading `/`).
pub type AgentCalls = Arc<Mutex<Vec<(String, serde_json::Value)>>>;

/// The event log the agent returns with every quote unless configured otherwise.
pub const FAKE_EVENT_LOG: &str =
    r#"[{"imr":3,"event_type":134217729,"digest":"00","event":"fake","event_payload":""}]"#;
/// The `vm_config` the agent returns with every quote.
pub const FAKE_VM_CONFIG: &str = r#"{"fake":true}"#;
/// The agent's app id.
pub const FAKE_APP_ID: &str = "7a3f0c1e2b4d5f6a8c9e0d1c2b3a4f5e6d7c8b9a";

/// The agent's quote bytes for `report_data`.
pub fn fake_quote(report_data: &[u8]) -> Vec<u8> {
    [b"fake-quote:".as_slice(), report_data].concat()
}

/// What the agent reports and how it behaves.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// The app-compose.json text; its SHA-256 is the compose hash the agent reports.
    pub app_compose: String,
    /// Stands in for the KMS-provided app key.
    pub app_seed: [u8; 32],
    /// Report a top-level `compose_hash` different from `sha256(app_compose)`.
    pub lie_about_compose_hash: bool,
    /// When set, each `/GetQuote` is answered only after one token arrives (or the
    /// sender is dropped): lets a test hold a quote in progress.
    pub quote_gate: Option<Arc<Mutex<Receiver<()>>>>,
    /// The `event_log` returned with every quote (default [`FAKE_EVENT_LOG`]).
    pub quote_event_log: String,
    /// The socket file's permission bits (default 0600; 0666 lets a container user other
    /// than the test's connect).
    pub socket_mode: u32,
}

impl AgentConfig {
    /// `app_compose` and an app key of 32 bytes of `seed`.
    pub fn new(app_compose: &str, seed: u8) -> Self {
        Self {
            app_compose: app_compose.to_owned(),
            app_seed: [seed; 32],
            lie_about_compose_hash: false,
            quote_gate: None,
            quote_event_log: FAKE_EVENT_LOG.to_owned(),
            socket_mode: 0o600,
        }
    }

    /// SHA-256 of the compose: the compose hash the agent reports.
    pub fn compose_hash_bytes(&self) -> [u8; 32] {
        Sha256::digest(self.app_compose.as_bytes()).into()
    }
}

/// A running stand-in agent; stopped (and its socket removed) when dropped.
pub struct StandInAgent {
    /// The socket it listens on.
    pub socket: PathBuf,
    /// Every `/GetKey` request so far (also [`StandInAgent::key_requests`]).
    pub key_requests: KeyRequests,
    calls: AgentCalls,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl StandInAgent {
    /// Listens on `socket` (replacing a stale file) with the permission bits `mode`,
    /// reporting `app_compose` and deriving keys from `app_seed`.
    pub fn start(socket: &Path, mode: u32, app_compose: &[u8], app_seed: [u8; 32]) -> Self {
        let config = AgentConfig {
            app_seed,
            socket_mode: mode,
            ..AgentConfig::new(&String::from_utf8_lossy(app_compose), 0)
        };
        Self::start_with(socket, config)
    }

    /// Listens on the socket `name` in the folder `dir`, as `config` says.
    pub fn start_in(dir: &Path, name: &str, config: AgentConfig) -> Self {
        Self::start_with(&dir.join(name), config)
    }

    /// Listens on `socket` (replacing a stale file) as `config` says.
    pub fn start_with(socket: &Path, config: AgentConfig) -> Self {
        let _ = std::fs::remove_file(socket);
        let listener = UnixListener::bind(socket)
            .unwrap_or_else(|err| panic!("cannot listen on {}: {err}", socket.display()));
        std::fs::set_permissions(socket, std::fs::Permissions::from_mode(config.socket_mode))
            .unwrap_or_else(|err| panic!("cannot chmod {}: {err}", socket.display()));
        let key_requests: KeyRequests = Arc::default();
        let calls: AgentCalls = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let agent = Agent {
            config,
            key_requests: Arc::clone(&key_requests),
            calls: Arc::clone(&calls),
        };
        let stopping = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let _ = agent.serve_one(stream);
            }
        });
        Self {
            socket: socket.to_owned(),
            key_requests,
            calls,
            stop,
            thread: Some(thread),
        }
    }

    /// The socket it listens on.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// `(path, purpose)` of every `/GetKey` request so far.
    pub fn key_requests(&self) -> Vec<(String, String)> {
        lock(&self.key_requests).clone()
    }

    /// `(method, JSON body)` of every call so far.
    pub fn calls(&self) -> Vec<(String, serde_json::Value)> {
        lock(&self.calls).clone()
    }
}

impl Drop for StandInAgent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag.
        let _ = UnixStream::connect(&self.socket);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

struct Agent {
    config: AgentConfig,
    key_requests: KeyRequests,
    calls: AgentCalls,
}

impl Agent {
    fn serve_one(&self, stream: UnixStream) -> std::io::Result<()> {
        let mut reader = BufReader::new(stream.try_clone()?);
        let mut request_line = String::new();
        if reader.read_line(&mut request_line)? == 0 {
            // A peer that only checked it can connect.
            return Ok(());
        }
        let mut content_length = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                content_length = v.trim().parse().unwrap_or(0).min(1 << 20);
            }
        }
        let mut body = vec![0u8; content_length];
        reader.read_exact(&mut body)?;
        let mut parts = request_line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_owned();
        let target = parts.next().unwrap_or_default().to_owned();
        let json_body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        lock(&self.calls).push((target.trim_start_matches('/').to_owned(), json_body.clone()));
        let mut out = stream;
        let mut respond = |json: &str| {
            write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
                json.len()
            )
        };
        match (method.as_str(), target.as_str()) {
            ("POST" | "GET", "/Info") => respond(&self.info())?,
            ("POST", "/GetQuote") => {
                if let Some(gate) = &self.config.quote_gate {
                    let _ = lock(gate).recv();
                }
                let report_data =
                    hex::decode(json_body["report_data"].as_str().unwrap_or_default())
                        .unwrap_or_default();
                let json = serde_json::json!({
                    "quote": hex::encode(fake_quote(&report_data)),
                    "event_log": self.config.quote_event_log,
                    "vm_config": FAKE_VM_CONFIG,
                })
                .to_string();
                respond(&json)?;
            }
            ("POST", "/EmitEvent") => respond("{}")?,
            ("POST", "/GetKey") => {
                let path = json_body["path"].as_str().unwrap_or_default().to_owned();
                let purpose = json_body["purpose"].as_str().unwrap_or_default().to_owned();
                lock(&self.key_requests).push((path.clone(), purpose));
                let mut h = Sha256::new();
                h.update(self.config.app_seed);
                h.update(path.as_bytes());
                let json = serde_json::json!({
                    "key": hex::encode(h.finalize()),
                    "signature_chain": ["00".repeat(65), "11".repeat(65)],
                })
                .to_string();
                let (a, b) = json.split_at(json.len() / 2);
                write!(
                    out,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n\
                     {:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
                    a.len(),
                    b.len()
                )?;
            }
            _ => {
                let json = r#"{"error":"not found"}"#;
                write!(
                    out,
                    "HTTP/1.1 404 Not Found\r\nContent-Length: {}\r\n\r\n{json}",
                    json.len()
                )?;
            }
        }
        out.flush()
    }

    /// The `/Info` answer: the compose, its hash (or, configured to lie, another one at
    /// the top level), the app id.
    fn info(&self) -> String {
        let real = hex::encode(self.config.compose_hash_bytes());
        let top = if self.config.lie_about_compose_hash {
            "00".repeat(32)
        } else {
            real.clone()
        };
        let tcb_info = serde_json::json!({
            "mrtd": "00".repeat(48),
            "rtmr3": "00".repeat(48),
            "compose_hash": real,
            "app_compose": self.config.app_compose,
            "event_log": "[]",
        })
        .to_string();
        serde_json::json!({
            "app_id": FAKE_APP_ID,
            "instance_id": "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c",
            "app_cert": "",
            "tcb_info": tcb_info,
            "app_name": "stand-in",
            "compose_hash": top,
        })
        .to_string()
    }
}
