//! The account wallet of `new_account`: a wallet held by keyservice like any other,
//! at a derivation path computed from the account key's hash:
//!
//! `derivation_path = keccak256("appliance/account-wallet/v1" ‖ api_key_hash)`
//!
//! The path alone is harmless: keyservice derives the key from its sealed root and the
//! path, so nothing public yields the key. The account key itself is an independent
//! secret that no action can read. Vectors: `tests/data/account-wallet.json`.

use keyservice_api::DerivationPath;
use sha3::{Digest, Keccak256};

use crate::secrets::KeyHash;

const DOMAIN: &[u8] = b"appliance/account-wallet/v1";

/// The derivation path of the account wallet for an account key with hash `key_hash`.
pub fn account_wallet_path(key_hash: &KeyHash) -> DerivationPath {
    let mut hasher = Keccak256::new();
    hasher.update(DOMAIN);
    hasher.update(key_hash.0);
    DerivationPath(hasher.finalize().into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct File {
        vectors: Vec<Vector>,
    }
    #[derive(serde::Deserialize)]
    struct Vector {
        api_key_hash: String,
        derivation_path: String,
    }

    #[test]
    fn matches_independent_vectors() {
        let file: File =
            serde_json::from_str(include_str!("../tests/data/account-wallet.json")).unwrap();
        assert_eq!(file.vectors.len(), 2);
        for v in file.vectors {
            let hash = KeyHash::from_hex(&v.api_key_hash).unwrap();
            assert_eq!(account_wallet_path(&hash).to_hex(), v.derivation_path);
        }
    }
}
