//! The body of every non-2xx response:
//! `{"error":{"code":403,"reason":"Forbidden","description":"…"}}`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The JSON error body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// The fields of an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// The HTTP status code, repeated.
    #[schema(example = 403)]
    pub code: u16,
    /// The status's reason phrase.
    #[schema(example = "Forbidden")]
    pub reason: String,
    /// One clear sentence saying what was wrong.
    pub description: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_servers_error_json() {
        let text = r#"{"error":{"code":403,"reason":"Forbidden","description":"this usage key may not run QmA"}}"#;
        let body: ErrorBody = serde_json::from_str(text).unwrap();
        assert_eq!(body.error.code, 403);
        assert_eq!(body.error.reason, "Forbidden");
        assert_eq!(body.error.description, "this usage key may not run QmA");
        assert_eq!(serde_json::to_string(&body).unwrap(), text);
    }
}
