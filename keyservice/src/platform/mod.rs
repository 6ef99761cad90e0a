//! Platforms: where the measured compose hash and the sealing key bound to it come from.
//!
//! * [`dstack::DstackPlatform`] — production: the dstack guest agent (`Info`, `GetKey`).
//! * [`dev::DevPlatform`] — development: a local secret file. NOT confidential.
//!
//! Both finish with the same KDF, so the raw platform key is never used as an AES key:
//!
//! ```text
//! sealing key = HKDF-SHA256(salt = platform salt, IKM = platform key material,
//!                           info = "keyservice/v1/seal-key" ‖ 0x00 ‖ compose_hash (32 bytes))
//! ```

pub mod dev;
pub mod dstack;

use std::path::PathBuf;

use hkdf::Hkdf;
use keyservice_api::{ComposeHash, PlatformKind};
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::secret::{RngError, SealingKey};

/// `info` prefix of the sealing-key KDF.
pub const INFO_SEAL_KEY: &[u8] = b"keyservice/v1/seal-key";

/// A source of the measured compose hash and of sealing keys bound to compose hashes.
///
/// Methods block (they may talk to the guest agent); call them at start-up or from a
/// blocking context, never on a request path.
pub trait Platform: Send + Sync {
    fn kind(&self) -> PlatformKind;

    /// The compose hash this instance is measured as running.
    fn measured_compose_hash(&self) -> Result<ComposeHash, PlatformError>;

    /// The sealing key bound to `compose_hash` (the measured one to unseal; a new one to
    /// reseal for an upgrade).
    fn sealing_key(&self, compose_hash: &ComposeHash) -> Result<SealingKey, PlatformError>;
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlatformError {
    #[error("dev secret {}: {reason}", path.display())]
    DevSecret { path: PathBuf, reason: String },
    #[error("compose file {}: {source}", path.display())]
    ComposeFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("dstack guest agent at {}: {reason}", socket.display())]
    Agent { socket: PathBuf, reason: String },
    /// The agent's answer to `POST path` is not a usable HTTP/1.x response.
    #[error("dstack guest agent at {}: {path}: {source}", socket.display())]
    AgentHttp {
        socket: PathBuf,
        path: &'static str,
        #[source]
        source: dstack::HttpError,
    },
    /// The agent's `Info` answer gives no single compose hash (boxed: it carries two hashes).
    #[error("dstack guest agent at {}: {source}", socket.display())]
    AgentInfo {
        socket: PathBuf,
        #[source]
        source: Box<dstack::InfoError>,
    },
    #[error(transparent)]
    Rng(#[from] RngError),
    #[error("sealing-key derivation failed")]
    Kdf,
}

/// The common last step of every platform (see the module docs).
pub fn derive_sealing_key(
    salt: &[u8],
    ikm: &[u8],
    compose_hash: &ComposeHash,
) -> Result<SealingKey, PlatformError> {
    let hk = Hkdf::<Sha256>::new(Some(salt), ikm);
    let mut key = Zeroizing::new([0u8; 32]);
    hk.expand_multi_info(
        &[INFO_SEAL_KEY, &[0u8], compose_hash.as_bytes()],
        key.as_mut(),
    )
    .map_err(|_| PlatformError::Kdf)?;
    Ok(SealingKey::from_bytes(key))
}
