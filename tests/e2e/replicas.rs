//! Two appliance replicas (each with its own keyservice process on the dev platform, the
//! two sharing one dev secret as dstack replicas share the KMS's app key) on one
//! PostgreSQL and one anvil: they share accounts, keys, wallets, credit and accepted
//! signatures; the chain relayer runs on one of them and moves to the other when it is
//! killed, with nothing lost or mirrored twice; a row edited directly in the database is
//! refused by both, and a trigger the database runs cannot make either seal a
//! row it did not write.

use std::time::Duration;

use alloy::providers::ProviderBuilder;
use chain_contracts::IAccountConfig::{self, IAccountConfigEvents as E};
use e2e::chain::{anvil, authorize_payers, deploy_account_config, key_hash};
use e2e::replicas::{Cluster, health, launch};
use e2e::{Appliance, LocalStripe, eventually_async};
use serde_json::{Value, json};

/// Anvil's well-known dev key 1 (a public test key, no value anywhere).
const MINTER_KEY: &str = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";

/// Signs a fixed digest with `pkp` in an action on `app`.
async fn sign_digest(app: &Appliance, key: &str, pkp: &str) -> Value {
    app.post(
        "/lit_action",
        Some(key),
        json!({
            "code": "async function main(p) { return await Lit.Actions.signEcdsa({pkpId: p.pkp, toSign: '0x' + '11'.repeat(32)}); }",
            "js_params": {"pkp": pkp},
        }),
    )
    .await
    .assert_ok()["response"]
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_accounts_keys_wallets_credit_and_signatures() {
    let stripe = LocalStripe::start();
    let Some(cluster) = Cluster::start(stripe.env(40)).await else {
        return;
    };
    let (a, b) = (cluster.a(), cluster.b());
    // One root: both keyservices derive the same payers.
    let payers_a = a.get("/get_api_payers", None).await.assert_ok().clone();
    let payers_b = b.get("/get_api_payers", None).await.assert_ok().clone();
    assert_eq!(payers_a, payers_b);

    // An account and a usage key made on A work on B.
    let (key, _) = a.new_account("shared").await;
    let (usage, _) = a
        .add_usage_key(
            &key,
            json!({"name": "u", "description": "", "can_create_groups": false, "can_delete_groups": false,
                   "can_create_pkps": true, "manage_ipfs_ids_in_groups": [], "add_pkp_to_groups": [],
                   "remove_pkp_from_groups": [], "execute_in_groups": [0]}),
        )
        .await;
    b.post("/create_wallet", Some(&usage), json!({}))
        .await
        .assert_ok();

    // A wallet made on A signs the same digest to the same signature on B.
    let wallet = a
        .post("/create_wallet", Some(&key), json!({}))
        .await
        .assert_ok()
        .clone();
    let pkp = wallet["pkp_id"].as_str().unwrap();
    let on_a = sign_digest(a, &key, pkp).await;
    let on_b = sign_digest(b, &key, pkp).await;
    assert!(on_a.as_str().is_some_and(|s| s.len() == 132), "{on_a}");
    assert_eq!(on_a, on_b);

    // A wallet signature accepted by A is refused by B (and by A again).
    let chain = a.get("/get_node_chain_config", None).await.assert_ok()["chain_id"]
        .as_u64()
        .unwrap();
    let mint = e2e::viem::signed(MINTER_KEY, "CreateWallet", chain, e2e::viem::unix_now());
    a.post("/create_wallet_with_signature", None, mint.clone())
        .await
        .assert_ok();
    let msg = b
        .post("/create_wallet_with_signature", None, mint.clone())
        .await
        .assert_error(422);
    assert!(msg.contains("already accepted"), "{msg}");

    // Revocation on A is seen by B within the documented bound (2 s).
    b.post("/create_wallet", Some(&usage), json!({}))
        .await
        .assert_ok();
    a.post(
        "/remove_usage_api_key",
        Some(&key),
        json!({"usage_api_key": usage}),
    )
    .await
    .assert_ok();
    assert!(
        eventually_async(Duration::from_secs(2), || async {
            b.post("/create_wallet", Some(&usage), json!({}))
                .await
                .status
                == 401
        })
        .await,
        "replica B still accepts a key revoked on A"
    );

    // Concurrent billed writes on both replicas never overdraw: 40 cents of credit at one
    // cent a management write (the account has spent some already).
    let spent_before = 40
        - a.get("/billing/balance", Some(&key)).await.assert_ok()["balance_cents"]
            .as_u64()
            .unwrap();
    let mut tasks = Vec::new();
    for i in 0..60 {
        let (app, key) = (cluster.replica(i % 2), key.clone());
        let body = json!({"group_name": format!("g{i}"), "group_description": "",
                          "pkp_ids_permitted": [], "cid_hashes_permitted": []});
        tasks.push(async move { app.post("/add_group", Some(&key), body).await.status });
    }
    let statuses = futures_util::future::join_all(tasks).await;
    let ok = statuses.iter().filter(|s| **s == 200).count() as u64;
    let refused = statuses.iter().filter(|s| **s == 402).count() as u64;
    assert_eq!(ok + refused, 60, "{statuses:?}");
    assert_eq!(ok, 40 - spent_before, "exactly what the credit paid for");
    for app in [a, b] {
        assert_eq!(
            app.get("/billing/balance", Some(&key)).await.assert_ok()["balance_cents"],
            json!(0)
        );
    }
    assert_eq!(b.groups(&key).await.len() as u64, ok);
}

/// Which replica (0 or 1) runs `singleton` now, if exactly one does.
async fn leader(cluster: &Cluster, singleton: &str) -> Option<usize> {
    let mut leaders = Vec::new();
    for i in 0..2 {
        if let Some(app) = cluster.replicas[i].as_ref() {
            let h = health(app).await;
            if h["store"]["leads"]
                .as_array()
                .is_some_and(|l| l.iter().any(|s| s == singleton))
            {
                leaders.push(i);
            }
        }
    }
    (leaders.len() == 1).then(|| leaders[0])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_relaying_replica_hands_the_outbox_over_with_nothing_lost_or_doubled() {
    let anvil = anvil();
    let (contract, from) = deploy_account_config(&anvil).await;
    let mut chain_env = e2e::chain::chain_env(&anvil, contract, from);
    // Small batches, so the queue is still being worked on when the leader dies.
    chain_env.push(("APPLIANCE_CHAIN__BATCH_SIZE".to_owned(), "2".to_owned()));
    let Some(mut cluster) = Cluster::start(chain_env).await else {
        return;
    };
    authorize_payers(&anvil, cluster.a(), contract).await;
    assert!(
        eventually_async(Duration::from_secs(20), || async {
            leader(&cluster, "chain-relayer").await.is_some()
                && leader(&cluster, "chain-indexer").await.is_some()
        })
        .await,
        "one replica leads each singleton"
    );
    let relaying = leader(&cluster, "chain-relayer").await.unwrap();
    let other = 1 - relaying;

    // Writes on both replicas, then the relaying replica is killed with the queue full.
    let (key, _) = cluster.replica(other).new_account("mirrored").await;
    let mut usage_keys = Vec::new();
    for i in 0..12 {
        let app = cluster.replica(i % 2);
        let (usage, _) = app
            .add_usage_key(
                &key,
                json!({"name": format!("u{i}"), "description": "", "can_create_groups": false,
                       "can_delete_groups": false, "can_create_pkps": false,
                       "manage_ipfs_ids_in_groups": [], "add_pkp_to_groups": [],
                       "remove_pkp_from_groups": [], "execute_in_groups": []}),
            )
            .await;
        usage_keys.push(usage);
    }
    cluster.replicas[relaying].as_mut().unwrap().kill9();
    cluster.replicas[relaying] = None;
    // The survivor takes the outbox over and keeps taking writes.
    for i in 12..16 {
        let (usage, _) = cluster
            .replica(other)
            .add_usage_key(
                &key,
                json!({"name": format!("u{i}"), "description": "", "can_create_groups": false,
                       "can_delete_groups": false, "can_create_pkps": false,
                       "manage_ipfs_ids_in_groups": [], "add_pkp_to_groups": [],
                       "remove_pkp_from_groups": [], "execute_in_groups": []}),
            )
            .await;
        usage_keys.push(usage);
    }
    assert!(
        eventually_async(Duration::from_secs(20), || async {
            leader(&cluster, "chain-relayer").await == Some(other)
        })
        .await,
        "the surviving replica took the relayer over"
    );
    let provider = ProviderBuilder::new().connect_reqwest(
        chain_contracts::rpc::http_client().unwrap(),
        anvil.endpoint_url(),
    );
    let view = IAccountConfig::new(contract, &provider);
    let account = key_hash(&key);
    assert!(
        eventually_async(Duration::from_secs(60), || async {
            let mut all = true;
            for usage in &usage_keys {
                all &= view
                    .getUsageApiKey(key_hash(usage))
                    .call()
                    .await
                    .is_ok_and(|k| k.apiKeyHash == account);
            }
            all
        })
        .await,
        "every usage key reached the chain"
    );
    // Exactly once each: one UsageApiKeySet event per key, one AccountCreated.
    let events = e2e::chain::account_config_events(&anvil, contract).await;
    for usage in &usage_keys {
        let hash = key_hash(usage);
        let n = events
            .iter()
            .filter(|e| matches!(e, E::UsageApiKeySet(s) if s.usageKeyHash == hash))
            .count();
        assert_eq!(n, 1, "usage key mirrored {n} times");
    }
    let created = events
        .iter()
        .filter(|e| matches!(e, E::AccountCreated(c) if c.apiKeyHash == account))
        .count();
    assert_eq!(created, 1);

    // The killed replica comes back and serves again (as a follower now).
    let back = relaying;
    cluster.replicas[back] = Some(launch(&cluster.dirs[back], &cluster.env).await);
    cluster
        .replica(back)
        .get("/billing/balance", Some(&key))
        .await
        .assert_ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_edited_directly_in_the_database_is_refused_by_every_replica() {
    let Some(cluster) = Cluster::start(Vec::new()).await else {
        return;
    };
    let (a, b) = (cluster.a(), cluster.b());
    let (key, _) = a.new_account("victim").await;
    let (usage, _) = a
        .add_usage_key(
            &key,
            json!({"name": "reader", "description": "", "can_create_groups": false,
                   "can_delete_groups": false, "can_create_pkps": false,
                   "manage_ipfs_ids_in_groups": [], "add_pkp_to_groups": [],
                   "remove_pkp_from_groups": [], "execute_in_groups": []}),
        )
        .await;
    // It may not create wallets.
    b.post("/create_wallet", Some(&usage), json!({}))
        .await
        .assert_error(403);
    // The database's operator grants it the right.
    cluster
        .behind_the_back("UPDATE usage_keys SET can_create_pkps = 1")
        .await;
    for app in [a, b] {
        // Within the key cache's bound, the key is refused outright (not used).
        assert!(
            eventually_async(Duration::from_secs(3), || async {
                app.post("/create_wallet", Some(&usage), json!({}))
                    .await
                    .status
                    == 500
            })
            .await,
            "a tampered usage key was used"
        );
        let h = health(app).await;
        assert_eq!(h["status"], json!("alert"), "{h}");
        assert!(h["store"]["refused_rows"].as_u64().unwrap() >= 1, "{h}");
        assert_eq!(
            h["store"]["last_refused"]["table"],
            json!("usage_keys"),
            "{h}"
        );
        // (The log is written off the request path: allow it a moment under load.)
        assert!(
            e2e::eventually(Duration::from_secs(5), || app
                .log()
                .contains("failed its MAC"))
            .await,
            "the refusal is logged"
        );
    }
    // The account's own key, untouched, still works.
    a.post("/create_wallet", Some(&key), json!({}))
        .await
        .assert_ok();
}

/// Issue 33's attack on the trigger design: the database's operator adds a trigger that
/// moves the victim's wallet to the attacker's account whenever the appliance writes an
/// accepted signature, then makes the appliance write one with the unauthenticated
/// `/create_wallet_with_signature`. The appliance never MACs the moved row: the attacker
/// cannot sign with (or export) the victim's wallet, the refusal is logged and counted,
/// and the trigger is named on `/health`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_trigger_cannot_hand_the_victims_wallet_to_the_attacker() {
    let Some(cluster) = Cluster::start_n(
        1,
        vec![(
            "APPLIANCE_STORE__INTEGRITY_CHECK_INTERVAL_SECS".into(),
            "1".into(),
        )],
    )
    .await
    else {
        return;
    };
    let app = cluster.a();
    let (victim, _) = app.new_account("victim").await;
    let (attacker, _) = app.new_account("attacker").await;
    let wallet = app
        .post("/create_wallet", Some(&victim), json!({}))
        .await
        .assert_ok()
        .clone();
    let pkp = wallet["pkp_id"].as_str().unwrap().to_owned();
    let pkp_hex = pkp.trim_start_matches("0x");
    cluster
        .behind_the_back(&format!(
            "CREATE FUNCTION steal() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 UPDATE wallets SET account_id = (SELECT id FROM accounts WHERE name = 'attacker')
                  WHERE pkp_id = decode('{pkp_hex}', 'hex');
                 RETURN NEW;
             END $$;
             CREATE TRIGGER steal AFTER INSERT ON accepted_signatures
                 FOR EACH ROW EXECUTE FUNCTION steal();"
        ))
        .await;
    // Anyone can make the appliance write an accepted signature.
    let chain = app.get("/get_node_chain_config", None).await.assert_ok()["chain_id"]
        .as_u64()
        .unwrap();
    let mint = e2e::viem::signed(MINTER_KEY, "CreateWallet", chain, e2e::viem::unix_now());
    app.post("/create_wallet_with_signature", None, mint)
        .await
        .assert_ok();
    // The attacker's key cannot use the victim's wallet in an action.
    let stolen = app
        .post(
            "/lit_action",
            Some(&attacker),
            json!({
                "code": "async function main(p) { return await Lit.Actions.signEcdsa({pkpId: p.pkp, toSign: '0x' + '11'.repeat(32)}); }",
                "js_params": {"pkp": pkp},
            }),
        )
        .await;
    assert!(
        stolen.body["response"]
            .as_str()
            .is_none_or(|r| !r.starts_with("0x") || r.len() != 132),
        "the attacker signed with the victim's wallet: {:?}",
        stolen.body
    );
    // Nor list it as its own.
    app.get("/list_wallets?page_size=100", Some(&attacker))
        .await
        .assert_error(500);
    let h = health(app).await;
    assert_eq!(h["status"], json!("alert"), "{h}");
    assert!(h["store"]["refused_rows"].as_u64().unwrap() >= 1, "{h}");
    assert_eq!(h["store"]["last_refused"]["table"], json!("wallets"), "{h}");
    assert!(
        app.log().contains("failed its MAC"),
        "the refusal is logged"
    );
    // The periodic check names the trigger and its function.
    assert!(
        eventually_async(Duration::from_secs(10), || async {
            let h = health(app).await;
            let foreign = h["store"]["foreign_objects"].to_string();
            foreign.contains("trigger public.accepted_signatures.steal")
                && foreign.contains("function public.steal")
        })
        .await,
        "the foreign trigger was not reported: {}",
        health(app).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_root_exports_and_imports_for_an_upgrade() {
    let Some(cluster) = Cluster::start_n(1, Vec::new()).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = |args: &[&str]| {
        e2e::appliance_command()
            .arg("root")
            .args(args)
            .env("APPLIANCE_STORE__ENGINE", "postgres")
            .env("APPLIANCE_STORE__URL", &cluster.url)
            .output()
            .unwrap()
    };
    let out = dir.path().join("shared-root.sealed");
    let exported = root(&["export", "--out", out.to_str().unwrap()]);
    assert!(exported.status.success(), "{exported:?}");
    let line = String::from_utf8_lossy(&exported.stdout).into_owned();
    assert!(line.contains("exported the shared root"), "{line}");
    let blob = std::fs::read(&out).unwrap();
    assert_eq!((blob.len(), &blob[..8]), (101, &b"KSVCSEAL"[..]));
    // The file is never overwritten.
    assert!(
        !root(&["export", "--out", out.to_str().unwrap()])
            .status
            .success()
    );
    // A resealed blob (here: the same one) imports under the compose hash of its header.
    let imported = root(&["import", "--from", out.to_str().unwrap()]);
    assert!(imported.status.success(), "{imported:?}");
    // Anything else is refused, and nothing changes.
    let junk = dir.path().join("junk");
    std::fs::write(&junk, [0u8; 101]).unwrap();
    let refused = root(&["import", "--from", junk.to_str().unwrap()]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("not a keyservice sealed root"),
        "{refused:?}"
    );
    // The replica still holds and serves with its root.
    cluster.a().get("/get_api_payers", None).await.assert_ok();
}

/// Replicas on PostgreSQL: the operator's reseal (`/operator/v1/reseal`) reseals the
/// database's shared root in a replica's keyservice and records the result in the
/// database beside the running one, where the new version's replicas find it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_reseals_the_shared_root_into_the_database() {
    use alloy::primitives::B256;
    use chain_contracts::{IAppGovernance, deploy_app_governance};
    use k256::ecdsa::SigningKey;
    use operator_auth::{Action, OperatorRequest, address_of, sign};

    let chain = anvil();
    let owner = test_support::chain::wallet(&chain, 0);
    let governance = deploy_app_governance(&owner).await.unwrap();
    // Anvil's well-known dev key 8 (a public test key) plays the operator.
    let operator = SigningKey::from_slice(
        &hex::decode("dbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97").unwrap(),
    )
    .unwrap();
    let operator_address = format!("0x{}", hex::encode(address_of(operator.verifying_key())));
    let Some(cluster) = Cluster::start_n(
        1,
        vec![
            (
                "APPLIANCE_OPERATOR__ADDRESSES".to_owned(),
                format!("[\"{operator_address}\"]"),
            ),
            (
                "APPLIANCE_CHAIN__GOVERNANCE_ADDRESS".to_owned(),
                governance.to_string(),
            ),
            ("KEYSERVICE_GOVERNANCE_RPC".to_owned(), chain.endpoint()),
        ],
    )
    .await
    else {
        return;
    };
    let app = cluster.a();
    let info = app.send(app.client.get(app.url("/info"))).await;
    let info = info.assert_ok().clone();
    let unhex = |v: &Value| hex::decode(v.as_str().unwrap().trim_start_matches("0x")).unwrap();
    let target = [0x5a; 32];
    test_support::chain::send(
        IAppGovernance::new(governance, &owner).addComposeHash(B256::from(target)),
    )
    .await;
    let request = OperatorRequest {
        action: Action::Reseal { target },
        app: unhex(&info["app_id"]).try_into().unwrap(),
        compose_hash: unhex(&info["compose_hash"]).try_into().unwrap(),
        issued_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
        nonce: [0x42; 16],
    };
    let text = request.render();
    let body = json!({
        "request": text,
        "signature": format!("0x{}", hex::encode(sign(&operator, text.as_bytes()).unwrap())),
    });
    let resealed = app
        .send(app.client.post(app.url("/operator/v1/reseal")).json(&body))
        .await;
    let resealed = resealed.assert_ok().clone();
    assert_eq!(resealed["stored"], "database", "{resealed}");
    // The database now holds the root sealed for both compose hashes, with one root id.
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("next.sealed");
    let exported = e2e::appliance_command()
        .args([
            "root",
            "export",
            "--compose-hash",
            &hex::encode(target),
            "--out",
        ])
        .arg(&file)
        .env("APPLIANCE_STORE__ENGINE", "postgres")
        .env("APPLIANCE_STORE__URL", &cluster.url)
        .output()
        .unwrap();
    assert!(exported.status.success(), "{exported:?}");
    let line = String::from_utf8_lossy(&exported.stdout).into_owned();
    assert!(
        line.contains(
            resealed["root_id"]
                .as_str()
                .unwrap()
                .trim_start_matches("0x")
        ),
        "{line} / {resealed}"
    );
    let blob = std::fs::read(&file).unwrap();
    assert_eq!(&blob[9..41], &target[..], "sealed for the target hash");
    // The same request again is a replay.
    let again = app
        .send(app.client.post(app.url("/operator/v1/reseal")).json(&body))
        .await;
    assert_eq!(again.status, 401, "{}", again.text);
}

/// The leaf certificate `port` serves for `domain`, verified against `root_pem`.
async fn served_leaf(port: u16, domain: &str, root_pem: &str) -> Option<Vec<u8>> {
    let config = e2e::http::tls_client_config(root_pem.as_bytes(), b"http/1.1");
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(
            rustls_pki_types::ServerName::try_from(domain.to_owned()).ok()?,
            tcp,
        )
        .await
        .ok()?;
    Some(tls.get_ref().1.peer_certificates()?[0].as_ref().to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_behind_a_balancer_share_one_acme_account_and_certificate() {
    use e2e::pebble::{Pebble, PebbleOptions, free_port};
    const DOMAIN: &str = "replicas.acme.test";
    // The balancer's port is where Pebble validates TLS-ALPN-01: each validation reaches
    // whichever replica is next, as behind a real L4 balancer.
    let front = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let front_port = front.local_addr().unwrap().port();
    let pebble = Pebble::start(PebbleOptions {
        tls_port: front_port,
        http_port: free_port(),
        ..PebbleOptions::default()
    })
    .await;
    let root = pebble.root_pem().await;
    let ports = [free_port(), free_port()];
    let mut acme = pebble.appliance_env(&[DOMAIN]);
    acme.push((
        "APPLIANCE_ACME__CHALLENGE".to_owned(),
        "tls-alpn-01".to_owned(),
    ));
    let own = ports
        .iter()
        .map(|p| vec![("APPLIANCE_LISTEN".to_owned(), format!("127.0.0.1:{p}"))])
        .collect();
    let Some(cluster) = Cluster::start_each(acme, own).await else {
        return;
    };
    let _balancer = e2e::replicas::Balancer::serve(front, ports.to_vec());

    // One replica orders; both serve the certificate it got, under one account.
    assert!(
        eventually_async(Duration::from_secs(90), || async {
            let a = served_leaf(ports[0], DOMAIN, &root).await;
            a.is_some() && a == served_leaf(ports[1], DOMAIN, &root).await
        })
        .await,
        "both replicas serve one ACME certificate; logs:\n{}\n{}",
        cluster.a().log(),
        cluster.b().log()
    );
    let first = served_leaf(ports[0], DOMAIN, &root).await.unwrap();
    let via = |port: u16| {
        reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(root.as_bytes()).unwrap())
            .tls_built_in_root_certs(false)
            .resolve(DOMAIN, format!("127.0.0.1:{port}").parse().unwrap())
            .build()
            .unwrap()
    };
    let health_of = |port: u16| {
        let client = via(port);
        async move {
            client
                .get(format!("https://{DOMAIN}:{port}/health"))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let (ha, hb) = (health_of(ports[0]).await, health_of(ports[1]).await);
    let ordered = ha["acme"]["issued"].as_u64().unwrap() + hb["acme"]["issued"].as_u64().unwrap();
    assert_eq!(ordered, 1, "one order for both replicas: {ha}\n{hb}");
    let leads_acme = |h: &Value| {
        h["store"]["leads"]
            .as_array()
            .is_some_and(|l| l.iter().any(|s| s == "acme"))
    };
    assert!(leads_acme(&ha) ^ leads_acme(&hb), "{ha}\n{hb}");
    // Both replicas' evidence announce the same next key (the attested client recognises
    // a renewal on any replica); the evidence is served over the ACME certificate now.
    let mut announced = Vec::new();
    for port in ports {
        let body: Value = via(port)
            .get(format!(
                "https://{DOMAIN}:{port}/evidences/next-tls-key.json"
            ))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        announced.push(body);
    }
    assert_eq!(announced[0], announced[1]);

    // A renewal by the leader reaches the other replica within its follow interval.
    let leader = if leads_acme(&ha) { 0 } else { 1 };
    e2e::signal(cluster.replica(leader).pid(), "USR1");
    assert!(
        eventually_async(Duration::from_secs(60), || async {
            let a = served_leaf(ports[0], DOMAIN, &root).await;
            let b = served_leaf(ports[1], DOMAIN, &root).await;
            a.is_some() && a == b && a.as_deref() != Some(first.as_slice())
        })
        .await,
        "the renewed certificate is served by both replicas"
    );
}
