//! Which compose hashes the root may be resealed to.
//!
//! An allow-list file ([`AllowListFile`]), or the app-governance contract's
//! `allowedComposeHashes(bytes32)` read over JSON-RPC ([`GovernanceContract`]).

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

/// The `AppGovernance` contract at `address` on the chain behind `rpc_url`: a hash is
/// allowed when `allowedComposeHashes(hash)` returns true. No code at the address, or an
/// unreachable node, is an error (and so a refusal).
#[derive(Debug, Clone)]
pub struct GovernanceContract {
    address: alloy::primitives::Address,
    rpc_url: String,
    timeout: std::time::Duration,
}

impl GovernanceContract {
    /// `address` as `0x` + 40 hex; `rpc_url` an http(s) JSON-RPC endpoint.
    pub fn new(address: &str, rpc_url: &str) -> Result<Self, PolicyError> {
        let address = address
            .trim()
            .parse()
            .map_err(|_| PolicyError::Check(format!("{address:?} is not a contract address")))?;
        rpc_url
            .parse::<alloy::transports::http::reqwest::Url>()
            .map_err(|e| PolicyError::Check(format!("bad RPC URL: {e}")))?;
        Ok(Self {
            address,
            rpc_url: rpc_url.to_owned(),
            timeout: std::time::Duration::from_secs(30),
        })
    }

    async fn query(&self, hash: &ComposeHash) -> Result<bool, PolicyError> {
        use alloy::providers::{Provider, ProviderBuilder};
        let url = self
            .rpc_url
            .parse()
            .map_err(|e| PolicyError::Check(format!("bad RPC URL: {e}")))?;
        let client =
            chain_contracts::rpc::http_client().map_err(|e| PolicyError::Check(e.to_string()))?;
        let provider = ProviderBuilder::new().connect_reqwest(client, url);
        let code = provider
            .get_code_at(self.address)
            .await
            .map_err(|e| PolicyError::Check(format!("reading the governance contract: {e}")))?;
        if code.is_empty() {
            return Err(PolicyError::Check(format!(
                "no contract at {} on this chain",
                self.address
            )));
        }
        chain_contracts::IAppGovernance::new(self.address, provider)
            .allowedComposeHashes(alloy::primitives::B256::from(hash.0))
            .call()
            .await
            .map_err(|e| PolicyError::Check(format!("allowedComposeHashes: {e}")))
    }
}

impl ComposeHashPolicy for GovernanceContract {
    fn describe(&self) -> String {
        format!("governance contract {}", self.address)
    }

    fn is_allowed(&self, compose_hash: &ComposeHash) -> Result<bool, PolicyError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| PolicyError::Check(format!("cannot start a runtime: {e}")))?;
        runtime.block_on(async {
            tokio::time::timeout(self.timeout, self.query(compose_hash))
                .await
                .map_err(|_| PolicyError::Check("the RPC node did not answer in time".into()))?
        })
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
