//! A TCP forwarder that a test can stall, as when a network path starts dropping every
//! packet. While the forwarder is stalled, no byte moves in either direction on any
//! connection. The connections stay open, because nothing tells either end that the path
//! is gone. A connection opened during the stall is accepted but reaches nothing.
//! [`Stall::heal`] resumes every connection where it stopped, as a network that comes
//! back does.

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running forwarder from a loopback port to `127.0.0.1:upstream` (stopped when
/// dropped: its connections then close).
pub struct Stall {
    /// Where clients connect instead of the upstream.
    pub port: u16,
    stalled: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Stall {
    /// Forwards a free loopback port to `upstream` (not stalled).
    pub async fn start(upstream: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (stalled, watching) = watch::channel(false);
        let task = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let mut watching = watching.clone();
                tokio::spawn(async move {
                    // A path that drops packets does not even complete a handshake.
                    if watching.wait_for(|stalled| !*stalled).await.is_err() {
                        return;
                    }
                    let Ok(outbound) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                        return;
                    };
                    let _ = inbound.set_nodelay(true);
                    let _ = outbound.set_nodelay(true);
                    let (from_client, to_client) = inbound.into_split();
                    let (from_server, to_server) = outbound.into_split();
                    tokio::join!(
                        pump(from_client, to_server, watching.clone()),
                        pump(from_server, to_client, watching),
                    );
                });
            }
        });
        Self {
            port,
            stalled,
            task,
        }
    }

    /// Stops every byte, on every connection, until [`Stall::heal`].
    pub fn stall(&self) {
        self.stalled.send_replace(true);
    }

    /// Lets the held bytes and every later one through.
    pub fn heal(&self) {
        self.stalled.send_replace(false);
    }
}

impl Drop for Stall {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies `from` to `to`, holding whatever arrives while stalled until the stall ends.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut watching: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        if watching.wait_for(|stalled| !*stalled).await.is_err() {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
