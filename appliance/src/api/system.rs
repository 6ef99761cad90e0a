//! Service health and version, at the root.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;

use crate::state::AppState;

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`, or `degraded` when a dependency is down.
    #[schema(example = "ok")]
    pub status: &'static str,
    /// Each dependency and its state.
    pub checks: HealthChecks,
    /// The ACME certificate's life cycle, when ACME is configured. Its failures are
    /// retried with backoff and do not make the service unhealthy (the current
    /// certificate is still served).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acme: Option<crate::acme::AcmeHealth>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HealthChecks {
    #[schema(example = "ok")]
    pub store: &'static str,
    #[schema(example = "ok")]
    pub keyservice: &'static str,
    /// `disabled` (no ACME directory), `pending`, `ok`, `renewing` or `failed`.
    #[schema(example = "ok")]
    pub acme: &'static str,
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
    let (store, keyservice) = tokio::join!(state.store.check(), state.keys.check());
    let store = match store {
        Ok(()) => "ok",
        Err(err) => {
            tracing::warn!(error = %err, "health: store check failed");
            "unavailable"
        }
    };
    let keyservice = match keyservice {
        Ok(()) => "ok",
        Err(err) => {
            tracing::warn!(error = %err, "health: keyservice check failed");
            "unavailable"
        }
    };
    let healthy = store == "ok" && keyservice == "ok";
    let acme = state.acme.as_ref().map(crate::acme::AcmeHandle::health);
    let body = Health {
        status: if healthy { "ok" } else { "degraded" },
        checks: HealthChecks {
            store,
            keyservice,
            acme: acme.as_ref().map_or("disabled", |a| a.state),
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

#[derive(Debug, Serialize, ToSchema)]
pub struct Version {
    #[schema(example = "appliance")]
    pub name: &'static str,
    #[schema(example = "0.1.0")]
    pub version: &'static str,
    /// The API version prefix.
    #[schema(example = "v1")]
    pub api: &'static str,
}

/// The running build.
#[utoipa::path(get, path = "/version", tag = "system", responses((status = 200, description = "The running build", body = Version)))]
pub async fn version() -> Json<Version> {
    Json(Version {
        name: "appliance",
        version: env!("CARGO_PKG_VERSION"),
        api: "v1",
    })
}
