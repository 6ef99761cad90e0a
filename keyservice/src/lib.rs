//! The keyservice: the only process that holds the root secret.
//!
//! It unseals a 32-byte root with a key bound to the measured compose hash
//! ([`platform`], [`sealing`], [`root`]), derives every wallet, action and payer key from
//! it ([`derive`]), and answers signing / encryption / export requests ([`ops`]) over a
//! Unix socket ([`server`]) in the protocol of `keyservice-api`. It is also the only process
//! that talks to the quote provider ([`attest`]): the front end gets quotes over report data
//! keyservice builds itself, never over data it chose. See `README.md` next to
//! this crate for the threat model, formats and derivations.
//!
//! May depend on: `keyservice-api` (the protocol it answers), `evidence` (the quote
//! providers), `chain-contracts` (the payer policy's contracts and the governance check),
//! `operator-auth` (the operator's signed requests, [`operator`]) and `socket-file` (its
//! socket); never on `appliance` or any other front-end crate
//! (`appliance-store`, `appliance-chain`): it shares only the protocol crate with the
//! front end.

pub mod acme_key;
pub mod attest;
pub mod derive;
pub mod op_error;
pub mod operator;
pub mod ops;
pub mod payer_policy;
pub mod platform;
pub mod policy;
pub mod root;
pub mod sealing;
pub mod secret;
pub mod server;
pub mod service;
pub mod tls_keys;

pub use keyservice_api as api;
