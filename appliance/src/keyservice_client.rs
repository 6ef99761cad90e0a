//! The appliance's handle on the key service. Every private-key operation goes through
//! here to the keyservice process over its Unix socket; the front end never holds the
//! root secret or a wallet key it did not ask for.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use keyservice_api::protocol::Op;
use keyservice_api::{
    CallObserver, CallOutcome, ClientConfig, DerivationPath, KeyClient, KeyError, NewSealedRoot,
    Observer, RootId, RootStatus, WalletInfo,
};

use crate::telemetry::{metrics, request_span};

/// Every keyservice call is timed (`appliance_keyservice_request_duration_seconds`), moves
/// `appliance_keyservice_up`, and inside a request runs in a `keyservice.call` span.
struct Telemetry(Arc<metrics::Metrics>);

impl CallObserver for Telemetry {
    fn span(&self, op: Op) -> tracing::Span {
        request_span!("keyservice.call", op = op.name())
    }

    fn finished(&self, op: Op, elapsed: Duration, outcome: CallOutcome) {
        self.0.keyservice_call(op.name(), outcome.as_str(), elapsed);
    }
}

/// A cheap, clonable handle. Calls multiplex over one connection, which is re-dialled
/// by itself after keyservice restarts.
#[derive(Clone)]
pub struct Keys {
    client: KeyClient,
}

impl Keys {
    /// A handle on the keyservice at `socket` whose calls are counted in `metrics`.
    pub fn new(socket: &Path, request_timeout: Duration, metrics: Arc<metrics::Metrics>) -> Self {
        let config = ClientConfig {
            request_timeout,
            observer: Some(Observer(Arc::new(Telemetry(metrics)))),
            ..ClientConfig::default()
        };
        Self {
            client: KeyClient::with_config(socket, config),
        }
    }

    /// Answers when keyservice is up; used by `/health` and at start.
    pub async fn check(&self) -> Result<(), KeyError> {
        self.client.status().await.map(|_| ())
    }

    /// The public identity of the wallet at `path`.
    pub async fn wallet(&self, path: &DerivationPath) -> Result<WalletInfo, KeyError> {
        self.client.wallet(path).await
    }

    /// Whether keyservice holds its root (`root_id` is `None` while a shared-root
    /// keyservice awaits it) and the compose hash it runs; answered in every state, so the
    /// appliance can record which root it runs on.
    pub async fn root_status(&self) -> Result<RootStatus, KeyError> {
        self.client.root_status().await
    }

    /// Shared-root mode, before adoption: a fresh root sealed to keyservice's compose
    /// hash (not kept by keyservice). Store it in the shared database if no root is there
    /// yet (first writer wins), then adopt whichever blob won.
    pub async fn create_sealed_root(&self) -> Result<NewSealedRoot, KeyError> {
        self.client.create_sealed_root().await
    }

    /// Shared-root mode: hands keyservice the shared sealed root; returns its root id. A
    /// blob that does not open there is refused and keyservice exits (it never makes a
    /// second root); a second adoption is refused.
    pub async fn adopt_root(&self, sealed: &[u8]) -> Result<RootId, KeyError> {
        self.client.adopt_root(sealed).await
    }

    /// HMAC-SHA256 tags of store rows, in order, under keyservice's row-MAC key (any
    /// number of rows; split into as many requests as needed).
    pub async fn row_macs(&self, items: &[&[u8]]) -> Result<Vec<[u8; 32]>, KeyError> {
        self.client.row_macs(items).await
    }

    pub fn client(&self) -> &KeyClient {
        &self.client
    }
}
