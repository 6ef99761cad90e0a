//! The TLS accept loop: TCP → rustls → hyper (HTTP/1.1 or HTTP/2 by ALPN) → the axum
//! service, and the governance of connections (all limits from `[http]`):
//!
//! * a cap on live connections per client IP, checked at accept (over it the connection
//!   is closed before the TLS handshake);
//! * behind an L4 load balancer (`proxy_protocol_from`): a connection from a configured
//!   balancer address must start with a PROXY protocol v2 header, read under the TLS
//!   handshake's deadline; the client it names is the connection's client for the
//!   per-IP cap, the rate limits ([`ClientAddr`]) and the logs. The balancer's own
//!   address is not capped per IP (it carries every client). Any other peer's bytes go
//!   straight to TLS: no one else can name a client (`crate::proxy_protocol`);
//! * a cap on connections served at once (`max_connections`); when it is reached, the
//!   connection idle the longest is closed to make room;
//! * timeouts for the TLS handshake, for the first complete request head (whatever the
//!   protocol), for an HTTP/1 request head once begun, for an idle HTTP/1 keep-alive
//!   connection and for an HTTP/2 connection without open streams (graceful close:
//!   GOAWAY), plus HTTP/2 keep-alive pings and a cap on concurrent streams;
//! * graceful shutdown that lets in-flight requests finish.
//!
//! A connection is *idle* when it has no request in progress: none has arrived since
//! its last response body was sent. Every request also carries its connection's client
//! (`ClientAddr`: the TCP peer, or the client a balancer's header named) and the shared
//! budget of buffered request bodies (`BodyBudget`).

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http_body_util::BodyExt as _;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, TryAcquireError, watch};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::config::HttpConfig;
use crate::http::ClientAddr;
use crate::http::extract::BodyBudget;
use crate::proxy_protocol::{self, IpNet};
use crate::telemetry::metrics::Metrics;

/// How long shutdown waits for open connections before giving up on them.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The connection timeouts, from `[http]`.
#[derive(Clone, Copy, Debug)]
struct Timeouts {
    handshake: Duration,
    first_request: Duration,
    http1_idle: Duration,
    http2_idle: Duration,
    /// How long a connection asked to close gracefully may take before it is dropped.
    closing: Duration,
}

impl Timeouts {
    fn new(limits: &HttpConfig) -> Self {
        Self {
            handshake: Duration::from_millis(limits.tls_handshake_timeout_ms),
            first_request: Duration::from_millis(limits.first_request_timeout_ms),
            http1_idle: Duration::from_millis(limits.http1_idle_timeout_ms),
            http2_idle: Duration::from_millis(limits.http2_idle_timeout_ms),
            closing: Duration::from_millis(limits.header_read_timeout_ms)
                .max(Duration::from_secs(1)),
        }
    }
}

fn builder(limits: &HttpConfig) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_millis(limits.header_read_timeout_ms));
    let keep_alive = (limits.http2_keep_alive_interval_ms > 0)
        .then(|| Duration::from_millis(limits.http2_keep_alive_interval_ms));
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(keep_alive)
        .keep_alive_timeout(Duration::from_millis(limits.http2_keep_alive_timeout_ms))
        .max_concurrent_streams(limits.http2_max_concurrent_streams);
    builder
}

/// Serves `app` over TLS on `listener` until `shutdown` resolves, then drains.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    app: Router,
    limits: HttpConfig,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let builder = builder(&limits);
    let timeouts = Timeouts::new(&limits);
    let budget = BodyBudget::new(
        limits.max_buffered_body_bytes,
        Duration::from_millis(limits.body_budget_wait_ms),
    );
    let permits = Arc::new(Semaphore::new(
        limits.max_connections.min(Semaphore::MAX_PERMITS),
    ));
    let registry = Arc::new(Registry::default());
    let balancers: Arc<[IpNet]> = limits.proxy_protocol_from.clone().into();
    let (closing_tx, closing_rx) = watch::channel(false);
    tokio::pin!(shutdown);

    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    tracing::warn!(error = %err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let admission = if proxy_protocol::from_balancer(&balancers, peer.ip()) {
            // The client is known only once the header is read (in the connection's
            // task, under the handshake deadline); it is counted then.
            Admission::Balancer
        } else {
            let Some(ip_slot) = registry.admit(peer.ip(), limits.max_connections_per_ip) else {
                tracing::debug!(%peer, cap = limits.max_connections_per_ip,
                    "connection refused: this client IP has the most connections allowed");
                metrics.connection_refused("per_ip_limit");
                drop(tcp);
                continue;
            };
            Admission::Direct(ip_slot)
        };
        let permit = match Arc::clone(&permits).try_acquire_owned() {
            Ok(permit) => permit,
            Err(TryAcquireError::Closed) => break,
            Err(TryAcquireError::NoPermits) => {
                // Full: make room by closing the connection idle the longest, if any.
                registry.evict_oldest_idle();
                tokio::select! {
                    permit = Arc::clone(&permits).acquire_owned() => match permit {
                        Ok(permit) => permit,
                        Err(_) => break,
                    },
                    () = &mut shutdown => break,
                }
            }
        };
        let _ = tcp.set_nodelay(true);
        let conn = Connection {
            acceptor: acceptor.clone(),
            builder: builder.clone(),
            app: app.clone(),
            budget: budget.clone(),
            registry: Arc::clone(&registry),
            timeouts,
            closing: closing_rx.clone(),
            peer,
            max_connections_per_ip: limits.max_connections_per_ip,
            metrics: Arc::clone(&metrics),
        };
        tokio::spawn(conn.run(tcp, permit, admission));
    }

    drop(listener);
    let _ = closing_tx.send(true);
    let all = u32::try_from(limits.max_connections.min(Semaphore::MAX_PERMITS)).unwrap_or(u32::MAX);
    tokio::select! {
        _ = permits.acquire_many(all) => tracing::info!("all connections drained"),
        () = tokio::time::sleep(DRAIN_TIMEOUT) => tracing::warn!("shutdown: some connections did not drain in time"),
    }
}

/// What one connection task needs.
struct Connection {
    acceptor: TlsAcceptor,
    builder: Builder<TokioExecutor>,
    app: Router,
    budget: BodyBudget,
    registry: Arc<Registry>,
    timeouts: Timeouts,
    closing: watch::Receiver<bool>,
    /// The TCP peer (a balancer's address when the connection came through one).
    peer: SocketAddr,
    max_connections_per_ip: usize,
    metrics: Arc<Metrics>,
}

/// How a connection was let in at accept.
enum Admission {
    /// Counted against its TCP peer's IP.
    Direct(IpSlot),
    /// From a configured balancer: counted against the client its PROXY header names,
    /// once read.
    Balancer,
}

/// Why the server closes a connection on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Close {
    /// No complete request head within `first_request_timeout_ms`.
    NoFirstRequest,
    /// Idle past its protocol's idle timeout.
    Idle,
    /// Idle, and its permit is needed by a new connection.
    Evicted,
}

impl Connection {
    async fn run(self, mut tcp: TcpStream, permit: OwnedSemaphorePermit, admission: Admission) {
        let _permit = permit;
        let metrics = Arc::clone(&self.metrics);
        let _open = metrics.connection_open();
        // One deadline for the PROXY header (if any) and the TLS handshake together, so a
        // header does not extend the time a connection may take to start.
        let deadline = Instant::now() + self.timeouts.handshake;
        let (peer, _ip_slot) = match admission {
            Admission::Direct(slot) => (self.peer, slot),
            Admission::Balancer => match self.proxied_client(&mut tcp, deadline).await {
                Some(admitted) => admitted,
                None => return,
            },
        };
        // From here on `peer` is the client: every log line, the per-IP slot and the
        // requests' `ClientAddr` name it.
        let stream = match tokio::time::timeout_at(deadline, self.acceptor.accept(tcp)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(err)) => {
                tracing::debug!(%peer, error = %err, "TLS handshake failed");
                metrics.tls_handshake_failed("error");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                metrics.tls_handshake_failed("timeout");
                return;
            }
        };
        let alpn = stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        let acme_probe = alpn.as_deref() == Some(crate::tls::ACME_TLS_ALPN);
        metrics.tls_handshake(match stream.get_ref().1.handshake_kind() {
            _ if acme_probe => "acme_tls_alpn",
            Some(rustls::HandshakeKind::Resumed) => "resumed",
            _ => "full",
        });
        if acme_probe {
            // An ACME TLS-ALPN-01 validation: the handshake was the answer (RFC 8737).
            tracing::debug!(%peer, "answered an ACME TLS-ALPN-01 validation handshake");
            let mut stream = stream;
            let _ = tokio::io::AsyncWriteExt::shutdown(&mut stream).await;
            return;
        }

        let activity = Arc::new(Activity::new(alpn.as_deref() == Some(b"h2")));
        let _registered = self.registry.register(Arc::clone(&activity));
        let service = {
            let app = self.app.clone();
            let budget = self.budget.clone();
            let activity = Arc::clone(&activity);
            tower::service_fn(move |mut req: http::Request<hyper::body::Incoming>| {
                let in_flight = activity.begin(req.version() == http::Version::HTTP_2);
                req.extensions_mut().insert(ClientAddr(peer));
                req.extensions_mut().insert(budget.clone());
                let app = app.clone();
                async move {
                    let response = app.oneshot(req).await?;
                    // The request stays in progress until its response body is sent
                    // (or dropped).
                    Ok::<_, std::convert::Infallible>(response.map(move |body| {
                        Body::new(body.map_frame(move |frame| {
                            let _in_flight = &in_flight;
                            frame
                        }))
                    }))
                }
            })
        };
        let conn = self.builder.serve_connection_with_upgrades(
            TokioIo::new(stream),
            TowerToHyperService::new(service),
        );
        tokio::pin!(conn);
        let watchdog = activity.watch(self.timeouts);
        tokio::pin!(watchdog);
        let mut closing = self.closing;
        let mut close_deadline: Option<Instant> = None;
        loop {
            let deadline = close_deadline;
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(err) = result {
                        tracing::debug!(%peer, error = %err, "connection ended with an error");
                    }
                    return;
                }
                reason = &mut watchdog, if close_deadline.is_none() => {
                    match reason {
                        Close::NoFirstRequest => {
                            tracing::debug!(%peer, "closed: no request within the first-request timeout");
                            return;
                        }
                        Close::Idle => tracing::debug!(%peer, "closing an idle connection"),
                        Close::Evicted => tracing::debug!(%peer, "closing an idle connection to make room for a new one"),
                    }
                    conn.as_mut().graceful_shutdown();
                    close_deadline = Some(Instant::now() + self.timeouts.closing);
                }
                changed = closing.changed(), if close_deadline.is_none() => {
                    if changed.is_err() || *closing.borrow() {
                        conn.as_mut().graceful_shutdown();
                        close_deadline = Some(Instant::now() + DRAIN_TIMEOUT);
                    }
                }
                () = sleep_until_some(deadline) => {
                    tracing::debug!(%peer, "closed: a graceful close took too long");
                    return;
                }
            }
        }
    }
}

impl Connection {
    /// Reads the PROXY header a balancer's connection must start with, and counts the
    /// client it names against the per-IP cap: the client and its slot, or `None` when
    /// the connection is to be closed (no valid header in time, or the client at its cap).
    async fn proxied_client(
        &self,
        tcp: &mut TcpStream,
        deadline: Instant,
    ) -> Option<(SocketAddr, IpSlot)> {
        let metrics = &self.metrics;
        let balancer = self.peer;
        let header = match tokio::time::timeout_at(deadline, proxy_protocol::read_header(tcp)).await
        {
            Ok(Ok(header)) => header,
            Ok(Err(err)) => {
                tracing::debug!(%balancer, error = %err,
                        "connection refused: a balancer's connection without a valid PROXY v2 header");
                metrics.connection_refused("proxy_header");
                return None;
            }
            Err(_) => {
                tracing::debug!(%balancer, "connection refused: no PROXY v2 header in time");
                metrics.connection_refused("proxy_header");
                return None;
            }
        };
        let client = header.client(balancer);
        let Some(slot) = self
            .registry
            .admit(client.ip(), self.max_connections_per_ip)
        else {
            tracing::debug!(peer = %client, %balancer, cap = self.max_connections_per_ip,
                "connection refused: this client IP has the most connections allowed");
            metrics.connection_refused("per_ip_limit");
            return None;
        };
        tracing::debug!(peer = %client, %balancer, "connection through a load balancer");
        Some((client, slot))
    }
}

async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// The request activity of one connection, for its idle timeouts and eviction.
struct Activity {
    id: AtomicU64,
    in_flight: AtomicUsize,
    requests: AtomicU64,
    http2: AtomicBool,
    /// When the connection last became idle (or was established).
    idle_since: Mutex<Instant>,
    changed: Notify,
    evict: Notify,
}

/// A request in progress; the connection is idle again when the last one is dropped.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        if activity.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            *activity
                .idle_since
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Instant::now();
        }
        activity.changed.notify_one();
    }
}

impl Activity {
    fn new(http2: bool) -> Self {
        Self {
            id: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            http2: AtomicBool::new(http2),
            idle_since: Mutex::new(Instant::now()),
            changed: Notify::new(),
            evict: Notify::new(),
        }
    }

    fn begin(self: &Arc<Self>, http2: bool) -> InFlight {
        if http2 {
            self.http2.store(true, Ordering::Relaxed);
        }
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.requests.fetch_add(1, Ordering::AcqRel);
        self.changed.notify_one();
        InFlight(Arc::clone(self))
    }

    fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }

    fn idle_since(&self) -> Instant {
        *self
            .idle_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Resolves when the connection should be closed: idle past its timeout, or idle
    /// and asked to make room.
    async fn watch(self: &Arc<Self>, timeouts: Timeouts) -> Close {
        loop {
            if !self.is_idle() {
                tokio::select! {
                    () = self.changed.notified() => {}
                    () = self.evict.notified() => {}
                }
                continue;
            }
            let first = self.requests.load(Ordering::Acquire) == 0;
            let timeout = if first {
                timeouts.first_request
            } else if self.http2.load(Ordering::Relaxed) {
                timeouts.http2_idle
            } else {
                timeouts.http1_idle
            };
            let since = self.idle_since();
            tokio::select! {
                () = tokio::time::sleep_until(since + timeout) => {
                    if self.is_idle() && self.idle_since() == since {
                        return if first { Close::NoFirstRequest } else { Close::Idle };
                    }
                }
                () = self.changed.notified() => {}
                () = self.evict.notified() => {
                    if self.is_idle() {
                        return if first { Close::NoFirstRequest } else { Close::Evicted };
                    }
                }
            }
        }
    }
}

/// Live connections: counts per client IP, and the established ones (for eviction).
#[derive(Default)]
struct Registry {
    per_ip: Mutex<HashMap<IpAddr, usize>>,
    live: Mutex<HashMap<u64, Arc<Activity>>>,
    next_id: AtomicU64,
}

/// One live connection of an IP, counted until dropped.
struct IpSlot {
    registry: Arc<Registry>,
    ip: IpAddr,
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        let mut per_ip = self
            .registry
            .per_ip
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = per_ip.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                per_ip.remove(&self.ip);
            }
        }
    }
}

/// An established connection, listed for eviction until dropped.
struct Registered {
    registry: Arc<Registry>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.registry
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
    }
}

impl Registry {
    /// Counts a new connection from `ip`, unless it already has `cap`.
    fn admit(self: &Arc<Self>, ip: IpAddr, cap: usize) -> Option<IpSlot> {
        let mut per_ip = self.per_ip.lock().unwrap_or_else(PoisonError::into_inner);
        let count = per_ip.entry(ip).or_insert(0);
        if *count >= cap {
            return None;
        }
        *count += 1;
        Some(IpSlot {
            registry: Arc::clone(self),
            ip,
        })
    }

    fn register(self: &Arc<Self>, activity: Arc<Activity>) -> Registered {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        activity.id.store(id, Ordering::Relaxed);
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, activity);
        Registered {
            registry: Arc::clone(self),
            id,
        }
    }

    /// Asks the connection idle the longest to close; false when none is idle.
    fn evict_oldest_idle(&self) -> bool {
        let live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        let oldest = live
            .values()
            .filter(|a| a.is_idle())
            .min_by_key(|a| (a.idle_since(), a.id.load(Ordering::Relaxed)));
        match oldest {
            Some(activity) => {
                activity.evict.notify_one();
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_ip_slots_are_counted_and_returned() {
        let registry = Arc::new(Registry::default());
        let ip: IpAddr = [127, 0, 0, 1].into();
        let other: IpAddr = [127, 0, 0, 2].into();
        let a = registry.admit(ip, 2).unwrap();
        let _b = registry.admit(ip, 2).unwrap();
        assert!(registry.admit(ip, 2).is_none(), "over the cap");
        assert!(
            registry.admit(other, 2).is_some(),
            "another IP has its own count"
        );
        drop(a);
        assert!(
            registry.admit(ip, 2).is_some(),
            "a closed connection frees its slot"
        );
    }

    fn timeouts(first: u64, h1: u64, h2: u64) -> Timeouts {
        Timeouts {
            handshake: Duration::from_secs(1),
            first_request: Duration::from_millis(first),
            http1_idle: Duration::from_millis(h1),
            http2_idle: Duration::from_millis(h2),
            closing: Duration::from_secs(1),
        }
    }

    /// Runs `watch` and checks it ended with `expected` no sooner than `at_least` (and
    /// not absurdly later).
    async fn closes(activity: &Arc<Activity>, t: Timeouts, expected: Close, at_least: u64) {
        let start = Instant::now();
        let got = tokio::time::timeout(Duration::from_secs(10), activity.watch(t))
            .await
            .expect("the watchdog never fired");
        let took = start.elapsed();
        assert_eq!(got, expected);
        assert!(
            took >= Duration::from_millis(at_least),
            "{expected:?} after {took:?}"
        );
        assert!(
            took < Duration::from_millis(at_least + 5_000),
            "{expected:?} after {took:?}"
        );
    }

    #[tokio::test]
    async fn idle_timeouts_follow_requests_and_protocol() {
        let t = timeouts(300, 200, 600);
        let activity = Arc::new(Activity::new(false));
        closes(&activity, t, Close::NoFirstRequest, 300).await;

        // A request in progress keeps the connection open past every timeout.
        let request = activity.begin(false);
        let busy = tokio::time::timeout(Duration::from_millis(900), activity.watch(t)).await;
        assert!(busy.is_err(), "closed with a request in progress");
        drop(request);
        closes(&activity, t, Close::Idle, 200).await;

        let h2 = Arc::new(Activity::new(false));
        drop(h2.begin(true));
        closes(&h2, t, Close::Idle, 600).await;
    }

    /// A TLS connection from `source` to `server`, after writing `prefix` (a PROXY
    /// header, or nothing) on the TCP connection.
    async fn tls_from(
        source: [u8; 4],
        server: SocketAddr,
        prefix: &[u8],
        pem: &str,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
        use rustls_pki_types::CertificateDer;
        use rustls_pki_types::pem::PemObject as _;
        use tokio::io::AsyncWriteExt as _;
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(SocketAddr::from((source, 0)))?;
        let mut tcp = socket.connect(server).await?;
        tcp.write_all(prefix).await?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
        tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
    }

    /// GET / over TLS as [`tls_from`] connects: the response's body, or why there is none.
    async fn get_from(
        source: [u8; 4],
        server: SocketAddr,
        prefix: &[u8],
        pem: &str,
    ) -> std::io::Result<String> {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let mut tls = tls_from(source, server, prefix, pem).await?;
        tls.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await?;
        let mut response = Vec::new();
        // The server may close without close_notify after the body: what was read counts.
        let _ = tls.read_to_end(&mut response).await;
        let text = String::from_utf8_lossy(&response).into_owned();
        match text.split_once("\r\n\r\n") {
            Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_owned()),
            _ => Err(std::io::Error::other(format!("no 200 answer: {text:?}"))),
        }
    }

    /// A PROXY v2 header (PROXY, TCP over IPv4) naming `client`.
    fn proxy_header(client: SocketAddr, server: SocketAddr) -> Vec<u8> {
        let (SocketAddr::V4(src), SocketAddr::V4(dst)) = (client, server) else {
            unreachable!("IPv4 only")
        };
        let mut out = proxy_protocol::SIGNATURE.to_vec();
        out.extend_from_slice(&[0x21, 0x11, 0, 12]);
        out.extend_from_slice(&src.ip().octets());
        out.extend_from_slice(&dst.ip().octets());
        out.extend_from_slice(&src.port().to_be_bytes());
        out.extend_from_slice(&dst.port().to_be_bytes());
        out
    }

    #[tokio::test]
    async fn only_a_configured_balancer_names_the_client_and_it_must() {
        // A plain rustls server configuration (crate::tls's holds the keyservice's key).
        let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let pem = generated.cert.pem();
        let key = rustls_pki_types::PrivateKeyDer::try_from(generated.signing_key.serialize_der())
            .unwrap();
        let mut config =
            ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(vec![generated.cert.der().clone()], key)
                .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let tls = Arc::new(config);
        // The handler answers with the client address the request carries.
        let app = Router::new().route(
            "/",
            axum::routing::get(|req: axum::extract::Request| async move {
                req.extensions()
                    .get::<ClientAddr>()
                    .map(|c| c.0.to_string())
                    .unwrap_or_default()
            }),
        );
        let limits = HttpConfig {
            proxy_protocol_from: vec!["127.0.0.5".parse().unwrap()],
            max_connections_per_ip: 1,
            tls_handshake_timeout_ms: 2_000,
            ..HttpConfig::default()
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let metrics = Arc::new(Metrics::new());
        let task = tokio::spawn(serve(listener, tls, app, limits, metrics, async {
            let _ = stopped.await;
        }));
        let client: SocketAddr = "192.0.2.7:40000".parse().unwrap();
        let header = proxy_header(client, server);

        // From the balancer, with a header: the request's client is the one it names.
        let body = get_from([127, 0, 0, 5], server, &header, &pem)
            .await
            .unwrap();
        assert_eq!(body, "192.0.2.7:40000");
        // From the balancer without one (a bare ClientHello, or garbage): refused.
        assert!(get_from([127, 0, 0, 5], server, &[], &pem).await.is_err());
        assert!(
            get_from(
                [127, 0, 0, 5],
                server,
                b"PROXY TCP4 192.0.2.7 127.0.0.1 1 2\r\n",
                &pem
            )
            .await
            .is_err(),
            "the text v1 form is not accepted"
        );
        // A balancer that sends nothing is closed at the handshake deadline.
        let silent = tokio::net::TcpSocket::new_v4().unwrap();
        silent.bind(SocketAddr::from(([127, 0, 0, 5], 0))).unwrap();
        let mut silent = silent.connect(server).await.unwrap();
        let mut byte = [0u8; 1];
        let closed = tokio::time::timeout(
            Duration::from_secs(8),
            tokio::io::AsyncReadExt::read(&mut silent, &mut byte),
        )
        .await;
        assert!(
            matches!(closed, Ok(Ok(0) | Err(_))),
            "a silent balancer connection was kept: {closed:?}"
        );
        // Anyone else: the header is not read, so the handshake fails; without it the
        // client is its own TCP address.
        assert!(
            get_from([127, 0, 0, 2], server, &header, &pem)
                .await
                .is_err()
        );
        let body = get_from([127, 0, 0, 3], server, &[], &pem).await.unwrap();
        assert!(body.starts_with("127.0.0.3:"), "{body}");
        // The per-IP cap (1 here) counts the named client, not the balancer: while one
        // client holds a connection through the balancer, a second connection naming it
        // is refused and another client is served.
        let holder = proxy_header("192.0.2.8:1".parse().unwrap(), server);
        let held = tls_from([127, 0, 0, 5], server, &holder, &pem)
            .await
            .unwrap();
        assert!(
            get_from([127, 0, 0, 5], server, &holder, &pem)
                .await
                .is_err(),
            "a second connection of 192.0.2.8 over the cap of 1"
        );
        let other = proxy_header("198.51.100.9:1".parse().unwrap(), server);
        let body = get_from([127, 0, 0, 5], server, &other, &pem)
            .await
            .unwrap();
        assert_eq!(body, "198.51.100.9:1");
        drop(held);

        let _ = stop.send(());
        task.await.unwrap();
    }

    #[tokio::test]
    async fn the_oldest_idle_connection_is_evicted() {
        let t = timeouts(60_000, 60_000, 60_000);
        let registry = Arc::new(Registry::default());
        let busy = Arc::new(Activity::new(false));
        let _busy_reg = registry.register(Arc::clone(&busy));
        let _request = busy.begin(false);
        assert!(!registry.evict_oldest_idle(), "nothing idle to evict");

        let old = Arc::new(Activity::new(false));
        let _old_reg = registry.register(Arc::clone(&old));
        drop(old.begin(false));
        tokio::time::sleep(Duration::from_millis(20)).await;
        let young = Arc::new(Activity::new(false));
        let _young_reg = registry.register(Arc::clone(&young));
        drop(young.begin(false));

        assert!(registry.evict_oldest_idle());
        closes(&old, t, Close::Evicted, 0).await;
        let young_watch = tokio::time::timeout(Duration::from_millis(300), young.watch(t)).await;
        assert!(young_watch.is_err(), "only the oldest idle one is evicted");
    }
}
