//! The settlement chain as clients see it: which chain and contract, and the payer
//! wallets that submit the service's transactions. No authentication; never the RPC URL.

use appliance_api::chain::NodeChainConfig;
use appliance_api::error::ErrorBody;
use axum::Json;
use axum::extract::State;
use keyservice_api::Payer;

use crate::error::ApiError;
use crate::state::AppState;

/// The chain and contract the service mirrors to.
#[utoipa::path(
    get,
    path = "/get_node_chain_config",
    tag = "chain",
    responses(super::RateLimited, (status = 200, description = "Chain configuration (never the RPC URL)", body = NodeChainConfig))
)]
pub async fn get_node_chain_config(State(state): State<AppState>) -> Json<NodeChainConfig> {
    let c = &state.config.chain;
    Json(NodeChainConfig {
        chain_name: c.chain_name.clone(),
        chain_id: c.chain_id,
        is_evm: true,
        testnet: c.testnet,
        token: c.token.clone(),
        contract_address: c.account_config_address.map(|a| a.to_checksum(None)),
    })
}

/// The API payer wallets (they submit API-mode writes to the chain).
#[utoipa::path(
    get,
    path = "/get_api_payers",
    tag = "chain",
    responses(
        super::RateLimited,
        (status = 200, description = "Addresses, EIP-55", body = Vec<String>),
        (status = 503, description = "keyservice is unavailable", body = ErrorBody),
    )
)]
pub async fn get_api_payers(State(state): State<AppState>) -> Result<Json<Vec<String>>, ApiError> {
    let payers = state.keys.client().payers().await?;
    Ok(Json(payers.api.iter().map(|a| a.to_checksum()).collect()))
}

/// The admin payer wallet (it deploys and administers the contracts).
#[utoipa::path(
    get,
    path = "/get_admin_api_payer",
    tag = "chain",
    responses(
        super::RateLimited,
        (status = 200, description = "Address, EIP-55", body = String, content_type = "application/json"),
        (status = 503, description = "keyservice is unavailable", body = ErrorBody),
    )
)]
pub async fn get_admin_api_payer(State(state): State<AppState>) -> Result<Json<String>, ApiError> {
    let admin = state.keys.client().payer_address(Payer::Admin).await?;
    Ok(Json(admin.to_checksum()))
}
