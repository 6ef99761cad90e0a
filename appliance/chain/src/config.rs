//! The chain's section of the appliance's configuration (`[chain]`): where
//! administrative state is mirrored and how the relayer and the indexer follow it. The
//! appliance's `config` module composes it with the other sections; this crate owns its
//! keys, defaults and checks.

use std::path::PathBuf;
use std::time::Duration;

use alloy::primitives::Address;
use appliance_domain::settings::InvalidSetting;
use serde::{Deserialize, Serialize};

use crate::FollowerSettings;

/// The settlement chain: where administrative state is mirrored (`AccountConfig`) and
/// where ChainSecured accounts are administered by their owners.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChainConfig {
    /// JSON-RPC URL of the chain. Unset: no chain; API-mode writes wait in the outbox
    /// until one is configured. Never returned by the API.
    pub rpc_url: Option<String>,
    /// The chain id; the RPC endpoint must report the same one.
    pub chain_id: u64,
    /// Shown by `get_node_chain_config`.
    pub chain_name: String,
    pub testnet: bool,
    /// The native token's symbol.
    pub token: String,
    /// The `AccountConfig` contract (written by `appliance deploy`).
    pub account_config_address: Option<Address>,
    /// The `AppGovernance` contract (written by `appliance deploy`).
    pub governance_address: Option<Address>,
    /// The block `AccountConfig` was deployed in: where the indexer starts.
    pub deploy_block: u64,
    /// Blocks an event must be buried under before the indexer applies it.
    pub confirmations: u64,
    /// How often the relayer and the indexer poll the chain.
    pub poll_interval_ms: u64,
    /// Outbox entries mirrored per transaction (`AccountConfig.multicall`).
    pub batch_size: usize,
    /// Time limit of one JSON-RPC request.
    pub request_timeout_ms: u64,
    /// Development only: an anvil binary that `appliance dev` starts (on a free loopback
    /// port), funds the payers on and deploys the contracts to.
    pub dev_anvil: Option<PathBuf>,
}

impl Default for ChainConfig {
    fn default() -> Self {
        Self {
            rpc_url: None,
            chain_id: 31337,
            chain_name: "anvil".into(),
            testnet: true,
            token: "ETH".into(),
            account_config_address: None,
            governance_address: None,
            deploy_block: 0,
            confirmations: 2,
            poll_interval_ms: 1000,
            batch_size: 32,
            request_timeout_ms: 10_000,
            dev_anvil: None,
        }
    }
}

impl ChainConfig {
    /// How the chain followers run, from these settings.
    pub fn follower_settings(&self) -> FollowerSettings {
        FollowerSettings {
            poll: Duration::from_millis(self.poll_interval_ms),
            batch_size: self.batch_size,
            deploy_block: self.deploy_block,
            confirmations: self.confirmations,
        }
    }

    /// Checks that the followers can run with these settings.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if self.batch_size == 0 || self.poll_interval_ms == 0 {
            return Err(InvalidSetting::new(
                "chain.batch_size and chain.poll_interval_ms must be positive",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn followers_run_with_the_section_s_settings() {
        let config = ChainConfig {
            poll_interval_ms: 250,
            batch_size: 7,
            deploy_block: 12,
            confirmations: 0,
            ..ChainConfig::default()
        };
        let settings = config.follower_settings();
        assert_eq!(settings.poll, Duration::from_millis(250));
        assert_eq!(settings.batch_size, 7);
        assert_eq!(settings.deploy_block, 12);
        assert_eq!(settings.confirmations, 0);
        assert!(config.validate().is_ok());
    }

    #[test]
    fn a_followers_loop_that_cannot_progress_is_refused() {
        for config in [
            ChainConfig {
                batch_size: 0,
                ..ChainConfig::default()
            },
            ChainConfig {
                poll_interval_ms: 0,
                ..ChainConfig::default()
            },
        ] {
            let err = config.validate().unwrap_err();
            assert!(err.0.contains("chain.batch_size"), "{err}");
        }
    }
}
