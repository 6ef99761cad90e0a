//! Bindings of the settlement-chain contracts.
//!
//! * [`IAccountConfig`] — the on-chain mirror of accounts, usage keys, groups, actions and
//!   wallets (`src/IAccountConfig.sol` documents every rule).
//! * [`IAppGovernance`] — the appliance's dstack app contract: the compose hashes, devices
//!   and OS images allowed to run it and hold its keys (bound from the compiled ABI, so the
//!   functions, events and struct it inherits from dstack's interfaces are all there).
//! * [`dstack`] — dstack's own app-contract interfaces (`IAppAuth`, `IAppAuthBasicManagement`,
//!   `IERC165`), written here from dstack's published ones: what its KMS calls.
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

/// dstack's app-contract interfaces (`src/dstack/`): the ABI dstack's on-chain KMS and its
/// tools use to consult and manage an app's contract.
pub mod dstack {
    pub use super::dstack_bindings::{IAppAuth, IAppAuthBasicManagement, IERC165};

    /// The ERC-165 interface id of `IAppAuth` (its one function's selector), as dstack
    /// publishes it.
    pub const IAPP_AUTH_INTERFACE_ID: [u8; 4] = [0x1e, 0x07, 0x91, 0x98];
    /// The ERC-165 interface id of `IAppAuthBasicManagement`, as dstack publishes it.
    pub const IAPP_AUTH_BASIC_MANAGEMENT_INTERFACE_ID: [u8; 4] = [0x8f, 0xd3, 0x75, 0x27];
    /// The ERC-165 interface id of `IERC165` itself.
    pub const IERC165_INTERFACE_ID: [u8; 4] = [0x01, 0xff, 0xc9, 0xa7];
}

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

    // From the compiled ABI rather than `src/IAppGovernance.sol`: `sol!` neither follows
    // imports nor flattens inheritance, and most of the interface is inherited from dstack's.
    alloy::sol!(
        #[sol(rpc, all_derives)]
        IAppGovernance,
        "artifacts/AppGovernance.json"
    );
}

/// dstack's interfaces, in a module of their own: the ABI of `IAppGovernance` names its
/// `IAppAuth.AppBootInfo` struct too.
mod dstack_bindings {
    alloy::sol!(
        #[sol(rpc, all_derives)]
        "src/dstack/IERC165.sol"
    );

    alloy::sol!(
        #[sol(rpc, all_derives)]
        "src/dstack/IAppAuth.sol"
    );

    alloy::sol!(
        #[sol(rpc, all_derives)]
        "src/dstack/IAppAuthBasicManagement.sol"
    );
}
