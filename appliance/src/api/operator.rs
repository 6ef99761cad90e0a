//! The operator's day-2 endpoints (`/operator/v1/…`): inspect the deployment, export its
//! sealed root, back up its SQLite database, reseal the root for an upgrade. A production
//! CVM has no shell: these are how an operator does what `docker compose exec` did, over
//! the same attested TLS every client uses (`appliance-cli operator …` verifies the
//! deployment first, then signs for exactly what it verified).
//!
//! Every request is a `POST` whose body is one signed operator request
//! ([`SignedRequest`]): the `operator-auth` text, naming the action, this app and this
//! compose hash, fresh and never used before, signed (EIP-191) by an address of
//! `[operator] addresses`. The action must be the route's. A reseal is checked again by
//! keyservice itself, against its own copy of the operators and the governance contract:
//! this process only relays it. Not in the OpenAPI document of `/core/v1` (clients of the
//! API have no use for it); `docs/operators.md` ("Day-2 tasks") documents it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use appliance_api::operator::{
    BACKUP_SUMMARY_HEADER, BackupSummary, ExportedRoot, OPERATOR_PREFIX, OperatorStatus, Resealed,
    SharedRootInfo, SignedRequest, StateFileInfo,
};
use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use keyservice_api::{ComposeHash, ErrorCode, KeyError, SEALED_ROOT_LEN};
use operator_auth::{Action, Authorized, Binding, SIGNATURE_LEN, VerifyError};
use sha2::{Digest as _, Sha256};

use crate::config::StoreEngine;
use crate::error::ApiError;
use crate::http::extract::{JsonBody, limit};
use crate::shared_root::sealed_compose_hash;
use crate::state::AppState;

/// The routes, merged beside the documented ones by [`super::routes`] (the same
/// middleware: request ids, rate limits, deadlines).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(&format!("{OPERATOR_PREFIX}/status"), post(status))
        .route(&format!("{OPERATOR_PREFIX}/export-root"), post(export_root))
        .route(
            &format!("{OPERATOR_PREFIX}/backup-database"),
            post(backup_database),
        )
        .route(&format!("{OPERATOR_PREFIX}/reseal"), post(reseal))
}

/// The deployment as its evidence names it, for binding requests.
async fn binding(state: &AppState) -> Result<(Binding, String), ApiError> {
    let info = state.keys.client().attestation_info().await?;
    let app = hex_array::<20>(&info.app_id)
        .ok_or_else(|| ApiError::Internal(format!("app id {:?} is not 20 bytes", info.app_id)))?;
    let compose_hash = hex_array::<32>(&info.compose_hash).ok_or_else(|| {
        ApiError::Internal(format!(
            "compose hash {:?} is not 32 bytes",
            info.compose_hash
        ))
    })?;
    Ok((Binding { app, compose_hash }, info.compose_hash))
}

fn hex_array<const N: usize>(text: &str) -> Option<[u8; N]> {
    let mut out = [0u8; N];
    hex::decode_to_slice(text.trim_start_matches("0x"), &mut out).ok()?;
    Some(out)
}

/// Checks `body` for the route's action (its name).
async fn authorize(
    state: &AppState,
    body: &SignedRequest,
    action: &'static str,
) -> Result<(Authorized, [u8; SIGNATURE_LEN]), ApiError> {
    let signature = hex_array::<SIGNATURE_LEN>(&body.signature).ok_or_else(|| {
        ApiError::bad_request("`signature` must be 0x + 130 hex digits (r ‖ s ‖ v)")
    })?;
    if !state.operators.enabled() {
        return Err(ApiError::Forbidden(VerifyError::NoOperators.to_string()));
    }
    let (binding, _) = binding(state).await?;
    let authorized = state
        .operators
        .verify_now(&body.request, &signature, &binding)
        .map_err(refusal)?;
    if authorized.request.action.name() != action {
        return Err(ApiError::bad_request(format!(
            "the request is for `{}`, this endpoint is `{action}`",
            authorized.request.action.name()
        )));
    }
    tracing::info!(
        operator = %format!("0x{}", hex::encode(authorized.operator)),
        action,
        "operator request"
    );
    Ok((authorized, signature))
}

fn refusal(e: VerifyError) -> ApiError {
    match e {
        VerifyError::NoOperators => ApiError::Forbidden(e.to_string()),
        VerifyError::Parse(_) | VerifyError::Signature(_) => ApiError::BadRequest(e.to_string()),
        VerifyError::Busy => ApiError::TooManyRequests(e.to_string()),
        VerifyError::WrongApp { .. } | VerifyError::WrongComposeHash { .. } => {
            ApiError::Conflict(e.to_string())
        }
        _ => ApiError::Unauthorized(e.to_string()),
    }
}

/// keyservice's refusal of a reseal (its own check of the request, or the governance
/// contract's answer): 403 with its reason; anything else as every key error.
fn keyservice_refusal(e: KeyError) -> ApiError {
    match e {
        KeyError::Rejected {
            code: ErrorCode::Refused,
            message,
        } => ApiError::Forbidden(format!("keyservice refused the reseal: {message}")),
        KeyError::Rejected {
            code: ErrorCode::InvalidArgument,
            message,
        }
        | KeyError::InvalidArgument(message) => ApiError::bad_request(message),
        other => other.into(),
    }
}

fn hex0x(bytes: &[u8]) -> String {
    format!("0x{}", hex::encode(bytes))
}

async fn status(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<SignedRequest, { limit::SIGNATURE }>,
) -> Result<Json<OperatorStatus>, ApiError> {
    let (authorized, _) = authorize(&state, &body, Action::Status.name()).await?;
    let root = state.keys.root_status().await?;
    let ks = state.keys.client().status().await?;
    let files = state.keys.client().state_files().await?;
    let current = root.compose_hash.0;
    let keyservice_files = files
        .iter()
        .map(|f| {
            let hash = sealed_compose_hash(&f.bytes);
            StateFileInfo {
                name: f.name.clone(),
                bytes: f.bytes.len() as u64,
                compose_hash: hash.map(|h| hex0x(&h)),
                current: hash == Some(current),
            }
        })
        .collect();
    let shared_roots = if state.config.store.engine == StoreEngine::Postgres {
        state
            .store
            .sealed_roots()
            .await?
            .into_iter()
            .map(|r| SharedRootInfo {
                compose_hash: hex0x(&r.compose_hash),
                root_id: hex0x(&r.root_id),
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(Json(OperatorStatus {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        app_id: hex0x(&authorized.request.app),
        compose_hash: hex0x(&current),
        platform: format!("{:?}", ks.platform).to_lowercase(),
        root_id: root
            .root_id
            .map(|id| hex0x(&id.0))
            .unwrap_or_else(|| "none (awaiting the shared root)".to_owned()),
        store_engine: match state.config.store.engine {
            StoreEngine::Sqlite => "sqlite",
            StoreEngine::Postgres => "postgres",
        }
        .to_owned(),
        keyservice_files,
        shared_roots,
        operators: state
            .operators
            .operators()
            .iter()
            .map(|a| hex0x(a))
            .collect(),
        governance_address: state.config.chain.governance_address.map(|a| a.to_string()),
        operator: hex0x(&authorized.operator),
    }))
}

async fn export_root(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<SignedRequest, { limit::SIGNATURE }>,
) -> Result<Json<ExportedRoot>, ApiError> {
    authorize(&state, &body, Action::ExportRoot.name()).await?;
    let root = state.keys.root_status().await?;
    let files = state.keys.client().state_files().await?;
    let keyservice_files = files
        .into_iter()
        .map(|f| (f.name, B64.encode(&f.bytes)))
        .collect();
    let mut shared_roots = BTreeMap::new();
    if state.config.store.engine == StoreEngine::Postgres {
        for row in state.store.sealed_roots().await? {
            shared_roots.insert(hex0x(&row.compose_hash), B64.encode(&row.sealed));
        }
    }
    Ok(Json(ExportedRoot {
        keyservice_files,
        shared_roots,
        root_id: root.root_id.map(|id| hex0x(&id.0)).unwrap_or_default(),
    }))
}

async fn reseal(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<SignedRequest, { limit::SIGNATURE }>,
) -> Result<Json<Resealed>, ApiError> {
    let (authorized, signature) = authorize(&state, &body, "reseal").await?;
    let Action::Reseal { target } = authorized.request.action else {
        return Err(ApiError::bad_request("not a reseal request"));
    };
    let target = ComposeHash(target);
    let shared = state.config.store.engine == StoreEngine::Postgres;
    let source = if shared {
        // The verifier checked the request names the running compose hash.
        let current = ComposeHash(authorized.request.compose_hash);
        let row = state
            .store
            .sealed_roots()
            .await?
            .into_iter()
            .find(|r| r.compose_hash == current.0)
            .ok_or_else(|| {
                ApiError::Conflict(format!(
                    "the database holds no shared root sealed for the running compose hash {current}"
                ))
            })?;
        let sealed: [u8; SEALED_ROOT_LEN] = row.sealed.as_slice().try_into().map_err(|_| {
            ApiError::Internal("the database's shared root is not 101 bytes".into())
        })?;
        Some(sealed)
    } else {
        None
    };
    let resealed = state
        .keys
        .client()
        .operator_reseal(target, signature, &body.request, source)
        .await
        .map_err(keyservice_refusal)?;
    let stored = if shared {
        state
            .store
            .import_sealed_root(crate::store::SealedRootRow {
                compose_hash: target.0,
                sealed: resealed.sealed.to_vec(),
                root_id: resealed.root_id.0,
            })
            .await?;
        "database".to_owned()
    } else {
        format!("keyservice:{}", resealed.file.clone().unwrap_or_default())
    };
    tracing::info!(to = %target, stored, "root resealed for an upgrade");
    Ok(Json(Resealed {
        target: hex0x(&target.0),
        root_id: hex0x(&resealed.root_id.0),
        stored,
        sealed: B64.encode(resealed.sealed),
    }))
}

/// Whether a database backup is being taken (one at a time: each needs the database's
/// size again on the data volume until it is sent).
static BACKUP_RUNNING: AtomicBool = AtomicBool::new(false);

/// Clears [`BACKUP_RUNNING`] when dropped.
struct BackupSlot;

impl BackupSlot {
    fn take() -> Option<Self> {
        BACKUP_RUNNING
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| Self)
    }
}

impl Drop for BackupSlot {
    fn drop(&mut self) {
        BACKUP_RUNNING.store(false, Ordering::Release);
    }
}

async fn backup_database(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<SignedRequest, { limit::SIGNATURE }>,
) -> Result<Response, ApiError> {
    authorize(&state, &body, Action::BackupDatabase.name()).await?;
    if state.config.store.engine == StoreEngine::Postgres {
        return Err(ApiError::Conflict(
            "the store is PostgreSQL: back it up with pg_dump where it runs (docs/operators.md, section 8)"
                .into(),
        ));
    }
    let slot = BackupSlot::take().ok_or_else(|| {
        ApiError::Conflict("a database backup is already being taken; retry when it is done".into())
    })?;
    let db = state
        .config
        .data_dir
        .join(crate::store::config::SQLITE_FILE);
    let mut nonce = [0u8; 8];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce)
        .map_err(|_| ApiError::Internal("no randomness".into()))?;
    let out: PathBuf = state
        .config
        .data_dir
        .join("backups")
        .join(format!(".operator-{}.db", hex::encode(nonce)));
    let taken = {
        let (db, out) = (db.clone(), out.clone());
        tokio::task::spawn_blocking(move || -> Result<_, String> {
            let summary =
                crate::store::backup::backup(&db, &out, false).map_err(|e| e.to_string())?;
            // Hashed in pieces (the database may be larger than memory), then streamed.
            let sha = file_sha256(&out).map_err(|e| e.to_string())?;
            Ok((summary, sha))
        })
        .await
        .map_err(|e| ApiError::Internal(format!("backup task: {e}")))?
    };
    let (summary, sha256) = match taken {
        Ok(t) => t,
        Err(e) => {
            let _ = std::fs::remove_file(&out);
            return Err(ApiError::Internal(format!("database backup failed: {e}")));
        }
    };
    let file = tokio::fs::File::open(&out).await;
    // Unlinked at once: the open file is all that is left, and it goes when the body is
    // sent (or the client goes away).
    let _ = tokio::fs::remove_file(&out).await;
    let file = file.map_err(|e| ApiError::Internal(format!("opening the backup: {e}")))?;
    let header = BackupSummary {
        bytes: summary.bytes,
        schema_version: summary.meta.marks.schema_version,
        taken_at: summary.meta.taken_at,
        appliance_version: summary.meta.appliance_version.clone(),
        rows: summary.meta.marks.rows.clone(),
        sha256,
    };
    let header = serde_json::to_string(&header)
        .map_err(|e| ApiError::Internal(format!("backup summary: {e}")))?;
    let stream = futures_util::stream::unfold((file, slot), |(mut file, slot)| async move {
        use tokio::io::AsyncReadExt as _;
        let mut buf = vec![0u8; 64 * 1024];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((
                    Ok::<_, std::io::Error>(bytes::Bytes::from(buf)),
                    (file, slot),
                ))
            }
            Err(e) => Some((Err(e), (file, slot))),
        }
    });
    Ok((
        [
            (
                http::header::CONTENT_TYPE,
                "application/vnd.sqlite3".to_owned(),
            ),
            (
                http::header::CONTENT_DISPOSITION,
                format!(
                    "attachment; filename=\"appliance-{}.db\"",
                    summary.meta.taken_at
                ),
            ),
            (http::header::CACHE_CONTROL, "no-store".to_owned()),
            (http::HeaderName::from_static(BACKUP_SUMMARY_HEADER), header),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}

/// SHA-256 of a file, read 64 KiB at a time.
fn file_sha256(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}
