//! Naming wallets: how a request or an action names one (`pkp_id` or address), and the
//! account wallet of `new_account`, a wallet held by keyservice like any other, at a
//! derivation path computed from the account key's hash:
//!
//! `derivation_path = keccak256("appliance/account-wallet/v1" ‖ api_key_hash)`
//!
//! The path alone is harmless: keyservice derives the key from its sealed root and the
//! path, so nothing public yields the key. The account key itself is an independent
//! secret that no action can read. Vectors: `tests/data/account-wallet.json`.

use keyservice_api::types::parse_hex_array;
use keyservice_api::{Address, DerivationPath, PkpId};
use sha3::{Digest, Keccak256};

use crate::WalletRef;
use appliance_domain::api_keys::KeyHash;

const DOMAIN: &[u8] = b"appliance/account-wallet/v1";

/// The derivation path of the account wallet for an account key with hash `key_hash`.
pub fn account_wallet_path(key_hash: &KeyHash) -> DerivationPath {
    let mut hasher = Keccak256::new();
    hasher.update(DOMAIN);
    hasher.update(key_hash.0);
    DerivationPath(hasher.finalize().into())
}

/// A field that should name a wallet but does not.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{field}` must be a pkp_id (0x + 64 hex) or a wallet address (0x + 40 hex)")]
pub struct NotAWallet {
    pub field: String,
}

/// Parses a wallet named by `pkp_id` (`0x` + 64 hex) or address (`0x` + 40 hex) in the
/// field `field` (named in the error).
pub fn parse_wallet_ref(field: &str, text: &str) -> Result<WalletRef, NotAWallet> {
    let text = text.trim();
    if let Ok(bytes) = parse_hex_array::<32>(text) {
        return Ok(WalletRef::Pkp(PkpId(bytes)));
    }
    if let Ok(bytes) = parse_hex_array::<20>(text) {
        return Ok(WalletRef::Address(Address(bytes)));
    }
    Err(NotAWallet {
        field: field.to_owned(),
    })
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
    fn wallets_are_named_by_pkp_id_or_address() {
        let pkp = format!("0x{}", "ab".repeat(32));
        assert_eq!(
            parse_wallet_ref("pkpId", &pkp),
            Ok(WalletRef::Pkp(PkpId([0xab; 32])))
        );
        let address = format!(" 0x{} ", "cd".repeat(20));
        assert_eq!(
            parse_wallet_ref("pkpId", &address),
            Ok(WalletRef::Address(Address([0xcd; 20])))
        );
        let err = parse_wallet_ref("pkp_id", "0x1234").unwrap_err();
        assert_eq!(
            err.to_string(),
            "`pkp_id` must be a pkp_id (0x + 64 hex) or a wallet address (0x + 40 hex)"
        );
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
