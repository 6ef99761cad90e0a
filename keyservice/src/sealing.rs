//! The sealed-root file: format, AES-256-GCM sealing, and crash-safe creation.
//!
//! ```text
//! offset  size  field
//! 0       8     magic "KSVCSEAL"
//! 8       1     format version (1)
//! 9       32    compose hash the root is sealed to
//! 41      12    AES-GCM nonce (random)
//! 53      48    AES-256-GCM(sealing key, nonce, aad = bytes 0..41, root) = ciphertext(32) ‖ tag(16)
//! total   101
//! ```
//!
//! The header (magic, version, compose hash) is the associated data, so changing any of
//! it, or any ciphertext bit, fails authentication. A file of the wrong length, magic or
//! version is rejected before any key is asked for. Nothing here ever replaces an
//! existing file: creation is temp file → fsync → link (no-clobber) → fsync directory.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use keyservice_api::ComposeHash;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::SystemRandom;
use zeroize::{Zeroize, Zeroizing};

use crate::platform::PlatformError;
use crate::policy::PolicyError;
use crate::secret::{RngError, RootSecret, SealingKey, fill_random};

pub const MAGIC: [u8; 8] = *b"KSVCSEAL";
pub const FORMAT_VERSION: u8 = 1;
const HEADER_LEN: usize = 8 + 1 + 32;
const TAG_LEN: usize = 16;
/// Exact size of a sealed-root file.
pub const SEALED_LEN: usize = HEADER_LEN + NONCE_LEN + 32 + TAG_LEN;

/// Everything that can go wrong with a sealed root. Messages name files and compose
/// hashes, never key material.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    #[error(
        "sealed root {} is bound to compose hash {found}, but this instance's measured compose \
         hash is {expected}; it opens only after the version it was sealed for runs \
         `keyservice reseal --to {expected}` (allowed by policy)",
        path.display()
    )]
    ComposeHashMismatch {
        path: PathBuf,
        expected: ComposeHash,
        found: ComposeHash,
    },
    #[error(
        "sealed root {} is {len} bytes, expected {SEALED_LEN}: truncated or corrupted; refusing \
         to continue and leaving the file untouched",
        path.display()
    )]
    BadLength { path: PathBuf, len: usize },
    #[error("{} is not a keyservice sealed root (bad magic); leaving it untouched", path.display())]
    BadMagic { path: PathBuf },
    #[error(
        "sealed root {} has format version {version}; this keyservice reads version {FORMAT_VERSION}",
        path.display()
    )]
    UnsupportedVersion { path: PathBuf, version: u8 },
    #[error(
        "sealed root {} failed authentication: it was modified, or it was sealed with another \
         sealing key than the platform gives for compose hash {compose_hash}; refusing to \
         continue and leaving the file untouched",
        path.display()
    )]
    AuthenticationFailed {
        path: PathBuf,
        compose_hash: ComposeHash,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} already exists; a sealed root is never overwritten", path.display())]
    AlreadyExists { path: PathBuf },
    #[error(
        "no sealed root for compose hash {expected} in {}, but other sealed roots exist ({found}); \
         refusing to create a new root next to them",
        dir.display()
    )]
    OtherRootsPresent {
        dir: PathBuf,
        expected: ComposeHash,
        found: String,
    },
    #[error("resealing to compose hash {target} refused: not allowed by {policy}")]
    NotAllowed { target: ComposeHash, policy: String },
    #[error(transparent)]
    Platform(#[from] PlatformError),
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Rng(#[from] RngError),
    #[error("AES-GCM sealing failed")]
    Crypto,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SealError + '_ {
    move |source| SealError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A parsed sealed-root file.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SealedRoot {
    pub compose_hash: ComposeHash,
    nonce: [u8; NONCE_LEN],
    ciphertext: [u8; 32 + TAG_LEN],
}

fn aead_key(key: &SealingKey) -> Result<LessSafeKey, SealError> {
    UnboundKey::new(&AES_256_GCM, key.expose_secret())
        .map(LessSafeKey::new)
        .map_err(|_| SealError::Crypto)
}

fn header(compose_hash: &ComposeHash) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&MAGIC);
    h[8] = FORMAT_VERSION;
    h[9..].copy_from_slice(compose_hash.as_bytes());
    h
}

impl SealedRoot {
    /// Encrypts `root` under `key` for `compose_hash` with a fresh random nonce.
    pub fn seal(
        root: &RootSecret,
        compose_hash: ComposeHash,
        key: &SealingKey,
        rng: &SystemRandom,
    ) -> Result<Self, SealError> {
        let mut nonce = [0u8; NONCE_LEN];
        fill_random(rng, &mut nonce)?;
        let mut buf = Zeroizing::new(*root.expose_secret());
        let tag = aead_key(key)?
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(header(&compose_hash)),
                buf.as_mut(),
            )
            .map_err(|_| SealError::Crypto)?;
        let mut ciphertext = [0u8; 32 + TAG_LEN];
        ciphertext[..32].copy_from_slice(buf.as_ref());
        ciphertext[32..].copy_from_slice(tag.as_ref());
        Ok(Self {
            compose_hash,
            nonce,
            ciphertext,
        })
    }

    pub fn to_bytes(&self) -> [u8; SEALED_LEN] {
        let mut out = [0u8; SEALED_LEN];
        out[..HEADER_LEN].copy_from_slice(&header(&self.compose_hash));
        out[HEADER_LEN..HEADER_LEN + NONCE_LEN].copy_from_slice(&self.nonce);
        out[HEADER_LEN + NONCE_LEN..].copy_from_slice(&self.ciphertext);
        out
    }

    /// Parses the layout; `path` is only used in error messages.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self, SealError> {
        if bytes.len() != SEALED_LEN {
            // A short file with the right magic is "truncated"; one without is "not ours".
            if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] == MAGIC {
                return Err(SealError::BadLength {
                    path: path.to_path_buf(),
                    len: bytes.len(),
                });
            }
        }
        if bytes[..MAGIC.len()] != MAGIC {
            return Err(SealError::BadMagic {
                path: path.to_path_buf(),
            });
        }
        if bytes.len() != SEALED_LEN {
            return Err(SealError::BadLength {
                path: path.to_path_buf(),
                len: bytes.len(),
            });
        }
        if bytes[8] != FORMAT_VERSION {
            return Err(SealError::UnsupportedVersion {
                path: path.to_path_buf(),
                version: bytes[8],
            });
        }
        let mut compose_hash = [0u8; 32];
        compose_hash.copy_from_slice(&bytes[9..HEADER_LEN]);
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&bytes[HEADER_LEN..HEADER_LEN + NONCE_LEN]);
        let mut ciphertext = [0u8; 32 + TAG_LEN];
        ciphertext.copy_from_slice(&bytes[HEADER_LEN + NONCE_LEN..]);
        Ok(Self {
            compose_hash: ComposeHash(compose_hash),
            nonce,
            ciphertext,
        })
    }

    /// Reads and parses a sealed-root file.
    pub fn read(path: &Path) -> Result<Self, SealError> {
        let bytes = fs::read(path).map_err(io_err(path))?;
        Self::parse(&bytes, path)
    }

    /// Decrypts with `key`. The caller has already checked that `self.compose_hash` is the
    /// one `key` belongs to; a wrong key or any modified byte fails authentication.
    pub fn unseal(&self, key: &SealingKey, path: &Path) -> Result<RootSecret, SealError> {
        let mut buf = Zeroizing::new(self.ciphertext);
        let opened = aead_key(key)?
            .open_in_place(
                Nonce::assume_unique_for_key(self.nonce),
                Aad::from(header(&self.compose_hash)),
                buf.as_mut(),
            )
            .map_err(|_| SealError::AuthenticationFailed {
                path: path.to_path_buf(),
                compose_hash: self.compose_hash,
            })?;
        let mut root = Zeroizing::new([0u8; 32]);
        root.copy_from_slice(opened);
        buf.zeroize();
        Ok(RootSecret::from_bytes(root))
    }
}

fn sync_dir(dir: &Path) -> Result<(), SealError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

/// Creates `path` with `bytes` (mode 0600) crash-safely and without ever replacing an
/// existing file: write a temp file in the same directory, fsync it, hard-link it to the
/// final name (fails if that exists), unlink the temp name, fsync the directory. On a
/// filesystem without hard links it falls back to check-then-rename.
pub fn write_new_file(path: &Path, bytes: &[u8], rng: &SystemRandom) -> Result<(), SealError> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "sealed".into());
    let mut suffix = [0u8; 6];
    fill_random(rng, &mut suffix)?;
    let tmp = dir.join(format!(
        ".{name}.tmp-{}-{}",
        std::process::id(),
        hex::encode(suffix)
    ));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io_err(&tmp))?;
        f.write_all(bytes)
            .and_then(|()| f.sync_all())
            .map_err(io_err(&tmp))?;
        drop(f);
        match fs::hard_link(&tmp, path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Err(SealError::AlreadyExists {
                path: path.to_path_buf(),
            }),
            Err(_) => {
                if fs::symlink_metadata(path).is_ok() {
                    return Err(SealError::AlreadyExists {
                        path: path.to_path_buf(),
                    });
                }
                fs::rename(&tmp, path).map_err(io_err(path))
            }
        }
    })();
    let _ = fs::remove_file(&tmp);
    result?;
    sync_dir(&dir)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn key(b: u8) -> SealingKey {
        SealingKey::from_bytes(Zeroizing::new([b; 32]))
    }

    #[test]
    fn layout_and_round_trip() {
        let rng = SystemRandom::new();
        let root = RootSecret::from_bytes(Zeroizing::new([42; 32]));
        let h = ComposeHash([7; 32]);
        let sealed = SealedRoot::seal(&root, h, &key(1), &rng).unwrap();
        let bytes = sealed.to_bytes();
        assert_eq!(&bytes[..8], b"KSVCSEAL");
        assert_eq!(bytes[8], 1);
        assert_eq!(&bytes[9..41], &[7; 32]);
        let p = Path::new("x");
        let back = SealedRoot::parse(&bytes, p).unwrap();
        assert_eq!(back.unseal(&key(1), p).unwrap().expose_secret(), &[42; 32]);
        assert!(matches!(
            back.unseal(&key(2), p),
            Err(SealError::AuthenticationFailed { .. })
        ));
        // Every single-bit flip anywhere is caught.
        for i in 0..SEALED_LEN {
            let mut t = bytes;
            t[i] ^= 0x01;
            let r = SealedRoot::parse(&t, p).and_then(|s| s.unseal(&key(1), p));
            assert!(r.is_err(), "flip at byte {i} accepted");
        }
        for n in 0..SEALED_LEN {
            assert!(SealedRoot::parse(&bytes[..n], p).is_err());
        }
    }

    #[test]
    fn never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let rng = SystemRandom::new();
        write_new_file(&p, b"one", &rng).unwrap();
        assert!(matches!(
            write_new_file(&p, b"two", &rng),
            Err(SealError::AlreadyExists { .. })
        ));
        assert_eq!(fs::read(&p).unwrap(), b"one");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "temp file left behind");
    }
}
