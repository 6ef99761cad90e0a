//! `appliance-execution`: the action worker pool and what a running action may reach.
//!
//! * `pool`: the `action-worker` processes (crate `action-runtime`): started, handed
//!   jobs fairly between accounts (`fair`), each worker kept to the one account it first
//!   served (`idle`), retired by count, heap or idleness, replaced when one dies;
//! * `spawn`: starting a worker, as the appliance's own child (development) or through
//!   `worker-launcher` under the workers' own uid (the image);
//! * `host`: the answers to a job's host calls (its wallets' keys and signatures through
//!   keyservice, within the scope the caller was granted; fetches);
//! * `fetch` and `routable`: an action's HTTP fetches, bounded, to globally routable
//!   addresses only;
//! * `rpc`: an action's JSON-RPC requests (`ethers.providers`), to the operator's chains
//!   (`[actions.rpc]`) or, under the rules of `fetch`, to URLs the action gives;
//! * `imports`: an action's `import`s, from the operator's ESM CDN only, each module's
//!   SHA-384 held to an inline pin or its integrity lock in the store, cached by hash.
//!
//! May depend on: `appliance-store` (wallets of a scope), `appliance-domain` (CIDs),
//! `keyservice-api`, `action-runtime` (the worker protocol) and `worker-launcher` (its
//! client). Never on `appliance` (the HTTP layer): the appliance's `execution` module
//! decides who may run what, bills it and maps these errors to responses; the pool's
//! events go to the [`pool::PoolTelemetry`] the composer hands in.

pub mod config;
pub mod fair;
pub mod fetch;
pub mod host;
pub mod idle;
pub mod imports;
pub mod pool;
pub mod routable;
pub mod rpc;
pub mod spawn;
