//! A small blocking client for the one call that must be synchronous: a TLS handshake's
//! signature (`TlsSign`), which rustls asks for from inside a synchronous `Signer::sign`.
//!
//! It keeps a few idle connections (one request at a time on each, so no demultiplexing)
//! and never blocks longer than its timeout. Every other operation goes through the
//! asynchronous [`crate::KeyClient`].

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use zeroize::Zeroizing;

use crate::codec::{FrameHeader, check_len, encode_frame};
use crate::error::KeyError;
use crate::protocol::{
    ErrorCode, MAX_TLS_SIGN_MESSAGE_LEN, PROTOCOL_VERSION, Request, Response,
    TLS_SCHEME_ECDSA_P256_SHA256,
};

/// Idle connections kept for reuse (more may be open while busy).
const MAX_IDLE: usize = 8;

/// A blocking keyservice client for `TlsSign` / `TlsPublicKey`.
#[derive(Debug)]
pub struct BlockingClient {
    path: PathBuf,
    timeout: Duration,
    idle: Mutex<Vec<UnixStream>>,
    next_id: AtomicU64,
}

impl BlockingClient {
    pub fn new(path: impl AsRef<Path>, timeout: Duration) -> Self {
        Self {
            path: path.as_ref().to_owned(),
            timeout,
            idle: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
        }
    }

    /// A DER ECDSA signature by TLS key `index` over `message` (see
    /// [`crate::KeyClient::tls_sign`]).
    pub fn tls_sign(&self, index: u32, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        if message.is_empty() || message.len() > MAX_TLS_SIGN_MESSAGE_LEN {
            return Err(KeyError::InvalidArgument(format!(
                "a TLS signing message is {} bytes; expected 1..={MAX_TLS_SIGN_MESSAGE_LEN}",
                message.len()
            )));
        }
        let request = Request::TlsSign {
            index,
            scheme: TLS_SCHEME_ECDSA_P256_SHA256,
            message: message.to_vec(),
        };
        match self.call(&request)? {
            Response::TlsSignature(sig) => Ok(sig),
            other => Err(KeyError::Protocol(format!(
                "unexpected answer to TlsSign: {other:?}"
            ))),
        }
    }

    /// The SubjectPublicKeyInfo DER of TLS key `index`.
    pub fn tls_public_key(&self, index: u32) -> Result<Vec<u8>, KeyError> {
        match self.call(&Request::TlsPublicKey { index })? {
            Response::Spki(spki) => Ok(spki),
            other => Err(KeyError::Protocol(format!(
                "unexpected answer to TlsPublicKey: {other:?}"
            ))),
        }
    }

    fn unavailable(&self, reason: impl std::fmt::Display) -> KeyError {
        KeyError::Unavailable {
            path: self.path.clone(),
            reason: reason.to_string(),
        }
    }

    fn idle_connection(&self) -> Option<UnixStream> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop()
    }

    fn new_connection(&self) -> Result<UnixStream, KeyError> {
        let stream = UnixStream::connect(&self.path).map_err(|e| self.unavailable(e))?;
        stream
            .set_read_timeout(Some(self.timeout))
            .and_then(|()| stream.set_write_timeout(Some(self.timeout)))
            .map_err(|e| self.unavailable(e))?;
        Ok(stream)
    }

    /// One request on an idle connection, or on a new one if there is none or the idle one
    /// turns out closed (keyservice restarted since).
    fn call(&self, request: &Request) -> Result<Response, KeyError> {
        if let Some(stream) = self.idle_connection() {
            match self.exchange(stream, request) {
                Err(KeyError::Unavailable { .. }) => {}
                answer => return answer,
            }
        }
        self.exchange(self.new_connection()?, request)
    }

    /// One request on `stream`; the connection goes back to the pool only after a
    /// complete, well-formed exchange.
    fn exchange(&self, mut stream: UnixStream, request: &Request) -> Result<Response, KeyError> {
        let op = request.op();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed).max(1);
        let mut frame = Zeroizing::new(Vec::new());
        encode_frame(&mut frame, FrameHeader::new(op as u8, 0, id), |buf| {
            request.encode_payload(buf)
        });
        let timed_out = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                KeyError::Timeout(self.timeout)
            }
            _ => self.unavailable(e),
        };
        stream.write_all(&frame).map_err(timed_out)?;
        let mut prefix = [0u8; 4];
        stream.read_exact(&mut prefix).map_err(timed_out)?;
        // (A closed idle connection shows here as UnexpectedEof: `Unavailable`, retried.)
        let len = check_len(u32::from_be_bytes(prefix)).map_err(|e| self.unavailable(e))?;
        let mut body = Zeroizing::new(vec![0u8; len]);
        stream.read_exact(&mut body).map_err(timed_out)?;
        let header = FrameHeader::parse(&body)
            .ok_or_else(|| KeyError::Protocol("short answer frame".to_owned()))?;
        if header.version != PROTOCOL_VERSION || header.id != id || header.op != op as u8 {
            return Err(KeyError::Protocol(format!(
                "answer frame does not match the request (op {}, id {})",
                header.op, header.id
            )));
        }
        let payload = &body[crate::protocol::HEADER_LEN..];
        let answer = if header.status != 0 {
            let message = String::from_utf8_lossy(payload).into_owned();
            Err(match ErrorCode::from_u8(header.status) {
                ErrorCode::InvalidArgument => KeyError::InvalidArgument(message),
                ErrorCode::NoRoot => KeyError::NoRoot(message),
                code => KeyError::Rejected { code, message },
            })
        } else {
            Response::decode(op, payload).map_err(|e| KeyError::Protocol(e.to_string()))
        };
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(stream);
        }
        answer
    }
}
