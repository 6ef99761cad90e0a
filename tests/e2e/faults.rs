//! Faults between the parts (issue 39): the database dies under load and comes back;
//! the network to it stalls and heals; a replica dies mid-relay and mid-batch; the
//! chain's RPC goes away; keyservice is killed again and again. Writers on two replicas
//! record every answer; whatever was acknowledged must be there afterwards, and nothing
//! may answer 500 or hang past the request deadline while a part is away.
//!
//! The first two tests hold plain writes to the strictest rules (only 200 or 503, in
//! time; `/health` names the failed dependency; no session leaks). The `the_ledger_*`
//! tests run the ledger checker (`e2e::ledger`: charges, top-ups, revocations, minted
//! signatures, signing actions, the chain mirror) under each fault; `chaos` runs it
//! under random faults for as long as `scripts/chaos` asks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use e2e::Appliance;
// The request deadline the replicas run with here (`http.request_timeout_ms`).
use e2e::ledger::{Bench, DEADLINE};
use e2e::replicas::Cluster;
use serde_json::json;
use test_support::postgres::Shutdown;

/// One writer's record: what it was told.
#[derive(Default)]
struct Record {
    /// Names of the groups whose creation was acknowledged (200), with when it was sent.
    acknowledged: Vec<(String, Instant)>,
    /// Answers 503 (the database unavailable, or the deadline).
    unavailable: usize,
    /// Anything else: a status other than 200 and 503, a transport error, or an answer
    /// later than the deadline allows. Each is a failure of the test.
    wrong: Vec<String>,
}

/// Creates groups named `w{writer}-{n}` on `app` until `stop`, one at a time.
async fn write_until(app: &Appliance, key: &str, writer: usize, stop: &AtomicBool) -> Record {
    let mut record = Record::default();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let name = format!("w{writer}-{n}");
        let sent = Instant::now();
        let request = app
            .client
            .post(app.api("/add_group"))
            .bearer_auth(key)
            .json(&json!({"group_name": name, "group_description": "",
                          "pkp_ids_permitted": [], "cid_hashes_permitted": []}));
        // The deadline, plus room for the answer to travel.
        let answer = tokio::time::timeout(DEADLINE + Duration::from_secs(2), request.send()).await;
        match answer {
            Err(_) => record
                .wrong
                .push(format!("{name}: no answer within {DEADLINE:?} + 2 s")),
            Ok(Err(err)) => record.wrong.push(format!("{name}: {err}")),
            Ok(Ok(response)) => match response.status().as_u16() {
                200 => record.acknowledged.push((name, sent)),
                503 => record.unavailable += 1,
                status => {
                    let text = response.text().await.unwrap_or_default();
                    record.wrong.push(format!("{name}: {status} {text}"));
                }
            },
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    record
}

/// `GET /health` of `app`: its status and body.
async fn health_of(app: &Appliance) -> (u16, serde_json::Value) {
    let response = app.client.get(app.url("/health")).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// Every group name of the account `key` on `app`.
async fn group_names(app: &Appliance, key: &str) -> Vec<String> {
    let mut names = Vec::new();
    for page in 0.. {
        let reply = app
            .get(
                &format!("/list_groups?page_size=1000&page_number={page}"),
                Some(key),
            )
            .await;
        let items = reply.assert_ok().as_array().unwrap().clone();
        names.extend(items.iter().map(|g| g["name"].as_str().unwrap().to_owned()));
        if items.len() < 1000 {
            return names;
        }
    }
    names
}

/// Every writer's record together, and the rules each fault is held to.
impl Record {
    fn of(records: Vec<Record>) -> Self {
        let mut all = Self::default();
        for record in records {
            all.acknowledged.extend(record.acknowledged);
            all.unavailable += record.unavailable;
            all.wrong.extend(record.wrong);
        }
        all
    }

    fn report(&self, fault: &str, lasted: Duration) {
        eprintln!(
            "faults ({fault}, {lasted:.2?} with the recovery): {} writes acknowledged, {} answered 503",
            self.acknowledged.len(),
            self.unavailable
        );
    }

    /// The rules of every fault: only 200 or 503, in time; the fault was seen; writes
    /// were acknowledged before it and, on every replica, after it; and every
    /// acknowledged write is in the database once.
    async fn check(&self, apps: &[&Appliance], key: &str, fault_at: Instant, healed_at: Instant) {
        let Self {
            acknowledged,
            unavailable,
            wrong,
        } = self;
        assert!(
            wrong.is_empty(),
            "answers other than 200 or 503: {wrong:#?}"
        );
        assert!(
            *unavailable > 0,
            "no write was refused during the fault: it was not observed"
        );
        let before = acknowledged.iter().filter(|(_, at)| *at < fault_at).count();
        assert!(before > 0, "no write was acknowledged before the fault");
        // Writers w and w + 2 write to replica w.
        for (w, app) in apps.iter().enumerate() {
            let mine = [format!("w{w}-"), format!("w{}-", w + 2)];
            let after = acknowledged
                .iter()
                .filter(|(name, at)| *at > healed_at && mine.iter().any(|p| name.starts_with(p)))
                .count();
            assert!(
                after > 0,
                "replica {w} ({}) acknowledged nothing after the fault ended",
                app.url("/")
            );
        }
        // Every acknowledged group exists, once, as every replica reads the database.
        for app in apps {
            let names = group_names(app, key).await;
            let mut seen = std::collections::HashSet::new();
            for name in &names {
                assert!(seen.insert(name.clone()), "group {name} exists twice");
            }
            let missing: Vec<_> = acknowledged
                .iter()
                .filter(|(name, _)| !seen.contains(name))
                .map(|(name, _)| name.clone())
                .collect();
            assert!(
                missing.is_empty(),
                "acknowledged but lost: {missing:?} (of {} acknowledged)",
                acknowledged.len()
            );
        }
    }
}

/// The replicas' settings in these tests: the request deadline.
fn settings() -> Vec<(String, String)> {
    vec![(
        "APPLIANCE_HTTP__REQUEST_TIMEOUT_MS".to_owned(),
        DEADLINE.as_millis().to_string(),
    )]
}

/// The replica processes of a cluster, in order.
fn running(replicas: &[Option<Appliance>]) -> Vec<&Appliance> {
    replicas.iter().map(|r| r.as_ref().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_killed_under_load_loses_no_acknowledged_write_and_answers_503_meanwhile() {
    let Some(mut cluster) = Cluster::start(settings()).await else {
        return;
    };
    let (key, _) = cluster.a().new_account("faults").await;

    // Four writers, two on each replica, while the database fails under them.
    let Cluster { pg, replicas, .. } = &mut cluster;
    let apps = running(replicas);
    let stop = AtomicBool::new(false);
    let writers =
        futures_util::future::join_all((0..4).map(|w| write_until(apps[w % 2], &key, w, &stop)));
    let fault = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        // The database's machine loses power, and stays down for three seconds.
        let down_at = Instant::now();
        tokio::task::block_in_place(|| pg.stop(Shutdown::KillAll));
        tokio::time::sleep(Duration::from_secs(1)).await;
        // `/health` says which dependency is down.
        let mut down_health = Vec::new();
        for app in &apps {
            down_health.push(health_of(app).await);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        // (The writers of this task wait while the server runs crash recovery.)
        tokio::task::block_in_place(|| pg.start_again());
        let up_at = Instant::now();
        // The replicas find it again by themselves.
        tokio::time::sleep(Duration::from_secs(4)).await;
        stop.store(true, Ordering::Relaxed);
        let mut up_health = Vec::new();
        for app in &apps {
            up_health.push(health_of(app).await);
        }
        (down_at, up_at, down_health, up_health)
    };
    let (records, (down_at, up_at, down_health, up_health)) = tokio::join!(writers, fault);
    for (status, body) in &down_health {
        assert_eq!(*status, 503, "{body}");
        assert_eq!(body["checks"]["store"], "unavailable", "{body}");
    }
    for (status, body) in &up_health {
        assert_eq!(*status, 200, "{body}");
        assert_eq!(body["checks"]["store"], "ok", "{body}");
    }

    let outcome = Record::of(records);
    outcome.report("database killed", up_at - down_at);
    outcome.check(&apps, &key, down_at, up_at).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_network_to_postgres_answers_503_in_time_leaks_no_session_and_heals() {
    let Some((cluster, stall)) = Cluster::start_through_stall(settings()).await else {
        return;
    };
    let (key, _) = cluster.a().new_account("faults").await;
    let apps = running(&cluster.replicas);
    let stop = AtomicBool::new(false);
    let writers =
        futures_util::future::join_all((0..4).map(|w| write_until(apps[w % 2], &key, w, &stop)));
    let fault = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        // Every packet between the replicas and the database is lost, for five seconds
        // (longer than the request deadline): nothing tells either side.
        let stalled_at = Instant::now();
        stall.stall();
        tokio::time::sleep(Duration::from_secs(1)).await;
        // `/health` says the store is down, promptly, though its check never answers.
        let mut stalled_health = Vec::new();
        for app in &apps {
            let asked = Instant::now();
            let (status, body) = health_of(app).await;
            stalled_health.push((status, body, asked.elapsed()));
        }
        tokio::time::sleep(Duration::from_secs(5).saturating_sub(stalled_at.elapsed())).await;
        stall.heal();
        let healed_at = Instant::now();
        tokio::time::sleep(Duration::from_secs(4)).await;
        stop.store(true, Ordering::Relaxed);
        (stalled_at, healed_at, stalled_health)
    };
    let (records, (stalled_at, healed_at, stalled_health)) = tokio::join!(writers, fault);
    for (status, body, took) in &stalled_health {
        eprintln!("health during the stall: {status} in {took:?}: {body}");
        assert_eq!(*status, 503, "/health during the stall: {body}");
        assert_eq!(body["checks"]["store"], "unavailable", "{body}");
        // Its own bound (2 s), well inside the request deadline.
        assert!(*took < Duration::from_secs(3), "/health took {took:?}");
    }
    let outcome = Record::of(records);
    outcome.report("network stalled", healed_at - stalled_at);
    outcome.check(&apps, &key, stalled_at, healed_at).await;

    // No session leaked: each replica holds at most its read pool, its writer and its
    // change feed (`store.max_connections` 16 + 2), stall or not.
    let url = cluster.url.clone();
    let sessions: i64 = tokio::task::spawn_blocking(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
                &[],
            )
            .unwrap()
            .get(0)
    })
    .await
    .unwrap();
    eprintln!("faults (network stalled): {sessions} sessions open afterwards");
    assert!(
        sessions <= 2 * 18,
        "{sessions} sessions open after the stall"
    );
}

// ---- The ledger checker under each fault (e2e::ledger) ------------------------------

/// The seed of a run (printed; `FAULTS_SEED=<seed>` replays the clients' choices).
fn seed() -> u64 {
    let seed = e2e::rng::seed_from_env("FAULTS_SEED");
    eprintln!("faults: seed {seed} (replay the clients with FAULTS_SEED={seed})");
    seed
}

/// Runs the ledger's clients on a fresh [`Bench`] while `fault` runs, then the checker;
/// returns the tally for the test's own assertions.
macro_rules! ledger_under {
    ($name:expr, $seed:expr, |$parts:ident| $fault:block) => {{
        let Some(mut bench) = Bench::start(Vec::new()).await else {
            return;
        };
        let started = Instant::now();
        let tally = {
            let Bench { load, parts: $parts } = &mut bench;
            load.under(4, $seed, async $fault).await
        };
        eprintln!("faults ({}, {:.1?}): {}", $name, started.elapsed(), tally.summary());
        let verdict = bench.check(&tally).await;
        eprintln!("faults ({}): {verdict}", $name);
        tally
    }};
}

/// Waits `d`.
async fn after(d: Duration) {
    tokio::time::sleep(d).await;
}

/// PostgreSQL killed (every process) for 3 s under the ledger's load, then restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_holds_when_postgres_is_killed() {
    let tally = ledger_under!("ledger, database killed", seed(), |parts| {
        after(Duration::from_secs(3)).await;
        parts.kill_postgres();
        after(Duration::from_secs(3)).await;
        parts.start_postgres();
        after(Duration::from_secs(5)).await;
    });
    assert!(tally.unavailable > 0, "the outage was not observed");
}

/// The network to PostgreSQL drops everything for 6 s (longer than the 4 s deadline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_holds_when_the_network_to_postgres_stalls() {
    let tally = ledger_under!("ledger, database network stalled", seed(), |parts| {
        after(Duration::from_secs(3)).await;
        parts.pg_path.stall();
        after(Duration::from_secs(6)).await;
        parts.pg_path.heal();
        after(Duration::from_secs(5)).await;
    });
    assert!(tally.unavailable > 0, "the stall was not observed");
}

/// The replica leading the relayer is killed with SIGKILL while a relay is in flight
/// (an outbox entry sent, not yet mined); the other replica must take the lead within
/// 15 s and drain the outbox while the killed one is down. Then the other replica is
/// killed at a random moment of the write load (mid-batch). Nothing is applied twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_holds_when_a_replica_is_killed_mid_relay_and_mid_batch() {
    let seed = seed();
    let mut rng = e2e::rng::Rng(!seed);
    let tally = ledger_under!("ledger, replicas killed", seed, |parts| {
        after(Duration::from_secs(2)).await;
        // Mid-relay: as soon as an entry is on its way to the chain.
        let seen: &e2e::ledger::Parts = parts;
        let in_flight = e2e::eventually_async(Duration::from_secs(20), || async move {
            seen.outbox_states().await.contains_key("sent")
        })
        .await;
        let leader = parts.leader_of("chain-relayer").await.expect("a relayer");
        parts.kill_replica(leader);
        assert!(in_flight, "no relay was ever seen in flight");
        let other = 1 - leader;
        let moved_at = Instant::now();
        let seen: &e2e::ledger::Parts = parts;
        assert!(
            e2e::eventually_async(Duration::from_secs(15), || async move {
                seen.leader_of("chain-relayer").await == Some(other)
            })
            .await,
            "the relayer's lead did not move to the surviving replica"
        );
        eprintln!(
            "faults: the relayer's lead moved in {:.1?}",
            moved_at.elapsed()
        );
        let before = mined(seen).await;
        assert!(
            e2e::eventually_async(Duration::from_secs(15), || async move {
                mined(seen).await > before
            })
            .await,
            "the surviving replica mined nothing while the leader was down"
        );
        parts.restart_replica(leader).await;
        // Mid-batch: the other replica, at a random moment of the load.
        after(rng.millis(1000, 3000)).await;
        parts.kill_replica(other);
        after(Duration::from_secs(2)).await;
        parts.restart_replica(other).await;
        after(Duration::from_secs(3)).await;
    });
    assert!(tally.unavailable > 0, "no request met a killed replica");
}

/// Outbox entries mined so far.
async fn mined(parts: &e2e::ledger::Parts) -> i64 {
    parts
        .outbox_states()
        .await
        .get("mined")
        .copied()
        .unwrap_or(0)
}

/// The chain's RPC unreachable (every packet dropped) for `FAULTS_CHAIN_DOWN_SECONDS`
/// (20 s by default; `scripts/chaos` runs minutes): writes go on being acknowledged, the
/// outbox queues; after it heals the outbox drains in order, nothing twice, and the
/// indexer catches up with the chain's head.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_holds_while_the_chain_rpc_is_down() {
    let down: u64 = std::env::var("FAULTS_CHAIN_DOWN_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let mut queued = 0;
    let tally = ledger_under!("ledger, chain RPC down", seed(), |parts| {
        after(Duration::from_secs(2)).await;
        parts.chain_path.stall();
        after(Duration::from_secs(down)).await;
        queued = parts
            .outbox_states()
            .await
            .iter()
            .filter(|(state, _)| *state != "mined")
            .map(|(_, n)| n)
            .sum::<i64>();
        parts.chain_path.heal();
        after(Duration::from_secs(3)).await;
    });
    eprintln!("faults: {queued} outbox entries waited for the chain");
    assert!(queued > 0, "nothing was queued while the chain was away");
    assert!(tally.charges.len() > 20, "writes stopped with the chain");
}

/// Each replica's keyservice killed with SIGKILL every 1.5 s, eight times in all,
/// under a load that signs: answers are 503 while it is down, every signature an
/// action returns is by its wallet, and the supervisors bring keyservice back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_holds_while_keyservice_is_killed_repeatedly() {
    let mut kills = 0;
    let tally = ledger_under!("ledger, keyservice killed", seed(), |parts| {
        for round in 0..8 {
            after(Duration::from_millis(1500)).await;
            if parts.kill_keyservice(round % 2) {
                kills += 1;
            }
        }
        after(Duration::from_secs(4)).await;
    });
    assert!(kills >= 6, "only {kills} keyservice kills");
    assert!(
        tally.signatures_checked > 0,
        "no action signature was checked"
    );
}

/// Random faults for `CHAOS_SECONDS` (40 s by default; `scripts/chaos [minutes]` runs it
/// longer) under the ledger's load: each round waits 1–4 s, then picks one fault of the
/// tests above and a length of 1–6 s (the chain's outage three times that), and heals
/// it before the next. Prints the faults injected, the operations the clients counted
/// and the checker's verdict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos() {
    let seconds: u64 = std::env::var("CHAOS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let seed = seed();
    let mut rng = e2e::rng::Rng(!seed);
    let mut injected: std::collections::BTreeMap<&str, u32> = Default::default();
    ledger_under!("chaos", seed, |parts| {
        let until = Instant::now() + Duration::from_secs(seconds);
        while Instant::now() < until {
            after(rng.millis(1000, 4000)).await;
            let lasts = rng.millis(1000, 6000);
            let fault = match rng.below(5) {
                0 => {
                    parts.kill_postgres();
                    after(lasts).await;
                    parts.start_postgres();
                    "postgres killed"
                }
                1 => {
                    parts.pg_path.stall();
                    after(lasts).await;
                    parts.pg_path.heal();
                    "postgres network stalled"
                }
                2 => {
                    let i = rng.below(2);
                    parts.kill_replica(i);
                    after(lasts).await;
                    parts.restart_replica(i).await;
                    "replica killed"
                }
                3 => {
                    parts.chain_path.stall();
                    after(lasts * 3).await;
                    parts.chain_path.heal();
                    "chain RPC down"
                }
                _ => {
                    parts.kill_keyservice(rng.below(2));
                    "keyservice killed"
                }
            };
            *injected.entry(fault).or_default() += 1;
        }
        after(Duration::from_secs(3)).await;
    });
    eprintln!("chaos: {seconds} s, faults injected: {injected:?}");
}
