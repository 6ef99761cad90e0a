//! Service health and version, at the root.

use std::time::Duration;

use appliance_api::system::{Health, HealthChecks, RefusedRow, StoreHealth, Version};
use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use crate::state::AppState;

/// How long `/health` waits for a dependency's answer. A database behind a stalled
/// network never answers, and a load balancer's health check gives up after a few
/// seconds: past this, the dependency is reported `unavailable` (a 503) rather than the
/// check outliving the balancer's patience and the request deadline.
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// `"ok"`, or `"unavailable"` (logged with why) when `check` fails or takes longer than
/// [`CHECK_TIMEOUT`].
async fn checked<E: std::fmt::Display>(
    what: &str,
    check: impl Future<Output = Result<(), E>>,
) -> &'static str {
    match tokio::time::timeout(CHECK_TIMEOUT, check).await {
        Ok(Ok(())) => "ok",
        Ok(Err(err)) => {
            tracing::warn!(error = %err, "health: {what} check failed");
            "unavailable"
        }
        Err(_) => {
            tracing::warn!("health: {what} check gave no answer within {CHECK_TIMEOUT:?}");
            "unavailable"
        }
    }
}

/// Liveness and dependency health: 200 when every dependency answers, 503 otherwise.
#[utoipa::path(
    get,
    path = "/health",
    tag = "system",
    responses(
        (status = 200, description = "Every dependency answers", body = Health),
        (status = 503, description = "A dependency is down; `checks` says which", body = Health),
    )
)]
pub async fn health(State(state): State<AppState>) -> Response {
    let (store, keyservice) = tokio::join!(
        checked("store", state.store.check()),
        checked("keyservice", state.keys.check())
    );
    let healthy = store == "ok" && keyservice == "ok";
    let acme = state.acme.as_ref().map(crate::acme::AcmeHandle::health);
    let integrity = state.store.integrity_report();
    let refused_rows = integrity.as_ref().map_or(0, |r| r.failures());
    let rollbacks = integrity.as_ref().map_or(0, |r| r.rollbacks());
    let foreign_objects = integrity
        .as_ref()
        .and_then(|r| r.foreign_objects())
        .unwrap_or_default();
    let write_epoch = integrity.as_ref().map_or(0, |r| r.epoch());
    let alerts = refused_rows + rollbacks + foreign_objects.len() as u64;
    let store_health = StoreHealth {
        engine: state.store.engine().to_string(),
        refused_rows,
        last_refused: integrity.and_then(|r| r.last()).map(|last| RefusedRow {
            table: last.table,
            row: last.row,
            at_unix: last.at_unix,
        }),
        rollbacks,
        write_epoch,
        foreign_objects,
        leads: state
            .singletons
            .iter()
            .filter(|l| l.leads())
            .map(|l| l.name().to_owned())
            .collect(),
    };
    let status = match (healthy, alerts) {
        (false, _) => "degraded",
        (true, 0) => "ok",
        (true, _) => "alert",
    };
    let body = Health {
        status: status.to_owned(),
        store: Some(store_health),
        checks: HealthChecks {
            store: store.to_owned(),
            keyservice: keyservice.to_owned(),
            acme: acme
                .as_ref()
                .map_or_else(|| "disabled".to_owned(), |a| a.state.clone()),
        },
        acme,
    };
    let status = if healthy {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// The running build.
#[utoipa::path(get, path = "/version", tag = "system", responses((status = 200, description = "The running build", body = Version)))]
pub async fn version() -> Json<Version> {
    Json(Version {
        name: "appliance".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        api: "v1".to_owned(),
    })
}
