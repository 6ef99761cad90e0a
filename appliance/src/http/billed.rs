//! Billed calls, visible in the handler's signature.
//!
//! A billed management write takes a [`Billed`] instead of an [`Auth`]: it authenticates
//! the caller exactly as `Auth` does and carries the write's [`Charge`]
//! (`billing.management_write_cents`, 0 when billing is disabled, for the operation the
//! route names). The handler hands the charge to the store write, which applies it in the
//! write's own transaction. So a call refused by authentication, permission or
//! validation (all decided before the write) is never charged, a committed write is
//! charged exactly once, and with too little credit the write fails with 402 and changes
//! nothing. `Billed` also documents that 402 in the OpenAPI description: list it in the
//! handler's `responses(...)`.
//!
//! `new_account` takes a [`StartingCredit`] the same way: the credit the new account is
//! granted in the transaction that creates it.

use std::collections::BTreeMap;
use std::convert::Infallible;

use axum::extract::{FromRequestParts, MatchedPath};
use http::request::Parts;
use utoipa::openapi::{Content, Ref, RefOr, Response, ResponseBuilder};

use super::API_PREFIX;
use super::auth::Auth;
use crate::authz::Credential;
use crate::error::ApiError;
use crate::state::AppState;
use crate::store::{AccountId, Charge, InitialCredit};

/// The authenticated caller of a billed management write, and what the write costs.
pub struct Billed {
    pub account: AccountId,
    pub credential: Credential,
    /// Pass it to the store write; it is applied in that write's transaction.
    pub charge: Charge,
}

/// The operation a request is billed as: its route without the API prefix
/// (`/core/v1/add_group` is `add_group`), as the ledger records it.
fn operation(parts: &Parts) -> String {
    let path = parts
        .extensions
        .get::<MatchedPath>()
        .map_or_else(|| parts.uri.path(), MatchedPath::as_str);
    path.strip_prefix(API_PREFIX)
        .unwrap_or(path)
        .trim_start_matches('/')
        .to_owned()
}

impl FromRequestParts<AppState> for Billed {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let Auth {
            account,
            credential,
        } = Auth::from_request_parts(parts, state).await?;
        // The ledger row records the request (the `X-Request-Id` its answer carries).
        let request_id = crate::telemetry::request_id().map(|id| id.to_string());
        let charge = state.billing.management_write(operation(parts), request_id);
        // Counted as charged once the write is answered with success (the middleware).
        crate::telemetry::note_billed(charge.cents);
        Ok(Self {
            account,
            credential,
            charge,
        })
    }
}

impl utoipa::IntoResponses for Billed {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        let response = ResponseBuilder::new()
            .description(
                "Insufficient credit: the call is billed (see /billing/prices) and the account's balance is too low; nothing was done",
            )
            .content(
                "application/json",
                Content::new(Some(RefOr::Ref(Ref::from_schema_name("ErrorBody")))),
            )
            .build();
        BTreeMap::from([("402".to_owned(), RefOr::T(response))])
    }
}

/// The starting credit of the account `new_account` creates
/// (`billing.initial_credit_cents`, 0 when billing is disabled).
pub struct StartingCredit(pub InitialCredit);

impl FromRequestParts<AppState> for StartingCredit {
    type Rejection = Infallible;

    async fn from_request_parts(_: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let request_id = crate::telemetry::request_id().map(|id| id.to_string());
        Ok(Self(state.billing.initial_credit(request_id)))
    }
}
