//! Accounts (API mode): creation and key verification.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct NewAccountRequest {
    /// The account's name (1 to 256 bytes once trimmed).
    #[schema(example = "my-app", schema_with = crate::text::account_name)]
    pub account_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::text::optional_description)]
    pub account_description: Option<String>,
    /// Forwarded to the payment processor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::text::email)]
    pub email: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct NewAccountResponse {
    /// The account key: standard base64 of 32 random bytes. Shown once; only its hash
    /// is stored.
    pub api_key: String,
    /// The account's own wallet (EIP-55): held by keyservice, usable in actions.
    #[schema(example = "0x16991520B73a80fd1221d66229A9C1c93D9792c8")]
    pub wallet_address: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_optional_fields_are_not_sent() {
        let req = NewAccountRequest {
            account_name: "my-app".into(),
            account_description: None,
            email: None,
        };
        let json = serde_json::to_value(&req).unwrap();
        assert_eq!(json, serde_json::json!({"account_name": "my-app"}));
        assert_eq!(
            serde_json::from_value::<NewAccountRequest>(json).unwrap(),
            req
        );
    }
}
