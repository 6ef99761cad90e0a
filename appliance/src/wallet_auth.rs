//! `X-Wallet-Auth`: a ChainSecured account authenticates with a `BillingAuth` wallet
//! signature instead of an API key (`docs/compatibility.md`: the header is standard base64 of the JSON
//! `{"typed_data":…,"signature":"0x…"}`).
//!
//! [`WalletAuth`] is the axum extractor: it verifies the signature (every typed-data rule,
//! accepted once), and resolves the signer to the ChainSecured account it administers
//! (created on chain: `apiKeyHash = keccak256(admin)`; converted: the account keeps its
//! `apiKeyHash`). [`ApiKeyOrWallet`] accepts either an API key or the header, for
//! endpoints (billing) that serve both account modes.

use alloy::primitives::Address;
use axum::extract::FromRequestParts;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::HeaderMap;
use http::request::Parts;
use serde::Deserialize;

use crate::error::ApiError;
use crate::http::AppState;
use crate::http::extract::Auth;
use crate::secrets::KeyHash;
use crate::store::AccountId;
use crate::typed_data::{self, Flow, TypedDataError, Verified};

/// The header's name.
pub const HEADER: &str = "x-wallet-auth";
/// Largest header value read (base64 of a 4 KiB envelope and a signature fits easily).
const MAX_HEADER_BYTES: usize = 8 * 1024;

/// Why an `X-Wallet-Auth` header was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WalletAuthError {
    #[error(
        "missing credentials: send an API key, or `X-Wallet-Auth` with a BillingAuth wallet signature"
    )]
    Missing,
    #[error(
        "X-Wallet-Auth must be standard base64 of the JSON {{\"typed_data\":…,\"signature\":\"0x…\"}}: {0}"
    )]
    Malformed(String),
    #[error("X-Wallet-Auth is larger than {MAX_HEADER_BYTES} bytes")]
    TooLarge,
    #[error(transparent)]
    Signature(#[from] TypedDataError),
    #[error("wallet {0} administers no ChainSecured account on this service")]
    NoAccount(Address),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HeaderPayload {
    typed_data: serde_json::Value,
    signature: String,
}

/// Decodes and verifies an `X-Wallet-Auth` value (not replay: that needs the store).
pub fn verify_header(value: &[u8], chain_id: u64, now: i64) -> Result<Verified, WalletAuthError> {
    if value.len() > MAX_HEADER_BYTES {
        return Err(WalletAuthError::TooLarge);
    }
    let text =
        std::str::from_utf8(value).map_err(|_| WalletAuthError::Malformed("not ASCII".into()))?;
    let json = STANDARD
        .decode(text.trim())
        .map_err(|e| WalletAuthError::Malformed(format!("not base64 ({e})")))?;
    let payload: HeaderPayload = serde_json::from_slice(&json)
        .map_err(|e| WalletAuthError::Malformed(format!("not that JSON ({e})")))?;
    Ok(typed_data::verify(
        &payload.typed_data,
        &payload.signature,
        Flow::BillingAuth,
        chain_id,
        now,
    )?)
}

/// A request authenticated by the admin wallet of a ChainSecured account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalletAuth {
    pub account: AccountId,
    /// The account's on-chain identity.
    pub api_key_hash: KeyHash,
    /// The admin wallet that signed.
    pub admin: Address,
}

impl WalletAuth {
    /// Authenticates the `X-Wallet-Auth` header of `headers`.
    pub async fn from_headers(headers: &HeaderMap, state: &AppState) -> Result<Self, ApiError> {
        let value = headers
            .get(HEADER)
            .ok_or(WalletAuthError::Missing)?
            .as_bytes();
        let verified = verify_header(value, state.config.chain.chain_id, crate::store::now_unix())?;
        let Some(found) = state
            .store
            .chain_secured_account_of(verified.signer)
            .await?
        else {
            return Err(WalletAuthError::NoAccount(verified.signer).into());
        };
        if !state.store.accept_signature(verified).await? {
            return Err(WalletAuthError::Signature(TypedDataError::Replayed).into());
        }
        Ok(Self {
            account: found.account,
            api_key_hash: found.api_key_hash,
            admin: found.admin,
        })
    }
}

impl FromRequestParts<AppState> for WalletAuth {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Self::from_headers(&parts.headers, state).await
    }
}

/// Either credential: `X-Wallet-Auth` when the header is present (a ChainSecured
/// account's admin wallet), else an API key (`Authorization: Bearer` / `X-Api-Key`).
pub enum ApiKeyOrWallet {
    ApiKey(Auth),
    Wallet(WalletAuth),
}

impl ApiKeyOrWallet {
    /// The account the request acts on.
    pub fn account(&self) -> AccountId {
        match self {
            Self::ApiKey(auth) => auth.account,
            Self::Wallet(wallet) => wallet.account,
        }
    }
}

impl FromRequestParts<AppState> for ApiKeyOrWallet {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        if parts.headers.contains_key(HEADER) {
            return WalletAuth::from_headers(&parts.headers, state)
                .await
                .map(Self::Wallet);
        }
        Auth::from_request_parts(parts, state)
            .await
            .map(Self::ApiKey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const VECTORS: &str = include_str!("../../tests/vectors/eip712.json");

    fn billing_vector() -> Value {
        let doc: Value = serde_json::from_str(VECTORS).unwrap();
        doc["vectors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| {
                v["typed_data"]["primaryType"] == "BillingAuth"
                    && v["typed_data"]["domain"]["chainId"] == "31337"
            })
            .unwrap()
            .clone()
    }

    fn header(v: &Value) -> String {
        STANDARD.encode(
            serde_json::to_vec(
                &json!({"typed_data": v["typed_data"], "signature": v["signature"]}),
            )
            .unwrap(),
        )
    }

    #[test]
    fn a_billing_vector_decodes_to_its_signer() {
        let v = billing_vector();
        let got = verify_header(header(&v).as_bytes(), 31337, 1_700_000_000).unwrap();
        assert_eq!(
            got.signer,
            typed_data::parse_address(v["address"].as_str().unwrap()).unwrap()
        );
        assert_eq!(got.flow, Flow::BillingAuth);
    }

    #[test]
    fn malformed_headers_are_named() {
        for bad in ["%%%", "e30=", &STANDARD.encode("not json")] {
            assert!(matches!(
                verify_header(bad.as_bytes(), 31337, 1_700_000_000),
                Err(WalletAuthError::Malformed(_))
            ));
        }
        assert_eq!(
            verify_header(&vec![b'A'; MAX_HEADER_BYTES + 1], 31337, 0),
            Err(WalletAuthError::TooLarge)
        );
    }

    #[test]
    fn another_flows_signature_is_not_a_billing_credential() {
        let doc: Value = serde_json::from_str(VECTORS).unwrap();
        let v = doc["vectors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["typed_data"]["primaryType"] == "CreateWallet")
            .unwrap()
            .clone();
        assert!(matches!(
            verify_header(header(&v).as_bytes(), 31337, 1_700_000_000),
            Err(WalletAuthError::Signature(
                TypedDataError::WrongPrimaryType { .. }
            ))
        ));
    }
}
