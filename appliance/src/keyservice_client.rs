//! The appliance's handle on the key service. Every private-key operation goes through
//! here to the keyservice process over its Unix socket; the front end never holds the
//! root secret or a wallet key it did not ask for.

use std::path::Path;
use std::time::Duration;

use keyservice_api::{ClientConfig, DerivationPath, KeyClient, KeyError, WalletInfo};

/// A cheap, clonable handle. Calls multiplex over one connection, which is re-dialled
/// by itself after keyservice restarts.
#[derive(Clone)]
pub struct Keys {
    client: KeyClient,
}

impl Keys {
    pub fn new(socket: &Path, request_timeout: Duration) -> Self {
        let config = ClientConfig {
            request_timeout,
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

    pub fn client(&self) -> &KeyClient {
        &self.client
    }
}
