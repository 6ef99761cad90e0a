//! The wire types of the appliance's `/core/v1` API, shared by the server (`appliance`)
//! and its clients, and [`endpoints`], every endpoint described as data.
//!
//! One module per handler module of the server (`appliance/src/api/`): its request,
//! query and response bodies, each `Serialize` + `Deserialize` (a client serializes
//! requests and deserializes responses) and `utoipa::ToSchema`/`IntoParams` (the server's
//! OpenAPI document is generated from them). The rule: a wire type lives here; what the
//! server checks (lengths, CIDs, addresses) and how it builds a response from its store
//! stays in the appliance. See `appliance/api/README.md`.

pub mod accounts;
pub mod actions;
pub mod billing;
pub mod chain;
pub mod endpoints;
pub mod error;
pub mod execution;
pub mod groups;
pub mod signatures;
pub mod system;
pub mod usage_keys;
pub mod wallets;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};

/// An integer identifier on the wire (a `group_id`): accepted as a JSON number, a
/// decimal string or a `0x` hex string; always returned as a decimal string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WireU64(pub u64);

impl WireU64 {
    pub fn parse(text: &str) -> Option<u64> {
        let text = text.trim();
        if let Some(hex_digits) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            if hex_digits.is_empty() || hex_digits.len() > 16 {
                return None;
            }
            return u64::from_str_radix(hex_digits, 16).ok();
        }
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        text.parse().ok()
    }
}

const WIRE_U64_EXPECTED: &str =
    "a non-negative integer as a JSON number, a decimal string or a 0x hex string";

impl<'de> Deserialize<'de> for WireU64 {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct Visitor;

        impl serde::de::Visitor<'_> for Visitor {
            type Value = WireU64;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(WIRE_U64_EXPECTED)
            }

            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<WireU64, E> {
                Ok(WireU64(v))
            }

            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<WireU64, E> {
                u64::try_from(v)
                    .map(WireU64)
                    .map_err(|_| E::custom(format!("expected {WIRE_U64_EXPECTED}, found {v}")))
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<WireU64, E> {
                WireU64::parse(v)
                    .map(WireU64)
                    .ok_or_else(|| E::custom(format!("expected {WIRE_U64_EXPECTED}")))
            }
        }

        de.deserialize_any(Visitor)
    }
}

impl Serialize for WireU64 {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_str(&self.0)
    }
}

impl utoipa::PartialSchema for WireU64 {
    fn schema() -> RefOr<Schema> {
        OneOfBuilder::new()
            .item(ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(0)))
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some("^([0-9]{1,20}|0[xX][0-9a-fA-F]{1,16})$")),
            )
            .description(Some(
                "An unsigned 64-bit id: a JSON number, a decimal string or a 0x hex string on input; a decimal string on output.",
            ))
            .into()
    }
}

impl utoipa::ToSchema for WireU64 {}

/// `{"success": true}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Success {
    #[schema(example = true)]
    pub success: bool,
}

// The answer of the calls that register an action (add_action, add_action_to_group). No
// doc comment: it would become the schema's description in the OpenAPI document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HashedCidResponse {
    pub success: bool,
    /// keccak256 of the CID string.
    pub hashed_cid: String,
}

/// The paging query parameters of the list endpoints: both optional.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::IntoParams,
)]
#[into_params(parameter_in = Query)]
pub struct PagingParams {
    /// 0-based page, default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_number: Option<u64>,
    /// Items per page, default 100, at most 1000 (larger is clamped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_u64_forms() {
        let parse = |json: &str| serde_json::from_str::<WireU64>(json).map(|w| w.0);
        assert_eq!(parse("7").unwrap(), 7);
        assert_eq!(parse("\"42\"").unwrap(), 42);
        assert_eq!(parse("\"0x1f\"").unwrap(), 31);
        assert_eq!(parse("\"18446744073709551615\"").unwrap(), u64::MAX);
        for bad in [
            "-1",
            "1.5",
            "\"\"",
            "\"0x\"",
            "\"12a\"",
            "\"18446744073709551616\"",
            "null",
            "[]",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert_eq!(serde_json::to_string(&WireU64(5)).unwrap(), "\"5\"");
        // What the server returns, it accepts.
        let back: WireU64 =
            serde_json::from_str(&serde_json::to_string(&WireU64(u64::MAX)).unwrap()).unwrap();
        assert_eq!(back, WireU64(u64::MAX));
    }

    #[test]
    fn missing_ids_are_named() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Q {
            group_id: WireU64,
        }
        let err = serde_json::from_str::<Q>("{}").unwrap_err().to_string();
        assert!(err.contains("missing field `group_id`"), "{err}");
    }

    #[test]
    fn paging_omits_what_is_not_set() {
        assert_eq!(
            serde_json::to_value(PagingParams::default()).unwrap(),
            serde_json::json!({})
        );
        let page = PagingParams {
            page_number: Some(2),
            page_size: None,
        };
        assert_eq!(
            serde_json::to_value(page).unwrap(),
            serde_json::json!({"page_number": 2})
        );
        let back: PagingParams = serde_json::from_str("{}").unwrap();
        assert_eq!(back, PagingParams::default());
    }

    #[test]
    fn success_round_trips() {
        let text = serde_json::to_string(&Success { success: true }).unwrap();
        assert_eq!(text, r#"{"success":true}"#);
        assert!(serde_json::from_str::<Success>(&text).unwrap().success);
    }
}
