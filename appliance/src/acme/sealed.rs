//! What ACME keeps: the account and the current certificate, in `<data_dir>/acme/` or,
//! for replicas on PostgreSQL, in the shared store (`acme_files`: the same documents by
//! name, so every replica serves the same account and certificate).
//!
//! The invariant: no document holds a private key, sealed or not. Certificate keys are
//! keyservice TLS keys (derived from the root by index, so replicas sharing the root share
//! them); a document names only the index. The ACME account key is keyservice's ACME
//! account key (derived from the root; see `jws.rs` next to this file): a document names
//! only the account URL and the key's public thumbprint. Neither key is ever in this
//! process.
//!
//! Formats (JSON):
//! * `account.json` (`"version": 3`): `directory_url`, `account_uri` (the account's URL,
//!   the JWS `kid`), `key_thumbprint` (RFC 7638 thumbprint of keyservice's account key the
//!   account belongs to; an account of another key, e.g. after the root changed, is not
//!   used: the account of keyservice's key is looked up or registered instead).
//!   Version 2 held `sealed_credentials` (base64 of the keyservice `ServiceSeal`
//!   ciphertext of the ACME library's credentials, a key the front end held): it is read
//!   only to move that account onto keyservice's key (`rollover.rs` next to this file; the
//!   account URL stays), then replaced by version 3. Version 1 sealed under
//!   wallet-namespace paths, which keyservice now refuses: ignored, a new account is
//!   registered.
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
use keyservice_api::ServicePurpose;
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use super::AcmeError;
use crate::keyservice_client::Keys;

/// `account.json`'s format (version 2 held sealed credentials, see the module docs).
const FORMAT_VERSION: u32 = 3;
/// The `account.json` format that held the sealed account key.
const LEGACY_ACCOUNT_VERSION: u32 = 2;

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct AccountFile {
    pub version: u32,
    pub directory_url: String,
    pub account_uri: String,
    pub key_thumbprint: String,
}

/// `account.json` version 2: the account key sealed by keyservice.
#[derive(Debug, Deserialize)]
struct LegacyAccountFile {
    directory_url: String,
    account_uri: String,
    sealed_credentials: String,
}

/// The stored ACME account (of the configured directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum StoredAccount {
    /// Format 3: the account of keyservice's key with thumbprint `key_thumbprint`.
    Keyservice {
        account_uri: String,
        key_thumbprint: String,
    },
    /// Format 2: an account whose key the front end held, sealed by keyservice.
    Sealed {
        account_uri: String,
        sealed_credentials: String,
    },
}

impl StoredAccount {
    pub(super) fn account_uri(&self) -> &str {
        match self {
            Self::Keyservice { account_uri, .. } | Self::Sealed { account_uri, .. } => account_uri,
        }
    }
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

/// The documents, and the keyservice handle that opens what older formats sealed.
pub(super) struct AcmeStore {
    backing: Backing,
    keys: Keys,
}

impl AcmeStore {
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

    /// The credentials JSON of a format-2 account (the ACME library's, holding the key the
    /// front end used to hold), opened by keyservice; `None` if it does not open (not
    /// base64, or sealed on another root). Used once, to move that account onto
    /// keyservice's key.
    pub(super) async fn unseal_legacy_credentials(
        &self,
        sealed: &str,
    ) -> Result<Option<Zeroizing<Vec<u8>>>, AcmeError> {
        let Ok(sealed) = B64.decode(sealed) else {
            tracing::warn!("the sealed ACME account credentials are not base64");
            return Ok(None);
        };
        match self
            .keys
            .client()
            .service_unseal(ServicePurpose::AcmeAccount, &sealed)
            .await
        {
            Ok(credentials) => Ok(Some(credentials)),
            Err(err) if err.is_unavailable() => Err(AcmeError::Keyservice(err)),
            Err(err) => {
                tracing::warn!(error = %err, "the sealed ACME account credentials do not open");
                Ok(None)
            }
        }
    }

    /// The stored account for `directory_url` (an account of another directory, or a
    /// document of another format, is `None`).
    pub(super) async fn load_account(
        &self,
        directory_url: &str,
    ) -> Result<Option<StoredAccount>, AcmeError> {
        let Some(bytes) = self.raw("account.json").await? else {
            return Ok(None);
        };
        let Some(Versioned { version }) = parse_json("account.json", &bytes) else {
            return Ok(None);
        };
        let stored = match version {
            FORMAT_VERSION => parse_json::<AccountFile>("account.json", &bytes)
                .filter(|file| file.directory_url == directory_url)
                .map(|file| StoredAccount::Keyservice {
                    account_uri: file.account_uri,
                    key_thumbprint: file.key_thumbprint,
                }),
            LEGACY_ACCOUNT_VERSION => parse_json::<LegacyAccountFile>("account.json", &bytes)
                .filter(|file| file.directory_url == directory_url)
                .map(|file| StoredAccount::Sealed {
                    account_uri: file.account_uri,
                    sealed_credentials: file.sealed_credentials,
                }),
            other => {
                tracing::info!(
                    found = other,
                    expected = FORMAT_VERSION,
                    "ignoring an ACME account document of an older format"
                );
                None
            }
        };
        Ok(stored)
    }

    /// Stores the account of keyservice's key (replacing any older document).
    pub(super) async fn save_account(
        &self,
        directory_url: &str,
        account_uri: &str,
        key_thumbprint: &str,
    ) -> Result<(), AcmeError> {
        let file = AccountFile {
            version: FORMAT_VERSION,
            directory_url: directory_url.to_owned(),
            account_uri: account_uri.to_owned(),
            key_thumbprint: key_thumbprint.to_owned(),
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

impl AcmeStore {
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

    fn store(dir: &Path) -> AcmeStore {
        AcmeStore::new(
            Backing::Dir(dir.to_owned()),
            Keys::new(
                &dir.join("no.sock"),
                std::time::Duration::from_secs(1),
                Default::default(),
            ),
        )
    }

    /// The top-level keys of a stored JSON document, sorted (a document's field set,
    /// independent of the order serde wrote them in).
    fn sorted_keys(value: &serde_json::Value) -> Vec<&str> {
        let mut keys: Vec<&str> = value
            .as_object()
            .expect("a stored document is a JSON object")
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        keys
    }

    /// The certificate documents name keyservice key indexes, never a key; the formats
    /// that held a sealed front-end key are not read (a new certificate replaces them).
    #[tokio::test]
    async fn stored_documents_hold_no_private_key_and_older_formats_are_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
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
            assert_eq!(sorted_keys(&value), fields, "{name}");
        }
    }

    /// `account.json` names the account and the thumbprint of keyservice's key, nothing
    /// secret; the format that held sealed credentials is read as such (to be moved onto
    /// keyservice's key), older formats, other directories and garbage are ignored.
    #[tokio::test]
    async fn the_account_document_holds_no_key_and_older_formats_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let path = dir.path().join("account.json");
        assert_eq!(
            store.load_account("https://ca.test/dir").await.unwrap(),
            None
        );
        for garbage in [&b"not json"[..], br#"{"version":3}"#, br#"{"version":1,"directory_url":"https://ca.test/dir","account_uri":"a","sealed_credentials":"AAAA"}"#] {
            std::fs::write(&path, garbage).unwrap();
            assert_eq!(store.load_account("https://ca.test/dir").await.unwrap(), None);
        }
        std::fs::write(
            &path,
            br#"{"version":2,"directory_url":"https://ca.test/dir","account_uri":"https://ca.test/acct/1","sealed_credentials":"AAAA"}"#,
        )
        .unwrap();
        assert_eq!(
            store.load_account("https://ca.test/dir").await.unwrap(),
            Some(StoredAccount::Sealed {
                account_uri: "https://ca.test/acct/1".into(),
                sealed_credentials: "AAAA".into(),
            })
        );
        assert_eq!(
            store.load_account("https://other.test/dir").await.unwrap(),
            None
        );

        // Saving replaces the sealed document with one that names no key.
        store
            .save_account("https://ca.test/dir", "https://ca.test/acct/1", "thumb")
            .await
            .unwrap();
        let stored = store
            .load_account("https://ca.test/dir")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            stored,
            StoredAccount::Keyservice {
                account_uri: "https://ca.test/acct/1".into(),
                key_thumbprint: "thumb".into(),
            }
        );
        assert_eq!(stored.account_uri(), "https://ca.test/acct/1");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains("sealed") && !text.contains("key_pkcs8"),
            "{text}"
        );
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            sorted_keys(&value),
            ["account_uri", "directory_url", "key_thumbprint", "version"]
        );
        assert_eq!(value["version"], 3);
        assert_eq!(
            store.load_account("https://other.test/dir").await.unwrap(),
            None
        );

        store.forget_account().await.unwrap();
        assert_eq!(
            store.load_account("https://ca.test/dir").await.unwrap(),
            None
        );
        store.forget_account().await.unwrap();
    }

    /// Sealed credentials that do not open (not base64) are not an error: the caller
    /// registers keyservice's key instead. An unreachable keyservice is an error (retried).
    #[tokio::test]
    async fn legacy_credentials_that_do_not_open_are_dropped_and_an_absent_keyservice_is_retried() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        assert!(
            store
                .unseal_legacy_credentials("not base64!")
                .await
                .unwrap()
                .is_none()
        );
        // Too short to be a sealed value: refused before keyservice is asked.
        assert!(
            store
                .unseal_legacy_credentials("AAAA")
                .await
                .unwrap()
                .is_none()
        );
        assert!(matches!(
            store.unseal_legacy_credentials(&B64.encode([0u8; 40])).await,
            Err(AcmeError::Keyservice(e)) if e.is_unavailable()
        ));
    }
}
