//! A small Stripe API client: payment intents only.
//!
//! Requests go to a configurable base URL (Stripe, or a localstripe in tests) with the
//! secret key as a bearer token and form-encoded bodies. Every POST carries an
//! `Idempotency-Key`, kept across its retries, so a retried create never makes a second
//! intent. Connection failures, timeouts, 429 and 5xx answers are retried a bounded
//! number of times with exponential backoff; other answers are final. The secret key is
//! never logged, and errors never include it.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::Deserialize;

use crate::config::{BillingConfig, SecretString};

/// First retry delay; doubled for each further retry.
const BACKOFF_BASE: Duration = Duration::from_millis(200);

#[derive(Debug, thiserror::Error)]
pub enum StripeError {
    /// Stripe has no such object (404).
    #[error("Stripe has no such object")]
    NotFound,
    /// Stripe refused the request for good (a 4xx other than 404 and 429).
    #[error("Stripe refused the request (HTTP {status}): {message}")]
    Refused { status: u16, message: String },
    /// Stripe could not be reached or kept failing.
    #[error("Stripe is unavailable: {0}")]
    Unavailable(String),
    /// Stripe answered something this client does not understand.
    #[error("Stripe sent an unexpected answer: {0}")]
    BadResponse(String),
    /// The HTTP client could not be built (at start).
    #[error("cannot build the Stripe client: {0}")]
    Client(#[source] reqwest::Error),
}

/// The fields of a payment intent this service uses.
#[derive(Clone, Deserialize)]
pub struct PaymentIntent {
    pub id: String,
    pub status: String,
    pub amount: i64,
    #[serde(default)]
    pub amount_received: Option<i64>,
    pub currency: String,
    /// For the browser's Stripe.js; not logged.
    #[serde(default)]
    pub client_secret: Option<String>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

impl std::fmt::Debug for PaymentIntent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PaymentIntent")
            .field("id", &self.id)
            .field("status", &self.status)
            .field("amount", &self.amount)
            .field("amount_received", &self.amount_received)
            .field("currency", &self.currency)
            .field("metadata", &self.metadata)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct ErrorEnvelope {
    error: ErrorDetail,
}

#[derive(Deserialize)]
struct ErrorDetail {
    #[serde(default)]
    message: Option<String>,
}

/// The Stripe client.
#[derive(Clone)]
pub struct StripeClient {
    http: reqwest::Client,
    base: String,
    secret: SecretString,
    max_retries: u32,
}

impl std::fmt::Debug for StripeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StripeClient")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl StripeClient {
    pub fn new(config: &BillingConfig, secret: SecretString) -> Result<Self, StripeError> {
        let http = reqwest::Client::builder()
            .use_rustls_tls()
            .timeout(Duration::from_millis(config.stripe_timeout_ms))
            .connect_timeout(Duration::from_millis(config.stripe_connect_timeout_ms))
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("appliance/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(StripeError::Client)?;
        Ok(Self {
            http,
            base: config.stripe_api_base.trim_end_matches('/').to_owned(),
            secret,
            max_retries: config.stripe_max_retries,
        })
    }

    /// Creates a payment intent for `amount` (smallest currency unit) with `metadata`.
    /// `idempotency_key` identifies this one logical creation.
    pub async fn create_payment_intent(
        &self,
        amount: u64,
        currency: &str,
        metadata: &[(&str, String)],
        idempotency_key: &str,
    ) -> Result<PaymentIntent, StripeError> {
        let mut form: Vec<(String, String)> = vec![
            ("amount".into(), amount.to_string()),
            ("currency".into(), currency.to_owned()),
            ("payment_method_types[0]".into(), "card".into()),
        ];
        for (key, value) in metadata {
            form.push((format!("metadata[{key}]"), value.clone()));
        }
        self.send(
            Method::POST,
            "/v1/payment_intents",
            Some(&form),
            Some(idempotency_key),
        )
        .await
    }

    /// Retrieves a payment intent by id (`pi_…`, checked by the caller).
    pub async fn retrieve_payment_intent(&self, id: &str) -> Result<PaymentIntent, StripeError> {
        self.send(
            Method::GET,
            &format!("/v1/payment_intents/{id}"),
            None,
            None,
        )
        .await
    }

    async fn send<T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        form: Option<&[(String, String)]>,
        idempotency_key: Option<&str>,
    ) -> Result<T, StripeError> {
        let url = format!("{}{path}", self.base);
        let mut attempt = 0u32;
        loop {
            let mut req = self
                .http
                .request(method.clone(), &url)
                .bearer_auth(self.secret.expose());
            if let Some(key) = idempotency_key {
                req = req.header("Idempotency-Key", key);
            }
            if let Some(form) = form {
                req = req.form(form);
            }
            let retryable = match req.send().await {
                Ok(resp) => {
                    let status = resp.status();
                    if status.is_success() {
                        let bytes = resp
                            .bytes()
                            .await
                            .map_err(|e| StripeError::Unavailable(e.without_url().to_string()))?;
                        return serde_json::from_slice(&bytes)
                            .map_err(|e| StripeError::BadResponse(e.to_string()));
                    }
                    let retry = status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS;
                    let message = error_message(resp).await;
                    if !retry {
                        return Err(if status == StatusCode::NOT_FOUND {
                            StripeError::NotFound
                        } else {
                            StripeError::Refused {
                                status: status.as_u16(),
                                message,
                            }
                        });
                    }
                    format!("HTTP {status}: {message}")
                }
                Err(err) => err.without_url().to_string(),
            };
            if attempt >= self.max_retries {
                return Err(StripeError::Unavailable(retryable));
            }
            let delay = BACKOFF_BASE.saturating_mul(1 << attempt.min(10));
            tracing::warn!(
                %method,
                path,
                attempt = attempt + 1,
                error = %retryable,
                "Stripe request failed; retrying"
            );
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }
}

/// Stripe's error message from an error answer (bounded), or the status text.
async fn error_message(resp: reqwest::Response) -> String {
    let status = resp.status();
    let bytes = resp.bytes().await.unwrap_or_default();
    serde_json::from_slice::<ErrorEnvelope>(&bytes)
        .ok()
        .and_then(|e| e.error.message)
        .map(|m| m.chars().take(300).collect())
        .unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_owned())
}
