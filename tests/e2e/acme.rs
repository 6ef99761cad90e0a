//! ACME against Debian's Pebble: issuance with TLS-ALPN-01 (answered by the appliance's
//! own TLS listener) and with HTTP-01, the served chain verifying to Pebble's root,
//! renewal (forced, and scheduled at `renew_at` of a short lifetime) swapping the
//! certificate while an HTTP/2 connection opened before it keeps working, the state
//! surviving a restart, an unreachable directory plus rejected nonces being survived with
//! backoff, and the ACME account key being keyservice's: the account Pebble knows is keyed
//! by keyservice's `AcmeAccountPublicKey`, the stored state holds no key, and an account of
//! the previous format (its key sealed, unsealed into the front end) is moved onto
//! keyservice's key, keeping its URL.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use bytes::Bytes;
use e2e::pebble::{Pebble, PebbleOptions, free_port};
use e2e::{Appliance, Launch, eventually_async, signal};
use http_body_util::{BodyExt, Empty};
use keyservice_api::{KeyClient, ServicePurpose};
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use sha2::Digest as _;

const DOMAIN: &str = "appliance.acme.test";

/// The appliance's ACME settings for `pebble` (fast retries for the tests).
fn acme_env(pebble: &Pebble, listen_port: u16, challenge: &str) -> Vec<(String, String)> {
    let mut env = pebble.appliance_env(&[DOMAIN]);
    env.extend(
        [
            ("APPLIANCE_LISTEN", format!("127.0.0.1:{listen_port}")),
            (
                "APPLIANCE_ACME__CONTACT",
                "[\"mailto:ops@acme.test\"]".to_owned(),
            ),
            ("APPLIANCE_ACME__CHALLENGE", challenge.to_owned()),
            ("APPLIANCE_ACME__REQUEST_TIMEOUT_MS", "5000".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v)),
    );
    env
}

/// A client that trusts only `root_pem` and reaches `DOMAIN` at `addr`.
fn client_for(root_pem: &str, addr: SocketAddr) -> reqwest::Client {
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(root_pem.as_bytes()).unwrap())
        .tls_built_in_root_certs(false)
        .resolve(DOMAIN, addr)
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// `/health` as seen through a client trusting the appliance's self-signed start-up
/// certificate or Pebble's root, whichever the appliance serves now.
async fn health(app: &Appliance, root_pem: Option<&str>, addr: SocketAddr) -> Option<Value> {
    let url = format!("https://{DOMAIN}:{}/health", addr.port());
    if let Some(root) = root_pem
        && let Ok(rsp) = client_for(root, addr).get(&url).send().await
    {
        return rsp.json().await.ok();
    }
    let rsp = app.client.get(app.url("/health")).send().await.ok()?;
    rsp.json().await.ok()
}

/// Waits until `/health` satisfies `check`; returns that body.
async fn wait_health(
    app: &Appliance,
    root_pem: Option<&str>,
    addr: SocketAddr,
    limit: Duration,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let start = std::time::Instant::now();
    let mut last = None;
    while start.elapsed() < limit {
        if let Some(body) = health(app, root_pem, addr).await {
            if check(&body) {
                return body;
            }
            last = Some(body);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!(
        "health never got there; last: {last:?}\nappliance log:\n{}",
        app.log()
    );
}

fn issued(body: &Value) -> u64 {
    body["acme"]["issued"].as_u64().unwrap_or(0)
}

/// An HTTP/2 connection verified against `root_pem`, with the leaf it was served.
async fn h2_connection(
    addr: SocketAddr,
    root_pem: &str,
) -> (
    hyper::client::conn::http2::SendRequest<Empty<Bytes>>,
    CertificateDer<'static>,
) {
    let config = e2e::http::tls_client_config(root_pem.as_bytes(), b"h2");
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(ServerName::try_from(DOMAIN.to_owned()).unwrap(), tcp)
        .await
        .expect("TLS handshake verified against Pebble's root");
    let leaf = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
    let (sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    (sender, leaf)
}

async fn h2_get(
    sender: &mut hyper::client::conn::http2::SendRequest<Empty<Bytes>>,
    path: &str,
) -> (u16, Value) {
    let req = http::Request::get(format!("https://{DOMAIN}{path}"))
        .body(Empty::new())
        .unwrap();
    let rsp = sender
        .send_request(req)
        .await
        .expect("request on the open connection");
    let status = rsp.status().as_u16();
    let body = rsp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&body).unwrap())
}

fn leaf_names(der: &[u8]) -> Vec<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).unwrap();
    cert.subject_alternative_name()
        .unwrap()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .map(|n| n.to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_alpn_01_issuance_forced_renewal_keeps_h2_connection_and_survives_restart() {
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // Pebble with its default 5 % nonce rejections.
    let pebble = Pebble::start(PebbleOptions {
        tls_port: port,
        http_port: free_port(),
        ..PebbleOptions::default()
    })
    .await;
    let root = pebble.root_pem().await;
    let data = tempfile::tempdir().unwrap();
    let mut app = Appliance::launch(
        data.path(),
        Launch::DevWith {
            env: acme_env(&pebble, port, "tls-alpn-01"),
        },
    )
    .await;

    // Issued: the served chain verifies against Pebble's root (and nothing else).
    let body = wait_health(&app, Some(&root), addr, Duration::from_secs(60), |b| {
        b["checks"]["acme"] == "ok" && issued(b) == 1
    })
    .await;
    let account = body["acme"]["account_uri"].as_str().unwrap().to_owned();
    assert!(
        account.starts_with(&pebble.directory_url.replace("/dir", "")),
        "{account}"
    );
    assert!(body["acme"]["last_error"].is_null());
    assert_eq!(body["status"], "ok");
    // The account key never entered the front end: the account Pebble has for keyservice's
    // ACME account key is this one, keyed by that key, and the stored state names the
    // account and the key's thumbprint only.
    let keyservice = keyservice_signer(data.path()).await;
    assert_eq!(
        account_of(&pebble, &keyservice).await.as_deref(),
        Some(account.as_str())
    );
    assert_account_document(data.path(), &account, &keyservice.thumbprint());
    let rsp = client_for(&root, addr)
        .get(format!("https://{DOMAIN}:{port}/version"))
        .send()
        .await
        .expect("the ACME certificate chains to Pebble's root");
    assert_eq!(rsp.status(), 200);
    // A new client trusting only the self-signed start-up certificate no longer connects.
    let self_signed = std::fs::read(data.path().join("tls/self-signed.pem")).unwrap();
    let stale = e2e::client_trusting(&self_signed, None);
    assert!(stale.get(app.url("/version")).send().await.is_err());

    // A long-lived HTTP/2 connection, opened under the first certificate.
    let (mut h2, first_leaf) = h2_connection(addr, &root).await;
    assert_eq!(leaf_names(&first_leaf), vec![format!("DNSName({DOMAIN})")]);
    let (status, version) = h2_get(&mut h2, "/version").await;
    assert_eq!((status, version["name"].as_str()), (200, Some("appliance")));

    // The evidence announces the key of the next certificate.
    let announced = next_key(&root, addr, port).await;

    // Forced renewal (SIGUSR1): a new certificate is served to new connections...
    signal(app.pid(), "USR1");
    let body = wait_health(&app, Some(&root), addr, Duration::from_secs(60), |b| {
        issued(b) == 2 && b["checks"]["acme"] == "ok"
    })
    .await;
    assert_eq!(body["acme"]["account_uri"].as_str(), Some(account.as_str()));
    let (mut fresh, second_leaf) = h2_connection(addr, &root).await;
    assert_ne!(first_leaf, second_leaf, "renewal swapped the certificate");
    // ...with the announced key, and the new evidence announces a fresh one.
    let used = appliance_client::evidence::bundle::spki_sha256(&second_leaf).unwrap();
    assert_eq!(
        hex::encode(used),
        announced,
        "the renewal used the announced key"
    );
    let renewed = eventually_async(Duration::from_secs(10), || async {
        next_key(&root, addr, port).await != announced
    })
    .await;
    assert!(renewed, "the evidence still announces the key now in use");
    let announced = next_key(&root, addr, port).await;
    assert_eq!(h2_get(&mut fresh, "/version").await.0, 200);
    // ...while the connection opened before it keeps working, without a restart.
    for _ in 0..3 {
        let (status, health) = h2_get(&mut h2, "/health").await;
        assert_eq!(status, 200);
        assert_eq!(health["acme"]["issued"], 2);
    }

    // No key is on disk (nor in the front end), sealed or not: the certificate documents
    // name keyservice TLS key indexes, the account document the account of keyservice's
    // ACME account key.
    for file in ["account.json", "certificate.json", "next-key.json"] {
        let text = std::fs::read_to_string(data.path().join("acme").join(file)).unwrap();
        assert!(!text.contains("PRIVATE KEY"), "{file}");
        assert!(
            !text.contains("key_pkcs8"),
            "{file}: credentials in the clear"
        );
        assert!(!text.contains("sealed"), "{file} holds a key: {text}");
        if file != "account.json" {
            let doc: Value = serde_json::from_str(&text).unwrap();
            assert!(doc["key_index"].is_u64(), "{file}: {text}");
        }
    }
    assert_account_document(data.path(), &account, &keyservice.thumbprint());

    // After a restart the stored certificate is served at once (no new issuance).
    drop((h2, fresh));
    app.terminate().await;
    let app = Appliance::launch(
        data.path(),
        Launch::DevWith {
            env: acme_env(&pebble, port, "tls-alpn-01"),
        },
    )
    .await;
    let body = wait_health(&app, Some(&root), addr, Duration::from_secs(30), |b| {
        b["checks"]["acme"] == "ok"
    })
    .await;
    assert_eq!(issued(&body), 0, "no new certificate after a restart");
    assert_eq!(body["acme"]["account_uri"].as_str(), Some(account.as_str()));
    let (_, after_restart) = h2_connection(addr, &root).await;
    assert_eq!(after_restart, second_leaf);
    // The announced key survives the restart (a client that verified before it still
    // recognises the next renewal).
    assert_eq!(next_key(&root, addr, port).await, announced);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_01_issuance_and_scheduled_renewal_of_a_short_lived_certificate() {
    let port = free_port();
    let http_port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // 24-second certificates: renewal is due after 16 s (renew_at = 2/3).
    let pebble = Pebble::start(PebbleOptions {
        tls_port: free_port(),
        http_port,
        validity_secs: Some(24),
        ..PebbleOptions::default()
    })
    .await;
    let root = pebble.root_pem().await;
    let data = tempfile::tempdir().unwrap();
    let mut env = acme_env(&pebble, port, "http-01");
    env.push((
        "APPLIANCE_ACME__HTTP01_LISTEN".into(),
        format!("127.0.0.1:{http_port}"),
    ));
    let app = Appliance::launch(data.path(), Launch::DevWith { env }).await;
    let body = wait_health(&app, Some(&root), addr, Duration::from_secs(60), |b| {
        b["checks"]["acme"] == "ok" && issued(b) == 1
    })
    .await;
    let (not_after, renew_after) = (
        body["acme"]["not_after"].as_i64().unwrap(),
        body["acme"]["renew_after"].as_i64().unwrap(),
    );
    assert!(renew_after < not_after, "{body}");
    let (mut h2, first_leaf) = h2_connection(addr, &root).await;
    // Used at once: a connection that sends no request within
    // `http.first_request_timeout_ms` (10 s) is closed, and renewal is 16 s away.
    assert_eq!(h2_get(&mut h2, "/version").await.0, 200);

    // The HTTP-01 listener answers only pending challenges.
    let rsp = reqwest::get(format!(
        "http://127.0.0.1:{http_port}/.well-known/acme-challenge/nope"
    ))
    .await
    .unwrap();
    assert_eq!(rsp.status(), 404);

    // Renewed by the schedule, before the first certificate expires.
    let body = wait_health(&app, Some(&root), addr, Duration::from_secs(40), |b| {
        issued(b) >= 2
    })
    .await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(now < not_after + 2, "renewed before expiry: {body}");
    let (_, second_leaf) = h2_connection(addr, &root).await;
    assert_ne!(first_leaf, second_leaf);
    assert_eq!(h2_get(&mut h2, "/version").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_directory_and_rejected_nonces_are_survived() {
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // A quarter of all good nonces rejected (Pebble's default is 5 %); not started yet.
    let mut pebble = Pebble::prepare(PebbleOptions {
        tls_port: port,
        http_port: free_port(),
        nonce_reject: Some(25),
        ..PebbleOptions::default()
    });
    let data = tempfile::tempdir().unwrap();
    let app = Appliance::launch(
        data.path(),
        Launch::DevWith {
            env: acme_env(&pebble, port, "tls-alpn-01"),
        },
    )
    .await;

    // The directory is unreachable: reported on /health, which stays 200 (the start-up
    // certificate is served meanwhile).
    let body = wait_health(&app, None, addr, Duration::from_secs(20), |b| {
        b["checks"]["acme"] == "failed"
    })
    .await;
    assert!(
        !body["acme"]["last_error"].as_str().unwrap_or("").is_empty(),
        "{body}"
    );
    assert_eq!(body["status"], "ok");
    // Still retrying (with backoff) a little later.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let body = wait_health(&app, None, addr, Duration::from_secs(5), |_| true).await;
    assert_eq!(body["checks"]["acme"], "failed", "{body}");

    // The CA comes up: the next retry succeeds despite the rejected nonces.
    pebble.run().await;
    let root = pebble.root_pem().await;
    let body = wait_health(&app, Some(&root), addr, Duration::from_secs(90), |b| {
        b["checks"]["acme"] == "ok" && issued(b) == 1
    })
    .await;
    assert!(body["acme"]["last_error"].is_null(), "{body}");

    // The CA goes away again: a forced renewal fails, is reported, and the current
    // certificate stays in service.
    pebble.stop_ca();
    signal(app.pid(), "USR1");
    let body = wait_health(&app, Some(&root), addr, Duration::from_secs(30), |b| {
        b["checks"]["acme"] == "failed"
    })
    .await;
    assert_eq!(issued(&body), 1);
    assert!(
        eventually_async(Duration::from_secs(5), || async {
            client_for(&root, addr)
                .get(format!("https://{DOMAIN}:{port}/version"))
                .send()
                .await
                .is_ok()
        })
        .await
    );
    // Back again (a new Pebble: new root, the old account unknown to it): the pending
    // renewal completes by itself under a new account.
    pebble.run().await;
    let root = pebble.root_pem().await;
    wait_health(&app, Some(&root), addr, Duration::from_secs(60), |b| {
        issued(b) == 2 && b["checks"]["acme"] == "ok"
    })
    .await;
}

/// An account of the previous format (`account.json` version 2: the account key sealed by
/// keyservice, which the front end unsealed for every order) is moved onto keyservice's
/// ACME account key at start: the account keeps its URL (what CAA `accounturi` records
/// name), Pebble now knows it by keyservice's key and no longer by the old one, and the
/// sealed credentials are gone from the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sealed_account_of_the_previous_format_moves_onto_keyservice_s_key() {
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let pebble = Pebble::start(PebbleOptions {
        tls_port: port,
        http_port: free_port(),
        ..PebbleOptions::default()
    })
    .await;
    let root = pebble.root_pem().await;
    let data = tempfile::tempdir().unwrap();

    // The account an earlier appliance registered with a key of its own.
    let (old, old_pkcs8) = TestSigner::generate();
    let account = register(&pebble, &old).await;
    assert_eq!(
        account_of(&pebble, &old).await.as_deref(),
        Some(account.as_str())
    );

    // Its credentials (instant-acme's format), sealed by this data directory's keyservice
    // as that appliance did, in an account document of version 2.
    let mut app = Appliance::launch(data.path(), Launch::Dev).await;
    let keys = KeyClient::connect(data.path().join("keyservice.sock"))
        .await
        .unwrap();
    let credentials = json!({
        "id": account,
        "key_pkcs8": B64URL.encode(&old_pkcs8),
        "directory": pebble.directory_url,
    });
    let sealed = keys
        .service_seal(
            ServicePurpose::AcmeAccount,
            credentials.to_string().as_bytes(),
        )
        .await
        .unwrap();
    drop(keys);
    app.terminate().await;
    std::fs::create_dir_all(data.path().join("acme")).unwrap();
    std::fs::write(
        data.path().join("acme/account.json"),
        json!({
            "version": 2,
            "directory_url": pebble.directory_url,
            "account_uri": account,
            "sealed_credentials": base64::engine::general_purpose::STANDARD.encode(sealed),
        })
        .to_string(),
    )
    .unwrap();

    let app = Appliance::launch(
        data.path(),
        Launch::DevWith {
            env: acme_env(&pebble, port, "tls-alpn-01"),
        },
    )
    .await;
    let body = wait_health(&app, Some(&root), addr, Duration::from_secs(60), |b| {
        b["checks"]["acme"] == "ok" && issued(b) == 1
    })
    .await;
    // The same account, now keyservice's.
    assert_eq!(body["acme"]["account_uri"].as_str(), Some(account.as_str()));
    let keyservice = keyservice_signer(data.path()).await;
    assert_eq!(
        account_of(&pebble, &keyservice).await.as_deref(),
        Some(account.as_str())
    );
    assert_eq!(
        account_of(&pebble, &old).await,
        None,
        "the old key no longer controls the account"
    );
    assert_account_document(data.path(), &account, &keyservice.thumbprint());
    let log = app.log();
    assert!(log.contains("moved onto keyservice's account key"), "{log}");
}

/// Signs ACME requests of the test's own: with a P-256 key the test holds (an account
/// of the previous format), or with keyservice's ACME account key (through its socket).
enum TestSigner {
    Own(EcdsaKeyPair),
    Keyservice(KeyClient, [u8; 65]),
}

impl TestSigner {
    /// A fresh key pair and its PKCS#8 document.
    fn generate() -> (Self, Vec<u8>) {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        (Self::Own(pair), pkcs8.as_ref().to_vec())
    }

    fn point(&self) -> Vec<u8> {
        match self {
            Self::Own(pair) => pair.public_key().as_ref().to_vec(),
            Self::Keyservice(_, point) => point.to_vec(),
        }
    }

    fn jwk(&self) -> Value {
        let point = self.point();
        json!({
            "crv": "P-256",
            "kty": "EC",
            "x": B64URL.encode(&point[1..33]),
            "y": B64URL.encode(&point[33..65]),
        })
    }

    /// RFC 7638: SHA-256 of the JWK's required members in lexicographic order.
    fn thumbprint(&self) -> String {
        let jwk = self.jwk();
        let canonical = format!(
            r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
            jwk["x"].as_str().unwrap(),
            jwk["y"].as_str().unwrap()
        );
        B64URL.encode(sha2::Sha256::digest(canonical.as_bytes()))
    }

    async fn sign(&self, input: &[u8]) -> Vec<u8> {
        match self {
            Self::Own(pair) => pair
                .sign(&ring::rand::SystemRandom::new(), input)
                .unwrap()
                .as_ref()
                .to_vec(),
            Self::Keyservice(keys, _) => keys.acme_account_sign(input).await.unwrap().to_vec(),
        }
    }
}

/// keyservice's ACME account key, reached through the data directory's socket.
async fn keyservice_signer(data: &std::path::Path) -> TestSigner {
    let keys = KeyClient::connect(data.join("keyservice.sock"))
        .await
        .unwrap();
    let point = keys.acme_account_public_key().await.unwrap();
    TestSigner::Keyservice(keys, point)
}

/// A newAccount request signed by `signer` (RFC 8555 §7.3), retried on rejected nonces:
/// the status, the `Location` and the body.
async fn new_account(
    pebble: &Pebble,
    signer: &TestSigner,
    payload: Value,
) -> (u16, Option<String>, Value) {
    let client = pebble.client();
    let directory: Value = client
        .get(&pebble.directory_url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let url = directory["newAccount"].as_str().unwrap();
    for _ in 0..20 {
        let nonce = client
            .head(directory["newNonce"].as_str().unwrap())
            .send()
            .await
            .unwrap()
            .headers()["replay-nonce"]
            .to_str()
            .unwrap()
            .to_owned();
        let protected = B64URL.encode(
            json!({ "alg": "ES256", "jwk": signer.jwk(), "nonce": nonce, "url": url }).to_string(),
        );
        let encoded = B64URL.encode(payload.to_string());
        let signature = signer
            .sign(format!("{protected}.{encoded}").as_bytes())
            .await;
        let rsp = client
            .post(url)
            .header("content-type", "application/jose+json")
            .body(
                json!({
                    "protected": protected,
                    "payload": encoded,
                    "signature": B64URL.encode(signature),
                })
                .to_string(),
            )
            .send()
            .await
            .unwrap();
        let status = rsp.status().as_u16();
        let location = rsp
            .headers()
            .get("location")
            .map(|l| l.to_str().unwrap().to_owned());
        let body: Value = rsp.json().await.unwrap_or(Value::Null);
        if body["type"] == "urn:ietf:params:acme:error:badNonce" {
            continue;
        }
        return (status, location, body);
    }
    panic!("Pebble rejected every nonce");
}

/// Registers `signer`'s key as a new account; its URL.
async fn register(pebble: &Pebble, signer: &TestSigner) -> String {
    let (status, location, body) = new_account(
        pebble,
        signer,
        json!({ "termsOfServiceAgreed": true, "contact": ["mailto:old@acme.test"] }),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    location.unwrap()
}

/// The URL of the account Pebble has for `signer`'s key (`onlyReturnExisting`), checking
/// that the account it answers is keyed by that key; `None` if it has none.
async fn account_of(pebble: &Pebble, signer: &TestSigner) -> Option<String> {
    let (status, location, body) =
        new_account(pebble, signer, json!({ "onlyReturnExisting": true })).await;
    if body["type"] == "urn:ietf:params:acme:error:accountDoesNotExist" {
        return None;
    }
    assert_eq!(status, 200, "{body}");
    let jwk = signer.jwk();
    assert_eq!(
        (&body["key"]["x"], &body["key"]["y"]),
        (&jwk["x"], &jwk["y"]),
        "{body}"
    );
    location
}

/// The data directory's ACME account document names `account` and the thumbprint of
/// keyservice's key, and nothing else (no key, sealed or not).
fn assert_account_document(data: &std::path::Path, account: &str, thumbprint: &str) {
    let text = std::fs::read_to_string(data.join("acme/account.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let mut fields: Vec<&str> = doc
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        ["account_uri", "directory_url", "key_thumbprint", "version"],
        "{text}"
    );
    assert_eq!(doc["version"], 3);
    assert_eq!(doc["account_uri"], account);
    assert_eq!(doc["key_thumbprint"], thumbprint);
}

/// The `spki_sha256` of the served `next-tls-key.json` (waiting up to 10 s for the
/// evidence of a new certificate to be built).
async fn next_key(root: &str, addr: SocketAddr, port: u16) -> String {
    let client = client_for(root, addr);
    let url = format!("https://{DOMAIN}:{port}/evidences/next-tls-key.json");
    for _ in 0..100 {
        let rsp = client.get(&url).send().await.unwrap();
        if rsp.status() == 200 {
            let body: Value = rsp.json().await.unwrap();
            return body["spki_sha256"].as_str().unwrap().to_owned();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no {url}");
}
