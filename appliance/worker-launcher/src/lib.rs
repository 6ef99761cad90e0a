//! `worker-launcher`: starts `action-worker` processes for the appliance under the
//! launcher's own uid (in production a third uid, 10003, with no supplementary groups),
//! so tenants' JavaScript never runs as the appliance's user and cannot open the
//! keyservice socket or the appliance's data even if every in-process sandbox layer fails.
//!
//! One connection to the launcher's Unix socket is one worker: the launcher starts it and
//! passes its stdin, stdout and stderr pipes back with `SCM_RIGHTS` ([`protocol`]), so the
//! appliance drives the worker exactly as a child of its own; the launcher reports how the
//! worker ended and kills it when the connection ends. [`client`] is the appliance's side,
//! [`server`] the launcher's. The crate links no interpreter.
//!
//! May depend on: `socket-file` (its socket, removed at exit only while still its own);
//! never on `action-runtime`: the launcher starts the worker binary and links no
//! interpreter.

pub mod client;
pub mod protocol;
pub mod server;
pub mod settings;
