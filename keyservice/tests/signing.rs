//! Signatures, checked with libsecp256k1: they recover to the right address, are low-S,
//! equal libsecp256k1's own RFC 6979 signatures, and stay correct under heavy pipelining.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use alloy::consensus::SignableTransaction as _;
use keyservice_api::{KeyClient, KeyError, Payer};
use test_support::keyservice::{Env, address_of_secret, digest, libsecp_sign, recover_address};

/// The AccountConfig keyservice is told the payers may call.
const CONTRACT: [u8; 20] = [0xac; 20];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wallet_action_and_payer_signatures_recover_to_their_addresses() {
    let mut env = Env::new();
    env.run_extra
        .extend(["--account-config".into(), hex::encode(CONTRACT).into()]);
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();

    for i in 0..8u64 {
        let w = client.create_wallet().await.unwrap();
        assert_eq!(w.pkp_id, w.public_key.pkp_id());
        assert_eq!(&w.pkp_id.0[12..], &w.address.0);
        assert_eq!(
            client.wallet(&w.derivation_path).await.unwrap().address,
            w.address
        );
        let d = digest(i);
        let sig = client.sign_digest(&w.derivation_path, &d).await.unwrap();
        assert_eq!(recover_address(&d, &sig), w.address);
        // Deterministic (RFC 6979) and identical to libsecp256k1's signature.
        let key = client.export_private_key(&w.derivation_path).await.unwrap();
        assert_eq!(address_of_secret(key.expose_secret()), w.address);
        assert_eq!(sig.0, libsecp_sign(key.expose_secret(), &d));
        assert_eq!(
            client.sign_digest(&w.derivation_path, &d).await.unwrap(),
            sig
        );
    }

    let cid = "QmXoMqm4sckyYxbqarxfyfY36qj9bvmVFihXEYNqK4Uri6";
    let id = client.action_identity(cid).await.unwrap();
    let d = digest(99);
    let sig = client.action_sign_digest(cid, &d).await.unwrap();
    assert_eq!(recover_address(&d, &sig), id.address);
    let key = client.action_export_private_key(cid).await.unwrap();
    assert_eq!(address_of_secret(key.expose_secret()), id.address);
    assert_ne!(
        client
            .action_identity("QmbFMke1KXqnYyBBWxB74N4c5SBnJMVAiMNRcGu6x1AwQH")
            .await
            .unwrap()
            .address,
        id.address
    );

    // Payers sign only transactions (to a configured contract here); the signature is
    // over the transaction's signing hash and recovers to the payer.
    let payers = client.payers().await.unwrap();
    assert_eq!(payers.api.len(), 4);
    for (i, addr) in payers.api.iter().enumerate() {
        let tx = test_support::keyservice::eip1559(Some(CONTRACT), 0, vec![i as u8; 4], i as u64);
        let d = tx.signature_hash().0;
        let sig = client
            .payer_sign_transaction(
                Payer::Api(i as u32),
                &test_support::keyservice::preimage(&tx),
            )
            .await
            .unwrap();
        assert_eq!(recover_address(&d, &sig), *addr);
        assert_eq!(
            client.payer_address(Payer::Api(i as u32)).await.unwrap(),
            *addr
        );
    }
    let tx = test_support::keyservice::eip1559(Some(CONTRACT), 0, vec![], 0);
    let d = tx.signature_hash().0;
    let sig = client
        .payer_sign_transaction(Payer::Admin, &test_support::keyservice::preimage(&tx))
        .await
        .unwrap();
    assert_eq!(recover_address(&d, &sig), payers.admin);
    let mut all: Vec<_> = payers.api.clone();
    all.push(payers.admin);
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 5, "payer addresses collide");

    match client
        .payer_sign_transaction(Payer::Api(4), &test_support::keyservice::preimage(&tx))
        .await
    {
        Err(KeyError::InvalidArgument(m)) => assert!(m.contains("out of range")),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_pipelined_signatures_on_one_connection() {
    let env = Env::new();
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    let mut wallets = Vec::new();
    for _ in 0..10 {
        wallets.push(client.create_wallet().await.unwrap());
    }
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..1000u64 {
        let client = client.clone();
        let w = wallets[(i % 10) as usize];
        tasks.spawn(async move {
            let d = digest(i);
            let sig = client.sign_digest(&w.derivation_path, &d).await.unwrap();
            (d, sig, w.address)
        });
    }
    let mut n = 0;
    while let Some(r) = tasks.join_next().await {
        let (d, sig, address) = r.unwrap();
        assert_eq!(recover_address(&d, &sig), address);
        n += 1;
    }
    assert_eq!(n, 1000);
}

#[tokio::test]
async fn random_secrets() {
    let env = Env::new();
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    let a = client.random_bytes(32).await.unwrap();
    let b = client.random_bytes(32).await.unwrap();
    assert_eq!(a.len(), 32);
    assert_ne!(a.expose_secret(), b.expose_secret());
    assert_eq!(client.random_bytes(64).await.unwrap().len(), 64);
    assert_eq!(client.random_bytes(1).await.unwrap().len(), 1);
    assert!(format!("{a:?}").contains("redacted"));
    for n in [0usize, 65, 1000] {
        assert!(matches!(
            client.random_bytes(n).await,
            Err(KeyError::InvalidArgument(_))
        ));
    }
    // Create-wallet paths are random too.
    let w1 = client.create_wallet().await.unwrap();
    let w2 = client.create_wallet().await.unwrap();
    assert_ne!(w1.derivation_path, w2.derivation_path);
}
