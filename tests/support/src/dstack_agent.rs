//! The stand-in dstack guest agent of every crate's tests: an HTTP/1.1 server on a Unix
//! socket answering `/Info`, `/GetKey`, `/GetQuote` and `/EmitEvent` with the JSON the real
//! agent produces (read in github.com/Dstack-TEE/dstack: `dstack/guest-agent/src`, the RPC
//! definitions in github.com/Dstack-TEE/dstack `dstack/guest-agent/rpc/proto/agent_rpc.proto`
//! and the HTTP API in github.com/Dstack-TEE/dstack `sdk/curl/api.md`), so
//! `keyservice --platform dstack --quote-provider dstack` runs its real code path without
//! TDX hardware — in a process started by a test (keyservice's own tests), or in a
//! container that has the socket bind-mounted at `/var/run/dstack.sock` (the container test
//! of `tests/e2e`). dstack's own clients, `@phala/dstack-sdk` (npm) and `dstack-sdk`
//! (PyPI), are run against it by this crate's `dstack_sdks` test.
//!
//! What is faithful (the shapes of a dstack OS 0.5/0.6 agent on TDX):
//!
//! * `/Info` → `app_id`, `instance_id`, `app_cert`, `tcb_info`, `app_name` (the compose's
//!   `name`), `device_id`, `mr_aggregated`, `os_image_hash`, `key_provider_info` (JSON
//!   text `{"name":"kms","id":…}`), `compose_hash` (`sha256(app_compose)`), `vm_config`,
//!   `cloud_vendor`, `cloud_product`; byte fields are hex without `0x`. `tcb_info` is JSON
//!   *text* holding `mrtd`, `rtmr0`–`rtmr3`, `mr_aggregated`, `os_image_hash`,
//!   `compose_hash`, `device_id`, `app_compose` and `event_log`, an array of full events.
//!   The RTMRs are what that event log replays to, and `mr_aggregated` is
//!   `sha256(mrtd ‖ rtmr0 ‖ rtmr1 ‖ rtmr2 ‖ rtmr3)`, as dstack computes it.
//! * The event log: boot events on RTMR0–2 with 48-byte digests, then dstack's runtime
//!   events on RTMR3 (event type `0x08000001`, digest
//!   `sha384(type as u32 LE ‖ ":" ‖ name ‖ ":" ‖ payload)`): `system-preparing`, `app-id`,
//!   `compose-hash`, `instance-id`, `boot-mr-done`, `os-image-hash`, `key-provider`,
//!   `storage-fs`, `system-ready`, then whatever `/EmitEvent` added.
//! * `/GetKey` `{path, purpose, algorithm}` → `{key, signature_chain}`: the key 32 bytes
//!   in hex, the chain two 65-byte values in hex. The key is `sha256(app_seed ‖ path)`:
//!   like the real agent's, a deterministic function of the app's key and the path alone
//!   (`purpose` and `algorithm` do not change it), so another seed is another app key.
//!   `algorithm` must be empty, `secp256k1`, `k256` or `ed25519`, as for the real agent.
//! * `/GetQuote` `{report_data}` (hex, at most 64 bytes, zero-padded to 64) →
//!   `{"quote", "event_log", "report_data", "vm_config"}`, `report_data` the padded 64
//!   bytes. `event_log` is JSON text in the form the agent gives with quotes since dstack
//!   0.5.6: boot events keep their digests and lose their payloads, runtime events keep
//!   their payloads and have an empty digest (a verifier recomputes it).
//! * `/EmitEvent` `{event, payload}` (payload hex) → `{}`; the event is appended to the
//!   event log and extends RTMR3, as dstack OS 0.5.x did (dstack has since removed this
//!   RPC from the agent; the published SDKs still offer it).
//! * HTTP: every answer has a `Content-Length` (dstack's node SDK reads no other framing)
//!   and `Connection: close`; a refused request is `{"error": "…"}` with status 400, an
//!   unknown path 404.
//!
//! What is not: the quote is not a TDX quote — `quote` is the hex of [`fake_quote`]
//! (`"fake-quote:" ‖ report_data`), so a test sees the report data travel back unchanged
//! and no verifier accepts it; the MRs, device id, OS image hash, key provider id and
//! `vm_config` are made up (consistent with each other, tied to no image); the signature
//! chain is not made of signatures; `app_cert` is empty; `GetTlsKey`, `Sign`, `Verify`,
//! `Attest`, `Version` and the GET-with-query forms are not served.
//!
//! Every call is recorded (method and JSON body), every `/GetKey` also as `(path, purpose)`
//! and every `/EmitEvent` as `(event, payload)`, so a test can show which agent calls an
//! operation can cause. [`AgentConfig`] can make it contradict itself (a top-level compose
//! hash that is not the hash of its compose), answer quotes with another event log, or hold
//! a quote in progress. It serves one connection at a time.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use sha2::{Digest, Sha256, Sha384};

/// `(path, purpose)` of every `/GetKey` request, in arrival order.
pub type KeyRequests = Arc<Mutex<Vec<(String, String)>>>;

/// `(method, JSON body)` of every call, in arrival order (`method` without the leading `/`).
pub type AgentCalls = Arc<Mutex<Vec<(String, serde_json::Value)>>>;

/// `(event, payload)` of every `/EmitEvent`, in arrival order.
pub type EmittedEvents = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// The event type of dstack's runtime events (the ones on RTMR3).
pub const RUNTIME_EVENT_TYPE: u32 = 0x0800_0001;
/// The `vm_config` the agent reports (with every quote and in `/Info`); its
/// `os_image_hash` is [`FAKE_OS_IMAGE_HASH`].
pub const FAKE_VM_CONFIG: &str = r#"{"os_image_hash":"0a5e1a9e0a5e1a9e0a5e1a9e0a5e1a9e0a5e1a9e0a5e1a9e0a5e1a9e0a5e1a9e","cpu_count":2,"memory_size":2147483648,"qemu_version":"8.2.2","pci_hole64_size":0,"hugepages":false,"num_gpus":0,"num_nvswitches":0,"hotplug_off":false,"image":"stand-in","host_share_mode":"9p"}"#;
/// The agent's app id (20 bytes, hex).
pub const FAKE_APP_ID: &str = "7a3f0c1e2b4d5f6a8c9e0d1c2b3a4f5e6d7c8b9a";
/// The agent's instance id (20 bytes, hex).
pub const FAKE_INSTANCE_ID: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c";
/// The agent's device id (32 bytes, hex).
pub const FAKE_DEVICE_ID: &str = "de1ce1d0de1ce1d0de1ce1d0de1ce1d0de1ce1d0de1ce1d0de1ce1d0de1ce1d0";
/// The OS image hash the agent reports (32 bytes, hex).
pub const FAKE_OS_IMAGE_HASH: &str =
    "0a5e1a9e0a5e1a9e0a5e1a9e0a5e1a9e0a5e1a9e0a5e1a9e0a5e1a9e0a5e1a9e";
/// `key_provider_info`, also the payload of the `key-provider` event: a KMS, with a
/// made-up id (the real one is the hex of the KMS's public key).
pub const FAKE_KEY_PROVIDER_INFO: &str = r#"{"name":"kms","id":"6b6d732d7374616e642d696e"}"#;

/// The agent's quote bytes for `report_data` (the request's report data, zero-padded to 64
/// bytes).
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
    /// When set, the exact `event_log` text returned with every quote, instead of the
    /// agent's own log ([`AgentConfig::quoted_event_log`]).
    pub quote_event_log: Option<String>,
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
            quote_event_log: None,
            socket_mode: 0o600,
        }
    }

    /// SHA-256 of the compose: the compose hash the agent reports.
    pub fn compose_hash_bytes(&self) -> [u8; 32] {
        Sha256::digest(self.app_compose.as_bytes()).into()
    }

    /// The `event_log` text `/GetQuote` answers before any `/EmitEvent`.
    pub fn quoted_event_log(&self) -> String {
        self.quote_event_log
            .clone()
            .unwrap_or_else(|| quoted_log(&boot_log(self)))
    }
}

/// One event of the agent's event log.
struct LogEvent {
    imr: u32,
    event_type: u32,
    digest: [u8; 48],
    event: String,
    payload: Vec<u8>,
}

impl LogEvent {
    /// A boot-time event; its digest is the SHA-384 of its payload.
    fn boot(imr: u32, event_type: u32, payload: &[u8]) -> Self {
        Self {
            imr,
            event_type,
            digest: Sha384::digest(payload).into(),
            event: String::new(),
            payload: payload.to_vec(),
        }
    }

    /// A dstack runtime event on RTMR3.
    fn runtime(name: &str, payload: &[u8]) -> Self {
        let mut h = Sha384::new();
        h.update(RUNTIME_EVENT_TYPE.to_le_bytes());
        h.update(b":");
        h.update(name.as_bytes());
        h.update(b":");
        h.update(payload);
        Self {
            imr: 3,
            event_type: RUNTIME_EVENT_TYPE,
            digest: h.finalize().into(),
            event: name.to_owned(),
            payload: payload.to_vec(),
        }
    }

    /// The event as JSON, in the real agent's field order; `quoted`: the form of a quote's
    /// log (boot events without payload, runtime events without digest).
    fn json(&self, quoted: bool) -> String {
        let runtime = self.event_type == RUNTIME_EVENT_TYPE;
        let digest = if quoted && runtime {
            String::new()
        } else {
            hex::encode(self.digest)
        };
        let payload = if quoted && !runtime {
            String::new()
        } else {
            hex::encode(&self.payload)
        };
        format!(
            r#"{{"imr":{},"event_type":{},"digest":"{digest}","event":{},"event_payload":"{payload}"}}"#,
            self.imr,
            self.event_type,
            serde_json::Value::from(self.event.as_str()),
        )
    }
}

/// The log as a quote carries it: JSON text.
fn quoted_log(events: &[LogEvent]) -> String {
    let items: Vec<String> = events.iter().map(|e| e.json(true)).collect();
    format!("[{}]", items.join(","))
}

/// The log up to `system-ready`: made-up boot events, then the runtime events dstack OS
/// emits while it boots, naming this app.
fn boot_log(config: &AgentConfig) -> Vec<LogEvent> {
    let bytes = |text: &str| hex::decode(text).unwrap_or_default();
    vec![
        // EV_EFI_PLATFORM_FIRMWARE_BLOB2, EV_SEPARATOR
        LogEvent::boot(0, 0x8000_000a, b"stand-in firmware"),
        LogEvent::boot(0, 4, &[0; 4]),
        // EV_EFI_BOOT_SERVICES_APPLICATION, EV_SEPARATOR
        LogEvent::boot(1, 0x8000_0003, b"stand-in kernel"),
        LogEvent::boot(1, 4, &[0; 4]),
        // EV_EVENT_TAG: kernel command line, initrd
        LogEvent::boot(2, 6, b"stand-in cmdline"),
        LogEvent::boot(2, 6, b"stand-in initrd"),
        LogEvent::runtime("system-preparing", b""),
        LogEvent::runtime("app-id", &bytes(FAKE_APP_ID)),
        LogEvent::runtime("compose-hash", &config.compose_hash_bytes()),
        LogEvent::runtime("instance-id", &bytes(FAKE_INSTANCE_ID)),
        LogEvent::runtime("boot-mr-done", b""),
        LogEvent::runtime("os-image-hash", &bytes(FAKE_OS_IMAGE_HASH)),
        LogEvent::runtime("key-provider", FAKE_KEY_PROVIDER_INFO.as_bytes()),
        LogEvent::runtime("storage-fs", b"zfs"),
        LogEvent::runtime("system-ready", b""),
    ]
}

/// MRTD and RTMR0–3 of `events`: each RTMR starts at zero and is extended as TDX does,
/// `rtmr = sha384(rtmr ‖ digest)`.
fn measurements(events: &[LogEvent]) -> [[u8; 48]; 5] {
    let mut mrs = [[0u8; 48]; 5];
    mrs[0] = Sha384::digest(b"stand-in MRTD").into();
    for e in events {
        let rtmr = &mut mrs[1 + e.imr as usize];
        let mut h = Sha384::new();
        h.update(*rtmr);
        h.update(e.digest);
        *rtmr = h.finalize().into();
    }
    mrs
}

/// A running stand-in agent; stopped (and its socket removed) when dropped.
pub struct StandInAgent {
    /// The socket it listens on.
    pub socket: PathBuf,
    /// Every `/GetKey` request so far (also [`StandInAgent::key_requests`]).
    pub key_requests: KeyRequests,
    calls: AgentCalls,
    emitted: EmittedEvents,
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
        let emitted: EmittedEvents = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let agent = Agent {
            config,
            key_requests: Arc::clone(&key_requests),
            calls: Arc::clone(&calls),
            emitted: Arc::clone(&emitted),
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
            emitted,
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

    /// `(event, payload)` of every `/EmitEvent` so far.
    pub fn emitted_events(&self) -> Vec<(String, Vec<u8>)> {
        lock(&self.emitted).clone()
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
    emitted: EmittedEvents,
}

/// Why a request is refused: the HTTP status and the `error` text.
type Refusal = (&'static str, String);

fn bad_request(reason: impl Into<String>) -> Refusal {
    ("400 Bad Request", reason.into())
}

/// A string field of a request body; absent is empty, as for the real agent.
fn text_field<'a>(body: &'a serde_json::Value, name: &str) -> &'a str {
    body[name].as_str().unwrap_or_default()
}

/// A hex field of a request body.
fn hex_field(body: &serde_json::Value, name: &str) -> Result<Vec<u8>, Refusal> {
    hex::decode(text_field(body, name)).map_err(|_| bad_request(format!("{name} is not hex")))
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
        let target = parts.next().unwrap_or_default();
        let path = target.split('?').next().unwrap_or_default().to_owned();
        let json_body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        lock(&self.calls).push((path.trim_start_matches('/').to_owned(), json_body.clone()));
        let (status, json) = match self.answer(&method, &path, &json_body) {
            Ok(json) => ("200 OK", json),
            Err((status, error)) => (status, serde_json::json!({ "error": error }).to_string()),
        };
        let mut out = stream;
        write!(
            out,
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{json}",
            json.len()
        )?;
        out.flush()
    }

    fn answer(
        &self,
        method: &str,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<String, Refusal> {
        match (method, path) {
            ("POST" | "GET", "/Info") => Ok(self.info()),
            ("POST", "/GetKey") => self.get_key(body),
            ("POST", "/GetQuote") => self.get_quote(body),
            ("POST", "/EmitEvent") => self.emit_event(body),
            _ => Err(("404 Not Found", format!("no method {method} {path}"))),
        }
    }

    /// The whole log: boot, then what `/EmitEvent` added.
    fn events(&self) -> Vec<LogEvent> {
        let mut events = boot_log(&self.config);
        events.extend(
            lock(&self.emitted)
                .iter()
                .map(|(name, payload)| LogEvent::runtime(name, payload)),
        );
        events
    }

    fn get_key(&self, body: &serde_json::Value) -> Result<String, Refusal> {
        let algorithm = text_field(body, "algorithm");
        if !matches!(algorithm, "" | "secp256k1" | "k256" | "ed25519") {
            return Err(bad_request("Unsupported algorithm"));
        }
        let path = text_field(body, "path");
        let purpose = text_field(body, "purpose");
        lock(&self.key_requests).push((path.to_owned(), purpose.to_owned()));
        let mut h = Sha256::new();
        h.update(self.config.app_seed);
        h.update(path.as_bytes());
        Ok(serde_json::json!({
            "key": hex::encode(h.finalize()),
            "signature_chain": ["00".repeat(65), "11".repeat(65)],
        })
        .to_string())
    }

    fn get_quote(&self, body: &serde_json::Value) -> Result<String, Refusal> {
        let data = hex_field(body, "report_data")?;
        if data.len() > 64 {
            return Err(bad_request("Report data is too long"));
        }
        let mut report_data = [0u8; 64];
        report_data[..data.len()].copy_from_slice(&data);
        if let Some(gate) = &self.config.quote_gate {
            let _ = lock(gate).recv();
        }
        let event_log = match &self.config.quote_event_log {
            Some(text) => text.clone(),
            None => quoted_log(&self.events()),
        };
        Ok(serde_json::json!({
            "quote": hex::encode(fake_quote(&report_data)),
            "event_log": event_log,
            "report_data": hex::encode(report_data),
            "vm_config": FAKE_VM_CONFIG,
        })
        .to_string())
    }

    fn emit_event(&self, body: &serde_json::Value) -> Result<String, Refusal> {
        let event = text_field(body, "event");
        let payload = hex_field(body, "payload")?;
        lock(&self.emitted).push((event.to_owned(), payload));
        Ok("{}".to_owned())
    }

    /// The `/Info` answer: the compose, its hash (or, configured to lie, another one at
    /// the top level), the app's ids, and the TCB info with the whole event log.
    fn info(&self) -> String {
        let real = hex::encode(self.config.compose_hash_bytes());
        let top = if self.config.lie_about_compose_hash {
            "00".repeat(32)
        } else {
            real.clone()
        };
        let events = self.events();
        let mrs = measurements(&events);
        let mr_aggregated = hex::encode(Sha256::digest(mrs.concat()));
        let event_log: Vec<serde_json::Value> = events
            .iter()
            .filter_map(|e| serde_json::from_str(&e.json(false)).ok())
            .collect();
        let tcb_info = serde_json::to_string_pretty(&serde_json::json!({
            "mrtd": hex::encode(mrs[0]),
            "rtmr0": hex::encode(mrs[1]),
            "rtmr1": hex::encode(mrs[2]),
            "rtmr2": hex::encode(mrs[3]),
            "rtmr3": hex::encode(mrs[4]),
            "mr_aggregated": mr_aggregated,
            "os_image_hash": FAKE_OS_IMAGE_HASH,
            "compose_hash": real,
            "device_id": FAKE_DEVICE_ID,
            "event_log": event_log,
            "app_compose": self.config.app_compose,
        }))
        .unwrap_or_default();
        let app_name = serde_json::from_str::<serde_json::Value>(&self.config.app_compose)
            .ok()
            .and_then(|compose| compose["name"].as_str().map(str::to_owned))
            .unwrap_or_default();
        serde_json::json!({
            "app_id": FAKE_APP_ID,
            "instance_id": FAKE_INSTANCE_ID,
            "app_cert": "",
            "tcb_info": tcb_info,
            "app_name": app_name,
            "device_id": FAKE_DEVICE_ID,
            "mr_aggregated": mr_aggregated,
            "os_image_hash": FAKE_OS_IMAGE_HASH,
            "key_provider_info": FAKE_KEY_PROVIDER_INFO,
            "compose_hash": top,
            "vm_config": FAKE_VM_CONFIG,
            "cloud_vendor": "",
            "cloud_product": "",
        })
        .to_string()
    }
}
