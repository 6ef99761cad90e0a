//! Shared-root mode (`run --shared-root`): replicas of one app that share one sealed root
//! handed over by the front end, and the `RowMac` operation. Every test runs the real
//! binary; the replicas are separate processes with separate state directories.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use keyservice_api::protocol::Request;
use keyservice_api::{
    DerivationPath, ErrorCode, KeyClient, KeyError, MAX_ROW_MAC_ITEM_LEN, MAX_ROW_MAC_ITEMS,
    NewSealedRoot, RootId, SEALED_ROOT_LEN,
};
use test_support::dstack_agent::{AgentConfig, StandInAgent};
use test_support::keyservice::{
    Env, KeyService, digest, raw_connect, raw_frame, read_raw_frame, recover_address, write_all,
};

/// A shared-root replica with its own state directory and socket, using `of`'s dev secret
/// and compose file (or its own, for the first one).
fn replica(of: Option<&Env>) -> Env {
    let mut env = Env::new();
    if let Some(first) = of {
        env.use_dev_files(&first.dev_secret, &first.compose_file);
    }
    env.shared_root();
    env
}

/// No `root.sealed*` file in the state directory (and the directory exists: it still
/// holds the payer state).
fn assert_no_root_files(env: &Env) {
    let files = env.state_files();
    assert!(
        files.iter().all(|f| !f.starts_with("root.sealed")),
        "shared-root mode wrote a root file: {files:?}"
    );
}

fn expect_no_root<T: std::fmt::Debug>(what: &str, r: Result<T, KeyError>) {
    match r {
        Err(KeyError::NoRoot(message)) => {
            assert!(message.contains("has no root yet"), "{what}: {message}");
            assert!(
                KeyError::NoRoot(message).is_unavailable(),
                "NoRoot is a 503"
            );
        }
        other => panic!("{what} before adoption: {other:?}"),
    }
}

/// Hands `blob` to a replica that must refuse it: the answer says why, and the process
/// exits non-zero saying it refuses to start; no root file appears.
async fn expect_refusal_and_exit(env: &Env, blob: &[u8], why: &str) {
    let mut ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    assert!(!client.root_status().await.unwrap().is_ready());
    match client.adopt_root(blob).await {
        Err(KeyError::Rejected { code, message }) => {
            assert_eq!(code, ErrorCode::Refused, "{message}");
            assert!(message.contains(why), "{message}");
            assert!(message.contains("refuses to start"), "{message}");
            assert!(message.contains("second root"), "{message}");
        }
        other => panic!("a blob that should not open was answered {other:?}"),
    }
    let status = ks
        .wait_exit(Duration::from_secs(10))
        .unwrap_or_else(|| panic!("still running after refusing the root: {}", ks.log_text()));
    assert!(!status.success(), "exited with {status}");
    let log = ks.log_text();
    assert!(
        log.contains("refuses to start rather than create a second root"),
        "{log}"
    );
    assert!(log.contains(why), "{log}");
    assert!(!env.socket.exists(), "socket left behind");
    assert_no_root_files(env);
}

async fn sealed_by(client: &KeyClient) -> NewSealedRoot {
    client.create_sealed_root().await.unwrap()
}

#[tokio::test]
async fn two_replicas_adopt_one_root_and_sign_alike() {
    let a_env = replica(None);
    let b_env = replica(Some(&a_env));
    // A root file in B's state directory is not even looked at (outside shared-root mode
    // this garbage would stop the start-up).
    std::fs::create_dir_all(&b_env.state_dir).unwrap();
    std::fs::write(b_env.state_dir.join("root.sealed"), b"not a root").unwrap();

    let a = a_env.start();
    let b = b_env.start();
    let ca = KeyClient::connect(&a.socket).await.unwrap();
    let cb = KeyClient::connect(&b.socket).await.unwrap();

    // Awaiting: Status (unchanged payload) and RootStatus answer, key operations do not.
    for (client, env) in [(&ca, &a_env), (&cb, &b_env)] {
        let root = client.root_status().await.unwrap();
        assert_eq!(root.compose_hash, env.compose_hash());
        assert_eq!(root.root_id, None);
        let status = client.status().await.unwrap();
        assert_eq!(status.compose_hash, env.compose_hash());
        assert_eq!(status.api_payers, 4);
    }
    let path = DerivationPath([0x5c; 32]);
    let d = digest(42);
    expect_no_root("WalletSign", ca.sign_digest(&path, &d).await);
    expect_no_root("CreateWallet", cb.create_wallet().await);
    expect_no_root("Payers", ca.payers().await);
    expect_no_root("RowMac", ca.row_macs(&[b"row".as_slice()]).await);
    expect_no_root("AttestationQuote", ca.attestation_quote().await);
    // The wire code is 11.
    let mut raw = raw_connect(&a.socket);
    let mut payload = path.0.to_vec();
    payload.extend_from_slice(&d);
    write_all(&mut raw, &raw_frame(1, 0x04, 0, 77, &payload));
    let (op, status, id, _) = read_raw_frame(&mut raw).unwrap();
    assert_eq!((op, status, id), (0x04, 11, 77));

    // A makes a sealed root and keeps nothing; B could too (another root entirely).
    let made = sealed_by(&ca).await;
    assert_eq!(made.sealed.len(), SEALED_ROOT_LEN);
    assert_eq!(&made.sealed[..8], b"KSVCSEAL");
    assert_eq!(&made.sealed[9..41], a_env.compose_hash().as_bytes());
    assert!(!ca.root_status().await.unwrap().is_ready());
    let other = sealed_by(&cb).await;
    assert_ne!(other.root_id, made.root_id);
    assert_ne!(other.sealed, made.sealed);

    // Both adopt A's blob: the same root on both.
    assert_eq!(ca.adopt_root(&made.sealed).await.unwrap(), made.root_id);
    assert_eq!(cb.adopt_root(&made.sealed).await.unwrap(), made.root_id);
    for client in [&ca, &cb] {
        let root = client.root_status().await.unwrap();
        assert_eq!(root.root_id, Some(made.root_id));
        assert_eq!(root.compose_hash, a_env.compose_hash());
    }

    // Every wallet path signs the same digest to the same signature on both.
    let sig_a = ca.sign_digest(&path, &d).await.unwrap();
    let sig_b = cb.sign_digest(&path, &d).await.unwrap();
    assert_eq!(sig_a, sig_b);
    let wallet = ca.wallet(&path).await.unwrap();
    assert_eq!(cb.wallet(&path).await.unwrap(), wallet);
    assert_eq!(recover_address(&d, &sig_a), wallet.address);
    assert_eq!(ca.payers().await.unwrap(), cb.payers().await.unwrap());
    let w = ca.create_wallet().await.unwrap();
    assert_eq!(
        cb.wallet(&w.derivation_path).await.unwrap().address,
        w.address
    );

    // A root is adopted once; none is created after.
    for client in [&ca, &cb] {
        let again = client.adopt_root(&made.sealed).await.unwrap_err();
        assert!(again.is_refused(), "{again:?}");
        let create = client.create_sealed_root().await.unwrap_err();
        assert!(create.is_refused(), "{create:?}");
    }
    // Refusing them stopped nothing.
    assert_eq!(ca.sign_digest(&path, &d).await.unwrap(), sig_a);

    // No root file was ever written, on either replica (B's decoy is untouched).
    assert_no_root_files(&a_env);
    assert_eq!(
        std::fs::read(b_env.state_dir.join("root.sealed")).unwrap(),
        b"not a root"
    );
    assert!(a.terminate(), "A did not stop cleanly");
    assert!(b.terminate(), "B did not stop cleanly");
    assert_no_root_files(&a_env);
}

#[tokio::test]
async fn a_replica_with_another_sealing_key_refuses_to_start() {
    let a_env = replica(None);
    let a = a_env.start();
    let made = sealed_by(&KeyClient::connect(&a.socket).await.unwrap()).await;

    // Same compose file, its own dev secret: another sealing key.
    let mut stranger = replica(None);
    let own_secret = stranger.dev_secret.clone();
    stranger.use_dev_files(&own_secret, &a_env.compose_file);
    assert_eq!(stranger.compose_hash(), a_env.compose_hash());
    expect_refusal_and_exit(&stranger, &made.sealed, "failed authentication").await;
}

#[tokio::test]
async fn a_damaged_or_foreign_blob_is_refused_the_same_way() {
    let a_env = replica(None);
    let a = a_env.start();
    let made = sealed_by(&KeyClient::connect(&a.socket).await.unwrap()).await;

    // One flipped byte anywhere: in the ciphertext, the tag, the nonce.
    for offset in [60usize, 100, 45] {
        let mut blob = made.sealed;
        blob[offset] ^= 0x01;
        expect_refusal_and_exit(&replica(Some(&a_env)), &blob, "failed authentication").await;
    }
    // A flipped byte in the header: the version, the compose hash.
    let mut blob = made.sealed;
    blob[8] ^= 0x01;
    expect_refusal_and_exit(&replica(Some(&a_env)), &blob, "format version 0").await;
    let mut blob = made.sealed;
    blob[20] ^= 0x01;
    expect_refusal_and_exit(&replica(Some(&a_env)), &blob, "bound to compose hash").await;
    // Cut short, and not a sealed root at all.
    expect_refusal_and_exit(&replica(Some(&a_env)), &made.sealed[..100], "truncated").await;
    expect_refusal_and_exit(&replica(Some(&a_env)), &[0x42; 101], "bad magic").await;
    // Sealed to another compose hash (same dev secret): named, and refused.
    let mut upgraded = replica(None);
    let own_compose = upgraded.compose_file.clone();
    upgraded.use_dev_files(&a_env.dev_secret, &own_compose);
    let new_hash = upgraded.set_compose("{\"name\":\"keyservice-test\",\"version\":2}\n");
    assert_ne!(new_hash, a_env.compose_hash());
    let ks = upgraded.start();
    let foreign = sealed_by(&KeyClient::connect(&ks.socket).await.unwrap()).await;
    drop(ks);
    expect_refusal_and_exit(
        &replica(Some(&a_env)),
        &foreign.sealed,
        &format!("bound to compose hash {new_hash}"),
    )
    .await;

    // The good blob still opens on a fresh replica: nothing about it was spoiled.
    let good_env = replica(Some(&a_env));
    let good = good_env.start();
    let client = KeyClient::connect(&good.socket).await.unwrap();
    assert_eq!(client.adopt_root(&made.sealed).await.unwrap(), made.root_id);
}

/// Adopts `sealed` on a fresh replica of `of` and returns it with its client.
async fn adopted(of: &Env, sealed: &[u8]) -> (Env, KeyService, KeyClient) {
    let env = replica(Some(of));
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    client.adopt_root(sealed).await.unwrap();
    (env, ks, client)
}

#[tokio::test]
async fn row_macs_are_a_function_of_the_root_and_keep_their_order() {
    let a_env = replica(None);
    let a = a_env.start();
    let ca = KeyClient::connect(&a.socket).await.unwrap();
    let made = sealed_by(&ca).await;
    ca.adopt_root(&made.sealed).await.unwrap();
    let (_b_env, _b, cb) = adopted(&a_env, &made.sealed).await;

    // Same root, same input: same tag. Another root (a keyservice of its own): another tag.
    let rows: [&[u8]; 3] = [b"account 1|wallet 7|allow", b"", &[0u8; 700]];
    let tags_a = ca.row_macs(&rows).await.unwrap();
    assert_eq!(tags_a.len(), 3);
    assert_eq!(cb.row_macs(&rows).await.unwrap(), tags_a);
    assert_ne!(tags_a[0], tags_a[1]);
    let own = Env::new();
    let own_ks = own.start();
    let c_own = KeyClient::connect(&own_ks.socket).await.unwrap();
    let tags_own = c_own.row_macs(&rows).await.unwrap();
    for (x, y) in tags_a.iter().zip(&tags_own) {
        assert_ne!(x, y);
    }
    // RootStatus outside shared-root mode: ready, with its own root id.
    let own_root = c_own.root_status().await.unwrap();
    assert_eq!(own_root.compose_hash, own.compose_hash());
    assert!(own_root.is_ready());
    assert_ne!(own_root.root_id, Some(made.root_id));
    let refused = c_own.create_sealed_root().await.unwrap_err();
    assert!(refused.is_refused(), "{refused:?}");
    let refused = c_own.adopt_root(&made.sealed).await.unwrap_err();
    assert!(refused.is_refused(), "{refused:?}");

    // 2 000 items through the client, split into several requests (by count, then by
    // size): 2 000 tags, in order, each equal to its own single-item call.
    let small: Vec<Vec<u8>> = (0..2000u32)
        .map(|i| format!("row {i}").into_bytes())
        .collect();
    let mixed: Vec<Vec<u8>> = (0..2000u32)
        .map(|i| {
            let mut v = i.to_be_bytes().to_vec();
            v.resize(4 + (i as usize * 37) % 500, (i % 251) as u8);
            v
        })
        .collect();
    for items in [&small, &mixed] {
        let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
        let tags = ca.row_macs(&refs).await.unwrap();
        assert_eq!(tags.len(), 2000);
        for (i, item) in refs.iter().enumerate() {
            let one = cb.row_macs(&[*item]).await.unwrap();
            assert_eq!(one, vec![tags[i]], "item {i}");
        }
    }

    // Counts out of range are InvalidArgument; a malformed payload is BadRequest.
    match ca.call(Request::RowMac { items: Vec::new() }).await {
        Err(KeyError::InvalidArgument(m)) => assert!(m.contains("1..=1024"), "{m}"),
        other => panic!("n = 0: {other:?}"),
    }
    let too_many = vec![Vec::new(); MAX_ROW_MAC_ITEMS + 1];
    assert!(matches!(
        ca.call(Request::RowMac { items: too_many }).await,
        Err(KeyError::InvalidArgument(_))
    ));
    let mut raw = raw_connect(&a.socket);
    for (id, payload) in [
        (1u64, &[0u8, 1, 0, 5, 1][..]),
        (2, &[0, 1][..]),
        (3, &[0][..]),
    ] {
        write_all(&mut raw, &raw_frame(1, 0x17, 0, id, payload));
        let (op, status, got, _) = read_raw_frame(&mut raw).unwrap();
        assert_eq!((op, status, got), (0x17, ErrorCode::BadRequest as u8, id));
    }
    // The client: no items, no request; the largest item fits; one more byte does not.
    assert_eq!(ca.row_macs(&[]).await.unwrap(), Vec::<[u8; 32]>::new());
    let largest = vec![7u8; MAX_ROW_MAC_ITEM_LEN];
    assert_eq!(ca.row_macs(&[largest.as_slice()]).await.unwrap().len(), 1);
    let over = vec![7u8; MAX_ROW_MAC_ITEM_LEN + 1];
    assert!(matches!(
        ca.row_macs(&[over.as_slice()]).await,
        Err(KeyError::InvalidArgument(_))
    ));
}

#[tokio::test]
async fn dstack_replicas_with_one_app_key_share_the_root() {
    const COMPOSE: &str =
        "{\"manifest_version\":2,\"name\":\"appliance\",\"docker_compose_file\":\"shared\"}";
    let dir = tempfile::tempdir().unwrap();
    let agent = StandInAgent::start_in(dir.path(), "agent.sock", AgentConfig::new(COMPOSE, 3));
    let start = |agent: &StandInAgent| {
        let mut env = Env::new();
        env.use_dstack(&agent.socket);
        env.shared_root();
        env
    };
    let (a_env, b_env) = (start(&agent), start(&agent));
    let (a, b) = (a_env.start(), b_env.start());
    let (ca, cb) = (
        KeyClient::connect(&a.socket).await.unwrap(),
        KeyClient::connect(&b.socket).await.unwrap(),
    );
    let made = sealed_by(&ca).await;
    let ids: [RootId; 2] = [
        ca.adopt_root(&made.sealed).await.unwrap(),
        cb.adopt_root(&made.sealed).await.unwrap(),
    ];
    assert_eq!(ids, [made.root_id; 2]);
    let path = DerivationPath([0x11; 32]);
    assert_eq!(
        ca.sign_digest(&path, &digest(1)).await.unwrap(),
        cb.sign_digest(&path, &digest(1)).await.unwrap()
    );
    assert_no_root_files(&a_env);
    assert_no_root_files(&b_env);

    // Another app (another KMS key), same compose: refuses the blob and exits.
    let impostor =
        StandInAgent::start_in(dir.path(), "impostor.sock", AgentConfig::new(COMPOSE, 4));
    expect_refusal_and_exit(&start(&impostor), &made.sealed, "failed authentication").await;
}
