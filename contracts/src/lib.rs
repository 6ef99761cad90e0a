//! Bindings of the settlement-chain contracts.
//!
//! * [`IAccountConfig`] — the on-chain mirror of accounts, usage keys, groups, actions and
//!   wallets (`src/IAccountConfig.sol` documents every rule).
//! * [`IAppGovernance`] — the compose hashes allowed to hold the keys.
//! * [`ops`] — the vocabulary of `AccountConfig` writes ([`ops::MirrorOp`]) that the
//!   appliance queues in its outbox and reads back from events.
//! * [`artifacts`] — the committed solc output of `AccountConfig` and `AppGovernance`
//!   (creation code to deploy, runtime code to compare against a chain, ABI JSON).
//! * [`deploy_account_config`] / [`deploy_app_governance`] — deployment through an alloy
//!   provider that signs (tests, local chains); the appliance sends the same creation code
//!   through its own keyservice-signed transactions.
//! * [`rpc`] — the HTTP client of every JSON-RPC connection (alloy's reqwest on rustls with
//!   ring, the only crypto provider of the workspace).
//!
//! `contracts/README.md` describes the rules, the choices the interfaces leave open, and how
//! the artifacts are rebuilt and checked.
//!
//! May depend on: `usage-key-permissions` (the permission set of a `MirrorOp` and of the
//! ABI struct), alloy and serde; never on `appliance-store`, `appliance-chain` or
//! `appliance-api`: they name the contracts, the contracts name none of them.

pub mod artifacts;
mod deploy;
pub mod ops;
pub mod rpc;

pub use deploy::{DeployError, deploy_account_config, deploy_app_governance};

pub use bindings::{IAccountConfig, IAppGovernance};

/// The generated bindings, in a module of their own so that lints on generated code (a
/// setter with one argument per field) stay here.
#[allow(
    clippy::too_many_arguments,
    reason = "generated from the interfaces' functions"
)]
mod bindings {
    alloy::sol!(
        #[sol(rpc, all_derives)]
        "src/IAccountConfig.sol"
    );

    alloy::sol!(
        #[sol(rpc, all_derives)]
        "src/IAppGovernance.sol"
    );
}
