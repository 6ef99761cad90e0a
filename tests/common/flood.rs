//! Abuse as an attacker would try it, shared by `tests/e2e/abuse_http.rs` and the
//! `body_flood` benchmark: floods of big JSON bodies against several endpoints while
//! `/health` is polled, the appliance's peak resident memory (`VmHWM`), and raw TLS
//! connections that complete the handshake and then do what the test says.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::appliance::Appliance;

/// The unauthenticated POST endpoints (the spec's list of endpoints needing no auth).
pub const UNAUTHENTICATED_POSTS: [&str; 4] = [
    "/new_account",
    "/get_lit_action_ipfs_id",
    "/create_wallet_with_signature",
    "/add_usage_api_key_with_signature",
];

/// A process's peak resident set (`VmHWM`) and current one (`VmRSS`), in bytes.
pub fn memory_of(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |kib| kib * 1024)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// About `n` bytes of JSON: arrays nested `depth` deep holding many empty arrays, the
/// shape that costs a parser the most memory per byte.
pub fn nested_arrays(n: usize, depth: usize) -> Bytes {
    let mut body = Vec::with_capacity(n + 8);
    body.extend(std::iter::repeat_n(b'[', depth));
    while body.len() + 3 + depth < n {
        body.extend_from_slice(b"[],");
    }
    body.extend_from_slice(b"[]");
    body.extend(std::iter::repeat_n(b']', depth));
    Bytes::from(body)
}

/// `data` streamed in 64 KiB chunks (no Content-Length), without copying it.
pub fn chunked(data: Bytes) -> reqwest::Body {
    struct Chunks(Bytes);

    impl futures_core::Stream for Chunks {
        type Item = Result<Bytes, std::io::Error>;
        fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
            if self.0.is_empty() {
                return Poll::Ready(None);
            }
            let n = self.0.len().min(64 * 1024);
            Poll::Ready(Some(Ok(self.0.split_to(n))))
        }
    }

    reqwest::Body::wrap_stream(Chunks(data))
}

/// What a flood saw.
#[derive(Debug, Default)]
pub struct FloodReport {
    /// Status of every flood request (0: no response: the connection failed).
    pub statuses: BTreeMap<u16, usize>,
    /// The same, per endpoint.
    pub per_path: BTreeMap<String, BTreeMap<u16, usize>>,
    /// The appliance's `VmHWM` before and after, in bytes.
    pub peak_before: u64,
    pub peak_after: u64,
    /// `/health` latency while the flood ran: slowest, median, count, failures.
    pub health_max: Duration,
    pub health_p50: Duration,
    pub health_polls: usize,
    pub health_failures: usize,
    pub elapsed: Duration,
}

/// Sends `per_path` concurrent copies of `body` to each of `paths` (under `/core/v1`),
/// every other one streamed without a Content-Length, while `/health` is polled on its
/// own connection every 20 ms.
pub async fn flood(app: &Appliance, paths: &[&str], per_path: usize, body: Bytes) -> FloodReport {
    let (peak_before, _) = memory_of(app.pid());
    let started = Instant::now();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));

    // The probe runs on its own OS thread and runtime: the flood's clients encrypt
    // hundreds of MiB on this runtime's workers, and a probe sharing them would measure
    // the load generator's queue rather than the appliance's answer.
    let health = {
        let client = app.client_with(reqwest::Version::HTTP_11);
        let url = app.url("/health");
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let mut latencies = Vec::new();
                let mut failures = 0;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let t = Instant::now();
                    let ok = match client.get(&url).send().await {
                        Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                        Err(_) => false,
                    };
                    latencies.push(t.elapsed());
                    if !ok {
                        failures += 1;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                (latencies, failures)
            })
        })
    };

    let mut tasks = Vec::new();
    for path in paths {
        for i in 0..per_path {
            // One connection per request, as separate attackers would have.
            let client = app.client_with(reqwest::Version::HTTP_11);
            let url = app.api(path);
            let body = body.clone();
            let path = (*path).to_owned();
            tasks.push(tokio::spawn(async move {
                let req = client.post(&url).header("content-type", "application/json");
                let req = if i % 2 == 0 {
                    req.body(body)
                } else {
                    req.body(chunked(body))
                };
                let status = match req.send().await {
                    Ok(r) => {
                        let status = r.status().as_u16();
                        let _ = r.bytes().await;
                        status
                    }
                    Err(_) => 0,
                };
                (path, status)
            }));
        }
    }
    let mut report = FloodReport {
        peak_before,
        ..FloodReport::default()
    };
    for task in tasks {
        let (path, status) = task.await.unwrap();
        *report.statuses.entry(status).or_default() += 1;
        *report
            .per_path
            .entry(path)
            .or_default()
            .entry(status)
            .or_default() += 1;
    }
    report.elapsed = started.elapsed();
    // A few more polls after the flood, then stop.
    tokio::time::sleep(Duration::from_millis(200)).await;
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let (mut latencies, failures) = health.join().unwrap();
    latencies.sort();
    report.health_polls = latencies.len();
    report.health_failures = failures;
    report.health_max = latencies.last().copied().unwrap_or_default();
    report.health_p50 = latencies
        .get(latencies.len() / 2)
        .copied()
        .unwrap_or_default();
    report.peak_after = memory_of(app.pid()).0;
    report
}

/// The appliance's socket address (from its base URL).
pub fn socket_addr(app: &Appliance) -> SocketAddr {
    app.base_url
        .trim_start_matches("https://")
        .trim_end_matches('/')
        .parse()
        .unwrap()
}

/// A TLS connection to the appliance offering `alpn`, verified against its certificate.
/// Errors (refused, closed before or during the handshake) are returned.
pub async fn tls_connect(app: &Appliance, alpn: &[u8]) -> std::io::Result<TlsStream<TcpStream>> {
    let pem = std::fs::read(app.data_dir.join("tls").join("self-signed.pem")).unwrap();
    let config = crate::http::tls_client_config(&pem, alpn);
    let tcp = TcpStream::connect(socket_addr(app)).await?;
    tokio_rustls::TlsConnector::from(config)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
}

/// Reads (and discards) until the peer closes; how long that took. `None` if it was
/// still open after `limit`.
pub async fn time_to_eof<S: tokio::io::AsyncRead + Unpin>(
    stream: &mut S,
    limit: Duration,
) -> Option<Duration> {
    use tokio::io::AsyncReadExt as _;
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    let read_all = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(limit, read_all)
        .await
        .ok()
        .map(|()| started.elapsed())
}
