//! The two HTTP pieces of ACME: the client the ACME library talks to the CA through
//! (reqwest with our roots and timeouts, every JWS re-signed by keyservice on its way out:
//! see `jws.rs` next to this file), and the plain-HTTP listener that answers HTTP-01
//! challenges.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use instant_acme::{BodyWrapper, BytesResponse, HttpClient};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use tokio::net::TcpListener;

use super::AcmeError;
use super::jws::KeyserviceSigner;

/// The ACME client's HTTP transport (cheap to clone: one connection pool).
#[derive(Clone)]
pub(super) struct AcmeHttp {
    client: reqwest::Client,
}

impl AcmeHttp {
    /// A client trusting `ca_bundle`'s certificates only (when given) or the public
    /// roots, with `timeout` per request.
    pub(super) fn new(ca_bundle: Option<&Path>, timeout: Duration) -> Result<Self, AcmeError> {
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .timeout(timeout)
            .connect_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none());
        if let Some(path) = ca_bundle {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
                .map_err(|e| {
                    AcmeError::Config(format!("acme.ca_bundle {}: {e}", path.display()))
                })?;
            if certs.is_empty() {
                return Err(AcmeError::Config(format!(
                    "acme.ca_bundle {} holds no certificate",
                    path.display()
                )));
            }
            builder = builder.tls_built_in_root_certs(false);
            for cert in certs {
                let cert = reqwest::Certificate::from_der(cert.as_ref())
                    .map_err(|e| AcmeError::Config(format!("acme.ca_bundle: {e}")))?;
                builder = builder.add_root_certificate(cert);
            }
        }
        let client = builder
            .build()
            .map_err(|e| AcmeError::Config(format!("ACME HTTP client: {e}")))?;
        Ok(Self { client })
    }
}

impl AcmeHttp {
    /// The underlying client (our roots, timeouts, no redirects).
    pub(super) fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// Sends `req` as it is.
    pub(super) async fn send(&self, req: Request<Bytes>) -> Result<BytesResponse, reqwest::Error> {
        let req = reqwest::Request::try_from(req)?;
        let rsp: Response<reqwest::Body> = self.client.execute(req).await?.into();
        Ok(BytesResponse::from(rsp))
    }
}

/// The HTTP client instant-acme is given: [`AcmeHttp`], with every POST body (a JWS signed
/// by instant-acme's throwaway key) re-signed by keyservice's ACME account key first.
/// There is deliberately no client that sends instant-acme's own signatures.
pub(super) struct KeyserviceSignedHttp {
    transport: AcmeHttp,
    signer: Arc<KeyserviceSigner>,
}

impl KeyserviceSignedHttp {
    pub(super) fn new(transport: AcmeHttp, signer: Arc<KeyserviceSigner>) -> Self {
        Self { transport, signer }
    }
}

impl HttpClient for KeyserviceSignedHttp {
    fn request(
        &self,
        req: Request<BodyWrapper<Bytes>>,
    ) -> Pin<Box<dyn Future<Output = Result<BytesResponse, instant_acme::Error>> + Send>> {
        let transport = self.transport.clone();
        let signer = Arc::clone(&self.signer);
        Box::pin(async move {
            let (mut parts, body) = req.into_parts();
            let mut body = match body.collect().await {
                Ok(collected) => collected.to_bytes(),
                Err(never) => match never {},
            };
            // Every ACME POST is a JWS (RFC 8555 §6.2); GET (directory) and HEAD (nonce)
            // carry none.
            if parts.method == Method::POST {
                body = Bytes::from(
                    signer
                        .resign(&body)
                        .await
                        .map_err(|e| instant_acme::Error::Other(Box::new(e)))?,
                );
                parts.headers.remove(http::header::CONTENT_LENGTH);
            }
            transport
                .send(Request::from_parts(parts, body))
                .await
                .map_err(|e| instant_acme::Error::Other(Box::new(e)))
        })
    }
}

/// Pending HTTP-01 challenges: token → key authorization.
#[derive(Clone, Default)]
pub(super) struct Http01Tokens(Arc<RwLock<HashMap<String, String>>>);

impl Http01Tokens {
    pub(super) fn insert(&self, token: &str, key_authorization: &str) {
        if let Ok(mut map) = self.0.write() {
            map.insert(token.to_owned(), key_authorization.to_owned());
        }
    }

    pub(super) fn remove(&self, token: &str) {
        if let Ok(mut map) = self.0.write() {
            map.remove(token);
        }
    }

    fn get(&self, token: &str) -> Option<String> {
        self.0.read().ok()?.get(token).cloned()
    }
}

const CHALLENGE_PREFIX: &str = "/.well-known/acme-challenge/";

fn answer(tokens: &Http01Tokens, path: &str) -> Response<Full<Bytes>> {
    let found = path
        .strip_prefix(CHALLENGE_PREFIX)
        .and_then(|token| tokens.get(token));
    let (status, body) = match found {
        Some(key_authorization) => (StatusCode::OK, key_authorization),
        None => (StatusCode::NOT_FOUND, "not found\n".to_owned()),
    };
    let mut rsp = Response::new(Full::new(Bytes::from(body)));
    *rsp.status_mut() = status;
    rsp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain"),
    );
    rsp
}

/// Serves HTTP-01 answers on `listener` until the task is dropped.
pub(super) async fn serve_http01(listener: TcpListener, tokens: Http01Tokens) {
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                tracing::warn!(error = %err, "HTTP-01 listener: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let tokens = tokens.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                let rsp = answer(&tokens, req.uri().path());
                async move { Ok::<_, Infallible>(rsp) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(tcp), service);
            match tokio::time::timeout(Duration::from_secs(30), conn).await {
                Ok(Err(err)) => tracing::debug!(%peer, error = %err, "HTTP-01 connection error"),
                Err(_) => tracing::debug!(%peer, "HTTP-01 connection timed out"),
                Ok(Ok(())) => {}
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_only_pending_tokens() {
        let tokens = Http01Tokens::default();
        tokens.insert("tok", "tok.thumb");
        let ok = answer(&tokens, "/.well-known/acme-challenge/tok");
        assert_eq!(ok.status(), StatusCode::OK);
        assert_eq!(
            answer(&tokens, "/.well-known/acme-challenge/other").status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(answer(&tokens, "/tok").status(), StatusCode::NOT_FOUND);
        tokens.remove("tok");
        assert_eq!(
            answer(&tokens, "/.well-known/acme-challenge/tok").status(),
            StatusCode::NOT_FOUND
        );
    }
}
