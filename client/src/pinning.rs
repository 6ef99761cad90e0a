//! The certificate pin: a rustls verifier that accepts a server only if its leaf
//! certificate is one the verified evidence attests.
//!
//! The check runs during the TLS handshake, before any HTTP byte is written, so a
//! request (and the API key in it) can only ever travel on a connection to a server that
//! presented an attested leaf. The usual web-PKI checks (chain to a trusted root, name,
//! validity) run first and must pass too; the pin is an extra condition, never a
//! replacement. A leaf that passes the web PKI but is not pinned is remembered, so the
//! client can tell an ACME renewal (re-verify, then go on) from any other TLS failure.
//!
//! A renewal is recognised by its key: the verified evidence announces the SHA-256 of the
//! SubjectPublicKeyInfo of the key the deployment's next certificate will use
//! (`next-tls-key.json`, covered by the quote). The API verifier refuses such a leaf too
//! (it is not attested yet) but notes that it was announced; the evidence verifier
//! ([`PinnedVerifier::for_evidence`]) accepts it, so the re-verification fetches the
//! fresh evidence from the very server that holds the announced key, and from no other.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, RwLock};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use sha2::{Digest, Sha256};

/// SHA-256 of a DER certificate.
pub type LeafHash = [u8; 32];

/// SHA-256 of a certificate's SubjectPublicKeyInfo DER.
pub type KeyHash = [u8; 32];

/// A leaf that passed the web PKI but is not attested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub leaf: LeafHash,
    /// Its key is the next key the verified evidence announced (an ACME renewal).
    pub announced: bool,
}

/// The leaf hashes the current verification attests, and the next keys it announces,
/// shared by the verifiers and the client that replaces them after a re-verification.
#[derive(Debug, Default)]
pub(crate) struct Pins {
    attested: RwLock<BTreeSet<LeafHash>>,
    announced: RwLock<BTreeSet<KeyHash>>,
    /// The last leaf that passed the web PKI but was not attested.
    refused: Mutex<Option<Refusal>>,
}

impl Pins {
    pub(crate) fn replace(&self, leaves: BTreeSet<LeafHash>, announced: BTreeSet<KeyHash>) {
        if let Ok(mut set) = self.attested.write() {
            *set = leaves;
        }
        if let Ok(mut set) = self.announced.write() {
            *set = announced;
        }
    }

    pub(crate) fn clear(&self) {
        self.replace(BTreeSet::new(), BTreeSet::new());
    }

    fn is_announced(&self, key: &KeyHash) -> bool {
        self.announced
            .read()
            .map(|s| s.contains(key))
            .unwrap_or(false)
    }

    fn contains(&self, leaf: &LeafHash) -> bool {
        self.attested
            .read()
            .map(|s| s.contains(leaf))
            .unwrap_or(false)
    }

    /// The leaf refused since the last call, if any (taken: each refusal is seen once).
    pub(crate) fn take_refused(&self) -> Option<Refusal> {
        self.refused.lock().ok().and_then(|mut r| r.take())
    }

    fn refuse(&self, refusal: Refusal) {
        if let Ok(mut r) = self.refused.lock() {
            *r = Some(refusal);
        }
    }
}

/// The rustls verifier: web PKI first, then the pin.
#[derive(Debug)]
pub(crate) struct PinnedVerifier {
    web_pki: Arc<WebPkiServerVerifier>,
    pins: Arc<Pins>,
    /// Also accept a leaf whose key the evidence announced (the evidence fetch of a
    /// re-verification; never the API connections).
    accept_announced: bool,
}

impl PinnedVerifier {
    pub(crate) fn new(
        roots: RootCertStore,
        provider: Arc<CryptoProvider>,
        pins: Arc<Pins>,
    ) -> Result<Self, rustls::client::VerifierBuilderError> {
        let web_pki =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider).build()?;
        Ok(Self {
            web_pki,
            pins,
            accept_announced: false,
        })
    }

    /// The same checks for the evidence fetch of a re-verification: an attested leaf, or
    /// one whose key the verified evidence announced.
    pub(crate) fn for_evidence(&self) -> Self {
        Self {
            web_pki: self.web_pki.clone(),
            pins: self.pins.clone(),
            accept_announced: true,
        }
    }
}

pub(crate) fn leaf_hash(der: &[u8]) -> LeafHash {
    Sha256::digest(der).into()
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.web_pki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )?;
        let leaf = leaf_hash(end_entity);
        if self.pins.contains(&leaf) {
            return Ok(ServerCertVerified::assertion());
        }
        let announced = evidence::bundle::spki_sha256(end_entity)
            .is_some_and(|key| self.pins.is_announced(&key));
        if announced && self.accept_announced {
            return Ok(ServerCertVerified::assertion());
        }
        if announced {
            tracing::info!(
                leaf_sha256 = %hex::encode(leaf),
                "the server shows a new certificate with the key its evidence announced"
            );
        } else {
            tracing::warn!(
                leaf_sha256 = %hex::encode(leaf),
                "refused a server certificate the verified evidence neither attests nor announced"
            );
        }
        self.pins.refuse(Refusal { leaf, announced });
        Err(rustls::Error::InvalidCertificate(
            CertificateError::ApplicationVerificationFailure,
        ))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.web_pki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.web_pki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.web_pki.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn self_signed(name: &str) -> (CertificateDer<'static>, RootCertStore) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let der = cert.der().clone();
        let mut roots = RootCertStore::empty();
        roots.add(der.clone()).unwrap();
        (der, roots)
    }

    fn verifier(roots: RootCertStore, pins: Arc<Pins>) -> PinnedVerifier {
        PinnedVerifier::new(
            roots,
            Arc::new(rustls::crypto::ring::default_provider()),
            pins,
        )
        .unwrap()
    }

    #[test]
    fn only_an_attested_leaf_passes_and_a_refusal_is_remembered_once() {
        let (der, roots) = self_signed("localhost");
        let pins = Arc::new(Pins::default());
        let v = verifier(roots, pins.clone());
        let name = ServerName::try_from("localhost").unwrap();
        let now = UnixTime::now();
        // Valid for the web PKI (its own root) but not attested: refused, and noted.
        assert!(v.verify_server_cert(&der, &[], &name, &[], now).is_err());
        assert_eq!(
            pins.take_refused(),
            Some(Refusal {
                leaf: leaf_hash(&der),
                announced: false
            })
        );
        assert_eq!(pins.take_refused(), None);
        // Attested: accepted.
        pins.replace([leaf_hash(&der)].into(), BTreeSet::new());
        assert!(v.verify_server_cert(&der, &[], &name, &[], now).is_ok());
        assert_eq!(pins.take_refused(), None);
        // Cleared (a failed re-verification): refused again.
        pins.clear();
        assert!(v.verify_server_cert(&der, &[], &name, &[], now).is_err());
    }

    /// A leaf whose key was announced: refused on API connections (and noted as a
    /// renewal), accepted by the evidence verifier; an unannounced key by neither.
    #[test]
    fn an_announced_key_opens_only_the_evidence_fetch() {
        let (der, roots) = self_signed("localhost");
        let pins = Arc::new(Pins::default());
        let api = verifier(roots, pins.clone());
        let evidence = api.for_evidence();
        let name = ServerName::try_from("localhost").unwrap();
        let now = UnixTime::now();
        let key = evidence::bundle::spki_sha256(&der).unwrap();
        pins.replace(BTreeSet::new(), [key].into());
        assert!(api.verify_server_cert(&der, &[], &name, &[], now).is_err());
        assert_eq!(
            pins.take_refused(),
            Some(Refusal {
                leaf: leaf_hash(&der),
                announced: true
            })
        );
        assert!(
            evidence
                .verify_server_cert(&der, &[], &name, &[], now)
                .is_ok()
        );
        // Another key: refused by both, and not a renewal.
        pins.replace(BTreeSet::new(), [[9; 32]].into());
        assert!(
            evidence
                .verify_server_cert(&der, &[], &name, &[], now)
                .is_err()
        );
        assert_eq!(pins.take_refused().map(|r| r.announced), Some(false));
    }

    #[test]
    fn a_pinned_leaf_must_still_pass_the_web_pki() {
        let (der, _) = self_signed("localhost");
        let (_, other_roots) = self_signed("localhost");
        let pins = Arc::new(Pins::default());
        pins.replace([leaf_hash(&der)].into(), BTreeSet::new());
        let v = verifier(other_roots, pins.clone());
        let now = UnixTime::now();
        // Pinned, but not from a trusted root: refused, and not reported as a renewal.
        let name = ServerName::try_from("localhost").unwrap();
        assert!(v.verify_server_cert(&der, &[], &name, &[], now).is_err());
        assert_eq!(pins.take_refused(), None);
        // Trusted and pinned, but for another name: refused.
        let (der2, roots2) = self_signed("other.example");
        pins.replace([leaf_hash(&der2)].into(), BTreeSet::new());
        let v = verifier(roots2, pins.clone());
        assert!(v.verify_server_cert(&der2, &[], &name, &[], now).is_err());
    }
}
