//! Registered actions, and the CID of action code.

use appliance_api::actions::{
    ActionItem, AddActionRequest, HashedCidRequest, OptionalGroupQuery, UpdateActionMetadataRequest,
};
use appliance_api::error::ErrorBody;
use appliance_api::{HashedCidResponse, PagingParams, Success};
use axum::Json;
use axum::extract::State;

use super::{
    AuthErrors, BodyErrors, MAX_DESCRIPTION_LEN, MAX_NAME_LEN, ServerErrors, check_text,
    parse_cid_hash, parse_raw_cid, success,
};
use crate::authz::{GroupId, Operation, authorize};
use crate::cid;
use crate::error::ApiError;
use crate::http::auth::{Auth, OptionalAuth};
use crate::http::billed::Billed;
use crate::http::extract::{JsonBody, Paging, QueryParams, limit};
use crate::state::AppState;
use crate::store::{ActionRecord, CodeOwner};

/// Registers an action by CID (account key, or a usage key with any
/// `manage_ipfs_ids_in_groups` grant).
#[utoipa::path(
    post,
    path = "/add_action",
    tag = "actions",
    security(("bearer" = []), ("api_key" = [])),
    request_body = AddActionRequest,
    responses(
        (status = 200, description = "Registered", body = HashedCidResponse),
        (status = 409, description = "Already registered on this account", body = ErrorBody),
        BodyErrors,
        AuthErrors,
        ServerErrors,
        Billed,
    )
)]
pub async fn add_action(
    State(state): State<AppState>,
    billed: Billed,
    JsonBody(req): JsonBody<AddActionRequest>,
) -> Result<Json<HashedCidResponse>, ApiError> {
    authorize(&billed.credential, Operation::RegisterAction)?;
    check_text("name", &req.name, MAX_NAME_LEN)?;
    check_text("description", &req.description, MAX_DESCRIPTION_LEN)?;
    let (cid, hash) = parse_raw_cid(&req.action_ipfs_cid)?;
    state
        .store
        .add_action(
            billed.account,
            cid,
            hash,
            req.name,
            req.description,
            billed.charge,
        )
        .await?;
    Ok(Json(HashedCidResponse {
        success: true,
        hashed_cid: hash.to_string(),
    }))
}

/// Deletes an action and removes it from every group (account key, or a usage key with
/// `manage_ipfs_ids_in_groups = [0]`).
#[utoipa::path(
    post,
    path = "/delete_action",
    tag = "actions",
    security(("bearer" = []), ("api_key" = [])),
    request_body = HashedCidRequest,
    responses(
        (status = 200, description = "Done", body = Success),
        (status = 404, description = "No such action in this account", body = ErrorBody),
        BodyErrors,
        AuthErrors,
        ServerErrors,
        Billed,
    )
)]
pub async fn delete_action(
    State(state): State<AppState>,
    billed: Billed,
    JsonBody(req): JsonBody<HashedCidRequest>,
) -> Result<Json<Success>, ApiError> {
    authorize(&billed.credential, Operation::DeleteAction)?;
    let hash = parse_cid_hash("hashed_cid", &req.hashed_cid)?;
    state
        .store
        .delete_action(billed.account, hash, billed.charge)
        .await?;
    Ok(success())
}

/// Changes an action's name and description (as for add_action).
#[utoipa::path(
    post,
    path = "/update_action_metadata",
    tag = "actions",
    security(("bearer" = []), ("api_key" = [])),
    request_body = UpdateActionMetadataRequest,
    responses(
        (status = 200, description = "Done", body = Success),
        (status = 404, description = "No such action in this account", body = ErrorBody),
        BodyErrors,
        AuthErrors,
        ServerErrors,
        Billed,
    )
)]
pub async fn update_action_metadata(
    State(state): State<AppState>,
    billed: Billed,
    JsonBody(req): JsonBody<UpdateActionMetadataRequest>,
) -> Result<Json<Success>, ApiError> {
    authorize(&billed.credential, Operation::RegisterAction)?;
    check_text("name", &req.name, MAX_NAME_LEN)?;
    check_text("description", &req.description, MAX_DESCRIPTION_LEN)?;
    let hash = parse_cid_hash("hashed_cid", &req.hashed_cid)?;
    state
        .store
        .update_action_metadata(
            billed.account,
            hash,
            req.name,
            req.description,
            billed.charge,
        )
        .await?;
    Ok(success())
}

/// An action record as listed.
fn action_item(a: ActionRecord) -> ActionItem {
    ActionItem {
        id: a.cid_hash.to_string(),
        hashed_cid: a.cid_hash.to_string(),
        ipfs_cid: a.ipfs_cid,
        name: a.name,
        description: a.description,
    }
}

/// The account's actions, or those a group permits, in registration order.
#[utoipa::path(
    get,
    path = "/list_actions",
    tag = "actions",
    security(("bearer" = []), ("api_key" = [])),
    params(OptionalGroupQuery, PagingParams),
    responses(
        (status = 200, description = "One page of actions", body = Vec<ActionItem>),
        (status = 400, description = "Malformed group_id or paging", body = ErrorBody),
        (status = 404, description = "No such group in this account", body = ErrorBody),
        AuthErrors,
        ServerErrors,
    )
)]
pub async fn list_actions(
    State(state): State<AppState>,
    auth: Auth,
    QueryParams(query): QueryParams<OptionalGroupQuery>,
    Paging(page): Paging,
) -> Result<Json<Vec<ActionItem>>, ApiError> {
    authorize(&auth.credential, Operation::ReadAccount)?;
    let group = query.group_id.map(|g| GroupId(g.0));
    let actions = state.store.list_actions(auth.account, group, page).await?;
    Ok(Json(actions.into_iter().map(action_item).collect()))
}

/// The IPFS CID (CIDv0, as `ipfs add --only-hash` computes it) of the code in the body,
/// a JSON string. The code is kept by CID so it can later be executed by `ipfs_id`:
/// without a key in the small shared anonymous area (which other anonymous uploads may
/// churn); with a key (optional) in the account's own area, within its code quota.
#[utoipa::path(
    post,
    path = "/get_lit_action_ipfs_id",
    tag = "actions",
    security((), ("bearer" = []), ("api_key" = [])),
    request_body(content = String, content_type = "application/json", description = "The action's JavaScript code, as a JSON string"),
    responses(
        super::RateLimited,
        (status = 200, description = "The CID", body = String, content_type = "application/json", example = json!("QmZr5qtNmcxBdpXF7K7hSkLbxK2wUVhMhZn29PKzhynvcR")),
        (status = 401, description = "A key was sent but is unknown or revoked", body = ErrorBody),
        (status = 403, description = "The key sent is a former account key of a ChainSecured account", body = ErrorBody),
        (status = 409, description = "With a key: the account's stored action code would exceed its quota", body = ErrorBody),
        BodyErrors,
        ServerErrors,
    )
)]
pub async fn get_lit_action_ipfs_id(
    State(state): State<AppState>,
    OptionalAuth(auth): OptionalAuth,
    JsonBody(code): JsonBody<String, { limit::CODE }>,
) -> Result<Json<String>, ApiError> {
    let limits = &state.config.actions;
    if code.len() > limits.max_code_bytes {
        return Err(ApiError::PayloadTooLarge(format!(
            "action code is limited to {} bytes",
            limits.max_code_bytes
        )));
    }
    let cid = cid::cid_v0(code.as_bytes());
    let (owner, cap) = match auth {
        Some(auth) => (
            CodeOwner::Account(auth.account),
            limits.code_quota_bytes_per_account,
        ),
        None => (CodeOwner::Anonymous, limits.code_cache_bytes),
    };
    state
        .store
        .put_code(owner, cid.clone(), code.into_bytes(), cap)
        .await?;
    Ok(Json(cid))
}
