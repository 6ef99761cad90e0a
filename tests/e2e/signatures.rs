//! The wallet-signature (EIP-712) endpoints, with signatures made live by viem
//! (`signTypedData`, what wallets' `eth_signTypedData_v4` returns): every rejection rule
//! over HTTPS, replay (also across a restart), and, against a real anvil, the conversion
//! of an API-mode account to ChainSecured and keys and wallets minted for a wallet owner
//! that work only once registered on chain.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use alloy::primitives::{Address, U256, keccak256};
use alloy::providers::ProviderBuilder;
use alloy::sol_types::SolEventInterface;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chain_contracts::IAccountConfig::{self, IAccountConfigEvents as E};
use e2e::chain::{anvil, key_hash, mirrored_appliance, private_key, wallet};
use e2e::viem::{address, envelope, sign_typed_data, signed, unix_now as now};
use e2e::{Appliance, Launch, eventually_async};
use serde_json::{Value, json};

/// Anvil's well-known dev keys 1 and 2 (public test keys, no value anywhere).
const KEY_1: &str = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const KEY_2: &str = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a";

async fn chain_id(app: &Appliance) -> u64 {
    app.get("/get_node_chain_config", None).await.assert_ok()["chain_id"]
        .as_u64()
        .unwrap()
}

/// Posts and expects `status`, returning the error description.
async fn refused(app: &Appliance, path: &str, body: Value, status: u16) -> String {
    app.post(path, None, body).await.assert_error(status)
}

#[tokio::test]
async fn every_typed_data_rule_is_enforced_on_live_viem_signatures() {
    let app = Appliance::start().await;
    let chain = chain_id(&app).await;
    let address_1 = address(KEY_1);
    const CREATE: &str = "/create_wallet_with_signature";
    const ADD_KEY: &str = "/add_usage_api_key_with_signature";
    // One clock reading: every envelope below has its own issuedAt, so no two collide
    // however long the test takes.
    let t = now();

    // Valid: a wallet is minted, once.
    let good = signed(KEY_1, "CreateWallet", chain, t);
    let wallet = app
        .post(CREATE, None, good.clone())
        .await
        .assert_ok()
        .clone();
    assert!(wallet["wallet_address"].as_str().unwrap().starts_with("0x"));
    assert_eq!(wallet["derivation_path"].as_str().unwrap().len(), 66);
    assert_eq!(wallet["pkp_id"].as_str().unwrap().len(), 66);
    let msg = refused(&app, CREATE, good.clone(), 422).await;
    assert!(msg.contains("already accepted"), "{msg}");

    // Decimal strings are the same values (but this one is a replay).
    let mut as_strings = good.clone();
    as_strings["typed_data"]["domain"]["chainId"] = json!(chain.to_string());
    as_strings["typed_data"]["message"]["issuedAt"] =
        json!(good["typed_data"]["message"]["issuedAt"].to_string());
    assert!(
        refused(&app, CREATE, as_strings, 422)
            .await
            .contains("already accepted")
    );

    // One field changed after signing.
    let mut changed = signed(KEY_1, "CreateWallet", chain, t - 1);
    changed["typed_data"]["message"]["issuedAt"] = json!(t - 2);
    let msg = refused(&app, CREATE, changed, 422).await;
    assert!(msg.contains("recovers to"), "{msg}");

    // Reordered fields, properly signed over the reordered type.
    let mut td = envelope("CreateWallet", chain, &address_1, t - 3);
    td["types"]["CreateWallet"] = json!([
        {"name": "issuedAt", "type": "uint256"},
        {"name": "address", "type": "address"}
    ]);
    let sig = sign_typed_data(KEY_1, &td);
    let msg = refused(
        &app,
        CREATE,
        json!({"typed_data": td, "signature": sig}),
        422,
    )
    .await;
    assert!(msg.contains("differ from the canonical"), "{msg}");

    // An extra type, properly signed.
    let mut td = envelope("CreateWallet", chain, &address_1, t - 4);
    td["types"]["Extra"] = json!([{"name": "note", "type": "string"}]);
    let sig = sign_typed_data(KEY_1, &td);
    let msg = refused(
        &app,
        CREATE,
        json!({"typed_data": td, "signature": sig}),
        422,
    )
    .await;
    assert!(msg.contains("unexpected type `Extra`"), "{msg}");

    // A valid signature for another flow, at each endpoint.
    let convert = signed(KEY_1, "ConvertAccount", chain, t - 5);
    let msg = refused(&app, CREATE, convert.clone(), 422).await;
    assert!(msg.contains("accepts only `CreateWallet`"), "{msg}");
    let create = signed(KEY_1, "CreateWallet", chain, t - 5);
    let msg = refused(&app, ADD_KEY, create.clone(), 422).await;
    assert!(msg.contains("accepts only `AddUsageApiKey`"), "{msg}");
    let billing = signed(KEY_1, "BillingAuth", chain, t - 5);
    refused(&app, ADD_KEY, billing, 422).await;

    // Properly signed for another chain.
    let other_chain = signed(KEY_1, "CreateWallet", chain + 1, t - 6);
    let msg = refused(&app, CREATE, other_chain, 422).await;
    assert!(msg.contains("chain id"), "{msg}");

    // issuedAt 301 s in the past, and beyond 300 s in the future (5 s of slack for the
    // request's own latency).
    for issued_at in [now() - 301, now() + 305] {
        let late = signed(KEY_1, "CreateWallet", chain, issued_at);
        let msg = refused(&app, CREATE, late, 422).await;
        assert!(msg.contains("more than 300 seconds"), "{msg}");
    }

    // Signed by another wallet than message.address.
    let td = envelope("CreateWallet", chain, &address_1, t - 7);
    let sig = sign_typed_data(KEY_2, &td);
    let msg = refused(
        &app,
        CREATE,
        json!({"typed_data": td, "signature": sig}),
        422,
    )
    .await;
    assert!(msg.contains(&address(KEY_2)), "{msg}");

    // Wrong domain name, and a signature that is not 65 bytes.
    let mut td = envelope("CreateWallet", chain, &address_1, t - 8);
    td["domain"]["name"] = json!("Other");
    let sig = sign_typed_data(KEY_1, &td);
    let msg = refused(
        &app,
        CREATE,
        json!({"typed_data": td, "signature": sig}),
        422,
    )
    .await;
    assert!(msg.contains("domain.name"), "{msg}");
    let mut short = signed(KEY_1, "CreateWallet", chain, t - 9);
    short["signature"] = json!(&short["signature"].as_str().unwrap()[..130]);
    let msg = refused(&app, CREATE, short, 422).await;
    assert!(msg.contains("65 bytes"), "{msg}");

    // 4 KiB + 1 byte of serialised typed_data is too large (413); exactly 4 KiB is not
    // (refused for its extra field instead).
    let base = signed(KEY_1, "CreateWallet", chain, t - 10);
    let padded = |total: usize| {
        let mut body = base.clone();
        let len = serde_json::to_vec(&body["typed_data"]).unwrap().len();
        body["typed_data"]["padding"] = json!("x".repeat(total - len - 13));
        assert_eq!(
            serde_json::to_vec(&body["typed_data"]).unwrap().len(),
            total
        );
        body
    };
    let msg = refused(&app, CREATE, padded(4097), 413).await;
    assert!(msg.contains("4097 bytes"), "{msg}");
    let msg = refused(&app, CREATE, padded(4096), 422).await;
    assert!(msg.contains("unexpected field `padding`"), "{msg}");

    // The refused requests consumed nothing: the base signature still works once.
    app.post(CREATE, None, base.clone()).await.assert_ok();

    // A usage key minted for a signature has no identity until registered on chain.
    let minted = app
        .post(ADD_KEY, None, signed(KEY_2, "AddUsageApiKey", chain, t))
        .await
        .assert_ok()
        .clone();
    let key = minted["usage_api_key"].as_str().unwrap();
    let bytes = STANDARD.decode(key).unwrap();
    assert_eq!(bytes.len(), 32);
    assert_eq!(
        minted["usage_api_key_hash"].as_str().unwrap(),
        keccak256(&bytes).to_string()
    );
    assert!(
        minted["derivation_path"]
            .as_str()
            .unwrap()
            .starts_with("0x")
    );
    app.post(
        "/lit_action",
        Some(key),
        json!({"code": "async function main() { return 1; }"}),
    )
    .await
    .assert_error(401);
}

#[tokio::test]
async fn an_accepted_signature_stays_refused_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = Appliance::launch(dir.path(), Launch::Dev).await;
    let chain = chain_id(&app).await;
    let body = signed(KEY_1, "AddUsageApiKey", chain, now());
    app.post("/add_usage_api_key_with_signature", None, body.clone())
        .await
        .assert_ok();
    app.terminate().await;
    let app = Appliance::launch(dir.path(), Launch::Dev).await;
    let msg = refused(&app, "/add_usage_api_key_with_signature", body, 422).await;
    assert!(msg.contains("already accepted"), "{msg}");
}

// ---- against anvil ----------------------------------------------------------------------

fn hex_u256(text: &str) -> U256 {
    U256::from_str_radix(text.trim_start_matches("0x"), 16).unwrap()
}

/// Mints a usage key (and its wallet) with `key`'s `AddUsageApiKey` signature made at
/// `issued_at`: the 200 body (`usage_api_key`, `wallet_address`, `derivation_path`, …).
async fn mint_usage_key(app: &Appliance, key: &str, chain: u64, issued_at: i64) -> Value {
    app.post(
        "/add_usage_api_key_with_signature",
        None,
        signed(key, "AddUsageApiKey", chain, issued_at),
    )
    .await
    .assert_ok()
    .clone()
}

async fn wait<F, Fut>(what: &str, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    assert!(
        eventually_async(Duration::from_secs(30), check).await,
        "timed out waiting until {what}"
    );
}

#[tokio::test]
async fn a_wallet_converts_an_api_mode_account_and_administers_it_on_chain() {
    let anvil = anvil();
    let dir = tempfile::tempdir().unwrap();
    let (app, contract) = mirrored_appliance(dir.path(), &anvil).await;
    let chain = anvil.chain_id();
    let provider = ProviderBuilder::new().connect_reqwest(
        chain_contracts::rpc::http_client().unwrap(),
        anvil.endpoint_url(),
    );
    let view = IAccountConfig::new(contract, &provider);

    // An API-mode account with an action in a group and a usage key that runs it.
    let (key, _) = app.new_account("to convert").await;
    let code = "async function main(p) { return 'ran ' + p.n; }";
    let cid = app.cid_of(code).await;
    let group = app
        .add_group(
            &key,
            json!({"group_name": "runners", "group_description": "", "pkp_ids_permitted": [],
                   "cid_hashes_permitted": []}),
        )
        .await;
    app.add_action_to_group(&key, group, &cid).await;
    let (usage, _) = app
        .add_usage_key(
            &key,
            json!({"can_create_groups": false, "can_delete_groups": false, "can_create_pkps": false,
                   "manage_ipfs_ids_in_groups": [], "add_pkp_to_groups": [],
                   "remove_pkp_from_groups": [], "execute_in_groups": [group]}),
        )
        .await;
    let run = |k: String, code: &'static str| {
        let app = &app;
        async move {
            app.post(
                "/lit_action",
                Some(&k),
                json!({"code": code, "js_params": {"n": 1}}),
            )
            .await
        }
    };
    assert_eq!(
        run(usage.clone(), code).await.assert_ok()["response"],
        json!("ran 1")
    );

    // A wallet (anvil account 7) converts it.
    let admin_key = private_key(&anvil, 7);
    let admin = anvil.addresses()[7];
    let admin_text = address(&admin_key);
    assert_eq!(admin_text.parse::<Address>().unwrap(), admin);
    let converted_at = now();
    let mut body = signed(&admin_key, "ConvertAccount", chain, converted_at);
    // Signed by the admin, but naming another new admin: refused.
    body["new_admin_wallet_address"] = json!(anvil.addresses()[8].to_string());
    let msg = app
        .post(
            "/convert_to_chain_secured_account",
            Some(&key),
            body.clone(),
        )
        .await
        .assert_error(422);
    assert!(msg.contains("new_admin_wallet_address"), "{msg}");
    // A usage key may not convert.
    body["new_admin_wallet_address"] = json!(admin_text);
    app.post(
        "/convert_to_chain_secured_account",
        Some(&usage),
        body.clone(),
    )
    .await
    .assert_error(403);
    let converted = app
        .post("/convert_to_chain_secured_account", Some(&key), body)
        .await
        .assert_ok()
        .clone();
    let account = key_hash(&key);
    assert_eq!(
        hex_u256(converted["api_key_hash"].as_str().unwrap()),
        account
    );
    assert_eq!(converted["wallet_address"], json!(admin_text));

    // The API payer submits the conversion on chain.
    wait("the account is converted on chain", || async {
        view.getAccount(account)
            .call()
            .await
            .map(|a| a.exists && !a.managed && a.admin == admin)
            .unwrap_or(false)
    })
    .await;

    // The former account key is refused for admin writes, with the reason.
    let msg = app
        .post(
            "/add_group",
            Some(&key),
            json!({"group_name": "late", "group_description": "", "pkp_ids_permitted": [],
                   "cid_hashes_permitted": []}),
        )
        .await
        .assert_error(403);
    assert!(
        msg.contains("ChainSecured") && msg.contains(&admin_text),
        "{msg}"
    );
    // Converting again: 409.
    // Another `issuedAt` than the first conversion's, so this is a new signature (the
    // same one would be a replay, 422) whatever the clock read.
    let again = signed(&admin_key, "ConvertAccount", chain, converted_at - 1);
    let mut again = again;
    again["new_admin_wallet_address"] = json!(admin_text);
    app.post("/convert_to_chain_secured_account", Some(&key), again)
        .await
        .assert_error(409);
    // Another account may not take the same admin: a wallet administers at most one
    // ChainSecured account (409), and that account stays in API mode.
    let (other, _) = app.new_account("same admin").await;
    let mut taken = signed(&admin_key, "ConvertAccount", chain, converted_at - 2);
    taken["new_admin_wallet_address"] = json!(admin_text);
    let msg = app
        .post("/convert_to_chain_secured_account", Some(&other), taken)
        .await
        .assert_error(409);
    assert!(msg.contains("already administers"), "{msg}");
    app.get("/list_wallets", Some(&other)).await.assert_ok();
    // Usage keys keep running actions.
    assert_eq!(
        run(usage.clone(), code).await.assert_ok()["response"],
        json!("ran 1")
    );

    // Billing follows the account to its admin wallet: X-Wallet-Auth (BillingAuth), once
    // per signature; another wallet administers no account here.
    let balance = |header: String| {
        let app = &app;
        async move {
            app.send(
                app.request(reqwest::Method::GET, &app.api("/billing/balance"))
                    .header("x-wallet-auth", header),
            )
            .await
        }
    };
    let header = STANDARD.encode(signed(&admin_key, "BillingAuth", chain, now()).to_string());
    balance(header.clone()).await.assert_ok();
    let msg = balance(header).await.assert_error(422);
    assert!(msg.contains("already accepted"), "{msg}");
    let stranger =
        STANDARD.encode(signed(&private_key(&anvil, 8), "BillingAuth", chain, now()).to_string());
    balance(stranger).await.assert_error(401);

    // The new admin renames the group directly on chain; the API shows it.
    let as_admin = IAccountConfig::new(contract, wallet(&anvil, 7));
    let on_chain = view.getGroup(U256::from(group)).call().await.unwrap();
    as_admin
        .updateGroup(
            account,
            U256::from(group),
            "renamed on chain".into(),
            "by the admin wallet".into(),
            on_chain.pkpIds,
            on_chain.cidHashes,
        )
        .send()
        .await
        .unwrap()
        .get_receipt()
        .await
        .unwrap();
    wait("the API shows the on-chain group update", || async {
        app.group(&usage, group)
            .await
            .is_some_and(|g| g["name"] == json!("renamed on chain"))
    })
    .await;

    // A usage key and a wallet minted with the admin's signatures.
    let minted = mint_usage_key(&app, &admin_key, chain, now()).await;
    let new_key = minted["usage_api_key"].as_str().unwrap().to_owned();
    let minted_wallet: Address = minted["wallet_address"].as_str().unwrap().parse().unwrap();
    run(new_key.clone(), code).await.assert_error(401);
    as_admin
        .registerWalletDerivation(
            account,
            minted_wallet,
            hex_u256(minted["derivation_path"].as_str().unwrap()),
            "minted".into(),
            String::new(),
        )
        .send()
        .await
        .unwrap()
        .get_receipt()
        .await
        .unwrap();
    // Registered wallet only: still no identity.
    tokio::time::sleep(Duration::from_millis(500)).await;
    run(new_key.clone(), code).await.assert_error(401);
    as_admin
        .setUsageApiKey(
            account,
            key_hash(&new_key),
            U256::ZERO,
            U256::ZERO,
            "signed key".into(),
            String::new(),
            IAccountConfig::UsageKeyPermissions {
                canCreateGroups: false,
                canDeleteGroups: false,
                canCreatePkps: false,
                manageIpfsIdsInGroups: vec![],
                addPkpToGroups: vec![],
                removePkpFromGroups: vec![],
                executeInGroups: vec![U256::from(group)],
            },
        )
        .send()
        .await
        .unwrap()
        .get_receipt()
        .await
        .unwrap();
    wait("the signed usage key runs the permitted action", || {
        let k = new_key.clone();
        async move { run(k, code).await.status == 200 }
    })
    .await;
    assert_eq!(
        run(new_key.clone(), code).await.assert_ok()["response"],
        json!("ran 1")
    );
    // Exactly the on-chain permissions: other code and group creation are refused.
    run(new_key.clone(), "async function main() { return 2; }")
        .await
        .assert_error(403);
    app.post(
        "/add_group",
        Some(&new_key),
        json!({"group_name": "no", "group_description": "", "pkp_ids_permitted": [],
               "cid_hashes_permitted": []}),
    )
    .await
    .assert_error(403);
    // The registered wallet now belongs to the account.
    let wallets = app.list("/list_wallets", &new_key).await;
    assert!(
        wallets
            .iter()
            .any(|w| w["wallet_address"] == json!(minted_wallet.to_checksum(None))),
        "{wallets:?}"
    );

    // A wallet minted with a CreateWallet signature joins once registered.
    let created = app
        .post(
            "/create_wallet_with_signature",
            None,
            signed(&admin_key, "CreateWallet", chain, now()),
        )
        .await
        .assert_ok()
        .clone();
    let created_wallet: Address = created["wallet_address"].as_str().unwrap().parse().unwrap();
    let receipt = as_admin
        .registerWalletDerivation(
            account,
            created_wallet,
            hex_u256(created["derivation_path"].as_str().unwrap()),
            "created".into(),
            String::new(),
        )
        .send()
        .await
        .unwrap()
        .get_receipt()
        .await
        .unwrap();
    assert!(receipt.inner.logs().iter().any(|l| matches!(
        E::decode_raw_log(l.topics(), &l.data().data),
        Ok(E::WalletRegistered(_))
    )));
    wait("the created wallet is listed", || async {
        app.list("/list_wallets", &new_key)
            .await
            .iter()
            .any(|w| w["wallet_address"] == json!(created_wallet.to_checksum(None)))
    })
    .await;
}

// ---- minted wallets and keys belong to their minter (issue 17, points 5 and 6) ----------

/// An execute-in-all-groups permission set, as a wallet owner sets it on chain.
fn execute_all() -> IAccountConfig::UsageKeyPermissions {
    IAccountConfig::UsageKeyPermissions {
        canCreateGroups: false,
        canDeleteGroups: false,
        canCreatePkps: false,
        manageIpfsIdsInGroups: vec![],
        addPkpToGroups: vec![],
        removePkpFromGroups: vec![],
        executeInGroups: vec![U256::ZERO],
    }
}

/// Exports the key of wallet `p.pkp` and answers its address.
const EXPORT: &str = "async function main(p) { \
    const key = await Lit.Actions.getPrivateKey({ pkpId: p.pkp }); \
    return new ethers.Wallet(key).address; }";

async fn export(app: &Appliance, key: &str, pkp: &str) -> e2e::Reply {
    app.post(
        "/lit_action",
        Some(key),
        json!({"code": EXPORT, "js_params": {"pkp": pkp}}),
    )
    .await
}

/// Sends `setUsageApiKey(account, keccak(key), expiration, …, execute-all)` from `config`'s
/// wallet and waits for its receipt, which must be a success.
async fn set_usage_key<P: alloy::providers::Provider>(
    config: &IAccountConfig::IAccountConfigInstance<P>,
    account: U256,
    key: &str,
    expiration: U256,
    name: &str,
) {
    let receipt = config
        .setUsageApiKey(
            account,
            key_hash(key),
            expiration,
            U256::ZERO,
            name.into(),
            String::new(),
            execute_all(),
        )
        .send()
        .await
        .unwrap()
        .get_receipt()
        .await
        .unwrap();
    assert!(receipt.status(), "setUsageApiKey reverted");
}

/// The front-running of a wallet owner's registrations: an attacker with its own
/// ChainSecured account copies the victim's `registerWalletDerivation` and
/// `setUsageApiKey` and has them mined first. The attacker gets nothing: the wallet copy
/// is refused on chain (the path carries the victim's address), the usage-key copy is
/// ignored by the indexer (the victim minted the key); the victim's own registrations,
/// mined after, succeed; and the attacker's execute-all key cannot export the victim's
/// wallet, which the victim's key can.
#[tokio::test]
async fn a_front_run_registration_gives_the_attacker_nothing_and_the_minter_everything() {
    let anvil = anvil();
    let dir = tempfile::tempdir().unwrap();
    let (app, contract) = mirrored_appliance(dir.path(), &anvil).await;
    let chain = anvil.chain_id();
    let (victim_key, attacker_key) = (private_key(&anvil, 5), private_key(&anvil, 6));
    let victim = IAccountConfig::new(contract, wallet(&anvil, 5));
    let attacker = IAccountConfig::new(contract, wallet(&anvil, 6));
    for config in [&victim, &attacker] {
        config
            .newChainSecuredAccount("cs".into(), String::new())
            .send()
            .await
            .unwrap()
            .get_receipt()
            .await
            .unwrap();
    }
    let account_of = |i: usize| U256::from_be_bytes(keccak256(anvil.addresses()[i].as_slice()).0);
    let (victim_account, attacker_account) = (account_of(5), account_of(6));

    // The attacker's own execute-all usage key, minted and registered by the attacker.
    let own = mint_usage_key(&app, &attacker_key, chain, now()).await;
    let attacker_usage = own["usage_api_key"].as_str().unwrap().to_owned();
    set_usage_key(
        &attacker,
        attacker_account,
        &attacker_usage,
        U256::ZERO,
        "mine",
    )
    .await;
    wait("the attacker's own key works", || async {
        app.post(
            "/lit_action",
            Some(&attacker_usage),
            json!({"code": "async function main() { return 1; }"}),
        )
        .await
        .status
            == 200
    })
    .await;

    // The victim mints a usage key (and its wallet).
    let minted = mint_usage_key(&app, &victim_key, chain, now()).await;
    let victim_usage = minted["usage_api_key"].as_str().unwrap().to_owned();
    let minted_wallet: Address = minted["wallet_address"].as_str().unwrap().parse().unwrap();
    let path = hex_u256(minted["derivation_path"].as_str().unwrap());
    let pkp = minted["pkp_id"].as_str().unwrap().to_owned();
    assert_eq!(
        path >> 96,
        U256::from_be_slice(anvil.addresses()[5].as_slice()),
        "a minted path begins with its minter's address"
    );

    // The attacker copies both registrations, first.
    let copied = attacker
        .registerWalletDerivation(
            attacker_account,
            minted_wallet,
            path,
            "stolen".into(),
            String::new(),
        )
        .send()
        .await;
    let refused = match copied {
        Ok(pending) => panic!(
            "the copied wallet registration was accepted on chain: {}",
            pending.tx_hash()
        ),
        Err(e) => e,
    };
    assert!(
        matches!(
            refused.as_decoded_interface_error::<IAccountConfig::IAccountConfigErrors>(),
            Some(IAccountConfig::IAccountConfigErrors::DerivationPathNotOwned(_))
        ),
        "{refused}"
    );
    set_usage_key(
        &attacker,
        attacker_account,
        &victim_usage,
        U256::ZERO,
        "stolen",
    )
    .await;

    // The victim's own registrations, mined after the attacker's, succeed.
    let receipt = victim
        .registerWalletDerivation(
            victim_account,
            minted_wallet,
            path,
            "mine".into(),
            String::new(),
        )
        .send()
        .await
        .unwrap()
        .get_receipt()
        .await
        .unwrap();
    assert!(receipt.status());
    set_usage_key(&victim, victim_account, &victim_usage, U256::ZERO, "mine").await;

    // The victim's key is the victim's: it exports the minted wallet (positive control).
    wait("the victim's key exports the minted wallet", || async {
        export(&app, &victim_usage, &pkp).await.status == 200
    })
    .await;
    assert_eq!(
        export(&app, &victim_usage, &pkp).await.assert_ok()["response"],
        json!(minted_wallet.to_checksum(None))
    );
    let listed = app.list("/list_wallets", &victim_usage).await;
    assert!(
        listed
            .iter()
            .any(|w| w["wallet_address"] == json!(minted_wallet.to_checksum(None))),
        "{listed:?}"
    );
    // The attacker's execute-all key cannot reach the wallet, nor list it.
    export(&app, &attacker_usage, &pkp).await.assert_error(403);
    let theirs = app.list("/list_wallets", &attacker_usage).await;
    assert!(
        theirs
            .iter()
            .all(|w| w["wallet_address"] != json!(minted_wallet.to_checksum(None))),
        "{theirs:?}"
    );
}

/// A ChainSecured usage key set on chain with an `expiration` a few seconds ahead works
/// until then and is refused after, with the 401 of a removed key; a key set without an
/// expiration keeps working.
#[tokio::test]
async fn a_chain_secured_usage_key_stops_at_its_on_chain_expiration() {
    let anvil = anvil();
    let dir = tempfile::tempdir().unwrap();
    let (app, contract) = mirrored_appliance(dir.path(), &anvil).await;
    let chain = anvil.chain_id();
    let owner_key = private_key(&anvil, 5);
    let owner = IAccountConfig::new(contract, wallet(&anvil, 5));
    owner
        .newChainSecuredAccount("cs".into(), String::new())
        .send()
        .await
        .unwrap()
        .get_receipt()
        .await
        .unwrap();
    let account = U256::from_be_bytes(keccak256(anvil.addresses()[5].as_slice()).0);
    // Two signatures, distinct even within one second (issuedAt differs).
    let (app_ref, owner_ref) = (&app, &owner_key);
    let mint = |issued_at: i64| async move {
        mint_usage_key(app_ref, owner_ref, chain, issued_at).await["usage_api_key"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // One reading of the clock: read twice, a second boundary between the two mints
    // would give both the same `issuedAt`, the same signature, and a replay refusal.
    let issued_at = now();
    let (expiring, lasting) = (mint(issued_at).await, mint(issued_at - 1).await);
    const LIFETIME: i64 = 10;
    let expires_at = now() + LIFETIME;
    set_usage_key(
        &owner,
        account,
        &expiring,
        U256::from(expires_at),
        "expiring",
    )
    .await;
    set_usage_key(&owner, account, &lasting, U256::ZERO, "lasting").await;
    let run = |key: String| {
        let app = &app;
        async move {
            app.post(
                "/lit_action",
                Some(&key),
                json!({"code": "async function main() { return 'ran'; }"}),
            )
            .await
        }
    };
    // Before the expiration: it works (the indexer has applied it).
    wait("the expiring key works", || async {
        run(expiring.clone()).await.status == 200 && run(lasting.clone()).await.status == 200
    })
    .await;
    assert!(
        now() < expires_at,
        "the key was applied only after it expired"
    );
    // After it: refused exactly as a key that does not exist (a removed one).
    let left = u64::try_from(expires_at - now() + 1).unwrap_or(0);
    tokio::time::sleep(Duration::from_secs(left)).await;
    let refused = run(expiring.clone()).await.assert_error(401);
    let unknown = run(STANDARD.encode([7u8; 32])).await.assert_error(401);
    assert_eq!(refused, unknown);
    assert_eq!(
        run(lasting.clone()).await.assert_ok()["response"],
        json!("ran")
    );
}
