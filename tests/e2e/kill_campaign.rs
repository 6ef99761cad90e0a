//! A `kill -9` campaign: while clients issue mixed writes (new accounts, usage keys,
//! groups, wallets) and billed action runs against an appliance with billing enabled and
//! its chain mirror attached (anvil), the appliance, its keyservice and an action worker
//! are killed with SIGKILL at random moments (seeded; the seed is printed, and
//! `KILL_CAMPAIGN_SEED=<seed>` replays the same choices) and come back (the appliance is
//! restarted on its data directory; keyservice and the workers are restarted by their
//! supervisors). Afterwards:
//!
//! * every write a client saw acknowledged (2xx) is there, through the API and the store;
//! * every account's balance equals the sum of its ledger rows, and the API reports it;
//!   each stored billed object was charged exactly once, and each acknowledged action run
//!   was charged (never more runs charged than were sent);
//! * the outbox has mirrored everything exactly once: once the relayer has drained,
//!   every account, usage key, group and wallet in the store has exactly one event on the
//!   `AccountConfig` contract, and the chain has none the store does not.
//!
//! `KILL_CAMPAIGN_SECONDS` (default 75) sets how long the kills go on.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy::node_bindings::AnvilInstance;
use alloy::primitives::{Address, U256};
use e2e::chain::{
    Mirrored, anvil, appliance_on_with, assert_mirrored_once, authorize_payers,
    deploy_account_config, key_hash,
};
use e2e::rng::Rng;
use e2e::{Appliance, children_of, eventually_async, signal};
use serde_json::{Value, json};
use tokio::sync::watch;

const INITIAL_CREDIT: u64 = 1_000_000;
const HELLO: &str = r#"async function main() { return "hello world"; }"#;
/// Keeps its worker busy for a moment, so a killed worker is often a busy one.
const BUSY: &str =
    r#"async function main() { const t = Date.now(); while (Date.now() - t < 400) {} return 1; }"#;
const SIGN: &str = r#"async function main(p) {
    const pk = await Lit.Actions.getPrivateKey({pkpId: p.pkpId});
    return await new ethers.Wallet(pk).signMessage("kill campaign");
}"#;

/// The appliance the clients talk to now (`None` while it is down).
#[derive(Clone)]
struct Target {
    api: String,
    client: reqwest::Client,
}

impl Target {
    fn of(app: &Appliance) -> Self {
        Self {
            api: app.api(""),
            client: app.client.clone(),
        }
    }
}

/// What the clients saw acknowledged, and the action runs they sent.
#[derive(Default)]
struct Acked {
    /// Account keys, in creation order.
    accounts: Vec<String>,
    /// (account key, usage key hash as the API returned it).
    usage_keys: Vec<(String, String)>,
    /// (account key, group id).
    groups: Vec<(String, u64)>,
    /// (account key, pkp id).
    wallets: Vec<(String, String)>,
    /// Action runs answered 200, per account key.
    runs_ok: BTreeMap<String, u64>,
    /// Action runs sent, per account key (whatever became of them).
    runs_sent: BTreeMap<String, u64>,
    /// Requests that failed (transport errors while something was down, 5xx, ...).
    failures: u64,
    /// Every request sent.
    sent: u64,
}

/// The body of a 2xx answer, or `None` (not acknowledged).
async fn send(req: reqwest::RequestBuilder) -> Option<Value> {
    let rsp = req.timeout(Duration::from_secs(15)).send().await.ok()?;
    if !rsp.status().is_success() {
        return None;
    }
    rsp.json().await.ok()
}

/// One client: mixed writes and action runs until `stop`.
async fn client_loop(
    mut rng: Rng,
    target: watch::Receiver<Option<Target>>,
    acked: Arc<Mutex<Acked>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    tag: usize,
) {
    let mut n = 0u64;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let Some(t) = target.borrow().clone() else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        n += 1;
        let roll = rng.below(100);
        let (account, pkp) = {
            let a = acked.lock().unwrap();
            if a.accounts.is_empty() || roll < 8 {
                (None, None)
            } else {
                let key = a.accounts[rng.below(a.accounts.len())].clone();
                let pkps: Vec<&String> = a
                    .wallets
                    .iter()
                    .filter(|(k, _)| *k == key)
                    .map(|(_, p)| p)
                    .collect();
                let pkp = (!pkps.is_empty()).then(|| pkps[rng.below(pkps.len())].clone());
                (Some(key), pkp)
            }
        };
        acked.lock().unwrap().sent += 1;
        let post = |path: &str, key: &str, body: Value| {
            t.client
                .post(format!("{}{path}", t.api))
                .bearer_auth(key)
                .json(&body)
        };
        let ok = match account {
            None => {
                let body = send(t.client.post(format!("{}/new_account", t.api)).json(
                    &json!({"account_name": format!("c{tag}-{n}"), "account_description": "campaign"}),
                ))
                .await;
                match body.and_then(|b| b["api_key"].as_str().map(str::to_owned)) {
                    Some(key) => {
                        acked.lock().unwrap().accounts.push(key);
                        true
                    }
                    None => false,
                }
            }
            Some(key) => match roll {
                8..30 => {
                    let body = send(post(
                        "/add_usage_api_key",
                        &key,
                        json!({"name": format!("k{tag}-{n}"), "description": "",
                               "can_create_groups": n.is_multiple_of(2), "can_delete_groups": false,
                               "can_create_pkps": true, "manage_ipfs_ids_in_groups": [],
                               "add_pkp_to_groups": [], "remove_pkp_from_groups": [],
                               "execute_in_groups": []}),
                    ))
                    .await;
                    match body.and_then(|b| b["api_key_hash"].as_str().map(str::to_owned)) {
                        Some(hash) => {
                            acked.lock().unwrap().usage_keys.push((key, hash));
                            true
                        }
                        None => false,
                    }
                }
                30..52 => {
                    let pkps: Vec<&String> = pkp.iter().collect();
                    let body = send(post(
                        "/add_group",
                        &key,
                        json!({"group_name": format!("g{tag}-{n}"), "group_description": "",
                               "pkp_ids_permitted": pkps, "cid_hashes_permitted": []}),
                    ))
                    .await;
                    let id = body.and_then(|b| b["group_id"].as_str().and_then(|s| s.parse().ok()));
                    match id {
                        Some(id) => {
                            acked.lock().unwrap().groups.push((key, id));
                            true
                        }
                        None => false,
                    }
                }
                52..70 => {
                    let body = send(post("/create_wallet", &key, json!({}))).await;
                    match body.and_then(|b| b["pkp_id"].as_str().map(str::to_owned)) {
                        Some(pkp) => {
                            acked.lock().unwrap().wallets.push((key, pkp));
                            true
                        }
                        None => false,
                    }
                }
                _ => {
                    let body = match (roll, &pkp) {
                        (70..80, Some(pkp)) => json!({"code": SIGN, "js_params": {"pkpId": pkp}}),
                        (70..90, _) => json!({"code": BUSY}),
                        _ => json!({"code": HELLO}),
                    };
                    *acked
                        .lock()
                        .unwrap()
                        .runs_sent
                        .entry(key.clone())
                        .or_default() += 1;
                    match send(post("/lit_action", &key, body)).await {
                        Some(_) => {
                            *acked.lock().unwrap().runs_ok.entry(key).or_default() += 1;
                            true
                        }
                        None => false,
                    }
                }
            },
        };
        if !ok {
            acked.lock().unwrap().failures += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn billing_env() -> Vec<(&'static str, String)> {
    vec![
        (
            "APPLIANCE_BILLING__STRIPE_SECRET_KEY",
            "sk_test_campaign0123456789secret".into(),
        ),
        (
            "APPLIANCE_BILLING__STRIPE_PUBLISHABLE_KEY",
            "pk_test_campaign0123456789".into(),
        ),
        // Never called: the campaign makes no payments.
        (
            "APPLIANCE_BILLING__STRIPE_API_BASE",
            "http://127.0.0.1:9".into(),
        ),
        (
            "APPLIANCE_BILLING__INITIAL_CREDIT_CENTS",
            INITIAL_CREDIT.to_string(),
        ),
    ]
}

async fn start(dir: &Path, anvil: &AnvilInstance, contract: Address, from: u64) -> Appliance {
    let env = billing_env();
    let extra: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    appliance_on_with(dir, anvil, contract, from, &extra).await
}

fn db(dir: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open_with_flags(
        dir.join("state.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap()
}

fn count(conn: &rusqlite::Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// `(state, count)` of the outbox rows.
fn outbox_states(dir: &Path) -> BTreeMap<String, i64> {
    let conn = db(dir);
    let mut stmt = conn
        .prepare("SELECT state, count(*) FROM chain_outbox GROUP BY state")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn u256_of(bytes: &[u8]) -> U256 {
    U256::from_be_slice(bytes)
}

/// Rows of one column of 32- or 20-byte blobs.
fn blobs(conn: &rusqlite::Connection, sql: &str) -> Vec<Vec<u8>> {
    let mut stmt = conn.prepare(sql).unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The live keyservice child of the appliance `pid`.
fn keyservice_of(pid: u32) -> Option<u32> {
    children_of(pid, "keyservice run").first().copied()
}

/// The live action workers of the appliance `pid` (children of its worker launcher).
fn workers_of(pid: u32) -> Vec<u32> {
    children_of(pid, "worker-launcher")
        .into_iter()
        .flat_map(|launcher| children_of(launcher, "action-worker"))
        .collect()
}

#[tokio::test]
async fn acknowledged_writes_charges_and_mirrors_survive_random_kill_9s() {
    let seed = e2e::rng::seed_from_env("KILL_CAMPAIGN_SEED");
    let seconds: u64 = std::env::var("KILL_CAMPAIGN_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(75);
    println!("kill campaign: seed {seed} (replay with KILL_CAMPAIGN_SEED={seed}), {seconds} s");
    let mut rng = Rng(seed);

    let anvil = anvil();
    let (contract, from) = deploy_account_config(&anvil).await;
    let tmp = tempfile::tempdir().unwrap();
    let dir: PathBuf = tmp.path().to_owned();
    let app = start(&dir, &anvil, contract, from).await;
    authorize_payers(&anvil, &app, contract).await;

    let (target_tx, target_rx) = watch::channel(Some(Target::of(&app)));
    let acked = Arc::new(Mutex::new(Acked::default()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..3)
        .map(|i| {
            tokio::spawn(client_loop(
                Rng(rng.next_u64()),
                target_rx.clone(),
                acked.clone(),
                stop.clone(),
                i,
            ))
        })
        .collect();

    // The kills.
    let mut app = Some(app);
    let mut kills: BTreeMap<&str, u32> = BTreeMap::new();
    let until = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < until {
        tokio::time::sleep(rng.millis(1500, 5000)).await;
        let pid = app.as_ref().unwrap().pid();
        match rng.below(10) {
            0..4 => {
                let _ = target_tx.send(None);
                app.as_mut().unwrap().kill9();
                drop(app.take());
                tokio::time::sleep(rng.millis(0, 1000)).await;
                let next = start(&dir, &anvil, contract, from).await;
                let _ = target_tx.send(Some(Target::of(&next)));
                app = Some(next);
                *kills.entry("appliance").or_default() += 1;
            }
            4..7 => {
                if let Some(ks) = keyservice_of(pid) {
                    signal(ks, "KILL");
                    *kills.entry("keyservice").or_default() += 1;
                }
            }
            _ => {
                let workers = workers_of(pid);
                if !workers.is_empty() {
                    signal(workers[rng.below(workers.len())], "KILL");
                    *kills.entry("action-worker").or_default() += 1;
                }
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    let app = app.unwrap();
    let acked = std::mem::take(&mut *acked.lock().unwrap());
    println!(
        "kills: {kills:?}; requests sent {}, not acknowledged {}; acknowledged: {} accounts, \
         {} usage keys, {} groups, {} wallets, {} action runs",
        acked.sent,
        acked.failures,
        acked.accounts.len(),
        acked.usage_keys.len(),
        acked.groups.len(),
        acked.wallets.len(),
        acked.runs_ok.values().sum::<u64>()
    );
    assert!(
        kills.get("appliance").copied().unwrap_or(0) >= 1 && kills.len() >= 2,
        "seed {seed}: too few kills to mean anything: {kills:?}"
    );
    assert!(
        acked.accounts.len() >= 3 && acked.groups.len() >= 3 && acked.wallets.len() >= 3,
        "seed {seed}: too few acknowledged writes to mean anything"
    );

    // 1. Every acknowledged write is there, through the API.
    for key in &acked.accounts {
        assert_eq!(
            app.get("/account_exists", Some(key)).await.assert_ok(),
            &json!(true),
            "seed {seed}: an acknowledged account is gone"
        );
    }
    let by_account = |items: &[(String, String)]| {
        let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (k, v) in items {
            m.entry(k.clone()).or_default().push(v.clone());
        }
        m
    };
    for (key, hashes) in by_account(&acked.usage_keys) {
        let listed = app.list("/list_api_keys?page_size=1000", &key).await;
        let listed: BTreeSet<&str> = listed
            .iter()
            .filter_map(|k| k["api_key_hash"].as_str())
            .collect();
        for h in &hashes {
            assert!(
                listed.contains(h.as_str()),
                "seed {seed}: acknowledged usage key {h} lost"
            );
        }
    }
    let groups: Vec<(String, String)> = acked
        .groups
        .iter()
        .map(|(k, g)| (k.clone(), g.to_string()))
        .collect();
    for (key, ids) in by_account(&groups) {
        let listed = app.groups(&key).await;
        let listed: BTreeSet<&str> = listed.iter().filter_map(|g| g["id"].as_str()).collect();
        for id in &ids {
            assert!(
                listed.contains(id.as_str()),
                "seed {seed}: acknowledged group {id} lost"
            );
        }
    }
    for (key, pkps) in by_account(&acked.wallets) {
        let listed = app.list("/list_wallets?page_size=1000", &key).await;
        let listed: BTreeSet<&str> = listed.iter().filter_map(|w| w["pkp_id"].as_str()).collect();
        for p in &pkps {
            assert!(
                listed.contains(p.as_str()),
                "seed {seed}: acknowledged wallet {p} lost"
            );
        }
    }

    // 2. The ledger: balance = sum of rows for every account; the API says the same; each
    // stored billed object was charged exactly once; each acknowledged run was charged.
    let conn = db(&dir);
    let mut stmt = conn
        .prepare(
            "SELECT a.id, a.api_key_hash, b.balance_cents,
                    (SELECT sum(amount_cents) FROM credit_ledger l WHERE l.account_id = a.id),
                    (SELECT balance_after FROM credit_ledger l WHERE l.account_id = a.id
                     ORDER BY id DESC LIMIT 1)
             FROM accounts a LEFT JOIN credit_balances b ON b.account_id = a.id",
        )
        .unwrap();
    type Row = (i64, Vec<u8>, Option<i64>, Option<i64>, Option<i64>);
    let rows: Vec<Row> = stmt
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut account_ids: BTreeMap<U256, i64> = BTreeMap::new();
    for (id, hash, balance, sum, last) in &rows {
        assert_eq!(
            (*balance, *balance),
            (*sum, *last),
            "seed {seed}: account {id}: balance, sum of its ledger rows, last balance_after"
        );
        let charged = |op: &str| {
            conn.query_row(
                "SELECT count(*) FROM credit_ledger WHERE account_id = ?1 AND kind = 'charge'
                 AND operation = ?2",
                rusqlite::params![id, op],
                |r| r.get::<_, i64>(0),
            )
            .unwrap()
        };
        let stored = |table: &str| {
            conn.query_row(
                &format!("SELECT count(*) FROM {table} WHERE account_id = ?1"),
                [id],
                |r| r.get::<_, i64>(0),
            )
            .unwrap()
        };
        assert_eq!(
            charged("add_usage_api_key"),
            stored("usage_keys"),
            "seed {seed}: account {id}: usage keys stored vs charged"
        );
        assert_eq!(
            charged("add_group"),
            stored("groups"),
            "seed {seed}: account {id}: groups stored vs charged"
        );
        // The account's own wallet comes free with the account.
        assert_eq!(
            charged("create_wallet"),
            stored("wallets") - 1,
            "seed {seed}: account {id}: wallets stored (less the account's own) vs charged"
        );
        let initial = conn
            .query_row(
                "SELECT count(*), sum(amount_cents) FROM credit_ledger
                 WHERE account_id = ?1 AND kind = 'initial'",
                [id],
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<i64>>(1)?)),
            )
            .unwrap();
        assert_eq!(
            initial,
            (1, Some(INITIAL_CREDIT as i64)),
            "seed {seed}: account {id}: the initial credit, once"
        );
        account_ids.insert(u256_of(hash), *id);
    }
    for key in &acked.accounts {
        let id = account_ids[&key_hash(key)];
        let stored: i64 = conn
            .query_row(
                "SELECT balance_cents FROM credit_balances WHERE account_id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap();
        let api = app.get("/billing/balance", Some(key)).await.assert_ok()["balance_cents"]
            .as_u64()
            .unwrap();
        assert_eq!(
            api as i64, stored,
            "seed {seed}: the API's balance vs the store's"
        );
        let runs = conn
            .query_row(
                "SELECT count(*) FROM credit_ledger WHERE account_id = ?1 AND kind = 'charge'
                 AND operation = 'lit_action'",
                [id],
                |r| r.get::<_, i64>(0),
            )
            .unwrap() as u64;
        let ok = acked.runs_ok.get(key).copied().unwrap_or(0);
        let sent = acked.runs_sent.get(key).copied().unwrap_or(0);
        assert!(
            ok <= runs && runs <= sent,
            "seed {seed}: account {id}: {ok} runs acknowledged, {runs} charged, {sent} sent"
        );
    }

    // 3. The outbox drains, and the chain holds each stored write exactly once.
    assert!(
        eventually_async(Duration::from_secs(90), || async {
            outbox_states(&dir).keys().all(|s| s == "mined")
        })
        .await,
        "seed {seed}: the outbox did not drain: {:?}",
        outbox_states(&dir)
    );
    // Give a duplicate the chance to appear before asserting there is none.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut stored = Mirrored::default();
    for (kind, sql) in [
        ("accounts", "SELECT api_key_hash FROM accounts"),
        ("usage keys", "SELECT key_hash FROM usage_keys"),
        (
            "wallets",
            "SELECT address FROM wallets WHERE account_id IS NOT NULL",
        ),
    ] {
        let ids = blobs(&conn, sql).iter().map(|b| u256_of(b)).collect();
        stored.kinds.insert(kind, ids);
    }
    let group_ids: Vec<U256> = {
        let mut stmt = conn.prepare("SELECT id FROM groups").unwrap();
        stmt.query_map([], |r| r.get::<_, i64>(0))
            .unwrap()
            .map(|id| U256::from(id.unwrap() as u64))
            .collect()
    };
    stored.kinds.insert("groups", group_ids);
    stored.outbox = count(&conn, "SELECT count(*) FROM chain_outbox") as usize;
    let summary = assert_mirrored_once(&anvil, contract, &stored).await;
    println!("seed {seed}: checked: {summary}");
}
