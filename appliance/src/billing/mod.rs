//! Prepaid credit: card payments through Stripe payment intents credit an account's
//! ledger (`store::billing`), and billed calls are charged against it.
//!
//! * **Management writes** cost `billing.management_write_cents` each. A billed handler
//!   takes the `crate::http::billed::Billed` extractor, which carries the write's
//!   [`Charge`] (from [`Billing::management_write`]); the handler passes it to the store
//!   write, whose own transaction applies it. So a request refused by authentication,
//!   authorization or validation (all decided before the write) is never charged, and
//!   with too little credit the write fails with 402 and changes nothing.
//! * **New accounts** start with `billing.initial_credit_cents`
//!   ([`Billing::initial_credit`]), granted in the transaction that creates them.
//! * **Action executions** cost `billing.action_second_cents` per started second of run
//!   time (at least one). Before the run, the affordable seconds are held in the store
//!   (`credit_holds`, which every replica's writes respect; 402 if not even one second
//!   is affordable) and the run's deadline is capped by them; afterwards the run time is
//!   charged and the hold deleted in one transaction (see [`Billing::start_action`]),
//!   whatever ended
//!   the run: a refused wallet or a request that went away stops it and is charged too
//!   (`execution::execute` runs and charges in a task the request does not own).
//! * **Reads** are free.
//!
//! Without Stripe keys billing is disabled: nothing is charged, and the billing endpoints
//! other than `balance` answer 503.

pub mod stripe;

use std::time::Duration;

use crate::api_keys::KeyHash;
use crate::config::BillingConfig;
use crate::store::{AccountId, Charge, CreditHold, Credited, InitialCredit, Store, StoreError};
use stripe::{StripeClient, StripeError};

/// The currency of all credit.
pub const CURRENCY: &str = "usd";
/// The smallest payment accepted (the spec's minimum payment intent).
pub const MIN_PAYMENT_CENTS: u64 = 500;
/// The largest payment accepted in one intent (Stripe's limit for USD).
pub const MAX_PAYMENT_CENTS: u64 = 99_999_999;
/// The payment intent metadata key naming the account (its `apiKeyHash`).
pub const METADATA_ACCOUNT: &str = "appliance_account";

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BillingError {
    #[error(
        "billing is disabled on this appliance (no Stripe keys are configured): nothing is charged and payments cannot be made"
    )]
    Disabled,
    #[error("`amount_cents` must be at least {MIN_PAYMENT_CENTS} (US cents)")]
    BelowMinimum,
    #[error("`amount_cents` must be at most {MAX_PAYMENT_CENTS} (US cents)")]
    AboveMaximum,
    #[error("`payment_intent_id` must be a Stripe payment intent id (pi_…)")]
    MalformedIntentId,
    #[error("no payment intent {0} was created for this account")]
    UnknownIntent(String),
    #[error(
        "payment intent {id} has status `{status}`; only a succeeded payment is credited (confirm it with the card first)"
    )]
    NotSucceeded { id: String, status: String },
    #[error("payment intent {0} is not in {CURRENCY}")]
    WrongCurrency(String),
    #[error(
        "insufficient credit: {needed} cent(s) are needed to run an action and the account has {available} available; add credit with /billing/create_payment_intent and /billing/confirm_payment"
    )]
    InsufficientCredit { needed: u64, available: u64 },
    #[error(transparent)]
    Stripe(#[from] StripeError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The prices in force, in cents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prices {
    pub management_write_cents: u64,
    pub action_second_cents: u64,
    pub initial_credit_cents: u64,
}

/// Stripe, when billing is enabled.
struct Enabled {
    client: StripeClient,
    publishable_key: String,
}

/// The billing service: prices and the Stripe client.
pub struct Billing {
    prices: Prices,
    stripe: Option<Enabled>,
}

impl std::fmt::Debug for Billing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Billing")
            .field("enabled", &self.enabled())
            .field("prices", &self.prices)
            .finish_non_exhaustive()
    }
}

/// A payment intent made for a client.
#[derive(Clone)]
pub struct NewIntent {
    pub id: String,
    pub client_secret: String,
}

/// The result of `confirm_payment`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Confirmed {
    /// Cents this call credited (0 when the intent had been credited before).
    pub credited_cents: u64,
    pub balance_cents: u64,
}

impl Billing {
    pub fn new(config: &BillingConfig) -> Result<Self, StripeError> {
        let stripe = match (&config.stripe_secret_key, &config.stripe_publishable_key) {
            (Some(secret), Some(publishable)) => Some(Enabled {
                client: StripeClient::new(config, secret.clone())?,
                publishable_key: publishable.clone(),
            }),
            _ => None,
        };
        if stripe.is_none() {
            tracing::warn!("billing is disabled (no Stripe keys): nothing is charged");
        }
        Ok(Self {
            prices: Prices {
                management_write_cents: config.management_write_cents,
                action_second_cents: config.action_second_cents,
                initial_credit_cents: config.initial_credit_cents,
            },
            stripe,
        })
    }

    pub fn enabled(&self) -> bool {
        self.stripe.is_some()
    }

    pub fn prices(&self) -> Prices {
        self.prices
    }

    fn stripe(&self) -> Result<&Enabled, BillingError> {
        self.stripe.as_ref().ok_or(BillingError::Disabled)
    }

    /// The publishable key for Stripe.js.
    pub fn publishable_key(&self) -> Result<&str, BillingError> {
        Ok(&self.stripe()?.publishable_key)
    }

    /// What one billed management write named `operation` costs (nothing when billing
    /// is disabled), recorded as caused by the request `request_id`.
    pub fn management_write(
        &self,
        operation: impl Into<String>,
        request_id: Option<String>,
    ) -> Charge {
        let cents = if self.enabled() {
            self.prices.management_write_cents
        } else {
            0
        };
        Charge::new(cents, operation).for_request(request_id)
    }

    /// The credit a new account starts with (none when billing is disabled), recorded as
    /// granted by the request `request_id`.
    pub fn initial_credit(&self, request_id: Option<String>) -> InitialCredit {
        InitialCredit {
            cents: if self.enabled() {
                self.prices.initial_credit_cents
            } else {
                0
            },
            request_id,
        }
    }

    /// Creates a payment intent of `amount_cents` for the account `account_hash`.
    pub async fn create_payment_intent(
        &self,
        account_hash: KeyHash,
        amount_cents: u64,
    ) -> Result<NewIntent, BillingError> {
        let stripe = self.stripe()?;
        if amount_cents < MIN_PAYMENT_CENTS {
            return Err(BillingError::BelowMinimum);
        }
        if amount_cents > MAX_PAYMENT_CENTS {
            return Err(BillingError::AboveMaximum);
        }
        let idempotency_key = uuid::Uuid::new_v4().to_string();
        let intent = stripe
            .client
            .create_payment_intent(
                amount_cents,
                CURRENCY,
                &[(METADATA_ACCOUNT, account_hash.to_string())],
                &idempotency_key,
            )
            .await?;
        let client_secret = intent.client_secret.ok_or_else(|| {
            StripeError::BadResponse("the payment intent has no client_secret".into())
        })?;
        tracing::info!(payment_intent = %intent.id, amount_cents, "payment intent created");
        Ok(NewIntent {
            id: intent.id,
            client_secret,
        })
    }

    /// Verifies with Stripe that `intent_id` succeeded and was made for this account,
    /// and credits it, once (the ledger row records `request_id`, the request that
    /// credited it).
    pub async fn confirm_payment(
        &self,
        store: &Store,
        account: AccountId,
        account_hash: KeyHash,
        intent_id: &str,
        request_id: Option<String>,
    ) -> Result<Confirmed, BillingError> {
        let stripe = self.stripe()?;
        if !is_intent_id(intent_id) {
            return Err(BillingError::MalformedIntentId);
        }
        let unknown = || BillingError::UnknownIntent(intent_id.to_owned());
        let intent = match stripe.client.retrieve_payment_intent(intent_id).await {
            Ok(intent) => intent,
            Err(StripeError::NotFound) => return Err(unknown()),
            Err(other) => return Err(other.into()),
        };
        let owner = intent.metadata.get(METADATA_ACCOUNT).map(String::as_str);
        let ours = account_hash.to_string();
        let owned = owner.is_some_and(|o| {
            use subtle::ConstantTimeEq as _;
            o.len() == ours.len() && bool::from(o.as_bytes().ct_eq(ours.as_bytes()))
        });
        if intent.id != intent_id || !owned {
            // Another account's intent (or not one of ours) looks nonexistent.
            return Err(unknown());
        }
        if intent.status != "succeeded" {
            return Err(BillingError::NotSucceeded {
                id: intent.id,
                status: intent.status,
            });
        }
        if !intent.currency.eq_ignore_ascii_case(CURRENCY) {
            return Err(BillingError::WrongCurrency(intent.id));
        }
        let received = intent.amount_received.unwrap_or(intent.amount);
        let cents = u64::try_from(received)
            .map_err(|_| StripeError::BadResponse("a negative amount".into()))?;
        match store
            .credit_payment(account, intent.id.clone(), cents, request_id)
            .await?
        {
            Credited::Now { cents, balance } => {
                tracing::info!(payment_intent = %intent.id, cents, "payment credited");
                Ok(Confirmed {
                    credited_cents: cents,
                    balance_cents: balance,
                })
            }
            Credited::Before { balance } => Ok(Confirmed {
                credited_cents: 0,
                balance_cents: balance,
            }),
        }
    }

    /// Before an action runs: holds the seconds the account can pay for (at most
    /// `timeout`) beside what its other runs hold, or refuses with 402 when it cannot pay
    /// for one. `None` when actions are free (billing disabled, or a price of 0). The
    /// hold outlives the run by [`HOLD_MARGIN`] at most, should this replica die before
    /// charging it.
    pub async fn start_action(
        &self,
        store: &Store,
        account: AccountId,
        timeout: Duration,
    ) -> Result<Option<ActionTicket>, BillingError> {
        let per_second = self.prices.action_second_cents;
        if !self.enabled() || per_second == 0 {
            return Ok(None);
        }
        let max_seconds = timeout.as_millis().div_ceil(1000).max(1) as u64;
        let lifetime = max_seconds.saturating_add(HOLD_MARGIN.as_secs());
        match store
            .hold_credit(account, per_second, max_seconds, lifetime)
            .await?
        {
            Ok(hold) => Ok(Some(ActionTicket {
                store: store.clone(),
                hold: Some(hold),
                per_second,
                capped: u128::from(hold.units) * 1000 < timeout.as_millis(),
            })),
            Err(short) => Err(BillingError::InsufficientCredit {
                needed: per_second,
                available: short.available,
            }),
        }
    }
}

/// How long a hold outlives its run's time limit (the charge is written right after the
/// run; this only matters when the replica died first).
pub const HOLD_MARGIN: Duration = Duration::from_secs(60);

/// Credit held for one running action; given back when dropped uncharged.
pub struct ActionTicket {
    store: Store,
    /// `None` once charged.
    hold: Option<CreditHold>,
    per_second: u64,
    capped: bool,
}

impl ActionTicket {
    /// The run-time limit the credit allows, when it is below the configured timeout.
    pub fn deadline(&self) -> Option<Duration> {
        let hold = self.hold.as_ref()?;
        self.capped.then(|| Duration::from_secs(hold.units))
    }

    /// The seconds paid for.
    pub fn seconds(&self) -> u64 {
        self.hold.as_ref().map_or(0, |h| h.units)
    }

    /// After the run of the action `action_cid`: charges its started seconds (at least
    /// one, at most those held), recorded as paying for that action and caused by the
    /// request `request_id`, and deletes the hold with it. Returns the cents charged.
    pub async fn charge(
        mut self,
        store: &Store,
        run_time: Duration,
        action_cid: &str,
        request_id: Option<String>,
    ) -> Result<u64, BillingError> {
        let Some(hold) = self.hold.take() else {
            return Ok(0);
        };
        let started = run_time.as_millis().div_ceil(1000).max(1);
        let seconds = u64::try_from(started).unwrap_or(u64::MAX).min(hold.units);
        let charge = Charge::new(seconds * self.per_second, "lit_action")
            .for_request(request_id)
            .for_action(action_cid);
        // On an error the hold stays until it expires (and the charge may yet have been
        // written, if the database went away at the commit).
        let (charged, _) = store.charge_hold(hold, charge).await?;
        Ok(charged)
    }
}

impl Drop for ActionTicket {
    fn drop(&mut self) {
        // Never charged (the job did not start, or failed before its charge): give the
        // credit back. If that fails, or there is no runtime, the hold expires.
        if let Some(hold) = self.hold.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let store = self.store.clone();
            runtime.spawn(async move {
                if let Err(err) = store.release_hold(hold).await {
                    tracing::warn!(error = %err, "a credit hold was not released; it expires by itself");
                }
            });
        }
    }
}

/// Whether `id` looks like a payment intent id (and is safe in a URL path); the wire
/// schema of `appliance_api::PaymentIntentId` says the same.
pub(crate) fn is_intent_id(id: &str) -> bool {
    id.len() <= 255
        && id
            .strip_prefix("pi_")
            .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// `$12.34` for 1234 cents.
pub fn display_cents(cents: u64) -> String {
    format!("${}.{:02}", cents / 100, cents % 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intent_ids() {
        assert!(is_intent_id("pi_3MtwBwLkdIwHu7ix28a3tqPa"));
        for bad in ["", "pi_", "pi_a/b", "pi_../x", "cus_1", "pi_a?b", "pi_a b"] {
            assert!(!is_intent_id(bad), "{bad}");
        }
    }

    #[test]
    fn cents_display() {
        assert_eq!(display_cents(500), "$5.00");
        assert_eq!(display_cents(7), "$0.07");
        assert_eq!(display_cents(123_456), "$1234.56");
    }

    #[test]
    fn billed_prices() {
        let config = BillingConfig {
            stripe_secret_key: Some(crate::config::SecretString::new("sk_test_x")),
            stripe_publishable_key: Some("pk_test_x".into()),
            initial_credit_cents: 25,
            ..BillingConfig::default()
        };
        let billing = Billing::new(&config).unwrap();
        assert_eq!(
            billing.management_write("add_group", Some("req-1".into())),
            Charge {
                cents: 1,
                operation: "add_group".into(),
                request_id: Some("req-1".into()),
                action_cid: None,
            }
        );
        assert_eq!(
            billing.initial_credit(Some("req-2".into())),
            InitialCredit {
                cents: 25,
                request_id: Some("req-2".into())
            }
        );
        let disabled = Billing::new(&BillingConfig {
            initial_credit_cents: 25,
            ..BillingConfig::default()
        })
        .unwrap();
        assert_eq!(disabled.management_write("add_group", None).cents, 0);
        assert_eq!(disabled.initial_credit(None), InitialCredit::NONE);
    }

    #[test]
    fn configuration_is_checked_and_the_secret_not_printed() {
        use crate::config::{Config, ConfigError};
        let env = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        };
        let one_key = Config::load_with_env(
            None,
            env(&[("APPLIANCE_BILLING__STRIPE_SECRET_KEY", "sk_test_x")]),
        );
        assert!(matches!(one_key, Err(ConfigError::Invalid(_))));
        let plain_http = Config::load_with_env(
            None,
            env(&[(
                "APPLIANCE_BILLING__STRIPE_API_BASE",
                "http://stripe.example",
            )]),
        );
        assert!(matches!(plain_http, Err(ConfigError::Invalid(_))));
        let config = Config::load_with_env(
            None,
            env(&[
                ("APPLIANCE_BILLING__STRIPE_SECRET_KEY", "sk_test_topsecret"),
                ("APPLIANCE_BILLING__STRIPE_PUBLISHABLE_KEY", "pk_test_x"),
                (
                    "APPLIANCE_BILLING__STRIPE_API_BASE",
                    "http://127.0.0.1:4242",
                ),
            ]),
        )
        .unwrap();
        assert!(config.billing.enabled());
        let printed = toml::to_string_pretty(&config.redacted()).unwrap();
        assert!(!printed.contains("topsecret"), "{printed}");
        assert!(printed.contains("pk_test_x"));
        assert!(!format!("{config:?}").contains("topsecret"));
    }

    #[test]
    fn secrets_stay_out_of_debug() {
        let config = BillingConfig {
            stripe_secret_key: Some(crate::config::SecretString::new("sk_test_topsecret")),
            stripe_publishable_key: Some("pk_test_x".into()),
            ..BillingConfig::default()
        };
        let billing = Billing::new(&config).unwrap();
        for text in [format!("{config:?}"), format!("{billing:?}")] {
            assert!(!text.contains("topsecret"), "{text}");
        }
    }
}
