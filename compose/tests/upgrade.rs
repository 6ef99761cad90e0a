//! The operator guide's upgrade, end to end with the real binaries against anvil:
//! render v1 and v2, run keyservice on v1, `keyservice reseal --governance` is refused
//! while v2's hash is not allowed on-chain, `compose-pin propose` allows it (owner key
//! only), the reseal then succeeds, and keyservice on v2 has the same wallets and payers;
//! and the same with a Safe-style multisig owner, which submits the calldata
//! `compose-pin propose --calldata-only` prints with two of its three signatures.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use alloy::{
    node_bindings::Anvil,
    primitives::{Address, B256, Bytes, U256},
    providers::ProviderBuilder,
    signers::local::PrivateKeySigner,
};
use chain_contracts::{IAppGovernance, deploy_app_governance};
use keyservice_api::KeyClient;
use test_support::binaries::workspace_binary;
use test_support::compose_pin::{image, render};
use test_support::tools::anvil_binary;

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_keyservice(state: &Path, socket: &Path, compose: &Path) -> Running {
    let _ = std::fs::remove_file(socket);
    let mut child = Command::new(workspace_binary("keyservice"))
        .args(["run", "--platform", "dev", "--payers", "2", "--state-dir"])
        .arg(state)
        .arg("--socket")
        .arg(socket)
        .arg("--compose-file")
        .arg(compose)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(socket).is_err() {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("keyservice exited ({status}): {err}");
        }
        assert!(Instant::now() < deadline, "keyservice did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    Running(child)
}

fn reseal(state: &Path, current: &Path, to: &str, governance: &str, rpc: &str) -> Output {
    Command::new(workspace_binary("keyservice"))
        .args([
            "reseal",
            "--to",
            to,
            "--governance",
            governance,
            "--rpc",
            rpc,
        ])
        .args(["--platform", "dev", "--state-dir"])
        .arg(state)
        .arg("--compose-file")
        .arg(current)
        .output()
        .unwrap()
}

fn propose(key: Option<&str>, governance: &str, rpc: &str, hash: &str) -> Output {
    let mut cmd = Command::new(test_support::compose_pin::binary());
    cmd.args([
        "propose",
        "--governance",
        governance,
        "--rpc",
        rpc,
        "--hash",
        hash,
    ])
    .env_remove("GOVERNANCE_OWNER_KEY");
    if let Some(key) = key {
        cmd.env("GOVERNANCE_OWNER_KEY", key);
    }
    cmd.output().unwrap()
}

fn allowed(governance: &str, rpc: &str, hash: &str) -> Output {
    Command::new(test_support::compose_pin::binary())
        .args([
            "allowed",
            "--governance",
            governance,
            "--rpc",
            rpc,
            "--hash",
            hash,
        ])
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test]
async fn upgrade_reseals_only_to_a_hash_the_governance_contract_allows() {
    let anvil = Anvil::new()
        .path(anvil_binary())
        .host("127.0.0.1")
        .port(0u16)
        .try_spawn()
        .unwrap();
    let rpc = anvil.endpoint();
    let owner = PrivateKeySigner::from(anvil.keys()[0].clone());
    let stranger = PrivateKeySigner::from(anvil.keys()[2].clone());
    let owner_key = hex::encode(owner.to_bytes());
    let stranger_key = hex::encode(stranger.to_bytes());
    let provider = ProviderBuilder::new().wallet(owner).connect_reqwest(
        chain_contracts::rpc::http_client().unwrap(),
        anvil.endpoint_url(),
    );
    let governance = deploy_app_governance(&provider).await.unwrap();
    let gov = governance.to_string();

    let dir = tempfile::tempdir().unwrap();
    let (v1, v2) = (dir.path().join("v1.json"), dir.path().join("v2.json"));
    let h1 = render(&image(1), &v1);
    let h2 = render(&image(2), &v2);
    assert_ne!(h1, h2);
    let state = dir.path().join("state");
    let socket = dir.path().join("ks.sock");

    // v1 runs and holds a wallet.
    let ks = start_keyservice(&state, &socket, &v1);
    let client = KeyClient::connect(&socket).await.unwrap();
    assert_eq!(
        hex::encode(client.status().await.unwrap().compose_hash.0),
        h1
    );
    let wallet = client.create_wallet().await.unwrap();
    let payers = client.payers().await.unwrap();
    drop(client);
    drop(ks);

    // Not allowed on-chain yet: refused, nothing written.
    let before = std::fs::read_dir(&state).unwrap().count();
    let out = reseal(&state, &v1, &h2, &gov, &rpc);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("refused: not allowed by governance contract"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read_dir(&state).unwrap().count(), before);
    assert_eq!(allowed(&gov, &rpc, &h2).status.code(), Some(1));

    // Proposing needs the owner's key.
    let out = propose(None, &gov, &rpc, &h2);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("GOVERNANCE_OWNER_KEY"));
    let out = propose(Some(&stranger_key), &gov, &rpc, &h2);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("is not the governance owner"),
        "{}",
        text(&out)
    );
    let out = propose(Some(&owner_key), &gov, &rpc, &h2);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&format!("compose hash {h2} allowed (transaction 0x")));
    let onchain = IAppGovernance::new(governance, &provider)
        .allowedComposeHashes(h2.parse::<B256>().unwrap())
        .call()
        .await
        .unwrap();
    assert!(onchain);
    assert_eq!(allowed(&gov, &rpc, &h2).status.code(), Some(0));
    let out = propose(Some(&owner_key), &gov, &rpc, &h2);
    assert!(text(&out).contains("already allowed"), "{}", text(&out));

    // A reseal against an address without the contract is refused too.
    let out = reseal(
        &state,
        &v1,
        &h2,
        "0x00000000000000000000000000000000000000aa",
        &rpc,
    );
    assert!(!out.status.success());
    assert!(text(&out).contains("no contract at"), "{}", text(&out));

    // Allowed: the reseal succeeds and v2 holds the same keys.
    let out = reseal(&state, &v1, &h2, &gov, &rpc);
    assert!(out.status.success(), "{}", text(&out));
    assert!(state.join(format!("root.sealed.{}", &h2[..16])).is_file());
    let ks = start_keyservice(&state, &socket, &v2);
    let client = KeyClient::connect(&socket).await.unwrap();
    assert_eq!(
        hex::encode(client.status().await.unwrap().compose_hash.0),
        h2
    );
    let again = client.wallet(&wallet.derivation_path).await.unwrap();
    assert_eq!(again.address, wallet.address);
    assert_eq!(client.payers().await.unwrap(), payers);
    drop(ks);
}

/// The `to` and `data` lines of `compose-pin propose --calldata-only`.
fn calldata_only(governance: &str, hash: &str) -> (Address, Bytes) {
    let out = Command::new(test_support::compose_pin::binary())
        .args([
            "propose",
            "--calldata-only",
            "--governance",
            governance,
            "--rpc",
            "http://127.0.0.1:1",
            "--hash",
            hash,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let field = |name: &str| {
        stdout
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .unwrap_or_else(|| panic!("no `{name}` line in {stdout}"))
            .trim()
            .to_owned()
    };
    (field("to").parse().unwrap(), field("data").parse().unwrap())
}

#[tokio::test]
async fn a_multisig_owner_allows_an_upgrade_with_the_printed_calldata() {
    use test_support::chain::test_contracts::{TestMultisig, multisig_exec};

    let anvil = Anvil::new()
        .path(anvil_binary())
        .host("127.0.0.1")
        .port(0u16)
        .try_spawn()
        .unwrap();
    let rpc = anvil.endpoint();
    let deployer = test_support::chain::wallet(&anvil, 0);
    let submitter = test_support::chain::wallet(&anvil, 2);
    let deployer_key = hex::encode(PrivateKeySigner::from(anvil.keys()[0].clone()).to_bytes());
    let signers: Vec<PrivateKeySigner> = (5..8)
        .map(|i| PrivateKeySigner::from(anvil.keys()[i].clone()))
        .collect();
    let governance = deploy_app_governance(&deployer).await.unwrap();
    let gov = governance.to_string();
    let multisig = TestMultisig::deploy(
        &deployer,
        signers.iter().map(PrivateKeySigner::address).collect(),
        U256::from(2),
    )
    .await
    .unwrap();
    // The deployer hands the contract to the multisig, as the operator guide says.
    test_support::chain::send(
        IAppGovernance::new(governance, &deployer).transferOwnership(*multisig.address()),
    )
    .await;

    let dir = tempfile::tempdir().unwrap();
    let (v1, v2) = (dir.path().join("v1.json"), dir.path().join("v2.json"));
    let _h1 = render(&image(1), &v1);
    let h2 = render(&image(2), &v2);
    let state = dir.path().join("state");
    let socket = dir.path().join("ks.sock");
    let ks = start_keyservice(&state, &socket, &v1);
    let client = KeyClient::connect(&socket).await.unwrap();
    let wallet = client.create_wallet().await.unwrap();
    drop(client);
    drop(ks);

    // The former owner's key proposes nothing now; the error points at --calldata-only.
    let out = propose(Some(&deployer_key), &gov, &rpc, &h2);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("--calldata-only"), "{}", text(&out));
    assert_eq!(allowed(&gov, &rpc, &h2).status.code(), Some(1));

    // Two of three owners sign the printed call; anyone submits it.
    let (to, data) = calldata_only(&gov, &h2);
    assert_eq!(to, governance);
    let as_submitter = TestMultisig::new(*multisig.address(), &submitter);
    multisig_exec(
        &as_submitter,
        &[&signers[2], &signers[0]],
        to,
        U256::ZERO,
        data,
    )
    .await
    .unwrap();
    assert_eq!(allowed(&gov, &rpc, &h2).status.code(), Some(0));

    // The upgrade goes on as with a single owner.
    let out = reseal(&state, &v1, &h2, &gov, &rpc);
    assert!(out.status.success(), "{}", text(&out));
    let ks = start_keyservice(&state, &socket, &v2);
    let client = KeyClient::connect(&socket).await.unwrap();
    assert_eq!(
        hex::encode(client.status().await.unwrap().compose_hash.0),
        h2
    );
    let again = client.wallet(&wallet.derivation_path).await.unwrap();
    assert_eq!(again.address, wallet.address);
    drop(ks);
}

#[test]
fn calldata_for_a_multisig_owner() {
    let hash = "ab".repeat(32);
    let out = Command::new(test_support::compose_pin::binary())
        .args([
            "propose",
            "--calldata-only",
            "--governance",
            "0x00000000000000000000000000000000000000aa",
            "--rpc",
            "http://127.0.0.1:1",
            "--hash",
            &hash,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8(out.stdout).unwrap();
    // addComposeHash(bytes32) selector, then the hash.
    let selector = hex::encode(&alloy::primitives::keccak256("addComposeHash(bytes32)")[..4]);
    assert!(
        stdout.contains(&format!("data 0x{selector}{hash}")),
        "{stdout}"
    );
}
