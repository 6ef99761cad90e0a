//! Extractors of request bodies and queries whose rejections are `ApiError`s, so every
//! malformed request gets the standard JSON error with the right status. (Who the caller
//! is: `super::auth`; what a billed call costs: `super::billed`.)

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use http::request::Parts;
use http::{HeaderMap, header};
use http_body_util::BodyExt as _;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::config::Config;
use crate::error::ApiError;
use crate::state::AppState;
use crate::store::Page;

/// The body limit classes of [`JsonBody`]'s `L` parameter. Every endpoint that reads a
/// body gets [`SMALL`](limit::SMALL) unless its extractor names a larger class, so a new
/// route cannot silently accept a large body. Every class is further capped by
/// `http.max_body_bytes`.
pub mod limit {
    /// The default: small writes (`new_account`, metadata updates, ids): 16 KiB.
    pub const SMALL: u8 = 0;
    /// Wallet-signature requests (a `typed_data` of at most 4 KiB and a signature): 8 KiB.
    pub const SIGNATURE: u8 = 1;
    /// Writes carrying permission lists (groups, usage keys; up to 1000 entries per
    /// list): 256 KiB.
    pub const LISTS: u8 = 2;
    /// A JSON string of action code (`get_lit_action_ipfs_id`): twice
    /// `actions.max_code_bytes` (room for JSON escapes) + 16 KiB.
    pub const CODE: u8 = 3;
    /// A run (`/lit_action`): twice (`actions.max_code_bytes` +
    /// `actions.max_js_params_bytes`) + 16 KiB.
    pub const ACTION: u8 = 4;

    pub(super) const SMALL_BYTES: usize = 16 * 1024;
    pub(super) const SIGNATURE_BYTES: usize = 8 * 1024;
    pub(super) const LISTS_BYTES: usize = 256 * 1024;
    pub(super) const OVERHEAD_BYTES: usize = 16 * 1024;
}

/// The byte limit of body class `class` under `config` (see [`limit`]).
pub fn body_limit(class: u8, config: &Config) -> usize {
    let actions = &config.actions;
    let bytes = match class {
        limit::SIGNATURE => limit::SIGNATURE_BYTES,
        limit::LISTS => limit::LISTS_BYTES,
        limit::CODE => actions
            .max_code_bytes
            .saturating_mul(2)
            .saturating_add(limit::OVERHEAD_BYTES),
        limit::ACTION => actions
            .max_code_bytes
            .saturating_add(actions.max_js_params_bytes)
            .saturating_mul(2)
            .saturating_add(limit::OVERHEAD_BYTES),
        _ => limit::SMALL_BYTES,
    };
    bytes.min(config.http.max_body_bytes)
}

/// A JSON request body: `Content-Type: application/json` (else 415), at most the limit
/// of class `L` (else 413 naming the limit; see [`limit`]), nested at most
/// `http.max_json_depth` deep (else 400), and well-formed for `T` (else 400 naming the
/// offending field). The bytes held while it is read count against the server's
/// [`BodyBudget`].
pub struct JsonBody<T, const L: u8 = { limit::SMALL }>(pub T);

/// The shared budget of request-body bytes held in memory at once
/// (`http.max_buffered_body_bytes`), put into every request's extensions by the accept
/// loop (`crate::server`). A body that cannot get its bytes within `wait` is refused
/// with 503 and `Retry-After`.
#[derive(Clone, Debug)]
pub struct BodyBudget {
    bytes: Arc<Semaphore>,
    total: usize,
    wait: Duration,
}

impl BodyBudget {
    pub fn new(total: usize, wait: Duration) -> Self {
        let total = total.min(Semaphore::MAX_PERMITS);
        Self {
            bytes: Arc::new(Semaphore::new(total)),
            total,
            wait,
        }
    }

    /// Bytes not held by any body now.
    pub fn available(&self) -> usize {
        self.bytes.available_permits()
    }
}

/// Bytes of one body held against the budget; returned when dropped.
struct Reservation {
    budget: Option<BodyBudget>,
    held: Option<OwnedSemaphorePermit>,
    deadline: Instant,
    reserved: usize,
}

impl Reservation {
    fn new(budget: Option<BodyBudget>) -> Self {
        let wait = budget.as_ref().map_or(Duration::ZERO, |b| b.wait);
        Self {
            budget,
            held: None,
            deadline: Instant::now() + wait,
            reserved: 0,
        }
    }

    /// Makes sure `total` bytes are reserved, waiting until the deadline at most.
    async fn grow_to(&mut self, total: usize) -> Result<(), ApiError> {
        let Some(budget) = &self.budget else {
            return Ok(());
        };
        if total <= self.reserved {
            return Ok(());
        }
        let busy = || {
            ApiError::Busy(
                "the server is holding too many request bodies at once; retry shortly".into(),
            )
        };
        let more = total - self.reserved;
        if total > budget.total {
            return Err(busy());
        }
        let more_u32 = u32::try_from(more).map_err(|_| busy())?;
        let permit = tokio::time::timeout_at(
            self.deadline,
            Arc::clone(&budget.bytes).acquire_many_owned(more_u32),
        )
        .await
        .map_err(|_| {
            tracing::debug!(bytes = more, "request body budget exhausted");
            busy()
        })?
        .map_err(|_| busy())?;
        match &mut self.held {
            Some(held) => held.merge(permit),
            None => self.held = Some(permit),
        }
        self.reserved = total;
        Ok(())
    }
}

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
/// client receives the error response instead of a reset stream. Nothing read while
/// draining is kept.
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

/// A body read within its limit, with the budget it holds until dropped.
struct BufferedBody {
    bytes: Vec<u8>,
    _reservation: Reservation,
}

/// Reads a whole body within `limit` bytes: refused at once when its declared length is
/// over the limit, else counted as it streams in (413 beyond the limit, after draining).
/// Every byte kept is first reserved from the request's [`BodyBudget`] (503 when none
/// is to be had in time).
async fn read_body(req: Request, limit: usize) -> Result<BufferedBody, ApiError> {
    let too_large = || {
        ApiError::PayloadTooLarge(format!(
            "the request body exceeds this endpoint's limit of {limit} bytes"
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
    let mut reservation = Reservation::new(req.extensions().get::<BodyBudget>().cloned());
    let mut body = req.into_body();
    if let Some(len) = declared {
        // At most `limit`, checked above.
        if let Err(err) = reservation.grow_to(len as usize).await {
            drain(body).await;
            return Err(err);
        }
    }
    let mut buf = Vec::with_capacity(declared.map_or(0, |len| len as usize));
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|_| ApiError::bad_request("the request body could not be read"))?;
        if let Some(data) = frame.data_ref() {
            let total = buf.len().saturating_add(data.len());
            if total > limit {
                drop((buf, reservation));
                drain(body).await;
                return Err(too_large());
            }
            if let Err(err) = reservation.grow_to(total).await {
                drop((buf, reservation));
                drain(body).await;
                return Err(err);
            }
            buf.extend_from_slice(data);
        }
    }
    Ok(BufferedBody {
        bytes: buf,
        _reservation: reservation,
    })
}

fn not_json() -> ApiError {
    ApiError::UnsupportedMediaType(
        "the request body must be JSON, sent with Content-Type: application/json".into(),
    )
}

impl<T: DeserializeOwned, const L: u8> FromRequest<AppState> for JsonBody<T, L> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        if !is_json(req.headers()) {
            drain(req.into_body()).await;
            return Err(not_json());
        }
        let body = read_body(req, body_limit(L, &state.config)).await?;
        check_depth(&body.bytes, state.config.http.max_json_depth)?;
        parse_json(&body.bytes).map(JsonBody)
    }
}

/// A JSON body that may be absent: no body at all (and no content type, or JSON) is
/// `None`; otherwise as `JsonBody` (class `L`).
pub struct OptionalJsonBody<T, const L: u8 = { limit::SMALL }>(pub Option<T>);

impl<T: DeserializeOwned, const L: u8> FromRequest<AppState> for OptionalJsonBody<T, L> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let typed = req.headers().contains_key(header::CONTENT_TYPE);
        if typed && !is_json(req.headers()) {
            drain(req.into_body()).await;
            return Err(not_json());
        }
        let body = read_body(req, body_limit(L, &state.config)).await?;
        if body.bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJsonBody(None));
        }
        if !typed {
            return Err(not_json());
        }
        check_depth(&body.bytes, state.config.http.max_json_depth)?;
        parse_json(&body.bytes).map(|v| OptionalJsonBody(Some(v)))
    }
}

/// A scan (not a parse) of a JSON text, before any value is built: how deep its arrays
/// and objects nest, and how many bytes it has outside insignificant whitespace.
struct Shape {
    too_deep: bool,
    significant_bytes: usize,
}

fn scan(bytes: &[u8], max_depth: usize) -> Shape {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut significant_bytes = 0usize;
    for &b in bytes {
        if in_string {
            significant_bytes += 1;
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b' ' | b'\t' | b'\n' | b'\r' => continue,
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max_depth {
                    return Shape {
                        too_deep: true,
                        significant_bytes,
                    };
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        significant_bytes += 1;
    }
    Shape {
        too_deep: false,
        significant_bytes,
    }
}

/// 400 when arrays and objects in `bytes` nest deeper than `max_depth`.
pub fn check_depth(bytes: &[u8], max_depth: usize) -> Result<(), ApiError> {
    if scan(bytes, max_depth).too_deep {
        return Err(ApiError::bad_request(format!(
            "invalid JSON body: arrays and objects nest deeper than {max_depth} levels"
        )));
    }
    Ok(())
}

/// `js_params` (or another free-form JSON field, received as a [`RawValue`]) as a value,
/// refused with 413 before any value is built when it is larger than `limit` bytes
/// without its insignificant whitespace. Absent is `null`.
pub fn bounded_value(
    raw: Option<&RawValue>,
    field: &str,
    limit: usize,
) -> Result<serde_json::Value, ApiError> {
    let Some(raw) = raw else {
        return Ok(serde_json::Value::Null);
    };
    if scan(raw.get().as_bytes(), usize::MAX).significant_bytes > limit {
        return Err(ApiError::PayloadTooLarge(format!(
            "{field} are limited to {limit} bytes"
        )));
    }
    serde_json::from_str(raw.get())
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body at `{field}`: {e}")))
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

/// Default and largest `page_size` (`docs/compatibility.md`: larger values are clamped,
/// as the reference service does; the wire schema declares no maximum for that reason).
pub use appliance_api::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};

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
    fn nesting_depth_is_bounded_before_parsing() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(check_depth(nested(64).as_bytes(), 64).is_ok());
        let err = check_depth(nested(65).as_bytes(), 64).unwrap_err();
        assert!(matches!(err, ApiError::BadRequest(_)));
        assert!(err.to_string().contains("64 levels"), "{err}");
        // Brackets inside strings (escaped quotes included) are text, not nesting.
        let text = format!(r#"{{"a":"\"{}"}}"#, "[".repeat(100));
        assert!(check_depth(text.as_bytes(), 2).is_ok());
        let objects = format!("{}1{}", r#"{"a":"#.repeat(3), "}".repeat(3));
        assert!(check_depth(objects.as_bytes(), 2).is_err());
    }

    #[test]
    fn js_params_are_measured_before_they_become_a_value() {
        #[derive(serde::Deserialize)]
        struct Req {
            #[serde(default)]
            js_params: Option<Box<RawValue>>,
        }
        let read = |json: &str, limit: usize| {
            let req: Req = parse_json(json.as_bytes()).unwrap();
            bounded_value(req.js_params.as_deref(), "js_params", limit)
        };
        assert_eq!(read("{}", 10).unwrap(), serde_json::Value::Null);
        assert_eq!(
            read(r#"{"js_params":null}"#, 10).unwrap(),
            serde_json::Value::Null
        );
        // Whitespace does not count; the compact form is 11 bytes.
        let value = read(r#"{"js_params": { "a" : [ 1, 2 ] } }"#, 11).unwrap();
        assert_eq!(value, serde_json::json!({"a": [1, 2]}));
        assert_eq!(serde_json::to_vec(&value).unwrap().len(), 11);
        let err = read(r#"{"js_params": {"a": [1, 2]}}"#, 10).unwrap_err();
        assert!(matches!(err, ApiError::PayloadTooLarge(_)));
        assert_eq!(err.to_string(), "js_params are limited to 10 bytes");
        // Spaces inside strings count.
        assert!(read(r#"{"js_params": "a  b"}"#, 5).is_err());
        assert!(read(r#"{"js_params": "a  b"}"#, 6).is_ok());
    }

    #[test]
    fn every_class_has_a_bounded_limit() {
        let mut config = Config::default();
        let small = body_limit(limit::SMALL, &config);
        assert_eq!(small, 16 * 1024);
        assert_eq!(body_limit(limit::SIGNATURE, &config), 8 * 1024);
        assert_eq!(body_limit(limit::LISTS, &config), 256 * 1024);
        let code = config.actions.max_code_bytes;
        let params = config.actions.max_js_params_bytes;
        assert_eq!(body_limit(limit::CODE, &config), 2 * code + 16 * 1024);
        assert_eq!(
            body_limit(limit::ACTION, &config),
            2 * (code + params) + 16 * 1024
        );
        assert_eq!(body_limit(99, &config), small, "an unknown class is small");
        config.http.max_body_bytes = 1000;
        for class in 0..=5 {
            assert!(
                body_limit(class, &config) <= 1000,
                "the ceiling caps {class}"
            );
        }
    }

    #[tokio::test]
    async fn the_body_budget_is_shared_and_returned() {
        let budget = BodyBudget::new(100, Duration::from_millis(50));
        let mut first = Reservation::new(Some(budget.clone()));
        first.grow_to(60).await.unwrap();
        first.grow_to(80).await.unwrap();
        assert_eq!(budget.available(), 20);
        let mut second = Reservation::new(Some(budget.clone()));
        let err = second.grow_to(30).await.unwrap_err();
        assert!(matches!(err, ApiError::Busy(_)), "{err}");
        let mut too_big = Reservation::new(Some(budget.clone()));
        assert!(
            too_big.grow_to(101).await.is_err(),
            "more than the whole budget"
        );
        drop(first);
        assert_eq!(budget.available(), 100);
        let mut third = Reservation::new(Some(budget.clone()));
        third.grow_to(30).await.unwrap();
        assert_eq!(budget.available(), 70);
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
