//! Wallets (PKPs): created inside keyservice, listed per account and per group.

use appliance_api::PagingParams;
use appliance_api::error::ErrorBody;
use appliance_api::wallets::{CreateWalletRequest, CreateWalletResponse, GroupQuery, WalletItem};
use axum::Json;
use axum::extract::State;

use super::{AuthErrors, BodyErrors, MAX_DESCRIPTION_LEN, MAX_NAME_LEN, ServerErrors, check_text};
use crate::authz::{GroupId, Operation, authorize};
use crate::error::ApiError;
use crate::http::auth::Auth;
use crate::http::billed::Billed;
use crate::http::extract::{OptionalJsonBody, Paging, QueryParams};
use crate::state::AppState;
use crate::store::{WalletIdentity, WalletRecord};

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
    // No body, or `null` (the documented body is `CreateWalletRequest` or null): unnamed.
    OptionalJsonBody(req): OptionalJsonBody<Option<CreateWalletRequest>>,
) -> Result<Json<CreateWalletResponse>, ApiError> {
    create(state, billed, req.flatten().unwrap_or_default()).await
}

/// A wallet record as listed.
fn wallet_item(w: WalletRecord) -> WalletItem {
    WalletItem {
        id: w.pkp_id.to_hex(),
        pkp_id: w.pkp_id.to_hex(),
        wallet_address: w.address.to_checksum(),
        name: w.name,
        description: w.description,
    }
}

/// The account's wallets in creation order, the account's own wallet first.
#[utoipa::path(
    get,
    path = "/list_wallets",
    tag = "wallets",
    security(("bearer" = []), ("api_key" = [])),
    params(PagingParams),
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
    Ok(Json(wallets.into_iter().map(wallet_item).collect()))
}

/// The wallets a group permits (all the account's wallets for a wildcard group).
#[utoipa::path(
    get,
    path = "/list_wallets_in_group",
    tag = "wallets",
    security(("bearer" = []), ("api_key" = [])),
    params(GroupQuery, PagingParams),
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
    Ok(Json(wallets.into_iter().map(wallet_item).collect()))
}
