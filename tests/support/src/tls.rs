//! A TLS listener for tests that need a real handshake against a certificate they
//! control: a self-signed leaf for a name, or any leaf and key they made.

use std::sync::Arc;

use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncRead, AsyncReadExt};

/// A self-signed certificate for `name`: its PEM (a CA file to trust), its DER, and a
/// TLS acceptor serving it.
pub struct SelfSigned {
    pub pem: String,
    pub der: CertificateDer<'static>,
    pub acceptor: tokio_rustls::TlsAcceptor,
}

/// A fresh self-signed certificate for `name`, served by the returned acceptor.
pub fn self_signed(name: &str) -> SelfSigned {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec![name.to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    SelfSigned {
        pem: cert.pem(),
        der: cert.der().clone(),
        acceptor: acceptor(cert.der().clone(), &key.serialize_der()),
    }
}

/// An acceptor serving `leaf` with the PKCS#8 DER key `key`.
pub fn acceptor(leaf: CertificateDer<'static>, key: &[u8]) -> tokio_rustls::TlsAcceptor {
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![leaf],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.to_vec())),
    )
    .unwrap();
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// Reads an HTTP/1.1 request head (up to the blank line); `None` if the peer closed
/// first. Returns the bytes read, which may run past the head.
pub async fn read_request_head(stream: &mut (impl AsyncRead + Unpin)) -> Option<Vec<u8>> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    Some(seen)
}
