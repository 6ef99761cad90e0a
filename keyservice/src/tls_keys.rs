//! TLS certificate keys. The invariant: the private key of every certificate the front end
//! serves with evidence lives here and nowhere else.
//!
//! * TLS key `i` is an ECDSA P-256 key derived from the root (`derive`, label
//!   "keyservice/v1/tls-key", data `be32(i)`): replicas sharing a root share the keys, and
//!   nothing new is persisted. Its label is reached by no wallet, action, payer or seal
//!   operation, and no operation exports it.
//! * The front end learns only the public key (`TlsPublicKey`: SubjectPublicKeyInfo DER)
//!   and asks for signatures (`TlsSign`: one scheme, ECDSA P-256 with SHA-256 over a
//!   bounded message: a TLS handshake's signed content, or a certificate / CSR to sign).
//! * A certificate chain is registered (`TlsRegisterCertificate`) only if its leaf
//!   carries key `i`, and an evidence quote covers a `sha256sum.txt` only if it lists at
//!   least one `cert-*.pem` and every `cert-*.pem` it lists is a registered chain
//!   ([`TlsKeys::check_listing`]). A front end that obtains a web-PKI certificate for a
//!   key of its own therefore gets no quote binding that certificate.
//!
//! Registrations live in memory (the last [`MAX_REGISTERED`]): the front end registers the
//! chain it serves before it asks for the quote of its evidence.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use keyservice_api::protocol::TLS_SCHEME_ECDSA_P256_SHA256;
use p256::elliptic_curve::sec1::ToEncodedPoint;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use sha2::{Digest, Sha256};
use zeroize::Zeroize;

use crate::derive::{KeyDeriver, LABEL_TLS_KEY, MAX_COUNTER};
use crate::op_error::OpError;

/// Certificate chains remembered for evidence quotes (oldest forgotten first).
pub const MAX_REGISTERED: usize = 16;
/// Derived key pairs kept ready to sign (the cache is emptied when it would grow past).
const MAX_CACHED_KEYS: usize = 64;

/// The DER prefix of a P-256 SubjectPublicKeyInfo (id-ecPublicKey, prime256v1), followed
/// by the 65-byte uncompressed point (RFC 5480).
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

struct TlsKeyPair {
    pair: EcdsaKeyPair,
    spki: Vec<u8>,
}

/// The TLS keys' signing state and the registered certificate chains, of one root (its
/// cache is by index: a `KeyOps` owns one, next to its one deriver).
pub struct TlsKeys {
    pairs: Mutex<HashMap<u32, Arc<TlsKeyPair>>>,
    registered: Mutex<VecDeque<[u8; 32]>>,
    rng: SystemRandom,
}

impl Default for TlsKeys {
    fn default() -> Self {
        Self::new()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means a panic elsewhere while it was held; the maps stay
    // consistent (every insert is a single call).
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl TlsKeys {
    pub fn new() -> Self {
        Self {
            pairs: Mutex::new(HashMap::new()),
            registered: Mutex::new(VecDeque::new()),
            rng: SystemRandom::new(),
        }
    }

    fn pair(&self, deriver: &KeyDeriver, index: u32) -> Result<Arc<TlsKeyPair>, OpError> {
        if let Some(pair) = lock(&self.pairs).get(&index) {
            return Ok(Arc::clone(pair));
        }
        let pair = Arc::new(derive_pair(deriver, index, &self.rng)?);
        let mut pairs = lock(&self.pairs);
        if pairs.len() >= MAX_CACHED_KEYS {
            pairs.clear();
        }
        pairs.insert(index, Arc::clone(&pair));
        Ok(pair)
    }

    /// `TlsPublicKey`: the SubjectPublicKeyInfo DER of key `index`.
    pub fn public_key(&self, deriver: &KeyDeriver, index: u32) -> Result<Vec<u8>, OpError> {
        Ok(self.pair(deriver, index)?.spki.clone())
    }

    /// `TlsSign`: a DER ECDSA P-256 / SHA-256 signature over `message` by key `index`.
    pub fn sign(
        &self,
        deriver: &KeyDeriver,
        index: u32,
        scheme: u16,
        message: &[u8],
    ) -> Result<Vec<u8>, OpError> {
        if scheme != TLS_SCHEME_ECDSA_P256_SHA256 {
            return Err(OpError::InvalidArgument(
                "TLS keys sign only with ecdsa_secp256r1_sha256 (0x0403)",
            ));
        }
        let pair = self.pair(deriver, index)?;
        let sig = pair
            .pair
            .sign(&self.rng, message)
            .map_err(|_| OpError::Internal("TLS signing failed"))?;
        Ok(sig.as_ref().to_vec())
    }

    /// `TlsRegisterCertificate`: remembers SHA-256(`chain_pem`) if its leaf carries key
    /// `index`.
    pub fn register(
        &self,
        deriver: &KeyDeriver,
        index: u32,
        chain_pem: &[u8],
    ) -> Result<[u8; 32], OpError> {
        let leaf = CertificateDer::pem_slice_iter(chain_pem)
            .next()
            .ok_or(OpError::InvalidArgument(
                "the chain holds no PEM certificate",
            ))?
            .map_err(|_| OpError::InvalidArgument("the chain is not PEM"))?;
        let (_, cert) = x509_parser::parse_x509_certificate(leaf.as_ref())
            .map_err(|_| OpError::InvalidArgument("the leaf certificate does not parse"))?;
        let pair = self.pair(deriver, index)?;
        if cert.public_key().raw != pair.spki.as_slice() {
            return Err(OpError::Refused(
                "the leaf certificate does not carry this keyservice TLS key",
            ));
        }
        let hash: [u8; 32] = Sha256::digest(chain_pem).into();
        let mut registered = lock(&self.registered);
        if !registered.contains(&hash) {
            if registered.len() >= MAX_REGISTERED {
                registered.pop_front();
            }
            registered.push_back(hash);
        }
        Ok(hash)
    }

    /// The certificate binding of an evidence quote (`EvidenceQuote`, and any other
    /// quote over a `sha256sum.txt`), checked before the quote provider is asked: the
    /// listing names at least one `cert-*.pem`, and each is a registered chain.
    pub fn check_listing(&self, sums: &[u8]) -> Result<(), OpError> {
        let text = std::str::from_utf8(sums)
            .map_err(|_| OpError::InvalidArgument("sha256sum.txt is not UTF-8"))?;
        let registered = lock(&self.registered);
        let mut named = 0usize;
        for line in text.lines() {
            let Some((hash, name)) = line.split_once("  ") else {
                continue;
            };
            if !(name.starts_with("cert-") && name.ends_with(".pem")) {
                continue;
            }
            let listed = hex::decode(hash)
                .ok()
                .and_then(|h| <[u8; 32]>::try_from(h).ok());
            match listed {
                Some(listed) if registered.contains(&listed) => named += 1,
                _ => {
                    return Err(OpError::Refused(
                        "the listing names a certificate whose key keyservice does not hold \
                         (register it with TlsRegisterCertificate first)",
                    ));
                }
            }
        }
        if named == 0 {
            return Err(OpError::Refused(
                "the listing names no certificate (cert-*.pem) registered with keyservice",
            ));
        }
        Ok(())
    }
}

fn derive_pair(
    deriver: &KeyDeriver,
    index: u32,
    rng: &SystemRandom,
) -> Result<TlsKeyPair, OpError> {
    let pair = derive_p256(
        deriver,
        LABEL_TLS_KEY,
        &index.to_be_bytes(),
        &ECDSA_P256_SHA256_ASN1_SIGNING,
        rng,
    )?;
    let mut spki = P256_SPKI_PREFIX.to_vec();
    spki.extend_from_slice(pair.public_key().as_ref());
    Ok(TlsKeyPair { pair, spki })
}

/// The P-256 key pair `okm(label, data, c)` for the smallest `c` with `0 < okm < n` (the
/// P-256 order), signing with `alg` (ASN.1 DER or fixed `r ‖ s` signatures).
pub(crate) fn derive_p256(
    deriver: &KeyDeriver,
    label: &[u8],
    data: &[u8],
    alg: &'static ring::signature::EcdsaSigningAlgorithm,
    rng: &SystemRandom,
) -> Result<EcdsaKeyPair, OpError> {
    for counter in 0..MAX_COUNTER {
        let okm = deriver.okm(label, data, counter)?;
        let mut repr = p256::FieldBytes::from(*okm);
        let scalar = Option::<p256::NonZeroScalar>::from(p256::NonZeroScalar::from_repr(repr));
        repr[..].zeroize();
        let Some(scalar) = scalar else {
            continue;
        };
        let point = p256::PublicKey::from_secret_scalar(&scalar).to_encoded_point(false);
        return EcdsaKeyPair::from_private_key_and_public_key(
            alg,
            okm.as_ref(),
            point.as_bytes(),
            rng,
        )
        .map_err(|_| OpError::Internal("P-256 key setup failed"));
    }
    Err(OpError::Internal("key derivation failed"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::secret::RootSecret;

    fn deriver(byte: u8) -> KeyDeriver {
        KeyDeriver::new(&RootSecret::from_bytes(zeroize::Zeroizing::new([byte; 32])))
    }

    #[test]
    fn keys_are_per_root_and_index_and_signatures_verify() {
        let keys = TlsKeys::new();
        let a = deriver(1);
        let spki0 = keys.public_key(&a, 0).unwrap();
        assert_eq!(spki0.len(), 91);
        assert_eq!(spki0, TlsKeys::new().public_key(&a, 0).unwrap());
        assert_ne!(spki0, keys.public_key(&a, 1).unwrap());
        // Another root, other keys (one `TlsKeys` serves one root's `KeyOps`).
        assert_ne!(spki0, TlsKeys::new().public_key(&deriver(2), 0).unwrap());
        let sig = keys
            .sign(&a, 0, TLS_SCHEME_ECDSA_P256_SHA256, b"hello")
            .unwrap();
        let public = ring::signature::UnparsedPublicKey::new(
            &ring::signature::ECDSA_P256_SHA256_ASN1,
            &spki0[26..],
        );
        public.verify(b"hello", &sig).unwrap();
        assert!(public.verify(b"hellO", &sig).is_err());
        assert!(keys.sign(&a, 0, 0x0804, b"hello").is_err());
    }
}
