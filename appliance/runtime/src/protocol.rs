//! The parent ↔ worker protocol: message types and the frame codec.
//!
//! A frame is a big-endian `u32` body length followed by that many bytes of UTF-8 JSON; a body
//! longer than [`MAX_FRAME_LEN`] is a protocol error after which the stream is unusable. Every
//! message is a JSON object with a `"type"` field. The parent sends [`ToWorker`] messages on
//! the worker's stdin and reads [`FromWorker`] messages from its stdout:
//!
//! ```text
//! worker: ready
//! parent: run ─▶ worker: call ─▶ parent: reply ─▶ … ─▶ worker: done
//! ```
//!
//! Compatibility: a reader ignores fields it does not know and gives a missing optional
//! field its default, so a field added later (such as `done`'s `heap_bytes`) is read as
//! absent by an older parent and defaults when an older worker leaves it out.
//!
//! Both sides use these types: the worker through the blocking [`FrameReader`] and
//! [`FrameWriter`], the appliance (async) through [`encode`], [`frame_len`] and [`decode`] on
//! bytes it reads and writes itself.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Length of the frame header (the body length, `u32` big-endian).
pub const HEADER_LEN: usize = 4;

/// Largest frame body accepted or produced (8 MiB).
pub const MAX_FRAME_LEN: usize = 8 * 1024 * 1024;

/// A failure of the protocol stream. After any of these the stream is out of sync: the
/// worker exits non-zero and the parent should kill and replace the worker.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The announced or produced body is larger than [`MAX_FRAME_LEN`].
    #[error("frame body of {0} bytes exceeds the {MAX_FRAME_LEN}-byte limit")]
    FrameTooLarge(usize),
    /// The body is not valid JSON for the expected message type.
    #[error("malformed message: {0}")]
    Malformed(#[from] serde_json::Error),
    /// The stream ended inside a frame.
    #[error("stream closed in the middle of a frame")]
    Truncated,
    /// A well-formed message arrived that is not allowed at this point.
    #[error("unexpected message: {0}")]
    Unexpected(String),
    /// Reading or writing the pipe failed.
    #[error("pipe i/o failed: {0}")]
    Io(#[from] io::Error),
}

// ---------------------------------------------------------------------------------------------
// Messages

/// A message from the parent to the worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToWorker {
    /// Run one action.
    Run(RunJob),
    /// The answer to a [`HostCall`].
    Reply(HostReply),
}

/// A message from the worker to the parent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromWorker {
    /// Sent once after start-up; the worker is ready for a `run`.
    Ready,
    /// A host call; the worker blocks until the matching [`HostReply`].
    Call(HostCall),
    /// The action finished (successfully or not); the worker waits for the next `run`.
    Done(JobDone),
}

/// One action to execute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunJob {
    /// The JavaScript source.
    pub code: String,
    /// The argument of `main` (`null` when absent).
    #[serde(default)]
    pub js_params: Value,
    /// The CIDv0 of `code`.
    pub action_cid: String,
    /// Per-action limits.
    #[serde(default)]
    pub limits: JobLimits,
}

/// Per-action limits enforced by the worker (a missing field takes its default). The
/// wall-clock deadline and the memory limit are enforced by the parent (kill) and by the
/// worker's rlimit respectively.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct JobLimits {
    /// Largest response, measured as its JSON encoding in bytes.
    pub max_response_bytes: usize,
    /// Largest total of log bytes.
    pub max_log_bytes: usize,
    /// Most `fetch` calls (JSON-RPC requests of `ethers.providers` count too); the next
    /// one fails in JS.
    pub max_fetches: u32,
    /// The job's wall-clock limit in ms, as the parent enforces it (by killing the worker).
    /// The worker uses it for timers: one due after it ends the job at once with a
    /// `timeout`, instead of sleeping until the parent kills it. Absent (an older parent):
    /// timers sleep as asked and the parent's kill ends the job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl Default for JobLimits {
    /// The documented defaults (`docs/compatibility.md`): 100 KiB response, 100 KiB logs, 50 fetches.
    fn default() -> Self {
        Self {
            max_response_bytes: 100 * 1024,
            max_log_bytes: 100 * 1024,
            max_fetches: 50,
            timeout_ms: None,
        }
    }
}

/// The answer to a host call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostReply {
    /// The id of the [`HostCall`] answered.
    pub id: u64,
    /// `"ok": value` or `"err": message`.
    #[serde(flatten)]
    pub outcome: ReplyOutcome,
}

/// The result half of a [`HostReply`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplyOutcome {
    /// The call succeeded; the JS promise resolves with this value.
    Ok(Value),
    /// The call failed; the JS promise rejects with an `Error` carrying this message.
    Err(String),
}

/// A request from the action to the parent (keys, crypto, network).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostCall {
    /// Unique per worker; the reply must carry the same id.
    pub id: u64,
    /// `"op"` and `"args"`.
    #[serde(flatten)]
    pub request: HostRequest,
}

/// The operation of a host call and its arguments (`"op"` / `"args"` on the wire).
/// Hex strings are as the action gave them; the parent validates every argument.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", content = "args")]
pub enum HostRequest {
    /// `Lit.Actions.getPrivateKey({pkpId})` → `"0x"` + 64 hex.
    #[serde(rename = "getPrivateKey")]
    GetPrivateKey {
        /// The wallet.
        #[serde(rename = "pkpId")]
        pkp_id: String,
    },
    /// `Lit.Actions.signEcdsa({pkpId, toSign})` → `"0x"` + 130 hex (r‖s‖v, v = 27/28).
    #[serde(rename = "signEcdsa")]
    SignEcdsa {
        /// The wallet.
        #[serde(rename = "pkpId")]
        pkp_id: String,
        /// The 32-byte digest, `"0x"` + 64 hex (byte arrays are converted by the worker).
        #[serde(rename = "toSign")]
        to_sign: String,
    },
    /// `Lit.Actions.Encrypt({pkpId, message})` → lowercase hex (no `0x`) of nonce‖ct‖tag.
    #[serde(rename = "encrypt")]
    Encrypt {
        /// The wallet.
        #[serde(rename = "pkpId")]
        pkp_id: String,
        /// The UTF-8 plaintext.
        message: String,
    },
    /// `Lit.Actions.Decrypt({pkpId, ciphertext})` → the UTF-8 plaintext.
    #[serde(rename = "decrypt")]
    Decrypt {
        /// The wallet.
        #[serde(rename = "pkpId")]
        pkp_id: String,
        /// Hex, with or without `0x`.
        ciphertext: String,
    },
    /// `Lit.Actions.getLitActionPrivateKey()` → `"0x"` + 64 hex.
    #[serde(rename = "getLitActionPrivateKey")]
    GetLitActionPrivateKey {
        /// `None` (JSON `null`): the running action's CID.
        #[serde(rename = "ipfsId", default)]
        ipfs_id: Option<String>,
    },
    /// `Lit.Actions.getLitActionPublicKey({ipfsId})` → `"0x"` + 66 hex (compressed).
    #[serde(rename = "getLitActionPublicKey")]
    GetLitActionPublicKey {
        /// `None` (JSON `null`): the running action's CID.
        #[serde(rename = "ipfsId", default)]
        ipfs_id: Option<String>,
    },
    /// `Lit.Actions.getLitActionWalletAddress({ipfsId})` → EIP-55 address.
    #[serde(rename = "getLitActionWalletAddress")]
    GetLitActionWalletAddress {
        /// `None` (JSON `null`): the running action's CID.
        #[serde(rename = "ipfsId", default)]
        ipfs_id: Option<String>,
    },
    /// `fetch(url, init)` → a [`FetchResponse`] as the `ok` value.
    #[serde(rename = "fetch")]
    Fetch(FetchRequest),
    /// A static or dynamic `import` → an [`ImportedModule`] as the `ok` value. The parent
    /// resolves, fetches and verifies the module; the worker never reaches the network.
    #[serde(rename = "import")]
    Import(ImportRequest),
    /// One JSON-RPC request of an `ethers.providers.JsonRpcProvider` → an [`RpcReply`] as
    /// the `ok` value (an `err` only for a malformed call).
    #[serde(rename = "rpc")]
    Rpc(RpcRequest),
}

impl HostRequest {
    /// The wire name of the operation (for logs and metrics).
    pub fn op(&self) -> &'static str {
        match self {
            Self::GetPrivateKey { .. } => "getPrivateKey",
            Self::SignEcdsa { .. } => "signEcdsa",
            Self::Encrypt { .. } => "encrypt",
            Self::Decrypt { .. } => "decrypt",
            Self::GetLitActionPrivateKey { .. } => "getLitActionPrivateKey",
            Self::GetLitActionPublicKey { .. } => "getLitActionPublicKey",
            Self::GetLitActionWalletAddress { .. } => "getLitActionWalletAddress",
            Self::Fetch(_) => "fetch",
            Self::Import(_) => "import",
            Self::Rpc(_) => "rpc",
        }
    }
}

/// The arguments of a `fetch` host call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FetchRequest {
    /// The URL as given by the action (the parent parses and polices it).
    pub url: String,
    /// Upper-case method, `GET` by default.
    pub method: String,
    /// Request headers as given (names as written by the action).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The request body, if any.
    #[serde(default)]
    pub body: Option<String>,
}

/// The `ok` value of a `fetch` reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FetchResponse {
    /// HTTP status code.
    pub status: u16,
    /// Reason phrase.
    #[serde(rename = "statusText", default)]
    pub status_text: String,
    /// Response headers (repeated headers joined with `", "`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The body decoded as UTF-8 (lossy).
    #[serde(default)]
    pub body: String,
}

/// The arguments of an `import` host call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportRequest {
    /// The module specifier as written (`"zod@3.22.4"`, a URL, or inside a module a
    /// path such as `"/v135/x@1.0.0/es2022/x.mjs"` or `"./y.js"`).
    pub specifier: String,
    /// The URL of the importing module; `None` when the action itself imports (it has no
    /// URL, so it may not use relative specifiers).
    #[serde(default)]
    pub referrer: Option<String>,
}

/// The `ok` value of an `import` reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportedModule {
    /// The module's URL: its identity within the job (two specifiers that resolve to the
    /// same URL are one module) and the base of its own relative imports.
    pub url: String,
    /// Its SHA-384, as a Subresource Integrity string (`sha384-<base64>`).
    pub integrity: String,
    /// Its source text; `None` when this job was already sent this URL's source (the
    /// worker has the module).
    #[serde(default)]
    pub source: Option<String>,
}

/// Where a JSON-RPC request goes: a URL the action gave, or a chain the operator
/// configured (`[actions.rpc] chains`), named by its id so the action never learns the
/// operator's URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RpcTarget {
    /// `http(s)://…` as the action wrote it. The parent serves it as an allow-listed chain
    /// if it is exactly one of the configured URLs, otherwise as a fetch (public
    /// addresses only, unless `actions.fetch_allow_private`).
    Url(String),
    /// A configured chain by id (`new JsonRpcProvider(undefined, chainId)` or the URL
    /// `chain:<id>`).
    Chain(u64),
}

/// The arguments of an `rpc` host call: one JSON-RPC request body, POSTed as
/// `application/json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcRequest {
    /// The endpoint.
    pub target: RpcTarget,
    /// The request body (JSON text, passed through unchanged).
    pub body: String,
}

/// The `ok` value of an `rpc` host call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RpcReply {
    /// The endpoint answered (any status); the body is its text (lossy UTF-8).
    Response {
        /// HTTP status code.
        status: u16,
        /// The response body.
        body: String,
    },
    /// No answer within the request's time bound (ethers' `TIMEOUT`).
    Timeout {
        /// The bound that passed, in ms.
        timeout_ms: u64,
    },
    /// No answer: refused by policy, unknown chain, connection failed (ethers'
    /// `SERVER_ERROR` "missing response").
    Failed {
        /// What the action sees.
        message: String,
    },
    /// A per-action bound (bytes or time spent in RPC) is used up; if this error ends
    /// the action, its kind is `limit`.
    Limit {
        /// What the action sees.
        message: String,
    },
}

/// The outcome of one action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobDone {
    /// The response (`null` on error or when the action produced none).
    pub response: Value,
    /// Everything the action logged (up to the log limit).
    pub logs: String,
    /// Why the action failed, if it did.
    pub error: Option<ActionError>,
    /// The worker's live heap in bytes when it sent `done` (what it had allocated and not
    /// freed, the finished job's not yet collected objects included), from its counting
    /// allocator (`crate::heap`). Absent when the worker does not count (an older worker,
    /// or one without the allocator), and never sent on to the caller. Advisory: a
    /// compromised worker could report anything, so the parent uses it only to retire a
    /// worker early, never to keep one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap_bytes: Option<u64>,
}

/// A failure of the action's code (reported with HTTP 200 and `has_error: true`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionError {
    /// The class of failure.
    pub kind: ErrorKind,
    /// One human-readable line (or a few, for a stack).
    pub message: String,
}

/// The class of an action failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorKind {
    /// The code threw (or its promise rejected, or never settled).
    Exception,
    /// The wall-clock deadline passed (reported by the parent).
    Timeout,
    /// The worker ran out of memory (reported by the parent when the worker dies).
    Memory,
    /// A runtime limit: response or log size, fetch count, recursion depth.
    Limit,
}

impl ErrorKind {
    /// The lowercase name (the serialized form, the API's wire name, the metric label).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exception => "exception",
            Self::Timeout => "timeout",
            Self::Memory => "memory",
            Self::Limit => "limit",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Codec

/// Encodes `msg` as a complete frame (header and body), ready to write to the pipe.
pub fn encode<M: Serialize>(msg: &M) -> Result<Vec<u8>, ProtocolError> {
    let mut frame = vec![0u8; HEADER_LEN];
    serde_json::to_writer(&mut frame, msg)?;
    let body_len = frame.len() - HEADER_LEN;
    let prefix = u32::try_from(body_len)
        .ok()
        .filter(|_| body_len <= MAX_FRAME_LEN)
        .ok_or(ProtocolError::FrameTooLarge(body_len))?;
    frame[..HEADER_LEN].copy_from_slice(&prefix.to_be_bytes());
    Ok(frame)
}

/// The body length announced by a frame header, checked against [`MAX_FRAME_LEN`].
pub fn frame_len(header: [u8; HEADER_LEN]) -> Result<usize, ProtocolError> {
    let len = u32::from_be_bytes(header) as usize;
    if len > MAX_FRAME_LEN {
        return Err(ProtocolError::FrameTooLarge(len));
    }
    Ok(len)
}

/// Decodes a frame body (without its header).
pub fn decode<M: DeserializeOwned>(body: &[u8]) -> Result<M, ProtocolError> {
    Ok(serde_json::from_slice(body)?)
}

/// Reads frames from a blocking byte stream.
#[derive(Debug)]
pub struct FrameReader<R> {
    inner: R,
    buf: Vec<u8>,
}

impl<R: Read> FrameReader<R> {
    /// Wraps `inner` (unbuffered reads are fine: a frame is read with two `read_exact`s).
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            buf: Vec::new(),
        }
    }

    /// Reads the next message; `Ok(None)` on a clean end of stream before a frame starts.
    pub fn read<M: DeserializeOwned>(&mut self) -> Result<Option<M>, ProtocolError> {
        let mut header = [0u8; HEADER_LEN];
        let mut filled = 0;
        while filled < HEADER_LEN {
            match self.inner.read(&mut header[filled..]) {
                Ok(0) if filled == 0 => return Ok(None),
                Ok(0) => return Err(ProtocolError::Truncated),
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        let len = frame_len(header)?;
        self.buf.clear();
        self.buf.resize(len, 0);
        self.inner.read_exact(&mut self.buf).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                ProtocolError::Truncated
            } else {
                e.into()
            }
        })?;
        let msg = decode(&self.buf);
        // Do not keep a large buffer alive between frames.
        if self.buf.capacity() > 64 * 1024 {
            self.buf = Vec::new();
        }
        msg.map(Some)
    }
}

/// Writes frames to a blocking byte stream, one `write_all` and a flush per message.
#[derive(Debug)]
pub struct FrameWriter<W> {
    inner: W,
}

impl<W: Write> FrameWriter<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        Self { inner }
    }

    /// Encodes and sends `msg`.
    pub fn write<M: Serialize>(&mut self, msg: &M) -> Result<(), ProtocolError> {
        let frame = encode(msg)?;
        self.inner.write_all(&frame)?;
        self.inner.flush()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn roundtrip_to_worker(msg: ToWorker, wire: Value) {
        let frame = encode(&msg).unwrap();
        let body = &frame[HEADER_LEN..];
        assert_eq!(serde_json::from_slice::<Value>(body).unwrap(), wire);
        assert_eq!(decode::<ToWorker>(body).unwrap(), msg);
    }

    fn roundtrip_from_worker(msg: FromWorker, wire: Value) {
        let frame = encode(&msg).unwrap();
        let body = &frame[HEADER_LEN..];
        assert_eq!(serde_json::from_slice::<Value>(body).unwrap(), wire);
        assert_eq!(decode::<FromWorker>(body).unwrap(), msg);
    }

    #[test]
    fn run_and_reply_wire_shapes() {
        roundtrip_to_worker(
            ToWorker::Run(RunJob {
                code: "1".into(),
                js_params: json!({"a": [1]}),
                action_cid: "QmX".into(),
                limits: JobLimits::default(),
            }),
            json!({"type": "run", "code": "1", "js_params": {"a": [1]}, "action_cid": "QmX",
                   "limits": {"max_response_bytes": 102400, "max_log_bytes": 102400, "max_fetches": 50}}),
        );
        roundtrip_to_worker(
            ToWorker::Reply(HostReply {
                id: 7,
                outcome: ReplyOutcome::Ok(json!("0xab")),
            }),
            json!({"type": "reply", "id": 7, "ok": "0xab"}),
        );
        roundtrip_to_worker(
            ToWorker::Reply(HostReply {
                id: 8,
                outcome: ReplyOutcome::Ok(Value::Null),
            }),
            json!({"type": "reply", "id": 8, "ok": null}),
        );
        roundtrip_to_worker(
            ToWorker::Reply(HostReply {
                id: 9,
                outcome: ReplyOutcome::Err("denied".into()),
            }),
            json!({"type": "reply", "id": 9, "err": "denied"}),
        );
    }

    #[test]
    fn run_defaults_for_optional_fields() {
        let msg: ToWorker =
            decode(br#"{"type":"run","code":"x","action_cid":"Qm","js_params":null}"#).unwrap();
        let ToWorker::Run(job) = msg else {
            panic!("not a run")
        };
        assert_eq!(job.js_params, Value::Null);
        assert_eq!(job.limits, JobLimits::default());
    }

    #[test]
    fn call_wire_shapes() {
        roundtrip_from_worker(FromWorker::Ready, json!({"type": "ready"}));
        roundtrip_from_worker(
            FromWorker::Call(HostCall {
                id: 1,
                request: HostRequest::SignEcdsa {
                    pkp_id: "0x01".into(),
                    to_sign: "0x02".into(),
                },
            }),
            json!({"type": "call", "id": 1, "op": "signEcdsa", "args": {"pkpId": "0x01", "toSign": "0x02"}}),
        );
        roundtrip_from_worker(
            FromWorker::Call(HostCall {
                id: 2,
                request: HostRequest::GetLitActionPrivateKey { ipfs_id: None },
            }),
            json!({"type": "call", "id": 2, "op": "getLitActionPrivateKey", "args": {"ipfsId": null}}),
        );
        roundtrip_from_worker(
            FromWorker::Call(HostCall {
                id: 3,
                request: HostRequest::Fetch(FetchRequest {
                    url: "https://x".into(),
                    method: "GET".into(),
                    headers: BTreeMap::from([("a".into(), "b".into())]),
                    body: None,
                }),
            }),
            json!({"type": "call", "id": 3, "op": "fetch",
                   "args": {"url": "https://x", "method": "GET", "headers": {"a": "b"}, "body": null}}),
        );
        roundtrip_from_worker(
            FromWorker::Done(JobDone {
                response: json!("hi"),
                logs: "a\n".into(),
                error: Some(ActionError {
                    kind: ErrorKind::Limit,
                    message: "m".into(),
                }),
                heap_bytes: None,
            }),
            json!({"type": "done", "response": "hi", "logs": "a\n",
                   "error": {"kind": "limit", "message": "m"}}),
        );
        roundtrip_from_worker(
            FromWorker::Done(JobDone {
                response: json!(1),
                logs: String::new(),
                error: None,
                heap_bytes: Some(123_456),
            }),
            json!({"type": "done", "response": 1, "logs": "", "error": null,
                   "heap_bytes": 123_456}),
        );
    }

    #[test]
    fn import_wire_shapes() {
        roundtrip_from_worker(
            FromWorker::Call(HostCall {
                id: 4,
                request: HostRequest::Import(ImportRequest {
                    specifier: "./a.js".into(),
                    referrer: Some("https://cdn.test/x@1.0.0/m.js".into()),
                }),
            }),
            json!({"type": "call", "id": 4, "op": "import",
                   "args": {"specifier": "./a.js", "referrer": "https://cdn.test/x@1.0.0/m.js"}}),
        );
        let answer = ImportedModule {
            url: "https://cdn.test/x@1.0.0/a.js".into(),
            integrity: "sha384-AAAA".into(),
            source: None,
        };
        let value = serde_json::to_value(&answer).unwrap();
        assert_eq!(
            value,
            json!({"url": "https://cdn.test/x@1.0.0/a.js", "integrity": "sha384-AAAA", "source": null})
        );
        // A reply without `source` reads as one that sends none.
        let read: ImportedModule =
            serde_json::from_value(json!({"url": "u", "integrity": "i"})).unwrap();
        assert_eq!(read.source, None);
    }

    #[test]
    fn done_is_read_by_old_and_new_parents() {
        // A worker that does not report its heap (an older one): the field defaults.
        let old: FromWorker =
            decode(br#"{"type":"done","response":null,"logs":"","error":null}"#).unwrap();
        let FromWorker::Done(done) = old else {
            panic!("not done")
        };
        assert_eq!(done.heap_bytes, None);
        // A parent that does not know the field ignores it: the same bytes read as a
        // message without it.
        #[derive(Deserialize)]
        #[serde(tag = "type", rename_all = "snake_case")]
        enum OldFromWorker {
            Done {
                response: Value,
                logs: String,
                error: Option<ActionError>,
            },
        }
        let frame = encode(&FromWorker::Done(JobDone {
            response: json!("r"),
            logs: "l".into(),
            error: None,
            heap_bytes: Some(7),
        }))
        .unwrap();
        let OldFromWorker::Done {
            response,
            logs,
            error,
        } = decode(&frame[HEADER_LEN..]).unwrap();
        assert_eq!((response, logs, error), (json!("r"), "l".to_owned(), None));
    }

    #[test]
    fn reader_handles_eof_truncation_and_oversize() {
        let mut stream = encode(&FromWorker::Ready).unwrap();
        stream.extend_from_slice(&encode(&FromWorker::Ready).unwrap());
        let mut reader = FrameReader::new(&stream[..]);
        assert_eq!(
            reader.read::<FromWorker>().unwrap(),
            Some(FromWorker::Ready)
        );
        assert_eq!(
            reader.read::<FromWorker>().unwrap(),
            Some(FromWorker::Ready)
        );
        assert_eq!(reader.read::<FromWorker>().unwrap(), None);

        let full = encode(&FromWorker::Ready).unwrap();
        let mut reader = FrameReader::new(&full[..full.len() - 1]);
        assert!(matches!(
            reader.read::<FromWorker>(),
            Err(ProtocolError::Truncated)
        ));
        let mut reader = FrameReader::new(&full[..2]);
        assert!(matches!(
            reader.read::<FromWorker>(),
            Err(ProtocolError::Truncated)
        ));

        let huge = ((MAX_FRAME_LEN + 1) as u32).to_be_bytes();
        let mut reader = FrameReader::new(&huge[..]);
        assert!(matches!(
            reader.read::<FromWorker>(),
            Err(ProtocolError::FrameTooLarge(_))
        ));

        let mut bad = 3u32.to_be_bytes().to_vec();
        bad.extend_from_slice(b"{x}");
        let mut reader = FrameReader::new(&bad[..]);
        assert!(matches!(
            reader.read::<FromWorker>(),
            Err(ProtocolError::Malformed(_))
        ));
    }

    #[test]
    fn encode_refuses_oversized_bodies() {
        let msg = FromWorker::Done(JobDone {
            response: Value::String("x".repeat(MAX_FRAME_LEN)),
            logs: String::new(),
            error: None,
            heap_bytes: None,
        });
        assert!(matches!(encode(&msg), Err(ProtocolError::FrameTooLarge(_))));
    }

    #[test]
    fn writer_writes_one_frame() {
        let mut out = Vec::new();
        FrameWriter::new(&mut out)
            .write(&FromWorker::Ready)
            .unwrap();
        assert_eq!(out, encode(&FromWorker::Ready).unwrap());
    }
}
