//! Billing: the Stripe publishable key, the credit balance, card payments through
//! payment intents, the prices in force, and the account's usage history.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::{PagingParams, PaymentIntentId};

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

/// The time range of `/billing/usage`: both optional, in Unix seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UsageRange {
    /// Only entries at or after this time (Unix seconds, inclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 0, example = 1764547200)]
    pub from: Option<u64>,
    /// Only entries before this time (Unix seconds, exclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 0, example = 1767225600)]
    pub to: Option<u64>,
}

/// The query of `/billing/usage`: the time range and paging.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageRequest {
    #[serde(flatten)]
    pub range: UsageRange,
    #[serde(flatten)]
    pub paging: PagingParams,
}

/// What a usage entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum UsageKind {
    /// The starting credit of the new account.
    Initial,
    /// A card payment credited.
    TopUp,
    /// A billed call: a management write, or an action's run time.
    Charge,
}

/// One entry of the account's usage history: a credit or a charge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UsageItem {
    /// The entry's id (decimal string): unique, and higher for later entries.
    #[schema(example = "1042")]
    pub id: String,
    /// When, in Unix seconds.
    #[schema(example = 1764590400)]
    pub at_unix: i64,
    /// When, in RFC 3339 (UTC).
    #[schema(example = "2025-12-01T12:00:00Z")]
    pub at: String,
    pub kind: UsageKind,
    /// US cents: positive for a credit, negative for a charge.
    #[schema(example = -1)]
    pub amount_cents: i64,
    /// The balance once this entry applied, in US cents.
    #[schema(example = 499)]
    pub balance_after_cents: u64,
    /// What was charged: the endpoint under `/core/v1` (`add_group`, `lit_action`, …); for
    /// a credit, where it came from (`initial credit`, `card payment`).
    #[schema(example = "lit_action")]
    pub operation: String,
    /// The IPFS CID of the action whose run a `lit_action` charge paid for; `null`
    /// otherwise.
    #[schema(example = "QmWzEQYxa5VHJ1r4iJSyY5KyXs4yTFzJR9SNDTGvZTnyaS")]
    pub action_cid: Option<String>,
    /// The `X-Request-Id` of the request that caused the entry (`null` for entries
    /// recorded before the appliance kept it).
    #[schema(example = "2f1c3a5e-8a9b-4c6d-9e0f-1a2b3c4d5e6f")]
    pub request_id: Option<String>,
    /// The Stripe payment intent a top-up came from; `null` otherwise.
    pub payment_intent_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_usage_query_sends_only_what_is_set() {
        assert_eq!(
            serde_json::to_value(UsageRequest::default()).unwrap(),
            serde_json::json!({})
        );
        let req = UsageRequest {
            range: UsageRange {
                from: Some(10),
                to: None,
            },
            paging: PagingParams {
                page_number: Some(1),
                page_size: None,
            },
        };
        assert_eq!(
            serde_json::to_value(req).unwrap(),
            serde_json::json!({"from": 10, "page_number": 1})
        );
        assert_eq!(
            serde_json::to_value(UsageKind::TopUp).unwrap(),
            serde_json::json!("top_up")
        );
    }
}
