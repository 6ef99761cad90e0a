//! The settlement chain: a JSON-RPC client, transactions signed by keyservice's payer
//! wallets, the relayer that mirrors the outbox to `AccountConfig`, and the indexer that
//! applies `AccountConfig` events of ChainSecured accounts to the local store.
//!
//! The API never waits for the chain: writes commit locally with an outbox row; the
//! relayer and the indexer run in the background and catch up after outages.

pub mod client;
pub mod contract_deployment;
pub mod indexer;
pub mod relayer;

pub use client::{ChainClient, Fees, SignedTx};

use keyservice_api::KeyError;

/// A failure talking to the chain or preparing a transaction.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChainError {
    /// The RPC endpoint is unreachable or failed (retry later).
    #[error("the chain RPC is unavailable: {0}")]
    Unavailable(String),
    /// The node rejected the call itself (e.g. it would revert); retrying will not help.
    #[error("the chain rejected the call: {0}")]
    Rejected(String),
    /// The RPC endpoint is on another chain than configured.
    #[error("the RPC endpoint reports chain id {found}, the configuration says {expected}")]
    WrongChain { expected: u64, found: u64 },
    /// The configuration lacks something the chain needs.
    #[error("chain configuration: {0}")]
    Config(String),
    #[error("keyservice: {0}")]
    Keys(#[from] KeyError),
}

impl ChainError {
    /// Whether retrying later may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Unavailable(_) => true,
            Self::Keys(e) => e.is_unavailable(),
            Self::Rejected(_) | Self::WrongChain { .. } | Self::Config(_) => false,
        }
    }
}

/// The background chain followers of a running appliance; dropping this stops them.
pub struct Followers {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Who leads each follower (`/health`).
    pub leadership: Vec<crate::store::Leadership>,
}

impl Drop for Followers {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Runs `work` while this replica leads, stops it when it no longer does, and starts it
/// again when it leads again. `work` must be safe to stop at any point (both followers
/// persist every state change before its side effect).
async fn led<F>(mut leadership: crate::store::Leadership, work: impl Fn() -> F)
where
    F: std::future::Future<Output = ()>,
{
    loop {
        leadership.wait_to_lead().await;
        tracing::info!(singleton = leadership.name(), "this replica leads");
        tokio::select! {
            () = work() => return,
            () = leadership.lost() => {
                tracing::warn!(singleton = leadership.name(), "this replica no longer leads; stopped");
            }
        }
    }
}

/// Starts the relayer and the indexer for `AccountConfig` at `contract`. Both persist
/// every step before acting on it, so aborting them at any point is safe.
pub fn spawn_followers(
    store: crate::store::Store,
    client: ChainClient,
    contract: alloy::primitives::Address,
    config: &crate::config::ChainConfig,
) -> Result<Followers, crate::store::StoreError> {
    let poll = std::time::Duration::from_millis(config.poll_interval_ms);
    let relayer = relayer::Relayer::new(
        store.clone(),
        client.clone(),
        contract,
        config.batch_size,
        poll,
    );
    let indexer = indexer::Indexer {
        store: store.clone(),
        client,
        contract,
        deploy_block: config.deploy_block,
        confirmations: config.confirmations,
        poll,
    };
    // Each runs on one replica at a time (`store::leadership`).
    let relaying = store.leadership("chain-relayer")?;
    let indexing = store.leadership("chain-indexer")?;
    Ok(Followers {
        leadership: vec![relaying.clone(), indexing.clone()],
        tasks: vec![
            tokio::spawn(async move { led(relaying, || relayer.run()).await }),
            tokio::spawn(async move { led(indexing, || indexer.run()).await }),
        ],
    })
}
