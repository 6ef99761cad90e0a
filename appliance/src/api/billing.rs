//! Billing: the Stripe publishable key, the credit balance, card payments through
//! payment intents, the prices in force (see `crate::billing`), and the account's usage
//! history (its ledger, newest first).
//!
//! The caller's account comes from one place, `crate::http::auth::BillingCaller`: an API
//! key of the account, or for a ChainSecured account an `X-Wallet-Auth` header (a
//! `BillingAuth` wallet signature by its admin). The ledger is the account's, so an
//! account converted to ChainSecured keeps its credit.

use appliance_api::PagingParams;
use appliance_api::billing::{
    BalanceResponse, ConfirmPaymentRequest, ConfirmPaymentResponse, CreatePaymentIntentRequest,
    CreatePaymentIntentResponse, PricesResponse, StripeConfigResponse, UsageItem, UsageKind,
    UsageRange,
};
use appliance_api::error::ErrorBody;
use axum::Json;
use axum::extract::State;

use super::{AuthErrors, BodyErrors, ServerErrors};
use crate::billing::{CURRENCY, MIN_PAYMENT_CENTS, display_cents};
use crate::error::ApiError;
use crate::http::auth::BillingCaller;
use crate::http::extract::{JsonBody, Paging, QueryParams};
use crate::state::AppState;
use crate::store::{LedgerEntry, LedgerKind, LedgerRange};

/// The payment processor's publishable key (no authentication).
#[utoipa::path(
    get,
    path = "/billing/stripe_config",
    tag = "billing",
    responses(
        super::RateLimited,
        (status = 200, description = "Stripe's publishable key", body = StripeConfigResponse),
        (status = 503, description = "Billing is disabled (no Stripe keys configured)", body = ErrorBody),
    )
)]
pub async fn stripe_config(
    State(state): State<AppState>,
) -> Result<Json<StripeConfigResponse>, ApiError> {
    Ok(Json(StripeConfigResponse {
        publishable_key: state.billing.publishable_key()?.to_owned(),
    }))
}

/// The account's credit balance (any key of the account, or `X-Wallet-Auth` for a
/// ChainSecured account). Answers also when billing is disabled.
#[utoipa::path(
    get,
    path = "/billing/balance",
    tag = "billing",
    security(("bearer" = []), ("api_key" = []), ("wallet_auth" = [])),
    responses(
        (status = 200, description = "The balance", body = BalanceResponse),
        (status = 413, description = "X-Wallet-Auth is larger than 8 KiB", body = ErrorBody),
        (status = 422, description = "X-Wallet-Auth signature refused", body = ErrorBody),
        AuthErrors,
        ServerErrors,
    )
)]
pub async fn balance(
    State(state): State<AppState>,
    caller: BillingCaller,
) -> Result<Json<BalanceResponse>, ApiError> {
    let cents = state.store.balance(caller.account).await?;
    Ok(Json(BalanceResponse {
        balance_cents: cents,
        balance_display: display_cents(cents),
    }))
}

/// Creates a Stripe payment intent for the account (account key, or `X-Wallet-Auth`).
#[utoipa::path(
    post,
    path = "/billing/create_payment_intent",
    tag = "billing",
    security(("bearer" = []), ("api_key" = []), ("wallet_auth" = [])),
    request_body = CreatePaymentIntentRequest,
    responses(
        (status = 200, description = "The payment intent", body = CreatePaymentIntentResponse),
        (status = 422, description = "X-Wallet-Auth signature refused", body = ErrorBody),
        BodyErrors,
        AuthErrors,
        (status = 500, description = "A bug; details are logged under the request id", body = ErrorBody),
        (status = 503, description = "Billing is disabled, or Stripe is unavailable", body = ErrorBody),
    )
)]
pub async fn create_payment_intent(
    State(state): State<AppState>,
    caller: BillingCaller,
    JsonBody(req): JsonBody<CreatePaymentIntentRequest>,
) -> Result<Json<CreatePaymentIntentResponse>, ApiError> {
    caller.require_account_level()?;
    let account = state.store.account(caller.account).await?;
    let intent = state
        .billing
        .create_payment_intent(account.api_key_hash, req.amount_cents)
        .await?;
    Ok(Json(CreatePaymentIntentResponse {
        client_secret: intent.client_secret,
        payment_intent_id: intent.id,
    }))
}

/// Verifies with Stripe that the payment intent succeeded and belongs to this account,
/// and credits it: exactly once per intent, however often this is called.
#[utoipa::path(
    post,
    path = "/billing/confirm_payment",
    tag = "billing",
    security(("bearer" = []), ("api_key" = []), ("wallet_auth" = [])),
    request_body = ConfirmPaymentRequest,
    responses(
        (status = 200, description = "Credited (now or before)", body = ConfirmPaymentResponse),
        (status = 404, description = "No such payment intent for this account", body = ErrorBody),
        (status = 409, description = "The payment has not succeeded (yet)", body = ErrorBody),
        (status = 422, description = "X-Wallet-Auth signature refused", body = ErrorBody),
        BodyErrors,
        AuthErrors,
        (status = 500, description = "A bug; details are logged under the request id", body = ErrorBody),
        (status = 503, description = "Billing is disabled, or Stripe is unavailable", body = ErrorBody),
    )
)]
pub async fn confirm_payment(
    State(state): State<AppState>,
    caller: BillingCaller,
    JsonBody(req): JsonBody<ConfirmPaymentRequest>,
) -> Result<Json<ConfirmPaymentResponse>, ApiError> {
    caller.require_account_level()?;
    let account = state.store.account(caller.account).await?;
    let confirmed = state
        .billing
        .confirm_payment(
            &state.store,
            caller.account,
            account.api_key_hash,
            req.payment_intent_id.trim(),
            crate::telemetry::request_id().map(|id| id.to_string()),
        )
        .await?;
    Ok(Json(ConfirmPaymentResponse {
        success: true,
        balance_cents: confirmed.balance_cents,
        credited_cents: confirmed.credited_cents,
    }))
}

/// The prices in force, in US cents (no authentication).
#[utoipa::path(
    get,
    path = "/billing/prices",
    tag = "billing",
    responses(super::RateLimited, (status = 200, description = "The prices in force", body = PricesResponse))
)]
pub async fn prices(State(state): State<AppState>) -> Json<PricesResponse> {
    let p = state.billing.prices();
    Json(PricesResponse {
        billing_enabled: state.billing.enabled(),
        currency: CURRENCY.to_owned(),
        management_write_cents: p.management_write_cents,
        action_second_cents: p.action_second_cents,
        read_cents: 0,
        minimum_payment_cents: MIN_PAYMENT_CENTS,
        initial_credit_cents: p.initial_credit_cents,
    })
}

/// `from` and `to` as the query gives them (checked here, so that a malformed one is named;
/// the wire type documents them: `appliance_api::billing::UsageRange`).
#[derive(serde::Deserialize)]
pub struct RangeQuery {
    from: Option<String>,
    to: Option<String>,
}

/// A Unix time bound of the query: absent or empty is none; else a non-negative integer.
fn bound(name: &str, value: Option<&str>) -> Result<Option<i64>, ApiError> {
    match value.map(str::trim) {
        None | Some("") => Ok(None),
        // Digits only (no sign), within `i64`: what the schema's int64 with minimum 0 says.
        Some(text) => text
            .parse::<i64>()
            .ok()
            .filter(|_| text.bytes().all(|b| b.is_ascii_digit()))
            .map(Some)
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "`{name}` must be a time in Unix seconds (an integer from 0 to 2^63 - 1)"
                ))
            }),
    }
}

fn usage_item(entry: LedgerEntry) -> UsageItem {
    UsageItem {
        id: entry.id.to_string(),
        at_unix: entry.created_at,
        at: crate::store::backup::utc(entry.created_at),
        kind: match entry.kind {
            LedgerKind::Initial => UsageKind::Initial,
            LedgerKind::TopUp => UsageKind::TopUp,
            LedgerKind::Charge => UsageKind::Charge,
        },
        amount_cents: entry.amount_cents,
        balance_after_cents: entry.balance_after,
        operation: entry.operation,
        action_cid: entry.action_cid,
        request_id: entry.request_id,
        payment_intent_id: entry.payment_intent_id,
    }
}

/// The account's usage history: every credit (starting credit, card payments) and
/// charge (billed management writes, action run time), newest first, each with the
/// balance after it and the `X-Request-Id` of the request that caused it. The account
/// key, or `X-Wallet-Auth` for a ChainSecured account: a usage key may not read it (it
/// names what every key of the account ran). `from` after `to` selects nothing. Answers
/// also when billing is disabled (nothing is charged then).
#[utoipa::path(
    get,
    path = "/billing/usage",
    tag = "billing",
    security(("bearer" = []), ("api_key" = []), ("wallet_auth" = [])),
    params(UsageRange, PagingParams),
    responses(
        (status = 200, description = "One page of the account's credits and charges, newest first", body = Vec<UsageItem>),
        (status = 400, description = "Malformed `from`, `to` or paging", body = ErrorBody),
        (status = 413, description = "X-Wallet-Auth is larger than 8 KiB", body = ErrorBody),
        (status = 422, description = "X-Wallet-Auth signature refused", body = ErrorBody),
        AuthErrors,
        ServerErrors,
    )
)]
pub async fn usage(
    State(state): State<AppState>,
    caller: BillingCaller,
    QueryParams(range): QueryParams<RangeQuery>,
    Paging(page): Paging,
) -> Result<Json<Vec<UsageItem>>, ApiError> {
    if !caller.account_level {
        return Err(ApiError::Forbidden(
            "the usage history needs the account key (or, for a ChainSecured account, X-Wallet-Auth); a usage key may only read the balance".into(),
        ));
    }
    let range = LedgerRange {
        from: bound("from", range.from.as_deref())?,
        to: bound("to", range.to.as_deref())?,
    };
    let entries = state.store.usage(caller.account, range, page).await?;
    Ok(Json(entries.into_iter().map(usage_item).collect()))
}
