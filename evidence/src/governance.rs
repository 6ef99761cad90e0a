//! Rule 6: the governance contract at `0x‖app_id` must answer `allowedComposeHashes(0x‖compose_hash)`
//! = true, asked with an `eth_call` through the verifier's own RPC URL.

use alloy::primitives::{Address, B256};
use alloy::providers::{Provider, ProviderBuilder};
use alloy::transports::TransportError;
use alloy::transports::http::reqwest::Url;
use chain_contracts::IAppGovernance;
use chain_contracts::rpc::RpcClientError;

/// Why the governance contract could not be asked (the `governance` check then fails).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GovernanceError {
    #[error("bad RPC URL {url:?}: {source}")]
    Url {
        url: String,
        #[source]
        source: <Url as std::str::FromStr>::Err,
    },
    #[error("app_id {0} is not a 20-byte address")]
    AppId(String),
    #[error("compose_hash {0} is not 32 bytes of hex")]
    ComposeHash(String),
    #[error(transparent)]
    Client(#[from] RpcClientError),
    #[error("RPC eth_getCode: {0}")]
    GetCode(#[source] TransportError),
    /// Nothing deployed at `0x‖app_id` (hex, as given).
    #[error("no contract at 0x{0} on this chain")]
    NoContract(String),
    #[error("RPC allowedComposeHashes: {0}")]
    Call(#[source] alloy::contract::Error),
}

/// Whether the contract at `app_id` (hex, 20 bytes) allows `compose_hash` (hex, 32 bytes).
pub async fn allowed(rpc: &str, app_id: &str, compose_hash: &str) -> Result<bool, GovernanceError> {
    let url: Url = rpc.parse().map_err(|source| GovernanceError::Url {
        url: rpc.to_owned(),
        source,
    })?;
    let address: Address = format!("0x{app_id}")
        .parse()
        .map_err(|_| GovernanceError::AppId(app_id.to_owned()))?;
    let hash: B256 = format!("0x{compose_hash}")
        .parse()
        .map_err(|_| GovernanceError::ComposeHash(compose_hash.to_owned()))?;
    let client = chain_contracts::rpc::http_client()?;
    let provider = ProviderBuilder::new().connect_reqwest(client, url);
    let code = provider
        .get_code_at(address)
        .await
        .map_err(GovernanceError::GetCode)?;
    if code.is_empty() {
        return Err(GovernanceError::NoContract(app_id.to_owned()));
    }
    IAppGovernance::new(address, provider)
        .allowedComposeHashes(hash)
        .call()
        .await
        .map_err(GovernanceError::Call)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Refused before any RPC: the report line names what is wrong.
    #[tokio::test]
    async fn malformed_inputs_are_named() {
        let hash = "ab".repeat(32);
        let app_id = "11".repeat(20);
        let err = allowed("not a url", &app_id, &hash).await.unwrap_err();
        assert!(
            err.to_string().starts_with("bad RPC URL \"not a url\": "),
            "{err}"
        );
        let err = allowed("http://127.0.0.1:1", "12", &hash)
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "app_id 12 is not a 20-byte address");
        let err = allowed("http://127.0.0.1:1", &app_id, "zz")
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "compose_hash zz is not 32 bytes of hex");
    }
}
