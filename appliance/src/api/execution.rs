//! Running actions: `POST /lit_action`, and the limits in force. The work is
//! `execution::execute`; the handler only translates the wire format.

use appliance_api::error::ErrorBody;
use appliance_api::execution::{ActionError, ClientConfig, LitActionRequest, LitActionResponse};
use axum::Json;
use axum::extract::State;
use serde_json::Value;

use super::{AuthErrors, BodyErrors, ServerErrors};
use crate::error::ApiError;
use crate::execution::{self, Caller, ExecContext, Job, Outcome};
use crate::http::auth::Auth;
use crate::http::extract::{self, JsonBody, limit};
use crate::state::AppState;

/// Runs an action. Failures of the code itself (exception, timeout, memory, a limit)
/// are a 200 with `has_error: true`; authentication, permission (including using a
/// wallet outside the key's groups) and input problems are HTTP errors.
#[utoipa::path(
    post,
    path = "/lit_action",
    tag = "execution",
    security(("bearer" = []), ("api_key" = [])),
    request_body = LitActionRequest,
    responses(
        (status = 200, description = "The action ran (check has_error)", body = LitActionResponse),
        (status = 404, description = "Unknown ipfs_id", body = ErrorBody),
        (status = 402, description = "Insufficient credit to run for one second; nothing ran", body = ErrorBody),
        (status = 422, description = "`code` and `ipfs_id` were both given and the code does not hash to the CID, or code from the IPFS gateway or the store does not hash to its CID", body = ErrorBody),
        BodyErrors,
        AuthErrors,
        ServerErrors,
        // After ServerErrors, whose general 429 this one replaces.
        (status = 429, description = "Every worker is busy and the queue is full", body = ErrorBody),
    )
)]
pub async fn lit_action(
    State(state): State<AppState>,
    auth: Auth,
    JsonBody(req): JsonBody<LitActionRequest, { limit::ACTION }>,
) -> Result<Json<LitActionResponse>, ApiError> {
    // A malformed `ipfs_id` is a malformed field (400) even beside `code`, whose CID it
    // would otherwise merely fail to match (422).
    if let Some(cid) = &req.ipfs_id {
        crate::cid::parse_cid(cid).map_err(|e| {
            ApiError::bad_request(format!("`ipfs_id` is not a valid IPFS CID: {e}"))
        })?;
    }
    let ctx = ExecContext {
        store: &state.store,
        keys: &state.keys,
        billing: &state.billing,
        executor: &state.executor,
        limits: &state.config.actions,
    };
    let caller = Caller {
        account: auth.account,
        credential: &auth.credential,
    };
    let job = Job {
        code: req.code,
        ipfs_id: req.ipfs_id.map(appliance_api::Cid::into_string),
        // Measured before any value is built (the whole body is bounded too).
        js_params: extract::bounded_value(
            req.js_params.as_deref(),
            "js_params",
            state.config.actions.max_js_params_bytes,
        )?,
    };
    let outcome = execution::execute(&ctx, caller, job).await?;
    Ok(Json(lit_action_response(outcome)))
}

/// The answer for an outcome. A failed action's response is null, whatever it set
/// before failing.
fn lit_action_response(outcome: Outcome) -> LitActionResponse {
    let has_error = outcome.error.is_some();
    LitActionResponse {
        response: if has_error {
            Value::Null
        } else {
            outcome.response
        },
        logs: outcome.logs,
        has_error,
        error: outcome.error.map(|f| ActionError {
            kind: f.kind.as_str().to_owned(),
            message: f.message,
        }),
    }
}

/// The limits actions run under.
#[utoipa::path(
    get,
    path = "/get_lit_action_client_config",
    tag = "execution",
    responses(super::RateLimited, (status = 200, description = "The limits in force", body = ClientConfig))
)]
pub async fn get_lit_action_client_config(State(state): State<AppState>) -> Json<ClientConfig> {
    let a = &state.config.actions;
    Json(ClientConfig {
        timeout_ms: a.timeout_ms,
        memory_limit_mb: a.memory_limit_mb,
        max_code_length: a.max_code_bytes,
        max_response_length: a.max_response_bytes,
        max_console_log_length: a.max_log_bytes,
        max_fetch_count: a.max_fetches,
        max_js_params_length: a.max_js_params_bytes,
    })
}
