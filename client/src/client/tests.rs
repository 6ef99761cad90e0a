//! The client against a local TLS server whose leaf is pinned directly (the verification
//! itself is tested end to end in `tests/e2e/attested_client.rs`).

use std::sync::atomic::AtomicUsize;

use evidence::check::Report;
use tokio::io::AsyncWriteExt;

use super::*;
use crate::pinning::leaf_hash;

/// A TLS server for `localhost` that answers every request with `answer`, counting the
/// requests; returns its port, the CA file to trust, and the leaf's hash.
async fn tls_server(
    answer: String,
    requests: Arc<AtomicUsize>,
    dir: &Path,
) -> (u16, PathBuf, LeafHash) {
    let server = test_support::tls::self_signed("localhost");
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, &server.pem).unwrap();
    let leaf = leaf_hash(&server.der);
    let acceptor = server.acceptor;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let answer = answer.clone();
            let requests = requests.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                if test_support::tls::read_request_head(&mut tls)
                    .await
                    .is_none()
                {
                    return;
                }
                requests.fetch_add(1, Ordering::SeqCst);
                let _ = tls.write_all(answer.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (port, ca_file, leaf)
}

/// Puts `leaf` in force as if a verification had attested it.
fn pin(client: &Client, leaf: LeafHash) {
    let pins: std::collections::BTreeSet<LeafHash> = [leaf].into();
    client
        .inner
        .pins
        .replace(pins.clone(), std::collections::BTreeSet::new());
    client.set_current(Some(Current {
        verification: Arc::new(Verification {
            url: client.inner.base.clone(),
            report: Report {
                ok: true,
                ..Report::default()
            },
            verified_at: 0,
            compose_hash: String::new(),
            app_id: None,
            pinned_leaves: vec![hex::encode(leaf)],
            simulated: true,
            announced_next_key: None,
            pins,
            next_keys: std::collections::BTreeSet::new(),
        }),
        valid_until: Instant::now() + Duration::from_secs(3600),
    }));
}

/// A verified server that answers with a redirect: the client reports it and never
/// follows it, so the key cannot reach the place the redirect names.
#[tokio::test]
async fn a_redirect_is_reported_and_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    // Where the redirect points: a server that counts requests, trusted by the same CA
    // file would not matter, since nothing may connect to it at all.
    let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let elsewhere_port = elsewhere.local_addr().unwrap().port();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        while let Ok((_tcp, _)) = elsewhere.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
        }
    });
    let location = format!("https://localhost:{elsewhere_port}/core/v1/list_groups");
    let requests = Arc::new(AtomicUsize::new(0));
    let answer = format!(
        "HTTP/1.1 307 Temporary Redirect\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    );
    let (port, ca_file, leaf) = tls_server(answer, requests.clone(), dir.path()).await;
    let client = Client::builder(format!("https://localhost:{port}"))
        .api_key("the-key")
        .ca_file(&ca_file)
        .build()
        .unwrap();
    pin(&client, leaf);

    let err = client
        .request_bytes(
            Method::POST,
            "/core/v1/add_group",
            None,
            Some(b"{}".to_vec()),
            Credential::ApiKey,
        )
        .await
        .unwrap_err();
    match err {
        ClientError::Redirect {
            status,
            location: l,
        } => {
            assert_eq!(status, 307);
            assert_eq!(l.as_deref(), Some(location.as_str()));
        }
        other => panic!("expected Redirect, got {other:?}"),
    }
    assert_eq!(requests.load(Ordering::SeqCst), 1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        connections.load(Ordering::SeqCst),
        0,
        "the client connected to the redirect's target"
    );
    // No re-verification was attempted either: the pinned verification stays.
    assert_eq!(client.verification_count(), 0);
}

/// The same server with its leaf NOT pinned: the handshake is refused, so no request
/// (and no key) reaches it.
#[tokio::test]
async fn an_unpinned_server_gets_no_request() {
    let dir = tempfile::tempdir().unwrap();
    let requests = Arc::new(AtomicUsize::new(0));
    let answer = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n[]".to_owned();
    let (port, ca_file, _leaf) = tls_server(answer, requests.clone(), dir.path()).await;
    let client = Client::builder(format!("https://localhost:{port}"))
        .api_key("the-key")
        .ca_file(&ca_file)
        .policy(Policy {
            reverify_on_new_certificate: false,
            ..Policy::default()
        })
        .build()
        .unwrap();
    pin(&client, [7u8; 32]);
    let err = client
        .request_bytes(
            Method::GET,
            "/core/v1/list_groups",
            None,
            None,
            Credential::ApiKey,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::CertificateNotAttested { .. }),
        "{err:?}"
    );
    assert_eq!(requests.load(Ordering::SeqCst), 0);
}
