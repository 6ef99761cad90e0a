//! Which compose hashes the root may be resealed to.
//!
//! Today: an allow-list file. Later: the app-governance contract's
//! `allowedComposeHashes(bytes32)` behind the same trait.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use keyservice_api::ComposeHash;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    #[error("allow-list {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("allow-list {}, line {line}: {reason}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("compose-hash policy check failed: {0}")]
    Check(String),
}

/// Decides whether the root may be resealed to a compose hash.
pub trait ComposeHashPolicy {
    /// For messages: what was consulted.
    fn describe(&self) -> String;

    /// `Ok(true)` to allow, `Ok(false)` to refuse, `Err` if the answer is unknown (which
    /// callers treat as a refusal).
    fn is_allowed(&self, compose_hash: &ComposeHash) -> Result<bool, PolicyError>;
}

/// A file of allowed compose hashes: one hex hash per line (`0x` optional); blank lines
/// and lines starting with `#` are ignored; anything else is an error, so a typo cannot
/// silently shrink or widen the list.
#[derive(Debug, Clone)]
pub struct AllowListFile {
    path: PathBuf,
    hashes: BTreeSet<ComposeHash>,
}

impl AllowListFile {
    pub fn load(path: impl AsRef<Path>) -> Result<Self, PolicyError> {
        let path = path.as_ref().to_path_buf();
        let text = std::fs::read_to_string(&path).map_err(|source| PolicyError::Io {
            path: path.clone(),
            source,
        })?;
        let mut hashes = BTreeSet::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let hash: ComposeHash = line.parse().map_err(|e| PolicyError::Parse {
                path: path.clone(),
                line: i + 1,
                reason: format!("{e}"),
            })?;
            hashes.insert(hash);
        }
        Ok(Self { path, hashes })
    }

    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }
}

impl ComposeHashPolicy for AllowListFile {
    fn describe(&self) -> String {
        format!("allow-list {}", self.path.display())
    }

    fn is_allowed(&self, compose_hash: &ComposeHash) -> Result<bool, PolicyError> {
        Ok(self.hashes.contains(compose_hash))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_checks() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("allow");
        let a = "11".repeat(32);
        std::fs::write(&p, format!("# allowed\n\n0x{a}\n{}\n", "22".repeat(32))).unwrap();
        let list = AllowListFile::load(&p).unwrap();
        assert_eq!(list.len(), 2);
        assert!(list.is_allowed(&ComposeHash([0x11; 32])).unwrap());
        assert!(!list.is_allowed(&ComposeHash([0x33; 32])).unwrap());
        std::fs::write(&p, "not-a-hash\n").unwrap();
        assert!(matches!(
            AllowListFile::load(&p),
            Err(PolicyError::Parse { line: 1, .. })
        ));
    }
}
