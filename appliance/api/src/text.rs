//! The schemas of the free-text fields (names, descriptions, email), used with
//! `#[schema(schema_with = …)]` so that the fields stay `String`s.
//!
//! The server's rules (`appliance/src/api/mod.rs`, `check_text`): no control characters
//! but newline and tab, at most 256 bytes for a name, 4096 for a description and 254 for
//! an email; some names must not be blank. The patterns say the character rules exactly.
//! `maxLength` counts characters where the server counts UTF-8 bytes, so for text outside
//! ASCII it is an upper bound, not the limit: the descriptions say "bytes".

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};

use crate::pattern::{CONTROL, CONTROL_OR_WHITESPACE, WHITESPACE};

/// Largest name, description and email, in UTF-8 bytes (the server's limits).
pub const MAX_NAME_BYTES: usize = 256;
pub const MAX_DESCRIPTION_BYTES: usize = 4096;
pub const MAX_EMAIL_BYTES: usize = 254;

/// No control characters but newline and tab.
fn plain_text() -> String {
    format!("^[^{CONTROL}]*$")
}

fn text_schema(nullable: bool, pattern: String, max: usize, description: &str) -> RefOr<Schema> {
    let schema_type = if nullable {
        SchemaType::from_iter([Type::String, Type::Null])
    } else {
        SchemaType::Type(Type::String)
    };
    ObjectBuilder::new()
        .schema_type(schema_type)
        .pattern(Some(pattern))
        .max_length(Some(max))
        .description(Some(description))
        .into()
}

/// A name: at most 256 bytes, no control characters but newline and tab.
pub fn name() -> RefOr<Schema> {
    text_schema(
        false,
        plain_text(),
        MAX_NAME_BYTES,
        "At most 256 bytes of UTF-8; no control characters other than newline and tab.",
    )
}

/// [`name`], or null (kept as it was).
pub fn optional_name() -> RefOr<Schema> {
    text_schema(
        true,
        plain_text(),
        MAX_NAME_BYTES,
        "At most 256 bytes of UTF-8; no control characters other than newline and tab. Kept when omitted or null.",
    )
}

/// A description: at most 4096 bytes, no control characters but newline and tab.
pub fn description() -> RefOr<Schema> {
    text_schema(
        false,
        plain_text(),
        MAX_DESCRIPTION_BYTES,
        "At most 4096 bytes of UTF-8; no control characters other than newline and tab.",
    )
}

/// [`description`], or null (kept as it was, or empty).
pub fn optional_description() -> RefOr<Schema> {
    text_schema(
        true,
        plain_text(),
        MAX_DESCRIPTION_BYTES,
        "At most 4096 bytes of UTF-8; no control characters other than newline and tab. Omitted or null: unchanged (or empty for a new account).",
    )
}

/// A group's name: a [`name`] with at least one character that is not whitespace.
pub fn group_name() -> RefOr<Schema> {
    text_schema(
        false,
        format!("^[^{CONTROL}]*[^{CONTROL_OR_WHITESPACE}][^{CONTROL}]*$"),
        MAX_NAME_BYTES,
        "Not blank; at most 256 bytes of UTF-8; no control characters other than newline and tab.",
    )
}

/// An account's name: trimmed of surrounding whitespace, then a non-empty [`name`].
pub fn account_name() -> RefOr<Schema> {
    text_schema(
        false,
        format!(
            "^[{WHITESPACE}]*[^{CONTROL_OR_WHITESPACE}](?:[^{CONTROL}]*[^{CONTROL_OR_WHITESPACE}])?[{WHITESPACE}]*$"
        ),
        MAX_NAME_BYTES,
        "Surrounding whitespace is removed; what remains is not empty, at most 256 bytes of UTF-8, with no control characters other than newline and tab.",
    )
}

/// An email address for the payment processor: trimmed; blank or null means none;
/// otherwise `local@domain`, the domain holding a dot and not starting with one, no
/// whitespace or control characters, at most 254 bytes.
pub fn email() -> RefOr<Schema> {
    let visible = format!("[^{CONTROL_OR_WHITESPACE}]");
    let local = format!("[^{CONTROL_OR_WHITESPACE}@]+");
    let domain_start = format!("[^{CONTROL_OR_WHITESPACE}.]");
    text_schema(
        true,
        format!(
            "^[{WHITESPACE}]*(?:{local}@{domain_start}{visible}*\\.{visible}*)?[{WHITESPACE}]*$"
        ),
        MAX_EMAIL_BYTES,
        "Forwarded to the payment processor. Surrounding whitespace is removed; blank or null means none; otherwise local@domain (the domain holds a dot and does not start with one), without whitespace or control characters, at most 254 bytes.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nullable_texts_say_so() {
        let json = serde_json::to_value(optional_name()).unwrap();
        assert_eq!(json["type"], serde_json::json!(["string", "null"]));
        let json = serde_json::to_value(name()).unwrap();
        assert_eq!(json["type"], "string");
        assert_eq!(json["maxLength"], 256);
    }
}
