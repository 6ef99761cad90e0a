//! Rule 6: the governance contract at `0x‖app_id` must answer `allowedComposeHashes(0x‖compose_hash)`
//! = true, asked with an `eth_call` through the verifier's own RPC URL.

use alloy::primitives::{Address, B256};
use alloy::providers::{Provider, ProviderBuilder};
use alloy::transports::http::reqwest::Url;
use chain_contracts::IAppGovernance;

/// Whether the contract at `app_id` (hex, 20 bytes) allows `compose_hash` (hex, 32 bytes).
pub async fn allowed(rpc: &str, app_id: &str, compose_hash: &str) -> Result<bool, String> {
    let url: Url = rpc
        .parse()
        .map_err(|e| format!("bad RPC URL {rpc:?}: {e}"))?;
    let address: Address = format!("0x{app_id}")
        .parse()
        .map_err(|_| format!("app_id {app_id} is not a 20-byte address"))?;
    let hash: B256 = format!("0x{compose_hash}")
        .parse()
        .map_err(|_| format!("compose_hash {compose_hash} is not 32 bytes of hex"))?;
    let client = chain_contracts::rpc::http_client().map_err(|e| e.to_string())?;
    let provider = ProviderBuilder::new().connect_reqwest(client, url);
    let code = provider
        .get_code_at(address)
        .await
        .map_err(|e| format!("RPC eth_getCode: {e}"))?;
    if code.is_empty() {
        return Err(format!("no contract at 0x{app_id} on this chain"));
    }
    IAppGovernance::new(address, provider)
        .allowedComposeHashes(hash)
        .call()
        .await
        .map_err(|e| format!("RPC allowedComposeHashes: {e}"))
}
