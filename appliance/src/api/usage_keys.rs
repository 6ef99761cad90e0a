//! Usage API keys: scoped, rotatable keys that only the account key may manage.

use appliance_api::error::ErrorBody;
use appliance_api::usage_keys::{
    AddUsageApiKeyRequest, AddUsageApiKeyResponse, RemoveUsageApiKeyRequest,
    UpdateUsageApiKeyMetadataRequest, UpdateUsageApiKeyRequest, UsageKeyItem, WirePermissions,
};
use appliance_api::{PagingParams, Success, WireU64};
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

/// The permission fields of a request, checked: at most [`MAX_GROUP_IDS`] ids in each
/// array (the error names the field). Omitted fields mean "not granted".
fn permissions(fields: WirePermissions) -> Result<Permissions, ApiError> {
    fields.try_map_sets(|field, ids| {
        if ids.len() > MAX_GROUP_IDS {
            return Err(ApiError::bad_request(format!(
                "`{field}` lists more than {MAX_GROUP_IDS} groups"
            )));
        }
        Ok(GroupSet::new(ids.into_iter().map(|id| id.0).collect()))
    })
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
    let permissions = permissions(req.permissions())?;
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
    UsageKeyItem {
        id: r.id.0.to_string(),
        api_key_hash: r.key_hash.to_string(),
        name: r.name,
        description: r.description,
        ..UsageKeyItem::default()
    }
    .with_permissions(
        r.permissions
            .map_sets(|set| set.ids().iter().copied().map(WireU64).collect()),
    )
}

/// Lists the account's usage keys in creation order (account key only).
#[utoipa::path(
    get,
    path = "/list_api_keys",
    tag = "usage keys",
    security(("bearer" = []), ("api_key" = [])),
    params(PagingParams),
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
    let permissions = permissions(req.permissions())?;
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn wire(ids: &[u64]) -> Vec<WireU64> {
        ids.iter().copied().map(WireU64).collect()
    }

    /// Each array becomes the set of its own field (sorted, without duplicates), and an
    /// array over the limit is refused by its field's name.
    #[test]
    fn request_permissions_are_checked_field_by_field() {
        let fields = WirePermissions {
            can_create_groups: false,
            can_delete_groups: true,
            can_create_pkps: false,
            manage_ipfs_ids_in_groups: wire(&[1]),
            add_pkp_to_groups: wire(&[2, 2]),
            remove_pkp_from_groups: wire(&[3]),
            execute_in_groups: wire(&[44, 4]),
        };
        assert_eq!(
            permissions(fields.clone()).unwrap(),
            Permissions {
                can_delete_groups: true,
                manage_ipfs_ids_in_groups: GroupSet::new(vec![1]),
                add_pkp_to_groups: GroupSet::new(vec![2]),
                remove_pkp_from_groups: GroupSet::new(vec![3]),
                execute_in_groups: GroupSet::new(vec![4, 44]),
                ..Permissions::default()
            }
        );

        let too_many = wire(&vec![7; MAX_GROUP_IDS + 1]);
        let over = |set: fn(&mut WirePermissions) -> &mut Vec<WireU64>| {
            let mut fields = fields.clone();
            *set(&mut fields) = too_many.clone();
            match permissions(fields) {
                Err(ApiError::BadRequest(message)) => message,
                other => panic!("{other:?}"),
            }
        };
        let limit = format!("lists more than {MAX_GROUP_IDS} groups");
        assert_eq!(
            over(|p| &mut p.manage_ipfs_ids_in_groups),
            format!("`manage_ipfs_ids_in_groups` {limit}")
        );
        assert_eq!(
            over(|p| &mut p.add_pkp_to_groups),
            format!("`add_pkp_to_groups` {limit}")
        );
        assert_eq!(
            over(|p| &mut p.remove_pkp_from_groups),
            format!("`remove_pkp_from_groups` {limit}")
        );
        assert_eq!(
            over(|p| &mut p.execute_in_groups),
            format!("`execute_in_groups` {limit}")
        );
        // Exactly at the limit is fine.
        let mut at_limit = fields;
        at_limit.execute_in_groups = wire(&vec![7; MAX_GROUP_IDS]);
        assert!(permissions(at_limit).is_ok());
    }
}
