//! How the appliance reaches keyservice (`[keyservice]`). Read by
//! `crate::keyservice_client` and `crate::startup`.

use std::path::PathBuf;

use appliance_domain::settings::InvalidSetting;
use serde::{Deserialize, Serialize};

/// How the appliance reaches the key service, the only process holding private keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KeyserviceConfig {
    /// The keyservice's Unix socket. In production keyservice runs as its own
    /// container/user and the appliance connects to this socket. At start the appliance
    /// waits for it (`start_wait_ms`); if it goes down later, key operations answer 503
    /// until it is back.
    pub socket: PathBuf,
    /// Start keyservice as a supervised child process on the `dev` platform
    /// (development only: its sealing is NOT confidential).
    pub spawn: bool,
    /// spawn: the keyservice binary. Default: `keyservice` next to the appliance binary.
    pub binary: Option<PathBuf>,
    /// spawn: the compose file whose SHA-256 seals the root.
    pub compose_file: Option<PathBuf>,
    /// spawn: where keyservice keeps its sealed root and dev secret.
    /// Default: `<data_dir>/keyservice`.
    pub state_dir: Option<PathBuf>,
    /// spawn: the dev platform's secret (default: `<state_dir>/dev-secret`). Replicas
    /// of one dev deployment share it, as dstack replicas share the KMS's app key.
    pub dev_secret: Option<PathBuf>,
    /// Time allowed for one key operation.
    pub request_timeout_ms: u64,
    /// How long start waits for keyservice to answer (it may be a container that starts
    /// after this one) before giving up with an error. The root must be confirmed before
    /// the appliance serves anything, so it does not serve until then.
    pub start_wait_ms: u64,
}

impl Default for KeyserviceConfig {
    fn default() -> Self {
        Self {
            socket: PathBuf::from("/run/keyservice/keyservice.sock"),
            spawn: false,
            binary: None,
            compose_file: None,
            state_dir: None,
            dev_secret: None,
            request_timeout_ms: 10_000,
            start_wait_ms: 60_000,
        }
    }
}

impl KeyserviceConfig {
    /// Checks that a spawned keyservice has the compose file it seals to.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if self.spawn && self.compose_file.is_none() {
            return Err(InvalidSetting::new(
                "keyservice.spawn needs keyservice.compose_file",
            ));
        }
        Ok(())
    }
}
