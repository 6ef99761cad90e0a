//! Usage API keys: scoped, rotatable keys that only the account key may manage.

use appliance_api::error::ErrorBody;
use appliance_api::usage_keys::{
    AddUsageApiKeyRequest, AddUsageApiKeyResponse, RemoveUsageApiKeyRequest,
    UpdateUsageApiKeyMetadataRequest, UpdateUsageApiKeyRequest, UsageKeyItem,
};
use appliance_api::{Success, WireU64};
use axum::Json;
use axum::extract::State;

use super::{
    AuthErrors, BodyErrors, MAX_DESCRIPTION_LEN, MAX_GROUP_IDS, MAX_NAME_LEN, ServerErrors,
    check_text, success,
};
use crate::api_keys::{ApiSecret, KeyHash, key_hash_from_reference};
use crate::authz::{GroupSet, Operation, Permissions, authorize};
use crate::error::ApiError;
use crate::http::auth::Auth;
use crate::http::billed::Billed;
use crate::http::extract::{JsonBody, Paging, limit};
use crate::state::AppState;
use crate::store::{NewUsageKey, UsageKeyRecord};

/// The permission fields of a usage key as sent. Omitted fields mean "not granted".
/// (Spelled out in each request type rather than `#[serde(flatten)]`ed, so that a bad
/// value's error names its field.)
#[derive(Debug, Default)]
pub struct PermissionFields {
    pub can_create_groups: bool,
    pub can_delete_groups: bool,
    pub can_create_pkps: bool,
    pub manage_ipfs_ids_in_groups: Vec<WireU64>,
    pub add_pkp_to_groups: Vec<WireU64>,
    pub remove_pkp_from_groups: Vec<WireU64>,
    pub execute_in_groups: Vec<WireU64>,
}

/// Moves the seven permission fields of a request into `PermissionFields`.
macro_rules! permission_fields {
    ($req:expr) => {
        PermissionFields {
            can_create_groups: $req.can_create_groups,
            can_delete_groups: $req.can_delete_groups,
            can_create_pkps: $req.can_create_pkps,
            manage_ipfs_ids_in_groups: $req.manage_ipfs_ids_in_groups,
            add_pkp_to_groups: $req.add_pkp_to_groups,
            remove_pkp_from_groups: $req.remove_pkp_from_groups,
            execute_in_groups: $req.execute_in_groups,
        }
    };
}

impl PermissionFields {
    fn into_permissions(self) -> Result<Permissions, ApiError> {
        let set = |field: &str, ids: Vec<WireU64>| {
            if ids.len() > MAX_GROUP_IDS {
                return Err(ApiError::bad_request(format!(
                    "`{field}` lists more than {MAX_GROUP_IDS} groups"
                )));
            }
            Ok(GroupSet::new(ids.into_iter().map(|id| id.0).collect()))
        };
        Ok(Permissions {
            can_create_groups: self.can_create_groups,
            can_delete_groups: self.can_delete_groups,
            can_create_pkps: self.can_create_pkps,
            manage_ipfs_ids_in_groups: set(
                "manage_ipfs_ids_in_groups",
                self.manage_ipfs_ids_in_groups,
            )?,
            add_pkp_to_groups: set("add_pkp_to_groups", self.add_pkp_to_groups)?,
            remove_pkp_from_groups: set("remove_pkp_from_groups", self.remove_pkp_from_groups)?,
            execute_in_groups: set("execute_in_groups", self.execute_in_groups)?,
        })
    }
}

fn check_metadata(name: &str, description: &str) -> Result<(), ApiError> {
    check_text("name", name, MAX_NAME_LEN)?;
    check_text("description", description, MAX_DESCRIPTION_LEN)
}

/// Creates a usage key with the given permissions (account key only).
#[utoipa::path(
    post,
    path = "/add_usage_api_key",
    tag = "usage keys",
    security(("bearer" = []), ("api_key" = [])),
    request_body = AddUsageApiKeyRequest,
    responses(
        (status = 200, description = "The key, shown once", body = AddUsageApiKeyResponse),
        BodyErrors,
        AuthErrors,
        ServerErrors,
        Billed,
    )
)]
pub async fn add_usage_api_key(
    State(state): State<AppState>,
    billed: Billed,
    JsonBody(req): JsonBody<AddUsageApiKeyRequest, { limit::LISTS }>,
) -> Result<Json<AddUsageApiKeyResponse>, ApiError> {
    authorize(&billed.credential, Operation::ManageAccount)?;
    check_metadata(&req.name, &req.description)?;
    let permissions = permission_fields!(req).into_permissions()?;
    let secret = ApiSecret::generate().map_err(|e| ApiError::Internal(e.to_string()))?;
    let record = state
        .store
        .add_usage_key(
            billed.account,
            NewUsageKey {
                key_hash: secret.hash(),
                name: req.name,
                description: req.description,
                permissions,
            },
            billed.charge,
        )
        .await?;
    tracing::info!(usage_key_id = record.id.0, "usage key created");
    Ok(Json(AddUsageApiKeyResponse {
        success: true,
        usage_api_key: secret.to_base64().to_string(),
        api_key_hash: record.key_hash.to_string(),
    }))
}

/// A usage key record as listed.
fn usage_key_item(r: UsageKeyRecord) -> UsageKeyItem {
    let wire = |set: &GroupSet| set.ids().iter().copied().map(WireU64).collect();
    let p = &r.permissions;
    UsageKeyItem {
        id: r.id.0.to_string(),
        api_key_hash: r.key_hash.to_string(),
        can_create_groups: p.can_create_groups,
        can_delete_groups: p.can_delete_groups,
        can_create_pkps: p.can_create_pkps,
        manage_ipfs_ids_in_groups: wire(&p.manage_ipfs_ids_in_groups),
        add_pkp_to_groups: wire(&p.add_pkp_to_groups),
        remove_pkp_from_groups: wire(&p.remove_pkp_from_groups),
        execute_in_groups: wire(&p.execute_in_groups),
        name: r.name,
        description: r.description,
    }
}

/// Lists the account's usage keys in creation order (account key only).
#[utoipa::path(
    get,
    path = "/list_api_keys",
    tag = "usage keys",
    security(("bearer" = []), ("api_key" = [])),
    params(
        ("page_number" = Option<u64>, Query, description = "0-based page, default 0"),
        ("page_size" = Option<u32>, Query, description = "Items per page, default 100, at most 1000 (larger is clamped)"),
    ),
    responses(
        (status = 200, description = "One page of keys; past the end, an empty array", body = Vec<UsageKeyItem>),
        (status = 400, description = "Malformed paging", body = ErrorBody),
        AuthErrors,
        ServerErrors,
    )
)]
pub async fn list_api_keys(
    State(state): State<AppState>,
    auth: Auth,
    Paging(page): Paging,
) -> Result<Json<Vec<UsageKeyItem>>, ApiError> {
    authorize(&auth.credential, Operation::ManageAccount)?;
    let keys = state.store.list_usage_keys(auth.account, page).await?;
    Ok(Json(keys.into_iter().map(usage_key_item).collect()))
}

fn key_reference(reference: &str) -> Result<KeyHash, ApiError> {
    key_hash_from_reference(reference).map_err(|_| {
        ApiError::bad_request(
            "`usage_api_key` must be the key's value or its 0x-prefixed 64-hex hash",
        )
    })
}

/// Replaces a usage key's whole permission set (account key only). Effective on the
/// next request made with the key.
#[utoipa::path(
    post,
    path = "/update_usage_api_key",
    tag = "usage keys",
    security(("bearer" = []), ("api_key" = [])),
    request_body = UpdateUsageApiKeyRequest,
    responses(
        (status = 200, description = "Done", body = Success),
        (status = 404, description = "No such key on this account", body = ErrorBody),
        BodyErrors,
        AuthErrors,
        ServerErrors,
        Billed,
    )
)]
pub async fn update_usage_api_key(
    State(state): State<AppState>,
    billed: Billed,
    JsonBody(req): JsonBody<UpdateUsageApiKeyRequest, { limit::LISTS }>,
) -> Result<Json<Success>, ApiError> {
    authorize(&billed.credential, Operation::ManageAccount)?;
    let key = key_reference(&req.usage_api_key)?;
    if let Some(name) = &req.name {
        check_text("name", name, MAX_NAME_LEN)?;
    }
    if let Some(description) = &req.description {
        check_text("description", description, MAX_DESCRIPTION_LEN)?;
    }
    let permissions = permission_fields!(req).into_permissions()?;
    state
        .store
        .update_usage_key(
            billed.account,
            key,
            permissions,
            req.name,
            req.description,
            billed.charge,
        )
        .await?;
    Ok(success())
}

/// Changes a usage key's name and description (account key only).
#[utoipa::path(
    post,
    path = "/update_usage_api_key_metadata",
    tag = "usage keys",
    security(("bearer" = []), ("api_key" = [])),
    request_body = UpdateUsageApiKeyMetadataRequest,
    responses(
        (status = 200, description = "Done", body = Success),
        (status = 404, description = "No such key on this account", body = ErrorBody),
        BodyErrors,
        AuthErrors,
        ServerErrors,
        Billed,
    )
)]
pub async fn update_usage_api_key_metadata(
    State(state): State<AppState>,
    billed: Billed,
    JsonBody(req): JsonBody<UpdateUsageApiKeyMetadataRequest>,
) -> Result<Json<Success>, ApiError> {
    authorize(&billed.credential, Operation::ManageAccount)?;
    let key = key_reference(&req.usage_api_key)?;
    check_metadata(&req.name, &req.description)?;
    state
        .store
        .update_usage_key_metadata(
            billed.account,
            key,
            req.name,
            req.description,
            billed.charge,
        )
        .await?;
    Ok(success())
}

/// Removes a usage key (account key only). The very next request with it gets 401.
#[utoipa::path(
    post,
    path = "/remove_usage_api_key",
    tag = "usage keys",
    security(("bearer" = []), ("api_key" = [])),
    request_body = RemoveUsageApiKeyRequest,
    responses(
        (status = 200, description = "Done", body = Success),
        (status = 404, description = "No such key on this account", body = ErrorBody),
        BodyErrors,
        AuthErrors,
        ServerErrors,
        Billed,
    )
)]
pub async fn remove_usage_api_key(
    State(state): State<AppState>,
    billed: Billed,
    JsonBody(req): JsonBody<RemoveUsageApiKeyRequest>,
) -> Result<Json<Success>, ApiError> {
    authorize(&billed.credential, Operation::ManageAccount)?;
    let key = key_reference(&req.usage_api_key)?;
    state
        .store
        .remove_usage_key(billed.account, key, billed.charge)
        .await?;
    tracing::info!("usage key removed");
    Ok(success())
}
