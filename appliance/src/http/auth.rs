//! Every way a caller is identified, each rule written once.
//!
//! * An API key, sent as `Authorization: Bearer <key>` (scheme case-insensitive) or
//!   `X-Api-Key: <key>`, is read by [`presented_key`] and resolved by [`identify`] to an
//!   account key, a usage key, the former account key of a ChainSecured account, or
//!   nothing. The extractors below decide what each of those means for their endpoints:
//!   [`Auth`] (any live key), [`ApiModeMasterKey`] (the account key of an API-mode
//!   account), [`SentKey`] (`account_exists`: any well-formed key, live or not).
//!   A missing or malformed key is 401 everywhere, `account_exists` included.
//! * `X-Wallet-Auth`: a ChainSecured account's admin wallet signs a `BillingAuth` typed
//!   data instead of sending a key ([`WalletAuth`]; `docs/compatibility.md`: the header is standard
//!   base64 of the JSON `{"typed_data":…,"signature":"0x…"}`).
//! * [`BillingCaller`]: either of the two, for the billing endpoints that serve both
//!   account modes.

use alloy::primitives::Address;
use axum::extract::FromRequestParts;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::request::Parts;
use http::{HeaderMap, header};
use serde::Deserialize;

use crate::api_keys::{ApiSecret, KeyHash};
use crate::authz::{Credential, Permissions};
use crate::error::ApiError;
use crate::state::AppState;
use crate::store::{AccountId, AccountMode, ResolvedKey};
use crate::typed_data::{self, Flow, TypedDataError, Verified};

/// The header of a wallet-signed request.
pub const WALLET_AUTH_HEADER: &str = "x-wallet-auth";
/// The header an API key may come in instead of `Authorization: Bearer`.
pub const API_KEY_HEADER: &str = "x-api-key";
/// Largest `X-Wallet-Auth` value read (base64 of a 4 KiB envelope and a signature fits
/// easily).
const MAX_WALLET_AUTH_BYTES: usize = 8 * 1024;

// ---------------------------------------------------------------------------------------
// API keys

/// The token of `Authorization: Bearer <token>` (scheme case-insensitive, spaces
/// trimmed), if the request has one.
pub(crate) fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
}

/// The hash of the credential a request presents: `Authorization: Bearer <key>` (scheme
/// case-insensitive) wins over `X-Api-Key`. The key value itself is dropped (and
/// zeroized) here; nothing downstream sees it.
pub fn presented_key(headers: &HeaderMap) -> Result<KeyHash, ApiError> {
    let bearer = bearer_token(headers);
    let x_api_key = headers
        .get(API_KEY_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    let Some(value) = bearer.or(x_api_key).filter(|v| !v.is_empty()) else {
        return Err(ApiError::Unauthorized(
            "missing API key: send `Authorization: Bearer <key>` or `X-Api-Key: <key>`".into(),
        ));
    };
    ApiSecret::from_base64(value)
        .map(|secret| secret.hash())
        .map_err(|_| ApiError::Unauthorized("the API key is not valid".into()))
}

/// Whether the request sent something in a key header at all, well-formed or not.
fn key_header_sent(headers: &HeaderMap) -> bool {
    headers.contains_key(API_KEY_HEADER)
        || headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().len() > "bearer ".len())
}

/// What a presented key is.
enum KeyIdentity {
    /// The account key of an API-mode account.
    AccountKey(AccountId),
    /// A live usage key (of an account in either mode).
    UsageKey {
        account: AccountId,
        permissions: Permissions,
    },
    /// The former account key of an account converted to ChainSecured.
    FormerAccountKey { admin_wallet_address: String },
    /// Unknown or revoked.
    Unknown,
}

/// Resolves the hash of a presented key (inside a request, in an `authorize` span).
async fn identify(state: &AppState, hash: KeyHash) -> Result<KeyIdentity, ApiError> {
    let span = crate::telemetry::request_span!("authorize", step = "credential");
    tracing::Instrument::instrument(resolve(state, hash), span).await
}

async fn resolve(state: &AppState, hash: KeyHash) -> Result<KeyIdentity, ApiError> {
    Ok(match state.store.resolve_key(hash).await? {
        Some(ResolvedKey::Account(account)) => KeyIdentity::AccountKey(account),
        Some(ResolvedKey::Usage {
            account,
            permissions,
            ..
        }) => KeyIdentity::UsageKey {
            account,
            permissions,
        },
        None => match state.store.master_key_account(hash).await? {
            Some(former) if former.mode == AccountMode::ChainSecured => {
                KeyIdentity::FormerAccountKey {
                    admin_wallet_address: former.admin_wallet_address.unwrap_or_default(),
                }
            }
            _ => KeyIdentity::Unknown,
        },
    })
}

fn unknown_key() -> ApiError {
    ApiError::Unauthorized("unknown or revoked API key".into())
}

/// An authenticated request: the account and what the key may do.
pub struct Auth {
    pub account: AccountId,
    pub credential: Credential,
}

impl FromRequestParts<AppState> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let hash = presented_key(&parts.headers)?;
        match identify(state, hash).await? {
            KeyIdentity::AccountKey(account) => Ok(Auth {
                account,
                credential: Credential::AccountKey,
            }),
            KeyIdentity::UsageKey {
                account,
                permissions,
            } => Ok(Auth {
                account,
                credential: Credential::UsageKey(permissions),
            }),
            KeyIdentity::FormerAccountKey {
                admin_wallet_address,
            } => Err(ApiError::Forbidden(format!(
                "this account is ChainSecured: it is administered on-chain by its wallet {admin_wallet_address}, and its former account key can no longer be used"
            ))),
            KeyIdentity::Unknown => Err(unknown_key()),
        }
    }
}

/// The caller of an endpoint that needs no credential but accepts one: `None` when no
/// key header was sent; with one, exactly what [`Auth`] decides (401 for an unknown key).
pub struct OptionalAuth(pub Option<Auth>);

impl FromRequestParts<AppState> for OptionalAuth {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        if !key_header_sent(&parts.headers) {
            return Ok(Self(None));
        }
        Auth::from_request_parts(parts, state)
            .await
            .map(|a| Self(Some(a)))
    }
}

/// The master key of an account still in API mode (401 unknown key, 403 usage key, 409
/// already ChainSecured).
pub struct ApiModeMasterKey(pub AccountId);

impl FromRequestParts<AppState> for ApiModeMasterKey {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let hash = presented_key(&parts.headers)?;
        match identify(state, hash).await? {
            KeyIdentity::AccountKey(account) => Ok(Self(account)),
            KeyIdentity::FormerAccountKey {
                admin_wallet_address,
            } => Err(ApiError::Conflict(format!(
                "the account is already ChainSecured: it is administered on-chain by its wallet {admin_wallet_address}"
            ))),
            KeyIdentity::UsageKey { .. } => Err(ApiError::Forbidden(
                "only the account key may convert the account".into(),
            )),
            KeyIdentity::Unknown => Err(unknown_key()),
        }
    }
}

/// The key a request sent, for a caller that only asks "is this a live account key?"
/// (`account_exists`): any well-formed key, whether or not it names an account (the
/// answer is then `false`, as the reference service answers). No key, or something that
/// is not a key at all (not standard base64 of 32 bytes), is 401 as on every endpoint.
pub struct SentKey(pub KeyHash);

impl SentKey {
    /// Whether the key is the account key of a live API-mode account.
    pub async fn is_account_key(&self, state: &AppState) -> Result<bool, ApiError> {
        Ok(matches!(
            identify(state, self.0).await?,
            KeyIdentity::AccountKey(_)
        ))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for SentKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        presented_key(&parts.headers).map(Self)
    }
}

// ---------------------------------------------------------------------------------------
// X-Wallet-Auth

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
    #[error("X-Wallet-Auth is larger than {MAX_WALLET_AUTH_BYTES} bytes")]
    TooLarge,
    #[error(transparent)]
    Signature(#[from] TypedDataError),
    #[error("wallet {0} administers no ChainSecured account on this service")]
    NoAccount(Address),
}

/// The HTTP status of each wallet-authentication failure (the layer that raises them
/// maps them, so `error.rs` names nothing of the HTTP layer). A header that is not even
/// the encoded envelope is a credential that authenticates nobody: 401, as a malformed
/// API key is; an envelope whose signature breaks a typed-data rule is 422, as in a
/// signed body.
impl From<WalletAuthError> for ApiError {
    fn from(err: WalletAuthError) -> Self {
        match err {
            WalletAuthError::Missing
            | WalletAuthError::Malformed(_)
            | WalletAuthError::NoAccount(_) => Self::Unauthorized(err.to_string()),
            WalletAuthError::TooLarge => Self::PayloadTooLarge(err.to_string()),
            WalletAuthError::Signature(inner) => inner.into(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WalletAuthPayload {
    typed_data: serde_json::Value,
    signature: String,
}

/// Decodes and verifies an `X-Wallet-Auth` value (not replay: that needs the store).
pub fn verify_wallet_auth(
    value: &[u8],
    chain_id: u64,
    now: i64,
) -> Result<Verified, WalletAuthError> {
    if value.len() > MAX_WALLET_AUTH_BYTES {
        return Err(WalletAuthError::TooLarge);
    }
    let text =
        std::str::from_utf8(value).map_err(|_| WalletAuthError::Malformed("not ASCII".into()))?;
    let json = STANDARD
        .decode(text.trim())
        .map_err(|e| WalletAuthError::Malformed(format!("not base64 ({e})")))?;
    let payload: WalletAuthPayload = serde_json::from_slice(&json)
        .map_err(|e| WalletAuthError::Malformed(format!("not that JSON ({e})")))?;
    Ok(typed_data::verify(
        &payload.typed_data,
        &payload.signature,
        Flow::BillingAuth,
        chain_id,
        now,
    )?)
}

/// A request authenticated by the admin wallet of a ChainSecured account: the signature
/// passed every typed-data rule and is accepted once, and the signer administers the
/// account (created on chain: `apiKeyHash = keccak256(admin)`; converted: the account
/// keeps its `apiKeyHash`).
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
            .get(WALLET_AUTH_HEADER)
            .ok_or(WalletAuthError::Missing)?
            .as_bytes();
        let verified =
            verify_wallet_auth(value, state.config.chain.chain_id, crate::store::now_unix())?;
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

// ---------------------------------------------------------------------------------------
// Billing callers

/// Who a billing request is for: `X-Wallet-Auth` when the header is present (a
/// ChainSecured account's admin wallet), else an API key. The ledger is the account's,
/// so an account converted to ChainSecured keeps its credit.
pub struct BillingCaller {
    pub account: AccountId,
    /// The account key, or the admin wallet of a ChainSecured account (not a usage key).
    pub account_level: bool,
}

impl BillingCaller {
    /// Payments need the account itself, not a usage key.
    pub fn require_account_level(&self) -> Result<(), ApiError> {
        if self.account_level {
            Ok(())
        } else {
            Err(ApiError::Forbidden(
                "payments need the account key (or, for a ChainSecured account, X-Wallet-Auth); a usage key may only read the balance".into(),
            ))
        }
    }
}

impl FromRequestParts<AppState> for BillingCaller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        if parts.headers.contains_key(WALLET_AUTH_HEADER) {
            let wallet = WalletAuth::from_headers(&parts.headers, state).await?;
            return Ok(Self {
                account: wallet.account,
                account_level: true,
            });
        }
        let auth = Auth::from_request_parts(parts, state).await?;
        Ok(Self {
            account: auth.account,
            account_level: matches!(auth.credential, Credential::AccountKey),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use serde_json::{Value, json};

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn bearer_wins_over_x_api_key() {
        let a = ApiSecret::generate().unwrap();
        let b = ApiSecret::generate().unwrap();
        let h = headers(&[
            (
                "authorization",
                &format!("bEaReR {}", a.to_base64().as_str()),
            ),
            ("x-api-key", b.to_base64().as_str()),
        ]);
        assert_eq!(presented_key(&h).unwrap(), a.hash());
        let h = headers(&[("x-api-key", b.to_base64().as_str())]);
        assert_eq!(presented_key(&h).unwrap(), b.hash());
    }

    #[test]
    fn missing_or_malformed_is_401() {
        for h in [
            headers(&[]),
            headers(&[("authorization", "Basic abc")]),
            headers(&[("authorization", "Bearer ")]),
            headers(&[("x-api-key", "short")]),
        ] {
            assert!(matches!(presented_key(&h), Err(ApiError::Unauthorized(_))));
        }
    }

    const VECTORS: &str = include_str!("../../../tests/vectors/eip712.json");

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
        let got = verify_wallet_auth(header(&v).as_bytes(), 31337, 1_700_000_000).unwrap();
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
                verify_wallet_auth(bad.as_bytes(), 31337, 1_700_000_000),
                Err(WalletAuthError::Malformed(_))
            ));
        }
        assert_eq!(
            verify_wallet_auth(&vec![b'A'; MAX_WALLET_AUTH_BYTES + 1], 31337, 0),
            Err(WalletAuthError::TooLarge)
        );
    }

    /// Something that is not even an encoded envelope authenticates nobody: 401, as a
    /// malformed API key is (a refused signature stays 422).
    #[test]
    fn a_malformed_wallet_auth_is_401_like_a_malformed_key() {
        for bad in ["SCHEMATHESIS-INVALID-VALUE", "", "e30="] {
            let err: ApiError = verify_wallet_auth(bad.as_bytes(), 31337, 0)
                .unwrap_err()
                .into();
            assert_eq!(err.status(), http::StatusCode::UNAUTHORIZED, "{bad:?}");
            assert!(err.to_string().contains("X-Wallet-Auth must be"), "{err}");
        }
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
            verify_wallet_auth(header(&v).as_bytes(), 31337, 1_700_000_000),
            Err(WalletAuthError::Signature(
                TypedDataError::WrongPrimaryType { .. }
            ))
        ));
    }
}
