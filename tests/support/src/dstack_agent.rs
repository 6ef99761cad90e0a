//! A stand-in dstack guest agent: a small HTTP/1.1 server on a Unix socket answering the
//! documented `/Info` and `/GetKey` endpoints (github.com/Dstack-TEE/dstack `sdk/curl/api.md`),
//! so `keyservice --platform dstack` runs its real code path without TDX hardware — in a
//! process started by a test, or in a container that has the socket bind-mounted at
//! `/var/run/dstack.sock` (the container test of `tests/e2e`).
//!
//! Its keys are `sha256(app_seed ‖ path)`: like the real agent's, a deterministic function
//! of the app's key and the requested path, so another seed is another app key. `/GetKey`
//! answers with chunked transfer encoding and `/Info` with a Content-Length, so both
//! framings of a client are exercised. Every `/GetKey` request is recorded.
//!
//! (`keyservice/tests/common/agent.rs` is the same agent for keyservice's own tests, with
//! a switch that makes it contradict itself.)

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use sha2::{Digest, Sha256};

/// `(path, purpose)` of every `/GetKey` request, in arrival order.
pub type KeyRequests = Arc<Mutex<Vec<(String, String)>>>;

/// A running stand-in agent; stopped (and its socket removed) when dropped.
pub struct StandInAgent {
    socket: PathBuf,
    key_requests: KeyRequests,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StandInAgent {
    /// Listens on `socket` (replacing a stale file) with the given permission bits (for
    /// example `0o666`, so that a container user other than the test's can connect),
    /// reporting `app_compose` (its SHA-256 is the compose hash) and deriving keys from
    /// `app_seed`.
    pub fn start(socket: &Path, mode: u32, app_compose: &[u8], app_seed: [u8; 32]) -> Self {
        let _ = std::fs::remove_file(socket);
        let listener = UnixListener::bind(socket)
            .unwrap_or_else(|err| panic!("cannot listen on {}: {err}", socket.display()));
        std::fs::set_permissions(socket, std::fs::Permissions::from_mode(mode))
            .unwrap_or_else(|err| panic!("cannot chmod {}: {err}", socket.display()));
        let key_requests: KeyRequests = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let agent = Agent {
            app_compose: String::from_utf8_lossy(app_compose).into_owned(),
            app_seed,
            key_requests: Arc::clone(&key_requests),
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
        match self.key_requests.lock() {
            Ok(list) => list.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
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
    app_compose: String,
    app_seed: [u8; 32],
    key_requests: KeyRequests,
}

impl Agent {
    fn compose_hash(&self) -> String {
        hex::encode(Sha256::digest(self.app_compose.as_bytes()))
    }

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
        let mut out = stream;
        match (method.as_str(), target.as_str()) {
            ("POST" | "GET", "/Info") => {
                let hash = self.compose_hash();
                let tcb_info = serde_json::json!({
                    "mrtd": "00".repeat(48),
                    "rtmr3": "00".repeat(48),
                    "compose_hash": hash,
                    "app_compose": self.app_compose,
                    "event_log": "[]",
                })
                .to_string();
                let json = serde_json::json!({
                    "app_id": "7a3f0c1e2b4d5f6a8c9e0d1c2b3a4f5e6d7c8b9a",
                    "instance_id": "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c",
                    "app_cert": "",
                    "tcb_info": tcb_info,
                    "app_name": "stand-in",
                    "compose_hash": hash,
                })
                .to_string();
                write!(
                    out,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
                    json.len()
                )?;
            }
            ("POST", "/GetKey") => {
                let req: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                let path = req["path"].as_str().unwrap_or_default().to_owned();
                let purpose = req["purpose"].as_str().unwrap_or_default().to_owned();
                match self.key_requests.lock() {
                    Ok(mut list) => list.push((path.clone(), purpose)),
                    Err(poisoned) => poisoned.into_inner().push((path.clone(), purpose)),
                }
                let mut h = Sha256::new();
                h.update(self.app_seed);
                h.update(path.as_bytes());
                let key = hex::encode(h.finalize());
                let json = serde_json::json!({
                    "key": key,
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
}
