//! The wire types of the appliance's `/core/v1` API, shared by the server (`appliance`)
//! and its clients, and [`endpoints`], every endpoint described as data.
//!
//! One module per handler module of the server (`appliance/src/api/`): its request,
//! query and response bodies, each `Serialize` + `Deserialize` (a client serializes
//! requests and deserializes responses) and `utoipa::ToSchema`/`IntoParams` (the server's
//! OpenAPI document is generated from them). The rule: a wire type lives here, with a
//! schema that says exactly what the server accepts ([`ids`], [`text`]); the checks
//! themselves (lengths, CIDs, addresses) and how the server builds a response from its
//! store stay in the appliance, whose tests keep the two equal. See
//! `appliance/api/README.md`.

pub mod accounts;
pub mod actions;
pub mod billing;
pub mod chain;
pub mod endpoints;
pub mod error;
pub mod execution;
pub mod groups;
pub mod ids;
pub mod operator;
mod pattern;
pub mod signatures;
pub mod system;
pub mod text;
pub mod usage_keys;
pub mod wallets;

pub use ids::{
    Cid, HashedCid, PaymentIntentId, PermittedCidHash, PkpIdOrAddress, UsageKeyRef, WalletAddress,
};
pub use pattern::{CID_V0_FIRST, CID_V0_LAST};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::openapi::{RefOr, Required};

/// An integer identifier on the wire (a `group_id`): accepted as a JSON integer (also
/// written as a whole number such as `2.0`, up to 2^53), a decimal string or a `0x` hex
/// string of 1 to 16 digits (strings may carry surrounding whitespace); always returned
/// as a decimal string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WireU64(pub u64);

/// The largest integer a JSON number written with a fraction or an exponent (`2.0`,
/// `2e3`) is read as: beyond it a double no longer holds every integer, so the number may
/// not be the one the client meant.
pub const MAX_WHOLE_FLOAT: u64 = 1 << 53;

/// `v` as an integer, when it is a whole number from 0 to [`MAX_WHOLE_FLOAT`]: JSON
/// Schema's `integer` includes `2.0`, so the server reads it as 2.
fn whole_float(v: f64) -> Option<u64> {
    (v.fract() == 0.0 && (0.0..=MAX_WHOLE_FLOAT as f64).contains(&v)).then_some(v as u64)
}

/// Deserializes a `u64` field from a JSON integer, or a whole number written with a
/// fraction or an exponent up to [`MAX_WHOLE_FLOAT`] (`#[serde(deserialize_with)]`).
pub fn whole_u64<'de, D: Deserializer<'de>>(de: D) -> Result<u64, D::Error> {
    struct Visitor;

    impl serde::de::Visitor<'_> for Visitor {
        type Value = u64;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a non-negative integer")
        }

        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u64, E> {
            Ok(v)
        }

        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u64, E> {
            u64::try_from(v)
                .map_err(|_| E::custom(format!("expected a non-negative integer, found {v}")))
        }

        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<u64, E> {
            whole_float(v)
                .ok_or_else(|| E::custom(format!("expected a non-negative integer, found {v}")))
        }
    }

    de.deserialize_any(Visitor)
}

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

            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<WireU64, E> {
                whole_float(v)
                    .map(WireU64)
                    .ok_or_else(|| E::custom(format!("expected {WIRE_U64_EXPECTED}, found {v}")))
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
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(0))
                    .maximum(Some(u64::MAX)),
            )
            .item(ObjectBuilder::new().schema_type(Type::String).pattern(Some(
                pattern::trimmed(&format!(
                    "{}|0[xX][0-9a-fA-F]{{1,16}}",
                    pattern::decimal_u64()
                )),
            )))
            .description(Some(
                "An unsigned 64-bit id: on input a JSON integer (a whole number written as 2.0 is read up to 2^53), a decimal string or a 0x hex string of 1 to 16 digits (surrounding whitespace ignored); a decimal string on output.",
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
///
/// `page_size` is not bounded by the largest page: a larger value is read as the largest
/// page ([`MAX_PAGE_SIZE`] items), as the reference service does, so clients written for
/// it keep working. The schema declares only what is refused: a value that is not a
/// decimal `u64`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PagingParams {
    /// 0-based page, default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_number: Option<u64>,
    /// Items per page, default 100. A page holds at most 1000 items: a larger value is
    /// read as 1000, and 0 as 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<u32>,
}

/// Written out rather than derived: the derive gives `page_size` the `int32` format of its
/// Rust type, which declares a maximum the server does not have.
impl utoipa::IntoParams for PagingParams {
    fn into_params(
        parameter_in_provider: impl Fn() -> Option<ParameterIn>,
    ) -> Vec<utoipa::openapi::path::Parameter> {
        let param = |name: &str, description: &str| {
            ParameterBuilder::new()
                .name(name)
                .parameter_in(parameter_in_provider().unwrap_or(ParameterIn::Query))
                .required(Required::False)
                .description(Some(description))
                .schema(Some(any_u64()))
                .build()
        };
        vec![
            param("page_number", "0-based page, default 0."),
            param(
                "page_size",
                "Items per page, default 100. A page holds at most 1000 items: a larger value is read as 1000 (as the reference service does), and 0 as 1.",
            ),
        ]
    }
}

/// Items on a page when `page_size` is not given.
pub const DEFAULT_PAGE_SIZE: u32 = 100;
/// The most items on a page; a larger `page_size` is read as this.
pub const MAX_PAGE_SIZE: u32 = 1000;

/// A query integer from 0 to `u64::MAX` (what the paging parameters accept).
fn any_u64() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .minimum(Some(0))
        .maximum(Some(u64::MAX))
        .into()
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
