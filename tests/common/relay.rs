//! Men in the middle, for the attested-TLS client's tests.
//!
//! * [`Relay`]: a TLS server with its own certificate for a name (from a CA of its own,
//!   which a test may trust: "another valid certificate for the same name"), which
//!   records every decrypted byte a client sends it and forwards each request to the
//!   real deployment, optionally rewriting the answer (tampered evidence).
//! * [`Switch`]: a plain TCP forwarder whose upstream port can be changed while it runs,
//!   so that the same `https://localhost:PORT` first reaches the real deployment (end
//!   to end TLS through it) and then the relay, as after a DNS or routing change.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Rewrites an answer: `(path, body) -> body`.
pub type Tamper = Arc<dyn Fn(&str, Vec<u8>) -> Vec<u8> + Send + Sync>;

/// What a relay saw.
#[derive(Debug, Default)]
pub struct Seen {
    /// TLS handshakes that completed or were aborted by the client.
    pub connections: AtomicUsize,
    /// Decrypted bytes received from clients (HTTP).
    pub http_bytes: AtomicUsize,
    /// `METHOD path` of each request, with ` +authorization` if it carried a credential.
    pub requests: Mutex<Vec<String>>,
}

impl Seen {
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
    pub fn http_bytes(&self) -> usize {
        self.http_bytes.load(Ordering::SeqCst)
    }
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// A running relay (stopped with the test's runtime).
pub struct Relay {
    pub port: u16,
    /// PEM of the CA that issued the relay's certificate.
    pub ca_pem: String,
    pub seen: Arc<Seen>,
}

/// Counts the bytes read through it.
struct Counting<S> {
    inner: S,
    count: Arc<Seen>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Counting<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        self.count.http_bytes.fetch_add(n, Ordering::SeqCst);
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counting<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl Relay {
    /// Starts a relay presenting a certificate for `name` and forwarding to
    /// `upstream_base` through `upstream` (a client that trusts the real deployment).
    pub async fn start(
        name: &str,
        upstream: reqwest::Client,
        upstream_base: String,
        tamper: Option<Tamper>,
    ) -> Self {
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec![name.to_owned()])
            .unwrap()
            .signed_by(&leaf_key, &issuer)
            .unwrap();
        let acceptor = test_support::tls::acceptor(leaf.der().clone(), &leaf_key.serialize_der());
        Self::serve(acceptor, ca.pem(), upstream, upstream_base, tamper).await
    }

    /// As [`Relay::start`], presenting `leaf` (DER) with `key` (PKCS#8 DER): the very
    /// certificate of the deployment, as a front end that kept its key would (the
    /// relay's `ca_pem` is then empty: clients already trust that certificate).
    pub async fn start_presenting(
        leaf: Vec<u8>,
        key: &[u8],
        upstream: reqwest::Client,
        upstream_base: String,
        tamper: Option<Tamper>,
    ) -> Self {
        let acceptor = test_support::tls::acceptor(leaf.into(), key);
        Self::serve(acceptor, String::new(), upstream, upstream_base, tamper).await
    }

    async fn serve(
        acceptor: tokio_rustls::TlsAcceptor,
        ca_pem: String,
        upstream: reqwest::Client,
        upstream_base: String,
        tamper: Option<Tamper>,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Seen::default());
        let seen2 = seen.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, upstream, base, seen, tamper) = (
                    acceptor.clone(),
                    upstream.clone(),
                    upstream_base.clone(),
                    seen2.clone(),
                    tamper.clone(),
                );
                seen.connections.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let io = Counting {
                        inner: tls,
                        count: seen.clone(),
                    };
                    let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let (upstream, base, seen, tamper) =
                            (upstream.clone(), base.clone(), seen.clone(), tamper.clone());
                        async move {
                            let path = req.uri().to_string();
                            let auth = req.headers().contains_key("authorization")
                                || req.headers().contains_key("x-api-key");
                            seen.requests.lock().unwrap().push(format!(
                                "{} {path}{}",
                                req.method(),
                                if auth { " +authorization" } else { "" }
                            ));
                            let method = req.method().clone();
                            let headers = req.headers().clone();
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            let mut fwd = upstream.request(method, format!("{base}{path}"));
                            for (k, v) in &headers {
                                if k != "host" {
                                    fwd = fwd.header(k, v);
                                }
                            }
                            let rsp = fwd.body(body).send().await.unwrap();
                            let mut out = http::Response::builder().status(rsp.status().as_u16());
                            if let Some(ct) = rsp.headers().get("content-type") {
                                out = out.header("content-type", ct.as_bytes());
                            }
                            let mut body = rsp.bytes().await.unwrap().to_vec();
                            if let Some(t) = &tamper {
                                body = t(&path, body);
                            }
                            Ok::<_, Infallible>(
                                out.body(Full::new(bytes::Bytes::from(body))).unwrap(),
                            )
                        }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(hyper_util::rt::TokioIo::new(io), service)
                    .await;
                });
            }
        });
        Self { port, ca_pem, seen }
    }
}

/// A TCP forwarder on a free port to `127.0.0.1:<upstream>`, switchable at run time.
pub struct Switch {
    pub port: u16,
    upstream: Arc<AtomicU16>,
}

impl Switch {
    pub async fn start(upstream: u16) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let target = Arc::new(AtomicU16::new(upstream));
        let t = target.clone();
        tokio::spawn(async move {
            while let Ok((mut down, _)) = listener.accept().await {
                let up_port = t.load(Ordering::SeqCst);
                tokio::spawn(async move {
                    if let Ok(mut up) = tokio::net::TcpStream::connect(("127.0.0.1", up_port)).await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                    }
                });
            }
        });
        Self {
            port,
            upstream: target,
        }
    }

    /// New connections go to `127.0.0.1:<port>` from now on (open ones stay).
    pub fn route_to(&self, port: u16) {
        self.upstream.store(port, Ordering::SeqCst);
    }
}
