//! The one place where errors become HTTP responses.
//!
//! Every non-2xx response the appliance sends has the same body (`ErrorBody`, a wire type
//! of `appliance_api::error`),
//! `{"error":{"code":403,"reason":"Forbidden","description":"…"}}`, whatever produced
//! it: a handler, an extractor, routing, or a middleware
//! (see `http::middleware::normalize_errors`).

use appliance_api::error::{ErrorBody, ErrorDetail};
use axum::Json;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use crate::store::StoreError;

/// The `Retry-After` of a write refused for a full disk, in seconds: space comes back
/// when an operator frees it, not in a moment (the write succeeds as soon as it does).
pub const STORAGE_FULL_RETRY_AFTER: &str = "30";

/// An error a request can end in. The message is shown to the client, so it never holds
/// a secret; internal details are logged (with the request id) and replaced by a generic
/// sentence.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// 400: the request is malformed (bad JSON, bad field, bad query).
    #[error("{0}")]
    BadRequest(String),
    /// 401: no credential, or one that is unknown or revoked.
    #[error("{0}")]
    Unauthorized(String),
    /// 402: the account has too little credit for a billed call.
    #[error("{0}")]
    PaymentRequired(String),
    /// 403: the credential is valid but lacks the permission.
    #[error("{0}")]
    Forbidden(String),
    /// 404: unknown path or resource.
    #[error("{0}")]
    NotFound(String),
    /// 405: the path exists but not with this method.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 409: the request conflicts with the current state.
    #[error("{0}")]
    Conflict(String),
    /// 413: the body is larger than the limit.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// 415: the body is not `application/json`.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 422: well-formed but invalid.
    #[error("{0}")]
    Unprocessable(String),
    /// 429: overloaded.
    #[error("{0}")]
    TooManyRequests(String),
    /// 503: a dependency is unavailable.
    #[error("{0}")]
    Unavailable(String),
    /// 503 with `Retry-After: 1`: the server is momentarily out of a shared resource
    /// (such as its budget of buffered request bodies); retrying shortly may succeed.
    #[error("{0}")]
    Busy(String),
    /// 503 with `Retry-After` ([`STORAGE_FULL_RETRY_AFTER`] seconds): the disk under the
    /// store is full, so writes are refused until an operator frees space; reads go on.
    #[error("{0}")]
    StorageFull(String),
    /// 500: a bug or an unexpected failure. The detail is logged, never sent.
    #[error("internal error")]
    Internal(String),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::PaymentRequired(_) => StatusCode::PAYMENT_REQUIRED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::Unavailable(_) | Self::Busy(_) | Self::StorageFull(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The sentence sent to the client.
    pub fn description(&self) -> String {
        match self {
            Self::Internal(_) => {
                "internal error; the server logged the details under this request's X-Request-Id"
                    .to_owned()
            }
            other => other.to_string(),
        }
    }

    pub fn bad_request(msg: impl Into<String>) -> Self {
        Self::BadRequest(msg.into())
    }
}

/// Builds the standard error response for any status and sentence.
pub fn error_response(status: StatusCode, description: impl Into<String>) -> Response {
    let body = ErrorBody {
        error: ErrorDetail {
            code: status.as_u16(),
            reason: status.canonical_reason().unwrap_or("Error").to_owned(),
            description: description.into(),
        },
    };
    (status, Json(body)).into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Self::Internal(detail) = &self {
            tracing::error!(detail = %detail, "internal error");
        }
        let mut response = error_response(self.status(), self.description());
        let retry_after = match &self {
            Self::Busy(_) => Some("1"),
            Self::StorageFull(_) => Some(STORAGE_FULL_RETRY_AFTER),
            _ => None,
        };
        if let Some(seconds) = retry_after {
            response.headers_mut().insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static(seconds),
            );
        }
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound(what) => Self::NotFound(what),
            StoreError::Conflict(what) | StoreError::QuotaExceeded(what) => Self::Conflict(what),
            StoreError::Unavailable(what) => Self::Unavailable(what),
            full @ StoreError::DiskFull => Self::StorageFull(full.to_string()),
            StoreError::PaymentRequired(what) => Self::PaymentRequired(what),
            other => Self::Internal(other.to_string()),
        }
    }
}

impl From<keyservice_api::KeyError> for ApiError {
    fn from(err: keyservice_api::KeyError) -> Self {
        use keyservice_api::KeyError;
        if err.is_unavailable() {
            tracing::warn!(error = %err, "keyservice unavailable");
            return Self::Unavailable("the key service is unavailable; retry shortly".into());
        }
        match err {
            KeyError::DecryptFailed => Self::Unprocessable(
                "decryption failed: the ciphertext was modified or belongs to another wallet"
                    .into(),
            ),
            other => Self::Internal(format!("keyservice: {other}")),
        }
    }
}

impl From<crate::authz::Denied> for ApiError {
    fn from(denied: crate::authz::Denied) -> Self {
        Self::Forbidden(denied.to_string())
    }
}

impl From<crate::typed_data::TypedDataError> for ApiError {
    /// `docs/compatibility.md`: every typed-data rejection is 422, except a too-large `typed_data` (413).
    fn from(err: crate::typed_data::TypedDataError) -> Self {
        use crate::typed_data::TypedDataError;
        match err {
            TypedDataError::TooLarge { .. } => Self::PayloadTooLarge(err.to_string()),
            other => Self::Unprocessable(other.to_string()),
        }
    }
}

impl From<crate::billing::BillingError> for ApiError {
    fn from(err: crate::billing::BillingError) -> Self {
        use crate::billing::BillingError;
        use crate::billing::stripe::StripeError;
        match err {
            BillingError::Disabled => Self::Unavailable(err.to_string()),
            BillingError::BelowMinimum
            | BillingError::AboveMaximum
            | BillingError::MalformedIntentId => Self::BadRequest(err.to_string()),
            BillingError::UnknownIntent(_) => Self::NotFound(err.to_string()),
            BillingError::NotSucceeded { .. } | BillingError::WrongCurrency(_) => {
                Self::Conflict(err.to_string())
            }
            BillingError::InsufficientCredit { .. } => Self::PaymentRequired(err.to_string()),
            BillingError::Stripe(StripeError::NotFound) => {
                Self::NotFound("Stripe has no such object".into())
            }
            BillingError::Stripe(stripe) => {
                tracing::warn!(error = %stripe, "Stripe request failed");
                Self::Unavailable(
                    "the payment processor (Stripe) is unavailable or refused the request; retry shortly".into(),
                )
            }
            BillingError::Store(store) => store.into(),
        }
    }
}

impl From<crate::wallet::NotAWallet> for ApiError {
    fn from(err: crate::wallet::NotAWallet) -> Self {
        Self::BadRequest(err.to_string())
    }
}

impl From<crate::execution::ExecError> for ApiError {
    /// The statuses of `/lit_action`: 400/413 for the job, 422 for code that does not
    /// hash to the `ipfs_id` sent with it, 404 for unknown code, 403 for
    /// what the caller may not run or use, 402 for credit, 429/503 for the worker pool.
    fn from(err: crate::execution::ExecError) -> Self {
        use crate::execution::ExecError;
        use crate::execution::code::GatewayError;
        match err {
            ExecError::CodeTooLarge { .. } => Self::PayloadTooLarge(err.to_string()),
            ExecError::NoCode | ExecError::InvalidCid(_) => Self::BadRequest(err.to_string()),
            // Both fields well-formed, the code not hashing to the CID: like the gateway's
            // wrong content, well-formed but invalid (a schema cannot say it, so a
            // schema-valid request may get it).
            ExecError::CidMismatch { .. } => Self::Unprocessable(err.to_string()),
            ExecError::UnknownCid(_) => Self::NotFound(err.to_string()),
            ExecError::StoredCodeNotUtf8(_) => Self::Internal(err.to_string()),
            // Like the gateway's wrong content: code was found, it is not the CID's.
            ExecError::CodeIntegrity { .. } => Self::Unprocessable(err.to_string()),
            ExecError::Gateway(gateway) => match gateway {
                GatewayError::Failed(_) => Self::Unavailable(gateway.to_string()),
                GatewayError::TooLarge { .. } => Self::PayloadTooLarge(gateway.to_string()),
                GatewayError::WrongContent(_) | GatewayError::NotUtf8(_) => {
                    Self::Unprocessable(gateway.to_string())
                }
                // Only at start; never the answer to a request.
                GatewayError::Client(_) => Self::Internal(gateway.to_string()),
            },
            ExecError::ExecutionDenied(denied) => denied.into(),
            ExecError::WalletDenied(_) => Self::Forbidden(err.to_string()),
            ExecError::InsufficientCredit(billing) | ExecError::Billing(billing) => billing.into(),
            ExecError::Busy(_) => Self::TooManyRequests(err.to_string()),
            // Nobody is listening any more; a status for the log only.
            ExecError::Abandoned => Self::Unavailable(err.to_string()),
            ExecError::WorkersUnavailable(_) => {
                tracing::error!(error = %err, "action runtime unavailable");
                Self::Unavailable("actions cannot run right now; retry shortly".into())
            }
            ExecError::Store(store) => store.into(),
        }
    }
}

#[cfg(test)]
mod store_error_tests {
    use axum::response::IntoResponse as _;
    use http::StatusCode;

    use super::{ApiError, STORAGE_FULL_RETRY_AFTER};
    use crate::store::{SqlError, StoreError};

    /// SQLite's `SQLITE_FULL` (a full disk) is a 503 that says so and when to retry,
    /// never a 500; other SQLite failures stay internal errors.
    #[test]
    fn a_full_disk_is_a_503_with_retry_after() {
        let full = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
            Some("database or disk is full".into()),
        );
        let store = StoreError::from(SqlError::from(full));
        assert!(matches!(store, StoreError::DiskFull), "{store:?}");
        let api = ApiError::from(store);
        assert_eq!(api.status(), StatusCode::SERVICE_UNAVAILABLE);
        let description = api.description();
        assert!(
            description.contains("storage is full") && description.contains("reads still work"),
            "{description}"
        );
        let response = api.into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            response.headers()[http::header::RETRY_AFTER],
            STORAGE_FULL_RETRY_AFTER
        );

        let corrupt = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
            None,
        );
        let api = ApiError::from(StoreError::from(SqlError::from(corrupt)));
        assert_eq!(api.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(
            api.into_response()
                .headers()
                .get(http::header::RETRY_AFTER)
                .is_none()
        );
    }
}

#[cfg(test)]
mod execution_error_tests {
    use http::StatusCode;

    use super::ApiError;
    use crate::authz::Denied;
    use crate::billing::BillingError;
    use crate::execution::ExecError;
    use crate::execution::code::GatewayError;
    use crate::execution::host::WalletRefused;
    use crate::store::WalletRef;

    /// Each failure of an execution keeps the status and sentence `/lit_action` had
    /// when it built its `ApiError`s itself.
    #[test]
    fn execution_errors_keep_their_statuses_and_sentences() {
        let wallet = WalletRef::Pkp(keyservice_api::PkpId([7; 32]));
        let credit = BillingError::InsufficientCredit {
            needed: 2,
            available: 1,
        };
        let credit_text = credit.to_string();
        let cases: Vec<(ExecError, u16, String)> = vec![
            (
                ExecError::CodeTooLarge { limit: 5 },
                413,
                "action code is limited to 5 bytes".into(),
            ),
            (ExecError::NoCode, 400, "give `code` or `ipfs_id`".into()),
            (
                ExecError::CidMismatch {
                    computed: "QmA".into(),
                    given: "QmB".into(),
                },
                422,
                "the code's CID is QmA, not the given ipfs_id QmB".into(),
            ),
            (
                ExecError::InvalidCid("bad".into()),
                400,
                "`ipfs_id` is not a valid IPFS CID: bad".into(),
            ),
            (
                ExecError::UnknownCid("QmA".into()),
                404,
                "no code is known for QmA: send it once as `code` (or to get_lit_action_ipfs_id) first"
                    .into(),
            ),
            (
                ExecError::StoredCodeNotUtf8("QmA".into()),
                500,
                ApiError::Internal(String::new()).description(),
            ),
            (
                ExecError::Gateway(GatewayError::Failed("status 502 Bad Gateway".into())),
                503,
                "the IPFS gateway failed: status 502 Bad Gateway".into(),
            ),
            (
                ExecError::Gateway(GatewayError::TooLarge {
                    cid: "QmA".into(),
                    max_bytes: 3,
                }),
                413,
                "the code for QmA is over 3 bytes".into(),
            ),
            (
                ExecError::CodeIntegrity {
                    cid: "QmA".into(),
                    origin: crate::execution::code::CodeSource::Store,
                },
                422,
                "the code kept for QmA does not hash to that CID and was refused; send the code itself as `code`".into(),
            ),
            (
                ExecError::Gateway(GatewayError::WrongContent("QmA".into())),
                422,
                "the gateway's content for QmA does not hash to that CID".into(),
            ),
            (
                ExecError::Gateway(GatewayError::NotUtf8("QmA".into())),
                422,
                "the code for QmA is not UTF-8".into(),
            ),
            (
                ExecError::ExecutionDenied(Denied::action_not_permitted("QmA")),
                403,
                "this usage key may not run QmA: no group in its execute_in_groups permits this action"
                    .into(),
            ),
            (
                ExecError::WalletDenied(WalletRefused { wallet }),
                403,
                format!(
                    "the action was refused a wallet: wallet {wallet} is not available to this action"
                ),
            ),
            (ExecError::from(credit), 402, credit_text),
            (
                ExecError::Busy(crate::execution::fair::Refusal::WaitedTooLong),
                429,
                "every action worker is busy; retry shortly".into(),
            ),
            (
                ExecError::Busy(crate::execution::fair::Refusal::AccountQueueFull(3)),
                429,
                "this account already has 3 action(s) waiting for a worker (besides those running); retry when some have finished".into(),
            ),
            (
                ExecError::WorkersUnavailable("no binary".into()),
                503,
                "actions cannot run right now; retry shortly".into(),
            ),
        ];
        for (err, status, description) in cases {
            let shown = format!("{err:?}");
            let api = ApiError::from(err);
            assert_eq!(
                api.status(),
                StatusCode::from_u16(status).unwrap(),
                "{shown}"
            );
            assert_eq!(api.description(), description, "{shown}");
        }
    }
}
