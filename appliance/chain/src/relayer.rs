//! The relayer: mirrors the outbox to `AccountConfig`, in order, exactly once.
//!
//! One batch is in flight at a time, sent by API payer 0 (the relayer is that payer's only
//! user). A batch is up to `chain.batch_size` consecutive entries in one
//! `multicall` transaction. Its nonce and signed bytes are stored *before* the broadcast,
//! so after a crash or an outage the very same transaction is re-broadcast: the nonce
//! makes a second inclusion impossible. Gas is estimated against the state the previous
//! batch left, so a batch that would revert is split: the first entry goes alone, and an
//! entry that is refused alone is marked failed (and logged) instead of blocking the
//! queue. The same holds for keyservice's payer policy: a transaction it refuses to sign
//! (destination, value, fee cap) is split to its first entry once, and an entry refused
//! alone is marked failed with the policy's reason, never retried. A batch unmined after
//! `STUCK_AFTER` is re-signed with higher fees, same nonce.

use appliance_domain::backoff::Backoff;
use std::time::Duration;

use alloy::consensus::{Transaction as _, TxEnvelope};
use alloy::eips::eip2718::Decodable2718;
use alloy::primitives::{Address, B256, Bytes, U256};
use alloy::sol_types::SolCall;
use chain_contracts::IAccountConfig;
use chain_contracts::ops::{MirrorOp, MirrorPermissions};
use keyservice_api::Payer;

use super::{ChainClient, ChainError, Fees, SignedTx};
use appliance_store::Store;
use appliance_store::outbox::{OutboxEntry, SentBatch};

/// The payer the relayer signs with.
pub const RELAYER_PAYER: u32 = 0;
/// How long a batch may stay unmined before it is re-signed with higher fees.
const STUCK_AFTER: i64 = 60;
/// Longest wait between retries while the chain is unreachable.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

fn uint(b: &B256) -> U256 {
    U256::from_be_bytes(b.0)
}

fn uints(list: &[B256]) -> Vec<U256> {
    list.iter().map(uint).collect()
}

fn group_ids(list: &[u64]) -> Vec<U256> {
    list.iter().map(|&g| U256::from(g)).collect()
}

fn permissions(p: &MirrorPermissions) -> IAccountConfig::UsageKeyPermissions {
    p.by_ref().map_sets(|ids| group_ids(ids)).into()
}

/// The `AccountConfig` calldata of one outbox entry.
pub fn calldata(api_key_hash: &B256, op: &MirrorOp) -> Bytes {
    use IAccountConfig as C;
    let account = uint(api_key_hash);
    let bytes = match op.clone() {
        MirrorOp::NewAccount {
            admin,
            name,
            description,
        } => C::newAccountCall {
            apiKeyHash: account,
            admin,
            name,
            description,
        }
        .abi_encode(),
        MirrorOp::SetUsageApiKey {
            usage_key_hash,
            name,
            description,
            permissions: p,
        } => C::setUsageApiKeyCall {
            apiKeyHash: account,
            usageKeyHash: uint(&usage_key_hash),
            expiration: U256::ZERO,
            balance: U256::ZERO,
            name,
            description,
            permissions: permissions(&p),
        }
        .abi_encode(),
        MirrorOp::UpdateUsageApiKeyMetadata {
            usage_key_hash,
            name,
            description,
        } => C::updateUsageApiKeyMetadataCall {
            apiKeyHash: account,
            usageKeyHash: uint(&usage_key_hash),
            name,
            description,
        }
        .abi_encode(),
        MirrorOp::RemoveUsageApiKey { usage_key_hash } => C::removeUsageApiKeyCall {
            apiKeyHash: account,
            usageKeyHash: uint(&usage_key_hash),
        }
        .abi_encode(),
        MirrorOp::SetGroup {
            new: true,
            group_id,
            name,
            description,
            pkp_ids,
            cid_hashes,
        } => C::addGroupCall {
            apiKeyHash: account,
            groupId: U256::from(group_id),
            name,
            description,
            pkpIds: uints(&pkp_ids),
            cidHashes: uints(&cid_hashes),
        }
        .abi_encode(),
        MirrorOp::SetGroup {
            new: false,
            group_id,
            name,
            description,
            pkp_ids,
            cid_hashes,
        } => C::updateGroupCall {
            apiKeyHash: account,
            groupId: U256::from(group_id),
            name,
            description,
            pkpIds: uints(&pkp_ids),
            cidHashes: uints(&cid_hashes),
        }
        .abi_encode(),
        MirrorOp::RemoveGroup { group_id } => C::removeGroupCall {
            apiKeyHash: account,
            groupId: U256::from(group_id),
        }
        .abi_encode(),
        MirrorOp::AddPkpToGroup { group_id, pkp_id } => C::addPkpToGroupCall {
            apiKeyHash: account,
            groupId: U256::from(group_id),
            pkpId: uint(&pkp_id),
        }
        .abi_encode(),
        MirrorOp::RemovePkpFromGroup { group_id, pkp_id } => C::removePkpFromGroupCall {
            apiKeyHash: account,
            groupId: U256::from(group_id),
            pkpId: uint(&pkp_id),
        }
        .abi_encode(),
        MirrorOp::AddActionToGroup { group_id, cid_hash } => C::addActionToGroupCall {
            apiKeyHash: account,
            groupId: U256::from(group_id),
            cidHash: uint(&cid_hash),
        }
        .abi_encode(),
        MirrorOp::RemoveActionFromGroup { group_id, cid_hash } => C::removeActionFromGroupCall {
            apiKeyHash: account,
            groupId: U256::from(group_id),
            cidHash: uint(&cid_hash),
        }
        .abi_encode(),
        MirrorOp::SetActionMetadata {
            cid_hash,
            name,
            description,
        } => C::setActionMetadataCall {
            apiKeyHash: account,
            cidHash: uint(&cid_hash),
            name,
            description,
        }
        .abi_encode(),
        MirrorOp::DeleteAction { cid_hash } => C::deleteActionCall {
            apiKeyHash: account,
            cidHash: uint(&cid_hash),
        }
        .abi_encode(),
        MirrorOp::RegisterWallet {
            wallet,
            derivation_path,
            name,
            description,
        } => C::registerWalletDerivationCall {
            apiKeyHash: account,
            wallet,
            derivationPath: uint(&derivation_path),
            name,
            description,
        }
        .abi_encode(),
        MirrorOp::ConvertAccount { new_admin } => C::convertToChainSecuredAccountCall {
            apiKeyHash: account,
            newAdminWalletAddress: new_admin,
        }
        .abi_encode(),
    };
    Bytes::from(bytes)
}

/// The calldata of a batch: the call itself for one entry, `multicall` for several.
pub fn batch_calldata(entries: &[OutboxEntry]) -> Bytes {
    let mut calls: Vec<Bytes> = entries
        .iter()
        .map(|e| calldata(&e.api_key_hash, &e.op))
        .collect();
    if calls.len() == 1 {
        return calls.remove(0);
    }
    Bytes::from(IAccountConfig::multicallCall { calls }.abi_encode())
}

/// The mirror loop's state.
pub struct Relayer {
    store: Store,
    client: ChainClient,
    contract: Address,
    batch_size: usize,
    poll: Duration,
    /// API payer 0's address, once known.
    from: tokio::sync::OnceCell<Address>,
}

impl Relayer {
    pub fn new(
        store: Store,
        client: ChainClient,
        contract: Address,
        batch_size: usize,
        poll: Duration,
    ) -> Self {
        Self {
            store,
            client,
            contract,
            batch_size,
            poll,
            from: tokio::sync::OnceCell::new(),
        }
    }

    /// Runs until the task is dropped. Every state change is persisted before its side
    /// effect, so stopping at any point is safe.
    pub async fn run(&self) {
        let mut backoff = Backoff::new(self.poll, MAX_BACKOFF);
        loop {
            match self.step().await {
                Ok(true) => {
                    backoff.reset();
                    continue;
                }
                Ok(false) => {
                    backoff.reset();
                    tokio::time::sleep(self.poll).await;
                }
                Err(err) => {
                    let retry_in = backoff.next_delay();
                    if err.is_transient() {
                        tracing::warn!(error = %err, ?retry_in, "chain mirror waiting for the chain");
                    } else {
                        tracing::error!(error = %err, ?retry_in, "chain mirror failed");
                    }
                    tokio::time::sleep(retry_in).await;
                }
            }
        }
    }

    /// The relayer's payer address, asked of keyservice once.
    async fn payer_address(&self) -> Result<Address, ChainError> {
        self.from
            .get_or_try_init(|| self.client.payer_address(Payer::Api(RELAYER_PAYER)))
            .await
            .copied()
    }

    fn store_err(err: appliance_store::StoreError) -> ChainError {
        ChainError::Unavailable(format!("store: {err}"))
    }

    /// One unit of work; `Ok(true)` when there may be more to do right away.
    pub async fn step(&self) -> Result<bool, ChainError> {
        if let Some(batch) = self
            .store
            .outbox_in_flight()
            .await
            .map_err(Self::store_err)?
        {
            return self.follow(batch).await;
        }
        let mut entries = self
            .store
            .outbox_pending(self.batch_size)
            .await
            .map_err(Self::store_err)?;
        if entries.is_empty() {
            return Ok(false);
        }
        let payer = Payer::Api(RELAYER_PAYER);
        let from = self.payer_address().await?;
        let mut data = batch_calldata(&entries);
        let mut gas = match self
            .client
            .estimate_gas(from, Some(self.contract), &data)
            .await
        {
            Ok(gas) => gas,
            Err(ChainError::Rejected(reason)) if entries.len() > 1 => {
                tracing::warn!(%reason, entries = entries.len(), "mirror batch would revert; sending its first entry alone");
                entries.truncate(1);
                data = batch_calldata(&entries);
                match self
                    .client
                    .estimate_gas(from, Some(self.contract), &data)
                    .await
                {
                    Ok(gas) => gas,
                    Err(ChainError::Rejected(reason)) => {
                        return self.refuse(&entries[0], reason).await;
                    }
                    Err(other) => return Err(other),
                }
            }
            Err(ChainError::Rejected(reason)) => return self.refuse(&entries[0], reason).await,
            Err(other) => return Err(other),
        };
        let chain_nonce = self.client.pending_nonce(from).await?;
        let used = self
            .store
            .outbox_last_nonce(RELAYER_PAYER)
            .await
            .map_err(Self::store_err)?;
        let nonce = used.map_or(chain_nonce, |n| chain_nonce.max(n + 1));
        let fees = self.client.fees().await?;
        // keyservice's payer policy may refuse the transaction (its destination, value or
        // fee cap). That is permanent: a batch is split to its first entry once (a smaller
        // transaction may fit the fee cap), and an entry refused alone is marked failed
        // with the reason, never retried.
        let signed = loop {
            match self
                .client
                .sign(payer, Some(self.contract), data.clone(), nonce, gas, fees)
                .await
            {
                Ok(signed) => break signed,
                Err(ChainError::Keys(err)) if err.is_refused() => {
                    if entries.len() == 1 {
                        return self
                            .refuse(&entries[0], format!("the payer policy refused it: {err}"))
                            .await;
                    }
                    tracing::warn!(reason = %err, entries = entries.len(), "the payer policy refuses the mirror batch; sending its first entry alone");
                    entries.truncate(1);
                    data = batch_calldata(&entries);
                    gas = match self
                        .client
                        .estimate_gas(from, Some(self.contract), &data)
                        .await
                    {
                        Ok(gas) => gas,
                        Err(ChainError::Rejected(reason)) => {
                            return self.refuse(&entries[0], reason).await;
                        }
                        Err(other) => return Err(other),
                    };
                }
                Err(other) => return Err(other),
            }
        };
        let seqs: Vec<i64> = entries.iter().map(|e| e.seq).collect();
        self.store
            .outbox_record_batch(seqs, RELAYER_PAYER, nonce, signed.raw.to_vec(), signed.hash)
            .await
            .map_err(Self::store_err)?;
        tracing::info!(entries = entries.len(), nonce, tx = %signed.hash, "mirror batch sent");
        self.client.broadcast(&signed).await?;
        Ok(true)
    }

    async fn refuse(&self, entry: &OutboxEntry, reason: String) -> Result<bool, ChainError> {
        tracing::error!(seq = entry.seq, op = ?entry.op, %reason, "mirror entry refused for good; marked failed");
        self.store
            .outbox_fail(entry.seq, reason)
            .await
            .map_err(Self::store_err)?;
        Ok(true)
    }

    /// Settles, re-broadcasts or re-prices the batch in flight.
    async fn follow(&self, batch: SentBatch) -> Result<bool, ChainError> {
        for hash in batch.tx_hashes.iter().rev() {
            if let Some(receipt) = self.client.receipt(*hash).await? {
                let ok = receipt.status();
                let block = receipt.block_number.unwrap_or_default();
                if !ok {
                    tracing::error!(tx = %hash, first = batch.first_seq, last = batch.last_seq, "mirror batch reverted");
                }
                self.store
                    .outbox_settle(batch.id, ok, *hash, block, receipt.gas_used)
                    .await
                    .map_err(Self::store_err)?;
                return Ok(true);
            }
        }
        let latest = batch.tx_hashes.last().copied().unwrap_or(B256::ZERO);
        if appliance_store::now_unix() - batch.sent_at > STUCK_AFTER {
            return self.reprice(batch).await;
        }
        self.client
            .broadcast(&SignedTx {
                raw: Bytes::from(batch.raw_tx),
                hash: latest,
            })
            .await?;
        Ok(false)
    }

    /// Re-signs the batch's transaction with the same nonce and at least 25 % higher fees
    /// (what nodes require to replace a pending transaction).
    async fn reprice(&self, batch: SentBatch) -> Result<bool, ChainError> {
        let envelope = TxEnvelope::decode_2718(&mut batch.raw_tx.as_slice())
            .map_err(|e| ChainError::Config(format!("stored transaction unreadable: {e}")))?;
        let current = self.client.fees().await?;
        let bump = |old: u128| old.saturating_add(old / 4).saturating_add(1);
        let fees = Fees {
            max_fee_per_gas: bump(envelope.max_fee_per_gas()).max(current.max_fee_per_gas),
            max_priority_fee_per_gas: bump(envelope.max_priority_fee_per_gas().unwrap_or(0))
                .max(current.max_priority_fee_per_gas),
        };
        let signed = self
            .client
            .sign(
                Payer::Api(RELAYER_PAYER),
                envelope.to(),
                envelope.input().clone(),
                envelope.nonce(),
                envelope.gas_limit(),
                fees,
            )
            .await?;
        tracing::warn!(nonce = batch.nonce, tx = %signed.hash, "mirror batch unmined; re-signed with higher fees");
        self.store
            .outbox_replace_tx(batch.id, signed.raw.to_vec(), signed.hash)
            .await
            .map_err(Self::store_err)?;
        self.client.broadcast(&signed).await?;
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: i64, op: MirrorOp) -> OutboxEntry {
        OutboxEntry {
            seq,
            api_key_hash: B256::repeat_byte(7),
            op,
        }
    }

    #[test]
    fn one_entry_is_a_direct_call_and_several_are_a_multicall_in_order() {
        let add = entry(
            1,
            MirrorOp::AddPkpToGroup {
                group_id: 3,
                pkp_id: B256::repeat_byte(9),
            },
        );
        let remove = entry(2, MirrorOp::RemoveGroup { group_id: 3 });
        let single = batch_calldata(std::slice::from_ref(&add));
        let call = IAccountConfig::addPkpToGroupCall::abi_decode(&single).unwrap();
        assert_eq!(call.apiKeyHash, U256::from_be_bytes([7; 32]));
        assert_eq!(call.groupId, U256::from(3));
        assert_eq!(call.pkpId, U256::from_be_bytes([9; 32]));

        let both = batch_calldata(&[add, remove]);
        let multi = IAccountConfig::multicallCall::abi_decode(&both).unwrap();
        assert_eq!(multi.calls.len(), 2);
        assert_eq!(multi.calls[0], single);
        let second = IAccountConfig::removeGroupCall::abi_decode(&multi.calls[1]).unwrap();
        assert_eq!(second.groupId, U256::from(3));
    }

    #[test]
    fn usage_key_permissions_keep_their_group_ids() {
        let data = calldata(
            &B256::repeat_byte(1),
            &MirrorOp::SetUsageApiKey {
                usage_key_hash: B256::repeat_byte(2),
                name: "n".into(),
                description: "d".into(),
                permissions: MirrorPermissions {
                    can_create_groups: true,
                    can_delete_groups: false,
                    can_create_pkps: true,
                    manage_ipfs_ids_in_groups: vec![0],
                    add_pkp_to_groups: vec![4, 5],
                    remove_pkp_from_groups: vec![],
                    execute_in_groups: vec![1 << 62],
                },
            },
        );
        let call = IAccountConfig::setUsageApiKeyCall::abi_decode(&data).unwrap();
        assert_eq!(call.name, "n");
        assert!(call.permissions.canCreateGroups && call.permissions.canCreatePkps);
        assert_eq!(
            call.permissions.addPkpToGroups,
            vec![U256::from(4), U256::from(5)]
        );
        assert_eq!(
            call.permissions.executeInGroups,
            vec![U256::from(1u64 << 62)]
        );
    }
}
