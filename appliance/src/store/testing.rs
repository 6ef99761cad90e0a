//! Fixtures shared by the store's unit tests: a fresh database, and accounts in it.

use keyservice_api::{Address, DerivationPath, PkpId};

use super::{AccountId, InitialCredit, NewAccount, Store, WalletIdentity};
use crate::api_keys::KeyHash;

/// A fresh store in a temporary directory (kept alive by the returned guard).
pub(super) fn open_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = Store::open(&dir.path().join("state.db")).expect("the store opens");
    (dir, store)
}

/// An API-mode account whose key hash, wallet and name are all derived from `seed`.
pub(super) fn new_account_spec(seed: u8) -> NewAccount {
    NewAccount {
        api_key_hash: KeyHash([seed; 32]),
        name: format!("a{seed}"),
        description: String::new(),
        email: None,
        wallet: identity(seed),
    }
}

/// Creates the account of `seed` (no starting credit).
pub(super) async fn new_account(store: &Store, seed: u8) -> AccountId {
    store
        .create_account(new_account_spec(seed), InitialCredit::NONE)
        .await
        .expect("the account is created")
}

/// A fresh store holding the account of `seed` (its key hash is `KeyHash([seed; 32])`).
pub(super) async fn store_with_account(seed: u8) -> (tempfile::TempDir, Store, AccountId) {
    let (dir, store) = open_store();
    let account = new_account(&store, seed).await;
    (dir, store, account)
}

/// The wallet identity of `n` (every byte `n`).
pub(super) fn identity(n: u8) -> WalletIdentity {
    WalletIdentity {
        pkp_id: PkpId([n; 32]),
        address: Address([n; 20]),
        derivation_path: DerivationPath([n; 32]),
    }
}

/// A verified `ConvertAccount` signature of `n` (signer and digest every byte `n`).
pub(super) fn signature(n: u8, issued_at: u64) -> crate::typed_data::Verified {
    crate::typed_data::Verified {
        flow: crate::typed_data::Flow::ConvertAccount,
        signer: alloy::primitives::Address::repeat_byte(n),
        issued_at,
        digest: alloy::primitives::B256::repeat_byte(n),
    }
}

/// Now, as an issuedAt.
pub(super) fn now() -> u64 {
    super::now_unix() as u64
}
