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
//! read whole and answered with `{"response":"hello world"}`, except:
//!
//! * `/sign`, answered with the ECDSA (secp256k1) signature of keccak256 of the body by a
//!   fixed key: `{"signature":"0x…"}` (r, s, v: 65 bytes);
//! * `/action`, the honest limit of the appliance's isolation model (issue 38): the body
//!   is a `lit_action` request (`{"code", "js_params"}`), run by the appliance's own
//!   sandbox (`action_runtime::sandbox::Sandbox`) in a fresh boa realm per request, but
//!   in this process, on the thread that serves the request: no worker process, no
//!   pipes, no keyservice, no accounts, no billing. The realm for a thread's next request
//!   is built after the answer, as the worker builds its next one after `done`. Host
//!   calls are answered in-process: `getPrivateKey` with the fixed key of `/sign`,
//!   `signEcdsa` by k256 with it; any other fails in JavaScript. The answer has the shape
//!   of the appliance's (`{"response", "logs", "has_error"}`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::cell::RefCell;
use std::convert::Infallible;
use std::rc::Rc;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use action_runtime::protocol::{HostRequest, ProtocolError, ReplyOutcome, RunJob};
use action_runtime::sandbox::{HostChannel, Sandbox, SandboxLimits};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, header};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use k256::ecdsa::SigningKey;
use rustls::ServerConfig;
use rustls_pki_types::PrivateKeyDer;
use serde_json::{Value, json};
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
        // The stack an action may use, as the worker's main thread (`/action`).
        .thread_stack_size(action_runtime::worker::STACK_BYTES as usize)
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
    let path = request.uri().path().to_owned();
    let body = match request.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let json = match path.as_str() {
        "/sign" => format!(r#"{{"signature":"0x{}"}}"#, signature_hex(&body)),
        "/action" => {
            let json = run_action(&body);
            // Build this thread's next realm once the answer is on its way (the task
            // runs after this one yields; on whichever thread, it prepares that
            // thread's sandbox).
            tokio::spawn(async { prepare_sandbox() });
            json
        }
        _ => HELLO.to_owned(),
    };
    let response = Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(json)))
        .unwrap();
    Ok(response)
}

/// The 65-byte signature (r, s, v = 27 + recovery id) of keccak256(`message`), in hex.
fn signature_hex(message: &[u8]) -> String {
    signed(&Keccak256::digest(message))
}

/// The 65-byte signature (r, s, v = 27 + recovery id) of a 32-byte `digest`, in hex.
fn signed(digest: &[u8]) -> String {
    let (signature, recovery) = KEY.sign_prehash_recoverable(digest).unwrap();
    let mut bytes = signature.to_bytes().to_vec();
    bytes.push(27 + recovery.to_byte());
    hex::encode(bytes)
}

thread_local! {
    /// This thread's sandbox: one fresh realm per action, built ahead of time.
    static SANDBOX: RefCell<Sandbox> = RefCell::new(Sandbox::new(SandboxLimits::default()));
}

/// Runs the action of a `lit_action` body in a fresh realm of this thread's sandbox.
fn run_action(body: &[u8]) -> String {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let job = RunJob {
        code: request["code"].as_str().unwrap_or_default().to_owned(),
        js_params: request["js_params"].clone(),
        action_cid: String::new(),
        limits: Default::default(),
    };
    let host: Rc<RefCell<dyn HostChannel>> = Rc::new(RefCell::new(InProcessHost));
    let done = SANDBOX.with(|sandbox| sandbox.borrow_mut().run(&job, host));
    let answer = match done {
        Ok(done) => json!({
            "response": if done.error.is_some() { Value::Null } else { done.response },
            "logs": done.logs,
            "has_error": done.error.is_some(),
            "error": done.error.map(|e| e.message),
        }),
        Err(err) => {
            json!({"response": null, "logs": "", "has_error": true, "error": err.to_string()})
        }
    };
    answer.to_string()
}

/// Drops this thread's spent realm and builds the next.
fn prepare_sandbox() {
    SANDBOX.with(|sandbox| {
        let _ = sandbox.borrow_mut().prepare();
    });
}

/// The host calls of `/action`, answered in this process with the fixed key.
struct InProcessHost;

impl HostChannel for InProcessHost {
    fn call(&mut self, request: HostRequest) -> Result<ReplyOutcome, ProtocolError> {
        Ok(match request {
            HostRequest::GetPrivateKey { .. } => {
                ReplyOutcome::Ok(Value::String(format!("0x{}", hex::encode(KEY.to_bytes()))))
            }
            HostRequest::SignEcdsa { to_sign, .. } => {
                match hex::decode(to_sign.trim_start_matches("0x")) {
                    Ok(digest) if digest.len() == 32 => {
                        ReplyOutcome::Ok(Value::String(format!("0x{}", signed(&digest))))
                    }
                    _ => ReplyOutcome::Err("toSign must be 32 bytes of hex".to_owned()),
                }
            }
            _ => ReplyOutcome::Err("not answered by the bare server".to_owned()),
        })
    }
}
