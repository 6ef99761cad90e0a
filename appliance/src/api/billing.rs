//! Billing: the Stripe publishable key, the credit balance, card payments through
//! payment intents, and the prices in force (see `crate::billing`).
//!
//! The caller's account comes from one place, `crate::http::auth::BillingCaller`: an API
//! key of the account, or for a ChainSecured account an `X-Wallet-Auth` header (a
//! `BillingAuth` wallet signature by its admin). The ledger is the account's, so an
//! account converted to ChainSecured keeps its credit.

use appliance_api::billing::{
    BalanceResponse, ConfirmPaymentRequest, ConfirmPaymentResponse, CreatePaymentIntentRequest,
    CreatePaymentIntentResponse, PricesResponse, StripeConfigResponse,
};
use appliance_api::error::ErrorBody;
use axum::Json;
use axum::extract::State;

use super::{AuthErrors, BodyErrors, ServerErrors};
use crate::billing::{CURRENCY, MIN_PAYMENT_CENTS, display_cents};
use crate::error::ApiError;
use crate::http::auth::BillingCaller;
use crate::http::extract::JsonBody;
use crate::state::AppState;

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
