//! ACME's section of the configuration (`[acme]`): the CA, the domains, the challenge
//! and the renewal schedule. Read by `crate::acme`.

use std::net::SocketAddr;
use std::path::PathBuf;

use appliance_domain::settings::InvalidSetting;
use serde::{Deserialize, Serialize};

/// How ACME proves control of the domains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AcmeChallenge {
    /// TLS-ALPN-01 (RFC 8737), answered by the HTTPS listener itself (`acme-tls/1`).
    #[serde(rename = "tls-alpn-01")]
    TlsAlpn01,
    /// HTTP-01, answered by a small plain-HTTP listener on `http01_listen`.
    #[serde(rename = "http-01")]
    Http01,
}

/// A certificate from an ACME CA for `domains`, renewed before it expires. Active when
/// `directory_url` is set; it then replaces `tls.mode` (a self-signed certificate is
/// served only until the first one is issued).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AcmeConfig {
    /// The ACME directory (e.g. `https://acme-v02.api.letsencrypt.org/directory`).
    pub directory_url: Option<String>,
    /// DNS names the certificate is for (the first is the evidence's `cert-<domain>.pem`).
    pub domains: Vec<String>,
    /// Account contacts, e.g. `mailto:ops@example.com`.
    pub contact: Vec<String>,
    pub challenge: AcmeChallenge,
    /// http-01: where the plain-HTTP challenge listener binds (the CA connects to port 80).
    pub http01_listen: SocketAddr,
    /// PEM CA certificates to trust for the directory instead of the public roots
    /// (a test CA such as Pebble's).
    pub ca_bundle: Option<PathBuf>,
    /// Renew when this fraction of the certificate's lifetime has passed.
    pub renew_at: f64,
    /// First retry delay after a failure; doubled after each further failure.
    pub retry_initial_ms: u64,
    /// Longest retry delay.
    pub retry_max_ms: u64,
    /// Time limit of one request to the CA.
    pub request_timeout_ms: u64,
    /// Time allowed for the CA to validate the challenges and issue.
    pub order_timeout_ms: u64,
}

impl Default for AcmeConfig {
    fn default() -> Self {
        Self {
            directory_url: None,
            domains: Vec::new(),
            contact: Vec::new(),
            challenge: AcmeChallenge::TlsAlpn01,
            http01_listen: SocketAddr::from(([0, 0, 0, 0], 80)),
            ca_bundle: None,
            renew_at: 2.0 / 3.0,
            retry_initial_ms: 5_000,
            retry_max_ms: 3_600_000,
            request_timeout_ms: 30_000,
            order_timeout_ms: 120_000,
        }
    }
}

impl AcmeConfig {
    /// True when an ACME directory is configured.
    pub fn enabled(&self) -> bool {
        self.directory_url.is_some()
    }

    /// Checks an enabled section: domains to ask for, a renewal point inside the
    /// lifetime, a retry schedule that can grow.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if !self.enabled() {
            return Ok(());
        }
        if self.domains.is_empty() {
            return Err(InvalidSetting::new("acme.directory_url needs acme.domains"));
        }
        if !(self.renew_at > 0.0 && self.renew_at < 1.0) {
            return Err(InvalidSetting::new(
                "acme.renew_at must be between 0 and 1 (exclusive)",
            ));
        }
        if self.retry_initial_ms == 0 || self.retry_max_ms < self.retry_initial_ms {
            return Err(InvalidSetting::new(
                "acme.retry_initial_ms must be positive and at most acme.retry_max_ms",
            ));
        }
        Ok(())
    }
}
