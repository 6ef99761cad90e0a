//! The appliance's side: ask the launcher for one worker and get its pipes.

use std::io::{IoSliceMut, Write as _};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, Shutdown};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, Interest};
use tokio::net::UnixStream;

use crate::protocol::{
    self, HEADER_LEN, MAX_FRAME_LEN, ProtocolError, Refusal, Request, Response, SPAWNED_FDS,
    WorkerExit,
};

/// Why no worker came from the launcher, or its end was not learned.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("cannot connect to the worker launcher at {path}: {source}")]
    Connect {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("worker launcher connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("the worker launcher refused ({reason}): {message}")]
    Refused { reason: Refusal, message: String },
    #[error("the worker launcher broke the protocol: {0}")]
    Protocol(String),
    #[error("the worker launcher closed the connection")]
    Closed,
}

impl From<ProtocolError> for LaunchError {
    fn from(err: ProtocolError) -> Self {
        Self::Protocol(err.to_string())
    }
}

/// A worker started by the launcher: its pipes, and the connection that is its life.
#[derive(Debug)]
pub struct LaunchedWorker {
    /// The worker's pid in the launcher's pid namespace (for logs).
    pub pid: u32,
    /// The memory limit the launcher started it with.
    pub memory_limit_mb: u64,
    /// Write end of the worker's stdin.
    pub stdin: OwnedFd,
    /// Read end of the worker's stdout.
    pub stdout: OwnedFd,
    /// Read end of the worker's stderr.
    pub stderr: OwnedFd,
    /// Ends the worker ([`Connection::kill`], or dropping it) and learns how it ended.
    pub connection: Connection,
}

/// The connection a launched worker lives by. Dropping it closes the connection, and the
/// launcher then kills the worker.
#[derive(Debug)]
pub struct Connection {
    stream: UnixStream,
    exit: Option<WorkerExit>,
}

impl Connection {
    /// Asks for the worker to be killed (SIGKILL) without waiting: closes the writing
    /// half of the connection. [`Connection::wait`] then returns its end.
    pub fn kill(&self) -> std::io::Result<()> {
        match rustix::net::shutdown(&self.stream, Shutdown::Write) {
            // Already gone: the launcher has closed, so the worker is dead too.
            Err(rustix::io::Errno::NOTCONN) => Ok(()),
            other => other.map_err(std::io::Error::from),
        }
    }

    /// Waits for the worker's end, as the launcher reports it.
    pub async fn wait(&mut self) -> Result<WorkerExit, LaunchError> {
        if let Some(exit) = self.exit {
            return Ok(exit);
        }
        let mut header = [0u8; HEADER_LEN];
        read_exact(&mut self.stream, &mut header).await?;
        let len = protocol::frame_len(header)?;
        let mut body = vec![0u8; len];
        read_exact(&mut self.stream, &mut body).await?;
        match protocol::decode_response(&body)? {
            Response::Exited(exit) => {
                self.exit = Some(exit);
                Ok(exit)
            }
            other => Err(LaunchError::Protocol(format!(
                "expected Exited, got {other:?}"
            ))),
        }
    }
}

async fn read_exact(stream: &mut UnixStream, buf: &mut [u8]) -> Result<(), LaunchError> {
    match stream.read_exact(buf).await {
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => Err(LaunchError::Closed),
        Err(err) => Err(err.into()),
    }
}

/// Connects to the launcher at `socket` and asks for one worker.
pub async fn launch(socket: &Path) -> Result<LaunchedWorker, LaunchError> {
    let mut stream = UnixStream::connect(socket)
        .await
        .map_err(|source| LaunchError::Connect {
            path: socket.to_owned(),
            source,
        })?;
    // A launcher that refuses at once (busy, a peer it does not serve) answers and closes
    // without reading the request, so the write may fail with a broken pipe while the
    // refusal waits to be read: read the answer anyway, and report the write's error
    // only if there is none.
    let written = stream
        .write_all(&protocol::encode_request(Request::Spawn))
        .await;
    let mut fds = Vec::new();
    let mut header = [0u8; HEADER_LEN];
    if let Err(read_error) = recv_exact(&stream, &mut header, &mut fds).await {
        return Err(match written {
            Err(write_error) => write_error.into(),
            Ok(()) => read_error,
        });
    }
    let len = protocol::frame_len(header)?;
    let mut body = vec![0u8; len];
    recv_exact(&stream, &mut body, &mut fds).await?;
    match protocol::decode_response(&body)? {
        Response::Spawned {
            pid,
            memory_limit_mb,
        } => {
            let mut fds = fds.into_iter();
            match (fds.next(), fds.next(), fds.next(), fds.next()) {
                (Some(stdin), Some(stdout), Some(stderr), None) => Ok(LaunchedWorker {
                    pid,
                    memory_limit_mb,
                    stdin,
                    stdout,
                    stderr,
                    connection: Connection { stream, exit: None },
                }),
                _ => Err(LaunchError::Protocol(format!(
                    "Spawned must carry {SPAWNED_FDS} descriptors"
                ))),
            }
        }
        Response::Refused { reason, message } => Err(LaunchError::Refused { reason, message }),
        Response::Exited(exit) => Err(LaunchError::Protocol(format!(
            "the launcher reported an exit ({exit:?}) before any worker"
        ))),
    }
}

/// Fills `buf` from `stream` with `recvmsg`, collecting descriptors that come with it.
async fn recv_exact(
    stream: &UnixStream,
    buf: &mut [u8],
    fds: &mut Vec<OwnedFd>,
) -> Result<(), LaunchError> {
    let mut filled = 0;
    while filled < buf.len() {
        stream.readable().await?;
        let got = stream.try_io(Interest::READABLE, || {
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(SPAWNED_FDS))];
            let mut control = RecvAncillaryBuffer::new(&mut space);
            let mut iov = [IoSliceMut::new(&mut buf[filled..])];
            let msg = rustix::net::recvmsg(stream, &mut iov, &mut control, RecvFlags::CMSG_CLOEXEC)
                .map_err(std::io::Error::from)?;
            let mut received = Vec::new();
            for message in control.drain() {
                if let RecvAncillaryMessage::ScmRights(rights) = message {
                    received.extend(rights);
                }
            }
            Ok((msg.bytes, msg.flags, received))
        });
        let (n, flags, received) = match got {
            Ok(got) => got,
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(err) => return Err(err.into()),
        };
        fds.extend(received);
        if flags.contains(ReturnFlags::CTRUNC) {
            return Err(LaunchError::Protocol(
                "more descriptors than the protocol allows".into(),
            ));
        }
        if fds.len() > SPAWNED_FDS {
            return Err(LaunchError::Protocol(
                "more descriptors than the protocol allows".into(),
            ));
        }
        if n == 0 {
            return Err(LaunchError::Closed);
        }
        filled += n;
    }
    Ok(())
}

/// Writes raw bytes to the launcher socket and reads its answer, for probes of the
/// launcher's request handling (tests, diagnostics). Blocking.
pub fn raw_exchange(socket: &Path, request: &[u8]) -> Result<Response, LaunchError> {
    use std::io::Read as _;
    let mut stream =
        std::os::unix::net::UnixStream::connect(socket).map_err(|source| LaunchError::Connect {
            path: socket.to_owned(),
            source,
        })?;
    // The launcher may answer (and close) before reading everything: ignore a broken pipe.
    let _ = stream.write_all(request);
    let mut header = [0u8; HEADER_LEN];
    stream.read_exact(&mut header).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => LaunchError::Closed,
        _ => LaunchError::Io(e),
    })?;
    let len = protocol::frame_len(header)?;
    if len > MAX_FRAME_LEN {
        return Err(LaunchError::Protocol("frame too long".into()));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body)?;
    Ok(protocol::decode_response(&body)?)
}
