//! The appliance's attested-TLS client.
//!
//! May depend on: `appliance-api` (the server's own wire types) and `evidence` (the
//! verification); never on `appliance` or `appliance-store`: a client links no server
//! code.
//!
//! A [`Client`] first verifies the deployment exactly as `evidence verify --url` does
//! (DCAP quote and collateral, RTMR replay, compose hash and its event, pinned images,
//! report data ↔ `sha256sum.txt` ↔ the served certificate, CAA ↔ ACME account,
//! governance allow-list) under a [`Policy`] the caller sets; then it pins what it
//! verified: its TLS verifier accepts only a leaf certificate the attested evidence names,
//! so the API key is never sent on any other connection (not after a redirect, which it
//! never follows, and not to a relay holding another valid certificate for the name).
//! When the server's certificate changes (an ACME renewal), the first handshake that
//! shows the new leaf triggers one re-verification; the call goes on only if the fresh
//! evidence attests that leaf, and fails closed with a typed error otherwise.
//!
//! ```no_run
//! # async fn demo() -> Result<(), appliance_client::ClientError> {
//! use appliance_client::{Client, Policy};
//! let client = Client::builder("https://keys.example.com")
//!     .api_key("…")
//!     .policy(Policy {
//!         rpc_url: Some("https://rpc.example".into()),
//!         collateral: Some(evidence::collateral::CollateralSource::Pccs(
//!             "https://pccs.example:8081".into(),
//!         )),
//!         ..Policy::default()
//!     })
//!     .build()?;
//! let report = client.verify().await?; // optional: the first call verifies anyway
//! println!("{}", report.report.to_text());
//! // One typed method per endpoint, on the server's own wire types.
//! let group = client
//!     .add_group(&appliance_client::api::groups::AddGroupRequest {
//!         group_name: "ops".into(),
//!         ..Default::default()
//!     })
//!     .await?;
//! println!("group {}", group.group_id);
//! # Ok(()) }
//! ```

mod client;
mod error;
pub mod pinning;
mod policy;
mod typed;
mod verification;

/// The wire types and endpoint descriptions the client and the server share.
pub use appliance_api as api;
pub use client::{API_PREFIX, Client, ClientBuilder, Credential, erased};
pub use error::{ClientError, ServerError};
pub use evidence;
pub use policy::Policy;
pub use typed::METHODS;
pub use verification::{Verification, verify_bundle, verify_deployment, verify_deployment_via};
