//! The ACME account key through the socket: keyservice derives it from the root (the same
//! key after a restart, another key on another root), answers its public key, signs JWS
//! signing inputs with it (ES256, fixed-size `r ‖ s`, verifiable under that public key)
//! and nothing else, and exports it through no operation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use keyservice_api::protocol::{MAX_ACME_SIGNING_INPUT_LEN, Request};
use keyservice_api::{ErrorCode, KeyClient, KeyError};
use ring::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};
use test_support::keyservice::Env;

/// `BASE64URL(header) '.' BASE64URL(payload)`.
fn signing_input(header: &str, payload: &str) -> Vec<u8> {
    format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header),
        URL_SAFE_NO_PAD.encode(payload)
    )
    .into_bytes()
}

#[tokio::test]
async fn the_account_key_is_stable_across_restarts_and_its_signatures_verify() {
    let env = Env::new();
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    let point = client.acme_account_public_key().await.unwrap();
    assert_eq!(point[0], 0x04, "uncompressed P-256 point");
    // Not one of the TLS keys of the same root.
    for index in 0..3 {
        let spki = client.tls_public_key(index).await.unwrap();
        assert_ne!(&spki[26..], point.as_slice(), "TLS key {index}");
    }

    let public = UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point);
    let new_account = signing_input(
        r#"{"alg":"ES256","jwk":{"crv":"P-256","kty":"EC","x":"x","y":"y"},"nonce":"n","url":"https://ca.test/new-acct"}"#,
        r#"{"termsOfServiceAgreed":true}"#,
    );
    let sig = client.acme_account_sign(&new_account).await.unwrap();
    assert_eq!(sig.len(), 64);
    public.verify(&new_account, &sig).unwrap();
    // A POST-as-GET (empty payload) under the account URL.
    let post_as_get = signing_input(
        r#"{"alg":"ES256","kid":"https://ca.test/acct/1","nonce":"m","url":"https://ca.test/order/1"}"#,
        "",
    );
    let sig = client.acme_account_sign(&post_as_get).await.unwrap();
    public.verify(&post_as_get, &sig).unwrap();
    assert!(public.verify(&new_account, &sig).is_err());

    // Derived from the root: the same key after a restart, signing for the same point.
    drop(client);
    drop(ks);
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    assert_eq!(client.acme_account_public_key().await.unwrap(), point);
    let sig = client.acme_account_sign(&new_account).await.unwrap();
    public.verify(&new_account, &sig).unwrap();

    // Another root, another account key.
    let other_env = Env::new();
    let other = other_env.start();
    let other_client = KeyClient::connect(&other.socket).await.unwrap();
    assert_ne!(other_client.acme_account_public_key().await.unwrap(), point);
}

/// The account key is no general-purpose P-256 signer: keyservice signs only JWS signing
/// inputs whose header says ES256, of bounded size.
#[tokio::test]
async fn only_bounded_jws_signing_inputs_are_signed() {
    let env = Env::new();
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    for (input, why) in [
        (
            b"TLS 1.3, server CertificateVerify\0hash".to_vec(),
            "not a JWS",
        ),
        (signing_input(r#"{"alg":"RS256","kid":"k"}"#, "{}"), "ES256"),
        (signing_input(r#"{"kid":"k"}"#, "{}"), "ES256"),
        (signing_input("[1,2]", "{}"), "JSON object"),
        (
            [signing_input(r#"{"alg":"ES256"}"#, "{}"), b".e30".to_vec()].concat(),
            "not a JWS",
        ),
    ] {
        match client.acme_account_sign(&input).await {
            Err(KeyError::InvalidArgument(message)) => {
                assert!(message.contains(why), "{message}")
            }
            other => panic!("{}: {other:?}", String::from_utf8_lossy(&input)),
        }
    }
    // Size: refused by the client, and by keyservice if a client sends it anyway.
    let mut huge = signing_input(r#"{"alg":"ES256","kid":"k"}"#, "");
    huge.extend(std::iter::repeat_n(b'A', MAX_ACME_SIGNING_INPUT_LEN));
    assert!(matches!(
        client.acme_account_sign(&huge).await,
        Err(KeyError::InvalidArgument(_))
    ));
    assert!(matches!(
        client
            .call(Request::AcmeAccountSign {
                signing_input: huge
            })
            .await,
        Err(KeyError::Rejected {
            code: ErrorCode::BadRequest,
            ..
        })
    ));
    assert!(matches!(
        client.acme_account_sign(&[]).await,
        Err(KeyError::InvalidArgument(_))
    ));
}
