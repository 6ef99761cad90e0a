//! Soak: mixed traffic at a steady rate against a dev appliance (release build: appliance,
//! keyservice, worker launcher and workers) for a number of minutes, printing one row a
//! minute: resident memory and open descriptors of the appliance and of keyservice,
//! requests done, errors, and that minute's p50/p99 latency. At the end it prints the RSS
//! growth of the appliance (last minute against the first minute after the warm-up) and
//! exits non-zero when it exceeds 10 %.
//!
//! The appliance's resident memory, descriptors and 5xx answers are read from its metrics
//! endpoint (`process_resident_memory_bytes`, `process_open_fds`,
//! `appliance_http_requests_total`), as an operator's Prometheus reads them; keyservice's
//! from `/proc`.
//!
//! Run with `scripts/soak [minutes] [rate]` (it builds the release binaries first). Not in
//! CI. Settings (environment): `SOAK_MINUTES` (default 30), `SOAK_RATE` (requests a second,
//! default 20), `SOAK_WARMUP_MINUTES` (default 1), `SOAK_MAX_GROWTH_PERCENT` (default 10).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use e2e::rng::Rng;
use e2e::{Appliance, children_of};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use test_support::metrics;

const HELLO: &str = r#"async function main() { return "hello world"; }"#;
const SIGN: &str = r#"async function main(p) {
    const pk = await Lit.Actions.getPrivateKey({pkpId: p.pkpId});
    return await new ethers.Wallet(pk).signMessage("hello world");
}"#;

/// At most this many accounts are driven; new ones replace old ones (old accounts stay in
/// the store: the store grows, as in production, but the working set does not).
const ACCOUNTS: usize = 40;
/// Usage keys and groups kept per account before the oldest is removed again.
const PER_ACCOUNT: usize = 8;
/// Requests in flight at once; a tick finding all of them busy counts an error.
const IN_FLIGHT: usize = 256;

/// One account the driver uses: its key, its first wallet, and what it created.
#[derive(Clone)]
struct Account {
    key: String,
    pkp: String,
    usage_keys: Vec<String>,
    groups: Vec<String>,
}

#[derive(Default)]
struct Minute {
    latencies: Vec<Duration>,
    errors: u64,
    /// The first few error descriptions of the minute, for the end report.
    samples: Vec<String>,
}

struct Shared {
    accounts: Mutex<Vec<Account>>,
    minute: Mutex<Minute>,
}

impl Shared {
    fn record(&self, started: Instant, outcome: Result<(), String>) {
        let mut m = self.minute.lock().unwrap();
        m.latencies.push(started.elapsed());
        if let Err(e) = outcome {
            m.errors += 1;
            if m.samples.len() < 3 {
                m.samples.push(e);
            }
        }
    }

    fn pick(&self, seed: u64) -> Option<Account> {
        let accounts = self.accounts.lock().unwrap();
        if accounts.is_empty() {
            return None;
        }
        Some(accounts[(seed % accounts.len() as u64) as usize].clone())
    }

    fn update(&self, key: &str, f: impl FnOnce(&mut Account)) {
        let mut accounts = self.accounts.lock().unwrap();
        if let Some(a) = accounts.iter_mut().find(|a| a.key == key) {
            f(a);
        }
    }
}

/// A request's JSON answer, or a description of why it failed (transport error, non-2xx,
/// an action that reported an error).
async fn call(req: reqwest::RequestBuilder) -> Result<Value, String> {
    let rsp = req.send().await.map_err(|e| format!("transport: {e}"))?;
    let status = rsp.status();
    let text = rsp.text().await.map_err(|e| format!("body: {e}"))?;
    if !status.is_success() {
        return Err(format!(
            "{status}: {}",
            text.chars().take(160).collect::<String>()
        ));
    }
    Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn new_account(app: &Appliance, shared: &Shared, n: u64) -> Result<(), String> {
    let body = call(
        app.client
            .post(app.api("/new_account"))
            .json(&json!({"account_name": format!("soak-{n}"), "account_description": "soak"})),
    )
    .await?;
    let key = body["api_key"].as_str().ok_or("no api_key")?.to_owned();
    let wallets = call(app.client.get(app.api("/list_wallets")).bearer_auth(&key)).await?;
    let pkp = wallets[0]["pkp_id"].as_str().ok_or("no wallet")?.to_owned();
    let account = Account {
        key,
        pkp,
        usage_keys: Vec::new(),
        groups: Vec::new(),
    };
    let mut accounts = shared.accounts.lock().unwrap();
    if accounts.len() < ACCOUNTS {
        accounts.push(account);
    } else {
        let i = (n % ACCOUNTS as u64) as usize;
        accounts[i] = account;
    }
    Ok(())
}

/// One request of the mix, chosen by `roll` (0..100).
async fn one(app: &Appliance, shared: &Shared, roll: usize, seed: u64) -> Result<(), String> {
    let Some(acct) = shared.pick(seed) else {
        return new_account(app, shared, seed).await;
    };
    let key = acct.key.as_str();
    let post =
        |path: &str, body: Value| app.client.post(app.api(path)).bearer_auth(key).json(&body);
    let get = |path: &str| app.client.get(app.api(path)).bearer_auth(key);
    match roll {
        // Writes: accounts, usage keys, groups, wallets (about a fifth of the traffic).
        0..2 => new_account(app, shared, seed).await,
        2..6 => {
            if acct.usage_keys.len() >= PER_ACCOUNT {
                let old = acct.usage_keys[0].clone();
                call(post("/remove_usage_api_key", json!({"usage_api_key": old}))).await?;
                shared.update(key, |a| a.usage_keys.retain(|k| *k != old));
                return Ok(());
            }
            let body = call(post(
                "/add_usage_api_key",
                json!({"name": "soak", "description": "", "can_create_groups": seed.is_multiple_of(2),
                       "can_delete_groups": false, "can_create_pkps": true,
                       "manage_ipfs_ids_in_groups": [], "add_pkp_to_groups": [],
                       "remove_pkp_from_groups": [], "execute_in_groups": []}),
            ))
            .await?;
            let usage = body["usage_api_key"]
                .as_str()
                .ok_or("no usage_api_key")?
                .to_owned();
            shared.update(key, |a| a.usage_keys.push(usage));
            Ok(())
        }
        6..10 => {
            if acct.groups.len() >= PER_ACCOUNT {
                let old = acct.groups[0].clone();
                call(post("/remove_group", json!({"group_id": old}))).await?;
                shared.update(key, |a| a.groups.retain(|g| *g != old));
                return Ok(());
            }
            let body = call(post(
                "/add_group",
                json!({"group_name": "soak", "group_description": "",
                       "pkp_ids_permitted": [acct.pkp], "cid_hashes_permitted": []}),
            ))
            .await?;
            let id = body["group_id"].as_str().ok_or("no group_id")?.to_owned();
            shared.update(key, |a| a.groups.push(id));
            Ok(())
        }
        10..12 => call(post("/create_wallet", json!({}))).await.map(drop),
        12..14 => match acct.groups.last() {
            Some(g) => call(post(
                "/update_group",
                json!({"group_id": g, "name": format!("soak {seed}"),
                       "pkp_ids_permitted": [acct.pkp], "cid_hashes_permitted": []}),
            ))
            .await
            .map(drop),
            None => call(get("/list_groups")).await.map(drop),
        },
        // Actions: hello world and signing with the account's wallet.
        14..40 => {
            let body = call(post("/lit_action", json!({"code": HELLO}))).await?;
            check_action(&body)
        }
        40..55 => {
            let body = call(post(
                "/lit_action",
                json!({"code": SIGN, "js_params": {"pkpId": acct.pkp}}),
            ))
            .await?;
            check_action(&body)
        }
        // Reads.
        55..63 => call(get("/list_wallets?page_size=100")).await.map(drop),
        63..70 => call(get("/list_groups")).await.map(drop),
        70..76 => call(get("/list_api_keys")).await.map(drop),
        76..80 => call(get("/list_actions")).await.map(drop),
        80..83 => call(get("/account_exists")).await.map(drop),
        83..85 => call(app.client.get(app.url("/version"))).await.map(drop),
        // Unauthenticated system endpoints.
        85..95 => call(app.client.get(app.url("/health"))).await.map(drop),
        _ => call(app.client.get(app.url("/attestation")))
            .await
            .map(drop),
    }
}

fn check_action(body: &Value) -> Result<(), String> {
    if body["has_error"] == json!(false) {
        Ok(())
    } else {
        Err(format!("action failed: {body}"))
    }
}

/// `VmRSS` of `pid` in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Open descriptors of `pid`.
fn fds(pid: u32) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or("-".to_owned(), |k| format!("{:.1}", k as f64 / 1024.0))
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("-".to_owned(), |v| v.to_string())
}

#[tokio::main]
async fn main() {
    let minutes: u64 = e2e::load::env_or("SOAK_MINUTES", 30);
    let rate: f64 = e2e::load::env_or("SOAK_RATE", 20.0);
    let warmup: u64 = e2e::load::env_or("SOAK_WARMUP_MINUTES", 1);
    let max_growth: f64 = e2e::load::env_or("SOAK_MAX_GROWTH_PERCENT", 10.0);
    assert!(
        minutes > warmup,
        "SOAK_MINUTES must exceed SOAK_WARMUP_MINUTES"
    );
    assert!(rate > 0.0, "SOAK_RATE must be positive");

    let (metrics_addr, (metrics_key, metrics_value)) = metrics::metrics_listen();
    let app = Arc::new(Appliance::start_with(&[(metrics_key, &metrics_value)]).await);
    let appliance_pid = app.pid();
    println!(
        "soak: {minutes} min at {rate} requests/s against {} (appliance pid {appliance_pid}); \
         warm-up {warmup} min",
        app.base_url
    );
    let shared = Arc::new(Shared {
        accounts: Mutex::new(Vec::new()),
        minute: Mutex::new(Minute::default()),
    });
    for n in 0..4 {
        new_account(&app, &shared, n).await.expect("first accounts");
    }

    // The driver: one request every 1/rate seconds, whatever the answers take (open loop).
    let in_flight = Arc::new(Semaphore::new(IN_FLIGHT));
    let driver = {
        let app = app.clone();
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut rng = Rng(0x50a6_2026);
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            loop {
                tick.tick().await;
                let roll = rng.below(100);
                let seed = rng.next_u64() >> 1;
                let Ok(permit) = in_flight.clone().try_acquire_owned() else {
                    shared.record(Instant::now(), Err("too many requests in flight".into()));
                    continue;
                };
                let app = app.clone();
                let shared = shared.clone();
                tokio::spawn(async move {
                    let started = Instant::now();
                    let outcome = one(&app, &shared, roll, seed).await;
                    shared.record(started, outcome);
                    drop(permit);
                });
            }
        })
    };

    println!(
        "{:>4} {:>10} {:>8} {:>10} {:>7} {:>9} {:>7} {:>7} {:>9} {:>9} {:>7}",
        "min",
        "app RSS",
        "app fds",
        "ks RSS",
        "ks fds",
        "requests",
        "errors",
        "5xx",
        "p50 (ms)",
        "p99 (ms)",
        "workers"
    );
    println!(
        "{:>4} {:>10} {:>8} {:>10} {:>7} {:>9} {:>7} {:>7} {:>9} {:>9} {:>7}",
        "", "(MiB)", "", "(MiB)", "", "", "", "server", "", "", ""
    );
    let server_errors = |m: &metrics::Scrape| -> f64 {
        m.matching("appliance_http_requests_total", &[])
            .filter(|s| s.labels.get("status").is_some_and(|c| c.starts_with('5')))
            .map(|s| s.value)
            .sum()
    };
    let mut last_5xx = server_errors(&metrics::scrape(metrics_addr).await);
    let started = Instant::now();
    let mut rss_rows = Vec::new();
    let mut total_requests = 0;
    let mut total_errors = 0;
    let mut error_samples = Vec::new();
    for minute in 1..=minutes {
        let due = started + Duration::from_secs(60 * minute);
        tokio::time::sleep_until(due.into()).await;
        let m = std::mem::take(&mut *shared.minute.lock().unwrap());
        let mut lat = m.latencies;
        lat.sort();
        let pick = |q: f64| {
            lat.get(((lat.len().max(1) - 1) as f64 * q).round() as usize)
                .map_or("-".to_owned(), |d| format!("{:.1}", d.as_secs_f64() * 1e3))
        };
        let keyservice = children_of(appliance_pid, "keyservice").first().copied();
        let launcher = children_of(appliance_pid, "worker-launcher")
            .first()
            .copied();
        let workers = launcher.map(|l| children_of(l, "action-worker").len());
        let scraped = metrics::scrape(metrics_addr).await;
        let rss = scraped
            .value("process_resident_memory_bytes")
            .map(|bytes| bytes as u64 / 1024);
        let app_fds = scraped.value("process_open_fds").map(|n| n as u64);
        let total_5xx = server_errors(&scraped);
        let minute_5xx = total_5xx - last_5xx;
        last_5xx = total_5xx;
        rss_rows.push(rss);
        total_requests += lat.len();
        total_errors += m.errors;
        error_samples.extend(m.samples);
        println!(
            "{:>4} {:>10} {:>8} {:>10} {:>7} {:>9} {:>7} {:>7} {:>9} {:>9} {:>7}",
            minute,
            mib(rss),
            opt(app_fds),
            mib(keyservice.and_then(rss_kib)),
            opt(keyservice.and_then(fds)),
            lat.len(),
            m.errors,
            minute_5xx,
            pick(0.50),
            pick(0.99),
            opt(workers),
        );
    }
    driver.abort();

    println!("requests: {total_requests}, errors: {total_errors}");
    for e in error_samples.iter().take(10) {
        println!("  error: {e}");
    }
    let first = rss_rows[warmup as usize].expect("appliance RSS after warm-up");
    let last = rss_rows
        .last()
        .copied()
        .flatten()
        .expect("appliance RSS at the end");
    let growth = (last as f64 - first as f64) / first as f64 * 100.0;
    println!(
        "appliance RSS growth: {} MiB (minute {}) -> {} MiB (minute {minutes}): {growth:+.1} % \
         (limit {max_growth} %)",
        mib(Some(first)),
        warmup + 1,
        mib(Some(last))
    );
    if growth > max_growth {
        println!("FAIL: RSS grew more than {max_growth} %");
        std::process::exit(1);
    }
    println!("OK");
}
