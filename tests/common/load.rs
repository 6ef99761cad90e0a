//! A closed-loop HTTPS load generator for the benchmarks: `clients` tasks, each sending
//! one request, waiting for the whole response and sending the next, for a fixed time.
//! Requests go over hyper's HTTP/1.1 client connection on tokio-rustls (ring), either
//! one keep-alive connection per client or a new TCP connection and TLS handshake per
//! request. The same client drives the appliance and the bench's bare server, so the
//! load generator's own CPU use weighs equally on both.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;

/// Where requests go: an address and a TLS configuration trusting its certificate.
#[derive(Clone)]
pub struct Target {
    pub addr: SocketAddr,
    pub tls: Arc<rustls::ClientConfig>,
}

impl Target {
    /// `addr`, trusting exactly the certificates in `pem`, offering HTTP/1.1. Clients
    /// sharing this target share one session store: reconnections resume (tickets).
    pub fn new(addr: SocketAddr, pem: &[u8]) -> Self {
        Self {
            addr,
            tls: crate::http::tls_client_config(pem, b"http/1.1"),
        }
    }

    /// The same target with session resumption off: every handshake is a full one.
    pub fn without_resumption(&self) -> Self {
        let mut tls = (*self.tls).clone();
        tls.resumption = rustls::client::Resumption::disabled();
        Self {
            addr: self.addr,
            tls: Arc::new(tls),
        }
    }
}

/// One request, sent again and again.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: Method,
    /// Path and query.
    pub path: String,
    /// Sent as `Authorization: Bearer`.
    pub key: Option<String>,
    /// Sent as `application/json` when not empty.
    pub body: Bytes,
    /// Bytes a successful response body holds (besides a 200 status).
    pub expect: Option<&'static str>,
}

impl Request {
    pub fn get(path: &str) -> Self {
        Self {
            method: Method::GET,
            path: path.to_owned(),
            key: None,
            body: Bytes::new(),
            expect: None,
        }
    }

    pub fn post(path: &str, body: &serde_json::Value) -> Self {
        Self {
            method: Method::POST,
            path: path.to_owned(),
            key: None,
            body: Bytes::from(body.to_string()),
            expect: None,
        }
    }

    pub fn with_key(mut self, key: &str) -> Self {
        self.key = Some(key.to_owned());
        self
    }

    pub fn expecting(mut self, part: &'static str) -> Self {
        self.expect = Some(part);
        self
    }

    /// The same request sent to another path.
    pub fn at(&self, path: &str) -> Self {
        Self {
            path: path.to_owned(),
            ..self.clone()
        }
    }

    fn build(&self) -> http::Request<Full<Bytes>> {
        let mut builder = http::Request::builder()
            .method(self.method.clone())
            .uri(&self.path)
            .header(header::HOST, "localhost");
        if let Some(key) = &self.key {
            builder = builder.header(header::AUTHORIZATION, format!("Bearer {key}"));
        }
        if !self.body.is_empty() {
            builder = builder.header(header::CONTENT_TYPE, "application/json");
        }
        builder.body(Full::new(self.body.clone())).unwrap()
    }

    fn accepts(&self, status: StatusCode, body: &[u8]) -> bool {
        status == StatusCode::OK
            && self.expect.is_none_or(|part| {
                body.windows(part.len())
                    .any(|window| window == part.as_bytes())
            })
    }
}

/// How clients use connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Connections {
    /// One keep-alive connection per client.
    KeepAlive,
    /// A new TCP connection and TLS handshake for every request.
    PerRequest,
}

/// What a run measured.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Requests answered as expected.
    pub requests: usize,
    /// Requests that failed or got an unexpected answer.
    pub failures: usize,
    /// TLS handshakes made, and how many of them resumed a session.
    pub handshakes: usize,
    pub resumed: usize,
    pub per_second: f64,
    pub p50: Duration,
    pub p99: Duration,
    /// The first unexpected answer or error, for the report.
    pub first_failure: Option<String>,
}

/// What one client saw.
#[derive(Default)]
struct Tally {
    latencies: Vec<Duration>,
    failures: usize,
    handshakes: usize,
    resumed: usize,
    first_failure: Option<String>,
}

/// Runs `clients` closed-loop clients sending `request` to `target` for `duration`.
pub async fn run(
    target: &Target,
    request: &Request,
    connections: Connections,
    clients: usize,
    duration: Duration,
) -> Outcome {
    run_rotating(
        target,
        std::slice::from_ref(request),
        connections,
        clients,
        duration,
    )
    .await
}

/// Like [`run`], with the requests taken in turn from `requests` across all clients
/// (the n-th request sent, by whichever client, is `requests[n % len]`): for example
/// one request per account, for many tenants served round-robin.
pub async fn run_rotating(
    target: &Target,
    requests: &[Request],
    connections: Connections,
    clients: usize,
    duration: Duration,
) -> Outcome {
    let started = Instant::now();
    let deadline = started + duration;
    let requests: Arc<[Request]> = requests.into();
    let turn = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (target, requests, turn) =
                (target.clone(), Arc::clone(&requests), Arc::clone(&turn));
            tokio::spawn(async move {
                let next = || {
                    let n = turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    &requests[n % requests.len()]
                };
                client(&target, next, connections, deadline).await
            })
        })
        .collect();
    let mut tallies = Vec::new();
    for task in tasks {
        tallies.push(task.await.unwrap());
    }
    summarize(tallies, started.elapsed())
}

/// One client's loop until `deadline`, sending the request `next` gives each time.
async fn client<'r>(
    target: &Target,
    next: impl Fn() -> &'r Request,
    connections: Connections,
    deadline: Instant,
) -> Tally {
    let mut tally = Tally::default();
    let mut sender = None;
    while Instant::now() < deadline {
        let request = next();
        let sent = Instant::now();
        match exchange(target, request, &mut sender, &mut tally).await {
            Ok(()) => tally.latencies.push(sent.elapsed()),
            Err(failure) => {
                sender = None;
                tally.failures += 1;
                tally.first_failure.get_or_insert(failure);
            }
        }
        if connections == Connections::PerRequest {
            sender = None;
        }
    }
    tally
}

/// Sends `request` once (connecting first if `sender` holds no connection) and reads
/// the whole response.
async fn exchange(
    target: &Target,
    request: &Request,
    sender: &mut Option<SendRequest<Full<Bytes>>>,
    tally: &mut Tally,
) -> Result<(), String> {
    let connection = match sender {
        Some(connection) => connection,
        None => {
            let (connection, resumed) = connect(target).await.map_err(|e| e.to_string())?;
            tally.handshakes += 1;
            tally.resumed += usize::from(resumed);
            sender.insert(connection)
        }
    };
    connection.ready().await.map_err(|e| e.to_string())?;
    let response = connection
        .send_request(request.build())
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    if request.accepts(status, &body) {
        Ok(())
    } else {
        Err(format!("{status}: {}", String::from_utf8_lossy(&body)))
    }
}

/// A new HTTP/1.1 connection over TLS; whether its handshake resumed a session.
async fn connect(
    target: &Target,
) -> Result<(SendRequest<Full<Bytes>>, bool), Box<dyn std::error::Error + Send + Sync>> {
    let tcp = TcpStream::connect(target.addr).await?;
    tcp.set_nodelay(true)?;
    let tls = tokio_rustls::TlsConnector::from(Arc::clone(&target.tls))
        .connect(ServerName::try_from("localhost")?, tcp)
        .await?;
    let resumed = tls.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
    tokio::spawn(connection);
    Ok((sender, resumed))
}

/// The clients' tallies as one outcome.
fn summarize(tallies: Vec<Tally>, elapsed: Duration) -> Outcome {
    let mut latencies = Vec::new();
    let mut outcome = Outcome::default();
    for tally in tallies {
        latencies.extend(tally.latencies);
        outcome.failures += tally.failures;
        outcome.handshakes += tally.handshakes;
        outcome.resumed += tally.resumed;
        if outcome.first_failure.is_none() {
            outcome.first_failure = tally.first_failure;
        }
    }
    latencies.sort();
    outcome.requests = latencies.len();
    outcome.per_second = latencies.len() as f64 / elapsed.as_secs_f64();
    outcome.p50 = percentile(&latencies, 0.50);
    outcome.p99 = percentile(&latencies, 0.99);
    outcome
}

/// The `q` quantile of sorted `latencies` (zero when there are none).
pub fn percentile(latencies: &[Duration], q: f64) -> Duration {
    if latencies.is_empty() {
        return Duration::ZERO;
    }
    latencies[((latencies.len() - 1) as f64 * q).round() as usize]
}

/// The benchmarks' hello-world action.
pub const HELLO_ACTION: &str = r#"async function main() { return "hello world"; }"#;

/// The benchmarks' signing action: ethers `signMessage` with the key of `p.pkpId`.
pub const SIGN_ACTION: &str = r#"async function main(p) {
    const pk = await Lit.Actions.getPrivateKey({pkpId: p.pkpId});
    return await new ethers.Wallet(pk).signMessage("hello world");
}"#;

/// `POST /core/v1/lit_action` of `code` with `js_params`, by `key`, expecting no error.
pub fn action(code: &str, js_params: serde_json::Value, key: &str) -> Request {
    let body = serde_json::json!({"code": code, "js_params": js_params});
    Request::post("/core/v1/lit_action", &body)
        .with_key(key)
        .expecting(r#""has_error":false"#)
}

/// A benchmark setting from the environment: `name` parsed as `T`, or `default` when it
/// is unset or does not parse.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
