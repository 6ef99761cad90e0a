//! Per-client limits behind an L4 load balancer (issue 33, point 6): Debian's HAProxy in
//! `mode tcp` with `send-proxy-v2`, its outgoing source bound to 127.0.0.5, in front of
//! two replicas (`e2e::replicas::Cluster`: one PostgreSQL, as deployed) configured with
//! `http.proxy_protocol_from = ["127.0.0.5"]`. Clients are told apart by binding their
//! sockets to other loopback addresses (all of 127/8 is local): 127.0.0.2, .3, .6, .7.
//!
//! * Two clients through HAProxy keep separate rate-limit budgets and separate
//!   per-IP connection caps (without the header every client would be 127.0.0.5, one
//!   bucket and one cap).
//! * A client connecting directly (not from 127.0.0.5) that sends a PROXY v2 header
//!   naming another address is refused at the TLS handshake and keeps its own (spent)
//!   budget; the balancer's address without a header is refused too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use e2e::replicas::Cluster;
use e2e::{Reply, eventually_async, read};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

const BALANCER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 5);
const PUBLIC_BURST: usize = 3;
const PER_IP_CONNECTIONS: usize = 3;

/// Debian's haproxy (`scripts/setup` installs it).
fn haproxy_binary() -> PathBuf {
    let candidates = std::env::var_os("PATH")
        .map(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("haproxy"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    candidates
        .into_iter()
        .chain([PathBuf::from("/usr/sbin/haproxy")])
        .find(|p| p.is_file())
        .expect("haproxy is required for proxy_protocol:: (scripts/setup installs Debian's haproxy as root)")
}

/// A HAProxy process balancing a loopback port over `upstreams`; killed when dropped.
struct HaProxy {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl HaProxy {
    async fn start(upstreams: &[u16]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let servers: String = upstreams
            .iter()
            .enumerate()
            .map(|(i, p)| format!("    server r{i} 127.0.0.1:{p} send-proxy-v2\n"))
            .collect();
        // `source`: the balancer's outgoing address, the one the replicas trust.
        let config = format!(
            "global\n    maxconn 512\n\n\
             defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 60s\n    timeout server 60s\n\n\
             frontend front\n    bind 127.0.0.1:{port}\n    default_backend replicas\n\n\
             backend replicas\n    balance roundrobin\n    source {BALANCER}\n{servers}"
        );
        let config_path = dir.path().join("haproxy.cfg");
        std::fs::write(&config_path, &config).unwrap();
        let log = std::fs::File::create(dir.path().join("haproxy.log")).unwrap();
        let child = Command::new(haproxy_binary())
            .arg("-db") // foreground
            .arg("-f")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start haproxy");
        let haproxy = Self { child, port, dir };
        let up = eventually_async(Duration::from_secs(10), || async {
            TcpStream::connect(("127.0.0.1", port)).await.is_ok()
        })
        .await;
        assert!(
            up,
            "haproxy did not listen on {port}; its config:\n{config}\nits log:\n{}",
            haproxy.log()
        );
        haproxy
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("haproxy.log")).unwrap_or_default()
    }
}

impl Drop for HaProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn port_of(base_url: &str) -> u16 {
    base_url.rsplit(':').next().unwrap().parse().unwrap()
}

/// An HTTPS client bound to `source` that trusts `pem` (both replicas' certificates) and
/// opens a new connection per request (so HAProxy's round robin spreads them).
fn client_from(source: Ipv4Addr, pem: &[u8]) -> reqwest::Client {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .local_address(IpAddr::V4(source))
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(30));
    for cert in reqwest::Certificate::from_pem_bundle(pem).unwrap() {
        builder = builder.add_root_certificate(cert);
    }
    builder.build().unwrap()
}

async fn get(client: &reqwest::Client, port: u16, path: &str) -> Reply {
    read(
        client
            .get(format!("https://127.0.0.1:{port}{path}"))
            .send()
            .await
            .expect("request"),
    )
    .await
}

/// A TCP connection from `source` to `port`.
async fn connect_from(source: Ipv4Addr, port: u16) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(source.into(), 0)).unwrap();
    socket
        .connect(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .unwrap()
}

/// A TLS handshake over `tcp`, after writing `prefix` (a PROXY header, or nothing).
async fn handshake(
    mut tcp: TcpStream,
    prefix: &[u8],
    tls: &Arc<rustls::ClientConfig>,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, std::io::Error> {
    if !prefix.is_empty() {
        tcp.write_all(prefix).await?;
    }
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::clone(tls));
    tokio::time::timeout(Duration::from_secs(15), connector.connect(name, tcp))
        .await
        .map_err(|_| std::io::Error::other("handshake timed out"))?
}

/// A PROXY protocol v2 header (PROXY, TCP over IPv4) naming `source` as the client,
/// laid out as the specification's "2.2. Binary header format".
fn proxy_v2_header(source: Ipv4Addr, destination: SocketAddr) -> Vec<u8> {
    let mut out = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    out.extend_from_slice(&[0x21, 0x11, 0x00, 12]);
    out.extend_from_slice(&source.octets());
    let IpAddr::V4(dst) = destination.ip() else {
        unreachable!()
    };
    out.extend_from_slice(&dst.octets());
    out.extend_from_slice(&40000u16.to_be_bytes());
    out.extend_from_slice(&destination.port().to_be_bytes());
    out
}

#[tokio::test]
async fn clients_behind_haproxy_keep_their_own_budgets_and_cannot_forge_an_address() {
    let burst = PUBLIC_BURST.to_string();
    let per_ip = PER_IP_CONNECTIONS.to_string();
    let settings = [
        ("APPLIANCE_RATE_LIMITS__ENABLED", "true"),
        ("APPLIANCE_RATE_LIMITS__PUBLIC_BURST", burst.as_str()),
        ("APPLIANCE_RATE_LIMITS__PUBLIC_PER_MINUTE", "1"),
        ("APPLIANCE_HTTP__MAX_CONNECTIONS_PER_IP", per_ip.as_str()),
        ("APPLIANCE_HTTP__PROXY_PROTOCOL_FROM", "[\"127.0.0.5\"]"),
    ];
    let Some(cluster) = Cluster::start(
        settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
    .await
    else {
        return;
    };
    let ports = [
        port_of(&cluster.a().base_url),
        port_of(&cluster.b().base_url),
    ];
    let mut pem = Vec::new();
    for dir in &cluster.dirs {
        pem.extend(std::fs::read(dir.join("tls").join("self-signed.pem")).unwrap());
    }
    let haproxy = HaProxy::start(&ports).await;
    let logs = || {
        format!(
            "haproxy:\n{}\nreplica a:\n{}\nreplica b:\n{}",
            haproxy.log(),
            cluster.a().log(),
            cluster.b().log()
        )
    };

    // 1. Rate limits. Client A (127.0.0.2) spends its public budget on both replicas
    //    (each keeps its own buckets): at most twice the burst gets through, then 429.
    let a = client_from(Ipv4Addr::new(127, 0, 0, 2), &pem);
    let mut served = 0;
    let mut refused = 0;
    for _ in 0..2 * PUBLIC_BURST + 2 {
        let reply = get(&a, haproxy.port, "/info").await;
        match reply.status.as_u16() {
            200 => served += 1,
            429 => {
                assert!(reply.headers.contains_key("retry-after"));
                refused += 1;
            }
            other => panic!("through haproxy: {other} {}\n{}", reply.text, logs()),
        }
    }
    assert!(
        (PUBLIC_BURST..=2 * PUBLIC_BURST).contains(&served) && refused >= 2,
        "client A: {served} served, {refused} refused (burst {PUBLIC_BURST} per replica)\n{}",
        logs()
    );
    // Client B (127.0.0.3), through the same balancer, still has its whole budget on
    // both replicas: a shared bucket (the balancer's address) would answer 429 here.
    let b = client_from(Ipv4Addr::new(127, 0, 0, 3), &pem);
    for i in 0..2 {
        let reply = get(&b, haproxy.port, "/info").await;
        assert_eq!(
            reply.status.as_u16(),
            200,
            "client B's request {i} after A spent its budget: {}\n{}",
            reply.text,
            logs()
        );
    }
    // And A is still refused (its buckets did not refill meanwhile).
    assert_eq!(get(&a, haproxy.port, "/info").await.status.as_u16(), 429);

    // 2. Connection caps. Client C (127.0.0.6) holds TLS connections open through
    //    HAProxy until one is refused: the cap counts C, per replica.
    let tls = e2e::http::tls_client_config(&pem, b"http/1.1");
    let c = Ipv4Addr::new(127, 0, 0, 6);
    let mut held = Vec::new();
    let mut c_refused = false;
    for _ in 0..2 * PER_IP_CONNECTIONS + 1 {
        match handshake(connect_from(c, haproxy.port).await, &[], &tls).await {
            Ok(stream) => held.push(stream),
            Err(_) => {
                c_refused = true;
                break;
            }
        }
    }
    assert!(
        c_refused && (PER_IP_CONNECTIONS..=2 * PER_IP_CONNECTIONS).contains(&held.len()),
        "client C: {} connections held, refused: {c_refused} (cap {PER_IP_CONNECTIONS} per replica)\n{}",
        held.len(),
        logs()
    );
    // Client D (127.0.0.7) is not C: it connects on both replicas while C holds its
    // connections (all of which, to the replicas, come from 127.0.0.5).
    let d = Ipv4Addr::new(127, 0, 0, 7);
    let mut d_held = Vec::new();
    for i in 0..2 {
        let stream = handshake(connect_from(d, haproxy.port).await, &[], &tls)
            .await
            .unwrap_or_else(|e| panic!("client D's connection {i}: {e}\n{}", logs()));
        d_held.push(stream);
    }
    drop(held);
    drop(d_held);

    // 3. Forgery. Client E (127.0.0.2 again, whose budget on replica a is spent) connects
    //    to replica a directly, not through the balancer.
    let direct = ports[0];
    let e = Ipv4Addr::new(127, 0, 0, 2);
    let e_client = client_from(e, &pem);
    assert_eq!(
        get(&e_client, direct, "/info").await.status.as_u16(),
        429,
        "127.0.0.2's budget on replica a is spent (control)"
    );
    // A header naming a fresh address (127.0.0.9) is not read from a non-balancer: the
    // handshake fails and no budget is gained.
    let forged = proxy_v2_header(
        Ipv4Addr::new(127, 0, 0, 9),
        SocketAddr::from(([127, 0, 0, 1], direct)),
    );
    let result = handshake(connect_from(e, direct).await, &forged, &tls).await;
    assert!(
        result.is_err(),
        "a forged PROXY header from 127.0.0.2 was accepted"
    );
    // The same connection without the header completes its handshake (the refusal above
    // is the header's doing), and the address's budget is still spent.
    handshake(connect_from(e, direct).await, &[], &tls)
        .await
        .expect("a direct client without a header");
    assert_eq!(get(&e_client, direct, "/info").await.status.as_u16(), 429);
    // A fresh direct client is served on its own address.
    let f_client = client_from(Ipv4Addr::new(127, 0, 0, 8), &pem);
    get(&f_client, direct, "/info").await.assert_ok();

    // 4. From the balancer's address the header is required: a bare TLS handshake is
    //    refused, the same handshake after a header is served.
    let bare = handshake(connect_from(BALANCER, direct).await, &[], &tls).await;
    assert!(
        bare.is_err(),
        "a connection from the balancer's address without a PROXY header was accepted"
    );
    let header = proxy_v2_header(
        Ipv4Addr::new(127, 0, 0, 10),
        SocketAddr::from(([127, 0, 0, 1], direct)),
    );
    handshake(connect_from(BALANCER, direct).await, &header, &tls)
        .await
        .unwrap_or_else(|e| panic!("a balancer's connection with a header: {e}\n{}", logs()));
}
