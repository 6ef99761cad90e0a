//! What ACME keeps: the account and the current certificate, in `<data_dir>/acme/` or,
//! for replicas on PostgreSQL, in the shared store (`acme_files`: the same documents by
//! name, so every replica serves the same account and certificate).
//!
//! The invariant: no document holds a certificate private key. Certificate keys are
//! keyservice TLS keys (derived from the root by index, so replicas sharing the root share
//! them); a document names only the index. The ACME account key is the one private key
//! kept here, sealed by keyservice (`ServiceSeal`: AES-256-GCM under a key of its own per
//! purpose, reachable by no wallet operation): instant-acme 0.8 signs its requests only
//! with a key it holds in memory (its `Signer` trait is private), so the account key is
//! unsealed into the front end while an order runs. So the files alone reveal nothing
//! secret, and the certificate keys are never in this process at all.
//!
//! Formats (JSON):
//! * `account.json` (`"version": 2`; version 1 sealed under wallet-namespace paths, which
//!   keyservice now refuses, so such a file is ignored and a new account registered):
//!   `directory_url`, `account_uri`, `sealed_credentials` (base64 of the keyservice
//!   ciphertext of the ACME library's account credentials, which hold the account key).
//! * `certificate.json` (`"version": 3`): `domains`, `chain_pem` (leaf first),
//!   `key_index` (the keyservice TLS key the leaf carries). Version 2 held the sealed
//!   PKCS#8 key of a key the front end generated; it is not read any more: the account
//!   is kept and a certificate for a keyservice key is issued at once (the upgrade), the
//!   new document replacing the old one.
//! * `next-key.json` (`"version": 2`): `key_index`, the keyservice TLS key the *next*
//!   certificate will use. Its public key is announced in the evidence of the current
//!   certificate (`next-tls-key.json`), so a client that verified the current evidence can
//!   recognise the renewed certificate before it sends it anything; it moves on to the
//!   following index once it is in use. Version 1 (a sealed front-end key) is replaced.
//!
//! A file of another version is ignored (and replaced at the next issuance), never
//! misread.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use keyservice_api::{DerivationPath, ServicePurpose};
use serde::{Deserialize, Serialize};
use sha3::{Digest, Keccak256};
use zeroize::Zeroizing;

use super::AcmeError;
use crate::keyservice_client::Keys;

const FORMAT_VERSION: u32 = 2;

/// The wallet-namespace path that sealed the ACME account credentials in format 1.
fn account_seal_path() -> DerivationPath {
    seal_path(b"appliance/acme/account-key/v1")
}

/// The wallet-namespace path that sealed the certificate's private key in format 1.
fn cert_seal_path() -> DerivationPath {
    seal_path(b"appliance/acme/cert-key/v1")
}

/// Whether `path` is one of the service's former sealing paths (format 1). keyservice
/// refuses them in every wallet operation; they must never become anybody's wallet either
/// (an on-chain `registerWalletDerivation` naming one is refused by the indexer).
pub(crate) fn is_service_path(path: &DerivationPath) -> bool {
    [account_seal_path(), cert_seal_path()]
        .iter()
        .any(|reserved| reserved.0 == path.0)
}

fn seal_path(domain: &[u8]) -> DerivationPath {
    DerivationPath(Keccak256::digest(domain).into())
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct AccountFile {
    pub version: u32,
    pub directory_url: String,
    pub account_uri: String,
    pub sealed_credentials: String,
}

/// `certificate.json`'s format (version 2 held a sealed front-end key).
const CERT_VERSION: u32 = 3;

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct CertificateFile {
    pub version: u32,
    pub domains: Vec<String>,
    pub chain_pem: String,
    pub key_index: u32,
}

/// `next-key.json`'s format (version 1 held a sealed front-end key).
const NEXT_KEY_VERSION: u32 = 2;

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct NextKeyFile {
    pub version: u32,
    pub key_index: u32,
}

/// Just the version of a document, read before the document itself.
#[derive(Debug, Deserialize)]
struct Versioned {
    version: u32,
}

/// Where the documents live.
pub(super) enum Backing {
    /// One appliance: files in `<data_dir>/acme/`.
    Dir(PathBuf),
    /// Replicas: rows of the shared store.
    Shared(crate::store::Store),
}

/// The documents and the keyservice handle that seals what goes in them.
pub(super) struct SealedStore {
    backing: Backing,
    keys: Keys,
}

impl SealedStore {
    pub(super) fn new(backing: Backing, keys: Keys) -> Self {
        Self { backing, keys }
    }

    pub(super) fn keys(&self) -> &Keys {
        &self.keys
    }

    /// Document `name` if it has version `version`; another version is `None` (logged
    /// once here: the caller replaces it).
    async fn read_versioned<T: for<'de> Deserialize<'de>>(
        &self,
        name: &str,
        version: u32,
    ) -> Result<Option<T>, AcmeError> {
        let Some(bytes) = self.raw(name).await? else {
            return Ok(None);
        };
        match parse_json::<Versioned>(name, &bytes) {
            Some(v) if v.version == version => Ok(parse_json(name, &bytes)),
            Some(v) => {
                tracing::info!(
                    name,
                    found = v.version,
                    expected = version,
                    "replacing an ACME state document of an older format"
                );
                Ok(None)
            }
            None => Ok(None),
        }
    }

    /// The raw bytes of document `name`, if any.
    pub(super) async fn raw(&self, name: &str) -> Result<Option<Vec<u8>>, AcmeError> {
        match &self.backing {
            Backing::Dir(dir) => match std::fs::read(dir.join(name)) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(err) => Err(AcmeError::Storage(format!(
                    "{}: {err}",
                    dir.join(name).display()
                ))),
            },
            Backing::Shared(store) => store
                .acme_file(name.to_owned())
                .await
                .map_err(|e| AcmeError::Storage(format!("{name}: {e}"))),
        }
    }

    async fn read_json<T: for<'de> Deserialize<'de>>(
        &self,
        name: &str,
    ) -> Result<Option<T>, AcmeError> {
        match self.raw(name).await? {
            Some(bytes) => Ok(parse_json(name, &bytes)),
            None => Ok(None),
        }
    }

    async fn write_json(&self, name: &str, value: &impl Serialize) -> Result<(), AcmeError> {
        match &self.backing {
            Backing::Dir(dir) => write_json(dir, name, value),
            Backing::Shared(store) => {
                let text = serde_json::to_vec_pretty(value)
                    .map_err(|e| AcmeError::Storage(format!("cannot serialize {name}: {e}")))?;
                store
                    .put_acme_file(name.to_owned(), text)
                    .await
                    .map_err(|e| AcmeError::Storage(format!("{name}: {e}")))
            }
        }
    }

    async fn seal(&self, purpose: ServicePurpose, secret: &[u8]) -> Result<String, AcmeError> {
        let sealed = self
            .keys
            .client()
            .service_seal(purpose, secret)
            .await
            .map_err(AcmeError::Keyservice)?;
        Ok(B64.encode(sealed))
    }

    async fn unseal(
        &self,
        purpose: ServicePurpose,
        sealed: &str,
    ) -> Result<Zeroizing<Vec<u8>>, AcmeError> {
        let sealed = B64
            .decode(sealed)
            .map_err(|e| AcmeError::Storage(format!("sealed value is not base64: {e}")))?;
        self.keys
            .client()
            .service_unseal(purpose, &sealed)
            .await
            .map_err(AcmeError::Keyservice)
    }

    /// The stored account for `directory_url`, unsealed (the credentials JSON).
    pub(super) async fn load_account(
        &self,
        directory_url: &str,
    ) -> Result<Option<(String, Zeroizing<Vec<u8>>)>, AcmeError> {
        let Some(file) = self.read_json::<AccountFile>("account.json").await? else {
            return Ok(None);
        };
        if file.version != FORMAT_VERSION || file.directory_url != directory_url {
            return Ok(None);
        }
        let credentials = self
            .unseal(ServicePurpose::AcmeAccount, &file.sealed_credentials)
            .await?;
        Ok(Some((file.account_uri, credentials)))
    }

    pub(super) async fn save_account(
        &self,
        directory_url: &str,
        account_uri: &str,
        credentials_json: &[u8],
    ) -> Result<(), AcmeError> {
        let file = AccountFile {
            version: FORMAT_VERSION,
            directory_url: directory_url.to_owned(),
            account_uri: account_uri.to_owned(),
            sealed_credentials: self
                .seal(ServicePurpose::AcmeAccount, credentials_json)
                .await?,
        };
        self.write_json("account.json", &file).await
    }

    /// Drops the stored account (the CA no longer knows it).
    pub(super) async fn forget_account(&self) -> Result<(), AcmeError> {
        match &self.backing {
            Backing::Dir(dir) => match std::fs::remove_file(dir.join("account.json")) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(AcmeError::Storage(format!("account.json: {e}"))),
            },
            Backing::Shared(store) => store
                .remove_acme_file("account.json".to_owned())
                .await
                .map_err(|e| AcmeError::Storage(format!("account.json: {e}"))),
        }
    }

    /// The stored certificate (for any domains): its chain and keyservice key index.
    pub(super) async fn stored_certificate(&self) -> Result<Option<CertificateFile>, AcmeError> {
        self.read_versioned::<CertificateFile>("certificate.json", CERT_VERSION)
            .await
    }

    /// The stored certificate for exactly `domains`: its chain and keyservice key index.
    pub(super) async fn load_certificate(
        &self,
        domains: &[String],
    ) -> Result<Option<(String, u32)>, AcmeError> {
        Ok(self
            .stored_certificate()
            .await?
            .filter(|file| file.domains == domains)
            .map(|file| (file.chain_pem, file.key_index)))
    }

    pub(super) async fn save_certificate(
        &self,
        domains: &[String],
        chain_pem: &str,
        key_index: u32,
    ) -> Result<(), AcmeError> {
        let file = CertificateFile {
            version: CERT_VERSION,
            domains: domains.to_vec(),
            chain_pem: chain_pem.to_owned(),
            key_index,
        };
        self.write_json("certificate.json", &file).await
    }
}

impl SealedStore {
    /// The keyservice TLS key index the next certificate will use.
    pub(super) async fn load_next_key(&self) -> Result<Option<u32>, AcmeError> {
        Ok(self
            .read_versioned::<NextKeyFile>("next-key.json", NEXT_KEY_VERSION)
            .await?
            .map(|file| file.key_index))
    }

    pub(super) async fn save_next_key(&self, key_index: u32) -> Result<(), AcmeError> {
        let file = NextKeyFile {
            version: NEXT_KEY_VERSION,
            key_index,
        };
        self.write_json("next-key.json", &file).await
    }
}

/// A document, or `None` (logged) when it does not parse: it is replaced, never misread.
fn parse_json<T: for<'de> Deserialize<'de>>(name: &str, bytes: &[u8]) -> Option<T> {
    match serde_json::from_slice(bytes) {
        Ok(value) => Some(value),
        Err(err) => {
            tracing::warn!(name, error = %err, "ignoring an unreadable ACME state document");
            None
        }
    }
}

/// Writes `name` in `dir` atomically: temp file, fsync, rename, fsync the directory.
fn write_json(dir: &Path, name: &str, value: &impl Serialize) -> Result<(), AcmeError> {
    use std::io::Write as _;
    let err =
        |what: &Path, e: std::io::Error| AcmeError::Storage(format!("{}: {e}", what.display()));
    std::fs::create_dir_all(dir).map_err(|e| err(dir, e))?;
    let text = serde_json::to_vec_pretty(value)
        .map_err(|e| AcmeError::Storage(format!("cannot serialize {name}: {e}")))?;
    let tmp = dir.join(format!(".{name}.tmp"));
    let target = dir.join(name);
    {
        let mut file = std::fs::File::create(&tmp).map_err(|e| err(&tmp, e))?;
        file.write_all(&text).map_err(|e| err(&tmp, e))?;
        file.sync_all().map_err(|e| err(&tmp, e))?;
    }
    std::fs::rename(&tmp, &target).map_err(|e| err(&target, e))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_paths_are_distinct_and_stable() {
        assert_ne!(account_seal_path().0, cert_seal_path().0);
        assert!(is_service_path(&account_seal_path()) && is_service_path(&cert_seal_path()));
        assert!(!is_service_path(&DerivationPath([7; 32])));
        assert_eq!(account_seal_path().0, account_seal_path().0);
    }

    /// The certificate documents name keyservice key indexes, never a key; the formats
    /// that held a sealed front-end key are not read (a new certificate replaces them).
    #[tokio::test]
    async fn stored_documents_hold_no_private_key_and_older_formats_are_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let store = SealedStore::new(
            Backing::Dir(dir.path().to_owned()),
            Keys::new(
                &dir.path().join("no.sock"),
                std::time::Duration::from_secs(1),
            ),
        );
        let domains = vec!["a.test".to_owned()];
        std::fs::write(
            dir.path().join("certificate.json"),
            r#"{"version":2,"domains":["a.test"],"chain_pem":"c","sealed_key":"AAAA"}"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join("next-key.json"),
            r#"{"version":1,"sealed_key":"AAAA"}"#,
        )
        .unwrap();
        assert!(store.load_certificate(&domains).await.unwrap().is_none());
        assert!(store.load_next_key().await.unwrap().is_none());

        store.save_certificate(&domains, "chain", 4).await.unwrap();
        store.save_next_key(5).await.unwrap();
        assert_eq!(
            store.load_certificate(&domains).await.unwrap(),
            Some(("chain".to_owned(), 4))
        );
        assert!(
            store
                .load_certificate(&["b.test".to_owned()])
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(store.load_next_key().await.unwrap(), Some(5));
        for (name, fields) in [
            (
                "certificate.json",
                vec!["chain_pem", "domains", "key_index", "version"],
            ),
            ("next-key.json", vec!["key_index", "version"]),
        ] {
            let text = std::fs::read_to_string(dir.path().join(name)).unwrap();
            assert!(
                !text.contains("sealed") && !text.contains("PRIVATE KEY"),
                "{text}"
            );
            let value: serde_json::Value = serde_json::from_str(&text).unwrap();
            let mut keys: Vec<&str> = value
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            keys.sort_unstable();
            assert_eq!(keys, fields, "{name}");
        }
    }

    #[tokio::test]
    async fn unknown_versions_and_garbage_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let store = SealedStore::new(
            Backing::Dir(dir.path().to_owned()),
            Keys::new(
                &dir.path().join("no.sock"),
                std::time::Duration::from_secs(1),
            ),
        );
        std::fs::write(dir.path().join("x.json"), b"not json").unwrap();
        assert!(
            store
                .read_json::<AccountFile>("x.json")
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            store
                .read_json::<AccountFile>("missing.json")
                .await
                .unwrap()
                .is_none()
        );
        let file = AccountFile {
            version: FORMAT_VERSION,
            directory_url: "u".into(),
            account_uri: "a".into(),
            sealed_credentials: "s".into(),
        };
        store.write_json("a.json", &file).await.unwrap();
        let back = store
            .read_json::<AccountFile>("a.json")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(back.account_uri, "a");
    }
}
