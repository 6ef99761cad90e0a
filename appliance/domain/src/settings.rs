//! What every configuration section of the appliance shares: a secret value that is
//! never shown, and the error a section gives when its settings do not hold together.
//!
//! Each subsystem owns its section (`appliance_store::config::StoreConfig`,
//! `appliance_chain::config::ChainConfig`, `appliance_execution::config::ActionsConfig`,
//! and the front end's own); the appliance's `config` module composes them, loads the
//! file and the environment, and checks what crosses sections.

use serde::{Deserialize, Serialize};

/// A secret configuration value (the Stripe secret key, the database URL, the metrics
/// bearer token): never shown by `Debug` (so never in logs) nor by
/// `appliance print-config`; compared in constant time.
#[derive(Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SecretString(String);

impl SecretString {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretString(<redacted>)")
    }
}

impl PartialEq for SecretString {
    fn eq(&self, other: &Self) -> bool {
        use subtle::ConstantTimeEq as _;
        self.0.as_bytes().ct_eq(other.0.as_bytes()).into()
    }
}

/// A section's settings do not hold together: the message names the keys as the
/// operator writes them (`store.max_connections must be at least 1`) and never a
/// secret's value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidSetting(pub String);

impl InvalidSetting {
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_never_shown_by_debug() {
        let secret = SecretString::new("sk_live_do_not_show");
        let shown = format!("{secret:?} {:?}", Some(&secret));
        assert!(!shown.contains("do_not_show"), "{shown}");
        assert_eq!(secret.expose(), "sk_live_do_not_show");
    }

    #[test]
    fn secrets_compare_by_value() {
        assert_eq!(SecretString::new("a"), SecretString::new("a"));
        assert_ne!(SecretString::new("a"), SecretString::new("b"));
        assert_ne!(SecretString::new("a"), SecretString::new("ab"));
    }
}
