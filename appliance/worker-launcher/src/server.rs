//! The launcher's side: accept the appliance's connections, start one worker for each,
//! hand over its pipes, report its end, and kill it when the connection ends.

use std::io::IoSlice;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd as _, BorrowedFd};
use std::os::unix::fs::{DirBuilderExt as _, FileTypeExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, Interest};
use tokio::net::{UnixListener, UnixStream};
use tokio::process::Command;
use tokio::sync::Semaphore;

use crate::protocol::{
    self, HEADER_LEN, ProtocolError, Refusal, Request, Response, SPAWNED_FDS, WorkerExit,
};

/// How long a connection may take to send its request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// What the launcher starts, and for whom.
#[derive(Debug, Clone)]
pub struct LauncherConfig {
    /// The `action-worker` binary.
    pub worker_binary: PathBuf,
    /// The (empty, ideally read-only) directory workers run in.
    pub worker_cwd: PathBuf,
    /// `--memory-limit-mb` of every worker.
    pub memory_limit_mb: u64,
    /// Workers alive at once; further requests are refused as busy.
    pub max_workers: usize,
    /// The uids that may ask for workers.
    pub peer_uids: Vec<u32>,
    /// Development only: also accept peers of the launcher's own uid.
    pub allow_same_uid: bool,
}

/// Binds the socket at `path` (mode `mode`), replacing a stale socket but never another
/// kind of file or a live socket. The socket is bound inside a private 0700 directory,
/// chmod'ed, then renamed into place, so it is never reachable with other permissions.
pub fn bind(path: &Path, mode: u32) -> std::io::Result<UnixListener> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    format!("{} is in use by a running launcher", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        Ok(_) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists and is not a socket; not touching it",
                    path.display()
                ),
            ));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let private = parent.join(format!(".wl-bind-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&private);
    std::fs::DirBuilder::new().mode(0o700).create(&private)?;
    let tmp = private.join("s");
    let result = (|| {
        let listener = std::os::unix::net::UnixListener::bind(&tmp)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))?;
        std::fs::rename(&tmp, path)?;
        listener.set_nonblocking(true)?;
        UnixListener::from_std(listener)
    })();
    let _ = std::fs::remove_file(&tmp);
    let _ = std::fs::remove_dir(&private);
    result
}

/// Serves connections until `shutdown` resolves. Workers of connections still open then
/// are killed (their tasks are dropped, and with them the children, `kill_on_drop`).
pub async fn serve(
    listener: UnixListener,
    config: LauncherConfig,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let config = Arc::new(config);
    let slots = Arc::new(Semaphore::new(config.max_workers));
    let own_uid = rustix::process::getuid().as_raw();
    let mut tasks = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let config = Arc::clone(&config);
                    let slots = Arc::clone(&slots);
                    tasks.spawn(connection(stream, config, slots, own_uid));
                }
                Err(err) => {
                    tracing::warn!(error = %err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    tasks.shutdown().await;
}

async fn refuse(stream: &mut UnixStream, reason: Refusal, message: String) {
    tracing::warn!(%reason, %message, "refused a worker request");
    let frame = protocol::encode_response(&Response::Refused { reason, message });
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&frame)).await;
}

/// One connection: one worker, from its start to its reaping.
async fn connection(
    mut stream: UnixStream,
    config: Arc<LauncherConfig>,
    slots: Arc<Semaphore>,
    own_uid: u32,
) {
    // tokio's reading, not rustix's: a peer in another pid namespace (the appliance's
    // container) has pid 0 in SO_PEERCRED, which rustix's `Pid` refuses.
    let peer = match stream.peer_cred() {
        Ok(cred) => cred,
        Err(err) => {
            tracing::warn!(error = %err, "cannot read the peer's credentials");
            return;
        }
    };
    let peer_uid = peer.uid();
    let allowed =
        config.peer_uids.contains(&peer_uid) || (config.allow_same_uid && peer_uid == own_uid);
    if !allowed {
        let message = format!("uid {peer_uid} may not ask for workers");
        refuse(&mut stream, Refusal::PeerNotAllowed, message).await;
        return;
    }
    let Ok(_slot) = Arc::clone(&slots).try_acquire_owned() else {
        let message = format!(
            "the launcher already runs its maximum of {} workers (--max-workers)",
            config.max_workers
        );
        refuse(&mut stream, Refusal::Busy, message).await;
        return;
    };
    match tokio::time::timeout(REQUEST_TIMEOUT, read_request(&mut stream)).await {
        Ok(Ok(Request::Spawn)) => {}
        Ok(Err(RequestError::Protocol(ProtocolError::Version(v)))) => {
            let message = format!(
                "protocol version {v} is not supported; this launcher speaks {}",
                protocol::VERSION
            );
            refuse(&mut stream, Refusal::UnsupportedVersion, message).await;
            return;
        }
        Ok(Err(RequestError::Protocol(err))) => {
            refuse(&mut stream, Refusal::BadRequest, err.to_string()).await;
            return;
        }
        Ok(Err(RequestError::Io(err))) => {
            tracing::debug!(error = %err, "a connection ended before its request");
            return;
        }
        Err(_) => {
            let message = format!("no request within {} s", REQUEST_TIMEOUT.as_secs());
            refuse(&mut stream, Refusal::BadRequest, message).await;
            return;
        }
    }
    let mut child = match Command::new(&config.worker_binary)
        .arg("--memory-limit-mb")
        .arg(config.memory_limit_mb.to_string())
        .env_clear()
        .current_dir(&config.worker_cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(err) => {
            let message = format!("cannot start {}: {err}", config.worker_binary.display());
            refuse(&mut stream, Refusal::SpawnFailed, message).await;
            return;
        }
    };
    let pid = child.id().unwrap_or(0);
    let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let (Some(stdin), Some(stdout), Some(stderr)) = pipes else {
        let _ = child.kill().await;
        refuse(
            &mut stream,
            Refusal::SpawnFailed,
            "the worker's pipes are missing".into(),
        )
        .await;
        return;
    };
    let spawned = protocol::encode_response(&Response::Spawned {
        pid,
        memory_limit_mb: config.memory_limit_mb,
    });
    let fds = [stdin.as_fd(), stdout.as_fd(), stderr.as_fd()];
    if let Err(err) = send_with_fds(&stream, &spawned, &fds).await {
        tracing::warn!(error = %err, worker_pid = pid, "could not hand over a worker; killing it");
        let _ = child.kill().await;
        return;
    }
    // The appliance holds the pipes now; our copies must go, or the worker would never
    // see its stdin end.
    drop((stdin, stdout, stderr));
    tracing::info!(
        worker_pid = pid,
        peer_pid = peer.pid().unwrap_or(0),
        "started a worker"
    );

    let mut byte = [0u8; 1];
    let status = tokio::select! {
        status = child.wait() => status,
        // The appliance sends nothing after its request: its end (or anything else)
        // means "kill the worker".
        _ = stream.read(&mut byte) => {
            let _ = child.start_kill();
            child.wait().await
        }
    };
    let exit = match status {
        Ok(status) => WorkerExit::from_status(status),
        Err(err) => {
            tracing::error!(error = %err, worker_pid = pid, "cannot reap a worker");
            return;
        }
    };
    tracing::info!(worker_pid = pid, ?exit, "a worker ended");
    let frame = protocol::encode_response(&Response::Exited(exit));
    // The appliance may have closed completely: then nobody waits for this.
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&frame)).await;
}

#[derive(Debug)]
enum RequestError {
    Io(std::io::Error),
    Protocol(ProtocolError),
}

async fn read_request(stream: &mut UnixStream) -> Result<Request, RequestError> {
    let mut header = [0u8; HEADER_LEN];
    stream
        .read_exact(&mut header)
        .await
        .map_err(RequestError::Io)?;
    let len = protocol::frame_len(header).map_err(RequestError::Protocol)?;
    let mut body = vec![0u8; len];
    stream
        .read_exact(&mut body)
        .await
        .map_err(RequestError::Io)?;
    protocol::decode_request(&body).map_err(RequestError::Protocol)
}

/// Sends `frame` with `fds` attached (SCM_RIGHTS on its first byte), then the rest of the
/// frame if the socket took only part of it.
async fn send_with_fds(
    stream: &UnixStream,
    frame: &[u8],
    fds: &[BorrowedFd<'_>; SPAWNED_FDS],
) -> std::io::Result<()> {
    let mut sent = 0;
    while sent < frame.len() {
        stream.writable().await?;
        let result = stream.try_io(Interest::WRITABLE, || {
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(SPAWNED_FDS))];
            let mut control = SendAncillaryBuffer::new(&mut space);
            if sent == 0 && !control.push(SendAncillaryMessage::ScmRights(fds)) {
                return Err(std::io::Error::other("ancillary buffer too small"));
            }
            rustix::net::sendmsg(
                stream,
                &[IoSlice::new(&frame[sent..])],
                &mut control,
                SendFlags::NOSIGNAL,
            )
            .map_err(std::io::Error::from)
        });
        match result {
            Ok(n) => sent += n,
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stopping_launcher_never_removes_its_successors_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("launcher.sock");
        let first = bind(&path, 0o600).unwrap();
        let first_id = socket_file::BoundSocket::at(&path).unwrap();
        // The first launcher stops listening (its parent was killed) but has not yet
        // cleaned up; a successor replaces the stale socket.
        drop(first);
        let second = bind(&path, 0o600).unwrap();
        let second_id = socket_file::BoundSocket::at(&path).unwrap();
        // The first one's clean-up leaves the successor reachable (even when the new
        // file got the old inode back).
        first_id.remove(&path);
        assert!(std::os::unix::net::UnixStream::connect(&path).is_ok());
        // The successor's own clean-up, once it stopped listening, removes it.
        drop(second);
        second_id.remove(&path);
        assert!(!path.exists());
    }
}
