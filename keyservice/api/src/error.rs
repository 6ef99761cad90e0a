//! The one error type of the keyservice client boundary.
//!
//! Who is at fault: `Unavailable`/`Timeout`/`NoRoot` — the keyservice process (map to 503);
//! `InvalidArgument`/`DecryptFailed` — the caller's input (map to 400/422);
//! `Rejected`/`Protocol` — a bug on one side (map to 500). No variant ever carries key
//! material: server messages are fixed strings chosen by the keyservice.

use std::path::PathBuf;
use std::time::Duration;

use crate::protocol::ErrorCode;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The socket is absent, refused the connection, or the connection closed. The next
    /// call reconnects by itself.
    #[error("keyservice unavailable at {}: {reason}", path.display())]
    Unavailable { path: PathBuf, reason: String },
    /// No answer within the configured request (or connect) timeout.
    #[error("keyservice did not answer within {0:?}")]
    Timeout(Duration),
    /// An argument the client or the server rejected before doing any work.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// AES-GCM authentication failed: the ciphertext was modified, truncated, or was made
    /// for another wallet.
    #[error("decryption failed: the ciphertext was modified or belongs to another wallet")]
    DecryptFailed,
    /// Shared-root mode: the keyservice does not hold a root yet ([`ErrorCode::NoRoot`]):
    /// the front end has not handed it the shared sealed root (`AdoptRoot`), e.g. because
    /// it restarted. Nothing was done; retry once the root is adopted.
    #[error("{0}")]
    NoRoot(String),
    /// The server answered with another error code.
    #[error("keyservice refused the request ({code}): {message}")]
    Rejected { code: ErrorCode, message: String },
    /// The server's answer did not follow the protocol.
    #[error("keyservice protocol violation: {0}")]
    Protocol(String),
}

impl KeyError {
    /// True when the keyservice could not be reached, did not answer in time, or has no
    /// root yet ([`Self::NoRoot`]): the request was not (known to be) processed and the
    /// caller should report 503.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            Self::Unavailable { .. } | Self::Timeout(_) | Self::NoRoot(_)
        )
    }

    /// True when the keyservice understood the request and its boundary forbids it
    /// ([`ErrorCode::Refused`]): retrying will not help.
    pub fn is_refused(&self) -> bool {
        matches!(
            self,
            Self::Rejected {
                code: ErrorCode::Refused,
                ..
            }
        )
    }
}
