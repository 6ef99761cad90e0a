//! Key derivation: every key the keyservice uses is a one-way function of the root.
//!
//! ```text
//! PRK         = HKDF-Extract(salt = "keyservice/v1", IKM = root)              (once, at start)
//! okm(L, D, c) = HKDF-Expand(PRK, info = L ‖ 0x00 ‖ D ‖ be32(c), 32 bytes)
//! scalar(L, D) = okm(L, D, c) for the smallest c = 0, 1, … with 0 < okm < n (secp256k1 order)
//!
//! wallet key      = scalar("keyservice/v1/wallet",      derivation_path (32 bytes))
//! action key      = scalar("keyservice/v1/action",      UTF-8 bytes of the IPFS CID)
//! API payer i     = scalar("keyservice/v1/api-payer",   be32(i))
//! admin payer     = scalar("keyservice/v1/admin-payer", empty)
//! wallet AES key  = HKDF-SHA256(salt = "keyservice/v1", IKM = wallet key (32 bytes BE),
//!                               info = "keyservice/v1/wallet-aes-256-gcm", 32 bytes)
//! service seal    = okm("keyservice/v1/service-seal", purpose name, 0)   (AES-256-GCM key)
//! state MAC       = okm("keyservice/v1/state-mac",    file name, 0)     (HMAC-SHA256 key)
//! store row MAC   = okm("keyservice/v1/store-row-mac", empty, 0)       (HMAC-SHA256 key)
//! root id         = okm("keyservice/v1/root-id",      empty, 0)        (public fingerprint)
//! TLS key i       = okm("keyservice/v1/tls-key", be32(i), c) for the smallest c with
//!                   0 < okm < n (P-256 order): ECDSA P-256 (`crate::tls_keys`)
//! ACME account key = okm("keyservice/v1/acme-account-key", empty, c), the same rule:
//!                   ECDSA P-256, ES256 JWS signatures only (`crate::acme_key`)
//! ```
//!
//! The service-seal, state-MAC and store-row-MAC labels differ from the wallet label, so no
//! wallet path (any 32 bytes) reaches them: they are usable only through their
//! purpose-named operations. The root id is an HKDF output under its own label: it
//! identifies the root and reveals nothing about it or about any other derived key.
//!
//! Labels contain no 0x00 and the counter is a fixed 4 bytes at the end, so `info` parses
//! back uniquely into (label, data, counter): different purposes never share an input.
//! The retry is needed with probability about 2^-128 per key; we stop after 16 tries.

use hkdf::Hkdf;
use k256::ecdsa::hazmat::SignPrimitive;
use k256::elliptic_curve::PrimeField;
use k256::elliptic_curve::sec1::ToEncodedPoint;
use k256::{FieldBytes, NonZeroScalar};
use keyservice_api::{DerivationPath, PublicKey, RootId, Signature};
use sha2::Sha256;
use zeroize::{Zeroize, Zeroizing};

use crate::secret::RootSecret;

/// HKDF salt for the root and for the wallet AES key.
pub const SALT: &[u8] = b"keyservice/v1";
pub const LABEL_WALLET: &[u8] = b"keyservice/v1/wallet";
pub const LABEL_ACTION: &[u8] = b"keyservice/v1/action";
pub const LABEL_API_PAYER: &[u8] = b"keyservice/v1/api-payer";
pub const LABEL_ADMIN_PAYER: &[u8] = b"keyservice/v1/admin-payer";
pub const INFO_WALLET_AES: &[u8] = b"keyservice/v1/wallet-aes-256-gcm";
pub const LABEL_SERVICE_SEAL: &[u8] = b"keyservice/v1/service-seal";
pub const LABEL_STATE_MAC: &[u8] = b"keyservice/v1/state-mac";
pub const LABEL_STORE_ROW_MAC: &[u8] = b"keyservice/v1/store-row-mac";
pub const LABEL_ROOT_ID: &[u8] = b"keyservice/v1/root-id";
/// TLS certificate keys (P-256), usable only by `TlsPublicKey` / `TlsSign`.
pub const LABEL_TLS_KEY: &[u8] = b"keyservice/v1/tls-key";
/// The ACME account key (P-256), usable only by `AcmeAccountPublicKey` /
/// `AcmeAccountSign`.
pub const LABEL_ACME_ACCOUNT_KEY: &[u8] = b"keyservice/v1/acme-account-key";
/// Retry counter limit of [`KeyDeriver::scalar`].
pub const MAX_COUNTER: u32 = 16;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeriveError {
    #[error("HKDF failed (invalid length)")]
    Hkdf,
    #[error("no valid secp256k1 scalar after {MAX_COUNTER} tries")]
    Exhausted,
    #[error("ECDSA signing failed")]
    Sign,
    #[error("public key encoding failed")]
    Encoding,
}

/// Holds the HKDF pseudo-random key of the root (zeroized on drop) and derives from it.
pub struct KeyDeriver {
    prk: Zeroizing<[u8; 32]>,
}

impl std::fmt::Debug for KeyDeriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyDeriver(<redacted>)")
    }
}

impl KeyDeriver {
    pub fn new(root: &RootSecret) -> Self {
        let (mut prk, _) = Hkdf::<Sha256>::extract(Some(SALT), root.expose_secret());
        let mut out = Zeroizing::new([0u8; 32]);
        out.copy_from_slice(&prk);
        prk[..].zeroize();
        Self { prk: out }
    }

    /// `okm(label, data, counter)` of the module docs.
    pub fn okm(
        &self,
        label: &[u8],
        data: &[u8],
        counter: u32,
    ) -> Result<Zeroizing<[u8; 32]>, DeriveError> {
        let hk = Hkdf::<Sha256>::from_prk(&self.prk[..]).map_err(|_| DeriveError::Hkdf)?;
        let mut okm = Zeroizing::new([0u8; 32]);
        hk.expand_multi_info(&[label, &[0u8], data, &counter.to_be_bytes()], okm.as_mut())
            .map_err(|_| DeriveError::Hkdf)?;
        Ok(okm)
    }

    /// `scalar(label, data)` of the module docs, as a signing key.
    pub fn scalar(&self, label: &[u8], data: &[u8]) -> Result<SecretScalar, DeriveError> {
        first_valid_scalar(|counter| self.okm(label, data, counter))
    }

    pub fn wallet_key(&self, path: &DerivationPath) -> Result<SecretScalar, DeriveError> {
        self.scalar(LABEL_WALLET, path.as_bytes())
    }

    pub fn action_key(&self, cid: &str) -> Result<SecretScalar, DeriveError> {
        self.scalar(LABEL_ACTION, cid.as_bytes())
    }

    pub fn api_payer_key(&self, index: u32) -> Result<SecretScalar, DeriveError> {
        self.scalar(LABEL_API_PAYER, &index.to_be_bytes())
    }

    pub fn admin_payer_key(&self) -> Result<SecretScalar, DeriveError> {
        self.scalar(LABEL_ADMIN_PAYER, &[])
    }

    /// The AES-256-GCM key of a service-owned sealing purpose.
    pub fn service_seal_key(
        &self,
        purpose: keyservice_api::ServicePurpose,
    ) -> Result<Zeroizing<[u8; 32]>, DeriveError> {
        self.okm(LABEL_SERVICE_SEAL, purpose.label().as_bytes(), 0)
    }

    /// The HMAC-SHA256 key authenticating one of the keyservice's own state files.
    pub fn state_mac_key(&self, file: &str) -> Result<Zeroizing<[u8; 32]>, DeriveError> {
        self.okm(LABEL_STATE_MAC, file.as_bytes(), 0)
    }

    /// The HMAC-SHA256 key of `RowMac` (the front end's store rows). Never exported.
    pub fn store_row_mac_key(&self) -> Result<Zeroizing<[u8; 32]>, DeriveError> {
        self.okm(LABEL_STORE_ROW_MAC, &[], 0)
    }

    /// The root's public fingerprint.
    pub fn root_id(&self) -> Result<RootId, DeriveError> {
        Ok(RootId(*self.okm(LABEL_ROOT_ID, &[], 0)?))
    }
}

/// The retry rule: the first candidate (counter 0, 1, …) that is a valid secp256k1 private
/// key, i.e. 0 < value < n as a big-endian integer.
pub fn first_valid_scalar(
    mut candidate: impl FnMut(u32) -> Result<Zeroizing<[u8; 32]>, DeriveError>,
) -> Result<SecretScalar, DeriveError> {
    for counter in 0..MAX_COUNTER {
        let okm = candidate(counter)?;
        if let Some(sk) = SecretScalar::from_bytes(&okm) {
            return Ok(sk);
        }
    }
    Err(DeriveError::Exhausted)
}

/// A derived secp256k1 private key: a non-zero scalar, zeroized on drop, never printed.
///
/// Deliberately not a `k256::ecdsa::SigningKey`: that type computes the public key when
/// it is built, which would double the cost of every signature.
pub struct SecretScalar(NonZeroScalar);

impl SecretScalar {
    /// `None` unless `0 < bytes < n` (big-endian).
    pub fn from_bytes(bytes: &[u8; 32]) -> Option<Self> {
        let mut repr = FieldBytes::from(*bytes);
        let scalar = Option::<NonZeroScalar>::from(NonZeroScalar::from_repr(repr));
        repr[..].zeroize();
        scalar.map(Self)
    }
}

impl Drop for SecretScalar {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl std::fmt::Debug for SecretScalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretScalar(<redacted>)")
    }
}

/// The 32-byte big-endian private scalar, in a zeroizing buffer.
pub fn secret_bytes(sk: &SecretScalar) -> Zeroizing<[u8; 32]> {
    let mut repr = sk.0.to_repr();
    let mut out = Zeroizing::new([0u8; 32]);
    out.copy_from_slice(&repr);
    repr[..].zeroize();
    out
}

/// The wallet's AES-256-GCM key: one-way from the wallet key, never equal to it.
pub fn wallet_aes_key(sk: &SecretScalar) -> Result<Zeroizing<[u8; 32]>, DeriveError> {
    let ikm = secret_bytes(sk);
    let hk = Hkdf::<Sha256>::new(Some(SALT), &ikm[..]);
    let mut key = Zeroizing::new([0u8; 32]);
    hk.expand(INFO_WALLET_AES, key.as_mut())
        .map_err(|_| DeriveError::Hkdf)?;
    Ok(key)
}

/// Uncompressed public key of `sk`.
pub fn public_key(sk: &SecretScalar) -> Result<PublicKey, DeriveError> {
    let point = k256::PublicKey::from_secret_scalar(&sk.0).to_encoded_point(false);
    let bytes: [u8; 65] = point
        .as_bytes()
        .try_into()
        .map_err(|_| DeriveError::Encoding)?;
    PublicKey::from_uncompressed(bytes).map_err(|_| DeriveError::Encoding)
}

/// ECDSA over a 32-byte digest: RFC 6979 nonce, low-S, `r ‖ s ‖ v` with `v = 27 + recid`,
/// byte-identical to ethers v5 `joinSignature(signingKey.signDigest(digest))`.
pub fn sign_digest(sk: &SecretScalar, digest: &[u8; 32]) -> Result<Signature, DeriveError> {
    let z = FieldBytes::from(*digest);
    let (sig, recid) =
        sk.0.try_sign_prehashed_rfc6979::<Sha256>(&z, &[])
            .map_err(|_| DeriveError::Sign)?;
    let recid = recid.ok_or(DeriveError::Sign)?;
    let mut out = [0u8; 65];
    out[..64].copy_from_slice(&sig.to_bytes());
    out[64] = 27 + recid.to_byte();
    Ok(Signature(out))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn deriver(byte: u8) -> KeyDeriver {
        KeyDeriver::new(&RootSecret::from_bytes(Zeroizing::new([byte; 32])))
    }

    #[test]
    fn domains_are_separated() {
        let d = deriver(1);
        let a = secret_bytes(&d.api_payer_key(0).unwrap());
        let b = secret_bytes(&d.admin_payer_key().unwrap());
        let c = secret_bytes(&d.wallet_key(&DerivationPath([0; 32])).unwrap());
        assert_ne!(*a, *b);
        assert_ne!(*a, *c);
        let seal = d
            .service_seal_key(keyservice_api::ServicePurpose::AcmeAccount)
            .unwrap();
        let seal2 = d
            .service_seal_key(keyservice_api::ServicePurpose::AcmeCertificate)
            .unwrap();
        assert_ne!(*seal, *seal2);
        assert_ne!(*seal, *c);
        let other = deriver(2);
        assert_ne!(
            *c,
            *secret_bytes(&other.wallet_key(&DerivationPath([0; 32])).unwrap())
        );
        // The row-MAC key and the root id: apart from each other and from every other key,
        // and functions of the root only.
        let row = d.store_row_mac_key().unwrap();
        let id = d.root_id().unwrap();
        for other_key in [
            &*a,
            &*b,
            &*c,
            &*seal,
            &*seal2,
            &*d.state_mac_key("").unwrap(),
        ] {
            assert_ne!(&*row, other_key);
            assert_ne!(&id.0, other_key);
        }
        assert_ne!(*row, id.0);
        assert_eq!(deriver(1).root_id().unwrap(), id);
        assert_ne!(other.root_id().unwrap(), id);
        assert_ne!(*other.store_row_mac_key().unwrap(), *row);
    }

    #[test]
    fn retry_counter_skips_invalid_scalars() {
        // n (the group order), 0 and 2^256-1 are not private keys; the third try is.
        let n = hex::decode("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141")
            .unwrap();
        let mut seen = Vec::new();
        let sk = first_valid_scalar(|c| {
            seen.push(c);
            let mut out = Zeroizing::new([0u8; 32]);
            match c {
                0 => out.copy_from_slice(&n),
                1 => {}
                2 => *out = [0xff; 32],
                _ => out[31] = 7,
            }
            Ok(out)
        })
        .unwrap();
        assert_eq!(seen, vec![0, 1, 2, 3]);
        assert_eq!(secret_bytes(&sk)[31], 7);
        assert!(matches!(
            first_valid_scalar(|_| Ok(Zeroizing::new([0u8; 32]))),
            Err(DeriveError::Exhausted)
        ));
    }

    #[test]
    fn aes_key_differs_from_wallet_key() {
        let sk = deriver(3).wallet_key(&DerivationPath([5; 32])).unwrap();
        assert_ne!(*wallet_aes_key(&sk).unwrap(), *secret_bytes(&sk));
    }

    #[test]
    fn signature_has_low_s_and_ethereum_v() {
        let sk = deriver(4).wallet_key(&DerivationPath([6; 32])).unwrap();
        for i in 0..32u8 {
            let sig = sign_digest(&sk, &[i; 32]).unwrap();
            assert!(matches!(sig.v(), 27 | 28));
            // s ≤ n/2: the top byte of n/2 is 0x7f.
            assert!(sig.s()[0] <= 0x7f);
        }
    }
}
