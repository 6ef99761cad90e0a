//! What every handler can reach: the one shared state of the HTTP service. It lives
//! apart from both `http` (transport) and `api` (handlers), which both use it.

use std::sync::Arc;

use crate::config::Config;
use crate::execution::Executor;
use crate::keyservice_client::Keys;
use crate::store::Store;

/// What every handler can reach: one pointer to the [`Services`], so that the clones
/// every request makes (each extractor and handler takes its own) cost one atomic
/// increment, not one per service.
#[derive(Clone)]
pub struct AppState(Arc<Services>);

impl AppState {
    pub fn new(services: Services) -> Self {
        Self(Arc::new(services))
    }
}

impl std::ops::Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.0
    }
}

/// The services behind [`AppState`].
pub struct Services {
    pub store: Store,
    pub keys: Keys,
    pub executor: Executor,
    /// Prices, Stripe and the credit reserved by running actions.
    pub billing: Arc<crate::billing::Billing>,
    pub config: Arc<Config>,
    /// The ACME task's status and trigger, when ACME is configured.
    pub acme: Option<crate::acme::AcmeHandle>,
    /// The quote provider and the current evidence files.
    pub attestation: crate::attest::Attestation,
    /// The singletons (chain relayer, indexer) and whether this replica leads each.
    pub singletons: Vec<crate::store::Leadership>,
    /// The operators of `[operator] addresses` and the nonces of their requests
    /// (`crate::operator`).
    pub operators: operator_auth::Verifier,
    /// This appliance's metrics registry (made by `crate::startup`, scraped by
    /// `crate::metrics_listener`).
    pub metrics: Arc<crate::telemetry::metrics::Metrics>,
}
