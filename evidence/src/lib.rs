//! Attestation evidence for the appliance: TDX quotes, dstack event logs, quote providers,
//! and the verifier behind `evidence verify`.
//!
//! * [`quote`] — TDX quote v4/v5 parsing.
//! * [`event_log`] — event logs, digests recomputed, RTMR replay, identity extraction.
//! * [`tdvf`], [`kernel`], [`os_image`] — the OS measurements: MRTD from TDX firmware,
//!   RTMR1/RTMR2 from kernel, command line and initrd, dstack OS images and the policy
//!   file of accepted measurements.
//! * [`rtmr0`] — RTMR0's firmware events recomputed from the firmware and the memory size
//!   (all but QEMU's ACPI tables), and an event log's RTMR0 events held to them.
//! * [`verify`] — DCAP verification (dcap-qvl) at an explicit time, and the status policy.
//! * [`collateral`] — collateral from a file or a PCCS.
//! * [`gateway`] — dstack-gateway's routing of a name (the `_dstack-app-address` TXT
//!   record), for the `gateway-route` check.
//! * [`provider`] — where quotes come from: dstack guest agent, configfs-tsm, simulated.
//! * [`bundle`] / [`check`] — the published evidence and the verifier's checks.
//! * [`cli`] — the `evidence` command.
//!
//! `README.md` in this crate is the manual. Without the default `verifier` feature only the
//! parsers (`quote`, `event_log`, `simulated`, `tdvf`, `kernel`, `os_image`, `rtmr0`) are built, which is what the fuzzers use;
//! the `providers` feature adds [`provider`] alone (what keyservice links).
//!
//! May depend on: `chain-contracts` only with the default `verifier` feature (the
//! governance check reads the chain); the parsers and the providers need no workspace
//! crate. Never on `keyservice`, `appliance` or `appliance-client`: they use it, and a
//! verifier must build without them.

pub mod event_log;
pub mod kernel;
mod le;
pub mod os_image;
pub mod quote;
pub mod rtmr0;
pub mod simulated;
pub mod tdvf;

#[cfg(feature = "verifier")]
pub mod bundle;
#[cfg(feature = "verifier")]
pub mod caa;
#[cfg(feature = "verifier")]
pub mod check;
#[cfg(feature = "verifier")]
pub mod cli;
#[cfg(feature = "verifier")]
pub mod collateral;
#[cfg(feature = "verifier")]
mod dns;
#[cfg(feature = "verifier")]
pub mod gateway;
#[cfg(feature = "verifier")]
pub mod governance;
#[cfg(feature = "providers")]
pub mod provider;
#[cfg(feature = "verifier")]
pub mod verify;

#[cfg(feature = "providers")]
pub use provider::{
    DstackProvider, Info, Measurements, ProviderError, Quote, QuoteProvider, SimulatedProvider,
    TsmProvider,
};

use sha2::{Digest, Sha256};

/// SHA-256 of app-compose.json bytes.
pub fn compose_hash_bytes(app_compose: &[u8]) -> [u8; 32] {
    Sha256::digest(app_compose).into()
}

/// Hex SHA-256 of app-compose.json bytes (the compose hash).
pub fn compose_hash(app_compose: &[u8]) -> String {
    hex::encode(compose_hash_bytes(app_compose))
}

/// Report data binding `bytes` (rule 3: the bytes of `sha256sum.txt`): SHA-256, zero-padded
/// to 64 bytes.
pub fn report_data_for(bytes: &[u8]) -> [u8; 64] {
    let mut out = [0u8; 64];
    out[..32].copy_from_slice(&Sha256::digest(bytes));
    out
}

/// Report data binding `bytes` (the bytes of `sha256sum.txt`) and a verifier's `nonce`:
/// SHA-256(bytes) ‖ nonce, the fresh form of [`report_data_for`] (`?nonce=` on
/// `/evidences/quote.json` and `/attestation`).
pub fn fresh_report_data_for(bytes: &[u8], nonce: &[u8; 32]) -> [u8; 64] {
    let mut out = report_data_for(bytes);
    out[32..].copy_from_slice(nonce);
    out
}
