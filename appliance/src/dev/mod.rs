//! Development mode only (`appliance dev`, or `keyservice.spawn` in a test configuration):
//! nothing here runs in a production deployment, where keyservice is its own container
//! and the chain is a real RPC endpoint.
//!
//! * `keyservice_child`: keyservice as a supervised child process (restarted if it dies,
//!   stopped with the appliance).
//! * `supervise`: the restart loop with backoff and the readiness wait that every child
//!   here (keyservice, the launcher, anvil) shares.
//! * `launcher_child`: `worker-launcher` as a supervised child (same uid), so workers are
//!   started through the launcher protocol as in the image.
//! * `chain`: a local anvil with its state in the data directory, funded payers and the
//!   contracts deployed once.
//! * `child_guard`: `appliance child-guard`, which stops a helper (anvil, Pebble) when the
//!   appliance goes away, even after `kill -9`.
//! * `local_acme`: `appliance dev --local-acme`, the certificate from a local Pebble, so
//!   every check of `evidence verify` passes on one machine.

pub mod chain;
pub mod child_guard;
pub mod keyservice_child;
pub mod launcher_child;
pub mod local_acme;
pub mod supervise;
