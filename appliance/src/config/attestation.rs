//! The attestation section of the configuration (`[attestation]`): keyservice's quote
//! provider settings (read from this same measured file) and the appliance's quote
//! refresh. Read by `crate::attest` and `crate::startup`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Where keyservice gets quotes and the deployment's identity from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QuoteProviderKind {
    /// The dstack guest agent (keyservice's `--agent-socket`).
    Dstack,
    /// Linux configfs-tsm (`tsm_dir`) with keyservice's compose file.
    Tsm,
    /// Simulated TDX quotes from the local compose file: development only, NOT
    /// confidential (`evidence verify` refuses them without `--allow-simulated`).
    Simulated,
}

/// The quote provider behind `/attestation`, `/info` and the `/evidences/` files.
///
/// The appliance never talks to a quote provider: it asks keyservice for quotes over
/// report data keyservice builds itself. These keys are keyservice's settings, read from
/// this same (measured) file by `keyservice run --chain-config`, and passed by
/// `appliance dev` to the keyservice child it starts; the appliance itself ignores them,
/// except `quote_refresh_secs`, which is the appliance's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AttestationConfig {
    pub provider: QuoteProviderKind,
    /// The appliance's: `/attestation` serves a quote at most this old (and `/info` a
    /// body at most this old), so unauthenticated GETs do not each cost a hardware
    /// quote. 0 asks keyservice on every request.
    pub quote_refresh_secs: u64,
    /// tsm: the configfs-tsm report directory.
    pub tsm_dir: PathBuf,
    /// tsm, simulated: the app id (40 hex digits). Default: `chain.governance_address`
    /// when set (so verifiers find the governance contract at 0x‖app_id).
    pub app_id: Option<String>,
}

impl Default for AttestationConfig {
    fn default() -> Self {
        Self {
            provider: QuoteProviderKind::Dstack,
            quote_refresh_secs: 60,
            tsm_dir: PathBuf::from("/sys/kernel/config/tsm/report"),
            app_id: None,
        }
    }
}

impl QuoteProviderKind {
    /// keyservice's spelling (`--quote-provider`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Dstack => "dstack",
            Self::Tsm => "tsm",
            Self::Simulated => "simulated",
        }
    }
}
