//! Accounts (API mode): creation and key verification.

use appliance_api::accounts::{NewAccountRequest, NewAccountResponse};
use appliance_api::error::ErrorBody;
use axum::Json;
use axum::extract::State;

use super::{
    BodyErrors, MAX_DESCRIPTION_LEN, MAX_EMAIL_LEN, MAX_NAME_LEN, ServerErrors, check_text,
};
use crate::api_keys::ApiSecret;
use crate::error::ApiError;
use crate::http::auth::SentKey;
use crate::http::billed::StartingCredit;
use crate::http::extract::JsonBody;
use crate::state::AppState;
use crate::store::{NewAccount, WalletIdentity};
use crate::wallet::account_wallet_path;

/// Creates an API-mode account and returns its account key, once.
#[utoipa::path(
    post,
    path = "/new_account",
    tag = "accounts",
    request_body = NewAccountRequest,
    responses(
        super::RateLimited,
        (status = 200, description = "The account was created", body = NewAccountResponse),
        BodyErrors,
        ServerErrors,
    )
)]
pub async fn new_account(
    State(state): State<AppState>,
    StartingCredit(credit): StartingCredit,
    JsonBody(req): JsonBody<NewAccountRequest>,
) -> Result<Json<NewAccountResponse>, ApiError> {
    let name = account_name(&req.account_name)?;
    let description = req.account_description.unwrap_or_default();
    check_text("account_description", &description, MAX_DESCRIPTION_LEN)?;
    let email = email(req.email)?;

    let secret = ApiSecret::generate().map_err(|e| ApiError::Internal(e.to_string()))?;
    let api_key_hash = secret.hash();
    // The wallet comes from keyservice before anything is stored: if keyservice is
    // down, the request fails with 503 and leaves nothing behind.
    let derivation_path = account_wallet_path(&api_key_hash);
    let wallet = state.keys.wallet(&derivation_path).await?;
    state
        .store
        .create_account(
            NewAccount {
                api_key_hash,
                name,
                description,
                email,
                wallet: WalletIdentity {
                    pkp_id: wallet.pkp_id,
                    address: wallet.address,
                    derivation_path,
                },
            },
            credit,
        )
        .await?;
    Ok(Json(NewAccountResponse {
        api_key: secret.to_base64().to_string(),
        wallet_address: wallet.address.to_checksum(),
    }))
}

/// The account's name as stored: trimmed, not empty, a valid name (the wire schema of
/// `appliance_api::text::account_name` says the same).
pub(super) fn account_name(raw: &str) -> Result<String, ApiError> {
    let name = raw.trim().to_owned();
    if name.is_empty() {
        return Err(ApiError::bad_request("`account_name` must not be empty"));
    }
    check_text("account_name", &name, MAX_NAME_LEN)?;
    Ok(name)
}

/// The email as stored: trimmed, blank is none (`appliance_api::text::email`).
pub(super) fn email(raw: Option<String>) -> Result<Option<String>, ApiError> {
    match raw.map(|e| e.trim().to_owned()).filter(|e| !e.is_empty()) {
        Some(email) => {
            check_text("email", &email, MAX_EMAIL_LEN)?;
            if !looks_like_email(&email) {
                return Err(ApiError::bad_request("`email` is not an email address"));
            }
            Ok(Some(email))
        }
        None => Ok(None),
    }
}

fn looks_like_email(email: &str) -> bool {
    match email.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && domain.contains('.')
                && !domain.starts_with('.')
                && !email.contains(char::is_whitespace)
        }
        None => false,
    }
}

/// Verifies an account key (login): `true` if the presented key is a live account key,
/// `false` for any other well-formed key (a usage key, an unknown or revoked key: the
/// reference service's answer, and the question this endpoint exists to answer). 401 if
/// no key is sent, or something that is not a key (standard base64 of 32 bytes).
#[utoipa::path(
    get,
    path = "/account_exists",
    tag = "accounts",
    security(("bearer" = []), ("api_key" = [])),
    responses(
        (status = 200, description = "Whether the key is a live account key", body = bool, content_type = "application/json"),
        (status = 401, description = "No key was sent, or the value sent is not a key (standard base64 of 32 bytes)", body = ErrorBody),
        ServerErrors,
    )
)]
pub async fn account_exists(
    State(state): State<AppState>,
    key: SentKey,
) -> Result<Json<bool>, ApiError> {
    Ok(Json(key.is_account_key(&state).await?))
}

#[cfg(test)]
mod tests {
    use super::looks_like_email;

    #[test]
    fn email_shapes() {
        assert!(looks_like_email("a@b.co"));
        for bad in ["a", "@b.co", "a@b", "a@.co", "a b@c.co"] {
            assert!(!looks_like_email(bad), "{bad}");
        }
    }
}
