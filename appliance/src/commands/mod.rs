//! The operator commands besides `serve` and `dev`, together: each reads the same
//! configuration as `serve` and does one job, then exits.
//!
//! * `backup`: `appliance backup` and `appliance restore` (the SQLite database, online);
//! * `billing`: `appliance billing report` (the ledger as CSV, from the SQLite database);
//! * `deploy`: `appliance deploy` (the contracts, the payers' authorization, the result
//!   written back into the configuration file);
//! * `root`: `appliance root export` / `import` (the sealed shared root, for upgrades).

pub mod backup;
pub mod billing;
pub mod deploy;
pub mod root;
