//! `appliance-domain`: the rules of the appliance that need no I/O, below every crate
//! that stores or serves them.
//!
//! * [`authz`]: the permission model of the service specification, as pure functions
//!   over account keys, usage keys and their per-group permissions;
//! * [`api_keys`]: API secrets (account and usage keys), their one-time display form and
//!   the identity hash the store keeps instead of the secret;
//! * [`cid`]: IPFS CIDs of action code (CIDv0/CIDv1 of a UnixFS file), parsed and
//!   computed, and their keccak hash as the chain knows it;
//! * [`backoff`]: the one retry schedule (a doubling, capped delay) every retrying loop
//!   of the appliance and its store waits with;
//! * [`settings`]: what every subsystem's configuration section shares (a secret value
//!   that is never shown, the error of a section whose settings do not hold together).
//!
//! May depend on: `usage-key-permissions` and crypto primitives only; never on
//! `appliance-store`, `appliance` (the HTTP layer) or a runtime.

pub mod api_keys;
pub mod authz;
pub mod backoff;
pub mod cid;
pub mod settings;
