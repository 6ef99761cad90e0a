//! Running actions: `POST /lit_action`, and the limits in force.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa::openapi::schema::{
    AllOfBuilder, AnyOfBuilder, ObjectBuilder, OneOfBuilder, Schema, SchemaType, Type,
};
use utoipa::openapi::{Ref, RefOr};

use crate::Cid;

/// A run: `code`, or `ipfs_id`, or both (then the code must hash to that CID, else 422),
/// and the argument of `main`. Its schema says that one of the two is given (a hand-written
/// [`utoipa::PartialSchema`]: the derive cannot say "at least one of").
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LitActionRequest {
    /// The JavaScript code (defines `main`). Give `code`, or `ipfs_id`, or both (then
    /// the code must hash to that CID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The CID of code the service has seen (from an earlier execution or
    /// `get_lit_action_ipfs_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipfs_id: Option<Cid>,
    /// The argument of `main`: any JSON value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub js_params: Option<Box<serde_json::value::RawValue>>,
}

impl utoipa::PartialSchema for LitActionRequest {
    fn schema() -> RefOr<Schema> {
        let nullable_string = || SchemaType::from_iter([Type::String, Type::Null]);
        let fields = ObjectBuilder::new()
            .property(
                "code",
                ObjectBuilder::new().schema_type(nullable_string()).description(Some(
                    "The JavaScript code (defines `main`). Give `code`, or `ipfs_id`, or both (then the code must hash to that CID).",
                )),
            )
            .property(
                "ipfs_id",
                OneOfBuilder::new()
                    .item(ObjectBuilder::new().schema_type(Type::Null))
                    .item(Ref::from_schema_name(Cid::name()))
                    .description(Some(
                        "The CID of code the service has seen (from an earlier execution or `get_lit_action_ipfs_id`).",
                    )),
            )
            .property(
                "js_params",
                ObjectBuilder::new()
                    .schema_type(SchemaType::AnyValue)
                    .description(Some("The argument of `main`: any JSON value.")),
            );
        let given = |field: &str| {
            ObjectBuilder::new()
                .property(field, ObjectBuilder::new().schema_type(Type::String))
                .required(field)
        };
        AllOfBuilder::new()
            .item(fields)
            .item(AnyOfBuilder::new().item(given("code")).item(given("ipfs_id")))
            .description(Some(
                "A run: `code`, or `ipfs_id`, or both (the code must then hash to the CID, else 422), and the argument of `main`.",
            ))
            .into()
    }
}

impl ToSchema for LitActionRequest {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((Cid::name().into(), <Cid as utoipa::PartialSchema>::schema()));
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ActionError {
    /// `exception`, `timeout`, `memory` or `limit`.
    pub kind: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LitActionResponse {
    /// What the code returned or set with `Lit.Actions.setResponse`: any JSON value
    /// (null on failure, or when the code returned nothing).
    pub response: Value,
    /// Every console line, each ending in a newline.
    pub logs: String,
    pub has_error: bool,
    /// Present when the code failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ActionError>,
}

/// The action limits in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ClientConfig {
    pub timeout_ms: u64,
    pub memory_limit_mb: u64,
    pub max_code_length: usize,
    pub max_response_length: usize,
    pub max_console_log_length: usize,
    pub max_fetch_count: u32,
    pub max_js_params_length: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_by_cid_sends_only_the_cid_and_params() {
        let req = LitActionRequest {
            ipfs_id: Some("QmZr5qtNmcxBdpXF7K7hSkLbxK2wUVhMhZn29PKzhynvcR".into()),
            js_params: Some(serde_json::value::RawValue::from_string(r#"{"n":1}"#.into()).unwrap()),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_string(&req).unwrap(),
            r#"{"ipfs_id":"QmZr5qtNmcxBdpXF7K7hSkLbxK2wUVhMhZn29PKzhynvcR","js_params":{"n":1}}"#
        );
        let back: LitActionRequest = serde_json::from_str(r#"{"code":"x"}"#).unwrap();
        assert_eq!(back.code.as_deref(), Some("x"));
        assert!(back.ipfs_id.is_none() && back.js_params.is_none());
    }

    #[test]
    fn a_response_without_error_has_no_error_field() {
        let ok = LitActionResponse {
            response: serde_json::json!({"sig": "0x01"}),
            logs: "hi\n".into(),
            has_error: false,
            error: None,
        };
        let json = serde_json::to_value(&ok).unwrap();
        assert!(json.get("error").is_none());
        assert_eq!(
            serde_json::from_value::<LitActionResponse>(json).unwrap(),
            ok
        );
        let failed: LitActionResponse = serde_json::from_str(
            r#"{"response":null,"logs":"","has_error":true,"error":{"kind":"timeout","message":"ran too long"}}"#,
        )
        .unwrap();
        assert_eq!(failed.error.map(|e| e.kind).as_deref(), Some("timeout"));
    }
}
