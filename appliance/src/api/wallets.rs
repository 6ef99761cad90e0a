//! Wallets (PKPs): created inside keyservice, listed per account and per group.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{
    AuthErrors, BodyErrors, MAX_DESCRIPTION_LEN, MAX_NAME_LEN, ServerErrors, WireU64, check_text,
};
use crate::authz::{GroupId, Operation, authorize};
use crate::error::{ApiError, ErrorBody};
use crate::http::auth::Auth;
use crate::http::billed::Billed;
use crate::http::extract::{OptionalJsonBody, Paging, QueryParams};
use crate::state::AppState;
use crate::store::{WalletIdentity, WalletRecord};

#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CreateWalletRequest {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CreateWalletResponse {
    /// EIP-55 address.
    pub wallet_address: String,
    /// `0x` + keccak256 of the uncompressed public key (without 0x04).
    pub pkp_id: String,
    /// `0x` + 64 hex; the wallet's key is derived from it inside keyservice.
    pub derivation_path: String,
}

async fn create(
    state: AppState,
    billed: Billed,
    req: CreateWalletRequest,
) -> Result<Json<CreateWalletResponse>, ApiError> {
    authorize(&billed.credential, Operation::CreateWallet)?;
    check_text("name", &req.name, MAX_NAME_LEN)?;
    check_text("description", &req.description, MAX_DESCRIPTION_LEN)?;
    let minted = state.keys.client().create_wallet().await?;
    let identity = WalletIdentity {
        pkp_id: minted.pkp_id,
        address: minted.address,
        derivation_path: minted.derivation_path,
    };
    let record = state
        .store
        .create_wallet(
            billed.account,
            identity,
            req.name,
            req.description,
            billed.charge,
        )
        .await?;
    Ok(Json(CreateWalletResponse {
        wallet_address: record.address.to_checksum(),
        pkp_id: record.pkp_id.to_hex(),
        derivation_path: record.derivation_path.to_hex(),
    }))
}

/// Creates a wallet whose key lives only in keyservice (account key, or a usage key with
/// `can_create_pkps`).
#[utoipa::path(
    get,
    path = "/create_wallet",
    tag = "wallets",
    security(("bearer" = []), ("api_key" = [])),
    responses(
        (status = 200, description = "The new wallet", body = CreateWalletResponse),
        AuthErrors,
        ServerErrors,
        Billed,
    )
)]
pub async fn create_wallet_get(
    State(state): State<AppState>,
    billed: Billed,
) -> Result<Json<CreateWalletResponse>, ApiError> {
    create(state, billed, CreateWalletRequest::default()).await
}

/// Creates a wallet, optionally naming it (same as the GET form otherwise).
#[utoipa::path(
    post,
    path = "/create_wallet",
    tag = "wallets",
    security(("bearer" = []), ("api_key" = [])),
    request_body(content = Option<CreateWalletRequest>, description = "Optional name and description"),
    responses(
        (status = 200, description = "The new wallet", body = CreateWalletResponse),
        BodyErrors,
        AuthErrors,
        ServerErrors,
        Billed,
    )
)]
pub async fn create_wallet_post(
    State(state): State<AppState>,
    billed: Billed,
    OptionalJsonBody(req): OptionalJsonBody<CreateWalletRequest>,
) -> Result<Json<CreateWalletResponse>, ApiError> {
    create(state, billed, req.unwrap_or_default()).await
}

/// A wallet as listed.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WalletItem {
    /// The wallet's pkp_id (the same as `pkp_id`).
    pub id: String,
    pub pkp_id: String,
    pub wallet_address: String,
    pub name: String,
    pub description: String,
}

impl From<WalletRecord> for WalletItem {
    fn from(w: WalletRecord) -> Self {
        Self {
            id: w.pkp_id.to_hex(),
            pkp_id: w.pkp_id.to_hex(),
            wallet_address: w.address.to_checksum(),
            name: w.name,
            description: w.description,
        }
    }
}

/// The account's wallets in creation order, the account's own wallet first.
#[utoipa::path(
    get,
    path = "/list_wallets",
    tag = "wallets",
    security(("bearer" = []), ("api_key" = [])),
    params(super::PagingParams),
    responses(
        (status = 200, description = "One page of wallets", body = Vec<WalletItem>),
        (status = 400, description = "Malformed paging", body = ErrorBody),
        AuthErrors,
        ServerErrors,
    )
)]
pub async fn list_wallets(
    State(state): State<AppState>,
    auth: Auth,
    Paging(page): Paging,
) -> Result<Json<Vec<WalletItem>>, ApiError> {
    authorize(&auth.credential, Operation::ReadAccount)?;
    let wallets = state.store.list_wallets(auth.account, page).await?;
    Ok(Json(wallets.into_iter().map(WalletItem::from).collect()))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GroupQuery {
    /// The group (number, decimal or 0x hex).
    #[param(value_type = String)]
    pub group_id: WireU64,
}

/// The wallets a group permits (all the account's wallets for a wildcard group).
#[utoipa::path(
    get,
    path = "/list_wallets_in_group",
    tag = "wallets",
    security(("bearer" = []), ("api_key" = [])),
    params(GroupQuery, super::PagingParams),
    responses(
        (status = 200, description = "One page of wallets", body = Vec<WalletItem>),
        (status = 400, description = "Missing or malformed group_id or paging", body = ErrorBody),
        (status = 404, description = "No such group in this account", body = ErrorBody),
        AuthErrors,
        ServerErrors,
    )
)]
pub async fn list_wallets_in_group(
    State(state): State<AppState>,
    auth: Auth,
    QueryParams(query): QueryParams<GroupQuery>,
    Paging(page): Paging,
) -> Result<Json<Vec<WalletItem>>, ApiError> {
    authorize(&auth.credential, Operation::ReadAccount)?;
    let wallets = state
        .store
        .list_wallets_in_group(auth.account, GroupId(query.group_id.0), page)
        .await?;
    Ok(Json(wallets.into_iter().map(WalletItem::from).collect()))
}
