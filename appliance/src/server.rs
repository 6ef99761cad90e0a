//! The TLS accept loop: TCP → rustls → hyper (HTTP/1.1 or HTTP/2 by ALPN) → the axum
//! service, with a connection limit, handshake and header timeouts, and graceful
//! shutdown that lets in-flight requests finish.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use crate::config::HttpConfig;
use crate::http::ClientAddr;
use tower::ServiceExt;

/// How long shutdown waits for open connections before giving up on them.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `app` over TLS on `listener` until `shutdown` resolves, then drains.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    app: Router,
    limits: HttpConfig,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(30));
    builder.http2().timer(TokioTimer::new());
    let graceful = GracefulShutdown::new();
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let handshake_timeout = Duration::from_millis(limits.tls_handshake_timeout_ms);
    tokio::pin!(shutdown);

    loop {
        let permit = tokio::select! {
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
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
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let builder = builder.clone();
        // Every request on this connection learns its peer (`ClientAddr`).
        let service = TowerToHyperService::new(app.clone().map_request(
            move |mut req: http::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(ClientAddr(peer));
                req
            },
        ));
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let _permit = permit;
            let stream = match tokio::time::timeout(handshake_timeout, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(err)) => {
                    tracing::debug!(%peer, error = %err, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            if stream.get_ref().1.alpn_protocol() == Some(crate::tls::ACME_TLS_ALPN) {
                // An ACME TLS-ALPN-01 validation: the handshake was the answer (RFC 8737).
                tracing::debug!(%peer, "answered an ACME TLS-ALPN-01 validation handshake");
                let mut stream = stream;
                let _ = tokio::io::AsyncWriteExt::shutdown(&mut stream).await;
                return;
            }
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            if let Err(err) = watcher.watch(conn).await {
                tracing::debug!(%peer, error = %err, "connection ended with an error");
            }
        });
    }

    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => tracing::info!("all connections drained"),
        () = tokio::time::sleep(DRAIN_TIMEOUT) => tracing::warn!("shutdown: some connections did not drain in time"),
    }
}
