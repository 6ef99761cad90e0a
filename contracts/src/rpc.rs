//! The HTTP client of every JSON-RPC connection to the settlement chain.
//!
//! alloy talks JSON-RPC through its own reqwest (0.13). That reqwest is compiled with rustls
//! and no crypto provider (`rustls-no-provider`, the workspace's `alloy-reqwest`): its
//! default provider would be aws-lc-rs, a second cryptography library beside ring in every
//! binary. Built without one, reqwest would look for a process-wide default provider and
//! panic when none is installed, so every client is built here instead, with a rustls
//! configuration of its own: ring, TLS 1.2 and 1.3, and the Mozilla roots of `webpki-roots`
//! (the same roots as the appliance's other outbound clients; the image carries no system
//! certificate store).
//!
//! Use it with alloy's provider builder:
//! `ProviderBuilder::new().connect_reqwest(rpc::http_client()?, url)`.

use std::sync::Arc;
use std::time::Duration;

pub use alloy::transports::http::reqwest;

/// Why an RPC client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum RpcClientError {
    #[error("TLS configuration of the RPC client: {0}")]
    Tls(#[from] rustls::Error),
    #[error("building the RPC client: {0}")]
    Build(#[from] reqwest::Error),
}

/// The rustls client configuration of RPC connections: ring, safe default protocol
/// versions, the `webpki-roots` trust anchors.
pub fn tls_config() -> Result<rustls::ClientConfig, rustls::Error> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth())
}

/// A reqwest builder for alloy with [`tls_config`] already set; add timeouts and build.
pub fn http_client_builder() -> Result<reqwest::ClientBuilder, rustls::Error> {
    Ok(reqwest::Client::builder().tls_backend_preconfigured(tls_config()?))
}

/// An RPC client with no overall timeout (alloy's own default).
pub fn http_client() -> Result<reqwest::Client, RpcClientError> {
    Ok(http_client_builder()?.build()?)
}

/// An RPC client whose requests fail after `timeout`.
pub fn http_client_with_timeout(timeout: Duration) -> Result<reqwest::Client, RpcClientError> {
    Ok(http_client_builder()?.timeout(timeout).build()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No process-wide rustls provider is installed in this test binary, and alloy's reqwest
    /// has none compiled in: building a client the ordinary way would panic. Ours builds.
    #[test]
    fn a_client_builds_without_a_process_default_provider() {
        assert!(
            rustls::crypto::CryptoProvider::get_default().is_none(),
            "this test must run with no process-wide provider installed"
        );
        let config = tls_config().unwrap();
        assert!(!config.crypto_provider().cipher_suites.is_empty());
        http_client().unwrap();
        http_client_with_timeout(Duration::from_secs(1)).unwrap();
    }

    /// The configuration names ring's cipher suites, the provider the rest of the workspace
    /// uses, not whatever default a dependency would pick.
    #[test]
    fn the_provider_is_ring() {
        let config = tls_config().unwrap();
        let ours: Vec<_> = config
            .crypto_provider()
            .cipher_suites
            .iter()
            .map(|s| s.suite())
            .collect();
        let ring: Vec<_> = rustls::crypto::ring::default_provider()
            .cipher_suites
            .iter()
            .map(|s| s.suite())
            .collect();
        assert_eq!(ours, ring);
    }

    /// The reason this module exists: alloy's reqwest has no provider of its own (an
    /// aws-lc-rs default would make this build succeed), so its plain constructor panics.
    #[test]
    fn alloy_reqwest_has_no_provider_of_its_own() {
        assert!(rustls::crypto::CryptoProvider::get_default().is_none());
        let built = std::panic::catch_unwind(|| reqwest::Client::builder().build());
        assert!(
            built.is_err(),
            "alloy's reqwest built a TLS client with no provider installed: a crypto \
             provider other than ring is compiled in again"
        );
    }
}
