//! `evidence verify --url`: a real HTTPS server (rustls) serving a simulated deployment's
//! /info, /attestation and /evidences/, fetched by the binary, which also captures the
//! served leaf certificate for rule 4, and saves the bundle with --save.

use std::process::Command;
use std::sync::Arc;

use crate::fixtures::*;
use bytes::Bytes;
use evidence::bundle::Bundle;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

pub struct Pki {
    pub ca_pem: String,
    pub leaf: rcgen::Certificate,
    leaf_key: rcgen::KeyPair,
}

fn pki() -> Pki {
    pki_for("localhost")
}

/// A CA and a leaf for `name` it issued.
pub fn pki_for(name: &str) -> Pki {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec![name.to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    Pki {
        ca_pem: ca.pem(),
        leaf,
        leaf_key,
    }
}

/// Serves `bundle` over HTTPS on 127.0.0.1 at a port chosen now; stops when the runtime ends.
pub async fn serve(bundle: Bundle, pki: &Pki) -> u16 {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(pki.leaf.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pki.leaf_key.serialize_der())),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let bundle = Arc::new(bundle);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let bundle = bundle.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service =
                    hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                        let bundle = bundle.clone();
                        async move {
                            Ok::<_, std::convert::Infallible>(route(&bundle, req.uri().path()))
                        }
                    });
                let _ = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                .await;
            });
        }
    });
    port
}

fn route(b: &Bundle, path: &str) -> Response<Full<Bytes>> {
    let body = match path {
        "/info" => b.info.as_ref().map(|v| v.to_string().into_bytes()),
        "/attestation" => b.attestation.as_ref().map(|v| v.to_string().into_bytes()),
        "/evidences/" => Some(
            b.evidence_files
                .keys()
                .map(|n| format!("<a href=\"{n}\">{n}</a><br>\n"))
                .collect::<String>()
                .into_bytes(),
        ),
        p => p
            .strip_prefix("/evidences/")
            .and_then(|n| b.evidence_files.get(n).cloned()),
    };
    match body {
        Some(b) => Response::new(Full::new(Bytes::from(b))),
        None => {
            let mut r = Response::new(Full::new(Bytes::from_static(b"not found")));
            *r.status_mut() = StatusCode::NOT_FOUND;
            r
        }
    }
}

/// Runs the `evidence` binary; its exit code and its stdout followed by its stderr.
pub fn verify(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_evidence"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn online_verification_fetches_everything_and_checks_the_served_certificate() {
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let ca = ca.to_str().unwrap().to_owned();

    // The published certificate is the one served: every check with input passes.
    let good = simulated_bundle_with_cert(&pki.leaf, "localhost").await;
    let port = serve(good, &pki).await;
    let url = format!("https://localhost:{port}");
    let saved = dir.path().join("saved");
    let saved_s = saved.to_str().unwrap().to_owned();
    let (code, out) = tokio::task::spawn_blocking({
        let (url, ca, saved_s) = (url.clone(), ca.clone(), saved_s.clone());
        move || {
            verify(&[
                "verify",
                "--url",
                &url,
                "--ca-file",
                &ca,
                "--allow-simulated",
                "--skip",
                "acme-caa",
                // This server serves a fixed bundle: it ignores the nonce.
                "--allow-stale",
                "--save",
                &saved_s,
            ])
        }
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("PASS  tls-certificate"), "{out}");
    assert!(out.contains("PASS  report-data"), "{out}");
    assert!(
        out.contains("SKIP  freshness           stale quote accepted on request"),
        "{out}"
    );

    // The saved bundle verifies offline the same way, leaf included.
    let (code, out) = verify(&["verify", "--bundle", &saved_s, "--allow-simulated"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("PASS  tls-certificate"), "{out}");
    assert_eq!(
        std::fs::read_to_string(saved.join("domain.txt")).unwrap(),
        "localhost"
    );

    // A deployment publishing a different certificate than it serves fails rule 4.
    let other = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let mismatched = simulated_bundle_with_cert(&other.cert, "localhost").await;
    let port = serve(mismatched, &pki).await;
    let url = format!("https://localhost:{port}");
    let (code, out) = tokio::task::spawn_blocking(move || {
        verify(&[
            "verify",
            "--url",
            &url,
            "--ca-file",
            &ca,
            "--allow-simulated",
            "--skip",
            "acme-caa",
        ])
    })
    .await
    .unwrap();
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAIL  tls-certificate"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_server_certificate_is_an_error() {
    let pki = pki();
    let port = serve(
        simulated_bundle_with_cert(&pki.leaf, "localhost").await,
        &pki,
    )
    .await;
    let url = format!("https://localhost:{port}");
    let (code, out) = tokio::task::spawn_blocking(move || verify(&["verify", "--url", &url]))
        .await
        .unwrap();
    assert_eq!(code, 2, "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_the_server_does_not_serve_fails_its_check_by_name() {
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let ca = ca.to_str().unwrap().to_owned();
    let mut b = simulated_bundle_with_cert(&pki.leaf, "localhost").await;
    b.evidence_files.remove("quote.json");
    let port = serve(b, &pki).await;
    let url = format!("https://localhost:{port}");
    let (code, out) = tokio::task::spawn_blocking(move || {
        verify(&[
            "verify",
            "--url",
            &url,
            "--ca-file",
            &ca,
            "--allow-simulated",
            "--skip",
            "acme-caa",
        ])
    })
    .await
    .unwrap();
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAIL  report-data") && out.contains("no evidences/quote.json"),
        "{out}"
    );
    assert!(
        out.contains("NOT verified: failed checks: report-data, freshness\n"),
        "{out}"
    );
}
