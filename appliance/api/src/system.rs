//! Service health and version, at the root (outside `/core/v1`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// `ok`, or `degraded` when a dependency is down.
    #[schema(example = "ok")]
    pub status: String,
    /// Each dependency and its state.
    pub checks: HealthChecks,
    /// The ACME certificate's life cycle, when ACME is configured. Its failures are
    /// retried with backoff and do not make the service unhealthy (the current
    /// certificate is still served).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acme: Option<AcmeHealth>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HealthChecks {
    #[schema(example = "ok")]
    pub store: String,
    #[schema(example = "ok")]
    pub keyservice: String,
    /// `disabled` (no ACME directory), `pending`, `ok`, `renewing` or `failed`.
    #[schema(example = "ok")]
    pub acme: String,
}

/// ACME's state on `/health`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AcmeHealth {
    /// `pending` (no certificate yet), `ok`, `renewing` or `failed` (retrying with backoff).
    #[schema(example = "ok")]
    pub state: String,
    /// The last failure, kept until an issuance succeeds.
    pub last_error: Option<String>,
    /// The ACME account URI.
    pub account_uri: Option<String>,
    /// The served certificate's expiry, Unix seconds.
    pub not_after: Option<i64>,
    /// When it will be renewed, Unix seconds.
    pub renew_after: Option<i64>,
    /// Certificates issued since start.
    pub issued: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Version {
    #[schema(example = "appliance")]
    pub name: String,
    #[schema(example = "0.1.0")]
    pub version: String,
    /// The API version prefix.
    #[schema(example = "v1")]
    pub api: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_without_acme_has_no_acme_field() {
        let text = r#"{"status":"degraded","checks":{"store":"ok","keyservice":"unavailable","acme":"disabled"}}"#;
        let health: Health = serde_json::from_str(text).unwrap();
        assert!(health.acme.is_none());
        assert_eq!(health.checks.keyservice, "unavailable");
        assert_eq!(serde_json::to_string(&health).unwrap(), text);
    }
}
