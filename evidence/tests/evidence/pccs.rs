//! Collateral from a PCCS: a local PCCS (HTTP on 127.0.0.1) answering the PCCS v4 API with
//! the near-mpc deployment's Intel-signed collateral; the client must rebuild exactly the
//! collateral dcap-qvl verifies, and `evidence verify --pccs-url` must use it.

use std::sync::Arc;

use crate::fixtures::*;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};

fn pct(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Serves the PCCS API from `c`; returns the base URL. Requests are recorded in `seen`.
async fn pccs(c: dcap_qvl::QuoteCollateralV3, seen: Arc<std::sync::Mutex<Vec<String>>>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let c = Arc::new(c);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (c, seen) = (c.clone(), seen.clone());
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                        let (c, seen) = (c.clone(), seen.clone());
                        async move {
                            let uri = req.uri().to_string();
                            seen.lock().unwrap().push(uri.clone());
                            Ok::<_, std::convert::Infallible>(answer(&c, &uri))
                        }
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    format!("http://127.0.0.1:{port}")
}

fn answer(c: &dcap_qvl::QuoteCollateralV3, uri: &str) -> Response<Full<Bytes>> {
    let path = uri.split('?').next().unwrap_or(uri);
    let (header, body): (Option<(&str, &str)>, Vec<u8>) = match path {
        "/sgx/certification/v4/pckcrl" => (
            Some(("SGX-PCK-CRL-Issuer-Chain", &c.pck_crl_issuer_chain)),
            c.pck_crl.clone(),
        ),
        "/tdx/certification/v4/tcb" => (
            Some(("TCB-Info-Issuer-Chain", &c.tcb_info_issuer_chain)),
            format!(
                r#"{{"tcbInfo":{},"signature":"{}"}}"#,
                c.tcb_info,
                hex::encode(&c.tcb_info_signature)
            )
            .into_bytes(),
        ),
        "/tdx/certification/v4/qe/identity" => (
            Some((
                "SGX-Enclave-Identity-Issuer-Chain",
                &c.qe_identity_issuer_chain,
            )),
            format!(
                r#"{{"enclaveIdentity":{},"signature":"{}"}}"#,
                c.qe_identity,
                hex::encode(&c.qe_identity_signature)
            )
            .into_bytes(),
        ),
        "/sgx/certification/v4/rootcacrl" => (None, hex::encode(&c.root_ca_crl).into_bytes()),
        _ => {
            let mut r = Response::new(Full::new(Bytes::new()));
            *r.status_mut() = StatusCode::NOT_FOUND;
            return r;
        }
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    if let Some((name, value)) = header {
        r.headers_mut().insert(name, pct(value).parse().unwrap());
    }
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collateral_fetched_from_a_pccs_verifies_the_near_mpc_quote() {
    let expected = near_collateral();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let base = pccs(expected.clone(), seen.clone()).await;
    let http = evidence::bundle::http_client(None).unwrap();
    let got = evidence::collateral::fetch_from_pccs(&base, &near_quote(), &http)
        .await
        .unwrap();
    assert_eq!(
        got.tcb_info, expected.tcb_info,
        "signed bytes kept as served"
    );
    assert_eq!(got.qe_identity, expected.qe_identity);
    assert_eq!(got.pck_crl, expected.pck_crl);
    assert_eq!(got.root_ca_crl, expected.root_ca_crl);
    assert_eq!(got.pck_crl_issuer_chain, expected.pck_crl_issuer_chain);
    // The TCB info was asked for the quote's own FMSPC (from its PCK certificate).
    let fmspc = serde_json::from_str::<serde_json::Value>(&expected.tcb_info).unwrap()["fmspc"]
        .as_str()
        .unwrap()
        .to_ascii_uppercase();
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .any(|u| u.ends_with(&format!("tcb?fmspc={fmspc}"))),
        "{:?}",
        seen.lock().unwrap()
    );
    let v = evidence::verify::verify_quote(
        &near_quote(),
        Some(&got),
        NEAR_MPC_AT,
        &evidence::verify::Policy::default(),
    )
    .unwrap();
    assert_eq!(v.status, "UpToDate");

    // The CLI with --pccs-url, on an offline bundle without collateral.
    let dir = tempfile::tempdir().unwrap();
    let mut b = near_bundle();
    b.collateral_json = None;
    b.save(dir.path()).unwrap();
    let path = dir.path().to_str().unwrap().to_owned();
    let at = NEAR_MPC_AT.to_string();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_evidence"))
            .args([
                "verify",
                "--bundle",
                &path,
                "--pccs-url",
                &base,
                "--at",
                &at,
            ])
            .args(["--skip", "report-data", "--allow-unpinned-os"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("PASS  quote"), "{stdout}");
}

#[tokio::test]
async fn an_unreachable_pccs_is_a_clear_failure() {
    let http = evidence::bundle::http_client(None).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let err = evidence::collateral::fetch_from_pccs(&base, &near_quote(), &http)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("pckcrl"), "{err}");
}
