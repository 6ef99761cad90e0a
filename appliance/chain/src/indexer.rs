//! The indexer: follows `AccountConfig` events from a persisted cursor, `confirmations`
//! blocks behind the head, and applies those of ChainSecured accounts to the local store
//! (accounts, usage keys, groups, actions, wallets), so their usage keys work for
//! execution and their wallets for actions. Each block range is applied together with
//! the cursor in one transaction: nothing is applied twice or skipped, across restarts.
//!
//! A `WalletRegistered` event is applied only if keyservice derives exactly the
//! registered address from the registered path, and never takes over a wallet that
//! belongs to another account; a wallet or usage key minted for a wallet owner joins only
//! the account that owner administers (`store::chain_apply`). A usage key's on-chain
//! `expiration` is kept with it: past it, the key authenticates nothing.

use appliance_domain::backoff::Backoff;
use std::time::Duration;

use alloy::primitives::{Address, B256, U256};
use alloy::providers::Provider;
use alloy::rpc::types::{Filter, Log};
use alloy::sol_types::SolEventInterface;
use chain_contracts::IAccountConfig::IAccountConfigEvents as E;
use chain_contracts::ops::{MirrorOp, MirrorPermissions, UsageKeyPermissions};
use keyservice_api::DerivationPath;

use super::client::rpc_error;
use super::{ChainClient, ChainError};
use appliance_store::{AccountMode, ChainChange, ChainEvent, Store, WalletIdentity};

/// The cursor's name in the store, per contract: a contract deployed anew (a dev chain
/// that lost its state, a redeployment) is read from its own deploy block, never from a
/// cursor left by another contract. Applying an event twice is harmless.
pub fn cursor_name(contract: Address) -> String {
    format!("account_config:{contract:#x}")
}
/// Most blocks read per `eth_getLogs`.
const MAX_RANGE: u64 = 2000;
const MAX_BACKOFF: Duration = Duration::from_secs(30);

pub struct Indexer {
    pub store: Store,
    pub client: ChainClient,
    pub contract: Address,
    pub deploy_block: u64,
    pub confirmations: u64,
    pub poll: Duration,
    /// Where the indexer reports how far it has come.
    pub telemetry: std::sync::Arc<dyn crate::ChainTelemetry>,
}

fn b256(v: U256) -> B256 {
    B256::from(v.to_be_bytes::<32>())
}

/// A usage key's on-chain `expiration` (Unix seconds) as the store keeps it: 0 is never;
/// a time beyond what the store can hold is as good as never.
fn expiry(expiration: U256) -> Option<i64> {
    if expiration.is_zero() {
        return None;
    }
    Some(i64::try_from(expiration).unwrap_or(i64::MAX))
}

fn group_id(v: U256) -> Option<u64> {
    u64::try_from(v).ok()
}

fn ids(list: &[U256]) -> Vec<u64> {
    list.iter().filter_map(|v| u64::try_from(*v).ok()).collect()
}

impl Indexer {
    pub async fn run(&self) {
        let mut backoff = Backoff::new(self.poll, MAX_BACKOFF);
        loop {
            match self.step().await {
                Ok(true) => backoff.reset(),
                Ok(false) => {
                    backoff.reset();
                    tokio::time::sleep(self.poll).await;
                }
                Err(err) => {
                    let retry_in = backoff.next_delay();
                    tracing::warn!(error = %err, ?retry_in, "chain indexer waiting");
                    tokio::time::sleep(retry_in).await;
                }
            }
        }
    }

    /// Reads and applies one block range; `Ok(true)` when more ranges are ready.
    pub async fn step(&self) -> Result<bool, ChainError> {
        let store_err =
            |e: appliance_store::StoreError| ChainError::Unavailable(format!("store: {e}"));
        let read_at = self
            .store
            .chain_cursor(cursor_name(self.contract))
            .await
            .map_err(store_err)?;
        let from = read_at.unwrap_or(self.deploy_block);
        let head = self.client.block_number().await?;
        self.telemetry
            .indexer_progress(head, from.saturating_sub(1));
        let Some(safe) = head.checked_sub(self.confirmations) else {
            return Ok(false);
        };
        if from > safe {
            return Ok(false);
        }
        let to = safe.min(from + MAX_RANGE - 1);
        let filter = Filter::new()
            .address(self.contract)
            .from_block(from)
            .to_block(to);
        let logs = self
            .client
            .provider()
            .get_logs(&filter)
            .await
            .map_err(rpc_error)?;
        let mut events = Vec::with_capacity(logs.len());
        for log in &logs {
            if let Some(event) = self.event(log).await? {
                events.push(event);
            }
        }
        let applied = events.len();
        match self
            .store
            .apply_chain_events(events, cursor_name(self.contract), read_at, to + 1)
            .await
        {
            Ok(()) => {}
            // Another replica applied this range first (it led while this one was
            // reading): read again from where it left the cursor.
            Err(appliance_store::StoreError::Conflict(why)) => {
                tracing::info!(%why, "chain events already applied elsewhere");
                return Ok(true);
            }
            Err(err) => return Err(store_err(err)),
        }
        self.telemetry.indexer_progress(head, to);
        if applied > 0 {
            tracing::debug!(from, to, events = applied, "chain events applied");
        }
        Ok(to < safe)
    }

    /// The store's view of one log; `None` for events the store does not need.
    async fn event(&self, log: &Log) -> Result<Option<ChainEvent>, ChainError> {
        let block = log.block_number.unwrap_or_default();
        let decoded = match E::decode_raw_log(log.topics(), &log.data().data) {
            Ok(decoded) => decoded,
            Err(err) => {
                tracing::warn!(block, error = %err, "undecodable AccountConfig log; skipped");
                return Ok(None);
            }
        };
        let op = |api_key_hash: U256, op: MirrorOp| {
            Some(ChainEvent {
                api_key_hash: b256(api_key_hash),
                change: ChainChange::Op(op),
                block,
            })
        };
        Ok(match decoded {
            E::AccountCreated(e) => Some(ChainEvent {
                api_key_hash: b256(e.apiKeyHash),
                change: ChainChange::Account {
                    admin: e.admin,
                    mode: if e.managed {
                        AccountMode::Api
                    } else {
                        AccountMode::ChainSecured
                    },
                    name: e.name,
                    description: e.description,
                },
                block,
            }),
            E::AccountConverted(e) => Some(ChainEvent {
                api_key_hash: b256(e.apiKeyHash),
                change: ChainChange::Converted {
                    new_admin: e.newAdmin,
                },
                block,
            }),
            E::UsageApiKeySet(e) => {
                let permissions: MirrorPermissions =
                    UsageKeyPermissions::from(e.permissions).map_sets(|list| ids(&list));
                Some(ChainEvent {
                    api_key_hash: b256(e.apiKeyHash),
                    change: ChainChange::UsageKey {
                        usage_key_hash: b256(e.usageKeyHash),
                        name: e.name,
                        description: e.description,
                        permissions,
                        expires_at: expiry(e.expiration),
                    },
                    block,
                })
            }
            E::UsageApiKeyMetadataUpdated(e) => op(
                e.apiKeyHash,
                MirrorOp::UpdateUsageApiKeyMetadata {
                    usage_key_hash: b256(e.usageKeyHash),
                    name: e.name,
                    description: e.description,
                },
            ),
            E::UsageApiKeyRemoved(e) => op(
                e.apiKeyHash,
                MirrorOp::RemoveUsageApiKey {
                    usage_key_hash: b256(e.usageKeyHash),
                },
            ),
            E::GroupAdded(e) => group_id(e.groupId).and_then(|g| {
                op(
                    e.apiKeyHash,
                    MirrorOp::SetGroup {
                        new: true,
                        group_id: g,
                        name: e.name,
                        description: e.description,
                        pkp_ids: e.pkpIds.into_iter().map(b256).collect(),
                        cid_hashes: e.cidHashes.into_iter().map(b256).collect(),
                    },
                )
            }),
            E::GroupUpdated(e) => group_id(e.groupId).and_then(|g| {
                op(
                    e.apiKeyHash,
                    MirrorOp::SetGroup {
                        new: false,
                        group_id: g,
                        name: e.name,
                        description: e.description,
                        pkp_ids: e.pkpIds.into_iter().map(b256).collect(),
                        cid_hashes: e.cidHashes.into_iter().map(b256).collect(),
                    },
                )
            }),
            E::GroupRemoved(e) => group_id(e.groupId)
                .and_then(|g| op(e.apiKeyHash, MirrorOp::RemoveGroup { group_id: g })),
            E::PkpAddedToGroup(e) => group_id(e.groupId).and_then(|g| {
                op(
                    e.apiKeyHash,
                    MirrorOp::AddPkpToGroup {
                        group_id: g,
                        pkp_id: b256(e.pkpId),
                    },
                )
            }),
            E::PkpRemovedFromGroup(e) => group_id(e.groupId).and_then(|g| {
                op(
                    e.apiKeyHash,
                    MirrorOp::RemovePkpFromGroup {
                        group_id: g,
                        pkp_id: b256(e.pkpId),
                    },
                )
            }),
            E::ActionAddedToGroup(e) => group_id(e.groupId).and_then(|g| {
                op(
                    e.apiKeyHash,
                    MirrorOp::AddActionToGroup {
                        group_id: g,
                        cid_hash: b256(e.cidHash),
                    },
                )
            }),
            E::ActionRemovedFromGroup(e) => group_id(e.groupId).and_then(|g| {
                op(
                    e.apiKeyHash,
                    MirrorOp::RemoveActionFromGroup {
                        group_id: g,
                        cid_hash: b256(e.cidHash),
                    },
                )
            }),
            E::ActionMetadataSet(e) => op(
                e.apiKeyHash,
                MirrorOp::SetActionMetadata {
                    cid_hash: b256(e.cidHash),
                    name: e.name,
                    description: e.description,
                },
            ),
            E::ActionDeleted(e) => op(
                e.apiKeyHash,
                MirrorOp::DeleteAction {
                    cid_hash: b256(e.cidHash),
                },
            ),
            E::WalletRegistered(e) => {
                let path = DerivationPath(e.derivationPath.to_be_bytes::<32>());
                if !path.is_wallet_path() {
                    tracing::warn!(block, wallet = %e.wallet, "registration of a service-owned derivation path; ignored");
                    return Ok(None);
                }
                let info = self.client.keys().wallet(&path).await?;
                if Address::from(info.address.0) != e.wallet {
                    tracing::warn!(block, wallet = %e.wallet, "registered address does not match its derivation path; ignored");
                    return Ok(None);
                }
                Some(ChainEvent {
                    api_key_hash: b256(e.apiKeyHash),
                    change: ChainChange::Wallet {
                        identity: WalletIdentity {
                            pkp_id: info.pkp_id,
                            address: info.address,
                            derivation_path: path,
                        },
                        name: e.name,
                        description: e.description,
                    },
                    block,
                })
            }
            E::ApiPayerSet(_) | E::OwnershipTransferred(_) => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 0 is "never"; a time is kept as is; one the store cannot hold never comes.
    #[test]
    fn on_chain_expiration_maps_to_the_stores() {
        assert_eq!(expiry(U256::ZERO), None);
        assert_eq!(expiry(U256::from(1_700_000_000u64)), Some(1_700_000_000));
        assert_eq!(expiry(U256::MAX), Some(i64::MAX));
        assert_eq!(expiry(U256::from(u64::MAX)), Some(i64::MAX));
    }
}
