//! The launcher protocol, version 1: one connection is one worker.
//!
//! Every message in both directions is one frame:
//!
//! ```text
//! len:u32be ‖ version:u8 ‖ kind:u8 ‖ payload
//! └ counts everything after itself; 2 ≤ len ≤ MAX_FRAME_LEN (512)
//! ```
//!
//! | kind | name | direction | payload | descriptors (SCM_RIGHTS) |
//! |---|---|---|---|---|
//! | 0x01 | Spawn | appliance → launcher | — | — |
//! | 0x81 | Spawned | launcher → appliance | `pid:u32 ‖ memory_limit_mb:u64` | the worker's stdin (write end), stdout (read end), stderr (read end) |
//! | 0x82 | Exited | launcher → appliance | `how:u8 (0 exit code, 1 signal) ‖ value:i32` | — |
//! | 0x83 | Refused | launcher → appliance | `reason:u8 ‖ message (UTF-8, ≤ 256 bytes)` | — |
//!
//! All integers are big-endian; no trailing bytes. After `Spawned` the appliance sends
//! nothing: the end of its side of the connection (a half close or a full close) makes the
//! launcher kill the worker (SIGKILL) and reap it; when the worker ends, by itself or so,
//! the launcher sends `Exited` and closes the connection.

/// The protocol version this crate speaks.
pub const VERSION: u8 = 1;

/// Bytes of the length prefix.
pub const HEADER_LEN: usize = 4;

/// Largest frame body (`version ‖ kind ‖ payload`) either side accepts.
pub const MAX_FRAME_LEN: usize = 512;

/// Longest refusal message, in bytes (longer ones are cut at a character boundary).
pub const MAX_MESSAGE_LEN: usize = 256;

/// How many descriptors come with `Spawned`: stdin, stdout, stderr.
pub const SPAWNED_FDS: usize = 3;

const KIND_SPAWN: u8 = 0x01;
const KIND_SPAWNED: u8 = 0x81;
const KIND_EXITED: u8 = 0x82;
const KIND_REFUSED: u8 = 0x83;

/// A frame that does not follow the protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("frame length {0} outside 2..={MAX_FRAME_LEN}")]
    Length(usize),
    #[error("protocol version {0} is not supported (this side speaks {VERSION})")]
    Version(u8),
    #[error("unknown message kind 0x{0:02x}")]
    Kind(u8),
    #[error("malformed {0} payload")]
    Payload(&'static str),
}

/// What the appliance asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Start one worker and hand over its pipes.
    Spawn,
}

/// How a worker ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerExit {
    /// It exited with this status.
    Code(i32),
    /// A signal ended it (SIGKILL when the launcher killed it; SIGABRT or SIGSEGV when
    /// it ran out of memory or stack).
    Signal(i32),
}

impl WorkerExit {
    /// From a local process's exit status.
    pub fn from_status(status: std::process::ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt as _;
        match (status.code(), status.signal()) {
            (Some(code), _) => Self::Code(code),
            (None, Some(signal)) => Self::Signal(signal),
            // Neither: stopped or continued, which `wait` does not report; keep the raw
            // value so nothing is lost.
            (None, None) => Self::Code(status.into_raw()),
        }
    }

    /// As a local exit status, so callers can use `ExitStatusExt::signal` and `code`
    /// exactly as for a child of their own.
    pub fn to_status(self) -> std::process::ExitStatus {
        use std::os::unix::process::ExitStatusExt as _;
        match self {
            Self::Code(code) => std::process::ExitStatus::from_raw((code & 0xff) << 8),
            Self::Signal(signal) => std::process::ExitStatus::from_raw(signal & 0x7f),
        }
    }
}

/// Why the launcher would not start a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It already runs `--max-workers` workers.
    Busy,
    /// The connecting process's uid is not allowed (`--peer-uid`).
    PeerNotAllowed,
    /// The request's protocol version is not spoken here.
    UnsupportedVersion,
    /// The request was malformed, too large or did not arrive in time.
    BadRequest,
    /// The worker could not be started.
    SpawnFailed,
    /// A reason code this side does not know (a newer launcher).
    Other(u8),
}

impl Refusal {
    fn code(self) -> u8 {
        match self {
            Self::Busy => 1,
            Self::PeerNotAllowed => 2,
            Self::UnsupportedVersion => 3,
            Self::BadRequest => 4,
            Self::SpawnFailed => 5,
            Self::Other(code) => code,
        }
    }

    fn from_code(code: u8) -> Self {
        match code {
            1 => Self::Busy,
            2 => Self::PeerNotAllowed,
            3 => Self::UnsupportedVersion,
            4 => Self::BadRequest,
            5 => Self::SpawnFailed,
            other => Self::Other(other),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Busy => f.write_str("busy"),
            Self::PeerNotAllowed => f.write_str("peer not allowed"),
            Self::UnsupportedVersion => f.write_str("unsupported version"),
            Self::BadRequest => f.write_str("bad request"),
            Self::SpawnFailed => f.write_str("spawn failed"),
            Self::Other(code) => write!(f, "refusal {code}"),
        }
    }
}

/// What the launcher answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// The worker runs; its pipes come with this frame.
    Spawned {
        /// Its pid (in the launcher's pid namespace; for logs only).
        pid: u32,
        /// The memory limit it was started with (`--memory-limit-mb`).
        memory_limit_mb: u64,
    },
    /// The worker ended.
    Exited(WorkerExit),
    /// No worker was started.
    Refused { reason: Refusal, message: String },
}

fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let len = 2 + payload.len();
    let mut out = Vec::with_capacity(HEADER_LEN + len);
    // Payloads built here are at most 2 + 1 + MAX_MESSAGE_LEN bytes.
    out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
    out.push(VERSION);
    out.push(kind);
    out.extend_from_slice(payload);
    out
}

/// The length a header announces, checked against the bounds.
pub fn frame_len(header: [u8; HEADER_LEN]) -> Result<usize, ProtocolError> {
    let len = u32::from_be_bytes(header) as usize;
    if !(2..=MAX_FRAME_LEN).contains(&len) {
        return Err(ProtocolError::Length(len));
    }
    Ok(len)
}

/// Encodes a request as a whole frame.
pub fn encode_request(request: Request) -> Vec<u8> {
    match request {
        Request::Spawn => frame(KIND_SPAWN, &[]),
    }
}

/// Decodes a request body (the bytes after the length).
pub fn decode_request(body: &[u8]) -> Result<Request, ProtocolError> {
    let (version, kind, payload) = split(body)?;
    if version != VERSION {
        return Err(ProtocolError::Version(version));
    }
    match kind {
        KIND_SPAWN if payload.is_empty() => Ok(Request::Spawn),
        KIND_SPAWN => Err(ProtocolError::Payload("Spawn")),
        other => Err(ProtocolError::Kind(other)),
    }
}

/// Encodes a response as a whole frame (descriptors travel beside it).
pub fn encode_response(response: &Response) -> Vec<u8> {
    match response {
        Response::Spawned {
            pid,
            memory_limit_mb,
        } => {
            let mut payload = Vec::with_capacity(12);
            payload.extend_from_slice(&pid.to_be_bytes());
            payload.extend_from_slice(&memory_limit_mb.to_be_bytes());
            frame(KIND_SPAWNED, &payload)
        }
        Response::Exited(exit) => {
            let (how, value) = match exit {
                WorkerExit::Code(code) => (0u8, *code),
                WorkerExit::Signal(signal) => (1u8, *signal),
            };
            let mut payload = vec![how];
            payload.extend_from_slice(&value.to_be_bytes());
            frame(KIND_EXITED, &payload)
        }
        Response::Refused { reason, message } => {
            let mut payload = vec![reason.code()];
            payload.extend_from_slice(truncate(message).as_bytes());
            frame(KIND_REFUSED, &payload)
        }
    }
}

/// Decodes a response body (the bytes after the length).
pub fn decode_response(body: &[u8]) -> Result<Response, ProtocolError> {
    let (version, kind, payload) = split(body)?;
    if version != VERSION {
        return Err(ProtocolError::Version(version));
    }
    match kind {
        KIND_SPAWNED => {
            let (pid, limit) = match payload {
                [p0, p1, p2, p3, rest @ ..] if rest.len() == 8 => {
                    let mut limit = [0u8; 8];
                    limit.copy_from_slice(rest);
                    (
                        u32::from_be_bytes([*p0, *p1, *p2, *p3]),
                        u64::from_be_bytes(limit),
                    )
                }
                _ => return Err(ProtocolError::Payload("Spawned")),
            };
            Ok(Response::Spawned {
                pid,
                memory_limit_mb: limit,
            })
        }
        KIND_EXITED => match payload {
            [how, v0, v1, v2, v3] => {
                let value = i32::from_be_bytes([*v0, *v1, *v2, *v3]);
                match how {
                    0 => Ok(Response::Exited(WorkerExit::Code(value))),
                    1 => Ok(Response::Exited(WorkerExit::Signal(value))),
                    _ => Err(ProtocolError::Payload("Exited")),
                }
            }
            _ => Err(ProtocolError::Payload("Exited")),
        },
        KIND_REFUSED => match payload {
            [reason, message @ ..] if message.len() <= MAX_MESSAGE_LEN => {
                let message = std::str::from_utf8(message)
                    .map_err(|_| ProtocolError::Payload("Refused"))?
                    .to_owned();
                Ok(Response::Refused {
                    reason: Refusal::from_code(*reason),
                    message,
                })
            }
            _ => Err(ProtocolError::Payload("Refused")),
        },
        other => Err(ProtocolError::Kind(other)),
    }
}

fn split(body: &[u8]) -> Result<(u8, u8, &[u8]), ProtocolError> {
    match body {
        [version, kind, payload @ ..] if body.len() <= MAX_FRAME_LEN => {
            Ok((*version, *kind, payload))
        }
        _ => Err(ProtocolError::Length(body.len())),
    }
}

fn truncate(message: &str) -> &str {
    if message.len() <= MAX_MESSAGE_LEN {
        return message;
    }
    let mut end = MAX_MESSAGE_LEN;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn body(frame: &[u8]) -> &[u8] {
        let len = frame_len(frame[..HEADER_LEN].try_into().unwrap()).unwrap();
        assert_eq!(frame.len(), HEADER_LEN + len);
        &frame[HEADER_LEN..]
    }

    #[test]
    fn responses_round_trip() {
        for response in [
            Response::Spawned {
                pid: 4242,
                memory_limit_mb: 128,
            },
            Response::Exited(WorkerExit::Code(0)),
            Response::Exited(WorkerExit::Code(3)),
            Response::Exited(WorkerExit::Signal(9)),
            Response::Refused {
                reason: Refusal::Busy,
                message: "the launcher runs its maximum of 2 workers".into(),
            },
        ] {
            let frame = encode_response(&response);
            assert_eq!(decode_response(body(&frame)).unwrap(), response);
        }
        let spawn = encode_request(Request::Spawn);
        assert_eq!(spawn, [0, 0, 0, 2, VERSION, KIND_SPAWN]);
        assert_eq!(decode_request(body(&spawn)).unwrap(), Request::Spawn);
    }

    #[test]
    fn malformed_frames_are_refused() {
        assert_eq!(frame_len([0, 0, 0, 1]), Err(ProtocolError::Length(1)));
        assert_eq!(frame_len([0, 0, 2, 1]), Err(ProtocolError::Length(513)));
        assert_eq!(frame_len([0, 0, 2, 0]), Ok(512));
        assert_eq!(
            decode_request(&[2, KIND_SPAWN]),
            Err(ProtocolError::Version(2))
        );
        assert_eq!(
            decode_request(&[VERSION, 0x7f]),
            Err(ProtocolError::Kind(0x7f))
        );
        assert_eq!(
            decode_request(&[VERSION, KIND_SPAWN, 0]),
            Err(ProtocolError::Payload("Spawn"))
        );
        assert_eq!(
            decode_response(&[VERSION, KIND_EXITED, 2, 0, 0, 0, 0]),
            Err(ProtocolError::Payload("Exited"))
        );
        assert_eq!(
            decode_response(&[VERSION, KIND_SPAWNED, 0, 0, 0, 1]),
            Err(ProtocolError::Payload("Spawned"))
        );
    }

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        let frame = encode_response(&Response::Refused {
            reason: Refusal::SpawnFailed,
            message: "é".repeat(MAX_MESSAGE_LEN),
        });
        let Response::Refused { message, .. } = decode_response(body(&frame)).unwrap() else {
            panic!("not a refusal");
        };
        assert_eq!(message.len(), MAX_MESSAGE_LEN);
    }

    #[test]
    fn exit_statuses_survive_the_trip() {
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(WorkerExit::Signal(6).to_status().signal(), Some(6));
        assert_eq!(WorkerExit::Code(3).to_status().code(), Some(3));
        let status = std::process::ExitStatus::from_raw(9);
        assert_eq!(WorkerExit::from_status(status), WorkerExit::Signal(9));
        assert_eq!(
            WorkerExit::from_status(WorkerExit::Code(2).to_status()),
            WorkerExit::Code(2)
        );
    }
}
