//! Attestation and evidence endpoints, at the root and without authentication:
//! `GET /attestation`, `GET /info`, `GET /evidences/` and the files it lists (see
//! `crate::attest` for how the files are built).

use appliance_api::error::ErrorBody;
use axum::Json;
use axum::extract::{Path, State};
use axum::response::{Html, IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::error::ApiError;
use crate::state::AppState;

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
#[utoipa::path(
    get,
    path = "/attestation",
    tag = "attestation",
    responses(
        super::RateLimited,
        (status = 200, description = "A recent quote (at most attestation.quote_refresh_secs old)", body = AttestationBody),
        (status = 503, description = "The quote provider is unavailable", body = ErrorBody),
    )
)]
pub async fn attestation(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let body = state
        .attestation
        .attestation_json()
        .await
        .map_err(unavailable)?;
    Ok(Json(body))
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

/// One evidence file: `cert-<domain>.pem`, `acme-account.json`, `sha256sum.txt`,
/// `quote.json`.
#[utoipa::path(
    get,
    path = "/evidences/{file}",
    tag = "attestation",
    params(("file" = String, Path, description = "A name from the listing")),
    responses(
        super::RateLimited,
        (status = 200, description = "The file"),
        (status = 404, description = "No such evidence file", body = ErrorBody),
    )
)]
pub async fn evidence_file(
    State(state): State<AppState>,
    Path(file): Path<String>,
) -> Result<Response, ApiError> {
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
