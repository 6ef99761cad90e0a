//! The Unix-socket server: one task per connection reads frames, each decoded request runs
//! on its own task (so slow and fast requests, and both cores, overlap), and a writer task
//! batches the answers back in completion order, matched by request id.
//!
//! Hostile input is bounded: frames over `MAX_FRAME_LEN` or under a header get an error
//! frame (request id 0) and the connection is closed; a bad version, op or payload gets an
//! error frame for that request id and the connection goes on. Per connection at most
//! `max_in_flight` requests run at once (then the server stops reading — backpressure); a
//! frame body must arrive within `frame_timeout`; a peer that stops reading is dropped
//! after `write_timeout`. One connection's fate never touches another's.
//!
//! Who may connect: the socket's mode (0600, or 0660 for the keyservice group) is the
//! first gate; the second is the peer's uid as the kernel reports it (`SO_PEERCRED`),
//! which must be one of `peer_uids` (default: keyservice's own uid). A process that
//! reaches the socket file through a group or a mistaken mount is still refused (one
//! `Refused` error frame, then the connection is closed) before any request is read.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use keyservice_api::codec::{self, FrameHeader};
use keyservice_api::protocol::{
    ErrorCode, HEADER_LEN, MAX_FRAME_LEN, Op, PROTOCOL_VERSION, Request,
};
use ring::rand::SystemRandom;
use tokio::io::{AsyncReadExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinSet;
use zeroize::{Zeroize, Zeroizing};

use crate::secret::fill_random;
use crate::service::Service;

/// Server limits. Defaults are generous for one appliance and tight for an attacker.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Concurrent connections; more are closed at once. Default 128.
    pub max_connections: usize,
    /// Requests running at once per connection. Default 256.
    pub max_in_flight: usize,
    /// Time for a frame body to arrive once its length is read. Default 10 s.
    pub frame_timeout: Duration,
    /// Time for a batch of answers to be written. Default 30 s.
    pub write_timeout: Duration,
    /// Time in-flight requests get to finish at shutdown. Default 2 s.
    pub shutdown_grace: Duration,
    /// The uids whose processes may connect (`SO_PEERCRED`). Default: this process's own.
    pub peer_uids: Vec<u32>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            max_connections: 128,
            max_in_flight: 256,
            frame_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(2),
            peer_uids: vec![own_uid()],
        }
    }
}

/// This process's real uid.
pub fn own_uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// Why a connection is refused before any request is read; the message is the text of
/// the `Refused` error frame the peer gets.
#[derive(Debug, thiserror::Error)]
enum Unadmitted {
    #[error("cannot read the peer's credentials: {0}")]
    Credentials(#[source] io::Error),
    #[error("uid {0} may not use this keyservice (--peer-uid)")]
    Uid(u32),
}

/// Whether the connected peer's uid, as the kernel reports it, is one of `allowed`;
/// `Err` with the reason for the refusal otherwise.
fn admit(stream: &UnixStream, allowed: &[u32]) -> Result<(), Unadmitted> {
    // tokio's reading, not rustix's: a peer in another pid namespace (the appliance's
    // container) has pid 0 in SO_PEERCRED, which rustix's `Pid` refuses.
    let uid = stream.peer_cred().map_err(Unadmitted::Credentials)?.uid();
    if allowed.contains(&uid) {
        Ok(())
    } else {
        Err(Unadmitted::Uid(uid))
    }
}

/// Binds the socket at `path` with mode 0600 (same user only).
pub fn bind(path: &Path) -> io::Result<UnixListener> {
    bind_with_mode(path, 0o600)
}

/// Binds the socket at `path` with `mode`: 0600, or 0660 when another user of the
/// keyservice's group must connect (two containers under two users sharing the socket
/// volume). Any other bit is refused.
///
/// A stale socket file (nobody accepting) is removed; a live one (another keyservice) or a
/// non-socket file at `path` is an error. The socket is bound inside a fresh 0700
/// directory, chmod'ed, then renamed into place, so it is never reachable with looser
/// permissions.
pub fn bind_with_mode(path: &Path, mode: u32) -> io::Result<UnixListener> {
    if mode & !0o660 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("socket mode {mode:o} would open the socket beyond user and group"),
        ));
    }
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("{} is in use by a running keyservice", path.display()),
                ));
            }
            tracing::info!(path = %path.display(), "removing stale socket");
            fs::remove_file(path)?;
        }
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists and is not a socket; not touching it",
                    path.display()
                ),
            ));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut suffix = [0u8; 6];
    fill_random(&SystemRandom::new(), &mut suffix).map_err(io::Error::other)?;
    let private = parent.join(format!(".ks-bind-{}", hex::encode(suffix)));
    fs::DirBuilder::new().mode(0o700).create(&private)?;
    let tmp = private.join("s");
    let result = (|| {
        let listener = UnixListener::bind(&tmp)?;
        fs::set_permissions(&tmp, fs::Permissions::from_mode(mode))?;
        fs::rename(&tmp, path)?;
        Ok(listener)
    })();
    let _ = fs::remove_file(&tmp);
    let _ = fs::remove_dir(&private);
    result
}

/// Accepts connections until `shutdown` resolves, then stops reading new requests, lets
/// in-flight ones finish (up to `shutdown_grace`) and returns. The caller removes the
/// socket file.
pub async fn serve(
    listener: UnixListener,
    service: Arc<Service>,
    config: ServerConfig,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let config = Arc::new(config);
    let slots = Arc::new(Semaphore::new(config.max_connections));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        while conns.try_join_next().is_some() {}
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((s, _)) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        // EMFILE and friends: back off instead of spinning.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if let Err(why) = admit(&stream, &config.peer_uids) {
                    tracing::warn!(reason = %why, "connection refused");
                    reject(stream, ErrorCode::Refused, &why.to_string());
                    continue;
                }
                let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
                    tracing::warn!(max = config.max_connections, "connection limit reached");
                    reject(stream, ErrorCode::Busy, "too many connections");
                    continue;
                };
                let service = Arc::clone(&service);
                let config = Arc::clone(&config);
                let stop = stop_rx.clone();
                conns.spawn(async move {
                    handle_connection(stream, service, config, stop).await;
                    drop(permit);
                });
            }
        }
    }
    tracing::info!(connections = conns.len(), "shutting down");
    let _ = stop_tx.send(true);
    let grace = config.shutdown_grace;
    let drained =
        tokio::time::timeout(grace, async { while conns.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        conns.abort_all();
    }
}

fn error_frame(op: u8, code: ErrorCode, id: u64, message: &str) -> Vec<u8> {
    let mut buf = Vec::with_capacity(HEADER_LEN + 4 + message.len());
    codec::encode_frame(&mut buf, FrameHeader::new(op, code as u8, id), |b| {
        b.extend_from_slice(message.as_bytes())
    });
    buf
}

/// Best-effort error frame on a connection we are about to drop.
fn reject(stream: UnixStream, code: ErrorCode, message: &str) {
    let _ = stream.try_write(&error_frame(0, code, 0, message));
}

async fn handle_connection(
    stream: UnixStream,
    service: Arc<Service>,
    config: Arc<ServerConfig>,
    stop: watch::Receiver<bool>,
) {
    let (rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::channel::<Vec<u8>>(config.max_in_flight.max(1));
    let mut writer = tokio::spawn(write_answers(wr, rx, config.write_timeout));
    tokio::select! {
        reason = read_requests(rd, tx, service, Arc::clone(&config), stop) => {
            tracing::debug!(%reason, "connection reader finished");
            // Let the answers already being computed go out, then close.
            if tokio::time::timeout(config.write_timeout, &mut writer).await.is_err() {
                writer.abort();
            }
        }
        _ = &mut writer => {
            tracing::debug!("peer stopped reading or went away; dropping the connection");
        }
    }
}

/// Reads and dispatches requests until the peer closes, misframes, or shutdown.
async fn read_requests(
    rd: OwnedReadHalf,
    tx: mpsc::Sender<Vec<u8>>,
    service: Arc<Service>,
    config: Arc<ServerConfig>,
    mut stop: watch::Receiver<bool>,
) -> &'static str {
    let mut rd = BufReader::with_capacity(MAX_FRAME_LEN, rd);
    let in_flight = Arc::new(Semaphore::new(config.max_in_flight.max(1)));
    loop {
        let mut prefix = [0u8; 4];
        tokio::select! {
            read = rd.read_exact(&mut prefix) => {
                if read.is_err() {
                    return "peer closed";
                }
            }
            _ = stop.changed() => return "shutdown",
        }
        let len = match codec::check_len(u32::from_be_bytes(prefix)) {
            Ok(len) => len,
            Err(e) => {
                let _ = tx
                    .send(error_frame(0, ErrorCode::BadFrame, 0, &e.to_string()))
                    .await;
                return "bad frame length";
            }
        };
        let mut body = Zeroizing::new(vec![0u8; len]);
        match tokio::time::timeout(config.frame_timeout, rd.read_exact(&mut body)).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return "peer closed inside a frame",
            Err(_) => return "frame body timed out",
        }
        let Some(header) = FrameHeader::parse(&body) else {
            return "frame without header";
        };
        let reply_error = |code: ErrorCode, msg: &str| error_frame(header.op, code, header.id, msg);
        if header.version != PROTOCOL_VERSION {
            let msg = format!(
                "protocol version {} is not supported; this keyservice speaks {PROTOCOL_VERSION}",
                header.version
            );
            if tx
                .send(reply_error(ErrorCode::UnsupportedVersion, &msg))
                .await
                .is_err()
            {
                return "writer gone";
            }
            continue;
        }
        let decoded = match (header.status, Op::from_u8(header.op)) {
            (0, Some(op)) => Request::decode(op, &body[HEADER_LEN..])
                .map(|r| (op, r))
                .map_err(|e| (ErrorCode::BadRequest, e.to_string())),
            (0, None) => Err((
                ErrorCode::UnknownOperation,
                format!("unknown operation {:#04x}", header.op),
            )),
            _ => Err((
                ErrorCode::BadRequest,
                "status byte of a request must be 0".to_owned(),
            )),
        };
        body.zeroize();
        let (op, request) = match decoded {
            Ok(v) => v,
            Err((code, msg)) => {
                if tx.send(reply_error(code, &msg)).await.is_err() {
                    return "writer gone";
                }
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else {
            return "semaphore closed";
        };
        let service = Arc::clone(&service);
        let tx = tx.clone();
        tokio::spawn(async move {
            let frame = answer(&service, op, header.id, request).await;
            let _ = tx.send(frame).await;
            drop(permit);
        });
    }
}

async fn answer(service: &Service, op: Op, id: u64, request: Request) -> Vec<u8> {
    let mut buf = Vec::with_capacity(HEADER_LEN + 4 + 96);
    match service.handle(request).await {
        Ok(response) => {
            codec::encode_frame(&mut buf, FrameHeader::new(op as u8, 0, id), |b| {
                response.encode_payload(b)
            });
        }
        Err(e) => {
            tracing::debug!(?op, error = %e, "request failed");
            codec::encode_frame(
                &mut buf,
                FrameHeader::new(op as u8, e.code() as u8, id),
                |b| b.extend_from_slice(e.to_string().as_bytes()),
            );
        }
    }
    buf
}

/// Writes answers in batches (wiped after writing: answers can carry keys).
async fn write_answers(mut wr: OwnedWriteHalf, mut rx: mpsc::Receiver<Vec<u8>>, timeout: Duration) {
    if let Err(e) = codec::write_frames(&mut wr, &mut rx, timeout).await {
        tracing::debug!(error = %e, "writing answers failed");
    }
}
