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

// The configuration section of this subsystem, composed by `crate::config`.

/// How the appliance reaches the key service, the only process holding private keys.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KeyserviceConfig {
    /// The keyservice's Unix socket. In production keyservice runs as its own
    /// container/user and the appliance connects to this socket. At start the appliance
    /// waits for it (`start_wait_ms`); if it goes down later, key operations answer 503
    /// until it is back.
    pub socket: std::path::PathBuf,
    /// Start keyservice as a supervised child process on the `dev` platform
    /// (development only: its sealing is NOT confidential).
    pub spawn: bool,
    /// spawn: the keyservice binary. Default: `keyservice` next to the appliance binary.
    pub binary: Option<std::path::PathBuf>,
    /// spawn: the compose file whose SHA-256 seals the root.
    pub compose_file: Option<std::path::PathBuf>,
    /// spawn: where keyservice keeps its sealed root and dev secret.
    /// Default: `<data_dir>/keyservice`.
    pub state_dir: Option<std::path::PathBuf>,
    /// spawn: the dev platform's secret (default: `<state_dir>/dev-secret`). Replicas
    /// of one dev deployment share it, as dstack replicas share the KMS's app key.
    pub dev_secret: Option<std::path::PathBuf>,
    /// Time allowed for one key operation.
    pub request_timeout_ms: u64,
    /// How long start waits for keyservice to answer (it may be a container that starts
    /// after this one) before giving up with an error. The root must be confirmed before
    /// the appliance serves anything, so it does not serve until then.
    pub start_wait_ms: u64,
}

impl Default for KeyserviceConfig {
    fn default() -> Self {
        Self {
            socket: std::path::PathBuf::from("/run/keyservice/keyservice.sock"),
            spawn: false,
            binary: None,
            compose_file: None,
            state_dir: None,
            dev_secret: None,
            request_timeout_ms: 10_000,
            start_wait_ms: 60_000,
        }
    }
}

impl KeyserviceConfig {
    /// Checks that a spawned keyservice has the compose file it seals to.
    pub fn validate(&self) -> Result<(), appliance_domain::settings::InvalidSetting> {
        if self.spawn && self.compose_file.is_none() {
            return Err(appliance_domain::settings::InvalidSetting::new(
                "keyservice.spawn needs keyservice.compose_file",
            ));
        }
        Ok(())
    }
}
