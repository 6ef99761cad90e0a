//! A `simulated` dstack guest agent: a tiny HTTP/1.1 server on a Unix socket serving the
//! documented `/Info`, `/GetKey`, `/GetQuote` and `/EmitEvent` endpoints
//! (github.com/Dstack-TEE/dstack `sdk/curl/api.md`), so the real `keyservice --platform
//! dstack` code path runs end to end without TDX hardware. Every call is recorded (path and
//! JSON body), so a test can show which agent calls the socket's operations can cause.
//!
//! Its quotes are not TDX quotes: `quote` is the hex of `"fake-quote:" ‖ report_data`,
//! so a test can see the report data travel back unchanged.
//!
//! Its keys are `sha256(app_seed ‖ path)` — like the real agent, a deterministic function
//! of the app's key and the requested path — so a different seed means a different app key.
//! `/GetKey` answers with chunked transfer encoding and `/Info` with Content-Length, so
//! both framings of the client are exercised.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use keyservice_api::ComposeHash;
use sha2::{Digest, Sha256};

#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// The app-compose.json text; its SHA-256 is the compose hash the agent reports.
    pub app_compose: String,
    /// Stands in for the KMS-provided app key.
    pub app_seed: [u8; 32],
    /// Report a top-level `compose_hash` different from `sha256(app_compose)`.
    pub lie_about_compose_hash: bool,
    /// When set, each `GetQuote` is answered only after one token arrives (or the sender
    /// is dropped): lets a test hold a quote in progress.
    pub quote_gate: Option<Arc<Mutex<std::sync::mpsc::Receiver<()>>>>,
    /// The `event_log` returned with every quote (default [`FAKE_EVENT_LOG`]).
    pub quote_event_log: String,
}

impl AgentConfig {
    pub fn new(app_compose: &str, seed: u8) -> Self {
        Self {
            app_compose: app_compose.to_owned(),
            app_seed: [seed; 32],
            lie_about_compose_hash: false,
            quote_gate: None,
            quote_event_log: FAKE_EVENT_LOG.to_owned(),
        }
    }

    pub fn compose_hash(&self) -> ComposeHash {
        ComposeHash(Sha256::digest(self.app_compose.as_bytes()).into())
    }
}

/// `(path, purpose)` of every `GetKey` call.
pub type KeyRequests = Arc<Mutex<Vec<(String, String)>>>;

/// `(method, JSON body)` of every call, in order (`method` without the leading `/`).
pub type AgentCalls = Arc<Mutex<Vec<(String, serde_json::Value)>>>;

/// The fake agent's quote bytes for `report_data`.
pub fn fake_quote(report_data: &[u8]) -> Vec<u8> {
    [b"fake-quote:".as_slice(), report_data].concat()
}

/// The event log the fake agent returns with every quote.
pub const FAKE_EVENT_LOG: &str =
    r#"[{"imr":3,"event_type":134217729,"digest":"00","event":"fake","event_payload":""}]"#;
/// The `vm_config` the fake agent returns with every quote.
pub const FAKE_VM_CONFIG: &str = r#"{"fake":true}"#;
/// The fake agent's app id.
pub const FAKE_APP_ID: &str = "7a3f0c1e2b4d5f6a8c9e0d1c2b3a4f5e6d7c8b9a";

pub struct SimulatedAgent {
    pub socket: PathBuf,
    pub key_requests: KeyRequests,
    pub calls: AgentCalls,
    _thread: JoinHandle<()>,
}

impl SimulatedAgent {
    /// The calls recorded so far.
    pub fn calls(&self) -> Vec<(String, serde_json::Value)> {
        self.calls.lock().unwrap().clone()
    }
}

impl SimulatedAgent {
    pub fn start(dir: &Path, name: &str, config: AgentConfig) -> Self {
        let socket = dir.join(name);
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket).unwrap();
        let key_requests: KeyRequests = Arc::default();
        let calls: AgentCalls = Arc::default();
        let log = Arc::clone(&key_requests);
        let all = Arc::clone(&calls);
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let _ = serve_one(stream, &config, &log, &all);
            }
        });
        Self {
            socket,
            key_requests,
            calls,
            _thread: thread,
        }
    }
}

fn serve_one(
    stream: std::os::unix::net::UnixStream,
    config: &AgentConfig,
    log: &KeyRequests,
    all: &AgentCalls,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut content_length = 0usize;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            content_length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; content_length];
    reader.read_exact(&mut body)?;
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default().to_owned();
    let mut out = stream;
    let json_body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    all.lock()
        .unwrap()
        .push((target.trim_start_matches('/').to_owned(), json_body.clone()));
    let mut respond = |json: &str| {
        write!(
            out,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
            json.len()
        )
    };
    match (method.as_str(), target.as_str()) {
        ("POST", "/GetQuote") => {
            if let Some(gate) = &config.quote_gate {
                let _ = gate.lock().unwrap().recv();
            }
            let report_data = hex::decode(json_body["report_data"].as_str().unwrap_or_default())
                .unwrap_or_default();
            let json = serde_json::json!({
                "quote": hex::encode(fake_quote(&report_data)),
                "event_log": config.quote_event_log,
                "vm_config": FAKE_VM_CONFIG,
            })
            .to_string();
            respond(&json)?;
        }
        ("POST", "/EmitEvent") => respond("{}")?,
        ("POST" | "GET", "/Info") => {
            let real = hex::encode(config.compose_hash().as_bytes());
            let top = if config.lie_about_compose_hash {
                "00".repeat(32)
            } else {
                real.clone()
            };
            let tcb_info = serde_json::json!({
                "mrtd": "00".repeat(48),
                "rtmr3": "00".repeat(48),
                "compose_hash": real,
                "app_compose": config.app_compose,
                "event_log": "[]",
            })
            .to_string();
            let json = serde_json::json!({
                "app_id": FAKE_APP_ID,
                "instance_id": "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c",
                "app_cert": "",
                "tcb_info": tcb_info,
                "app_name": "keyservice-simulated",
                "compose_hash": top,
            })
            .to_string();
            respond(&json)?;
        }
        ("POST", "/GetKey") => {
            let req: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let path = req["path"].as_str().unwrap_or_default().to_owned();
            let purpose = req["purpose"].as_str().unwrap_or_default().to_owned();
            log.lock().unwrap().push((path.clone(), purpose));
            let mut h = Sha256::new();
            h.update(config.app_seed);
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
