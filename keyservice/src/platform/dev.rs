//! The development platform: NOT confidential.
//!
//! * compose hash = SHA-256 of the bytes of a local compose file;
//! * sealing key  = HKDF-SHA256(salt = "keyservice/v1/dev-seal", IKM = dev secret,
//!   info = "keyservice/v1/seal-key" ‖ 0x00 ‖ compose hash), where the dev secret is a
//!   32-byte file created with mode 0600 from the OS CSPRNG when missing.
//!
//! Anyone who can read the dev secret file can unseal the root. It exists so the whole
//! service runs on a laptop or in CI exactly as it runs in a TDX guest.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use keyservice_api::{ComposeHash, PlatformKind};
use ring::rand::SystemRandom;
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use super::{Platform, PlatformError, derive_sealing_key};
use crate::secret::{SealingKey, fill_random};

/// HKDF salt of the dev sealing key.
pub const DEV_SEAL_SALT: &[u8] = b"keyservice/v1/dev-seal";

pub struct DevPlatform {
    secret_path: PathBuf,
    compose_path: PathBuf,
}

impl DevPlatform {
    /// No I/O here; the secret is read (or created) when a sealing key is first needed.
    pub fn new(secret_path: impl Into<PathBuf>, compose_path: impl Into<PathBuf>) -> Self {
        let p = Self {
            secret_path: secret_path.into(),
            compose_path: compose_path.into(),
        };
        tracing::warn!(
            dev_secret = %p.secret_path.display(),
            "DEV PLATFORM: the root is sealed with a key from a local file. This keyservice \
             is NOT confidential; never use --platform dev for real keys"
        );
        p
    }

    fn load_or_create_secret(&self) -> Result<Zeroizing<[u8; 32]>, PlatformError> {
        let err = |reason: String| PlatformError::DevSecret {
            path: self.secret_path.clone(),
            reason,
        };
        match File::open(&self.secret_path) {
            Ok(mut f) => {
                let meta = f.metadata().map_err(|e| err(e.to_string()))?;
                if meta.permissions().mode() & 0o077 != 0 {
                    tracing::warn!(
                        path = %self.secret_path.display(),
                        "dev secret is readable by group or others"
                    );
                }
                if meta.len() != 32 {
                    return Err(err(format!(
                        "expected exactly 32 bytes, found {}",
                        meta.len()
                    )));
                }
                let mut secret = Zeroizing::new([0u8; 32]);
                f.read_exact(secret.as_mut())
                    .map_err(|e| err(e.to_string()))?;
                Ok(secret)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => self.create_secret(),
            Err(e) => Err(err(e.to_string())),
        }
    }

    fn create_secret(&self) -> Result<Zeroizing<[u8; 32]>, PlatformError> {
        let err = |reason: String| PlatformError::DevSecret {
            path: self.secret_path.clone(),
            reason,
        };
        let mut secret = Zeroizing::new([0u8; 32]);
        fill_random(&SystemRandom::new(), secret.as_mut())?;
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&self.secret_path)
            .map_err(|e| err(format!("cannot create: {e}")))?;
        f.write_all(secret.as_ref())
            .and_then(|()| f.sync_all())
            .map_err(|e| err(format!("cannot write: {e}")))?;
        sync_parent(&self.secret_path);
        tracing::warn!(path = %self.secret_path.display(), "created a new dev secret");
        Ok(secret)
    }
}

fn sync_parent(path: &Path) {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if let Ok(d) = File::open(parent) {
        let _ = d.sync_all();
    }
}

impl Platform for DevPlatform {
    fn kind(&self) -> PlatformKind {
        PlatformKind::Dev
    }

    fn measured_compose_hash(&self) -> Result<ComposeHash, PlatformError> {
        let bytes = fs::read(&self.compose_path).map_err(|source| PlatformError::ComposeFile {
            path: self.compose_path.clone(),
            source,
        })?;
        Ok(ComposeHash(Sha256::digest(&bytes).into()))
    }

    fn sealing_key(&self, compose_hash: &ComposeHash) -> Result<SealingKey, PlatformError> {
        let secret = self.load_or_create_secret()?;
        derive_sealing_key(DEV_SEAL_SALT, secret.as_ref(), compose_hash)
    }
}
