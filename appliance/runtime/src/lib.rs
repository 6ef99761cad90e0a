//! The action runtime: runs caller-supplied JavaScript actions in a sandboxed worker
//! process (boa engine), with every key operation and network access delegated to the
//! parent over a small framed-JSON protocol.
//!
//! * [`protocol`] — message types and frame codec, used by the worker and the appliance.
//! * [`sandbox`] — one fresh JS context per action: globals, limits, error mapping.
//! * [`worker`] — the `action-worker` process loop and its memory limit.
//! * [`heap`] — the worker's counting allocator: the live heap it reports in `done`.
//! * [`lockdown`] — what the worker does to itself before its first job (seccomp,
//!   Landlock, rlimits, descriptors, privileges).
//! * [`ethers`] — the ethers v5 subset available to actions.
//! * [`intl`] — `Intl.DateTimeFormat` (en-US, IANA time zones) for actions.
//!
//! The JS API is described in `docs/compatibility.md` ("Action runtime contract"); the process model in
//! [`worker`].
//!
//! May depend on: no workspace crate (boa, the protocol's serde, the lock-down's system
//! calls); never on `keyservice-api` or `appliance`: whatever an action may do beyond
//! computing goes back to its parent as a host call.

#[cfg(feature = "worker")]
pub mod ethers;
#[cfg(feature = "worker")]
pub mod heap;
#[cfg(feature = "worker")]
pub mod intl;
#[cfg(feature = "worker")]
pub mod lockdown;
pub mod protocol;
#[cfg(feature = "worker")]
pub mod sandbox;
#[cfg(feature = "worker")]
pub mod worker;
