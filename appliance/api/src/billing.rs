//! Billing: the Stripe publishable key, the credit balance, card payments through
//! payment intents, and the prices in force.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::PaymentIntentId;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StripeConfigResponse {
    /// Stripe's publishable key, for Stripe.js in the browser.
    #[schema(example = "pk_live_…")]
    pub publishable_key: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BalanceResponse {
    /// Available credit in US cents (never negative).
    #[schema(example = 500)]
    pub balance_cents: u64,
    #[schema(example = "$5.00")]
    pub balance_display: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreatePaymentIntentRequest {
    /// US cents, an integer from 500 to 99 999 999 (Stripe's largest USD amount).
    #[schema(minimum = 500, maximum = 99_999_999, example = 500)]
    #[serde(deserialize_with = "crate::whole_u64")]
    pub amount_cents: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreatePaymentIntentResponse {
    /// For Stripe.js (`stripe.confirmCardPayment(client_secret, …)`).
    pub client_secret: String,
    /// Give it to `confirm_payment` once the card payment succeeded.
    #[schema(example = "pi_3MtwBwLkdIwHu7ix28a3tqPa")]
    pub payment_intent_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ConfirmPaymentRequest {
    pub payment_intent_id: PaymentIntentId,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ConfirmPaymentResponse {
    pub success: bool,
    /// The balance after crediting, in US cents.
    pub balance_cents: u64,
    /// What this call credited: the payment's amount, or 0 if it was credited before.
    pub credited_cents: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PricesResponse {
    /// Whether calls are charged (false: billing disabled, everything is free).
    pub billing_enabled: bool,
    #[schema(example = "usd")]
    pub currency: String,
    /// Each billed management write (creating, changing or removing usage keys, wallets,
    /// groups, actions and their memberships).
    #[schema(example = 1)]
    pub management_write_cents: u64,
    /// Each started second of an action's run time; at least one second per execution.
    #[schema(example = 1)]
    pub action_second_cents: u64,
    /// Reads and failed (unauthenticated, forbidden, invalid) calls.
    #[schema(example = 0)]
    pub read_cents: u64,
    /// The smallest payment intent.
    #[schema(example = 500)]
    pub minimum_payment_cents: u64,
    /// Credit each new account starts with.
    #[schema(example = 0)]
    pub initial_credit_cents: u64,
}
