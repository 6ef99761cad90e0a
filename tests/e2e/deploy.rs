//! `appliance deploy` and `appliance dev`'s own chain, with the real binaries and a real
//! anvil: the deployed contracts are what `serve` / `dev` mirror to, the configuration
//! file keeps its other contents, errors are clear, and dev's anvil lives and dies with
//! the appliance and keeps its contracts across restarts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use alloy::node_bindings::AnvilInstance;
use alloy::primitives::{Address, U256};
use alloy::providers::{Provider, ProviderBuilder};
use chain_contracts::{IAccountConfig, IAppGovernance, artifacts};
use e2e::chain::{anvil, anvil_binary, key_hash};
use e2e::{Appliance, KeyService, Launch, eventually, eventually_async, processes_matching};
use serde_json::{Value, json};

/// Runs `appliance deploy` with `args`; returns (success, stdout, stderr).
fn deploy(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let mut cmd = Command::new(e2e::binary("appliance"));
    for (key, _) in std::env::vars() {
        if key.starts_with("APPLIANCE_") || key == "DEPLOYER_PRIVATE_KEY" {
            cmd.env_remove(key);
        }
    }
    let out = cmd
        .arg("deploy")
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn set_balance(rpc: &str, address: Address, wei: u128) {
    let provider = ProviderBuilder::new().connect_reqwest(
        chain_contracts::rpc::http_client().unwrap(),
        rpc.parse().unwrap(),
    );
    provider
        .raw_request::<_, Value>("anvil_setBalance".into(), (address, U256::from(wei)))
        .await
        .unwrap();
}

/// The admin and API payers of a keyservice.
async fn payers(socket: &Path) -> (Address, Vec<Address>) {
    let list = keyservice_api::KeyClient::new(socket)
        .payers()
        .await
        .unwrap();
    (
        Address::from(list.admin.0),
        list.api.iter().map(|a| Address::from(a.0)).collect(),
    )
}

/// The address `key` (`account_config_address`, `governance_address`) of the `[chain]`
/// table `appliance deploy` wrote into the file at `path`.
fn written_address(path: &Path, key: &str) -> Address {
    let table: toml::Table = std::fs::read_to_string(path).unwrap().parse().unwrap();
    table["chain"][key]
        .as_str()
        .unwrap_or_else(|| panic!("no chain.{key} in {}", path.display()))
        .parse()
        .unwrap()
}

/// Waits until account `key`'s group `group_id` is on chain.
async fn group_on_chain(rpc: &str, contract: Address, key: &str, group_id: u64) -> bool {
    let provider = ProviderBuilder::new().connect_reqwest(
        chain_contracts::rpc::http_client().unwrap(),
        rpc.parse().unwrap(),
    );
    let config = IAccountConfig::new(contract, &provider);
    let account = key_hash(key);
    eventually_async(Duration::from_secs(30), || async {
        config
            .getGroup(U256::from(group_id))
            .call()
            .await
            .map(|g| g.apiKeyHash == account)
            .unwrap_or(false)
    })
    .await
}

#[tokio::test]
async fn deploy_writes_a_config_that_serve_mirrors_to() {
    let anvil: AnvilInstance = anvil();
    let rpc = anvil.endpoint();
    let dir = tempfile::tempdir().unwrap();
    let ks = KeyService::start(
        &dir.path().join("ks.sock"),
        &dir.path().join("ks"),
        &dir.path().join("compose.json"),
    )
    .await;
    let (admin, api_payers) = payers(&ks.socket).await;

    let config_path = dir.path().join("appliance.toml");
    let original = format!(
        "# production settings\n[keyservice]\nsocket = \"{}\" # shared volume\n\n[chain]\nconfirmations = 0\npoll_interval_ms = 100\n",
        ks.socket.display()
    );
    std::fs::write(&config_path, &original).unwrap();
    let config = config_path.to_str().unwrap();

    // Unreachable RPC: a port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let (ok, _, err) = deploy(&["--rpc", &closed_url, "--config", config], &[]);
    assert!(!ok);
    assert!(err.contains("cannot reach the chain RPC"), "{err}");

    // Wrong chain id.
    let (ok, _, err) = deploy(&["--rpc", &rpc, "--config", config, "--chain-id", "5"], &[]);
    assert!(!ok);
    assert!(err.contains("reports chain id 31337, expected 5"), "{err}");

    // The admin payer signs and has nothing yet.
    let (ok, _, err) = deploy(&["--rpc", &rpc, "--config", config], &[]);
    assert!(!ok);
    assert!(
        err.contains(&format!("the deployer {admin} holds 0 wei")),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&config_path).unwrap(),
        original,
        "failed deployments leave the file alone"
    );

    set_balance(&rpc, admin, 10u128.pow(20)).await;
    let multisig = Address::repeat_byte(0x5a);
    let (ok, out, err) = deploy(
        &[
            "--rpc",
            &rpc,
            "--config",
            config,
            "--governance-owner",
            &multisig.to_string(),
        ],
        &[],
    );
    assert!(ok, "deploy failed: {err}");
    assert!(out.contains("AccountConfig 0x"), "{out}");

    let text = std::fs::read_to_string(&config_path).unwrap();
    assert!(
        text.starts_with(&format!(
            "# production settings\n[keyservice]\nsocket = \"{}\" # shared volume\n",
            ks.socket.display()
        )),
        "{text}"
    );
    let table: toml::Table = text.parse().unwrap();
    let chain = table["chain"].as_table().unwrap();
    assert_eq!(chain["rpc_url"].as_str(), Some(rpc.as_str()));
    assert_eq!(chain["chain_id"].as_integer(), Some(31337));
    assert_eq!(chain["confirmations"].as_integer(), Some(0), "kept");
    let account_config: Address = chain["account_config_address"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let governance: Address = chain["governance_address"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let deploy_block = chain["deploy_block"].as_integer().unwrap();
    assert!(deploy_block >= 1);

    // On chain: the right code, owners and payers.
    let provider = ProviderBuilder::new().connect_reqwest(
        chain_contracts::rpc::http_client().unwrap(),
        anvil.endpoint_url(),
    );
    assert_eq!(
        provider.get_code_at(account_config).await.unwrap(),
        artifacts::account_config_deployed_bytecode()
    );
    let contract = IAccountConfig::new(account_config, &provider);
    assert_eq!(contract.owner().call().await.unwrap(), admin);
    for payer in &api_payers {
        assert!(contract.isApiPayer(*payer).call().await.unwrap());
    }
    let gov = IAppGovernance::new(governance, &provider);
    assert_eq!(gov.owner().call().await.unwrap(), multisig);

    // A second deployment is refused without --force.
    let (ok, _, err) = deploy(&["--rpc", &rpc, "--config", config], &[]);
    assert!(!ok);
    assert!(err.contains("pass --force"), "{err}");
    assert_eq!(std::fs::read_to_string(&config_path).unwrap(), text);

    // serve with that file mirrors API writes (API payer 0 pays the gas).
    set_balance(&rpc, api_payers[0], 10u128.pow(20)).await;
    let data = tempfile::tempdir().unwrap();
    let app = Appliance::launch(
        data.path(),
        Launch::ServeConfig {
            config: config_path.clone(),
            // `serve` listens for metrics on 127.0.0.1:9464 by default: tests run side by
            // side.
            env: vec![(
                "APPLIANCE_METRICS__LISTEN".to_owned(),
                "127.0.0.1:0".to_owned(),
            )],
        },
    )
    .await;
    let chain_config = app
        .get("/get_node_chain_config", None)
        .await
        .assert_ok()
        .clone();
    assert_eq!(
        chain_config["contract_address"].as_str(),
        Some(account_config.to_checksum(None).as_str())
    );
    let (key, _) = app.new_account("deployed").await;
    let group_id = app
        .add_group(
            &key,
            json!({"group_name": "g", "group_description": "", "pkp_ids_permitted": [], "cid_hashes_permitted": []}),
        )
        .await;
    assert!(
        group_on_chain(&rpc, account_config, &key, group_id).await,
        "the group did not reach the deployed contract; log:\n{}",
        app.log()
    );
    let acct = contract.getAccount(key_hash(&key)).call().await.unwrap();
    assert!(acct.exists && acct.managed);
    assert_eq!(acct.name, "deployed");

    // --force deploys new contracts and replaces the addresses, signed by a deployer
    // key from the environment (anvil dev account 1), which then owns them.
    let deployer = alloy::signers::local::PrivateKeySigner::from(anvil.keys()[1].clone());
    let key_hex = alloy::hex::encode(anvil.keys()[1].to_bytes());
    let (ok, _, err) = deploy(
        &["--rpc", &rpc, "--config", config, "--force"],
        &[("DEPLOYER_PRIVATE_KEY", &key_hex)],
    );
    assert!(ok, "{err}");
    let replaced = written_address(&config_path, "account_config_address");
    assert_ne!(replaced, account_config);
    let contract = IAccountConfig::new(replaced, &provider);
    assert_eq!(contract.owner().call().await.unwrap(), deployer.address());
    assert!(contract.isApiPayer(api_payers[0]).call().await.unwrap());
}

/// The first deployment on dstack happens before the CVM, and so its keyservice, exists:
/// with a deployer key and `--without-api-payers` (or `--api-payer`), `appliance deploy`
/// needs no keyservice; the payers are authorized afterwards with `setApiPayer`.
#[tokio::test]
async fn deploy_needs_no_keyservice_with_a_deployer_key_and_given_payers() {
    let anvil: AnvilInstance = anvil();
    let rpc = anvil.endpoint();
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("appliance.toml");
    // A socket nobody serves, and no keyservice to spawn.
    let nowhere = dir.path().join("no-keyservice.sock");
    std::fs::write(
        &config_path,
        format!("[keyservice]\nsocket = \"{}\"\n", nowhere.display()),
    )
    .unwrap();
    let config = config_path.to_str().unwrap();
    let deployer = alloy::signers::local::PrivateKeySigner::from(anvil.keys()[3].clone());
    let key = hex::encode(deployer.to_bytes());
    let env = [("DEPLOYER_PRIVATE_KEY", key.as_str())];

    // Without given payers keyservice is still asked, and its absence is the error.
    let (ok, _, err) = deploy(&["--rpc", &rpc, "--config", config], &env);
    assert!(!ok);
    assert!(err.contains("keyservice"), "{err}");
    // Both options at once are refused.
    let (ok, _, err) = deploy(
        &[
            "--rpc",
            &rpc,
            "--config",
            config,
            "--without-api-payers",
            "--api-payer",
            &Address::repeat_byte(1).to_string(),
        ],
        &env,
    );
    assert!(!ok);
    assert!(err.contains("cannot be used with"), "{err}");

    let payer = Address::repeat_byte(0x7e);
    let (ok, out, err) = deploy(
        &[
            "--rpc",
            &rpc,
            "--config",
            config,
            "--api-payer",
            &payer.to_string(),
        ],
        &env,
    );
    assert!(ok, "deploy failed: {err}");
    assert!(out.contains("AccountConfig 0x"), "{out}");
    assert!(!nowhere.exists(), "nothing dialled or created the socket");
    let account_config = written_address(&config_path, "account_config_address");
    let provider = ProviderBuilder::new().connect_reqwest(
        chain_contracts::rpc::http_client().unwrap(),
        anvil.endpoint_url(),
    );
    let contract = IAccountConfig::new(account_config, &provider);
    assert_eq!(contract.owner().call().await.unwrap(), deployer.address());
    assert!(contract.isApiPayer(payer).call().await.unwrap());
    assert!(
        !contract
            .isApiPayer(Address::repeat_byte(0x7f))
            .call()
            .await
            .unwrap()
    );

    // Again with none: the contracts exist, no API payer yet.
    let (ok, _, err) = deploy(
        &[
            "--rpc",
            &rpc,
            "--config",
            config,
            "--force",
            "--without-api-payers",
        ],
        &env,
    );
    assert!(ok, "deploy failed: {err}");
    let replaced = written_address(&config_path, "account_config_address");
    assert_ne!(replaced, account_config);
    let contract = IAccountConfig::new(replaced, &provider);
    assert!(!contract.isApiPayer(payer).call().await.unwrap());
    assert_eq!(contract.owner().call().await.unwrap(), deployer.address());
}

/// The dev chain's RPC URL, from the appliance's log.
fn dev_rpc(app: &Appliance) -> String {
    let log = app.log();
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("dev chain: anvil started"))
        .unwrap_or_else(|| panic!("no dev chain in the log:\n{log}"));
    let start = line.find("http://127.0.0.1:").unwrap();
    line[start..].split_whitespace().next().unwrap().to_owned()
}

#[tokio::test]
async fn dev_runs_its_own_chain_and_reuses_its_contracts() {
    let dir = tempfile::tempdir().unwrap();
    let env = vec![
        (
            "APPLIANCE_CHAIN__DEV_ANVIL".to_string(),
            anvil_binary().display().to_string(),
        ),
        (
            "APPLIANCE_CHAIN__POLL_INTERVAL_MS".to_string(),
            "100".to_string(),
        ),
    ];
    let state_file = dir.path().join("anvil").join("state.json");
    let state = state_file.display().to_string();

    let mut app = Appliance::launch(dir.path(), Launch::DevWith { env: env.clone() }).await;
    let chain_config = app
        .get("/get_node_chain_config", None)
        .await
        .assert_ok()
        .clone();
    let contract: Address = chain_config["contract_address"]
        .as_str()
        .unwrap_or_else(|| panic!("no contract in dev: {chain_config}; log:\n{}", app.log()))
        .parse()
        .unwrap();
    let rpc = dev_rpc(&app);
    let provider = ProviderBuilder::new().connect_reqwest(
        chain_contracts::rpc::http_client().unwrap(),
        rpc.parse().unwrap(),
    );
    assert_eq!(
        provider.get_code_at(contract).await.unwrap(),
        artifacts::account_config_deployed_bytecode()
    );
    let guards = processes_matching(&["child-guard", &state]);
    assert_eq!(guards.len(), 1, "one guard for this data dir: {guards:?}");
    let anvils: Vec<u32> = processes_matching(&["anvil", &state])
        .into_iter()
        .filter(|pid| !guards.contains(pid))
        .collect();
    assert_eq!(anvils.len(), 1, "one anvil for this data dir: {anvils:?}");

    let (key, _) = app.new_account("dev").await;
    let group_id = app
        .add_group(
            &key,
            json!({"group_name": "g", "group_description": "", "pkp_ids_permitted": [], "cid_hashes_permitted": []}),
        )
        .await;
    assert!(
        group_on_chain(&rpc, contract, &key, group_id).await,
        "the write did not reach the dev chain; log:\n{}",
        app.log()
    );

    // kill -9: no shutdown code runs, yet anvil goes too (and saves its state).
    app.kill9();
    assert!(
        eventually(Duration::from_secs(15), || processes_matching(&[
            "anvil", &state
        ])
        .is_empty())
        .await,
        "anvil outlived the appliance"
    );
    assert!(state_file.is_file(), "anvil saved its state");

    // A restart reuses the same contracts, with the earlier writes still there.
    let app = Appliance::launch(dir.path(), Launch::DevWith { env }).await;
    let again = app
        .get("/get_node_chain_config", None)
        .await
        .assert_ok()
        .clone();
    assert_eq!(
        again["contract_address"].as_str(),
        Some(contract.to_checksum(None).as_str()),
        "log:\n{}",
        app.log()
    );
    assert!(app.log().contains("reusing the deployed contracts"));
    let rpc = dev_rpc(&app);
    assert!(group_on_chain(&rpc, contract, &key, group_id).await);
    let second = app
        .add_group(
            &key,
            json!({"group_name": "h", "group_description": "", "pkp_ids_permitted": [], "cid_hashes_permitted": []}),
        )
        .await;
    assert!(
        group_on_chain(&rpc, contract, &key, second).await,
        "no mirror after the restart; log:\n{}",
        app.log()
    );
}

#[tokio::test]
async fn dev_without_anvil_starts_without_a_chain() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-anvil");
    let env = vec![(
        "APPLIANCE_CHAIN__DEV_ANVIL".to_string(),
        missing.display().to_string(),
    )];
    let app = Appliance::launch(dir.path(), Launch::DevWith { env }).await;
    let chain_config = app
        .get("/get_node_chain_config", None)
        .await
        .assert_ok()
        .clone();
    assert_eq!(chain_config["contract_address"], Value::Null);
    app.new_account("works anyway").await;
    assert!(
        app.log().contains("starting WITHOUT a chain"),
        "{}",
        app.log()
    );
}
