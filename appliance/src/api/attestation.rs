//! Attestation and evidence endpoints, at the root and without authentication:
//! `GET /attestation`, `GET /info`, `GET /evidences/` and the files it lists (see
//! `crate::attest` for how the files are built).
//!
//! `?nonce=<64 hex>` on `/attestation` and `/evidences/quote.json` asks for a quote made
//! for this request, over SHA-256(sha256sum.txt) ‖ nonce: a verifier that chose the nonce
//! knows the quote is fresh, not a relay's replay. Without it both answer exactly as the
//! specification states (zeros, cached). A malformed nonce is 400; nonce requests are
//! rate-limited per client on their own (`rate_limits.fresh_quote_*`, see
//! `crate::http::rate_limit`), since each costs a hardware quote.

use appliance_api::error::ErrorBody;
use axum::Json;
use axum::extract::{Path, State};
use axum::response::{Html, IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::error::ApiError;
use crate::http::extract::QueryParams;
use crate::state::AppState;

/// `?nonce=`: the verifier's challenge for a fresh quote.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NonceQuery {
    /// 64 hex digits (32 bytes) chosen by the verifier: the quote is made for this
    /// request and its report data is SHA-256(sha256sum.txt) ‖ nonce. Absent: the
    /// cached quote of the specification's form.
    #[param(pattern = "^[0-9a-fA-F]{64}$")]
    pub nonce: Option<String>,
}

impl NonceQuery {
    fn parsed(&self) -> Result<Option<[u8; 32]>, ApiError> {
        self.nonce
            .as_deref()
            .map(|text| {
                crate::attest::parse_nonce(text).ok_or_else(|| {
                    ApiError::bad_request("nonce must be exactly 64 hex digits (32 bytes)")
                })
            })
            .transpose()
    }
}

/// Fresh quotes: no cache may keep them (each answers one nonce).
fn no_store(body: Value) -> Response {
    ([(http::header::CACHE_CONTROL, "no-store")], Json(body)).into_response()
}

fn fresh_unavailable(err: crate::attest::AttestError) -> ApiError {
    match err {
        crate::attest::AttestError::NoEvidenceYet => ApiError::Unavailable(err.to_string()),
        other => unavailable(other),
    }
}

/// `/attestation`: a fresh quote over 64 zero bytes of report data.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttestationBody {
    /// The TDX quote, hex.
    pub quote: String,
    /// A string holding the JSON array of events (digest, event_type, event,
    /// event_payload, imr).
    pub event_log: String,
    /// dstack's VM configuration string ("" where unknown).
    pub vm_config: String,
}

/// `/info`: the deployment's identity.
#[derive(Debug, Serialize, ToSchema)]
pub struct InfoBody {
    /// Hex, no 0x: the governance contract is at 0x‖app_id.
    pub app_id: String,
    pub instance_id: String,
    /// Hex SHA-256 of `tcb_info.app_compose`, no 0x.
    pub compose_hash: String,
    /// `mrtd`, `rtmr0`..`rtmr3`, `compose_hash`, `app_compose` (the exact string hashing
    /// to `compose_hash`) and `event_log`.
    #[schema(value_type = Object)]
    pub tcb_info: Value,
}

fn unavailable(err: crate::attest::AttestError) -> ApiError {
    tracing::warn!(error = %err, "no quote from keyservice");
    ApiError::Unavailable(format!("the quote provider is unavailable: {err}"))
}

/// A hardware quote whose report data is all zeros, with the event log: at most
/// `attestation.quote_refresh_secs` old (one quote serves every request in that window).
/// With `?nonce=`, a quote made for this request over SHA-256(sha256sum.txt) ‖ nonce.
#[utoipa::path(
    get,
    path = "/attestation",
    tag = "attestation",
    params(NonceQuery),
    responses(
        super::RateLimited,
        (status = 200, description = "A recent quote (at most attestation.quote_refresh_secs old), or with ?nonce a quote made for this request", body = AttestationBody),
        (status = 400, description = "The nonce is not 64 hex digits", body = ErrorBody),
        (status = 503, description = "The quote provider is unavailable", body = ErrorBody),
    )
)]
pub async fn attestation(
    State(state): State<AppState>,
    QueryParams(query): QueryParams<NonceQuery>,
) -> Result<Response, ApiError> {
    if let Some(nonce) = query.parsed()? {
        let quote = state
            .attestation
            .fresh_quote(nonce)
            .await
            .map_err(fresh_unavailable)?;
        return Ok(no_store(quote.attestation_json()));
    }
    let body = state
        .attestation
        .attestation_json()
        .await
        .map_err(unavailable)?;
    Ok(Json(body).into_response())
}

/// The deployment's identity: app id, compose hash, measurements and event log.
#[utoipa::path(
    get,
    path = "/info",
    tag = "attestation",
    responses(
        super::RateLimited,
        (status = 200, description = "The deployment's identity", body = InfoBody),
        (status = 503, description = "The quote provider is unavailable", body = ErrorBody),
    )
)]
pub async fn info(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let body = state.attestation.info_json().await.map_err(unavailable)?;
    Ok(Json(body))
}

/// The evidence files binding the served TLS certificate to a quote: an HTML listing.
#[utoipa::path(
    get,
    path = "/evidences/",
    tag = "attestation",
    responses(super::RateLimited, (status = 200, description = "HTML listing linking every evidence file", content_type = "text/html"))
)]
pub async fn evidences_index(State(state): State<AppState>) -> Html<String> {
    Html(state.attestation.evidence().index_html())
}

/// The quote of the evidence files, `quote.json`: the one file that takes `?nonce=`, a
/// quote made for this request over SHA-256(sha256sum.txt) ‖ nonce. (Its own operation,
/// so that the document says which file takes a nonce; `/evidences/{file}` serves it too.)
#[utoipa::path(
    get,
    path = "/evidences/quote.json",
    tag = "attestation",
    params(NonceQuery),
    responses(
        super::RateLimited,
        (status = 200, description = "The quote (with ?nonce, made for this request)", content_type = "application/json"),
        (status = 400, description = "The nonce is not 64 hex digits", body = ErrorBody),
        (status = 404, description = "No evidence yet", body = ErrorBody),
        (status = 503, description = "With ?nonce: the quote provider is unavailable, or no evidence yet", body = ErrorBody),
    )
)]
pub async fn evidence_quote(
    State(state): State<AppState>,
    QueryParams(query): QueryParams<NonceQuery>,
) -> Result<Response, ApiError> {
    serve_evidence(&state, "quote.json".to_owned(), &query).await
}

/// One evidence file: `cert-<domain>.pem`, `acme-account.json`, `sha256sum.txt`,
/// `quote.json`. Only `quote.json` takes `?nonce=` (see its own operation); a nonce on
/// another file is 400.
#[utoipa::path(
    get,
    path = "/evidences/{file}",
    tag = "attestation",
    params(("file" = String, Path, description = "A name from the listing")),
    responses(
        super::RateLimited,
        (status = 200, description = "The file"),
        (status = 400, description = "A nonce was given for a file other than quote.json, or is not 64 hex digits", body = ErrorBody),
        (status = 404, description = "No such evidence file", body = ErrorBody),
        (status = 503, description = "quote.json with ?nonce: the quote provider is unavailable, or no evidence yet", body = ErrorBody),
    )
)]
pub async fn evidence_file(
    State(state): State<AppState>,
    Path(file): Path<String>,
    QueryParams(query): QueryParams<NonceQuery>,
) -> Result<Response, ApiError> {
    serve_evidence(&state, file, &query).await
}

/// `file` of the evidence set, or with a nonce a fresh `quote.json`.
async fn serve_evidence(
    state: &AppState,
    file: String,
    query: &NonceQuery,
) -> Result<Response, ApiError> {
    if let Some(nonce) = query.parsed()? {
        if file != "quote.json" {
            return Err(ApiError::bad_request(
                "nonce applies to quote.json only (and to /attestation)",
            ));
        }
        let quote = state
            .attestation
            .fresh_quote(nonce)
            .await
            .map_err(fresh_unavailable)?;
        return Ok(no_store(quote.evidence_quote_json()));
    }
    let set = state.attestation.evidence();
    let Some(found) = set.files.get(&file) else {
        return Err(ApiError::NotFound(format!("no evidence file {file:?}")));
    };
    Ok((
        [(http::header::CONTENT_TYPE, found.content_type)],
        found.bytes.clone(),
    )
        .into_response())
}
