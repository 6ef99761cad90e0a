//! TLS for the front end: rustls with the ring provider, HTTP/2 and HTTP/1.1 by ALPN,
//! and a certificate resolver whose certificate can be swapped at run time (ACME
//! renewal replaces it without a restart or dropped connections).
//!
//! The invariant: the private key of a certificate served for the appliance's names (the
//! self-signed development certificate, every ACME certificate) never enters this process.
//! It is a keyservice TLS key ([`KeyserviceKey`]): rustls signs full handshakes through
//! `TlsSign` (a blocking call from inside the handshake), rcgen signs the certificate or CSR
//! the same way, and resumed handshakes (session ids / TLS 1.3 PSK from the server's
//! session cache) need no signature at all. Only two keys live here: an operator's
//! `tls.mode = "files"` key (keyservice then refuses to quote evidence for it), and the
//! throwaway key of a TLS-ALPN-01 validation certificate, served only to `acme-tls/1`
//! probes.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, RwLock};

use keyservice_api::{BlockingClient, KeyClient};
use rustls::ServerConfig;
use rustls::crypto::ring as provider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{SignatureAlgorithm, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, SubjectPublicKeyInfoDer};

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
    #[error("keyservice TLS key: {0}")]
    Keyservice(String),
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

/// The keyservice TLS key of the self-signed certificate made at start.
pub const SELF_SIGNED_KEY: u32 = 0;
/// The keyservice TLS key of the first ACME certificate; each renewal takes the next.
pub const FIRST_ACME_KEY: u32 = 1;

/// How long a handshake waits for keyservice's signature.
pub const TLS_SIGN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The DER prefix of a P-256 SubjectPublicKeyInfo (RFC 5480); the uncompressed point follows.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// TLS key `index` of keyservice (ECDSA P-256): its public key, and signatures by
/// `TlsSign`. The signing key of rustls (handshakes) and of rcgen (certificates, CSRs).
#[derive(Clone)]
pub struct KeyserviceKey {
    index: u32,
    spki: Arc<Vec<u8>>,
    client: Arc<BlockingClient>,
}

impl std::fmt::Debug for KeyserviceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyserviceKey")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl KeyserviceKey {
    /// TLS key `index`, its public key asked of keyservice through `client`'s socket.
    pub async fn load(client: &KeyClient, index: u32) -> Result<Self, TlsError> {
        let spki = client
            .tls_public_key(index)
            .await
            .map_err(|e| TlsError::Keyservice(e.to_string()))?;
        Self::with_spki(
            Arc::new(BlockingClient::new(client.socket_path(), TLS_SIGN_TIMEOUT)),
            index,
            spki,
        )
    }

    /// TLS key `index` whose public key is `spki`, signing through `client`.
    pub fn with_spki(
        client: Arc<BlockingClient>,
        index: u32,
        spki: Vec<u8>,
    ) -> Result<Self, TlsError> {
        if spki.len() != P256_SPKI_PREFIX.len() + 65 || !spki.starts_with(&P256_SPKI_PREFIX) {
            return Err(TlsError::Keyservice(
                "the TLS public key is not a P-256 SubjectPublicKeyInfo".into(),
            ));
        }
        Ok(Self {
            index,
            spki: Arc::new(spki),
            client,
        })
    }

    pub fn index(&self) -> u32 {
        self.index
    }

    /// The SubjectPublicKeyInfo DER.
    pub fn spki(&self) -> &[u8] {
        &self.spki
    }

    /// SHA-256 (hex) of the SubjectPublicKeyInfo DER: what a client computes from a leaf
    /// certificate carrying this key (`next-tls-key.json`).
    pub fn spki_sha256(&self) -> String {
        use sha2::Digest as _;
        hex::encode(sha2::Sha256::digest(self.spki.as_slice()))
    }

    /// A rustls certified key: `chain` served, handshakes signed by keyservice.
    pub fn certified(&self, chain: Vec<CertificateDer<'static>>) -> CertifiedKey {
        CertifiedKey::new(chain, Arc::new(self.clone()))
    }

    fn sign_blocking(&self, message: &[u8]) -> Result<Vec<u8>, keyservice_api::KeyError> {
        self.client.tls_sign(self.index, message)
    }
}

impl rustls::sign::SigningKey for KeyserviceKey {
    fn choose_scheme(&self, offered: &[SignatureScheme]) -> Option<Box<dyn rustls::sign::Signer>> {
        offered
            .contains(&SignatureScheme::ECDSA_NISTP256_SHA256)
            .then(|| Box::new(self.clone()) as Box<dyn rustls::sign::Signer>)
    }

    fn public_key(&self) -> Option<SubjectPublicKeyInfoDer<'_>> {
        Some(SubjectPublicKeyInfoDer::from(self.spki.as_slice()))
    }

    fn algorithm(&self) -> SignatureAlgorithm {
        SignatureAlgorithm::ECDSA
    }
}

impl rustls::sign::Signer for KeyserviceKey {
    /// Called synchronously inside a full handshake: a blocking round trip to keyservice
    /// (a few tens of microseconds, bounded by [`TLS_SIGN_TIMEOUT`]).
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, rustls::Error> {
        self.sign_blocking(message).map_err(|e| {
            tracing::warn!(error = %e, "keyservice did not sign a TLS handshake");
            rustls::Error::General("the TLS key's signature is unavailable".into())
        })
    }

    fn scheme(&self) -> SignatureScheme {
        SignatureScheme::ECDSA_NISTP256_SHA256
    }
}

impl rcgen::PublicKeyData for KeyserviceKey {
    fn der_bytes(&self) -> &[u8] {
        &self.spki[P256_SPKI_PREFIX.len()..]
    }

    fn algorithm(&self) -> &'static rcgen::SignatureAlgorithm {
        &rcgen::PKCS_ECDSA_P256_SHA256
    }
}

impl rcgen::SigningKey for KeyserviceKey {
    fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, rcgen::Error> {
        self.sign_blocking(msg).map_err(|e| {
            tracing::warn!(error = %e, "keyservice did not sign a certificate or CSR");
            rcgen::Error::RemoteKeyError
        })
    }
}

/// A self-signed certificate for `hostnames` carrying keyservice TLS key `key`, and its
/// PEM text. Blocks on keyservice's signature (call it off the async workers).
pub fn self_signed(
    hostnames: &[String],
    key: &KeyserviceKey,
) -> Result<(CertifiedKey, String), TlsError> {
    let params = rcgen::CertificateParams::new(hostnames.to_vec())
        .map_err(|e| TlsError::Generate(e.to_string()))?;
    let cert = params
        .self_signed(key)
        .map_err(|e| TlsError::Generate(e.to_string()))?;
    Ok((key.certified(vec![cert.der().clone()]), cert.pem()))
}

/// A certified key from a PEM chain (leaf first) whose leaf carries keyservice TLS key
/// `key`.
pub fn keyservice_chain(chain_pem: &str, key: &KeyserviceKey) -> Result<CertifiedKey, TlsError> {
    let chain = CertificateDer::pem_slice_iter(chain_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Unusable(e.to_string()))?;
    if chain.is_empty() {
        return Err(TlsError::Unusable("no certificate in the chain".into()));
    }
    let certified = key.certified(chain);
    certified
        .keys_match()
        .map_err(|e| TlsError::Unusable(format!("the key does not match: {e}")))?;
    Ok(certified)
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

    use std::sync::atomic::{AtomicUsize, Ordering};

    use keyservice_api::codec::{FrameHeader, encode_frame};
    use keyservice_api::protocol::{HEADER_LEN, Op, Request, Response};
    use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair as _};

    /// A stand-in keyservice answering `TlsPublicKey` / `TlsSign` with one P-256 key (on
    /// its own threads, so the blocking signer never waits on the test's runtime), and
    /// counting the signatures it makes.
    struct StandIn {
        socket: std::path::PathBuf,
        signs: Arc<AtomicUsize>,
        _dir: tempfile::TempDir,
    }

    impl StandIn {
        fn start() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let socket = dir.path().join("ks.sock");
            let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
            let rng = ring::rand::SystemRandom::new();
            let pkcs8 =
                EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
            let pair = Arc::new(
                EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng)
                    .unwrap(),
            );
            let signs = Arc::new(AtomicUsize::new(0));
            let counter = Arc::clone(&signs);
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { return };
                    let (pair, counter) = (Arc::clone(&pair), Arc::clone(&counter));
                    std::thread::spawn(move || serve(stream, &pair, &counter));
                }
            });
            Self {
                socket,
                signs,
                _dir: dir,
            }
        }

        fn signs(&self) -> usize {
            self.signs.load(Ordering::SeqCst)
        }
    }

    fn serve(mut stream: std::os::unix::net::UnixStream, pair: &EcdsaKeyPair, signs: &AtomicUsize) {
        use std::io::{Read, Write};
        let rng = ring::rand::SystemRandom::new();
        loop {
            let mut prefix = [0u8; 4];
            if stream.read_exact(&mut prefix).is_err() {
                return;
            }
            let mut body = vec![0u8; u32::from_be_bytes(prefix) as usize];
            stream.read_exact(&mut body).unwrap();
            let header = FrameHeader::parse(&body).unwrap();
            let op = Op::from_u8(header.op).unwrap();
            let response = match Request::decode(op, &body[HEADER_LEN..]).unwrap() {
                Request::TlsPublicKey { .. } => {
                    let mut spki = P256_SPKI_PREFIX.to_vec();
                    spki.extend_from_slice(pair.public_key().as_ref());
                    Response::Spki(spki)
                }
                Request::TlsSign { message, .. } => {
                    signs.fetch_add(1, Ordering::SeqCst);
                    Response::TlsSignature(pair.sign(&rng, &message).unwrap().as_ref().to_vec())
                }
                other => panic!("unexpected {other:?}"),
            };
            let mut frame = Vec::new();
            encode_frame(&mut frame, FrameHeader::new(header.op, 0, header.id), |b| {
                response.encode_payload(b)
            });
            stream.write_all(&frame).unwrap();
        }
    }

    async fn keyservice_self_signed(ks: &StandIn, names: &[&str]) -> (CertifiedKey, String) {
        let key = KeyserviceKey::load(&KeyClient::new(&ks.socket), 3)
            .await
            .unwrap();
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        tokio::task::spawn_blocking(move || self_signed(&names, &key))
            .await
            .unwrap()
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn self_signed_cert_is_usable_and_swappable() {
        let ks = StandIn::start();
        let (key, pem) = keyservice_self_signed(&ks, &["localhost", "127.0.0.1"]).await;
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"));
        // The certificate is signed by keyservice and carries its key.
        assert_eq!(ks.signs(), 1);
        key.keys_match().unwrap();
        let first = key.cert[0].clone();
        let resolver = CertResolver::new(key);
        let config = server_config(Arc::clone(&resolver)).unwrap();
        assert_eq!(config.alpn_protocols[0], b"h2");
        let (other, _) = keyservice_self_signed(&ks, &["localhost"]).await;
        resolver.replace(other);
        assert_ne!(resolver.current().unwrap().cert[0], first);
    }

    /// A full handshake is signed by keyservice (the front end holds no key that could),
    /// a resumed one asks keyservice for nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn full_handshakes_sign_through_keyservice_and_resumed_ones_do_not() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let ks = StandIn::start();
        let (certified, pem) = keyservice_self_signed(&ks, &["localhost"]).await;
        let signed_cert = ks.signs();
        let acceptor =
            tokio_rustls::TlsAcceptor::from(server_config(CertResolver::new(certified)).unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    if let Ok(mut tls) = acceptor.accept(tcp).await {
                        let _ = tls.write_all(b"ok").await;
                        let _ = tls.shutdown().await;
                    }
                });
            }
        });
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let client =
            rustls::ClientConfig::builder_with_provider(Arc::new(provider::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
        let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
        let mut kinds = Vec::new();
        for _ in 0..2 {
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let mut tls = connector.connect(name.clone(), tcp).await.unwrap();
            // Reading processes the session tickets the server sends after the handshake.
            let mut answer = Vec::new();
            tls.read_to_end(&mut answer).await.unwrap();
            assert_eq!(answer, b"ok");
            kinds.push((tls.get_ref().1.handshake_kind(), ks.signs() - signed_cert));
        }
        assert_eq!(
            kinds,
            vec![
                (Some(rustls::HandshakeKind::Full), 1),
                (Some(rustls::HandshakeKind::Resumed), 1)
            ]
        );
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
