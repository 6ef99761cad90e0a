//! `scripts/deploy-dstack --dry-run`, for a self-hosted dstack and for Phala Cloud, on a
//! real rendered compose: the hash it prints is the hash of the file it wrote, the app id it
//! would deploy with is the governance contract's address, the calls it would send are
//! `addComposeHash(<hash>)` and `registerApp(<app id>)`, no secret value is printed, nothing
//! reaches the chain it is given, the secrets it encrypts decrypt back to themselves with
//! the app's key (dstack's format), and a missing input fails with exit status 2.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use alloy::primitives::{Address, keccak256};
use alloy::providers::{Provider, ProviderBuilder};
use alloy::sol_types::SolCall;
use chain_contracts::IAppGovernance;

const RPC_SECRET: &str = "https://rpc.example/v2/RPC-SECRET-9f2c1e";
const STRIPE_SECRET: &str = "sk_live_STRIPE-SECRET-41ab77";
const GOVERNANCE: &str = "0xAbCdEf0123456789aBcDeF0123456789AbCdEf01";
const KMS_CONTRACT: &str = "0x2f83172A49584C017F2B256F0FB2Dca14126Ba9C";

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("scripts/deploy-dstack")
}

fn image() -> String {
    format!("ghcr.io/example/appliance@sha256:{}", "ab".repeat(32))
}

/// A working directory with an appliance.toml (naming `governance` when given) and the
/// secrets file.
fn workdir(governance: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut toml = String::from(
        "listen = \"0.0.0.0:8443\"\n\n[acme]\ndomains = [\"keys.example.com\"]\n\n[chain]\nchain_id = 31337\n",
    );
    if let Some(g) = governance {
        toml.push_str(&format!(
            "account_config_address = \"0x1111111111111111111111111111111111111111\"\ngovernance_address = \"{g}\"\ndeploy_block = 1\n"
        ));
    }
    std::fs::write(dir.path().join("appliance.toml"), toml).unwrap();
    std::fs::write(
        dir.path().join("secrets.env"),
        format!(
            "# secrets\nAPPLIANCE_CHAIN__RPC_URL={RPC_SECRET}\nAPPLIANCE_BILLING__STRIPE_SECRET_KEY={STRIPE_SECRET}\n"
        ),
    )
    .unwrap();
    dir
}

/// Runs the script in `dir` with `args`, the workspace binaries and no inherited DEPLOY_*
/// or key variables.
fn run(dir: &Path, args: &[&str]) -> Output {
    let bin_dir = e2e::binary("compose-pin").parent().unwrap().to_owned();
    let mut cmd = Command::new("bash");
    for (key, _) in std::env::vars() {
        if key.starts_with("DEPLOY_") || key.starts_with("DSTACK_") || key == "GOVERNANCE_OWNER_KEY"
        {
            cmd.env_remove(key);
        }
    }
    cmd.arg(script())
        .args(args)
        .current_dir(dir)
        .env("DEPLOY_BIN_DIR", bin_dir)
        .output()
        .unwrap()
}

/// Runs the script, which must succeed and print no secret; returns its standard output.
fn run_ok(dir: &Path, args: &[&str]) -> String {
    let output = run(dir, args);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_no_secret(&output);
    stdout
}

/// `compose-pin hash FILE`: the compose hash of the file the script wrote.
fn compose_pin_hash(compose: &Path) -> String {
    let check = Command::new(e2e::binary("compose-pin"))
        .arg("hash")
        .arg(compose)
        .output()
        .unwrap();
    assert!(check.status.success());
    String::from_utf8_lossy(&check.stdout).trim().to_owned()
}

fn common_args(rpc: &str) -> Vec<String> {
    [
        "--dry-run",
        "--config",
        "appliance.toml",
        "--rpc",
        rpc,
        "--kms-contract",
        KMS_CONTRACT,
        "--env-file",
        "secrets.env",
        "--url",
        "https://keys.example.com",
        "--out",
        "out",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The value after `prefix` on the last line that starts with it.
fn line_value<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .rev()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?} in:\n{text}"))
        .trim()
}

fn assert_no_secret(output: &Output) {
    for stream in [&output.stdout, &output.stderr] {
        let text = String::from_utf8_lossy(stream);
        assert!(
            !text.contains(RPC_SECRET),
            "the RPC secret was printed:\n{text}"
        );
        assert!(
            !text.contains(STRIPE_SECRET),
            "the Stripe secret was printed:\n{text}"
        );
    }
}

async fn block_number(rpc: &str) -> u64 {
    ProviderBuilder::new()
        .connect_reqwest(
            chain_contracts::rpc::http_client().unwrap(),
            rpc.parse().unwrap(),
        )
        .get_block_number()
        .await
        .unwrap()
}

/// An X25519 key pair from node (@noble/curves, which the SDK uses): (secret hex, public hex).
fn x25519_pair() -> (String, String) {
    let out = Command::new("node")
        .env("NODE_PATH", test_support::tools::node_modules())
        .args([
            "-e",
            "const {x25519}=require('@noble/curves/ed25519');const s=x25519.utils.randomPrivateKey();\
             console.log(Buffer.from(s).toString('hex')+' '+Buffer.from(x25519.getPublicKey(s)).toString('hex'))",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let (s, p) = text.trim().split_once(' ').unwrap();
    (s.to_owned(), p.to_owned())
}

/// Decrypts dstack's encrypted env (ephemeral X25519 public key ‖ 12-byte IV ‖ AES-256-GCM
/// ciphertext, the key being the raw X25519 shared secret; as the SDK's encryptEnvVars
/// and dstack's vmm-cli.py write it) with `secret`; returns the JSON.
fn decrypt(blob_hex: &str, secret: &str) -> serde_json::Value {
    let out = Command::new("node")
        .env("NODE_PATH", test_support::tools::node_modules())
        .args([
            "-e",
            "const {x25519}=require('@noble/curves/ed25519');\
             const b=Buffer.from(process.argv[1],'hex');\
             const shared=x25519.getSharedSecret(Buffer.from(process.argv[2],'hex'),b.subarray(0,32));\
             (async()=>{const k=await crypto.subtle.importKey('raw',shared,{name:'AES-GCM'},false,['decrypt']);\
             const pt=await crypto.subtle.decrypt({name:'AES-GCM',iv:b.subarray(32,44)},k,b.subarray(44));\
             process.stdout.write(Buffer.from(pt))})().catch(e=>{console.error(e);process.exit(1)})",
            blob_hex,
            secret,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn dstack_dry_run_prints_the_pinned_deployment_and_sends_nothing() {
    let anvil = e2e::chain::anvil();
    let rpc = anvil.endpoint();
    let dir = workdir(Some(GOVERNANCE));
    let (secret, public) = x25519_pair();
    let mut args = common_args(&rpc);
    let image = image();
    args.extend(
        [
            "--target",
            "dstack",
            "--image",
            &image,
            "--vmm-url",
            "http://127.0.0.1:9/",
            "--kms-url",
            "http://127.0.0.1:9/",
            "--os-image",
            "dstack-0.5.6",
            "--env-pubkey",
            &public,
        ]
        .map(str::to_owned),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let stdout = run_ok(dir.path(), &args);

    // The printed hash is the hash of the file written, by compose-pin's own check.
    let compose = dir.path().join("out/app-compose.json");
    let printed = line_value(&stdout, "compose hash:");
    assert_eq!(printed, compose_pin_hash(&compose));
    // The compose pins the image and allows exactly the secrets' names.
    let app_compose: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&compose).unwrap()).unwrap();
    assert!(
        app_compose["docker_compose_file"]
            .as_str()
            .unwrap()
            .contains(&image)
    );
    assert_eq!(
        app_compose["allowed_envs"],
        serde_json::json!([
            "APPLIANCE_BILLING__STRIPE_SECRET_KEY",
            "APPLIANCE_CHAIN__RPC_URL"
        ]),
        "exactly the secrets' names (compose-pin sorts them)"
    );
    assert_eq!(app_compose["key_provider"], "kms");

    // addComposeHash(<hash>) to the governance contract.
    let hash: [u8; 32] = hex::decode(printed).unwrap().try_into().unwrap();
    let expected = IAppGovernance::addComposeHashCall {
        composeHash: hash.into(),
    }
    .abi_encode();
    let governance: Address = GOVERNANCE.parse().unwrap();
    let to_lines: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("to   "))
        .collect();
    let data_lines: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("data "))
        .collect();
    assert_eq!(to_lines[0].parse::<Address>().unwrap(), governance);
    assert_eq!(data_lines[0], format!("0x{}", hex::encode(&expected)));
    // registerApp(<governance>) to the KMS contract.
    let mut register = keccak256("registerApp(address)")[..4].to_vec();
    register.extend_from_slice(&[0u8; 12]);
    register.extend_from_slice(governance.as_slice());
    assert_eq!(
        to_lines[1].parse::<Address>().unwrap(),
        KMS_CONTRACT.parse::<Address>().unwrap()
    );
    assert_eq!(data_lines[1], format!("0x{}", hex::encode(&register)));

    // The CVM request dstack's VMM would get: app id = the governance address without 0x.
    let app_id = hex::encode(governance.as_slice());
    assert_eq!(line_value(&stdout, "app id:"), app_id);
    let body: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("out/create-vm.json")).unwrap())
            .unwrap();
    assert_eq!(body["app_id"], app_id.as_str());
    assert_eq!(
        body["compose_file"].as_str().unwrap().as_bytes(),
        std::fs::read(&compose).unwrap().as_slice(),
        "the VMM gets the pinned file byte for byte"
    );
    assert_eq!(body["kms_urls"], serde_json::json!(["http://127.0.0.1:9/"]));
    assert!(
        stdout.contains("\"app_id\": \"") && stdout.contains(&format!("\"app_id\": \"{app_id}\""))
    );
    assert!(stdout.contains("POST http://127.0.0.1:9/prpc/CreateVm?json"));
    assert!(stdout.contains("APPLIANCE_BILLING__STRIPE_SECRET_KEY=<secret>"));
    let evidence = e2e::binary("evidence");
    assert!(stdout.contains(&format!(
        "+ {} verify --url https://keys.example.com --rpc-url {rpc}",
        evidence.display()
    )));

    // The secrets, encrypted to the app's key, decrypt back to themselves.
    let blob = std::fs::read_to_string(dir.path().join("out/encrypted-env.hex")).unwrap();
    assert_eq!(
        decrypt(blob.trim(), &secret),
        serde_json::json!({"env": [
            {"key": "APPLIANCE_CHAIN__RPC_URL", "value": RPC_SECRET},
            {"key": "APPLIANCE_BILLING__STRIPE_SECRET_KEY", "value": STRIPE_SECRET},
        ]})
    );

    // Nothing reached the chain.
    assert_eq!(block_number(&rpc).await, 0);
}

#[tokio::test]
async fn dry_run_without_contracts_prints_appliance_deploy_and_deploys_nothing() {
    let anvil = e2e::chain::anvil();
    let rpc = anvil.endpoint();
    let dir = workdir(None);
    let before = std::fs::read(dir.path().join("appliance.toml")).unwrap();
    let mut args = common_args(&rpc);
    let image = image();
    args.extend(
        [
            "--target",
            "phala",
            "--image",
            &image,
            "--governance-owner",
            "0x2222222222222222222222222222222222222222",
        ]
        .map(str::to_owned),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let stdout = run_ok(dir.path(), &args);
    let appliance = e2e::binary("appliance");
    assert!(stdout.contains(&format!(
        "+ {} deploy --rpc {rpc} --config appliance.toml --governance-owner 0x2222222222222222222222222222222222222222",
        appliance.display()
    )), "{stdout}");
    assert_eq!(block_number(&rpc).await, 0, "a dry run deployed something");
    assert_eq!(
        std::fs::read(dir.path().join("appliance.toml")).unwrap(),
        before
    );
}

#[tokio::test]
async fn phala_dry_run_pins_the_compose_and_prints_phala_deploy() {
    let anvil = e2e::chain::anvil();
    let rpc = anvil.endpoint();
    let dir = workdir(Some(GOVERNANCE));
    let mut args = common_args(&rpc);
    let image = image();
    args.extend(["--target", "phala", "--image", &image].map(str::to_owned));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let stdout = run_ok(dir.path(), &args);

    let compose = dir.path().join("out/app-compose.json");
    assert_eq!(
        line_value(&stdout, "compose hash:"),
        compose_pin_hash(&compose)
    );
    let governance: Address = GOVERNANCE.parse().unwrap();
    assert_eq!(
        line_value(&stdout, "app id:"),
        hex::encode(governance.as_slice())
    );
    assert!(
        stdout.contains(&format!(
            "app id to use: {}",
            hex::encode(governance.as_slice())
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "+ phala deploy --name appliance -c out/docker-compose.yml -e secrets.env --kms base --rpc-url {rpc}"
        )),
        "{stdout}"
    );
    // The docker-compose file phala gets is the one inside the pinned app-compose.json.
    let app_compose: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&compose).unwrap()).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out/docker-compose.yml")).unwrap(),
        app_compose["docker_compose_file"].as_str().unwrap()
    );
    assert!(!dir.path().join("out/encrypted-env.hex").exists());
    assert_eq!(block_number(&rpc).await, 0);
}

#[test]
fn missing_inputs_fail_with_exit_2_and_name_them() {
    let dir = workdir(Some(GOVERNANCE));
    // dstack without the VMM, the KMS URL and the OS image.
    let mut args = common_args("http://127.0.0.1:9");
    let image = image();
    args.extend(["--target", "dstack", "--image", &image].map(str::to_owned));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = run(dir.path(), &args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    for name in [
        "--vmm-url (DSTACK_VMM_URL)",
        "--kms-url (DEPLOY_KMS_URL)",
        "--os-image (DEPLOY_OS_IMAGE)",
    ] {
        assert!(
            stderr.contains(&format!("missing input: {name}")),
            "{stderr}"
        );
    }
    assert!(
        !dir.path().join("out").exists(),
        "it wrote files before checking its inputs"
    );

    // Nothing at all: every required input is named.
    let output = run(dir.path(), &["--dry-run"]);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2));
    for name in [
        "--target",
        "--config",
        "--rpc",
        "--kms-contract",
        "--env-file",
        "--url",
    ] {
        assert!(
            stderr.contains(&format!("missing input: {name}")),
            "{stderr}"
        );
    }
    // A malformed secrets file is refused without printing the line (it holds a value).
    std::fs::write(
        dir.path().join("bad.env"),
        format!("not a pair {STRIPE_SECRET}\n"),
    )
    .unwrap();
    let mut args = common_args("http://127.0.0.1:9");
    args.extend(
        [
            "--target",
            "phala",
            "--image",
            &image,
            "--env-file",
            "bad.env",
        ]
        .map(str::to_owned),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = run(dir.path(), &args);
    assert_eq!(output.status.code(), Some(2));
    assert_no_secret(&output);
    assert!(String::from_utf8_lossy(&output.stderr).contains("is not NAME=VALUE"));
    // An image not pinned by digest is refused.
    let mut args = common_args("http://127.0.0.1:9");
    args.extend(
        [
            "--target",
            "phala",
            "--image",
            "ghcr.io/example/appliance:latest",
        ]
        .map(str::to_owned),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = run(dir.path(), &args);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("NAME@sha256:<64 hex>"));
}
