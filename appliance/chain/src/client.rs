//! JSON-RPC access and payer-signed EIP-1559 transactions. The payer keys never leave
//! keyservice: the unsigned transaction goes there (which checks it against its payer
//! policy: chain id, destination contract, no value) and the signature comes back.

use std::time::Duration;

use alloy::consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy::eips::eip2718::Encodable2718;
use alloy::primitives::{Address, B256, Bytes, TxKind, U256};
use alloy::providers::{Provider, RootProvider};
use alloy::rpc::types::{TransactionReceipt, TransactionRequest};
use alloy::transports::{RpcError, TransportErrorKind};
use keyservice_api::Payer;

use super::ChainError;
use keyservice_api::KeyClient;

/// Fee parameters of an EIP-1559 transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fees {
    pub max_fee_per_gas: u128,
    pub max_priority_fee_per_gas: u128,
}

/// A signed transaction, ready to broadcast (and to re-broadcast unchanged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedTx {
    pub raw: Bytes,
    pub hash: B256,
}

/// A connection to the chain plus the payer wallets that sign for the service.
#[derive(Clone)]
pub struct ChainClient {
    provider: RootProvider,
    chain_id: u64,
    keys: KeyClient,
}

/// Maps an RPC failure: an error answer from the node is a rejection, anything else
/// (connection refused, timeout, bad gateway) is an outage.
pub fn rpc_error(err: RpcError<TransportErrorKind>) -> ChainError {
    match err {
        RpcError::ErrorResp(payload) => ChainError::Rejected(payload.to_string()),
        other => ChainError::Unavailable(other.to_string()),
    }
}

impl ChainClient {
    /// A client for `rpc_url`; nothing is sent until first use.
    pub fn new(
        rpc_url: &str,
        chain_id: u64,
        keys: KeyClient,
        timeout: Duration,
    ) -> Result<Self, ChainError> {
        let url = rpc_url
            .parse()
            .map_err(|e| ChainError::Config(format!("chain.rpc_url is not a URL: {e}")))?;
        // alloy's own reqwest (its version may differ from the appliance's), on rustls with
        // ring: chain_contracts::rpc.
        let http = chain_contracts::rpc::http_client_with_timeout(timeout)
            .map_err(|e| ChainError::Config(e.to_string()))?;
        let transport = alloy::transports::http::Http::with_client(http, url);
        let client = alloy::rpc::client::RpcClient::new(transport, true);
        Ok(Self {
            provider: RootProvider::new(client),
            chain_id,
            keys,
        })
    }

    pub fn provider(&self) -> &RootProvider {
        &self.provider
    }

    pub fn chain_id(&self) -> u64 {
        self.chain_id
    }

    pub fn keys(&self) -> &KeyClient {
        &self.keys
    }

    /// Checks that the endpoint is on the configured chain.
    pub async fn check_chain_id(&self) -> Result<(), ChainError> {
        let found = self.provider.get_chain_id().await.map_err(rpc_error)?;
        if found != self.chain_id {
            return Err(ChainError::WrongChain {
                expected: self.chain_id,
                found,
            });
        }
        Ok(())
    }

    /// The address of a payer wallet.
    pub async fn payer_address(&self, payer: Payer) -> Result<Address, ChainError> {
        let a = self.keys.payer_address(payer).await?;
        Ok(Address::from(a.0))
    }

    /// The next nonce of `address` counting pending transactions.
    pub async fn pending_nonce(&self, address: Address) -> Result<u64, ChainError> {
        self.provider
            .get_transaction_count(address)
            .pending()
            .await
            .map_err(rpc_error)
    }

    pub async fn block_number(&self) -> Result<u64, ChainError> {
        self.provider.get_block_number().await.map_err(rpc_error)
    }

    /// Current fees: twice the latest base fee plus the suggested tip, so a transaction
    /// stays includable through a few blocks of rising base fee.
    pub async fn fees(&self) -> Result<Fees, ChainError> {
        let est = self
            .provider
            .estimate_eip1559_fees()
            .await
            .map_err(rpc_error)?;
        Ok(Fees {
            max_fee_per_gas: est.max_fee_per_gas,
            max_priority_fee_per_gas: est.max_priority_fee_per_gas,
        })
    }

    /// Gas for `data` sent from `from` to `to` (`None`: contract creation), with a 25 %
    /// margin. A call that would revert is `Rejected`.
    pub async fn estimate_gas(
        &self,
        from: Address,
        to: Option<Address>,
        data: &Bytes,
    ) -> Result<u64, ChainError> {
        let mut req = TransactionRequest::default()
            .from(from)
            .input(data.clone().into());
        req.to = Some(to.map_or(TxKind::Create, TxKind::Call));
        let gas = self.provider.estimate_gas(req).await.map_err(rpc_error)?;
        Ok(gas.saturating_add(gas / 4))
    }

    /// Builds and signs (in keyservice) an EIP-1559 transaction from `payer`.
    pub async fn sign(
        &self,
        payer: Payer,
        to: Option<Address>,
        data: Bytes,
        nonce: u64,
        gas_limit: u64,
        fees: Fees,
    ) -> Result<SignedTx, ChainError> {
        let tx = TxEip1559 {
            chain_id: self.chain_id,
            nonce,
            gas_limit,
            max_fee_per_gas: fees.max_fee_per_gas,
            max_priority_fee_per_gas: fees.max_priority_fee_per_gas,
            to: to.map_or(TxKind::Create, TxKind::Call),
            value: U256::ZERO,
            access_list: Default::default(),
            input: data,
        };
        let mut unsigned = Vec::with_capacity(tx.input.len() + 128);
        tx.encode_for_signing(&mut unsigned);
        let sig = self.keys.payer_sign_transaction(payer, &unsigned).await?;
        let signature = alloy::primitives::Signature::from_bytes_and_parity(
            &sig.as_bytes()[..64],
            sig.v() == 28,
        );
        let envelope: TxEnvelope = tx.into_signed(signature).into();
        let raw = Bytes::from(envelope.encoded_2718());
        Ok(SignedTx {
            hash: *envelope.tx_hash(),
            raw,
        })
    }

    /// Broadcasts a signed transaction. Re-broadcasting one the node already has, or that
    /// is already mined, is not an error.
    pub async fn broadcast(&self, tx: &SignedTx) -> Result<(), ChainError> {
        match self.provider.send_raw_transaction(&tx.raw).await {
            Ok(_) => Ok(()),
            Err(RpcError::ErrorResp(payload)) => {
                let msg = payload.message.to_ascii_lowercase();
                if msg.contains("already known")
                    || msg.contains("already imported")
                    || msg.contains("nonce too low")
                {
                    // Either pending already or mined (possibly this very transaction):
                    // the receipt decides.
                    Ok(())
                } else {
                    Err(ChainError::Rejected(payload.to_string()))
                }
            }
            Err(other) => Err(ChainError::Unavailable(other.to_string())),
        }
    }

    /// The receipt of `hash`, if mined.
    pub async fn receipt(&self, hash: B256) -> Result<Option<TransactionReceipt>, ChainError> {
        self.provider
            .get_transaction_receipt(hash)
            .await
            .map_err(rpc_error)
    }
}
