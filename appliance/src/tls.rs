//! TLS for the front end: rustls with the ring provider, HTTP/2 and HTTP/1.1 by ALPN,
//! and a certificate resolver whose certificate can be swapped at run time (ACME
//! renewal replaces it without a restart or dropped connections).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, RwLock};

use rustls::ServerConfig;
use rustls::crypto::ring as provider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    #[error("cannot generate a self-signed certificate: {0}")]
    Generate(String),
    #[error("cannot read {what} from {path}: {message}")]
    Read {
        what: &'static str,
        path: String,
        message: String,
    },
    #[error("the certificate or key is unusable: {0}")]
    Unusable(String),
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The ALPN protocol of ACME TLS-ALPN-01 validation handshakes (RFC 8737).
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// The certificate currently served, swappable at run time, and the TLS-ALPN-01
/// validation certificates of pending ACME challenges (served only to handshakes that
/// offer `acme-tls/1`, by SNI name).
#[derive(Debug)]
pub struct CertResolver {
    current: RwLock<Arc<CertifiedKey>>,
    challenges: RwLock<HashMap<String, Arc<CertifiedKey>>>,
}

impl CertResolver {
    pub fn new(key: CertifiedKey) -> Arc<Self> {
        Arc::new(Self {
            current: RwLock::new(Arc::new(key)),
            challenges: RwLock::new(HashMap::new()),
        })
    }

    /// Answers TLS-ALPN-01 validation handshakes for `domain` with `key` until removed.
    pub fn set_challenge(&self, domain: &str, key: CertifiedKey) {
        if let Ok(mut map) = self.challenges.write() {
            map.insert(domain.to_ascii_lowercase(), Arc::new(key));
        }
    }

    /// Stops answering TLS-ALPN-01 validation handshakes for `domain`.
    pub fn clear_challenge(&self, domain: &str) {
        if let Ok(mut map) = self.challenges.write() {
            map.remove(&domain.to_ascii_lowercase());
        }
    }

    /// Serves `key` to every handshake from now on; open connections keep theirs.
    pub fn replace(&self, key: CertifiedKey) {
        if let Ok(mut current) = self.current.write() {
            *current = Arc::new(key);
        }
    }

    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok().map(|c| Arc::clone(&c))
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let acme = hello
            .alpn()
            .is_some_and(|mut protocols| protocols.any(|p| p == ACME_TLS_ALPN));
        if acme {
            // A validation handshake gets the validation certificate or nothing.
            let name = hello.server_name()?.to_ascii_lowercase();
            return self.challenges.read().ok()?.get(&name).cloned();
        }
        self.current()
    }
}

/// The TLS-ALPN-01 validation certificate for `domain`: self-signed, with the critical
/// `acmeIdentifier` extension holding SHA-256 of the key authorization (RFC 8737 §3).
pub fn acme_validation_cert(
    domain: &str,
    key_auth_digest: &[u8],
) -> Result<CertifiedKey, TlsError> {
    let mut params = rcgen::CertificateParams::new(vec![domain.to_owned()])
        .map_err(|e| TlsError::Generate(e.to_string()))?;
    params
        .custom_extensions
        .push(rcgen::CustomExtension::new_acme_identifier(key_auth_digest));
    let key_pair = rcgen::KeyPair::generate().map_err(|e| TlsError::Generate(e.to_string()))?;
    let cert = params
        .self_signed(&key_pair)
        .map_err(|e| TlsError::Generate(e.to_string()))?;
    let key = PrivateKeyDer::try_from(key_pair.serialize_der())
        .map_err(|e| TlsError::Generate(e.to_string()))?;
    certified_key(vec![cert.der().clone()], key)
}

/// A certified key from a PEM chain (leaf first) and a DER PKCS#8 private key.
pub fn from_pem_chain(chain_pem: &str, key_der: &[u8]) -> Result<CertifiedKey, TlsError> {
    let chain = CertificateDer::pem_slice_iter(chain_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Unusable(e.to_string()))?;
    if chain.is_empty() {
        return Err(TlsError::Unusable("no certificate in the chain".into()));
    }
    let key =
        PrivateKeyDer::try_from(key_der.to_vec()).map_err(|e| TlsError::Unusable(e.to_owned()))?;
    certified_key(chain, key)
}

/// A rustls server configuration over `resolver`, offering h2 then http/1.1 (and
/// `acme-tls/1`, which only ACME validation handshakes ask for).
pub fn server_config(resolver: Arc<CertResolver>) -> Result<Arc<ServerConfig>, TlsError> {
    let mut config = ServerConfig::builder_with_provider(Arc::new(provider::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Unusable(e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec(), ACME_TLS_ALPN.to_vec()];
    Ok(Arc::new(config))
}

fn certified_key(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<CertifiedKey, TlsError> {
    let signing =
        provider::sign::any_supported_type(&key).map_err(|e| TlsError::Unusable(e.to_string()))?;
    Ok(CertifiedKey::new(chain, signing))
}

/// A fresh self-signed certificate (ECDSA P-256) for `hostnames`, and its PEM text.
pub fn self_signed(hostnames: &[String]) -> Result<(CertifiedKey, String), TlsError> {
    let generated = rcgen::generate_simple_self_signed(hostnames.to_vec())
        .map_err(|e| TlsError::Generate(e.to_string()))?;
    let pem = generated.cert.pem();
    let key = PrivateKeyDer::try_from(generated.signing_key.serialize_der())
        .map_err(|e| TlsError::Generate(e.to_string()))?;
    let certified = certified_key(vec![generated.cert.der().clone()], key)?;
    Ok((certified, pem))
}

/// A certificate chain and key from PEM files.
pub fn from_pem_files(cert_file: &Path, key_file: &Path) -> Result<CertifiedKey, TlsError> {
    let read_err = |what, path: &Path, e: &dyn std::fmt::Display| TlsError::Read {
        what,
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let chain = CertificateDer::pem_file_iter(cert_file)
        .map_err(|e| read_err("certificates", cert_file, &e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| read_err("certificates", cert_file, &e))?;
    if chain.is_empty() {
        return Err(read_err(
            "certificates",
            cert_file,
            &"no certificate in the file",
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key_file)
        .map_err(|e| read_err("the private key", key_file, &e))?;
    certified_key(chain, key)
}

/// Writes the public certificate where local clients can trust it (`--cacert`).
pub fn write_public_pem(path: &Path, pem: &str) -> Result<(), TlsError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| TlsError::Write {
            path: dir.display().to_string(),
            source,
        })?;
    }
    let tmp = path.with_extension("pem.tmp");
    std::fs::write(&tmp, pem).map_err(|source| TlsError::Write {
        path: tmp.display().to_string(),
        source,
    })?;
    std::fs::rename(&tmp, path).map_err(|source| TlsError::Write {
        path: path.display().to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_cert_is_usable_and_swappable() {
        let (key, pem) = self_signed(&["localhost".into(), "127.0.0.1".into()]).unwrap();
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"));
        let first = key.cert[0].clone();
        let resolver = CertResolver::new(key);
        let config = server_config(Arc::clone(&resolver)).unwrap();
        assert_eq!(config.alpn_protocols[0], b"h2");
        let (other, _) = self_signed(&["localhost".into()]).unwrap();
        resolver.replace(other);
        assert_ne!(resolver.current().unwrap().cert[0], first);
    }

    #[test]
    fn acme_validation_cert_carries_the_digest() {
        let digest = [7u8; 32];
        let key = acme_validation_cert("a.test", &digest).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(key.cert[0].as_ref()).unwrap();
        let ext = cert
            .extensions()
            .iter()
            .find(|e| e.oid.to_id_string() == "1.3.6.1.5.5.7.1.31")
            .expect("acmeIdentifier extension");
        assert!(ext.critical);
        // DER OCTET STRING (0x04, 32) followed by the digest.
        assert_eq!(&ext.value[..2], &[0x04, 32]);
        assert_eq!(&ext.value[2..], &digest);
    }

    #[test]
    fn pem_files_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let cert = dir.path().join("c.pem");
        let key = dir.path().join("k.pem");
        std::fs::write(&cert, generated.cert.pem()).unwrap();
        std::fs::write(&key, generated.signing_key.serialize_pem()).unwrap();
        let loaded = from_pem_files(&cert, &key).unwrap();
        assert_eq!(loaded.cert[0].as_ref(), generated.cert.der().as_ref());
        std::fs::write(&cert, "").unwrap();
        assert!(from_pem_files(&cert, &key).is_err());
    }
}
