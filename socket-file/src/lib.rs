//! The Unix socket file a server bound (the keyservice's, the worker launcher's), and
//! its removal at exit: only if the file is still the one this server bound and nobody
//! answers on it. A new server may already have replaced a stale socket at the same
//! path while this one was stopping, and the new file may get the freed inode back,
//! hence the change time in the identity too.
//!
//! May depend on: no workspace crate (std and tracing).

use std::path::Path;

/// What identifies a socket file (device, inode and change time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoundSocket {
    dev: u64,
    ino: u64,
    ctime: (i64, i64),
}

impl BoundSocket {
    /// The socket file now at `path`, if any.
    pub fn at(path: &Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::symlink_metadata(path).ok().map(|m| Self {
            dev: m.dev(),
            ino: m.ino(),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }

    /// Removes the file at `path` if it is still this socket and nobody listens on it
    /// (this server has stopped listening: an answer means a successor owns it).
    pub fn remove(self, path: &Path) {
        if Self::at(path) == Some(self)
            && std::os::unix::net::UnixStream::connect(path).is_err()
            && let Err(e) = std::fs::remove_file(path)
        {
            tracing::warn!(error = %e, "could not remove the socket file");
        }
    }
}
