//! Why a key operation failed, and the protocol's error code for it. Below every module
//! that performs operations (`ops`, `acme_key`, `tls_keys`, `attest`), so that each can
//! fail with it without naming the dispatcher; `ops` re-exports it.

use keyservice_api::protocol::ErrorCode;

use crate::derive::DeriveError;

/// Why an operation failed. Messages are fixed strings: never key material.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpError {
    #[error("{0}")]
    InvalidArgument(&'static str),
    #[error("decryption failed")]
    DecryptFailed,
    #[error("{0}")]
    Internal(&'static str),
    #[error("{0}")]
    Refused(&'static str),
    /// The quote provider failed or is saturated (no key material: provider messages).
    #[error("{0}")]
    QuoteUnavailable(String),
    /// Shared-root mode: no root adopted yet.
    #[error("{0}")]
    NoRoot(&'static str),
    /// Shared-root mode: the sealed root handed over does not open here (the reason names
    /// no key material: lengths, compose hashes, "failed authentication").
    #[error("{0}")]
    RootRefused(String),
    /// An operator task refused: the request's signer, app, compose hash, freshness or
    /// target, or the governance contract's answer (public facts only).
    #[error("{0}")]
    OperatorRefused(String),
}

impl OpError {
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::InvalidArgument(_) => ErrorCode::InvalidArgument,
            Self::DecryptFailed => ErrorCode::DecryptFailed,
            Self::Internal(_) => ErrorCode::Internal,
            Self::Refused(_) => ErrorCode::Refused,
            Self::QuoteUnavailable(_) => ErrorCode::QuoteUnavailable,
            Self::NoRoot(_) => ErrorCode::NoRoot,
            Self::RootRefused(_) | Self::OperatorRefused(_) => ErrorCode::Refused,
        }
    }
}

impl From<DeriveError> for OpError {
    fn from(e: DeriveError) -> Self {
        Self::Internal(match e {
            DeriveError::Sign => "signing failed",
            DeriveError::Encoding => "public key encoding failed",
            _ => "key derivation failed",
        })
    }
}
