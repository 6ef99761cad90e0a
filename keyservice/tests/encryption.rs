//! Per-wallet AES-256-GCM: round trip, tamper detection, wallet separation, limits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keyservice_api::{KeyClient, KeyError, MAX_PLAINTEXT_LEN};
use test_support::keyservice::Env;

#[tokio::test]
async fn round_trip_and_tamper_detection() {
    let env = Env::new();
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    let w = client.create_wallet().await.unwrap();
    let other = client.create_wallet().await.unwrap();

    for msg in [&b""[..], b"x", b"hello from an action", &vec![0x5a; 4096]] {
        let ct = client.encrypt(&w.derivation_path, msg).await.unwrap();
        assert_eq!(ct.len(), 12 + msg.len() + 16);
        assert_eq!(client.decrypt(&w.derivation_path, &ct).await.unwrap(), msg);
        // Fresh nonce every time.
        assert_ne!(client.encrypt(&w.derivation_path, msg).await.unwrap(), ct);
    }

    let ct = client
        .encrypt(&w.derivation_path, b"attack at dawn")
        .await
        .unwrap();
    // Any flipped bit — nonce, body or tag — is detected.
    for i in 0..ct.len() {
        let mut bad = ct.clone();
        bad[i] ^= 0x01;
        assert!(
            matches!(
                client.decrypt(&w.derivation_path, &bad).await,
                Err(KeyError::DecryptFailed)
            ),
            "flip at {i} not detected"
        );
    }
    // Truncated by one byte, or shorter than nonce + tag.
    assert!(matches!(
        client
            .decrypt(&w.derivation_path, &ct[..ct.len() - 1])
            .await,
        Err(KeyError::DecryptFailed)
    ));
    assert!(matches!(
        client.decrypt(&w.derivation_path, &ct[..27]).await,
        Err(KeyError::InvalidArgument(_))
    ));
    // Another wallet's key does not open it.
    assert!(matches!(
        client.decrypt(&other.derivation_path, &ct).await,
        Err(KeyError::DecryptFailed)
    ));
    // The AES key is not the wallet key: AES-GCM under the exported signing key fails.
    let sk = client.export_private_key(&w.derivation_path).await.unwrap();
    let raw = ring::aead::LessSafeKey::new(
        ring::aead::UnboundKey::new(&ring::aead::AES_256_GCM, sk.expose_secret()).unwrap(),
    );
    let mut body = ct[12..].to_vec();
    let nonce = ring::aead::Nonce::try_assume_unique_for_key(&ct[..12]).unwrap();
    assert!(
        raw.open_in_place(nonce, ring::aead::Aad::empty(), &mut body)
            .is_err()
    );
}

#[tokio::test]
async fn size_limits() {
    let env = Env::new();
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    let w = client.create_wallet().await.unwrap();
    let big = vec![7u8; MAX_PLAINTEXT_LEN];
    let ct = client.encrypt(&w.derivation_path, &big).await.unwrap();
    assert_eq!(client.decrypt(&w.derivation_path, &ct).await.unwrap(), big);
    let too_big = vec![7u8; MAX_PLAINTEXT_LEN + 1];
    assert!(matches!(
        client.encrypt(&w.derivation_path, &too_big).await,
        Err(KeyError::InvalidArgument(_))
    ));
    // The connection is still fine afterwards.
    client.status().await.unwrap();
}
