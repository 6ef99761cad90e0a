//! Running actions: `POST /lit_action`, and the limits in force.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::{AuthErrors, BodyErrors, ServerErrors};
use crate::authz::Credential;
use crate::cid;
use crate::error::{ApiError, ErrorBody};
use crate::http::AppState;
use crate::http::extract::{Auth, JsonBody};
use crate::runtime::Job;
use crate::runtime::host::HostContext;
use crate::store::{CidHash, WalletScope};
use action_runtime::protocol::ErrorKind;

#[derive(Debug, Deserialize, ToSchema)]
pub struct LitActionRequest {
    /// The JavaScript code (defines `main`). Give `code`, or `ipfs_id`, or both (then
    /// the code must hash to that CID).
    #[serde(default)]
    pub code: Option<String>,
    /// The CID of code the service has seen (from an earlier execution or
    /// `get_lit_action_ipfs_id`).
    #[serde(default)]
    pub ipfs_id: Option<String>,
    /// The argument of `main`.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub js_params: Option<Value>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ActionError {
    /// `exception`, `timeout`, `memory` or `limit`.
    pub kind: String,
    pub message: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LitActionResponse {
    /// What the code returned or set with `Lit.Actions.setResponse` (null on failure).
    #[schema(value_type = Object)]
    pub response: Value,
    /// Every console line, each ending in a newline.
    pub logs: String,
    pub has_error: bool,
    /// Present when the code failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ActionError>,
}

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
        (status = 429, description = "Every worker is busy and the queue is full", body = ErrorBody),
        BodyErrors,
        AuthErrors,
        ServerErrors,
    )
)]
pub async fn lit_action(
    State(state): State<AppState>,
    auth: Auth,
    JsonBody(req): JsonBody<LitActionRequest>,
) -> Result<Json<LitActionResponse>, ApiError> {
    let limits = &state.config.actions;
    let js_params = req.js_params.unwrap_or(Value::Null);
    let params_len = serde_json::to_vec(&js_params)
        .map(|v| v.len())
        .unwrap_or(usize::MAX);
    if params_len > limits.max_js_params_bytes {
        return Err(ApiError::PayloadTooLarge(format!(
            "js_params are limited to {} bytes",
            limits.max_js_params_bytes
        )));
    }
    let (code, action_cid) = resolve_code(&state, req.code, req.ipfs_id).await?;

    // Who may run this code, and with which wallets: local reads only.
    let scope = match &auth.credential {
        Credential::AccountKey => WalletScope::Account,
        Credential::UsageKey(perms) if perms.execute_in_groups.is_wildcard() => {
            WalletScope::Account
        }
        Credential::UsageKey(perms) => {
            let hash = CidHash(cid::hashed_cid(&action_cid));
            match state
                .store
                .execution_scope(auth.account, perms.execute_in_groups.clone(), hash)
                .await?
            {
                Some(scope) => scope,
                None => {
                    // Names the rule, not the groups: nothing about ids leaks.
                    return Err(ApiError::Forbidden(format!(
                        "this usage key may not run {action_cid}: no group in its execute_in_groups permits this action"
                    )));
                }
            }
        }
    };

    // Billing: reserve the seconds the account can pay for (402 if not even one) and
    // cap the run by them. Everything above was authorization and validation, never
    // charged.
    let ticket = state
        .billing
        .start_action(
            &state.store,
            auth.account,
            Duration::from_millis(limits.timeout_ms),
        )
        .await?;
    let credit_limit = ticket.as_ref().and_then(|t| t.deadline());

    let mut host = HostContext::new(
        state.store.clone(),
        state.keys.clone(),
        state.runtime.fetcher().clone(),
        auth.account,
        scope,
        action_cid.clone(),
        limits.max_fetches,
    );
    let job = Job {
        code,
        action_cid,
        js_params,
    };
    let timed = state
        .runtime
        .execute_within(job, &mut host, credit_limit)
        .await?;
    if let Some(message) = host.denied {
        // Refused by authorization: not charged (the ticket's reservation is released).
        return Err(ApiError::Forbidden(format!(
            "the action was refused a wallet: {message}"
        )));
    }
    let mut outcome = timed.outcome;
    if let Some(ticket) = ticket {
        let paid_seconds = ticket.seconds();
        let charged = ticket.charge(&state.store, timed.run_time).await?;
        if timed.deadline_hit && credit_limit.is_some() {
            outcome.error = Some(action_runtime::protocol::ActionError {
                kind: ErrorKind::Limit,
                message: format!(
                    "the action was stopped after {paid_seconds} s because the account's credit ran out ({charged} cent(s) charged); add credit to run longer"
                ),
            });
        }
    }
    let has_error = outcome.error.is_some();
    Ok(Json(LitActionResponse {
        response: if has_error {
            Value::Null
        } else {
            outcome.response
        },
        logs: outcome.logs,
        has_error,
        error: outcome.error.map(|f| ActionError {
            kind: kind_name(f.kind).to_owned(),
            message: f.message,
        }),
    }))
}

/// The code to run and its CID, from inline code and/or a CID.
async fn resolve_code(
    state: &AppState,
    code: Option<String>,
    ipfs_id: Option<String>,
) -> Result<(String, String), ApiError> {
    let limits = &state.config.actions;
    match (code, ipfs_id) {
        (Some(code), ipfs_id) => {
            if code.len() > limits.max_code_bytes {
                return Err(ApiError::PayloadTooLarge(format!(
                    "action code is limited to {} bytes",
                    limits.max_code_bytes
                )));
            }
            let computed = cid::cid_v0(code.as_bytes());
            if let Some(given) = ipfs_id
                && given != computed
            {
                return Err(ApiError::bad_request(format!(
                    "the code's CID is {computed}, not the given ipfs_id {given}"
                )));
            }
            remember_code(state, &computed, &code).await;
            Ok((code, computed))
        }
        (None, Some(ipfs_id)) => {
            let parsed = cid::parse_cid(&ipfs_id).map_err(|e| {
                ApiError::bad_request(format!("`ipfs_id` is not a valid IPFS CID: {e}"))
            })?;
            let cid_text = parsed.as_str().to_owned();
            if let Some(bytes) = state.store.code(cid_text.clone()).await? {
                let code = String::from_utf8(bytes).map_err(|_| {
                    ApiError::Internal(format!("stored code for {cid_text} is not UTF-8"))
                })?;
                return Ok((code, cid_text));
            }
            if let Some(code) = state
                .runtime
                .fetch_from_gateway(&cid_text, limits.max_code_bytes)
                .await?
            {
                remember_code(state, &cid_text, &code).await;
                return Ok((code, cid_text));
            }
            Err(ApiError::NotFound(format!(
                "no code is known for {cid_text}: send it once as `code` (or to get_lit_action_ipfs_id) first"
            )))
        }
        (None, None) => Err(ApiError::bad_request("give `code` or `ipfs_id`")),
    }
}

/// Keeps code by CID for later runs by `ipfs_id`, without a write when it is known.
async fn remember_code(state: &AppState, cid_text: &str, code: &str) {
    match state.store.code(cid_text.to_owned()).await {
        Ok(Some(_)) => {}
        _ => {
            let store = state.store.clone();
            let (cid_text, code, cap) = (
                cid_text.to_owned(),
                code.as_bytes().to_vec(),
                state.config.actions.code_cache_bytes,
            );
            // Off the request path: losing a cache entry to a crash is harmless.
            tokio::spawn(async move {
                if let Err(err) = store.put_code(cid_text, code, cap).await {
                    tracing::warn!(error = %err, "could not keep action code");
                }
            });
        }
    }
}

/// The action limits in force.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ClientConfig {
    pub timeout_ms: u64,
    pub memory_limit_mb: u64,
    pub max_code_length: usize,
    pub max_response_length: usize,
    pub max_console_log_length: usize,
    pub max_fetch_count: u32,
    pub max_js_params_length: usize,
}

/// The limits actions run under.
#[utoipa::path(
    get,
    path = "/get_lit_action_client_config",
    tag = "execution",
    responses((status = 200, description = "The limits in force", body = ClientConfig))
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

/// The wire name of an error kind (`docs/compatibility.md`, "Action runtime contract").
fn kind_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Exception => "exception",
        ErrorKind::Timeout => "timeout",
        ErrorKind::Memory => "memory",
        ErrorKind::Limit => "limit",
    }
}
