//! The HTTP client side: a client trusting exactly one certificate, responses read whole
//! (with the checks of the standard error shape), and request bodies of a given size or
//! without a Content-Length.

use std::time::Duration;

use reqwest::{Client, StatusCode, header::HeaderMap};
use serde_json::Value;

/// A rustls client configuration that trusts exactly the certificates in `pem` and offers
/// `alpn`, for tests that speak TLS (or HTTP/2) below reqwest.
pub fn tls_client_config(pem: &[u8], alpn: &[u8]) -> std::sync::Arc<rustls::ClientConfig> {
    use rustls_pki_types::{CertificateDer, pem::PemObject as _};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    std::sync::Arc::new(config)
}

/// A response, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
    pub text: String,
    pub version: reqwest::Version,
}

impl Reply {
    /// Asserts the standard error shape and status, and returns the description.
    #[track_caller]
    pub fn assert_error(&self, status: u16) -> String {
        assert_eq!(
            self.status.as_u16(),
            status,
            "unexpected status; body: {}",
            self.text
        );
        let content_type = self
            .headers
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(
            content_type.as_deref(),
            Some("application/json"),
            "{}",
            self.text
        );
        let err = &self.body["error"];
        assert_eq!(
            err["code"].as_u64(),
            Some(u64::from(status)),
            "{}",
            self.text
        );
        assert_eq!(
            err["reason"].as_str(),
            self.status.canonical_reason(),
            "{}",
            self.text
        );
        let description = err["description"].as_str().expect("description").to_owned();
        assert!(!description.is_empty());
        assert_eq!(
            self.body.as_object().unwrap().len(),
            1,
            "only `error` at the top: {}",
            self.text
        );
        assert_eq!(err.as_object().unwrap().len(), 3, "{}", self.text);
        description
    }

    /// A 503 from `/health`, whose body is the health report (not an error body).
    #[track_caller]
    pub fn assert_error_free_503(&self) {
        assert_eq!(self.status.as_u16(), 503, "{}", self.text);
        assert_eq!(
            self.body["status"],
            Value::from("degraded"),
            "{}",
            self.text
        );
    }

    #[track_caller]
    pub fn assert_ok(&self) -> &Value {
        assert_eq!(self.status, StatusCode::OK, "body: {}", self.text);
        &self.body
    }
}

/// An HTTPS client that trusts exactly `pem` (no verification is skipped).
pub fn client_trusting(pem: &[u8], version: Option<reqwest::Version>) -> Client {
    let cert = reqwest::Certificate::from_pem(pem).unwrap();
    let mut builder = Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(cert)
        .timeout(Duration::from_secs(60));
    builder = match version {
        Some(reqwest::Version::HTTP_11) => builder.http1_only(),
        Some(reqwest::Version::HTTP_2) => builder.http2_prior_knowledge(),
        _ => builder,
    };
    builder.build().unwrap()
}

/// Reads a response whole; a non-JSON body becomes `Value::Null`.
pub async fn read(resp: reqwest::Response) -> Reply {
    let status = resp.status();
    let headers = resp.headers().clone();
    let version = resp.version();
    let text = resp.text().await.unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Reply {
        status,
        headers,
        body,
        text,
        version,
    }
}

/// A JSON body of exactly `n` bytes: a JSON string holding `n - 2` letters `a`.
pub fn json_string_body(n: usize) -> Vec<u8> {
    let mut body = Vec::with_capacity(n);
    body.push(b'"');
    body.resize(n - 1, b'a');
    body.push(b'"');
    body
}

/// `data` as a body streamed in 64 KiB chunks, so no Content-Length is sent.
pub fn streamed_body(data: Vec<u8>) -> reqwest::Body {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    struct Chunks(std::vec::IntoIter<Vec<u8>>);

    impl futures_core::Stream for Chunks {
        type Item = Result<Vec<u8>, std::io::Error>;
        fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
            Poll::Ready(self.0.next().map(Ok))
        }
    }

    let chunks: Vec<Vec<u8>> = data.chunks(64 * 1024).map(<[u8]>::to_vec).collect();
    reqwest::Body::wrap_stream(Chunks(chunks.into_iter()))
}
