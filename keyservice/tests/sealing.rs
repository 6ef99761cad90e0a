//! The sealed root: round trip, binding to the compose hash, fail-closed on damage, and
//! resealing for an upgrade. Most tests run the real binary with the dev platform.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsStr;

use keyservice::platform::Platform;
use keyservice::platform::dev::DevPlatform;
use keyservice::root;
use keyservice::sealing::SealError;
use keyservice_api::{ComposeHash, DerivationPath, KeyClient, Payer};
use test_support::keyservice::Env;

const NEW_COMPOSE: &str = "{\"name\":\"keyservice-test\",\"version\":2}\n";

/// Starts the service, creates a wallet and returns its path and address plus the payers.
async fn first_run(
    env: &Env,
) -> (
    DerivationPath,
    keyservice_api::Address,
    keyservice_api::PayerList,
) {
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    let w = client.create_wallet().await.unwrap();
    let payers = client.payers().await.unwrap();
    assert!(ks.terminate(), "keyservice did not exit cleanly on SIGTERM");
    (w.derivation_path, w.address, payers)
}

#[tokio::test]
async fn root_survives_restart_with_the_same_wallets() {
    let env = Env::new();
    let (path, address, payers) = first_run(&env).await;
    assert_eq!(env.state_files(), vec!["root.sealed"]);
    assert!(!env.socket.exists(), "socket not removed at shutdown");
    let sealed_before = std::fs::read(env.sealed_file()).unwrap();
    assert_eq!(sealed_before.len(), 101);

    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    assert_eq!(client.wallet(&path).await.unwrap().address, address);
    assert_eq!(client.payers().await.unwrap(), payers);
    let status = client.status().await.unwrap();
    assert_eq!(status.compose_hash, env.compose_hash());
    assert_eq!(status.api_payers, 4);
    // Opening did not rewrite the file.
    assert_eq!(std::fs::read(env.sealed_file()).unwrap(), sealed_before);
}

#[test]
fn library_round_trip_and_mismatch_error() {
    let env = Env::new();
    let platform = DevPlatform::new(&env.dev_secret, &env.compose_file);
    let first = root::open_or_create(&platform, &env.state_dir, None).unwrap();
    assert!(first.created);
    let again = root::open_or_create(&platform, &env.state_dir, None).unwrap();
    assert!(!again.created);
    assert_eq!(first.root.expose_secret(), again.root.expose_secret());

    let old = env.compose_hash();
    let new = env.set_compose(NEW_COMPOSE);
    assert_eq!(platform.measured_compose_hash().unwrap(), new);
    match root::open_or_create(&platform, &env.state_dir, None) {
        Err(SealError::ComposeHashMismatch {
            expected, found, ..
        }) => {
            assert_eq!(expected, new);
            assert_eq!(found, old);
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("unsealed under another compose hash"),
    }
}

#[tokio::test]
async fn another_compose_hash_cannot_unseal() {
    let env = Env::new();
    let _ = first_run(&env).await;
    let old = env.compose_hash();
    let sealed_before = std::fs::read(env.sealed_file()).unwrap();

    let new = env.set_compose(NEW_COMPOSE);
    let err = env.start_expecting_failure();
    assert!(
        err.contains(&format!("bound to compose hash {old}")),
        "{err}"
    );
    assert!(
        err.contains(&format!("measured compose hash is {new}")),
        "{err}"
    );
    // Fail closed: nothing new was created, nothing was overwritten.
    assert_eq!(env.state_files(), vec!["root.sealed"]);
    assert_eq!(std::fs::read(env.sealed_file()).unwrap(), sealed_before);
}

#[tokio::test]
async fn tampered_or_truncated_root_fails_closed() {
    let env = Env::new();
    let _ = first_run(&env).await;
    let good = std::fs::read(env.sealed_file()).unwrap();

    // A flipped ciphertext bit, a flipped tag bit, a flipped nonce bit.
    for offset in [60usize, 100, 45] {
        let mut bad = good.clone();
        bad[offset] ^= 0x40;
        std::fs::write(env.sealed_file(), &bad).unwrap();
        let err = env.start_expecting_failure();
        assert!(
            err.contains("failed authentication"),
            "offset {offset}: {err}"
        );
        assert_eq!(
            std::fs::read(env.sealed_file()).unwrap(),
            bad,
            "file was rewritten"
        );
    }

    // Truncated, and empty (e.g. a crash of some other tool).
    for len in [100usize, 41, 0] {
        std::fs::write(env.sealed_file(), &good[..len]).unwrap();
        let err = env.start_expecting_failure();
        assert!(
            err.contains("truncated") || err.contains("bad magic"),
            "len {len}: {err}"
        );
        assert_eq!(std::fs::read(env.sealed_file()).unwrap().len(), len);
    }
    assert_eq!(env.state_files(), vec!["root.sealed"]);

    // Restored, it opens again: nothing was lost.
    std::fs::write(env.sealed_file(), &good).unwrap();
    env.start();
}

#[tokio::test]
async fn no_new_root_when_only_other_roots_exist() {
    let env = Env::new();
    let _ = first_run(&env).await;
    std::fs::rename(
        env.sealed_file(),
        env.state_dir.join("root.sealed.0011223344556677"),
    )
    .unwrap();
    let err = env.start_expecting_failure();
    assert!(err.contains("other sealed roots exist"), "{err}");
}

fn reseal(env: &Env, to: &ComposeHash, allow_list: &std::path::Path) -> std::process::Output {
    let to = to.to_string();
    env.command(
        "reseal",
        &[
            OsStr::new("--to"),
            OsStr::new(&to),
            OsStr::new("--allow-list"),
            allow_list.as_os_str(),
        ],
    )
}

#[tokio::test]
async fn reseal_to_an_allowed_hash_keeps_the_wallets() {
    let env = Env::new();
    let (path, address, payers) = first_run(&env).await;
    let old_hash = env.compose_hash();
    let old_bytes = std::fs::read(env.sealed_file()).unwrap();

    // The hash the upgraded version will measure.
    let new_hash: ComposeHash = {
        use sha2::Digest;
        ComposeHash(sha2::Sha256::digest(NEW_COMPOSE.as_bytes()).into())
    };
    let allow = env.dir.path().join("allowed-hashes");
    std::fs::write(
        &allow,
        format!(
            "# governance-approved\n{}\n",
            hex::encode(new_hash.as_bytes())
        ),
    )
    .unwrap();

    // Run by the current version (old compose hash).
    let out = reseal(&env, &new_hash, &allow);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let new_name = format!("root.sealed.{}", new_hash.short_hex());
    assert_eq!(
        env.state_files(),
        vec!["root.sealed".to_owned(), new_name.clone()]
    );
    assert_eq!(
        std::fs::read(env.sealed_file()).unwrap(),
        old_bytes,
        "old root changed"
    );
    let resealed = std::fs::read(env.state_dir.join(&new_name)).unwrap();
    assert_eq!(&resealed[9..41], new_hash.as_bytes());

    // Resealing again to the same output is refused rather than overwriting.
    let again = reseal(&env, &new_hash, &allow);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));

    // The upgraded version opens the resealed root and sees the same wallets and payers.
    env.set_compose(NEW_COMPOSE);
    {
        let ks = env.start();
        let client = KeyClient::connect(&ks.socket).await.unwrap();
        assert_eq!(client.status().await.unwrap().compose_hash, new_hash);
        assert_eq!(client.wallet(&path).await.unwrap().address, address);
        assert_eq!(client.payers().await.unwrap(), payers);
        // The admin payer still signs (a creation of the committed AccountConfig).
        let tx = test_support::keyservice::eip1559(
            None,
            0,
            chain_contracts::artifacts::account_config_bytecode().to_vec(),
            0,
        );
        let d = alloy::consensus::SignableTransaction::signature_hash(&tx).0;
        let sig = client
            .payer_sign_transaction(Payer::Admin, &test_support::keyservice::preimage(&tx))
            .await
            .unwrap();
        assert_eq!(
            test_support::keyservice::recover_address(&d, &sig),
            payers.admin
        );
    }

    // The old version still opens its own (untouched) file.
    std::fs::write(
        &env.compose_file,
        b"{\"name\":\"keyservice-test\",\"version\":1}\n",
    )
    .unwrap();
    assert_eq!(env.compose_hash(), old_hash);
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    assert_eq!(client.wallet(&path).await.unwrap().address, address);
}

#[tokio::test]
async fn reseal_to_a_hash_not_allowed_is_refused() {
    let env = Env::new();
    let _ = first_run(&env).await;
    let target = ComposeHash([0xab; 32]);
    let allow = env.dir.path().join("allowed-hashes");
    std::fs::write(&allow, format!("{}\n", "cd".repeat(32))).unwrap();

    let out = reseal(&env, &target, &allow);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("refused: not allowed"), "{stderr}");
    assert!(stderr.contains(&target.to_string()), "{stderr}");
    assert_eq!(
        env.state_files(),
        vec!["root.sealed"],
        "something was written"
    );

    // A malformed allow-list is an error too, not an empty list.
    std::fs::write(&allow, "0xnothex\n").unwrap();
    let out = reseal(&env, &target, &allow);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 1"));
}

#[test]
fn inspect_and_compose_hash_subcommands() {
    let env = Env::new();
    let platform = DevPlatform::new(&env.dev_secret, &env.compose_file);
    root::open_or_create(&platform, &env.state_dir, None).unwrap();
    let out = std::process::Command::new(test_support::keyservice::binary())
        .arg("inspect")
        .arg(env.sealed_file())
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&env.compose_hash().to_string()), "{text}");

    let out = std::process::Command::new(test_support::keyservice::binary())
        .args(["compose-hash", "--platform", "dev", "--compose-file"])
        .arg(&env.compose_file)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        hex::encode(env.compose_hash().as_bytes())
    );
}
