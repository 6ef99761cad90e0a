//! The wallet-signature endpoints (EIP-712, `crate::typed_data`): minting a wallet or a
//! usage key for a wallet owner, and converting an API-mode account to ChainSecured.
//!
//! Every signature is checked against every rule, and accepted once (the store remembers
//! it until its window has passed). Minted wallets and keys belong to no account until
//! their owner registers them on chain (`registerWalletDerivation`, `setUsageApiKey`) and
//! the indexer applies that; the store records the signer as their minter, and only an
//! account whose admin is the minter can take them (`store::chain_apply`).

use alloy::primitives::Address;
use appliance_api::error::ErrorBody;
use appliance_api::signatures::{
    ConvertRequest, ConvertResponse, SignedRequest, SignedUsageKeyResponse, SignedWalletResponse,
};
use axum::Json;
use axum::extract::State;
use keyservice_api::DerivationPath;
use ring::rand::{SecureRandom, SystemRandom};

use super::{BodyErrors, ServerErrors};
use crate::api_keys::{ApiSecret, KeyHash};
use crate::error::ApiError;
use crate::http::auth::ApiModeMasterKey;
use crate::http::extract::{JsonBody, limit};
use crate::state::AppState;
use crate::store::{Conversion, WalletIdentity, now_unix};
use crate::typed_data::{self, Flow, TypedDataError, Verified};

/// Typed-data and signature rejections.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub enum SignatureErrors {
    /// `typed_data` is larger than 4096 bytes serialised.
    #[response(status = 413)]
    TooLarge(ErrorBody),
    /// A typed-data rule failed (types, primaryType, domain, chainId, issuedAt window,
    /// signature, signer) or the signature was already accepted once.
    #[response(status = 422)]
    Unprocessable(ErrorBody),
}

fn verify(state: &AppState, req: &SignedRequest, flow: Flow) -> Result<Verified, ApiError> {
    Ok(typed_data::verify(
        &req.typed_data,
        &req.signature,
        flow,
        state.config.chain.chain_id,
        now_unix(),
    )?)
}

/// The derivation path of a wallet minted for `minter`: the minter's 20-byte address, then
/// 12 random bytes. `AccountConfig` lets a ChainSecured account register only paths that
/// begin with its admin's address, so nobody else can register this one on chain.
fn minted_path(minter: Address) -> Result<DerivationPath, ApiError> {
    let mut path = [0u8; 32];
    path[..20].copy_from_slice(minter.as_slice());
    SystemRandom::new()
        .fill(&mut path[20..])
        .map_err(|_| ApiError::Internal("the system RNG failed".into()))?;
    Ok(DerivationPath(path))
}

/// Mints a keyservice wallet for an accepted signature, accepting the signature in the
/// same transaction that stores the wallet (unattached, minted by the signer) and, for
/// `usage_key`, the minted key's hash as the signer's.
async fn mint_for(
    state: &AppState,
    signature: Verified,
    usage_key: Option<KeyHash>,
) -> Result<WalletIdentity, ApiError> {
    // Cheap early refusal of a replay, before keyservice does any work; the insert below
    // is the authoritative (atomic) check.
    if state.store.signature_accepted(signature.digest).await? {
        return Err(TypedDataError::Replayed.into());
    }
    let path = minted_path(signature.signer)?;
    let minted = state.keys.client().wallet(&path).await?;
    let identity = WalletIdentity {
        pkp_id: minted.pkp_id,
        address: minted.address,
        derivation_path: path,
    };
    if !state
        .store
        .record_signed_wallet(signature, identity, usage_key)
        .await?
    {
        return Err(TypedDataError::Replayed.into());
    }
    tracing::info!(minter = %signature.signer, wallet = %identity.address.to_checksum(), usage_key = usage_key.is_some(), "minted for a wallet owner");
    Ok(identity)
}

/// Mints a wallet for the signer of a `CreateWallet` signature. It joins the signer's
/// ChainSecured account once the signer calls
/// `registerWalletDerivation(apiKeyHash, wallet_address, derivation_path, name, description)`.
#[utoipa::path(
    post,
    path = "/create_wallet_with_signature",
    tag = "wallet signatures",
    request_body = SignedRequest,
    responses(
        super::RateLimited,
        (status = 200, description = "The new, unattached wallet", body = SignedWalletResponse),
        BodyErrors,
        SignatureErrors,
        ServerErrors,
    )
)]
pub async fn create_wallet_with_signature(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<SignedRequest, { limit::SIGNATURE }>,
) -> Result<Json<SignedWalletResponse>, ApiError> {
    let signature = verify(&state, &req, Flow::CreateWallet)?;
    let wallet = mint_for(&state, signature, None).await?;
    Ok(Json(SignedWalletResponse {
        wallet_address: wallet.address.to_checksum(),
        derivation_path: wallet.derivation_path.to_hex(),
        pkp_id: wallet.pkp_id.to_hex(),
    }))
}

/// Mints a usage key and a wallet for the signer of an `AddUsageApiKey` signature. The
/// key has no identity (401) until the signer registers the wallet
/// (`registerWalletDerivation`) and the key (`setUsageApiKey` with
/// `usage_api_key_hash`) on chain; then it has exactly the permissions set there.
#[utoipa::path(
    post,
    path = "/add_usage_api_key_with_signature",
    tag = "wallet signatures",
    request_body = SignedRequest,
    responses(
        super::RateLimited,
        (status = 200, description = "The new key (shown once) and wallet", body = SignedUsageKeyResponse),
        BodyErrors,
        SignatureErrors,
        ServerErrors,
    )
)]
pub async fn add_usage_api_key_with_signature(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<SignedRequest, { limit::SIGNATURE }>,
) -> Result<Json<SignedUsageKeyResponse>, ApiError> {
    let signature = verify(&state, &req, Flow::AddUsageApiKey)?;
    let secret = ApiSecret::generate().map_err(|e| ApiError::Internal(e.to_string()))?;
    let wallet = mint_for(&state, signature, Some(secret.hash())).await?;
    Ok(Json(SignedUsageKeyResponse {
        usage_api_key: secret.to_base64().to_string(),
        usage_api_key_hash: secret.hash().to_string(),
        wallet_address: wallet.address.to_checksum(),
        derivation_path: wallet.derivation_path.to_hex(),
        pkp_id: wallet.pkp_id.to_hex(),
    }))
}

/// Converts the API-mode account of the presented account key to ChainSecured,
/// administered from now on by `new_admin_wallet_address`, which must have signed the
/// `ConvertAccount` typed data. The API payer submits
/// `convertToChainSecuredAccount(apiKeyHash, newAdmin)`; apiKeyHash, groups, wallets,
/// actions and usage keys stay; the account key is refused from then on (403).
#[utoipa::path(
    post,
    path = "/convert_to_chain_secured_account",
    tag = "wallet signatures",
    security(("bearer" = []), ("api_key" = [])),
    request_body = ConvertRequest,
    responses(
        (status = 200, description = "Converted; the chain call is queued", body = ConvertResponse),
        (status = 401, description = "No key, or an unknown one", body = ErrorBody),
        (status = 403, description = "A usage key", body = ErrorBody),
        (status = 409, description = "The account is ChainSecured already, or the new admin wallet already administers a ChainSecured account", body = ErrorBody),
        BodyErrors,
        SignatureErrors,
        ServerErrors,
    )
)]
pub async fn convert_to_chain_secured_account(
    State(state): State<AppState>,
    ApiModeMasterKey(account): ApiModeMasterKey,
    JsonBody(req): JsonBody<ConvertRequest, { limit::SIGNATURE }>,
) -> Result<Json<ConvertResponse>, ApiError> {
    let new_admin = new_admin_address(&req.new_admin_wallet_address)?;
    let signed = SignedRequest {
        typed_data: req.typed_data,
        signature: req.signature,
    };
    let signature = verify(&state, &signed, Flow::ConvertAccount)?;
    if signature.signer != new_admin {
        return Err(TypedDataError::NotNewAdmin {
            signer: signature.signer,
            expected: new_admin,
        }
        .into());
    }
    match state
        .store
        .convert_account(account, new_admin, signature)
        .await?
    {
        Conversion::Converted { api_key_hash } => {
            tracing::info!(admin = %new_admin, "account converted to ChainSecured");
            Ok(Json(ConvertResponse {
                success: true,
                wallet_address: new_admin.to_checksum(None),
                api_key_hash: api_key_hash.to_string(),
            }))
        }
        Conversion::AlreadyChainSecured => Err(ApiError::Conflict(
            "the account is already ChainSecured".into(),
        )),
        Conversion::AdminTaken => Err(ApiError::Conflict(format!(
            "{} already administers a ChainSecured account; a wallet administers at most one, choose another `new_admin_wallet_address`",
            new_admin.to_checksum(None)
        ))),
        Conversion::Replayed => Err(TypedDataError::Replayed.into()),
    }
}

/// `new_admin_wallet_address`: a non-zero address (`appliance_api::WalletAddress`).
pub(super) fn new_admin_address(text: &str) -> Result<Address, ApiError> {
    typed_data::parse_address(text.trim())
        .filter(|a| *a != Address::ZERO)
        .ok_or_else(|| {
            ApiError::bad_request(
                "`new_admin_wallet_address` must be a non-zero address: 0x + 40 hex digits",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minted path begins with its minter's address (what `AccountConfig` checks) and
    /// the rest is random: two mints for one minter differ.
    #[test]
    fn a_minted_path_carries_its_minter() {
        let minter = Address::repeat_byte(0xab);
        let (a, b) = (minted_path(minter).unwrap(), minted_path(minter).unwrap());
        assert_eq!(&a.0[..20], minter.as_slice());
        assert_eq!(&b.0[..20], minter.as_slice());
        assert_ne!(a.0[20..], b.0[20..]);
    }
}
