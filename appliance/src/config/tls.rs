//! TLS's section of the configuration (`[tls]`): the certificate served until (or
//! instead of) an ACME one. Read by `crate::tls` and `crate::startup`.

use std::path::PathBuf;

use appliance_domain::settings::InvalidSetting;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TlsMode {
    /// A self-signed certificate generated at start for `hostnames` (development).
    SelfSigned,
    /// A certificate chain and key read from PEM files.
    Files,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    pub mode: TlsMode,
    /// Names (DNS names or IP addresses) the certificate is for.
    pub hostnames: Vec<String>,
    /// PEM certificate chain, leaf first (mode `files`).
    pub cert_file: Option<PathBuf>,
    /// PEM private key (mode `files`).
    pub key_file: Option<PathBuf>,
}

impl Default for TlsConfig {
    fn default() -> Self {
        Self {
            mode: TlsMode::SelfSigned,
            hostnames: vec!["localhost".into(), "127.0.0.1".into()],
            cert_file: None,
            key_file: None,
        }
    }
}

impl TlsConfig {
    /// Checks that the certificate can be had: names for it, and both files in mode
    /// `files`.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if self.mode == TlsMode::Files && (self.cert_file.is_none() || self.key_file.is_none()) {
            return Err(InvalidSetting::new(
                "tls.mode = \"files\" needs tls.cert_file and tls.key_file",
            ));
        }
        if self.hostnames.is_empty() {
            return Err(InvalidSetting::new(
                "tls.hostnames must name at least one host",
            ));
        }
        Ok(())
    }
}
