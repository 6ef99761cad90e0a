//! `appliance-chain`: the settlement chain of the appliance: a JSON-RPC client,
//! transactions signed by keyservice's payer wallets, the relayer that mirrors the outbox
//! to `AccountConfig`, the indexer that applies `AccountConfig` events of ChainSecured
//! accounts to the store, and the deployment of the contracts.
//!
//! May depend on: `appliance-store` (the outbox, the cursors, the events' effects),
//! `keyservice-api` (the payer signatures), `chain-contracts` (the ABI),
//! `appliance-domain` (the retry schedule) and alloy. Never on `appliance` (the HTTP
//! layer) or a metrics registry: its progress goes to the [`ChainTelemetry`] the composer
//! hands in.
//!
//! The API never waits for the chain: writes commit locally with an outbox row; the
//! relayer and the indexer run in the background and catch up after outages.

pub mod client;
pub mod config;
pub mod contract_deployment;
pub mod indexer;
pub mod relayer;

pub use client::{ChainClient, Fees, SignedTx};
pub use config::ChainConfig;

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
    pub leadership: Vec<appliance_store::Leadership>,
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
async fn led<F>(mut leadership: appliance_store::Leadership, work: impl Fn() -> F)
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

/// Receives the followers' progress (the appliance: its chain gauges).
pub trait ChainTelemetry: Send + Sync + 'static {
    /// The indexer saw the chain at `head` and has applied every block up to `indexed`.
    fn indexer_progress(&self, head: u64, indexed: u64);
}

/// How the followers run (the appliance's `[chain]` settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerSettings {
    /// Pause between polls when there is nothing to do.
    pub poll: std::time::Duration,
    /// Outbox entries per relayer batch.
    pub batch_size: usize,
    /// The block the contract was deployed in (where indexing starts).
    pub deploy_block: u64,
    /// Blocks an event must be buried under before it is applied.
    pub confirmations: u64,
}

/// Starts the relayer and the indexer for `AccountConfig` at `contract`. Both persist
/// every step before acting on it, so aborting them at any point is safe.
pub fn spawn_followers(
    store: appliance_store::Store,
    client: ChainClient,
    contract: alloy::primitives::Address,
    settings: FollowerSettings,
    telemetry: std::sync::Arc<dyn ChainTelemetry>,
) -> Result<Followers, appliance_store::StoreError> {
    let relayer = relayer::Relayer::new(
        store.clone(),
        client.clone(),
        contract,
        settings.batch_size,
        settings.poll,
    );
    let indexer = indexer::Indexer {
        store: store.clone(),
        client,
        contract,
        deploy_block: settings.deploy_block,
        confirmations: settings.confirmations,
        poll: settings.poll,
        telemetry,
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
