//! Backups that restore: `appliance backup` (the real binary, as a subprocess) copies the
//! database while the appliance serves a write load; `appliance restore` puts it into a
//! fresh data directory holding the same keyservice state (the sealed root and the dev
//! secret), and the appliance started there has every write acknowledged before the
//! backup began, none sent after it ended, the balances of the ledger up to the backup's
//! high-water mark, and the same wallets (each signs the same digest to the same
//! signature). Also: what backup and restore refuse, with exit status 3.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy::primitives::U256;
use e2e::chain::key_hash;
use e2e::{Appliance, Launch};
use serde_json::{Value, json};

const INITIAL_CREDIT: i64 = 1_000_000;
const HELLO: &str = r#"async function main() { return "hello"; }"#;
const SIGN: &str = r#"async function main(p) { return await Lit.Actions.signEcdsa({pkpId: p.pkpId, toSign: p.digest}); }"#;
/// The digest every wallet signs, before the backup and after the restore.
const DIGEST: &str = "0x5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a";

/// Billing on (every management write and action run is a ledger row), with an initial
/// credit; Stripe is never called.
fn billing_env() -> Vec<(String, String)> {
    [
        (
            "APPLIANCE_BILLING__STRIPE_SECRET_KEY",
            "sk_test_backup0123456789secret".to_owned(),
        ),
        (
            "APPLIANCE_BILLING__STRIPE_PUBLISHABLE_KEY",
            "pk_test_backup0123456789".to_owned(),
        ),
        (
            "APPLIANCE_BILLING__STRIPE_API_BASE",
            "http://127.0.0.1:9".to_owned(),
        ),
        (
            "APPLIANCE_BILLING__INITIAL_CREDIT_CENTS",
            INITIAL_CREDIT.to_string(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

async fn start(dir: &Path) -> Appliance {
    Appliance::launch(dir, Launch::DevWith { env: billing_env() }).await
}

/// Runs `appliance <args>` (no `APPLIANCE_*` variables of this process) to the end.
async fn appliance_cmd(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = tokio::process::Command::from(e2e::appliance_command());
    cmd.args(args).envs(env.iter().copied());
    cmd.output().await.unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[track_caller]
fn assert_refused(out: &Output, needles: &[&str]) -> String {
    let err = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(3),
        "refused with status 3; stdout: {} stderr: {err}",
        text(&out.stdout)
    );
    for needle in needles {
        assert!(err.contains(needle), "{needle:?} in: {err}");
    }
    err
}

#[track_caller]
fn assert_success(out: &Output) -> String {
    assert!(
        out.status.success(),
        "status {:?}; stderr: {}",
        out.status,
        text(&out.stderr)
    );
    text(&out.stdout)
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Copies the regular files of `from` into `to`, recursively (sockets are left out).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A fresh data directory with the keyservice state (sealed root, dev secret) and the
/// compose file that root is sealed to, taken from `from`: "the same sealed root".
fn fresh_data_dir_with_the_root_of(from: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&from.join("keyservice"), &dir.path().join("keyservice"));
    std::fs::copy(
        from.join("app-compose.json"),
        dir.path().join("app-compose.json"),
    )
    .unwrap();
    dir
}

fn read_only(db: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap()
}

/// What a write was, as the client saw it acknowledged.
#[derive(Debug, Clone)]
enum Write {
    Account { key: String },
    UsageKey { account: String, hash: String },
    Wallet { account: String, pkp: String },
    Group { account: String, id: String },
    Run { account: String },
}

impl Write {
    fn account(&self) -> &str {
        match self {
            Self::Account { key } => key,
            Self::UsageKey { account, .. }
            | Self::Wallet { account, .. }
            | Self::Group { account, .. }
            | Self::Run { account } => account,
        }
    }
}

/// A write: when its request was sent, and when it was acknowledged (`None`: it was not).
#[derive(Debug, Clone)]
struct Sent {
    write: Option<Write>,
    sent: Instant,
    acked: Option<Instant>,
}

/// The body of a 2xx answer, or `None`.
async fn send(req: reqwest::RequestBuilder) -> Option<Value> {
    let rsp = req.timeout(Duration::from_secs(20)).send().await.ok()?;
    if !rsp.status().is_success() {
        return None;
    }
    rsp.json().await.ok()
}

/// One client of the load: its own account, then usage keys, wallets, groups, action
/// runs and now and then a new account, until `stop`.
async fn client(
    app: (reqwest::Client, String),
    tag: usize,
    log: Arc<Mutex<Vec<Sent>>>,
    stop: Arc<AtomicBool>,
) {
    let (client, api) = app;
    let mut account: Option<String> = None;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let sent = Instant::now();
        let post = |path: &str, key: Option<&str>, body: Value| {
            let req = client.post(format!("{api}{path}")).json(&body);
            match key {
                Some(key) => req.bearer_auth(key),
                None => req,
            }
        };
        let write = match (&account, n % 6) {
            (None, _) | (Some(_), 0) => send(post(
                "/new_account",
                None,
                json!({"account_name": format!("load{tag}-{n}")}),
            ))
            .await
            .and_then(|b| b["api_key"].as_str().map(str::to_owned))
            .map(|key| {
                account = Some(key.clone());
                Write::Account { key }
            }),
            (Some(key), 1) => send(post(
                "/add_usage_api_key",
                Some(key),
                json!({"name": format!("k{tag}-{n}"), "description": ""}),
            ))
            .await
            .and_then(|b| b["api_key_hash"].as_str().map(str::to_owned))
            .map(|hash| Write::UsageKey {
                account: key.clone(),
                hash,
            }),
            (Some(key), 2) => send(post("/create_wallet", Some(key), json!({})))
                .await
                .and_then(|b| b["pkp_id"].as_str().map(str::to_owned))
                .map(|pkp| Write::Wallet {
                    account: key.clone(),
                    pkp,
                }),
            (Some(key), 3) => send(post(
                "/add_group",
                Some(key),
                json!({"group_name": format!("g{tag}-{n}"), "group_description": "",
                       "pkp_ids_permitted": [], "cid_hashes_permitted": []}),
            ))
            .await
            .and_then(|b| b["group_id"].as_str().map(str::to_owned))
            .map(|id| Write::Group {
                account: key.clone(),
                id,
            }),
            (Some(key), _) => send(post("/lit_action", Some(key), json!({"code": HELLO})))
                .await
                .map(|_| Write::Run {
                    account: key.clone(),
                }),
        };
        let acked = write.is_some().then(Instant::now);
        log.lock().unwrap().push(Sent { write, sent, acked });
    }
}

/// Signs [`DIGEST`] with the wallet `pkp` of `account` (an action run in keyservice).
async fn sign(app: &Appliance, account: &str, pkp: &str) -> String {
    let reply = app
        .post(
            "/lit_action",
            Some(account),
            json!({"code": SIGN, "js_params": {"pkpId": pkp, "digest": DIGEST}}),
        )
        .await;
    let body = reply.assert_ok();
    assert_eq!(body["has_error"], json!(false), "{}", reply.text);
    body["response"].as_str().unwrap().to_owned()
}

/// `(account id, api_key_hash)` of every account, and every ledger row
/// `(id, account id, kind, amount, operation)`, of the database at `db`.
type LedgerRow = (i64, i64, String, i64, String);
fn ledger(db: &Path) -> (BTreeMap<i64, Vec<u8>>, Vec<LedgerRow>) {
    let conn = read_only(db);
    let accounts = {
        let mut stmt = conn
            .prepare("SELECT id, api_key_hash FROM accounts")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let rows = {
        let mut stmt = conn
            .prepare(
                "SELECT id, account_id, kind, amount_cents, operation FROM credit_ledger ORDER BY id",
            )
            .unwrap();
        stmt.query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
    };
    (accounts, rows)
}

/// The metadata `appliance backup` wrote into the file.
fn backup_meta(file: &Path) -> Value {
    let conn = read_only(file);
    let json: String = conn
        .query_row("SELECT meta FROM appliance_backup", [], |r| r.get(0))
        .unwrap();
    serde_json::from_str(&json).unwrap()
}

#[tokio::test]
async fn a_backup_under_load_restores_every_acknowledged_write_balance_and_wallet() {
    let a_dir = tempfile::tempdir().unwrap();
    let a = a_dir.path().to_owned();
    let mut app = start(&a).await;

    // Wallets made before the load, and their signatures (deterministic: RFC 6979).
    let (owner, _) = app.new_account("owner").await;
    let mut wallets: Vec<(String, String)> = Vec::new();
    for _ in 0..3 {
        let w = app.create_wallet(&owner).await;
        wallets.push((owner.clone(), w.pkp_id));
    }
    let first = sign(&app, &wallets[0].0, &wallets[0].1).await;
    assert_eq!(
        sign(&app, &wallets[0].0, &wallets[0].1).await,
        first,
        "signatures are deterministic, so comparing them means something"
    );

    // The load: four clients, writes only (every one billed or crediting).
    let log: Arc<Mutex<Vec<Sent>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|tag| {
            tokio::spawn(client(
                (app.client.clone(), app.api("")),
                tag,
                log.clone(),
                stop.clone(),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(3)).await;

    // The backup, while the clients keep writing.
    let out_dir = tempfile::tempdir().unwrap();
    let out = out_dir.path().join("state-backup.db");
    let db_bytes = std::fs::metadata(a.join("state.db")).unwrap().len()
        + std::fs::metadata(a.join("state.db-wal")).map_or(0, |m| m.len());
    let backup_started = Instant::now();
    let output = appliance_cmd(&["backup", "--data-dir", p(&a), "--out", p(&out)], &[]).await;
    let backup_ended = Instant::now();
    let summary = assert_success(&output);
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    let log = std::mem::take(&mut *log.lock().unwrap());
    assert!(
        summary.starts_with("backup written to ") && summary.contains("schema version"),
        "{summary}"
    );
    let during = log
        .iter()
        .filter(|s| {
            s.acked
                .is_some_and(|t| t >= backup_started && t <= backup_ended)
        })
        .count();
    let took = backup_ended - backup_started;
    println!(
        "backup of a {:.2} MB database (+WAL) took {:.3} s while serving {:.0} writes/s ({during} acknowledged during it); {summary}",
        db_bytes as f64 / 1e6,
        took.as_secs_f64(),
        during as f64 / took.as_secs_f64(),
    );
    assert!(
        during > 0,
        "the appliance kept acknowledging writes while the backup ran"
    );
    let before: Vec<&Write> = log
        .iter()
        .filter(|s| s.acked.is_some_and(|t| t < backup_started))
        .filter_map(|s| s.write.as_ref())
        .collect();
    let after: Vec<&Write> = log
        .iter()
        .filter(|s| s.sent > backup_ended)
        .filter_map(|s| s.write.as_ref())
        .collect();
    assert!(
        before.len() >= 20 && after.len() >= 5,
        "enough writes on both sides of the backup: {} before, {} after",
        before.len(),
        after.len()
    );
    for w in &before {
        if let Write::Wallet { account, pkp } = w {
            wallets.push((account.clone(), pkp.clone()));
        }
    }
    // What every wallet signs, and the wallet lists, on the original.
    let mut signatures = BTreeMap::new();
    for (account, pkp) in &wallets {
        signatures.insert(pkp.clone(), sign(&app, account, pkp).await);
    }
    let owners: BTreeSet<&String> = wallets.iter().map(|(a, _)| a).collect();
    let mut listed_before = BTreeMap::new();
    for account in &owners {
        let listed = app.list("/list_wallets?page_size=1000", account).await;
        listed_before.insert((*account).clone(), listed);
    }
    let status = app.terminate().await;
    assert!(status.success(), "{status:?}");

    // Restore into a fresh data directory with the same keyservice state.
    let b_dir = fresh_data_dir_with_the_root_of(&a);
    let b = b_dir.path().to_owned();
    let restored = assert_success(
        &appliance_cmd(&["restore", "--data-dir", p(&b), "--from", p(&out)], &[]).await,
    );
    assert!(
        restored.contains("restored") && restored.contains("there was no database before"),
        "{restored}"
    );
    let app = start(&b).await;

    // 1. Every write acknowledged before the backup began is there.
    for w in &before {
        match w {
            Write::Account { key } => assert_eq!(
                app.get("/account_exists", Some(key)).await.assert_ok(),
                &json!(true),
                "an account acknowledged before the backup is missing"
            ),
            Write::UsageKey { account, hash } => {
                let keys = app.list("/list_api_keys?page_size=1000", account).await;
                assert!(
                    keys.iter().any(|k| k["api_key_hash"] == json!(hash)),
                    "usage key {hash} acknowledged before the backup is missing"
                );
            }
            Write::Wallet { account, pkp } => {
                let listed = app.list("/list_wallets?page_size=1000", account).await;
                assert!(
                    listed.iter().any(|x| x["pkp_id"] == json!(pkp)),
                    "wallet {pkp} acknowledged before the backup is missing"
                );
            }
            Write::Group { account, id } => {
                let groups = app.groups(account).await;
                assert!(
                    groups.iter().any(|g| g["id"] == json!(id)),
                    "group {id} acknowledged before the backup is missing"
                );
            }
            Write::Run { .. } => {} // in the ledger, below
        }
    }
    // ... and none sent after it ended.
    for w in &after {
        let account_there = app
            .get("/account_exists", Some(w.account()))
            .await
            .assert_ok()
            == &json!(true);
        match w {
            Write::Account { key } => assert!(
                !account_there,
                "an account created after the backup ({key:.12}…) was restored"
            ),
            Write::UsageKey { account, hash } if account_there => {
                let keys = app.list("/list_api_keys?page_size=1000", account).await;
                assert!(!keys.iter().any(|k| k["api_key_hash"] == json!(hash)));
            }
            Write::Wallet { account, pkp } if account_there => {
                let listed = app.list("/list_wallets?page_size=1000", account).await;
                assert!(!listed.iter().any(|x| x["pkp_id"] == json!(pkp)));
            }
            Write::Group { account, id } if account_there => {
                assert!(
                    !app.groups(account)
                        .await
                        .iter()
                        .any(|g| g["id"] == json!(id))
                );
            }
            _ => {}
        }
    }

    // 2. The ledger is the original's up to the backup's high-water mark, and every
    // balance the API reports is the sum of that prefix.
    let meta = backup_meta(&out);
    let high = meta["marks"]["sequences"]["credit_ledger"]
        .as_i64()
        .unwrap();
    let (accounts_a, ledger_a) = ledger(&a.join("state.db"));
    let (accounts_b, ledger_b) = ledger(&b.join("state.db"));
    let prefix: Vec<LedgerRow> = ledger_a.iter().filter(|r| r.0 <= high).cloned().collect();
    assert_eq!(
        ledger_b, prefix,
        "the restored ledger is the original's up to id {high}"
    );
    assert!(
        ledger_a.len() > prefix.len(),
        "the original went on writing after the backup"
    );
    for (id, hash) in &accounts_b {
        assert_eq!(
            accounts_a.get(id),
            Some(hash),
            "account {id} is the original's"
        );
    }
    let keys: BTreeSet<String> = before
        .iter()
        .map(|w| w.account().to_owned())
        .chain([owner.clone()])
        .collect();
    let mut differ = 0;
    for key in &keys {
        let balance = app.get("/billing/balance", Some(key)).await.assert_ok()["balance_cents"]
            .as_i64()
            .unwrap();
        let hash = key_hash(key);
        let id = accounts_b
            .iter()
            .find(|(_, h)| U256::from_be_slice(h) == hash)
            .map(|(id, _)| *id)
            .unwrap_or_else(|| panic!("account {hash:x} in the restored store"));
        let expected: i64 = prefix.iter().filter(|r| r.1 == id).map(|r| r.3).sum();
        let at_the_end: i64 = ledger_a.iter().filter(|r| r.1 == id).map(|r| r.3).sum();
        assert_eq!(
            balance, expected,
            "account {id}: the balance at the backup's high-water mark"
        );
        assert!(expected <= INITIAL_CREDIT && expected > 0);
        differ += usize::from(at_the_end != expected);
    }
    assert!(
        differ > 0,
        "some balance moved after the backup, so the restored balances are not just the final ones"
    );

    // 3. The same wallets, signing the same digest to the same signature.
    for (account, listed) in &listed_before {
        let now = app.list("/list_wallets?page_size=1000", account).await;
        let pkps = |l: &[Value]| -> BTreeSet<(String, String)> {
            l.iter()
                .map(|w| {
                    (
                        w["pkp_id"].as_str().unwrap().to_owned(),
                        w["wallet_address"].to_string(),
                    )
                })
                .collect()
        };
        let wanted: BTreeSet<_> = pkps(listed)
            .into_iter()
            .filter(|(pkp, _)| signatures.contains_key(pkp))
            .collect();
        assert!(
            wanted.is_subset(&pkps(&now)),
            "the wallets and their addresses are the original's"
        );
    }
    for (account, pkp) in &wallets {
        assert_eq!(
            &sign(&app, account, pkp).await,
            &signatures[pkp],
            "wallet {pkp} signs {DIGEST} as before"
        );
    }
    println!(
        "restored: {} writes acknowledged before the backup, {} sent after it, ledger up to id {high}, {} wallets sign as before",
        before.len(),
        after.len(),
        wallets.len()
    );
}

#[tokio::test]
async fn restore_refuses_a_running_or_newer_database_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_owned();
    let mut app = Appliance::start_in(&data).await;
    let (kept_key, _) = app.new_account("in the backup").await;
    let out_dir = tempfile::tempdir().unwrap();
    let out = out_dir.path().join("b.db");
    assert_success(
        &appliance_cmd(&["backup", "--data-dir", p(&data), "--out", p(&out)], &[]).await,
    );

    // Backup never replaces a file unless told to.
    let written = std::fs::read(&out).unwrap();
    let (later_key, _) = app.new_account("after the backup").await;
    let refused = appliance_cmd(&["backup", "--data-dir", p(&data), "--out", p(&out)], &[]).await;
    assert_refused(&refused, &["exists", "--force"]);
    assert_eq!(
        std::fs::read(&out).unwrap(),
        written,
        "the file is untouched"
    );

    // Not while the appliance runs on the data directory, even with --force.
    let refused = appliance_cmd(
        &[
            "restore",
            "--data-dir",
            p(&data),
            "--from",
            p(&out),
            "--force",
        ],
        &[],
    )
    .await;
    assert_refused(&refused, &["in use"]);
    let status = app.terminate().await;
    assert!(status.success());

    // Stopped, but newer than the backup: refused, nothing changed.
    let refused = appliance_cmd(&["restore", "--data-dir", p(&data), "--from", p(&out)], &[]).await;
    assert_refused(&refused, &["newer than the backup", "accounts", "--force"]);
    let accounts = |db: &Path| -> i64 {
        read_only(db)
            .query_row("SELECT count(*) FROM accounts", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(accounts(&data.join("state.db")), 2, "nothing changed");
    let kept_files = |data: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(data)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                name.starts_with("state.db.before-restore-") && !name.ends_with("-wal")
            })
            .collect()
    };
    assert!(kept_files(&data).is_empty());

    // --force: restored, and the newer database kept beside it.
    let done = assert_success(
        &appliance_cmd(
            &[
                "restore",
                "--data-dir",
                p(&data),
                "--from",
                p(&out),
                "--force",
            ],
            &[],
        )
        .await,
    );
    assert!(
        done.contains("kept as") && done.contains("forced over a newer database"),
        "{done}"
    );
    let kept = kept_files(&data);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(accounts(&kept[0]), 2, "the replaced database, whole");
    let app = Appliance::start_in(&data).await;
    assert_eq!(
        app.get("/account_exists", Some(&kept_key))
            .await
            .assert_ok(),
        &json!(true)
    );
    assert_eq!(
        app.get("/account_exists", Some(&later_key))
            .await
            .assert_ok(),
        &json!(false),
        "the account made after the backup is not in the restored database"
    );
}

#[tokio::test]
async fn a_damaged_or_foreign_backup_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_owned();
    let mut app = Appliance::start_in(&data).await;
    for i in 0..30 {
        app.new_account(&format!("a{i}")).await;
    }
    let out_dir = tempfile::tempdir().unwrap();
    let out = out_dir.path().join("b.db");
    assert_success(
        &appliance_cmd(&["backup", "--data-dir", p(&data), "--out", p(&out)], &[]).await,
    );
    app.terminate().await;
    let good = std::fs::read(&out).unwrap();
    let target = tempfile::tempdir().unwrap();
    let restore = |from: PathBuf| {
        let target = target.path().to_owned();
        async move {
            appliance_cmd(
                &[
                    "restore",
                    "--data-dir",
                    p(&target),
                    "--from",
                    p(&from),
                    "--force",
                ],
                &[],
            )
            .await
        }
    };

    // A page of the backup overwritten.
    let mut bytes = good.clone();
    bytes[4096..8192].fill(0xA5);
    let damaged = out_dir.path().join("damaged.db");
    std::fs::write(&damaged, &bytes).unwrap();
    assert_refused(&restore(damaged).await, &["damaged"]);
    // Cut short.
    let short = out_dir.path().join("short.db");
    std::fs::write(&short, &good[..good.len() / 2]).unwrap();
    assert_refused(&restore(short).await, &["damaged"]);
    // A plain copy of a database is not a backup. The copy is taken as an operator
    // would take it correctly: the WAL folded into the file first (the file alone,
    // beside an unfolded WAL, is not a consistent database at all).
    let live = rusqlite::Connection::open(data.join("state.db")).unwrap();
    live.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    drop(live);
    let copy = out_dir.path().join("copy.db");
    std::fs::copy(data.join("state.db"), &copy).unwrap();
    assert_refused(&restore(copy).await, &["not a backup"]);
    assert!(
        !target.path().join("state.db").exists(),
        "nothing was restored"
    );
    // The intact file restores.
    assert_success(&restore(out).await);
    assert!(target.path().join("state.db").exists());
}

#[tokio::test]
async fn a_postgres_store_is_pointed_to_pg_dump() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("appliance.toml");
    std::fs::write(&config, "[store]\nengine = \"postgres\"\n").unwrap();
    let out = dir.path().join("b.db");
    let env = [(
        "APPLIANCE_STORE__URL",
        "postgres://appliance:s3cret-pw@127.0.0.1:1/appliance",
    )];
    for args in [
        vec!["backup", "--config", p(&config), "--out", p(&out)],
        vec!["restore", "--config", p(&config), "--from", p(&out)],
    ] {
        let refused = appliance_cmd(&args, &env).await;
        let err = assert_refused(&refused, &["postgres", "pg_dump", "docs/operators.md"]);
        assert!(
            !err.contains("s3cret-pw"),
            "the URL's password is not shown: {err}"
        );
    }
    assert!(!out.exists());
}

/// A database put beside another keyservice state (another root) is refused at start:
/// its wallets would otherwise derive other keys under the same names.
#[tokio::test]
async fn a_database_beside_another_root_is_refused_at_start() {
    let first = tempfile::tempdir().unwrap();
    let mut app = start(first.path()).await;
    let (key, _) = app.new_account("rooted").await;
    app.post("/create_wallet", Some(&key), serde_json::json!({}))
        .await
        .assert_ok();
    app.terminate().await;
    // Its database alone, restored without the keyservice state that goes with it.
    let copy = first.path().join("copy.db");
    let backup = appliance_cmd(
        &[
            "backup",
            "--data-dir",
            first.path().to_str().unwrap(),
            "--out",
            copy.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert!(backup.status.success(), "{backup:?}");
    let other = tempfile::tempdir().unwrap();
    let restored = appliance_cmd(
        &[
            "restore",
            "--data-dir",
            other.path().to_str().unwrap(),
            "--from",
            copy.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert!(restored.status.success(), "{restored:?}");
    let mut cmd = tokio::process::Command::from(e2e::appliance_command());
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        cmd.args(["dev", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(other.path())
            .env("APPLIANCE_CHAIN__DEV_ANVIL", "")
            .output(),
    )
    .await
    .expect("the appliance stops by itself")
    .unwrap();
    assert!(!out.status.success(), "it served on another root");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("written under root"), "{stderr}");
}
