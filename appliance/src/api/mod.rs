//! The HTTP API: handlers grouped by domain, the checks they share, and [`routes`],
//! the table of every route with its OpenAPI description. The `/core/v1` wire types
//! (request, query and response bodies) live in the `appliance-api` crate
//! (`appliance/api`), which clients share; validation stays here.
//!
//! Handlers are small: extract (the caller, and for a billed write its charge: see
//! `crate::http::billed`), authorize, call the store (or another domain module), respond.
//! Handler modules never import each other; what two of them share lives here. Wire names
//! and shapes follow the spec, then the reference (`docs/compatibility.md`).

pub mod accounts;
pub mod actions;
pub mod attestation;
pub mod billing;
pub mod chain;
pub mod execution;
pub mod groups;
pub mod operator;
pub mod signatures;
pub mod system;
pub mod usage_keys;
pub mod wallets;
#[cfg(test)]
mod wire_formats;

use appliance_api::error::ErrorBody;
use appliance_api::{PermittedCidHash, PkpIdOrAddress, Success};
use axum::Router;
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::ApiError;
use crate::http::API_PREFIX;
use crate::openapi::ApiDoc;
use crate::state::AppState;

/// The `/core/v1` routes with their descriptions.
fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(accounts::new_account))
        .routes(routes!(accounts::account_exists))
        .routes(routes!(usage_keys::add_usage_api_key))
        .routes(routes!(usage_keys::list_api_keys))
        .routes(routes!(usage_keys::update_usage_api_key))
        .routes(routes!(usage_keys::update_usage_api_key_metadata))
        .routes(routes!(usage_keys::remove_usage_api_key))
        .routes(routes!(
            wallets::create_wallet_get,
            wallets::create_wallet_post
        ))
        .routes(routes!(wallets::list_wallets))
        .routes(routes!(wallets::list_wallets_in_group))
        .routes(routes!(groups::add_group))
        .routes(routes!(groups::list_groups))
        .routes(routes!(groups::update_group))
        .routes(routes!(groups::remove_group))
        .routes(routes!(groups::add_pkp_to_group))
        .routes(routes!(groups::remove_pkp_from_group))
        .routes(routes!(groups::add_action_to_group))
        .routes(routes!(groups::remove_action_from_group))
        .routes(routes!(actions::add_action))
        .routes(routes!(actions::delete_action))
        .routes(routes!(actions::update_action_metadata))
        .routes(routes!(actions::list_actions))
        .routes(routes!(actions::get_lit_action_ipfs_id))
        .routes(routes!(execution::lit_action))
        .routes(routes!(execution::get_lit_action_client_config))
        .routes(routes!(chain::get_node_chain_config))
        .routes(routes!(chain::get_api_payers))
        .routes(routes!(chain::get_admin_api_payer))
        .routes(routes!(billing::stripe_config))
        .routes(routes!(billing::balance))
        .routes(routes!(billing::usage))
        .routes(routes!(billing::create_payment_intent))
        .routes(routes!(billing::confirm_payment))
        .routes(routes!(billing::prices))
        .routes(routes!(signatures::create_wallet_with_signature))
        .routes(routes!(signatures::add_usage_api_key_with_signature))
        .routes(routes!(signatures::convert_to_chain_secured_account))
}

/// Every route, and the OpenAPI document describing the documented ones (served by
/// `crate::http::app`): all but the operator's day-2 endpoints ([`operator`]), which
/// API clients have no use for (docs/operators.md documents them).
pub fn routes() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let (router, document) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .nest(API_PREFIX, api_routes())
        .routes(routes!(system::health))
        .routes(routes!(system::version))
        .routes(routes!(attestation::attestation))
        .routes(routes!(attestation::info))
        .routes(routes!(attestation::evidences_index))
        .routes(routes!(attestation::evidence_quote))
        .routes(routes!(attestation::evidence_file))
        .split_for_parts();
    (router.merge(operator::routes()), document)
}

/// The `{"success": true}` answer.
pub fn success() -> axum::Json<Success> {
    axum::Json(Success { success: true })
}

/// Largest name, description and email accepted, in bytes (the wire schemas of
/// `appliance_api::text` state the same limits).
pub const MAX_NAME_LEN: usize = appliance_api::text::MAX_NAME_BYTES;
pub const MAX_DESCRIPTION_LEN: usize = appliance_api::text::MAX_DESCRIPTION_BYTES;
pub const MAX_EMAIL_LEN: usize = appliance_api::text::MAX_EMAIL_BYTES;
/// Largest number of group ids in one permission array.
pub const MAX_GROUP_IDS: usize = 1000;

/// Checks a text field's length (in bytes) and that it has no control characters.
pub fn check_text(field: &str, value: &str, max: usize) -> Result<(), ApiError> {
    if value.len() > max {
        return Err(ApiError::bad_request(format!(
            "`{field}` is longer than {max} bytes"
        )));
    }
    if value
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Err(ApiError::bad_request(format!(
            "`{field}` contains control characters"
        )));
    }
    Ok(())
}

/// Errors of any endpoint that reads a JSON body.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub enum BodyErrors {
    /// Malformed JSON or an invalid field.
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// The body is larger than this endpoint's limit (`docs/compatibility.md`, "Request
    /// bodies": 8 KiB for wallet-signature requests, 16 KiB for small writes, 256 KiB for
    /// permission lists, twice the action limits plus 16 KiB for code and runs), or a
    /// field is larger than its own limit.
    #[response(status = 413)]
    TooLarge(ErrorBody),
    /// The body is not `application/json`.
    #[response(status = 415)]
    NotJson(ErrorBody),
}

/// Errors of any endpoint that needs a key.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub enum AuthErrors {
    /// No credential, or one that authenticates nobody: an unknown, revoked or malformed
    /// key (or `X-Wallet-Auth`).
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// The key lacks the permission.
    #[response(status = 403)]
    Forbidden(ErrorBody),
}

/// The answer of an endpoint that needs no credential to a client over its rate limit
/// (`crate::http::rate_limit`).
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub enum RateLimited {
    /// Too many requests from this client address; retry after `Retry-After` seconds.
    #[response(
        status = 429,
        headers(("Retry-After" = u64, description = "Whole seconds until the client may retry"))
    )]
    TooMany(ErrorBody),
}

/// Errors any endpoint may answer with.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub enum ServerErrors {
    /// Too many requests: this client is over a rate limit, or the service is at its
    /// capacity for this kind of request. `Retry-After` (seconds), when present, says when
    /// to try again.
    #[response(
        status = 429,
        headers(("Retry-After" = u64, description = "Whole seconds until the client may retry (always sent by the per-client rate limits)"))
    )]
    TooManyRequests(ErrorBody),
    /// A bug; details are logged under the request id.
    #[response(status = 500)]
    Internal(ErrorBody),
    /// A dependency is unavailable, or the request timed out.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}

use keyservice_api::PkpId;
use keyservice_api::types::parse_hex_array;

use crate::store::{CidHash, Permitted, WalletRef};

pub use crate::wallet::parse_wallet_ref;

fn is_zero_wallet(wallet: &WalletRef) -> bool {
    match wallet {
        WalletRef::Pkp(id) => id.0 == [0; 32],
        WalletRef::Address(a) => a.0 == [0; 20],
    }
}

/// A group's `pkp_ids_permitted`: the zero pkp_id or zero address means all wallets.
pub fn parse_permitted_wallets(
    field: &str,
    items: &[PkpIdOrAddress],
) -> Result<Permitted<WalletRef>, ApiError> {
    check_list_len(field, items.len())?;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let wallet = parse_wallet_ref(field, item)?;
        if is_zero_wallet(&wallet) {
            return Ok(Permitted::All);
        }
        out.push(wallet);
    }
    Ok(Permitted::Only(out))
}

/// Validates a raw CID from a client and hashes it.
pub fn parse_raw_cid(text: &str) -> Result<(String, CidHash), ApiError> {
    let parsed = crate::cid::parse_cid(text).map_err(|e| {
        ApiError::bad_request(format!("`action_ipfs_cid` is not a valid IPFS CID: {e}"))
    })?;
    let cid = parsed.as_str().to_owned();
    let hash = CidHash(crate::cid::hashed_cid(&cid));
    Ok((cid, hash))
}

/// Parses a hashed CID (`0x` + 64 hex).
pub fn parse_cid_hash(field: &str, text: &str) -> Result<CidHash, ApiError> {
    parse_hex_array::<32>(text.trim())
        .map(CidHash)
        .map_err(|_| ApiError::bad_request(format!("`{field}` must be a hashed CID: 0x + 64 hex")))
}

/// A group's `cid_hashes_permitted`: `0` (also written `0.0`: JSON Schema's integer
/// 0), `"0"` or 32 zero bytes means all actions.
pub fn parse_permitted_actions(
    field: &str,
    items: &[PermittedCidHash],
) -> Result<Permitted<CidHash>, ApiError> {
    check_list_len(field, items.len())?;
    let mut out = Vec::with_capacity(items.len());
    for PermittedCidHash(item) in items {
        let hash = match item {
            serde_json::Value::Number(n) if n.as_f64() == Some(0.0) => return Ok(Permitted::All),
            serde_json::Value::String(s) if s.trim() == "0" => return Ok(Permitted::All),
            serde_json::Value::String(s) => parse_cid_hash(field, s)?,
            _ => {
                return Err(ApiError::bad_request(format!(
                    "`{field}` holds hashed CIDs (0x + 64 hex) or 0 for all actions"
                )));
            }
        };
        if hash.0 == [0; 32] {
            return Ok(Permitted::All);
        }
        out.push(hash);
    }
    Ok(Permitted::Only(out))
}

fn check_list_len(field: &str, len: usize) -> Result<(), ApiError> {
    if len > MAX_GROUP_IDS {
        return Err(ApiError::bad_request(format!(
            "`{field}` lists more than {MAX_GROUP_IDS} entries"
        )));
    }
    Ok(())
}

/// The wire form of a permitted wallet set.
pub fn wire_wallets(set: &Permitted<PkpId>) -> Vec<String> {
    match set {
        Permitted::All => vec![PkpId([0; 32]).to_hex()],
        Permitted::Only(ids) => ids.iter().map(PkpId::to_hex).collect(),
    }
}

/// The wire form of a permitted action set.
pub fn wire_actions(set: &Permitted<CidHash>) -> Vec<String> {
    match set {
        Permitted::All => vec!["0".to_owned()],
        Permitted::Only(hashes) => hashes.iter().map(CidHash::to_string).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_in_permitted_sets() {
        let zero_pkp = format!("0x{}", "0".repeat(64));
        let zero_addr = format!("0x{}", "0".repeat(40));
        for all in [
            vec![zero_pkp.clone()],
            vec![zero_addr],
            vec![format!("0x{}", "1".repeat(64)), zero_pkp.clone()],
        ] {
            let all: Vec<PkpIdOrAddress> = all.into_iter().map(Into::into).collect();
            assert_eq!(parse_permitted_wallets("f", &all).unwrap(), Permitted::All);
        }
        for all in [
            serde_json::json!([0]),
            serde_json::json!([0.0]),
            serde_json::json!(["0"]),
            serde_json::json!([zero_pkp]),
        ] {
            let all: Vec<PermittedCidHash> = serde_json::from_value(all).unwrap();
            assert_eq!(parse_permitted_actions("f", &all).unwrap(), Permitted::All);
        }
        for bad in [
            serde_json::json!(1),
            serde_json::json!(0.5),
            serde_json::json!(null),
        ] {
            assert!(parse_permitted_actions("f", &[PermittedCidHash(bad)]).is_err());
        }
        assert!(parse_permitted_wallets("f", &["0x12".into()]).is_err());
        assert_eq!(wire_actions(&Permitted::All), vec!["0".to_owned()]);
        assert_eq!(wire_wallets(&Permitted::All), vec![zero_pkp]);
    }
}
