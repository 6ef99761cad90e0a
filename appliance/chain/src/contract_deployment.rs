//! Deploying `AccountConfig` and `AppGovernance` with the appliance's own transactions
//! (used by `appliance deploy` and by `appliance dev`'s local chain).
//!
//! The deployer signs every transaction: by default keyservice's **admin payer**
//! (`Payer::Admin`, the wallet `get_admin_api_payer` names, whose key never leaves
//! keyservice), or a local key when the operator provides one (see
//! [`DeploySigner::Local`]). The deployer becomes the owner of both contracts, makes every
//! API payer an `AccountConfig` payer (`setApiPayer`), and can hand ownership on (e.g. to a
//! multisig) at the end. The API payers themselves never deploy: API payer 0's nonces
//! belong to the relayer.

use std::time::{Duration, Instant};

use alloy::consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy::eips::eip2718::Encodable2718;
use alloy::primitives::{Address, Bytes, TxKind, U256};
use alloy::providers::Provider;
use alloy::rpc::types::TransactionReceipt;
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::SolCall;
use chain_contracts::{IAccountConfig, IAppGovernance, artifacts};
use keyservice_api::Payer;

use super::client::rpc_error;
use super::{ChainClient, ChainError, Fees, SignedTx};

/// Gas assumed per `setApiPayer` / `transferOwnership` when checking the deployer's funds
/// before the contracts exist (measured: about 47 000 and 30 000).
const GAS_PER_ADMIN_CALL: u64 = 70_000;

/// Who signs the deployment.
#[derive(Clone)]
pub enum DeploySigner {
    /// A keyservice payer wallet (normally `Payer::Admin`).
    Payer(Payer),
    /// A key the operator holds (e.g. an already funded deployer wallet); it signs in this
    /// process and is never written anywhere.
    Local(PrivateKeySigner),
}

impl std::fmt::Debug for DeploySigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Payer(p) => write!(f, "Payer({p:?})"),
            Self::Local(s) => write!(f, "Local({})", s.address()),
        }
    }
}

/// What to deploy and who ends up owning it.
#[derive(Debug, Clone, Default)]
pub struct DeployPlan {
    /// Wallets to make `AccountConfig` API payers (the appliance's API payers).
    pub api_payers: Vec<Address>,
    /// Hand `AccountConfig` ownership to this address after setting the payers.
    pub account_config_owner: Option<Address>,
    /// Hand `AppGovernance` ownership to this address (e.g. a multisig).
    pub governance_owner: Option<Address>,
    /// How long to wait for each transaction to be mined.
    pub receipt_timeout: Duration,
}

/// The result of a deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deployed {
    pub account_config: Address,
    pub governance: Address,
    /// The block `AccountConfig` was created in (where the indexer starts).
    pub deploy_block: u64,
    /// Who signed the deployment.
    pub deployer: Address,
    pub account_config_owner: Address,
    pub governance_owner: Address,
}

/// Why a deployment failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeployError {
    #[error(
        "the deployer {address} holds {balance} wei; deploying needs about {needed} wei (fund it and retry)"
    )]
    InsufficientFunds {
        address: Address,
        balance: U256,
        needed: U256,
    },
    #[error("{what}: transaction {hash} reverted")]
    Reverted {
        what: &'static str,
        hash: alloy::primitives::B256,
    },
    #[error("{what}: transaction {hash} was not mined within {secs} s")]
    NotMined {
        what: &'static str,
        hash: alloy::primitives::B256,
        secs: u64,
    },
    #[error("{what}: the receipt names no created contract ({hash})")]
    NoContract {
        what: &'static str,
        hash: alloy::primitives::B256,
    },
    #[error("signing with the local deployer key failed: {0}")]
    LocalSign(String),
    #[error(transparent)]
    Chain(#[from] ChainError),
}

/// Sends transactions from one signer with locally tracked nonces.
struct Sender<'a> {
    client: &'a ChainClient,
    signer: DeploySigner,
    from: Address,
    nonce: u64,
    fees: Fees,
    timeout: Duration,
}

impl Sender<'_> {
    async fn sign(
        &self,
        to: Option<Address>,
        data: Bytes,
        gas: u64,
    ) -> Result<SignedTx, DeployError> {
        match &self.signer {
            DeploySigner::Payer(payer) => Ok(self
                .client
                .sign(*payer, to, data, self.nonce, gas, self.fees)
                .await?),
            DeploySigner::Local(key) => {
                let tx = TxEip1559 {
                    chain_id: self.client.chain_id(),
                    nonce: self.nonce,
                    gas_limit: gas,
                    max_fee_per_gas: self.fees.max_fee_per_gas,
                    max_priority_fee_per_gas: self.fees.max_priority_fee_per_gas,
                    to: to.map_or(TxKind::Create, TxKind::Call),
                    value: U256::ZERO,
                    access_list: Default::default(),
                    input: data,
                };
                let signature = key
                    .sign_hash_sync(&tx.signature_hash())
                    .map_err(|e| DeployError::LocalSign(e.to_string()))?;
                let envelope: TxEnvelope = tx.into_signed(signature).into();
                Ok(SignedTx {
                    hash: *envelope.tx_hash(),
                    raw: Bytes::from(envelope.encoded_2718()),
                })
            }
        }
    }

    /// Estimates, signs, broadcasts and waits for one transaction; a revert is an error.
    async fn send(
        &mut self,
        what: &'static str,
        to: Option<Address>,
        data: Bytes,
    ) -> Result<TransactionReceipt, DeployError> {
        let gas = self.client.estimate_gas(self.from, to, &data).await?;
        let tx = self.sign(to, data, gas).await?;
        self.client.broadcast(&tx).await?;
        self.nonce += 1;
        tracing::debug!(%what, hash = %tx.hash, "transaction sent");
        let deadline = Instant::now() + self.timeout;
        loop {
            if let Some(receipt) = self.client.receipt(tx.hash).await? {
                if !receipt.status() {
                    return Err(DeployError::Reverted {
                        what,
                        hash: tx.hash,
                    });
                }
                return Ok(receipt);
            }
            if Instant::now() >= deadline {
                return Err(DeployError::NotMined {
                    what,
                    hash: tx.hash,
                    secs: self.timeout.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn create(
        &mut self,
        what: &'static str,
        code: Bytes,
    ) -> Result<(Address, u64), DeployError> {
        let receipt = self.send(what, None, code).await?;
        let block = receipt.block_number.unwrap_or_default();
        let address = receipt.contract_address.ok_or(DeployError::NoContract {
            what,
            hash: receipt.transaction_hash,
        })?;
        Ok((address, block))
    }
}

/// The address that signs for `signer`.
pub async fn signer_address(
    client: &ChainClient,
    signer: &DeploySigner,
) -> Result<Address, ChainError> {
    match signer {
        DeploySigner::Payer(payer) => client.payer_address(*payer).await,
        DeploySigner::Local(key) => Ok(key.address()),
    }
}

/// Deploys both contracts from `signer`, authorizes `plan.api_payers` on `AccountConfig`
/// and transfers ownership as planned. The caller has checked the chain id.
pub async fn deploy_contracts(
    client: &ChainClient,
    signer: DeploySigner,
    plan: &DeployPlan,
) -> Result<Deployed, DeployError> {
    let from = signer_address(client, &signer).await?;
    let fees = client.fees().await?;
    let account_code = artifacts::account_config_bytecode();
    let governance_code = artifacts::app_governance_bytecode();

    // Funds: both creations (estimated) plus the administrative calls (assumed).
    let admin_calls = plan.api_payers.len()
        + usize::from(plan.account_config_owner.is_some())
        + usize::from(plan.governance_owner.is_some());
    let gas = client.estimate_gas(from, None, &account_code).await?
        + client.estimate_gas(from, None, &governance_code).await?
        + GAS_PER_ADMIN_CALL * admin_calls as u64;
    let needed = U256::from(gas) * U256::from(fees.max_fee_per_gas);
    let balance = client
        .provider()
        .get_balance(from)
        .await
        .map_err(rpc_error)?;
    if balance < needed {
        return Err(DeployError::InsufficientFunds {
            address: from,
            balance,
            needed,
        });
    }

    let mut sender = Sender {
        client,
        signer,
        from,
        nonce: client.pending_nonce(from).await?,
        fees,
        timeout: plan.receipt_timeout,
    };
    let (account_config, deploy_block) =
        sender.create("deploy AccountConfig", account_code).await?;
    tracing::info!(%account_config, deploy_block, "AccountConfig deployed");
    let (governance, _) = sender
        .create("deploy AppGovernance", governance_code)
        .await?;
    tracing::info!(%governance, "AppGovernance deployed");
    for payer in &plan.api_payers {
        let data = IAccountConfig::setApiPayerCall {
            payer: *payer,
            allowed: true,
        }
        .abi_encode();
        sender
            .send(
                "AccountConfig.setApiPayer",
                Some(account_config),
                data.into(),
            )
            .await?;
        tracing::info!(%payer, "API payer authorized on AccountConfig");
    }
    let mut account_config_owner = from;
    if let Some(owner) = plan.account_config_owner.filter(|o| *o != from) {
        let data = IAccountConfig::transferOwnershipCall { newOwner: owner }.abi_encode();
        sender
            .send(
                "AccountConfig.transferOwnership",
                Some(account_config),
                data.into(),
            )
            .await?;
        account_config_owner = owner;
    }
    let mut governance_owner = from;
    if let Some(owner) = plan.governance_owner.filter(|o| *o != from) {
        let data = IAppGovernance::transferOwnershipCall { newOwner: owner }.abi_encode();
        sender
            .send(
                "AppGovernance.transferOwnership",
                Some(governance),
                data.into(),
            )
            .await?;
        governance_owner = owner;
    }
    Ok(Deployed {
        account_config,
        governance,
        deploy_block,
        deployer: from,
        account_config_owner,
        governance_owner,
    })
}

/// Adds `compose_hash` to the `AppGovernance` allow-list at `governance` unless it is
/// already there, signed by `signer` (its owner). Returns whether a transaction was sent.
pub async fn allow_compose_hash(
    client: &ChainClient,
    signer: DeploySigner,
    governance: Address,
    compose_hash: alloy::primitives::B256,
    timeout: Duration,
) -> Result<bool, DeployError> {
    let allowed = IAppGovernance::new(governance, client.provider())
        .allowedComposeHashes(compose_hash)
        .call()
        .await
        .map_err(|e| ChainError::Unavailable(e.to_string()))?;
    if allowed {
        return Ok(false);
    }
    let from = signer_address(client, &signer).await?;
    let mut sender = Sender {
        client,
        signer,
        from,
        nonce: client.pending_nonce(from).await?,
        fees: client.fees().await?,
        timeout,
    };
    let data = IAppGovernance::addComposeHashCall {
        composeHash: compose_hash,
    }
    .abi_encode();
    sender
        .send(
            "AppGovernance.addComposeHash",
            Some(governance),
            data.into(),
        )
        .await?;
    Ok(true)
}

/// Whether both contracts are deployed at these addresses (their runtime code matches the
/// committed artifacts) and every one of `api_payers` is an `AccountConfig` payer.
pub async fn contracts_in_place(
    client: &ChainClient,
    account_config: Address,
    governance: Address,
    api_payers: &[Address],
) -> Result<bool, ChainError> {
    let provider = client.provider();
    let code = provider
        .get_code_at(account_config)
        .await
        .map_err(rpc_error)?;
    if code != artifacts::account_config_deployed_bytecode() {
        return Ok(false);
    }
    let code = provider.get_code_at(governance).await.map_err(rpc_error)?;
    if code != artifacts::app_governance_deployed_bytecode() {
        return Ok(false);
    }
    let contract = IAccountConfig::new(account_config, provider);
    for payer in api_payers {
        let allowed = contract
            .isApiPayer(*payer)
            .call()
            .await
            .map_err(|e| ChainError::Unavailable(e.to_string()))?;
        if !allowed {
            return Ok(false);
        }
    }
    Ok(true)
}
