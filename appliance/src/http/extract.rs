//! Extractors of request bodies and queries whose rejections are `ApiError`s, so every
//! malformed request gets the standard JSON error with the right status. (Who the caller
//! is: `super::auth`; what a billed call costs: `super::billed`.)

use std::time::Duration;

use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use http::request::Parts;
use http::{HeaderMap, header};
use http_body_util::BodyExt as _;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::state::AppState;
use crate::store::Page;

/// A JSON request body: `Content-Type: application/json` (else 415), at most
/// `http.max_body_bytes` (else 413), and well-formed for `T` (else 400 naming the
/// offending field).
pub struct JsonBody<T>(pub T);

fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let mime = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

/// How much of a rejected body is read and thrown away, and for how long, so that the
/// client receives the error response instead of a reset stream.
const DRAIN_MAX_BYTES: usize = 64 * 1024 * 1024;
const DRAIN_MAX_TIME: Duration = Duration::from_secs(5);

/// Reads and discards what is left of `body`, within the drain bounds.
async fn drain(mut body: Body) {
    let work = async {
        let mut seen = 0usize;
        while let Some(Ok(frame)) = body.frame().await {
            if let Some(data) = frame.data_ref() {
                seen = seen.saturating_add(data.len());
                if seen > DRAIN_MAX_BYTES {
                    break;
                }
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_MAX_TIME, work).await;
}

/// Reads a whole body within `limit` bytes (413 beyond it, after draining).
async fn read_body(req: Request, limit: usize) -> Result<Vec<u8>, ApiError> {
    let too_large = || {
        ApiError::PayloadTooLarge(format!(
            "the request body exceeds the limit of {limit} bytes"
        ))
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit as u64) {
        drain(req.into_body()).await;
        return Err(too_large());
    }
    let mut body = req.into_body();
    let mut buf = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|_| ApiError::bad_request("the request body could not be read"))?;
        if let Some(data) = frame.data_ref() {
            if buf.len() + data.len() > limit {
                drain(body).await;
                return Err(too_large());
            }
            buf.extend_from_slice(data);
        }
    }
    Ok(buf)
}

fn not_json() -> ApiError {
    ApiError::UnsupportedMediaType(
        "the request body must be JSON, sent with Content-Type: application/json".into(),
    )
}

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        if !is_json(req.headers()) {
            drain(req.into_body()).await;
            return Err(not_json());
        }
        let bytes = read_body(req, state.config.http.max_body_bytes).await?;
        parse_json(&bytes).map(JsonBody)
    }
}

/// A JSON body that may be absent: no body at all (and no content type, or JSON) is
/// `None`; otherwise as `JsonBody`.
pub struct OptionalJsonBody<T>(pub Option<T>);

impl<T: DeserializeOwned> FromRequest<AppState> for OptionalJsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let typed = req.headers().contains_key(header::CONTENT_TYPE);
        if typed && !is_json(req.headers()) {
            drain(req.into_body()).await;
            return Err(not_json());
        }
        let bytes = read_body(req, state.config.http.max_body_bytes).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJsonBody(None));
        }
        if !typed {
            return Err(not_json());
        }
        parse_json(&bytes).map(|v| OptionalJsonBody(Some(v)))
    }
}

/// Parses JSON, naming the field at fault in the error.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if path == "." || path == "?" || path.is_empty() {
            ApiError::bad_request(format!("invalid JSON body: {inner}"))
        } else {
            ApiError::bad_request(format!("invalid JSON body at `{path}`: {inner}"))
        }
    })?;
    de.end()
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?;
    Ok(value)
}

/// Query parameters; malformed ones are 400.
pub struct QueryParams<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::try_from_uri(&parts.uri)
            .map(|q| QueryParams(q.0))
            .map_err(|e| ApiError::bad_request(format!("invalid query: {}", e.body_text())))
    }
}

/// Default and largest `page_size` (`docs/compatibility.md`: larger values are clamped).
pub const DEFAULT_PAGE_SIZE: u32 = 100;
pub const MAX_PAGE_SIZE: u32 = 1000;

#[derive(serde::Deserialize)]
struct PagingQuery {
    page_number: Option<String>,
    page_size: Option<String>,
}

/// `page_number` (0-based, default 0) and `page_size` (default 100, clamped to
/// 1..=1000) from the query string.
pub struct Paging(pub Page);

impl<S: Send + Sync> FromRequestParts<S> for Paging {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let QueryParams(q) = QueryParams::<PagingQuery>::from_request_parts(parts, state).await?;
        let number = match q.page_number.as_deref().map(str::trim) {
            None | Some("") => 0,
            Some(text) => text
                .parse::<u64>()
                .map_err(|_| ApiError::bad_request("page_number must be a non-negative integer"))?,
        };
        let size = match q.page_size.as_deref().map(str::trim) {
            None | Some("") => DEFAULT_PAGE_SIZE,
            Some(text) => {
                let n = text.parse::<u64>().map_err(|_| {
                    ApiError::bad_request("page_size must be a non-negative integer")
                })?;
                n.clamp(1, u64::from(MAX_PAGE_SIZE)) as u32
            }
        };
        Ok(Paging(Page { number, size }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn json_content_types() {
        assert!(is_json(&headers(&[("content-type", "application/json")])));
        assert!(is_json(&headers(&[(
            "content-type",
            "Application/JSON; charset=utf-8"
        )])));
        assert!(is_json(&headers(&[(
            "content-type",
            "application/merge-patch+json"
        )])));
        assert!(!is_json(&headers(&[("content-type", "text/plain")])));
        assert!(!is_json(&headers(&[])));
    }

    #[test]
    fn json_errors_name_the_field() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Body {
            inner: Inner,
        }
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Inner {
            flag: bool,
        }
        let err = parse_json::<Body>(br#"{"inner":{"flag":"yes"}}"#).unwrap_err();
        assert!(err.to_string().contains("inner.flag"), "{err}");
        let err = parse_json::<Body>(b"{").unwrap_err();
        assert!(matches!(err, ApiError::BadRequest(_)));
        let err = parse_json::<Body>(br#"{"inner":{"flag":true}} trailing"#).unwrap_err();
        assert!(matches!(err, ApiError::BadRequest(_)));
    }
}
