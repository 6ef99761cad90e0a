//! The HTTP API: handlers grouped by domain, and the wire types they share.
//!
//! Handlers are small: extract, authorize, call the store (or another domain module),
//! respond. Wire names and shapes follow the spec, then COMPAT.md.

pub mod accounts;
pub mod system;
pub mod usage_keys;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};

use crate::error::ApiError;

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

impl<'de> Deserialize<'de> for WireU64 {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u64),
            Text(String),
        }
        let expected =
            "a non-negative integer as a JSON number, a decimal string or a 0x hex string";
        match Raw::deserialize(de) {
            Ok(Raw::Number(n)) => Ok(WireU64(n)),
            Ok(Raw::Text(text)) => WireU64::parse(&text)
                .map(WireU64)
                .ok_or_else(|| serde::de::Error::custom(format!("expected {expected}"))),
            Err(_) => Err(serde::de::Error::custom(format!("expected {expected}"))),
        }
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
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Success {
    #[schema(example = true)]
    pub success: bool,
}

impl Success {
    pub fn ok() -> axum::Json<Self> {
        axum::Json(Self { success: true })
    }
}

/// Largest name, description and email accepted.
pub const MAX_NAME_LEN: usize = 256;
pub const MAX_DESCRIPTION_LEN: usize = 4096;
pub const MAX_EMAIL_LEN: usize = 254;
/// Largest number of group ids in one permission array.
pub const MAX_GROUP_IDS: usize = 1000;

/// Checks a text field's length (in bytes) and that it has no control characters.
pub fn check_text(field: &str, value: &str, max: usize) -> Result<(), ApiError> {
    if value.len() > max {
        return Err(ApiError::bad_request(format!(
            "`{field}` is longer than {max} bytes"
        )));
    }
    if value
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Err(ApiError::bad_request(format!(
            "`{field}` contains control characters"
        )));
    }
    Ok(())
}

use crate::error::ErrorBody;

/// Errors of any endpoint that reads a JSON body.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub enum BodyErrors {
    /// Malformed JSON or an invalid field.
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// The body is larger than the limit (10 MiB by default).
    #[response(status = 413)]
    TooLarge(ErrorBody),
    /// The body is not `application/json`.
    #[response(status = 415)]
    NotJson(ErrorBody),
}

/// Errors of any endpoint that needs a key.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub enum AuthErrors {
    /// No key, or an unknown or revoked one.
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// The key lacks the permission.
    #[response(status = 403)]
    Forbidden(ErrorBody),
}

/// Errors any endpoint may answer with.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub enum ServerErrors {
    /// A bug; details are logged under the request id.
    #[response(status = 500)]
    Internal(ErrorBody),
    /// A dependency is unavailable, or the request timed out.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}
