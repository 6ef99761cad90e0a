//! Attestation: the quote provider behind `/attestation` and `/info`, and the evidence
//! files under `/evidences/` that bind the served TLS certificate to a hardware quote.
//!
//! Whenever the served certificate changes (ACME issuance or renewal; once at start for a
//! self-signed or file certificate) the files are rebuilt:
//!
//! * `cert-<domain>.pem`: the served chain (leaf first);
//! * `acme-account.json`: `{"uri": <ACME account URI>}` (ACME only);
//! * `sha256sum.txt`: `<sha256 hex>  <name>` for each file above, as `sha256sum` prints;
//! * `quote.json`: a quote whose report_data = SHA-256(sha256sum.txt) ‖ 32 zero bytes;
//! * `index.html`: the listing, linking every file.
//!
//! Until the first set is built the listing is empty; a set is replaced as a whole.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use evidence::{DstackProvider, QuoteProvider, SimulatedProvider, TsmProvider};
use sha2::{Digest, Sha256};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::acme::IssuedCert;
use crate::config::{Config, QuoteProviderKind};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttestError {
    #[error("attestation: cannot read the compose file {path}: {source}")]
    Compose {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("attestation: {0}")]
    Config(String),
}

/// One evidence file.
#[derive(Debug, Clone)]
pub struct EvidenceFile {
    pub bytes: Vec<u8>,
    pub content_type: &'static str,
}

/// A consistent set of evidence files, by name.
#[derive(Debug, Clone, Default)]
pub struct EvidenceSet {
    pub files: BTreeMap<String, EvidenceFile>,
}

impl EvidenceSet {
    /// The `/evidences/` listing.
    pub fn index_html(&self) -> String {
        let mut html = String::from(
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Evidences</title></head>\n<body>\n<h1>Evidences</h1>\n<ul>\n",
        );
        for name in self.files.keys() {
            let name = html_escape(name);
            html.push_str(&format!("<li><a href=\"{name}\">{name}</a></li>\n"));
        }
        html.push_str("</ul>\n</body></html>\n");
        html
    }
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `sha256sum` output for `files` (two spaces: text mode), in name order.
pub fn sha256sum(files: &BTreeMap<String, EvidenceFile>) -> String {
    files
        .iter()
        .map(|(name, file)| format!("{}  {name}\n", hex::encode(Sha256::digest(&file.bytes))))
        .collect()
}

/// Builds the evidence set for `cert`, with a quote from `provider`.
pub async fn build(
    cert: &IssuedCert,
    provider: &QuoteProvider,
) -> Result<EvidenceSet, evidence::ProviderError> {
    let domain = cert
        .domains
        .first()
        .map(String::as_str)
        .unwrap_or("localhost");
    let mut files = BTreeMap::new();
    files.insert(
        format!("cert-{domain}.pem"),
        EvidenceFile {
            bytes: cert.chain_pem.as_bytes().to_vec(),
            content_type: "application/x-pem-file",
        },
    );
    if !cert.account_uri.is_empty() {
        let account = serde_json::json!({ "uri": cert.account_uri });
        files.insert(
            "acme-account.json".into(),
            EvidenceFile {
                bytes: account.to_string().into_bytes(),
                content_type: "application/json",
            },
        );
    }
    let sums = sha256sum(&files);
    let quote = provider
        .quote(evidence::report_data_for(sums.as_bytes()))
        .await?;
    files.insert(
        "sha256sum.txt".into(),
        EvidenceFile {
            bytes: sums.into_bytes(),
            content_type: "text/plain; charset=utf-8",
        },
    );
    files.insert(
        "quote.json".into(),
        EvidenceFile {
            bytes: quote.evidence_quote_json().to_string().into_bytes(),
            content_type: "application/json",
        },
    );
    Ok(EvidenceSet { files })
}

/// The provider and the current evidence set; cheap to clone.
#[derive(Clone)]
pub struct Attestation {
    provider: QuoteProvider,
    current: Arc<RwLock<Arc<EvidenceSet>>>,
}

impl Attestation {
    /// The quote provider `config` names.
    pub fn from_config(config: &Config) -> Result<Self, AttestError> {
        let att = &config.attestation;
        let compose = || -> Result<Vec<u8>, AttestError> {
            let path = att
                .compose_file
                .clone()
                .or_else(|| config.keyservice.compose_file.clone())
                .ok_or_else(|| {
                    AttestError::Config(
                        "attestation.compose_file (or keyservice.compose_file) is needed".into(),
                    )
                })?;
            std::fs::read(&path).map_err(|source| AttestError::Compose { path, source })
        };
        let app_id = || -> Result<Option<[u8; 20]>, AttestError> {
            let text = match (&att.app_id, config.chain.governance_address) {
                (Some(text), _) => text.trim_start_matches("0x").to_owned(),
                (None, Some(address)) => hex::encode(address.as_slice()),
                (None, None) => return Ok(None),
            };
            let bytes = hex::decode(&text)
                .ok()
                .and_then(|b| <[u8; 20]>::try_from(b).ok())
                .ok_or_else(|| {
                    AttestError::Config("attestation.app_id must be 20 bytes of hex".into())
                })?;
            Ok(Some(bytes))
        };
        let provider: QuoteProvider = match att.provider {
            QuoteProviderKind::Dstack => DstackProvider::new(&att.dstack_socket).into(),
            QuoteProviderKind::Tsm => {
                let mut p = TsmProvider::new(&att.tsm_dir, compose()?);
                if let Some(id) = app_id()? {
                    p = p.with_app_id(id);
                }
                p.into()
            }
            QuoteProviderKind::Simulated => {
                let mut p = SimulatedProvider::new(compose()?);
                if let Some(id) = app_id()? {
                    p = p.with_app_id(id);
                }
                p.into()
            }
        };
        Ok(Self {
            provider,
            current: Arc::new(RwLock::new(Arc::new(EvidenceSet::default()))),
        })
    }

    pub fn provider(&self) -> &QuoteProvider {
        &self.provider
    }

    /// The current evidence set.
    pub fn evidence(&self) -> Arc<EvidenceSet> {
        match self.current.read() {
            Ok(set) => Arc::clone(&set),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    fn replace(&self, set: EvidenceSet) {
        match self.current.write() {
            Ok(mut current) => *current = Arc::new(set),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(set),
        }
    }

    /// Rebuilds the evidence whenever `certs` publishes a certificate (retrying a
    /// failing provider with backoff); stopped by aborting the task.
    pub fn follow(&self, mut certs: watch::Receiver<Option<Arc<IssuedCert>>>) -> JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            // The value present at start counts as a change.
            let mut pending = true;
            loop {
                if !pending && certs.changed().await.is_err() {
                    return;
                }
                pending = false;
                let Some(cert) = certs.borrow_and_update().clone() else {
                    continue;
                };
                let mut delay = Duration::from_millis(500);
                loop {
                    match build(&cert, &this.provider).await {
                        Ok(set) => {
                            this.replace(set);
                            tracing::info!("evidence files rebuilt for the served certificate");
                            break;
                        }
                        Err(err) => {
                            tracing::warn!(error = %err, "cannot build the evidence files; retrying");
                            tokio::select! {
                                () = tokio::time::sleep(delay) => {}
                                changed = certs.changed() => {
                                    if changed.is_err() {
                                        return;
                                    }
                                    pending = true;
                                    break;
                                }
                            }
                            delay = (delay * 2).min(Duration::from_secs(60));
                        }
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert() -> IssuedCert {
        IssuedCert {
            domains: vec!["a.test".into()],
            chain_pem: "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n".into(),
            account_uri: "https://ca.test/acct/1".into(),
        }
    }

    #[tokio::test]
    async fn evidence_binds_the_checksums_into_the_quote() {
        let provider: QuoteProvider = SimulatedProvider::new(b"{\"name\":\"t\"}".to_vec()).into();
        let set = build(&cert(), &provider).await.unwrap();
        let names: Vec<&str> = set.files.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "acme-account.json",
                "cert-a.test.pem",
                "quote.json",
                "sha256sum.txt"
            ]
        );
        let sums = String::from_utf8(set.files["sha256sum.txt"].bytes.clone()).unwrap();
        let expected_cert = hex::encode(Sha256::digest(cert().chain_pem.as_bytes()));
        assert!(
            sums.contains(&format!("{expected_cert}  cert-a.test.pem\n")),
            "{sums}"
        );
        assert_eq!(sums.lines().count(), 2);
        let account: serde_json::Value =
            serde_json::from_slice(&set.files["acme-account.json"].bytes).unwrap();
        assert_eq!(account["uri"], "https://ca.test/acct/1");
        let quote: serde_json::Value =
            serde_json::from_slice(&set.files["quote.json"].bytes).unwrap();
        let report_data = quote["report_data"].as_str().unwrap();
        let expected = format!(
            "{}{}",
            hex::encode(Sha256::digest(sums.as_bytes())),
            "0".repeat(64)
        );
        assert_eq!(report_data.trim_start_matches("0x"), expected);
        let html = set.index_html();
        for name in names {
            assert!(html.contains(&format!("href=\"{name}\"")), "{html}");
        }
    }
}
