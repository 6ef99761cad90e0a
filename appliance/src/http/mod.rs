//! The HTTP service: routes, shared state and middleware, as one axum `Router`.
//!
//! Routes are registered through `utoipa_axum::routes!`, which records each handler's
//! OpenAPI description as it mounts it, so the served `openapi.json` cannot drift from
//! what the router serves.

pub mod extract;
pub mod middleware;

use std::sync::Arc;

use axum::Router;
use tower_http::catch_panic::CatchPanicLayer;
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use utoipa_swagger_ui::SwaggerUi;

use crate::api::{
    accounts, actions, billing, chain, execution, groups, signatures, system, usage_keys, wallets,
};
use crate::config::Config;
use crate::error::ApiError;
use crate::execution::Executor;
use crate::keys::Keys;
use crate::openapi::ApiDoc;
use crate::store::Store;

/// The API's path prefix.
pub const API_PREFIX: &str = "/core/v1";

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub keys: Keys,
    pub runtime: Executor,
    /// Prices, Stripe and the credit reserved by running actions.
    pub billing: Arc<crate::billing::Billing>,
    pub config: Arc<Config>,
    /// The ACME task's status and trigger, when ACME is configured.
    pub acme: Option<crate::acme::AcmeHandle>,
    /// The quote provider and the current evidence files.
    pub attestation: crate::attest::Attestation,
}

/// The `/core/v1` routes with their descriptions.
fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(accounts::new_account))
        .routes(routes!(accounts::account_exists))
        .routes(routes!(usage_keys::add_usage_api_key))
        .routes(routes!(usage_keys::list_api_keys))
        .routes(routes!(usage_keys::update_usage_api_key))
        .routes(routes!(usage_keys::update_usage_api_key_metadata))
        .routes(routes!(usage_keys::remove_usage_api_key))
        .routes(routes!(
            wallets::create_wallet_get,
            wallets::create_wallet_post
        ))
        .routes(routes!(wallets::list_wallets))
        .routes(routes!(wallets::list_wallets_in_group))
        .routes(routes!(groups::add_group))
        .routes(routes!(groups::list_groups))
        .routes(routes!(groups::update_group))
        .routes(routes!(groups::remove_group))
        .routes(routes!(groups::add_pkp_to_group))
        .routes(routes!(groups::remove_pkp_from_group))
        .routes(routes!(groups::add_action_to_group))
        .routes(routes!(groups::remove_action_from_group))
        .routes(routes!(actions::add_action))
        .routes(routes!(actions::delete_action))
        .routes(routes!(actions::update_action_metadata))
        .routes(routes!(actions::list_actions))
        .routes(routes!(actions::get_lit_action_ipfs_id))
        .routes(routes!(execution::lit_action))
        .routes(routes!(execution::get_lit_action_client_config))
        .routes(routes!(chain::get_node_chain_config))
        .routes(routes!(chain::get_api_payers))
        .routes(routes!(chain::get_admin_api_payer))
        .routes(routes!(billing::stripe_config))
        .routes(routes!(billing::balance))
        .routes(routes!(billing::create_payment_intent))
        .routes(routes!(billing::confirm_payment))
        .routes(routes!(billing::prices))
        .routes(routes!(signatures::create_wallet_with_signature))
        .routes(routes!(signatures::add_usage_api_key_with_signature))
        .routes(routes!(signatures::convert_to_chain_secured_account))
}

/// Every documented route, and the OpenAPI document describing them.
pub fn routes() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let (router, mut openapi) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .nest(API_PREFIX, api_routes())
        .routes(routes!(system::health))
        .routes(routes!(system::version))
        .routes(routes!(crate::api::attestation::attestation))
        .routes(routes!(crate::api::attestation::info))
        .routes(routes!(crate::api::attestation::evidences_index))
        .routes(routes!(crate::api::attestation::evidence_file))
        .split_for_parts();
    crate::billing::document_charges(&mut openapi);
    (router, openapi)
}

/// The complete service: routes, OpenAPI + Swagger UI, fallbacks and middleware.
pub fn app(state: AppState) -> Router {
    let (router, openapi) = routes();
    let docs = SwaggerUi::new(format!("{API_PREFIX}/swagger-ui"))
        .url(format!("{API_PREFIX}/openapi.json"), openapi);
    router
        .merge(docs)
        .fallback(|| async { ApiError::NotFound("no such path".into()) })
        .method_not_allowed_fallback(|| async {
            ApiError::MethodNotAllowed("this path does not accept that method".into())
        })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::billing::charge_scope,
        ))
        .layer(CatchPanicLayer::custom(middleware::panic_response))
        .layer(axum::middleware::from_fn(middleware::normalize_errors))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            middleware::request_context,
        ))
        .with_state(state)
}
