//! Groups: bind wallets and actions; usage keys reach them through their per-group
//! permission arrays. Every handler authorizes first (403), then the store decides
//! existence within the caller's account (404).

use appliance_api::error::ErrorBody;
use appliance_api::groups::{
    AddActionToGroupRequest, AddGroupRequest, AddGroupResponse, GroupIdRequest, GroupItem,
    GroupWalletRequest, RemoveActionFromGroupRequest, UpdateGroupRequest,
};
use appliance_api::{HashedCidResponse, PagingParams, PermittedCidHash, PkpIdOrAddress, Success};
use axum::Json;
use axum::extract::State;

use super::{
    AuthErrors, BodyErrors, MAX_DESCRIPTION_LEN, MAX_NAME_LEN, ServerErrors, check_text,
    parse_cid_hash, parse_permitted_actions, parse_permitted_wallets, parse_raw_cid,
    parse_wallet_ref, success, wire_actions, wire_wallets,
};
use crate::authz::{GroupId, Operation, authorize};
use crate::error::ApiError;
use crate::http::auth::Auth;
use crate::http::billed::Billed;
use crate::http::extract::{JsonBody, Paging, limit};
use crate::state::AppState;
use crate::store::{GroupRecord, GroupSpec};

fn group_spec(
    name: String,
    description: String,
    pkp_ids: &[PkpIdOrAddress],
    cid_hashes: &[PermittedCidHash],
) -> Result<GroupSpec, ApiError> {
    check_text("name", &name, MAX_NAME_LEN)?;
    check_text("description", &description, MAX_DESCRIPTION_LEN)?;
    Ok(GroupSpec {
        name,
        description,
        wallets: parse_permitted_wallets("pkp_ids_permitted", pkp_ids)?,
        actions: parse_permitted_actions("cid_hashes_permitted", cid_hashes)?,
    })
}

/// A new group's name is not blank (then checked as any name, in [`group_spec`]; the wire
/// schema of `appliance_api::text::group_name` says both).
pub(super) fn check_group_name(name: &str) -> Result<(), ApiError> {
    if name.trim().is_empty() {
        return Err(ApiError::bad_request("`group_name` must not be empty"));
    }
    Ok(())
}

/// Creates a group (account key, or a usage key with `can_create_groups`).
#[utoipa::path(
    post,
    path = "/add_group",
    tag = "groups",
    security(("bearer" = []), ("api_key" = [])),
    request_body = AddGroupRequest,
    responses(
        (status = 200, description = "The group was created", body = AddGroupResponse),
        (status = 404, description = "A listed wallet or action is not in this account", body = ErrorBody),
        BodyErrors,
        AuthErrors,
        ServerErrors,
        Billed,
    )
)]
pub async fn add_group(
    State(state): State<AppState>,
    billed: Billed,
    JsonBody(req): JsonBody<AddGroupRequest, { limit::LISTS }>,
) -> Result<Json<AddGroupResponse>, ApiError> {
    authorize(&billed.credential, Operation::CreateGroup)?;
    check_group_name(&req.group_name)?;
    let spec = group_spec(
        req.group_name,
        req.group_description,
        &req.pkp_ids_permitted,
        &req.cid_hashes_permitted,
    )?;
    let id = state
        .store
        .add_group(billed.account, spec, billed.charge)
        .await?;
    Ok(Json(AddGroupResponse {
        success: true,
        group_id: id.to_string(),
    }))
}

/// A group record as listed.
fn group_item(g: GroupRecord) -> GroupItem {
    GroupItem {
        id: g.id.to_string(),
        pkp_ids_permitted: wire_wallets(&g.wallets),
        cid_hashes_permitted: wire_actions(&g.actions),
        name: g.name,
        description: g.description,
    }
}

/// The account's groups in creation order.
#[utoipa::path(
    get,
    path = "/list_groups",
    tag = "groups",
    security(("bearer" = []), ("api_key" = [])),
    params(PagingParams),
    responses(
        (status = 200, description = "One page of groups", body = Vec<GroupItem>),
        (status = 400, description = "Malformed paging", body = ErrorBody),
        AuthErrors,
        ServerErrors,
    )
)]
pub async fn list_groups(
    State(state): State<AppState>,
    auth: Auth,
    Paging(page): Paging,
) -> Result<Json<Vec<GroupItem>>, ApiError> {
    authorize(&auth.credential, Operation::ReadAccount)?;
    let groups = state.store.list_groups(auth.account, page).await?;
    Ok(Json(groups.into_iter().map(group_item).collect()))
}

/// Replaces a group's name, description and both permitted sets (account key, or a
/// usage key whose three per-group arrays all cover the group).
#[utoipa::path(
    post,
    path = "/update_group",
    tag = "groups",
    security(("bearer" = []), ("api_key" = [])),
    request_body = UpdateGroupRequest,
    responses(
        (status = 200, description = "Done", body = Success),
        (status = 404, description = "No such group, wallet or action in this account", body = ErrorBody),
        BodyErrors,
        AuthErrors,
        ServerErrors,
        Billed,
    )
)]
pub async fn update_group(
    State(state): State<AppState>,
    billed: Billed,
    JsonBody(req): JsonBody<UpdateGroupRequest, { limit::LISTS }>,
) -> Result<Json<Success>, ApiError> {
    let group = GroupId(req.group_id.0);
    authorize(&billed.credential, Operation::UpdateGroup(group))?;
    let spec = group_spec(
        req.name,
        req.description,
        &req.pkp_ids_permitted,
        &req.cid_hashes_permitted,
    )?;
    state
        .store
        .update_group(billed.account, group, spec, billed.charge)
        .await?;
    Ok(success())
}

/// Removes a group (account key, or a usage key with `can_delete_groups`). Usage keys
/// that listed it lose that access at once; its id is never reused.
#[utoipa::path(
    post,
    path = "/remove_group",
    tag = "groups",
    security(("bearer" = []), ("api_key" = [])),
    request_body = GroupIdRequest,
    responses(
        (status = 200, description = "Done", body = Success),
        (status = 404, description = "No such group in this account", body = ErrorBody),
        BodyErrors,
        AuthErrors,
        ServerErrors,
        Billed,
    )
)]
pub async fn remove_group(
    State(state): State<AppState>,
    billed: Billed,
    JsonBody(req): JsonBody<GroupIdRequest>,
) -> Result<Json<Success>, ApiError> {
    authorize(&billed.credential, Operation::DeleteGroup)?;
    state
        .store
        .remove_group(billed.account, GroupId(req.group_id.0), billed.charge)
        .await?;
    Ok(success())
}

/// Permits a wallet in a group (account key, or `add_pkp_to_groups` covering it).
#[utoipa::path(
    post,
    path = "/add_pkp_to_group",
    tag = "groups",
    security(("bearer" = []), ("api_key" = [])),
    request_body = GroupWalletRequest,
    responses(
        (status = 200, description = "Done (also if it was already permitted)", body = Success),
        (status = 404, description = "No such group or wallet in this account", body = ErrorBody),
        BodyErrors,
        AuthErrors,
        ServerErrors,
        Billed,
    )
)]
pub async fn add_pkp_to_group(
    State(state): State<AppState>,
    billed: Billed,
    JsonBody(req): JsonBody<GroupWalletRequest>,
) -> Result<Json<Success>, ApiError> {
    let group = GroupId(req.group_id.0);
    authorize(&billed.credential, Operation::AddPkpToGroup(group))?;
    let wallet = parse_wallet_ref("pkp_id", &req.pkp_id)?;
    state
        .store
        .add_wallet_to_group(billed.account, group, wallet, billed.charge)
        .await?;
    Ok(success())
}

/// Withdraws a wallet from a group (account key, or `remove_pkp_from_groups` covering it).
#[utoipa::path(
    post,
    path = "/remove_pkp_from_group",
    tag = "groups",
    security(("bearer" = []), ("api_key" = [])),
    request_body = GroupWalletRequest,
    responses(
        (status = 200, description = "Done", body = Success),
        (status = 404, description = "No such group or wallet, or the wallet is not in the group", body = ErrorBody),
        (status = 409, description = "The group permits all wallets; use update_group to list them explicitly", body = ErrorBody),
        BodyErrors,
        AuthErrors,
        ServerErrors,
        Billed,
    )
)]
pub async fn remove_pkp_from_group(
    State(state): State<AppState>,
    billed: Billed,
    JsonBody(req): JsonBody<GroupWalletRequest>,
) -> Result<Json<Success>, ApiError> {
    let group = GroupId(req.group_id.0);
    authorize(&billed.credential, Operation::RemovePkpFromGroup(group))?;
    let wallet = parse_wallet_ref("pkp_id", &req.pkp_id)?;
    state
        .store
        .remove_wallet_from_group(billed.account, group, wallet, billed.charge)
        .await?;
    Ok(success())
}

/// Permits an action in a group, registering it on the account if it is not yet
/// (account key, or `manage_ipfs_ids_in_groups` covering the group).
#[utoipa::path(
    post,
    path = "/add_action_to_group",
    tag = "groups",
    security(("bearer" = []), ("api_key" = [])),
    request_body = AddActionToGroupRequest,
    responses(
        (status = 200, description = "Done (also if it was already permitted)", body = HashedCidResponse),
        (status = 404, description = "No such group in this account", body = ErrorBody),
        BodyErrors,
        AuthErrors,
        ServerErrors,
        Billed,
    )
)]
pub async fn add_action_to_group(
    State(state): State<AppState>,
    billed: Billed,
    JsonBody(req): JsonBody<AddActionToGroupRequest>,
) -> Result<Json<HashedCidResponse>, ApiError> {
    let group = GroupId(req.group_id.0);
    authorize(&billed.credential, Operation::ManageActionsInGroup(group))?;
    let (cid, hash) = parse_raw_cid(&req.action_ipfs_cid)?;
    state
        .store
        .add_action_to_group(billed.account, group, cid, hash, billed.charge)
        .await?;
    Ok(Json(HashedCidResponse {
        success: true,
        hashed_cid: hash.to_string(),
    }))
}

/// Withdraws an action from a group (account key, or `manage_ipfs_ids_in_groups`
/// covering the group).
#[utoipa::path(
    post,
    path = "/remove_action_from_group",
    tag = "groups",
    security(("bearer" = []), ("api_key" = [])),
    request_body = RemoveActionFromGroupRequest,
    responses(
        (status = 200, description = "Done", body = Success),
        (status = 404, description = "No such group or action, or the action is not in the group", body = ErrorBody),
        (status = 409, description = "The group permits all actions; use update_group to list them explicitly", body = ErrorBody),
        BodyErrors,
        AuthErrors,
        ServerErrors,
        Billed,
    )
)]
pub async fn remove_action_from_group(
    State(state): State<AppState>,
    billed: Billed,
    JsonBody(req): JsonBody<RemoveActionFromGroupRequest>,
) -> Result<Json<Success>, ApiError> {
    let group = GroupId(req.group_id.0);
    authorize(&billed.credential, Operation::ManageActionsInGroup(group))?;
    let hash = parse_cid_hash("hashed_cid", &req.hashed_cid)?;
    state
        .store
        .remove_action_from_group(billed.account, group, hash, billed.charge)
        .await?;
    Ok(success())
}
