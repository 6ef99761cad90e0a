//! `appliance deploy --rpc URL [--config FILE]`: deploys `AccountConfig` and
//! `AppGovernance`, authorizes the API payers, and records the result in the configuration
//! file (its other contents, comments included, are kept).
//!
//! Signer: keyservice's admin payer (reached through `keyservice.socket`, or started as a
//! child when `keyservice.spawn` is set), or — when the environment variable
//! [`DEPLOYER_KEY_ENV`] holds a private key — that key. The signer becomes the owner of
//! both contracts unless `--account-config-owner` / `--governance-owner` hand them on.
//!
//! API payers: keyservice's, or the ones given ([`ApiPayers::Given`]: `--api-payer`, or
//! none with `--without-api-payers`). With a deployer key and given payers no keyservice is
//! needed at all: the first deployment on dstack happens before the CVM (and its
//! keyservice, whose payers are new) exists; its payers are authorized afterwards with
//! `setApiPayer`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use alloy::primitives::Address;
use alloy::signers::local::PrivateKeySigner;
use keyservice_api::Payer;

use crate::chain::contract_deployment::{
    DeployError, DeployPlan, DeploySigner, Deployed, deploy_contracts,
};
use crate::chain::{ChainClient, ChainError};
use crate::config::{Config, ConfigError};

/// The environment variable that may hold the deployer's private key (hex). It is read
/// from the environment only (never a command-line argument, which other users of the
/// machine can see) and never written anywhere.
pub const DEPLOYER_KEY_ENV: &str = "DEPLOYER_PRIVATE_KEY";

/// What `appliance deploy` was asked to do.
#[derive(Debug, Clone)]
pub struct DeployArgs {
    /// The chain's JSON-RPC URL (written to `chain.rpc_url`).
    pub rpc_url: String,
    /// The configuration file to update (created if missing).
    pub config_path: PathBuf,
    /// The chain id the endpoint must report (default: `chain.chain_id` of the file).
    pub chain_id: Option<u64>,
    /// Deploy even if the file already names contracts.
    pub force: bool,
    pub account_config_owner: Option<Address>,
    pub governance_owner: Option<Address>,
    /// Which addresses become `AccountConfig` API payers.
    pub api_payers: ApiPayers,
    /// How long to wait for each transaction.
    pub receipt_timeout: Duration,
}

/// Which addresses `appliance deploy` makes `AccountConfig` API payers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ApiPayers {
    /// keyservice's API payers (asked through `keyservice.socket`).
    #[default]
    FromKeyservice,
    /// These (possibly none): keyservice is not asked.
    Given(Vec<Address>),
}

/// Why `appliance deploy` failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeployCmdError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(
        "{path} already names the contracts (AccountConfig {account_config}); pass --force to deploy new ones and replace them"
    )]
    AlreadyConfigured {
        path: PathBuf,
        account_config: String,
    },
    #[error("cannot reach the chain RPC at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error(
        "wrong chain: {url} reports chain id {found}, expected {expected} (set chain.chain_id or pass --chain-id)"
    )]
    WrongChain {
        url: String,
        expected: u64,
        found: u64,
    },
    #[error("{DEPLOYER_KEY_ENV} is not a valid private key (64 hex digits)")]
    BadDeployerKey,
    #[error("keyservice: {0}")]
    Keyservice(String),
    #[error(transparent)]
    Deploy(#[from] DeployError),
    #[error(transparent)]
    Chain(#[from] ChainError),
    #[error("cannot write {path}: {reason}")]
    Write { path: PathBuf, reason: String },
}

/// Loads the configuration, deploys, and updates the file. The keyservice child started
/// for a `keyservice.spawn` configuration is stopped before returning.
pub async fn run(args: &DeployArgs) -> Result<Deployed, DeployCmdError> {
    let existing = args
        .config_path
        .exists()
        .then_some(args.config_path.as_path());
    let mut config = Config::load(existing)?;
    if let Some(id) = args.chain_id {
        config.chain.chain_id = id;
    }
    if !args.force {
        let named = config
            .chain
            .account_config_address
            .or(config.chain.governance_address);
        if let Some(address) = named {
            return Err(DeployCmdError::AlreadyConfigured {
                path: args.config_path.clone(),
                account_config: address.to_checksum(None),
            });
        }
    }
    let signer = match std::env::var(DEPLOYER_KEY_ENV) {
        Ok(hex) => DeploySigner::Local(
            hex.trim()
                .parse::<PrivateKeySigner>()
                .map_err(|_| DeployCmdError::BadDeployerKey)?,
        ),
        Err(_) => DeploySigner::Payer(Payer::Admin),
    };

    let deployed = match (&signer, &args.api_payers) {
        // Nothing to ask keyservice: a client that never dials (it dials on first use).
        (DeploySigner::Local(_), ApiPayers::Given(payers)) => {
            let keys = keyservice_api::KeyClient::new(&config.keyservice.socket);
            deploy_with(&config, &keys, signer, payers.clone(), args).await?
        }
        _ => {
            let (keys, supervisor) = crate::startup::start_keyservice(&config, &Default::default())
                .await
                .map_err(|e| DeployCmdError::Keyservice(e.to_string()))?;
            let result = async {
                let payers = match &args.api_payers {
                    ApiPayers::Given(payers) => payers.clone(),
                    ApiPayers::FromKeyservice => keys
                        .client()
                        .payers()
                        .await
                        .map_err(|e| DeployCmdError::Keyservice(e.to_string()))?
                        .api
                        .iter()
                        .map(|a| Address::from(a.0))
                        .collect(),
                };
                deploy_with(&config, keys.client(), signer, payers, args).await
            }
            .await;
            if let Some(supervisor) = supervisor {
                supervisor.shutdown().await;
            }
            result?
        }
    };
    write_chain_settings(
        &args.config_path,
        &args.rpc_url,
        config.chain.chain_id,
        &deployed,
    )?;
    Ok(deployed)
}

async fn deploy_with(
    config: &Config,
    keys: &keyservice_api::KeyClient,
    signer: DeploySigner,
    api_payers: Vec<Address>,
    args: &DeployArgs,
) -> Result<Deployed, DeployCmdError> {
    let client = ChainClient::new(
        &args.rpc_url,
        config.chain.chain_id,
        keys.clone(),
        Duration::from_millis(config.chain.request_timeout_ms),
    )?;
    match client.check_chain_id().await {
        Ok(()) => {}
        Err(ChainError::WrongChain { expected, found }) => {
            return Err(DeployCmdError::WrongChain {
                url: args.rpc_url.clone(),
                expected,
                found,
            });
        }
        Err(err) => {
            return Err(DeployCmdError::Unreachable {
                url: args.rpc_url.clone(),
                reason: err.to_string(),
            });
        }
    }
    let plan = DeployPlan {
        api_payers,
        account_config_owner: args.account_config_owner,
        governance_owner: args.governance_owner,
        receipt_timeout: args.receipt_timeout,
    };
    Ok(deploy_contracts(&client, signer, &plan).await?)
}

/// Sets `chain.rpc_url`, `chain_id`, both addresses and `deploy_block` in the TOML file at
/// `path` (created if missing), keeping everything else as written. The new file must load
/// as a valid configuration; it replaces the old one atomically.
pub fn write_chain_settings(
    path: &Path,
    rpc_url: &str,
    chain_id: u64,
    deployed: &Deployed,
) -> Result<(), DeployCmdError> {
    let write_err = |reason: String| DeployCmdError::Write {
        path: path.to_owned(),
        reason,
    };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(write_err(e.to_string())),
    };
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        DeployCmdError::Config(ConfigError::Syntax {
            path: path.to_owned(),
            message: e.to_string(),
        })
    })?;
    let chain = doc
        .entry("chain")
        .or_insert_with(toml_edit::table)
        .as_table_like_mut()
        .ok_or_else(|| write_err("`chain` is not a table".into()))?;
    let int = |n: u64| {
        i64::try_from(n)
            .map(toml_edit::value)
            .map_err(|_| write_err(format!("{n} does not fit a TOML integer")))
    };
    chain.insert("rpc_url", toml_edit::value(rpc_url));
    chain.insert("chain_id", int(chain_id)?);
    chain.insert(
        "account_config_address",
        toml_edit::value(deployed.account_config.to_checksum(None)),
    );
    chain.insert(
        "governance_address",
        toml_edit::value(deployed.governance.to_checksum(None)),
    );
    chain.insert("deploy_block", int(deployed.deploy_block)?);
    let new_text = doc.to_string();

    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| write_err(e.to_string()))?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "appliance.toml".into());
    let tmp = dir.join(format!(".{file_name}.deploy-tmp"));
    std::fs::write(&tmp, &new_text).map_err(|e| write_err(e.to_string()))?;
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&tmp, meta.permissions());
    }
    // Refuse to leave a file `serve` would not load (the environment is not applied: the
    // file must stand on its own).
    if let Err(err) = Config::load_with_env(Some(&tmp), std::iter::empty()) {
        let _ = std::fs::remove_file(&tmp);
        return Err(write_err(format!("the updated file would not load: {err}")));
    }
    std::fs::rename(&tmp, path).map_err(|e| write_err(e.to_string()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn deployed() -> Deployed {
        Deployed {
            account_config: Address::repeat_byte(0x11),
            governance: Address::repeat_byte(0x22),
            deploy_block: 7,
            deployer: Address::repeat_byte(0x33),
            account_config_owner: Address::repeat_byte(0x33),
            governance_owner: Address::repeat_byte(0x33),
        }
    }

    #[test]
    fn keeps_the_rest_of_the_file_and_sets_the_chain_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.toml");
        let original = "# my appliance\nlisten = \"127.0.0.1:9443\" # port\n\n[chain]\n# the chain\nchain_name = \"base\"\nconfirmations = 5\n\n[log]\nfilter = \"debug\"\n";
        std::fs::write(&path, original).unwrap();
        write_chain_settings(&path, "http://127.0.0.1:1", 84532, &deployed()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# my appliance\nlisten = \"127.0.0.1:9443\" # port\n"));
        assert!(text.contains("# the chain\nchain_name = \"base\"\nconfirmations = 5\n"));
        assert!(text.contains("[log]\nfilter = \"debug\"\n"), "{text}");
        let config = Config::load_with_env(Some(&path), std::iter::empty()).unwrap();
        assert_eq!(config.chain.rpc_url.as_deref(), Some("http://127.0.0.1:1"));
        assert_eq!(config.chain.chain_id, 84532);
        assert_eq!(
            config.chain.account_config_address,
            Some(Address::repeat_byte(0x11))
        );
        assert_eq!(
            config.chain.governance_address,
            Some(Address::repeat_byte(0x22))
        );
        assert_eq!(config.chain.deploy_block, 7);
        assert_eq!(config.chain.confirmations, 5);
        assert_eq!(config.log.filter, "debug");
    }

    #[test]
    fn creates_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("new.toml");
        write_chain_settings(&path, "http://x:1", 31337, &deployed()).unwrap();
        let config = Config::load_with_env(Some(&path), std::iter::empty()).unwrap();
        assert_eq!(config.chain.deploy_block, 7);
    }

    #[test]
    fn refuses_a_file_that_is_not_toml() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, "listen = \n").unwrap();
        assert!(write_chain_settings(&path, "http://x:1", 1, &deployed()).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "listen = \n");
    }
}
