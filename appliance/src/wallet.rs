//! The account wallet of `new_account`: a secp256k1 key derived one-way from the
//! account secret.
//!
//! `sk = HKDF-SHA256(ikm = secret, salt = "appliance/account-wallet/v1",
//! info = "secp256k1 " ‖ u8(counter), L = 32)` for the first `counter = 0, 1, …` whose
//! output is a valid scalar (in `[1, n-1]`; the chance of a retry is about 2^-128).
//! Only the address leaves this module. Vectors: `tests/data/account-wallet.json`.

use hkdf::Hkdf;
use k256::ecdsa::SigningKey;
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::eth::Address;
use crate::secrets::ApiSecret;

const SALT: &[u8] = b"appliance/account-wallet/v1";

#[derive(Debug, thiserror::Error)]
#[error("no valid secp256k1 scalar could be derived")]
pub struct DerivationError;

fn derive_key(secret: &ApiSecret) -> Result<SigningKey, DerivationError> {
    let hkdf = Hkdf::<Sha256>::new(Some(SALT), secret.expose());
    for counter in 0u8..=255 {
        let mut okm = Zeroizing::new([0u8; 32]);
        let mut info = *b"secp256k1  ";
        info[10] = counter;
        hkdf.expand(&info, okm.as_mut())
            .map_err(|_| DerivationError)?;
        if let Ok(key) = SigningKey::from_slice(okm.as_ref()) {
            return Ok(key);
        }
    }
    Err(DerivationError)
}

/// The address of the account wallet belonging to `secret`.
pub fn account_wallet_address(secret: &ApiSecret) -> Result<Address, DerivationError> {
    let key = derive_key(secret)?;
    Ok(Address::from_verifying_key(key.verifying_key()))
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
        secret: String,
        private_key: String,
        address: String,
    }

    fn bytes32(hex_text: &str) -> [u8; 32] {
        let mut out = [0u8; 32];
        hex::decode_to_slice(hex_text.trim_start_matches("0x"), &mut out).unwrap();
        out
    }

    #[test]
    fn matches_independent_vectors() {
        let file: File =
            serde_json::from_str(include_str!("../tests/data/account-wallet.json")).unwrap();
        assert_eq!(file.vectors.len(), 2);
        for v in file.vectors {
            let secret = ApiSecret::from_bytes(bytes32(&v.secret));
            let key = derive_key(&secret).unwrap();
            assert_eq!(&key.to_bytes()[..], &bytes32(&v.private_key)[..]);
            assert_eq!(
                account_wallet_address(&secret).unwrap().to_checksum(),
                v.address
            );
        }
    }

    #[test]
    fn different_secrets_give_different_wallets() {
        let a = account_wallet_address(&ApiSecret::from_bytes([1; 32])).unwrap();
        let b = account_wallet_address(&ApiSecret::from_bytes([2; 32])).unwrap();
        assert_ne!(a, b);
    }
}
