//! Who may run the day-2 tasks (`[operator]`). Read by `crate::operator` and, from the same
//! measured file, by keyservice (`keyservice run --chain-config`), which checks a reseal
//! request itself.

use alloy::primitives::Address;
use serde::{Deserialize, Serialize};

/// The operators of this deployment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OperatorConfig {
    /// Ethereum addresses whose signed requests (EIP-191) run the operator endpoints
    /// (`/operator/v1/…`: status, export-root, backup-database, reseal). Empty: every
    /// operator request is refused (403).
    pub addresses: Vec<Address>,
}
