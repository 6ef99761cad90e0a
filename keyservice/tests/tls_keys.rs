//! TLS certificate keys through the socket: keyservice holds them (derived from the root),
//! signs handshakes and certificates with them, exports them through no operation, and
//! quotes an evidence listing only if the certificate it names carries one of them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keyservice_api::protocol::{Request, Response};
use keyservice_api::{BlockingClient, ErrorCode, KeyClient, KeyError};
use ring::signature::{ECDSA_P256_SHA256_ASN1, UnparsedPublicKey};
use sha2::{Digest, Sha256};
use test_support::keyservice::{Env, keyservice_certificate, registered_sums};

fn refused(result: Result<impl std::fmt::Debug, KeyError>, why: &str) {
    match result {
        Err(KeyError::Rejected {
            code: ErrorCode::Refused,
            message,
        }) => assert!(message.contains(why), "{message}"),
        other => panic!("expected a refusal ({why}), got {other:?}"),
    }
}

fn listing(cert_pem: &str) -> Vec<u8> {
    format!(
        "{}  acme-account.json\n{}  cert-a.test.pem\n",
        hex::encode(Sha256::digest(b"account")),
        hex::encode(Sha256::digest(cert_pem.as_bytes()))
    )
    .into_bytes()
}

#[tokio::test]
async fn tls_keys_sign_for_their_public_key_and_survive_a_restart() {
    let env = Env::new();
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    let spki = client.tls_public_key(1).await.unwrap();
    // P-256 SubjectPublicKeyInfo: 26-byte prefix and the uncompressed point.
    assert_eq!(spki.len(), 91);
    assert_ne!(spki, client.tls_public_key(2).await.unwrap());

    let message = b"TLS 1.3, server CertificateVerify\0transcript hash".to_vec();
    let sig = client.tls_sign(1, &message).await.unwrap();
    let public = UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &spki[26..]);
    public.verify(&message, &sig).unwrap();
    // The blocking client (the one a handshake uses) reaches the same key.
    let blocking = std::sync::Arc::new(BlockingClient::new(
        &ks.socket,
        std::time::Duration::from_secs(5),
    ));
    let sign_blocking = |message: &'static [u8]| {
        let blocking = std::sync::Arc::clone(&blocking);
        tokio::task::spawn_blocking(move || blocking.tls_sign(1, message))
    };
    let sig = sign_blocking(b"other").await.unwrap().unwrap();
    public.verify(b"other", &sig).unwrap();

    // One scheme only; bounded messages.
    let other_scheme = client
        .call(Request::TlsSign {
            index: 1,
            scheme: 0x0804,
            message: message.clone(),
        })
        .await;
    assert!(
        matches!(other_scheme, Err(KeyError::InvalidArgument(ref m)) if m.contains("0x0403")),
        "{other_scheme:?}"
    );
    assert!(matches!(
        client.tls_sign(1, &vec![0; 16 * 1024 + 1]).await,
        Err(KeyError::InvalidArgument(_))
    ));

    // Derived from the root: the same key after a restart, nothing persisted beside it.
    drop(client);
    drop(ks);
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    assert_eq!(client.tls_public_key(1).await.unwrap(), spki);
    // The blocking client's pooled connection died with the old process: it reconnects.
    let sig = sign_blocking(b"after").await.unwrap().unwrap();
    public.verify(b"after", &sig).unwrap();
    match client
        .call(Request::TlsPublicKey { index: 1 })
        .await
        .unwrap()
    {
        Response::Spki(again) => assert_eq!(again, spki),
        other => panic!("{other:?}"),
    }
}

/// A front end that obtained a web-PKI certificate for a key of its own (not keyservice's)
/// gets no evidence quote naming it; one carrying keyservice's key is quoted.
#[tokio::test]
async fn evidence_quote_requires_a_certificate_carrying_a_keyservice_key() {
    let env = Env::new();
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();

    // A certificate for a key the front end generated itself.
    let foreign = rcgen::generate_simple_self_signed(vec!["a.test".to_owned()])
        .unwrap()
        .cert
        .pem();
    refused(
        client.tls_register_certificate(1, foreign.as_bytes()).await,
        "does not carry this keyservice TLS key",
    );
    refused(
        client.evidence_quote(&listing(&foreign)).await,
        "does not hold",
    );
    refused(
        client
            .fresh_evidence_quote(&listing(&foreign), [7; 32])
            .await,
        "does not hold",
    );

    // A certificate for keyservice's TLS key 1, signed by keyservice.
    let socket = ks.socket.clone();
    let ours = tokio::task::spawn_blocking(move || keyservice_certificate(&socket, 1, "a.test"))
        .await
        .unwrap();
    // Before it is registered, it is not quoted either.
    refused(
        client.evidence_quote(&listing(&ours)).await,
        "does not hold",
    );
    // It is registered only for its own key index.
    refused(
        client.tls_register_certificate(2, ours.as_bytes()).await,
        "does not carry",
    );
    let hash = client
        .tls_register_certificate(1, ours.as_bytes())
        .await
        .unwrap();
    assert_eq!(hash.to_vec(), Sha256::digest(ours.as_bytes()).to_vec());
    let quote = client.evidence_quote(&listing(&ours)).await.unwrap();
    let parsed = evidence::quote::TdxQuote::parse(&quote.quote).unwrap();
    assert_eq!(
        parsed.report.report_data[..32].to_vec(),
        Sha256::digest(listing(&ours)).to_vec()
    );

    // A listing that names ours and also a foreign certificate, or none at all, is refused.
    let mut both = listing(&ours);
    both.extend_from_slice(
        format!(
            "{}  cert-b.test.pem\n",
            hex::encode(Sha256::digest(foreign.as_bytes()))
        )
        .as_bytes(),
    );
    refused(client.evidence_quote(&both).await, "does not hold");
    let none = format!("{}  acme-account.json\n", "ab".repeat(32)).into_bytes();
    refused(client.evidence_quote(&none).await, "names no certificate");

    // Another keyservice (another root) does not hold this key: the same certificate is
    // refused there.
    let other_env = Env::new();
    let other = other_env.start();
    let other_client = KeyClient::connect(&other.socket).await.unwrap();
    refused(
        other_client
            .tls_register_certificate(1, ours.as_bytes())
            .await,
        "does not carry",
    );
    // And the helper the quote tests use produces a quotable listing.
    let sums = registered_sums(&other.socket).await;
    other_client.evidence_quote(&sums).await.unwrap();
}

/// keyservice remembers at most `MAX_REGISTERED` certificate chains (a front end cannot
/// grow its memory by registering without end): the oldest is forgotten first, so a
/// listing naming it is no longer quoted, while the most recent ones still are; a chain
/// registered again does not push another out.
#[tokio::test]
async fn registered_certificates_are_bounded_and_the_oldest_is_forgotten() {
    use keyservice::tls_keys::MAX_REGISTERED;

    let env = Env::new();
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    let socket = ks.socket.clone();
    let chains = tokio::task::spawn_blocking(move || {
        (0..=MAX_REGISTERED)
            .map(|i| keyservice_certificate(&socket, 1, &format!("n{i}.test")))
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    for chain in &chains[..MAX_REGISTERED] {
        client
            .tls_register_certificate(1, chain.as_bytes())
            .await
            .unwrap();
    }
    // Full: every one is quotable. Registering the oldest again keeps the set as it is.
    for chain in &chains[..MAX_REGISTERED] {
        client.evidence_quote(&listing(chain)).await.unwrap();
    }
    client
        .tls_register_certificate(1, chains[0].as_bytes())
        .await
        .unwrap();
    client.evidence_quote(&listing(&chains[1])).await.unwrap();

    // One more: the oldest (chains[0]) is forgotten, the rest stay.
    client
        .tls_register_certificate(1, chains[MAX_REGISTERED].as_bytes())
        .await
        .unwrap();
    refused(
        client.evidence_quote(&listing(&chains[0])).await,
        "does not hold",
    );
    for chain in &chains[1..] {
        client.evidence_quote(&listing(chain)).await.unwrap();
    }
}
