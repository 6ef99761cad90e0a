//! The "bare server" of the `compare` benchmark: the least an HTTPS server on the
//! appliance's stack can do, as the ceiling the appliance is measured against.
//!
//! Same stack and TLS set-up as the appliance's front end (`appliance/src/tls.rs`,
//! `appliance/src/server.rs`): a multi-thread tokio runtime, rustls with the ring
//! provider and its default session storage and tickets, a self-signed ECDSA P-256
//! certificate from `rcgen::generate_simple_self_signed`, ALPN h2 and http/1.1,
//! `TCP_NODELAY`, and hyper-util's HTTP/1.1-or-2 connection builder (keep-alive).
//!
//! `bare-server PEM_OUT`: writes its certificate to `PEM_OUT`, listens on a free port of
//! 127.0.0.1 and prints its URL (`https://127.0.0.1:PORT`) on stdout. Every request is
//! read whole and answered with `{"response":"hello world"}`, except `/sign`, answered
//! with the ECDSA (secp256k1) signature of keccak256 of the body by a fixed key:
//! `{"signature":"0x…"}` (r, s, v: 65 bytes).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::convert::Infallible;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, header};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use k256::ecdsa::SigningKey;
use rustls::ServerConfig;
use rustls_pki_types::PrivateKeyDer;
use sha3::{Digest as _, Keccak256};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

const HELLO: &str = r#"{"response":"hello world"}"#;

/// The fixed signing key of `/sign`.
static KEY: LazyLock<SigningKey> =
    LazyLock::new(|| SigningKey::from_slice(&[0x42; 32]).expect("a valid scalar"));

fn main() {
    let pem_out = std::env::args_os()
        .nth(1)
        .expect("usage: bare-server PEM_OUT");
    let (tls, pem) = tls_config();
    std::fs::write(&pem_out, pem).unwrap();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(serve(tls));
}

/// The TLS configuration (as the appliance's, over a fixed certificate) and the PEM of
/// its certificate.
fn tls_config() -> (Arc<ServerConfig>, String) {
    let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    let generated = rcgen::generate_simple_self_signed(names).unwrap();
    let key = PrivateKeyDer::try_from(generated.signing_key.serialize_der()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![generated.cert.der().clone()], key)
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    (Arc::new(config), generated.cert.pem())
}

/// Accepts connections until killed.
async fn serve(tls: Arc<ServerConfig>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("https://{}", listener.local_addr().unwrap());
    let acceptor = TlsAcceptor::from(tls);
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(10));
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let (acceptor, builder) = (acceptor.clone(), builder.clone());
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(tcp).await else {
                return;
            };
            let service = hyper::service::service_fn(answer);
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Reads the request whole and answers it.
async fn answer(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let sign = request.uri().path() == "/sign";
    let body = match request.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let json = if sign {
        format!(r#"{{"signature":"0x{}"}}"#, signature_hex(&body))
    } else {
        HELLO.to_owned()
    };
    let response = Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(json)))
        .unwrap();
    Ok(response)
}

/// The 65-byte signature (r, s, v = 27 + recovery id) of keccak256(`message`), in hex.
fn signature_hex(message: &[u8]) -> String {
    let digest = Keccak256::digest(message);
    let (signature, recovery) = KEY.sign_prehash_recoverable(&digest).unwrap();
    let mut bytes = signature.to_bytes().to_vec();
    bytes.push(27 + recovery.to_byte());
    hex::encode(bytes)
}
