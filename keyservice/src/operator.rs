//! The operator's day-2 tasks that reach keyservice: resealing the root for an upgrade
//! (`OperatorReseal`) and the state files to back up (`StateFiles`).
//!
//! A reseal is on the path to the root, so keyservice decides it alone, from what it was
//! started with: the request must be signed by an operator named in its own measured
//! configuration (`[operator] addresses`), name this app and this compose hash, be fresh
//! and unused ([`operator_auth::Verifier`], with keyservice's own replay memory), ask for
//! exactly the target of the call, and the governance contract of the same configuration
//! must allow the target. The front end only carries the request: a front end that is
//! compromised cannot reseal the root by itself, and even a reseal it relays can only
//! produce a blob that opens under an allowed compose hash.
//!
//! The sealed root resealed is keyservice's own file (the one it opened at start), or in
//! shared-root mode the copy the front end keeps; either must open under the measured
//! compose hash and be the running root (same root id), so nothing but the running root
//! is ever rewrapped.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keyservice_api::ComposeHash;
use keyservice_api::protocol::{
    MAX_FRAME_LEN, MAX_STATE_FILE_LEN, MAX_STATE_FILES, OPERATOR_SIGNATURE_LEN, Request, Resealed,
    Response, SEALED_ROOT_LEN, StateFile,
};
use operator_auth::{Action, Binding, Verifier};
use ring::rand::SystemRandom;

use crate::derive::KeyDeriver;
use crate::ops::{KeyOps, OpError};
use crate::payer_policy;
use crate::platform::Platform;
use crate::policy::ComposeHashPolicy;
use crate::root::{self, SEALED_FILE_NAME};
use crate::sealing::{SealError, SealedRoot, write_new_file};

/// What keyservice needs for operator tasks, fixed at start.
pub struct OperatorDesk {
    verifier: Verifier,
    /// Decides whether a target compose hash is allowed; without one (why not: no
    /// governance contract, no RPC URL), no reseal.
    policy: Result<Arc<dyn ComposeHashPolicy + Send + Sync>, &'static str>,
    platform: Arc<dyn Platform>,
    state_dir: PathBuf,
    /// The sealed file the root was opened from; `None` in shared-root mode.
    own_file: Option<PathBuf>,
    measured: ComposeHash,
}

impl OperatorDesk {
    pub fn new(
        operators: Vec<operator_auth::Address>,
        policy: Result<Arc<dyn ComposeHashPolicy + Send + Sync>, &'static str>,
        platform: Arc<dyn Platform>,
        state_dir: PathBuf,
        own_file: Option<PathBuf>,
        measured: ComposeHash,
    ) -> Self {
        Self {
            verifier: Verifier::new(operators),
            policy,
            platform,
            state_dir,
            own_file,
            measured,
        }
    }

    /// `OperatorReseal` (see the module docs).
    pub async fn reseal(
        self: &Arc<Self>,
        ops: &KeyOps,
        target: ComposeHash,
        signature: [u8; OPERATOR_SIGNATURE_LEN],
        request: &[u8],
        source: Option<[u8; SEALED_ROOT_LEN]>,
    ) -> Result<Resealed, OpError> {
        let text = std::str::from_utf8(request)
            .map_err(|_| OpError::InvalidArgument("the operator request is not UTF-8"))?;
        let app = app_id(ops).await?;
        let binding = Binding {
            app,
            compose_hash: self.measured.0,
        };
        let authorized = self
            .verifier
            .verify_now(text, &signature, &binding)
            .map_err(|e| OpError::OperatorRefused(e.to_string()))?;
        if authorized.request.action != (Action::Reseal { target: target.0 }) {
            return Err(OpError::OperatorRefused(format!(
                "the operator signed {:?}, not a reseal to {target}",
                authorized.request.action.name()
            )));
        }
        let policy = self.policy.clone().map_err(|why| {
            OpError::OperatorRefused(format!(
                "{why}: keyservice cannot tell whether the target is allowed"
            ))
        })?;
        let source = match (source, &self.own_file) {
            (Some(bytes), None) => Source::Shared(bytes),
            (None, Some(path)) => Source::File(path.clone()),
            (None, None) => {
                return Err(OpError::InvalidArgument(
                    "shared-root mode: the request must carry the shared sealed root",
                ));
            }
            (Some(_), Some(_)) => {
                return Err(OpError::InvalidArgument(
                    "this keyservice reseals its own root file; send no sealed root",
                ));
            }
        };
        let desk = Arc::clone(self);
        let running = ops.root_id();
        let operator = authorized.operator;
        tokio::task::spawn_blocking(move || {
            desk.reseal_blocking(policy.as_ref(), target, source, running, operator)
        })
        .await
        .map_err(|_| OpError::Internal("the reseal task failed"))?
    }

    fn reseal_blocking(
        &self,
        policy: &(dyn ComposeHashPolicy + Send + Sync),
        target: ComposeHash,
        source: Source,
        running: keyservice_api::RootId,
        operator: operator_auth::Address,
    ) -> Result<Resealed, OpError> {
        match policy.is_allowed(&target) {
            Ok(true) => {}
            Ok(false) => {
                return Err(OpError::OperatorRefused(format!(
                    "{} does not allow compose hash {target}: add it first (addComposeHash)",
                    policy.describe()
                )));
            }
            Err(e) => {
                return Err(OpError::OperatorRefused(format!(
                    "cannot ask {} whether compose hash {target} is allowed: {e}",
                    policy.describe()
                )));
            }
        }
        let current = self
            .platform
            .sealing_key(&self.measured)
            .map_err(platform_error)?;
        let root = match &source {
            Source::Shared(bytes) => root::open_shared(bytes, &current, &self.measured),
            Source::File(path) => SealedRoot::read(path).and_then(|sealed| {
                if sealed.compose_hash != self.measured {
                    return Err(SealError::ComposeHashMismatch {
                        path: path.clone(),
                        expected: self.measured,
                        found: sealed.compose_hash,
                    });
                }
                sealed.unseal(&current, path)
            }),
        }
        .map_err(|e| OpError::OperatorRefused(format!("the sealed root does not open: {e}")))?;
        drop(current);
        if KeyDeriver::new(&root).root_id()? != running {
            return Err(OpError::OperatorRefused(
                "the sealed root given is not the root this keyservice runs".to_owned(),
            ));
        }
        let target_key = self.platform.sealing_key(&target).map_err(platform_error)?;
        let rng = SystemRandom::new();
        let fresh = SealedRoot::seal(&root, target, &target_key, &rng)
            .map_err(|_| OpError::Internal("sealing failed"))?;
        let (sealed, file) = match source {
            Source::Shared(_) => (fresh.to_bytes(), None),
            Source::File(_) => {
                let path = root::sealed_file_for(&self.state_dir, &target);
                let bytes = match write_new_file(&path, &fresh.to_bytes(), &rng) {
                    Ok(()) => fresh.to_bytes(),
                    // Resealed before (a retried request): the file must hold this root.
                    Err(SealError::AlreadyExists { .. }) => {
                        let existing = SealedRoot::read(&path)
                            .and_then(|s| s.unseal(&target_key, &path).map(|r| (s, r)))
                            .map_err(|e| {
                                OpError::OperatorRefused(format!(
                                    "{} exists and does not open for {target}: {e}; move it away",
                                    file_name(&path)
                                ))
                            })?;
                        if KeyDeriver::new(&existing.1).root_id()? != running {
                            return Err(OpError::OperatorRefused(format!(
                                "{} exists and holds another root; move it away",
                                file_name(&path)
                            )));
                        }
                        existing.0.to_bytes()
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "cannot write the resealed root");
                        return Err(OpError::Internal("cannot write the resealed root"));
                    }
                };
                (bytes, Some(file_name(&path)))
            }
        };
        // Read back under the target key, so a bad blob is caught now, not at the upgrade.
        let check = root::open_shared(&sealed, &target_key, &target)
            .map_err(|_| OpError::Internal("the resealed root does not open"))?;
        if KeyDeriver::new(&check).root_id()? != running {
            return Err(OpError::Internal("the resealed root is another root"));
        }
        tracing::info!(
            operator = %format!("0x{}", hex::encode(operator)),
            from = %self.measured,
            to = %target,
            file = file.as_deref().unwrap_or("(shared root: kept by the appliance)"),
            "resealed the root at an operator's request"
        );
        Ok(Resealed {
            sealed,
            root_id: running,
            file,
        })
    }

    /// `StateFiles`: `root.sealed*` and the payer-contract record, by name; nothing else
    /// in the directory (the dev platform's secret, temporary files) is ever returned.
    pub fn state_files(&self) -> Result<Vec<StateFile>, OpError> {
        let entries = std::fs::read_dir(&self.state_dir).map_err(|e| {
            tracing::error!(error = %e, dir = %self.state_dir.display(), "cannot list the state directory");
            OpError::Internal("cannot list the state directory")
        })?;
        let mut files = Vec::new();
        let mut total = 2usize;
        for entry in entries {
            let entry = entry.map_err(|_| OpError::Internal("cannot list the state directory"))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !is_backed_up(&name) {
                continue;
            }
            let path = entry.path();
            // Regular files only: a symlink planted here is not followed.
            let meta = std::fs::symlink_metadata(&path)
                .map_err(|_| OpError::Internal("cannot read a state file"))?;
            if !meta.is_file() {
                continue;
            }
            if meta.len() > MAX_STATE_FILE_LEN as u64 {
                return Err(OpError::InvalidArgument(
                    "a state file is larger than a StateFiles answer carries",
                ));
            }
            let bytes =
                std::fs::read(&path).map_err(|_| OpError::Internal("cannot read a state file"))?;
            total += 2 + name.len() + 4 + bytes.len();
            files.push(StateFile { name, bytes });
        }
        if files.len() > MAX_STATE_FILES || total > MAX_FRAME_LEN - 64 {
            return Err(OpError::InvalidArgument(
                "the state directory holds more sealed roots than one answer carries; \
                 remove the ones of compose hashes no longer deployed",
            ));
        }
        files.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(files)
    }
}

/// What keyservice reads for operator tasks from the appliance's measured configuration
/// (`--chain-config`): `[operator] addresses`, `[chain] governance_address` and
/// `[chain] rpc_url` (the RPC URL is usually a secret, given in the environment as
/// `APPLIANCE_CHAIN__RPC_URL`, which wins).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OperatorSettings {
    pub operators: Vec<operator_auth::Address>,
    pub governance: Option<String>,
    pub rpc_url: Option<String>,
}

/// What is wrong with the operator settings of the configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OperatorSettingsError {
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    #[error("{0} is not a table")]
    NotATable(&'static str),
    #[error("operator.addresses must be an array of addresses (\"0x\" + 40 hex digits)")]
    AddressesNotAnArray,
    #[error("operator.addresses: {0:?} is not an address (\"0x\" + 40 hex digits)")]
    BadAddress(String),
    #[error("{0} must be a string")]
    NotAString(&'static str),
}

/// Why there is no governance policy: no contract configured.
pub const NO_GOVERNANCE: &str = "no governance contract is configured ([chain] governance_address of the measured configuration)";
/// Why there is no governance policy: a contract but no RPC URL.
pub const NO_RPC_URL: &str = "keyservice has no RPC URL to read the governance contract with ([chain] rpc_url, or APPLIANCE_CHAIN__RPC_URL in its environment)";

/// Reads [`OperatorSettings`] from the configuration `text`; other keys are ignored.
pub fn settings_from_toml(text: &str) -> Result<OperatorSettings, OperatorSettingsError> {
    let root: toml::Table = text.parse()?;
    let section = |name: &'static str| match root.get(name) {
        None => Ok(None),
        Some(toml::Value::Table(t)) => Ok(Some(t)),
        Some(_) => Err(OperatorSettingsError::NotATable(name)),
    };
    let mut settings = OperatorSettings::default();
    if let Some(operator) = section("operator")? {
        match operator.get("addresses") {
            None => {}
            Some(toml::Value::Array(items)) => {
                for item in items {
                    let toml::Value::String(text) = item else {
                        return Err(OperatorSettingsError::AddressesNotAnArray);
                    };
                    settings.operators.push(parse_address(text)?);
                }
            }
            Some(_) => return Err(OperatorSettingsError::AddressesNotAnArray),
        }
    }
    if let Some(chain) = section("chain")? {
        let string = |key: &str, name: &'static str| match chain.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(OperatorSettingsError::NotAString(name)),
        };
        settings.governance = string("governance_address", "chain.governance_address")?;
        settings.rpc_url = string("rpc_url", "chain.rpc_url")?;
    }
    Ok(settings)
}

/// `0x` + 40 hex digits.
pub fn parse_address(text: &str) -> Result<operator_auth::Address, OperatorSettingsError> {
    let bad = || OperatorSettingsError::BadAddress(text.chars().take(60).collect());
    let digits = text.strip_prefix("0x").ok_or_else(bad)?;
    let mut out = [0u8; 20];
    hex::decode_to_slice(digits, &mut out).map_err(|_| bad())?;
    Ok(out)
}

enum Source {
    Shared([u8; SEALED_ROOT_LEN]),
    File(PathBuf),
}

/// Whether a state-directory file belongs in a backup.
fn is_backed_up(name: &str) -> bool {
    let sealed = name == SEALED_FILE_NAME
        || name
            .strip_prefix(SEALED_FILE_NAME)
            .and_then(|rest| rest.strip_prefix('.'))
            .is_some_and(|prefix| {
                prefix.len() == 16 && prefix.bytes().all(|b| b.is_ascii_hexdigit())
            });
    sealed || name == payer_policy::STATE_FILE
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn platform_error(e: crate::platform::PlatformError) -> OpError {
    tracing::error!(error = %e, "the platform did not give a sealing key");
    OpError::Internal("the platform did not give a sealing key")
}

/// The app id this deployment's evidence names (the quote provider's `Info`).
async fn app_id(ops: &KeyOps) -> Result<[u8; 20], OpError> {
    match ops.handle(Request::AttestationInfo).await? {
        Response::Info(info) => crate::attest::parse_app_id(&info.app_id)
            .map_err(|_| OpError::Internal("the deployment's app id is not 40 hex digits")),
        _ => Err(OpError::Internal("unexpected answer to AttestationInfo")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn reads_the_operator_settings_of_the_measured_configuration() {
        let text = format!(
            "[operator]\naddresses = [\"0x{}\", \"0x{}\"]\n[chain]\ngovernance_address = \"0x{}\"\nchain_id = 1\n",
            "aB".repeat(20),
            "01".repeat(20),
            "22".repeat(20)
        );
        let s = settings_from_toml(&text).unwrap();
        assert_eq!(s.operators, vec![[0xab; 20], [0x01; 20]]);
        assert_eq!(s.governance, Some(format!("0x{}", "22".repeat(20))));
        assert_eq!(s.rpc_url, None);
        assert_eq!(settings_from_toml("").unwrap(), OperatorSettings::default());
        for bad in [
            "[operator]\naddresses = \"0x00\"\n",
            "[operator]\naddresses = [\"0x1234\"]\n",
            "[operator]\naddresses = [1]\n",
            "operator = 1\n",
        ] {
            assert!(settings_from_toml(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_sealed_roots_and_the_payer_record_are_backed_up() {
        for name in [
            "root.sealed",
            "root.sealed.0123456789abcdef",
            "payer-contracts.json",
        ] {
            assert!(is_backed_up(name), "{name}");
        }
        for name in [
            "dev-secret",
            "root.sealed.tmp",
            ".root.sealed.0123456789abcdef.tmp-1-abcdef",
            "root.sealed.0123456789abcdef0",
            "payer-contracts.json.bak",
        ] {
            assert!(!is_backed_up(name), "{name}");
        }
    }
}
