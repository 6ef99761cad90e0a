//! Billing's section of the configuration (`[billing]`): the Stripe keys and endpoint,
//! prices and starting credit. Read by `crate::billing`.

use appliance_domain::settings::{InvalidSetting, SecretString};
use serde::{Deserialize, Serialize};

/// Prepaid credit: card payments through Stripe payment intents, charged per billed
/// call. Enabled when both Stripe keys are set; otherwise (the development default)
/// nothing is charged and the billing endpoints other than `balance` answer 503.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BillingConfig {
    /// Stripe secret key (`sk_…`); never logged or shown.
    pub stripe_secret_key: Option<SecretString>,
    /// Stripe publishable key (`pk_…`), given to browsers by `/billing/stripe_config`.
    pub stripe_publishable_key: Option<String>,
    /// The Stripe API's base URL (https; http only for a loopback test server such as
    /// localstripe).
    pub stripe_api_base: String,
    /// Time limit of one request to Stripe.
    pub stripe_timeout_ms: u64,
    /// Time limit for connecting to Stripe.
    pub stripe_connect_timeout_ms: u64,
    /// Retries of a request that failed to connect, timed out or got a 5xx/429 (with
    /// exponential backoff; POSTs keep their Idempotency-Key).
    pub stripe_max_retries: u32,
    /// Credit granted to each new account (a ledger row like any top-up).
    pub initial_credit_cents: u64,
    /// Price of each billed management write.
    pub management_write_cents: u64,
    /// Price of each started second of an action's run time (at least one second).
    pub action_second_cents: u64,
    /// Where the dashboard (`/dashboard`) loads Stripe.js from for a card top-up, only
    /// while billing is on; its origin is the one other origin the dashboard's
    /// Content-Security-Policy admits (https; http only on a loopback address, e.g. a
    /// localstripe's stand-in at `http://127.0.0.1:PORT/js.stripe.com/v3/`).
    pub stripe_js_url: String,
}

impl Default for BillingConfig {
    fn default() -> Self {
        Self {
            stripe_secret_key: None,
            stripe_publishable_key: None,
            stripe_api_base: "https://api.stripe.com".into(),
            stripe_timeout_ms: 10_000,
            stripe_connect_timeout_ms: 5_000,
            stripe_max_retries: 2,
            initial_credit_cents: 0,
            management_write_cents: 1,
            action_second_cents: 1,
            stripe_js_url: "https://js.stripe.com/v3/".into(),
        }
    }
}

/// `https://…`, or `http://` on a loopback address (a local test server).
fn https_or_loopback_http(url: &str) -> bool {
    let loopback_http = ["http://127.0.0.1:", "http://localhost:", "http://[::1]:"]
        .iter()
        .any(|p| url.starts_with(p));
    url.starts_with("https://") || loopback_http
}

impl BillingConfig {
    /// Whether billing is on (both Stripe keys configured).
    pub fn enabled(&self) -> bool {
        self.stripe_secret_key.is_some() && self.stripe_publishable_key.is_some()
    }

    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if self.stripe_secret_key.is_some() != self.stripe_publishable_key.is_some() {
            return Err(InvalidSetting::new(
                "billing needs both billing.stripe_secret_key and billing.stripe_publishable_key (or neither, to disable it)",
            ));
        }
        if !https_or_loopback_http(self.stripe_api_base.trim_end_matches('/')) {
            return Err(InvalidSetting::new(
                "billing.stripe_api_base must be an https URL (http only on a loopback address)",
            ));
        }
        if !https_or_loopback_http(&self.stripe_js_url)
            || self.stripe_js_url.parse::<http::Uri>().is_err()
            || self
                .stripe_js_url
                .chars()
                .any(|c| c.is_whitespace() || c == ';' || c == ',')
        {
            return Err(InvalidSetting::new(
                "billing.stripe_js_url must be an https URL (http only on a loopback address)",
            ));
        }
        if self.stripe_timeout_ms == 0 || self.stripe_connect_timeout_ms == 0 {
            return Err(InvalidSetting::new(
                "billing.stripe_timeout_ms and billing.stripe_connect_timeout_ms must be positive",
            ));
        }
        if self.stripe_max_retries > 10 {
            return Err(InvalidSetting::new(
                "billing.stripe_max_retries is at most 10",
            ));
        }
        Ok(())
    }
}
