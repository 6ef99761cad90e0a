//! EIP-191 (`personal_sign`) signatures over a request's text.

use k256::ecdsa::{RecoveryId, Signature, SigningKey, VerifyingKey};
use sha3::{Digest as _, Keccak256};

/// `r ‖ s ‖ v`.
pub const SIGNATURE_LEN: usize = 65;

/// An Ethereum address.
pub type Address = [u8; 20];

/// Why a signature does not name a signer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureError {
    #[error("a signature is {SIGNATURE_LEN} bytes (r ‖ s ‖ v), not {0}")]
    Length(usize),
    #[error("v must be 27 or 28 (or 0 or 1)")]
    RecoveryId,
    #[error("s is in the upper half of the curve order (not a canonical signature)")]
    HighS,
    #[error("the signature does not verify")]
    Invalid,
}

/// `keccak256("\x19Ethereum Signed Message:\n" ‖ len(text) ‖ text)`.
pub fn eip191_digest(text: &[u8]) -> [u8; 32] {
    let mut h = Keccak256::new();
    h.update(b"\x19Ethereum Signed Message:\n");
    h.update(text.len().to_string().as_bytes());
    h.update(text);
    h.finalize().into()
}

/// The address of a public key: the last 20 bytes of keccak256 of its uncompressed point.
pub fn address_of(key: &VerifyingKey) -> Address {
    let point = key.to_encoded_point(false);
    let hash = Keccak256::digest(&point.as_bytes()[1..]);
    let mut out = [0u8; 20];
    out.copy_from_slice(&hash[12..]);
    out
}

/// Signs `text` as a wallet's `personal_sign` does: `r ‖ s ‖ v`, low `s`, `v ∈ {27, 28}`.
pub fn sign(key: &SigningKey, text: &[u8]) -> Result<[u8; SIGNATURE_LEN], SignatureError> {
    let (sig, recid) = key
        .sign_prehash_recoverable(&eip191_digest(text))
        .map_err(|_| SignatureError::Invalid)?;
    let mut out = [0u8; SIGNATURE_LEN];
    out[..64].copy_from_slice(&sig.to_bytes());
    out[64] = 27 + recid.to_byte();
    Ok(out)
}

/// The address that signed `text` with `signature`.
pub fn recover(text: &[u8], signature: &[u8]) -> Result<Address, SignatureError> {
    if signature.len() != SIGNATURE_LEN {
        return Err(SignatureError::Length(signature.len()));
    }
    let v = match signature[64] {
        27 | 28 => signature[64] - 27,
        0 | 1 => signature[64],
        _ => return Err(SignatureError::RecoveryId),
    };
    let sig = Signature::from_slice(&signature[..64]).map_err(|_| SignatureError::Invalid)?;
    if sig.normalize_s().is_some() {
        return Err(SignatureError::HighS);
    }
    let recid = RecoveryId::from_byte(v).ok_or(SignatureError::RecoveryId)?;
    let key = VerifyingKey::recover_from_prehash(&eip191_digest(text), &sig, recid)
        .map_err(|_| SignatureError::Invalid)?;
    Ok(address_of(&key))
}
