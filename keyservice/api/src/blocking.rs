//! A small blocking client for the calls that must be synchronous: a TLS handshake's
//! signature (`TlsSign`), which rustls asks for from inside a synchronous `Signer::sign`,
//! and the row MACs the store's writer thread asks for once per write batch (`RowMac`:
//! through an async runtime each call would cost two thread hand-overs).
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

use crate::client::{CallOutcome, KeyClient, Observer, row_mac_batches};
use crate::codec::{FrameHeader, check_len, encode_frame};
use crate::error::KeyError;
use crate::protocol::{
    ErrorCode, MAX_TLS_SIGN_MESSAGE_LEN, Op, PROTOCOL_VERSION, Request, Response,
    TLS_SCHEME_ECDSA_P256_SHA256,
};

/// Idle connections kept for reuse (more may be open while busy).
const MAX_IDLE: usize = 8;

/// The first read of an answer: room for a TLS signature's whole frame.
const FIRST_READ: usize = 256;

/// A blocking keyservice client for `TlsSign` / `TlsPublicKey` / `RowMac`.
pub struct BlockingClient {
    path: PathBuf,
    timeout: Duration,
    idle: Mutex<Vec<UnixStream>>,
    next_id: AtomicU64,
    observer: Option<Observer>,
}

impl std::fmt::Debug for BlockingClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockingClient")
            .field("path", &self.path)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl BlockingClient {
    pub fn new(path: impl AsRef<Path>, timeout: Duration) -> Self {
        Self {
            path: path.as_ref().to_owned(),
            timeout,
            idle: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            observer: None,
        }
    }

    /// This client, reporting its `RowMac` calls to `observer`.
    pub fn observed_by(self, observer: Option<Observer>) -> Self {
        Self { observer, ..self }
    }

    /// A blocking client on `client`'s socket, with its request timeout, reporting its
    /// calls to its observer: for a caller on a thread of its own that must not hop
    /// through an async runtime for each call (the store's writer asks for row MACs).
    pub fn like(client: &KeyClient) -> Self {
        Self::new(client.socket_path(), client.request_timeout())
            .observed_by(client.observer().cloned())
    }

    /// One HMAC-SHA256 tag per item, in order (see [`crate::KeyClient::row_macs`]): the
    /// items go in as few requests as the frame allows, one after another on one
    /// connection.
    pub fn row_macs(&self, items: &[&[u8]]) -> Result<Vec<[u8; 32]>, KeyError> {
        let started = std::time::Instant::now();
        let result = self.row_macs_unobserved(items);
        if let Some(Observer(observer)) = &self.observer {
            observer.finished(Op::RowMac, started.elapsed(), CallOutcome::of(&result));
        }
        result
    }

    fn row_macs_unobserved(&self, items: &[&[u8]]) -> Result<Vec<[u8; 32]>, KeyError> {
        let mut tags = Vec::with_capacity(items.len());
        for batch in row_mac_batches(items)? {
            let n = batch.len();
            match self.call(&Request::RowMac { items: batch })? {
                Response::RowMacs(t) if t.len() == n => tags.extend(t),
                other => {
                    return Err(KeyError::Protocol(format!(
                        "unexpected answer to RowMac: {other:?}"
                    )));
                }
            }
        }
        Ok(tags)
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
        // One read takes a whole small answer (a signature, a public key) with its length
        // prefix; only a larger one needs more.
        let mut first = Zeroizing::new([0u8; FIRST_READ]);
        let mut got = 0;
        while got < 4 {
            match stream.read(&mut first[got..]) {
                // (A closed idle connection shows here: `Unavailable`, retried.)
                Ok(0) => return Err(self.unavailable("keyservice closed the connection")),
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(timed_out(e)),
            }
        }
        let prefix = [first[0], first[1], first[2], first[3]];
        let len = check_len(u32::from_be_bytes(prefix)).map_err(|e| self.unavailable(e))?;
        if got > 4 + len {
            return Err(KeyError::Protocol(
                "keyservice sent more than one answer".to_owned(),
            ));
        }
        let mut body = Zeroizing::new(vec![0u8; len]);
        body[..got - 4].copy_from_slice(&first[4..got]);
        stream.read_exact(&mut body[got - 4..]).map_err(timed_out)?;
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

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixListener;

    use super::*;

    /// A one-connection fake keyservice: reads one request frame, then writes `answer` to
    /// that request's id followed by `extra`, cut at the offsets `cuts`, pausing between
    /// the pieces.
    fn fake_keyservice(
        dir: &Path,
        answer: Response,
        cuts: Vec<usize>,
        extra: Vec<u8>,
    ) -> std::thread::JoinHandle<()> {
        let path = dir.join("ks.sock");
        let listener = UnixListener::bind(&path).unwrap();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut prefix = [0u8; 4];
            stream.read_exact(&mut prefix).unwrap();
            let mut body = vec![0u8; u32::from_be_bytes(prefix) as usize];
            stream.read_exact(&mut body).unwrap();
            let header = FrameHeader::parse(&body).unwrap();
            let mut frame = Vec::new();
            encode_frame(&mut frame, FrameHeader::new(header.op, 0, header.id), |b| {
                answer.encode_payload(b)
            });
            frame.extend_from_slice(&extra);
            let mut start = 0;
            for cut in cuts.into_iter().chain([frame.len()]) {
                stream.write_all(&frame[start..cut]).unwrap();
                stream.flush().unwrap();
                std::thread::sleep(Duration::from_millis(20));
                start = cut;
            }
            // Hold the connection open until the client is done with it.
            let _ = stream.read(&mut [0u8; 1]);
        })
    }

    fn client(dir: &Path) -> BlockingClient {
        BlockingClient::new(dir.join("ks.sock"), Duration::from_secs(5))
    }

    #[test]
    fn an_answer_split_inside_its_length_prefix_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let signature = vec![0x30; 71];
        let server = fake_keyservice(
            dir.path(),
            Response::TlsSignature(signature.clone()),
            vec![2, 9],
            Vec::new(),
        );
        assert_eq!(
            client(dir.path()).tls_sign(0, b"message").unwrap(),
            signature
        );
        drop(server);
    }

    #[test]
    fn an_answer_longer_than_the_first_read_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        // (An answer may be up to 512 bytes.)
        let spki: Vec<u8> = (0..FIRST_READ + 144).map(|i| i as u8).collect();
        let server = fake_keyservice(dir.path(), Response::Spki(spki.clone()), vec![], Vec::new());
        assert_eq!(client(dir.path()).tls_public_key(7).unwrap(), spki);
        drop(server);
    }

    #[test]
    fn bytes_after_the_answer_are_a_protocol_error_and_the_connection_is_not_reused() {
        let dir = tempfile::tempdir().unwrap();
        let server = fake_keyservice(
            dir.path(),
            Response::TlsSignature(vec![0x30; 70]),
            vec![],
            vec![0, 0, 0, 1, 0xff],
        );
        let client = client(dir.path());
        match client.tls_sign(0, b"message") {
            Err(KeyError::Protocol(why)) => assert!(why.contains("more than one answer"), "{why}"),
            other => panic!("expected a protocol error, got {other:?}"),
        }
        assert!(
            client.idle_connection().is_none(),
            "a confused connection went back to the pool"
        );
        drop(server);
    }

    /// Row MACs come back in order, one per item; an answer with another count is a
    /// protocol error, never a short list of tags.
    #[test]
    fn row_macs_answer_one_tag_per_item() {
        let dir = tempfile::tempdir().unwrap();
        let tags = vec![[1u8; 32], [2u8; 32]];
        let server = fake_keyservice(
            dir.path(),
            Response::RowMacs(tags.clone()),
            vec![],
            Vec::new(),
        );
        let items: [&[u8]; 2] = [b"a", b"bc"];
        assert_eq!(client(dir.path()).row_macs(&items).unwrap(), tags);
        drop(server);

        let dir = tempfile::tempdir().unwrap();
        let server = fake_keyservice(
            dir.path(),
            Response::RowMacs(vec![[1u8; 32]]),
            vec![],
            Vec::new(),
        );
        match client(dir.path()).row_macs(&items) {
            Err(KeyError::Protocol(why)) => assert!(why.contains("RowMac"), "{why}"),
            other => panic!("expected a protocol error, got {other:?}"),
        }
        drop(server);
    }
}
