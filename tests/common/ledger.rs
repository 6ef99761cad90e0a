//! The ledger checker of issue 39: Jepsen's bank test in this service's terms.
//!
//! A [`Bench`] is two replicas on one PostgreSQL, with billing on against localstripe
//! and the chain mirror on against anvil; the replicas reach PostgreSQL and anvil
//! through forwarders a test can stall ([`Stall`]). Clients ([`Load::client`]) issue,
//! across both replicas, billed writes and action runs (charges), card top-ups (paid
//! through localstripe, confirmed on both replicas at once), usage-key creations and
//! revocations, usage keys minted with wallet signatures (each signature sent to both
//! replicas at once) and signing actions, while a test injects a fault through
//! [`Parts`]. Each client records what it was told ([`Tally`]). [`Bench::check`] then
//! holds the acknowledged results against the database and the chain:
//!
//! * every acknowledged charge is in the ledger exactly once, and no request is charged
//!   twice;
//! * every paid top-up is credited exactly once (an acknowledged confirmation means it
//!   was; the checker confirms every paid one again at the end, which must credit the
//!   rest and nothing twice);
//! * no balance is below zero, each equals the sum of its account's ledger rows and its
//!   last `balance_after`, and each replica's API reports it;
//! * every acknowledged revocation holds: once acknowledged, the key is refused by the
//!   replica that removed it at once and by the other within the documented bound
//!   (2 s), and by every replica at the end;
//! * every signature is accepted at most once, though sent to both replicas at once, and
//!   the store holds one minted key per accepted signature;
//! * every signature an action returned is by the wallet it used (no wrong signature);
//! * the outbox drains (however long it grew, it never stops being mined for 30 s),
//!   every entry reaches the chain exactly once, each account's entries in their order,
//!   the chain holds nothing the store does not, and the indexer reaches the head.
//!
//! Unacknowledged operations may or may not have happened; acknowledged ones must have.
//! Answers are held to the rules of a fault too: only 2xx, the expected refusals (402
//! out of credit, 401 for a revoked key, 422 for a replayed signature), 503 or a broken
//! connection; never another 5xx, and never later than the request deadline allows.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use alloy::node_bindings::AnvilInstance;
use alloy::primitives::{Address, Signature, U256};
use alloy::providers::Provider as _;
use serde_json::{Value, json};
use test_support::postgres::Shutdown;

use crate::chain::{authorize_payers, chain_env, deploy_account_config, key_hash};
use crate::replicas::{Cluster, launch};
use crate::rng::Rng;
use crate::stall::Stall;
use crate::{Appliance, LocalStripe, children_of, eventually_async};

/// The request deadline of the replicas (`http.request_timeout_ms`).
pub const DEADLINE: Duration = Duration::from_secs(4);
/// Credit of a new account, and the price of a write and of an action's second: an
/// account runs dry after a handful of operations, so balances are often near zero and
/// top-ups are frequent.
const INITIAL_CREDIT: u64 = 150;
const PRICE: u64 = 25;
/// The smallest top-up the API accepts.
const TOP_UP: u64 = 500;
/// How long after a usage key's removal was acknowledged another replica may still
/// serve it (`docs/operators.md`, "Guarantees across replicas").
const REVOCATION_BOUND: Duration = Duration::from_secs(2);
/// How long the outbox may go without mining anything before the checker gives up on
/// its draining.
const DRAIN_STALL: Duration = Duration::from_secs(30);
/// Accounts the clients share.
const ACCOUNTS: usize = 4;
/// Wallet signatures made ahead (viem, one node run each) for the minting operations.
const SIGNATURES: usize = 10;
/// Anvil's dev key 1 (a public test key): the wallet that signs the minting requests.
const SIGNER: &str = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";

const HELLO: &str = r#"async function main() { return "hello"; }"#;
const SIGN: &str = r#"async function main(p) {
    const pk = await Lit.Actions.getPrivateKey({pkpId: p.pkpId});
    return await new ethers.Wallet(pk).signMessage(p.message);
}"#;

/// An account of the run: its key and a wallet it signs with.
pub struct Account {
    pub key: String,
    pub pkp: String,
    pub wallet: Address,
}

/// Where a client reaches replica `i` now (`None` while it is down).
#[derive(Clone)]
struct Target {
    api: String,
    client: reqwest::Client,
}

type Targets = Arc<Mutex<Vec<Option<Target>>>>;

/// What the clients need: the accounts, the replicas' addresses, the card processor.
pub struct Load {
    pub accounts: Vec<Account>,
    pub stripe: LocalStripe,
    targets: Targets,
    signatures: Vec<Value>,
    next_signature: AtomicUsize,
}

/// What a fault test acts on: the database, the replicas, the two network paths.
pub struct Parts {
    pub cluster: Cluster,
    /// Between the replicas and PostgreSQL.
    pub pg_path: Stall,
    /// Between the replicas and the chain's RPC.
    pub chain_path: Stall,
    pub anvil: AnvilInstance,
    pub contract: Address,
    targets: Targets,
}

/// The system under test.
pub struct Bench {
    pub load: Load,
    pub parts: Parts,
}

/// A top-up as its client saw it.
#[derive(Debug)]
pub struct TopUp {
    pub intent: String,
    pub account: usize,
    /// Some confirmation was acknowledged.
    pub acknowledged: bool,
    /// The cents the acknowledged confirmations said they credited, together.
    pub credited: u64,
}

/// What one client was told.
#[derive(Default)]
pub struct Tally {
    pub sent: u64,
    /// Request ids of acknowledged charged requests, with their operation.
    pub charges: Vec<(String, &'static str)>,
    /// Answered 402: the account's credit did not cover it.
    pub out_of_credit: u64,
    /// Answered 503, or the connection broke (a replica killed).
    pub unavailable: u64,
    /// Action runs answered with the action's error (charged; e.g. the key service down
    /// while the action asked for its key).
    pub action_errors: u64,
    /// Signatures returned by actions, each checked against its wallet.
    pub signatures_checked: u64,
    pub top_ups: Vec<TopUp>,
    /// Usage keys whose removal was acknowledged.
    pub revoked: Vec<String>,
    /// Uses of a removed key that another replica served within the revocation bound
    /// (each refused once the bound had passed).
    pub served_within_bound: u64,
    /// Signature index and how many replicas accepted it.
    pub minted: Vec<(usize, usize)>,
    /// Broken rules: each fails the test.
    pub wrong: Vec<String>,
}

/// How a request ended.
enum Answer {
    Ok {
        body: Value,
        request_id: String,
    },
    /// A 4xx other than those the caller expects is a broken rule.
    Refused(u16, String),
    Unavailable,
    Wrong(String),
}

impl Bench {
    /// Starts anvil with `AccountConfig`, localstripe, PostgreSQL and two replicas
    /// (with `extra` settings), then the accounts and signatures the clients use.
    /// `None` (reported) where PostgreSQL cannot run.
    pub async fn start(extra: Vec<(String, String)>) -> Option<Self> {
        let anvil = crate::chain::anvil();
        let (contract, from) = deploy_account_config(&anvil).await;
        let chain_path = Stall::start(anvil.port()).await;
        let stripe = LocalStripe::start();
        let mut settings: Vec<(String, String)> = chain_env(&anvil, contract, from)
            .into_iter()
            .map(|(k, v)| {
                if k == "APPLIANCE_CHAIN__RPC_URL" {
                    (k, format!("http://127.0.0.1:{}", chain_path.port))
                } else {
                    (k, v)
                }
            })
            .collect();
        settings.extend(stripe.env(INITIAL_CREDIT));
        settings.extend(
            [
                (
                    "APPLIANCE_HTTP__REQUEST_TIMEOUT_MS",
                    DEADLINE.as_millis().to_string(),
                ),
                (
                    "APPLIANCE_BILLING__MANAGEMENT_WRITE_CENTS",
                    PRICE.to_string(),
                ),
                ("APPLIANCE_BILLING__ACTION_SECOND_CENTS", PRICE.to_string()),
            ]
            .map(|(k, v)| (k.to_owned(), v)),
        );
        settings.extend(extra);
        let (cluster, pg_path) = Cluster::start_through_stall(settings).await?;
        authorize_payers(&anvil, cluster.a(), contract).await;

        let mut accounts = Vec::new();
        for i in 0..ACCOUNTS {
            let app = cluster.a();
            let (key, _) = app.new_account(&format!("ledger-{i}")).await;
            let made = app.post("/create_wallet", Some(&key), json!({})).await;
            let made = made.assert_ok();
            accounts.push(Account {
                key,
                pkp: made["pkp_id"].as_str().unwrap().to_owned(),
                wallet: made["wallet_address"].as_str().unwrap().parse().unwrap(),
            });
        }
        let chain_id = anvil.chain_id();
        let now = crate::viem::unix_now();
        let signatures = futures_util::future::join_all((0..SIGNATURES).map(|i| {
            tokio::task::spawn_blocking(move || {
                crate::viem::signed(SIGNER, "AddUsageApiKey", chain_id, now - i as i64)
            })
        }))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();

        let targets: Targets = Arc::new(Mutex::new(
            cluster
                .replicas
                .iter()
                .map(|r| r.as_ref().map(Target::of))
                .collect(),
        ));
        Some(Self {
            load: Load {
                accounts,
                stripe,
                targets: targets.clone(),
                signatures,
                next_signature: AtomicUsize::new(0),
            },
            parts: Parts {
                cluster,
                pg_path,
                chain_path,
                anvil,
                contract,
                targets,
            },
        })
    }
}

impl Target {
    fn of(app: &Appliance) -> Self {
        Self {
            api: app.api(""),
            client: app.client.clone(),
        }
    }
}

/// Sends `request` and classifies the answer.
async fn call(request: reqwest::RequestBuilder) -> Answer {
    let answer = tokio::time::timeout(DEADLINE + Duration::from_secs(2), request.send()).await;
    let response = match answer {
        Err(_) => return Answer::Wrong(format!("no answer within {DEADLINE:?} + 2 s")),
        Ok(Err(_)) => return Answer::Unavailable,
        Ok(Ok(response)) => response,
    };
    let status = response.status().as_u16();
    let request_id = response
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let Ok(text) = response.text().await else {
        return Answer::Unavailable;
    };
    match status {
        200..300 => match serde_json::from_str(&text) {
            Ok(body) => Answer::Ok { body, request_id },
            Err(_) => Answer::Wrong(format!("{status} with a body that is not JSON: {text}")),
        },
        503 => Answer::Unavailable,
        400..500 => Answer::Refused(status, text),
        _ => Answer::Wrong(format!("{status} (request {request_id}) {text}")),
    }
}

impl Tally {
    /// Counts an answer that was not a success; `expected` refusals are no failure.
    fn other(&mut self, what: &str, answer: Answer, expected: &[u16]) {
        match answer {
            Answer::Ok { .. } => {}
            Answer::Unavailable => self.unavailable += 1,
            Answer::Refused(402, _) => self.out_of_credit += 1,
            Answer::Refused(status, _) if expected.contains(&status) => {}
            Answer::Refused(status, text) => self.wrong.push(format!("{what}: {status} {text}")),
            Answer::Wrong(text) => self.wrong.push(format!("{what}: {text}")),
        }
    }

    /// Every client's tally together.
    pub fn of(tallies: Vec<Tally>) -> Self {
        let mut all = Self::default();
        for t in tallies {
            all.sent += t.sent;
            all.charges.extend(t.charges);
            all.out_of_credit += t.out_of_credit;
            all.unavailable += t.unavailable;
            all.action_errors += t.action_errors;
            all.signatures_checked += t.signatures_checked;
            all.top_ups.extend(t.top_ups);
            all.revoked.extend(t.revoked);
            all.served_within_bound += t.served_within_bound;
            all.minted.extend(t.minted);
            all.wrong.extend(t.wrong);
        }
        all
    }

    /// One line: the operations counted.
    pub fn summary(&self) -> String {
        format!(
            "{} requests: {} charges acknowledged, {} refused for credit, {} unavailable, \
             {} top-ups ({} acknowledged), {} revocations ({} served by another replica \
             within the bound), {} signatures minted, {} action signatures checked, \
             {} action errors",
            self.sent,
            self.charges.len(),
            self.out_of_credit,
            self.unavailable,
            self.top_ups.len(),
            self.top_ups.iter().filter(|t| t.acknowledged).count(),
            self.revoked.len(),
            self.served_within_bound,
            self.minted.iter().filter(|(_, n)| *n > 0).count(),
            self.signatures_checked,
            self.action_errors,
        )
    }
}

impl Load {
    /// Runs `clients` clients while `fault` runs, and stops them when it ends. (The
    /// caller splits its [`Bench`] so that `fault` may act on the [`Parts`].)
    pub async fn under(
        &self,
        clients: usize,
        seed: u64,
        fault: impl std::future::Future<Output = ()>,
    ) -> Tally {
        let stop = AtomicBool::new(false);
        let mut rng = Rng(seed);
        let seeds: Vec<u64> = (0..clients).map(|_| rng.next_u64()).collect();
        let running =
            futures_util::future::join_all(seeds.into_iter().map(|s| self.client(s, &stop)));
        let faulting = async {
            fault.await;
            stop.store(true, Ordering::Relaxed);
        };
        let (tallies, ()) = tokio::join!(running, faulting);
        Tally::of(tallies)
    }

    /// The replicas up now, with their index.
    fn up(&self) -> Vec<(usize, Target)> {
        let targets = self.targets.lock().unwrap();
        targets
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.clone().map(|t| (i, t)))
            .collect()
    }

    /// One client: operations on random accounts and replicas until `stop`.
    pub async fn client(&self, seed: u64, stop: &AtomicBool) -> Tally {
        let mut rng = Rng(seed);
        let mut tally = Tally::default();
        let mut dry = vec![false; self.accounts.len()];
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let up = self.up();
            if up.is_empty() {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            n += 1;
            let a = rng.below(self.accounts.len());
            let (i, target) = &up[rng.below(up.len())];
            let roll = rng.below(100);
            if dry[a] || roll < 5 {
                dry[a] = !self.top_up(a, &mut rng, &mut tally).await;
            } else {
                let before = tally.out_of_credit;
                match roll {
                    5..45 => self.add_group(target, a, n, &mut tally).await,
                    45..70 => self.run(target, a, roll < 58, n, &mut tally).await,
                    70..85 => self.usage_key_cycle((*i, target), a, n, &mut tally).await,
                    _ => self.mint(&mut tally).await,
                }
                dry[a] = tally.out_of_credit > before;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tally
    }

    fn post(
        &self,
        target: &Target,
        path: &str,
        key: Option<&str>,
        body: Value,
    ) -> reqwest::RequestBuilder {
        let request = target
            .client
            .post(format!("{}{path}", target.api))
            .json(&body);
        match key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    async fn add_group(&self, target: &Target, a: usize, n: u64, tally: &mut Tally) {
        tally.sent += 1;
        let body = json!({"group_name": format!("g{n}"), "group_description": "",
                          "pkp_ids_permitted": [], "cid_hashes_permitted": []});
        match call(self.post(target, "/add_group", Some(&self.accounts[a].key), body)).await {
            Answer::Ok { request_id, .. } => tally.charges.push((request_id, "add_group")),
            other => tally.other("add_group", other, &[]),
        }
    }

    /// An action run: hello-world, or a signature by the account's wallet, checked.
    async fn run(&self, target: &Target, a: usize, sign: bool, n: u64, tally: &mut Tally) {
        tally.sent += 1;
        let account = &self.accounts[a];
        let message = format!("ledger {n}");
        let body = if sign {
            json!({"code": SIGN, "js_params": {"pkpId": account.pkp, "message": message}})
        } else {
            json!({"code": HELLO})
        };
        let (body, request_id) =
            match call(self.post(target, "/lit_action", Some(&account.key), body)).await {
                Answer::Ok { body, request_id } => (body, request_id),
                other => return tally.other("lit_action", other, &[]),
            };
        tally.charges.push((request_id, "lit_action"));
        if body.get("error").is_some_and(|e| !e.is_null()) {
            tally.action_errors += 1;
            return;
        }
        if !sign {
            if body["response"] != json!("hello") {
                tally.wrong.push(format!("hello-world answered {body}"));
            }
            return;
        }
        let signer = body["response"]
            .as_str()
            .and_then(|s| s.parse::<Signature>().ok())
            .and_then(|s| s.recover_address_from_msg(message.as_bytes()).ok());
        match signer {
            Some(signer) if signer == account.wallet => tally.signatures_checked += 1,
            _ => tally.wrong.push(format!(
                "an action's signature is not by its wallet {}: {body}",
                account.wallet
            )),
        }
    }

    /// A card top-up: an intent on one replica, paid, confirmed on every replica at
    /// once. True if it was credited (some confirmation acknowledged).
    async fn top_up(&self, a: usize, rng: &mut Rng, tally: &mut Tally) -> bool {
        let up = self.up();
        if up.is_empty() {
            return false;
        }
        let (_, target) = &up[rng.below(up.len())];
        let key = &self.accounts[a].key;
        tally.sent += 1;
        let body = json!({"amount_cents": TOP_UP});
        let intent = match call(self.post(
            target,
            "/billing/create_payment_intent",
            Some(key),
            body,
        ))
        .await
        {
            Answer::Ok { body, .. } => body["payment_intent_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            other => {
                tally.other("create_payment_intent", other, &[]);
                return false;
            }
        };
        self.stripe.pay_with_test_card(&intent).await;
        let confirmations = up.iter().map(|(_, target)| {
            let body = json!({"payment_intent_id": intent});
            call(self.post(target, "/billing/confirm_payment", Some(key), body))
        });
        let mut top_up = TopUp {
            intent: intent.clone(),
            account: a,
            acknowledged: false,
            credited: 0,
        };
        for answer in futures_util::future::join_all(confirmations).await {
            tally.sent += 1;
            match answer {
                Answer::Ok { body, .. } => {
                    top_up.acknowledged = true;
                    top_up.credited += body["credited_cents"].as_u64().unwrap_or(0);
                }
                other => tally.other("confirm_payment", other, &[]),
            }
        }
        let credited = top_up.acknowledged;
        tally.top_ups.push(top_up);
        credited
    }

    /// A usage key created, removed, then tried on every replica: each must refuse it.
    async fn usage_key_cycle(
        &self,
        (i, target): (usize, &Target),
        a: usize,
        n: u64,
        tally: &mut Tally,
    ) {
        let account = &self.accounts[a].key;
        tally.sent += 1;
        let body = json!({"name": format!("k{n}"), "description": ""});
        let key = match call(self.post(target, "/add_usage_api_key", Some(account), body)).await {
            Answer::Ok { body, request_id } => {
                tally.charges.push((request_id, "add_usage_api_key"));
                body["usage_api_key"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            }
            other => return tally.other("add_usage_api_key", other, &[]),
        };
        tally.sent += 1;
        let body = json!({"usage_api_key": key});
        match call(self.post(target, "/remove_usage_api_key", Some(account), body)).await {
            Answer::Ok { request_id, .. } => {
                tally.charges.push((request_id, "remove_usage_api_key"));
            }
            other => return tally.other("remove_usage_api_key", other, &[]),
        }
        // Acknowledged: from now on the replica that removed it may not serve it, and
        // no other replica after the bound of `docs/operators.md` ("Revocation": at most
        // 2 s, whatever happens to the notification that empties their key caches).
        let acknowledged = std::time::Instant::now();
        for (j, replica) in self.up() {
            for attempt in 0..2 {
                if attempt == 1 {
                    tokio::time::sleep_until((acknowledged + REVOCATION_BOUND).into()).await;
                }
                tally.sent += 1;
                let request = replica
                    .client
                    .get(format!("{}/billing/balance", replica.api))
                    .bearer_auth(&key);
                match call(request).await {
                    Answer::Ok { .. } if j != i && attempt == 0 => {
                        // Within the bound: try again once it has passed.
                        tally.served_within_bound += 1;
                        continue;
                    }
                    Answer::Ok { .. } => tally.wrong.push(format!(
                        "replica {j} served a usage key {:.1?} after replica {i} acknowledged its removal",
                        acknowledged.elapsed()
                    )),
                    other => tally.other("a removed key", other, &[401]),
                }
                break;
            }
        }
        tally.revoked.push(key);
    }

    /// The next signature, sent to every replica at once: at most one may accept it.
    async fn mint(&self, tally: &mut Tally) {
        let i = self.next_signature.fetch_add(1, Ordering::Relaxed);
        let Some(body) = self.signatures.get(i) else {
            return;
        };
        let up = self.up();
        let sends = up.iter().map(|(_, target)| {
            call(self.post(
                target,
                "/add_usage_api_key_with_signature",
                None,
                body.clone(),
            ))
        });
        let mut accepted = 0;
        for answer in futures_util::future::join_all(sends).await {
            tally.sent += 1;
            match answer {
                Answer::Ok { .. } => accepted += 1,
                // The other replica's refusal: already accepted.
                other => tally.other("a signature", other, &[422]),
            }
        }
        if accepted > 1 {
            tally
                .wrong
                .push(format!("signature {i} was accepted {accepted} times"));
        }
        tally.minted.push((i, accepted));
    }
}

impl Parts {
    /// Kills replica `i` with SIGKILL (no shutdown code runs); clients stop using it.
    pub fn kill_replica(&mut self, i: usize) {
        self.targets.lock().unwrap()[i] = None;
        if let Some(mut app) = self.cluster.replicas[i].take() {
            app.kill9();
        }
    }

    /// Starts replica `i` again on its data directory; clients use it again.
    pub async fn restart_replica(&mut self, i: usize) {
        let app = launch(&self.cluster.dirs[i], &self.cluster.env).await;
        self.targets.lock().unwrap()[i] = Some(Target::of(&app));
        self.cluster.replicas[i] = Some(app);
    }

    /// The replica that leads `singleton` (e.g. `chain-relayer`), by its `/health`.
    pub async fn leader_of(&self, singleton: &str) -> Option<usize> {
        for (i, app) in self.cluster.replicas.iter().enumerate() {
            let Some(app) = app else { continue };
            let health = crate::replicas::health(app).await;
            let leads = health["store"]["leads"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if leads.iter().any(|l| l == singleton) {
                return Some(i);
            }
        }
        None
    }

    /// Kills replica `i`'s keyservice child with SIGKILL (its supervisor restarts it).
    /// False if it had none running.
    pub fn kill_keyservice(&self, i: usize) -> bool {
        let Some(app) = &self.cluster.replicas[i] else {
            return false;
        };
        match children_of(app.pid(), "keyservice run").first() {
            Some(pid) => {
                crate::signal(*pid, "KILL");
                true
            }
            None => false,
        }
    }

    /// Kills every PostgreSQL process (the database's machine loses power).
    pub fn kill_postgres(&mut self) {
        tokio::task::block_in_place(|| self.cluster.pg.stop(Shutdown::KillAll));
    }

    /// Starts PostgreSQL again (crash recovery runs).
    pub fn start_postgres(&mut self) {
        tokio::task::block_in_place(|| self.cluster.pg.start_again());
    }

    /// Rows of `sql`, read straight from the database.
    pub async fn rows(&self, sql: &str) -> Vec<postgres::Row> {
        let (url, sql) = (self.cluster.url.clone(), sql.to_owned());
        tokio::task::spawn_blocking(move || {
            let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            client.query(&sql, &[]).unwrap()
        })
        .await
        .unwrap()
    }

    /// Outbox entries by state.
    pub async fn outbox_states(&self) -> BTreeMap<String, i64> {
        self.rows("SELECT state, count(*) FROM chain_outbox GROUP BY state")
            .await
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    }
}

impl Bench {
    /// Holds `tally` against the database and the chain (the module's invariants), once
    /// every replica is up; panics on the first broken one. Returns a summary line.
    pub async fn check(&self, tally: &Tally) -> String {
        let Tally { wrong, .. } = tally;
        if !wrong.is_empty() {
            // What the replicas logged about it (their logs go with the test).
            for (i, app) in self.parts.cluster.replicas.iter().enumerate() {
                let Some(app) = app else { continue };
                for line in app.log().lines().filter(|l| {
                    l.contains("ERROR") || wrong.iter().any(|w| w.contains(&request_of(l)))
                }) {
                    eprintln!("replica {i}: {line}");
                }
            }
        }
        assert!(wrong.is_empty(), "broken rules: {wrong:#?}");
        let parts = &self.parts;
        let apps: Vec<&Appliance> = parts
            .cluster
            .replicas
            .iter()
            .map(|r| r.as_ref().expect("every replica up for the check"))
            .collect();
        for app in &apps {
            assert!(
                eventually_async(Duration::from_secs(30), || async {
                    crate::replicas::health(app).await["status"] == "ok"
                })
                .await,
                "a replica is not healthy after the fault: {}",
                crate::replicas::health(app).await
            );
        }

        // Top-ups: confirming every paid intent again credits the ones not yet credited
        // and none twice.
        let a = apps[0];
        for top_up in &tally.top_ups {
            let key = &self.load.accounts[top_up.account].key;
            let again = a
                .post(
                    "/billing/confirm_payment",
                    Some(key),
                    json!({"payment_intent_id": top_up.intent}),
                )
                .await;
            let credited = again.assert_ok()["credited_cents"].as_u64().unwrap();
            if top_up.acknowledged {
                assert_eq!(
                    credited, 0,
                    "top-up {} acknowledged, yet credited again",
                    top_up.intent
                );
            }
            assert!(
                top_up.credited + credited <= TOP_UP,
                "{top_up:?} credited {credited} more"
            );
        }

        let ledger = parts
            .rows(
                "SELECT l.id, a.api_key_hash, l.kind, l.amount_cents, l.balance_after,
                        l.payment_intent_id, l.request_id
                 FROM credit_ledger l JOIN accounts a ON a.id = l.account_id ORDER BY l.id",
            )
            .await;
        let hash_of = |key: &str| key_hash(key).to_be_bytes::<32>().to_vec();
        let mut by_request: BTreeMap<String, usize> = BTreeMap::new();
        let mut by_intent: BTreeMap<String, (usize, i64)> = BTreeMap::new();
        for row in &ledger {
            if let Some(request) = row.get::<_, Option<String>>(6) {
                *by_request.entry(request).or_default() += 1;
            }
            if let Some(intent) = row.get::<_, Option<String>>(5) {
                let e = by_intent.entry(intent).or_default();
                e.0 += 1;
                e.1 += row.get::<_, i64>(3);
            }
        }
        let twice: Vec<_> = by_request.iter().filter(|(_, n)| **n > 1).collect();
        assert!(
            twice.is_empty(),
            "requests with more than one ledger row: {twice:?}"
        );
        let lost: Vec<_> = tally
            .charges
            .iter()
            .filter(|(request, _)| !by_request.contains_key(request))
            .collect();
        assert!(
            lost.is_empty(),
            "acknowledged charges missing from the ledger: {lost:?}"
        );
        for top_up in &tally.top_ups {
            assert_eq!(
                by_intent.get(&top_up.intent),
                Some(&(1, TOP_UP as i64)),
                "top-up {} in the ledger once, for its amount",
                top_up.intent
            );
        }

        // Balances: never below zero, the sum of the rows, the last row's balance_after,
        // and what every replica's API says.
        let balances = parts
            .rows("SELECT a.api_key_hash, b.balance_cents FROM credit_balances b JOIN accounts a ON a.id = b.account_id")
            .await;
        for account in &self.load.accounts {
            let hash = hash_of(&account.key);
            let mine: Vec<_> = ledger
                .iter()
                .filter(|r| r.get::<_, Vec<u8>>(1) == hash)
                .collect();
            let sum: i64 = mine.iter().map(|r| r.get::<_, i64>(3)).sum();
            let last: i64 = mine.last().map_or(0, |r| r.get(4));
            let low = mine.iter().map(|r| r.get::<_, i64>(4)).min().unwrap_or(0);
            let stored: i64 = balances
                .iter()
                .find(|r| r.get::<_, Vec<u8>>(0) == hash)
                .map(|r| r.get(1))
                .expect("a balance row");
            assert!(
                low >= 0 && stored >= 0,
                "a balance below zero: {low}, {stored}"
            );
            assert_eq!(
                (stored, stored),
                (sum, last),
                "balance vs the sum of the rows, and the last row"
            );
            for app in &apps {
                let api = app.get("/billing/balance", Some(&account.key)).await;
                assert_eq!(
                    api.assert_ok()["balance_cents"],
                    json!(stored),
                    "the API's balance"
                );
            }
        }

        // Revocations hold on every replica.
        for key in &tally.revoked {
            for app in &apps {
                app.get("/billing/balance", Some(key))
                    .await
                    .assert_error(401);
            }
        }

        // Signatures: none was acknowledged twice (checked as they came). Sending each
        // again is refused if it was acknowledged (or its 300 s window has passed, as in
        // a long chaos run); one minted key per accepted signature.
        let acknowledged = tally.minted.iter().filter(|(_, acks)| *acks > 0).count() as i64;
        let mut accepted_now = 0;
        for (i, acks) in &tally.minted {
            let again = a
                .post(
                    "/add_usage_api_key_with_signature",
                    None,
                    self.load.signatures[*i].clone(),
                )
                .await;
            if again.status == 200 {
                assert_eq!(*acks, 0, "signature {i} acknowledged, yet accepted again");
                accepted_now += 1;
            } else {
                let why = again.assert_error(422);
                assert!(
                    // Refused as a replay, or (a long run) as older than its window.
                    why.contains("already accepted") || why.contains("fresh message"),
                    "signature {i}: {why}"
                );
            }
        }
        let minted: i64 = parts.rows("SELECT count(*) FROM minted_usage_keys").await[0].get(0);
        let tried = tally.minted.len() as i64;
        assert!(
            acknowledged + accepted_now <= minted && minted <= tried,
            "{minted} minted usage keys; {acknowledged} signatures acknowledged, \
             {accepted_now} accepted at the check, {tried} tried"
        );
        let accepted = minted;

        // The outbox drains; the chain holds each entry once, each account's in order.
        // However long the queue grew during an outage, it must keep draining: fail only
        // when nothing more was mined for `DRAIN_STALL`.
        let draining = std::time::Instant::now();
        let mined = |states: &BTreeMap<String, i64>| states.get("mined").copied().unwrap_or(0);
        let mined_before = mined(&parts.outbox_states().await);
        let (mut last, mut progressed) = (mined_before, std::time::Instant::now());
        loop {
            let states = parts.outbox_states().await;
            if states.keys().all(|s| s == "mined") {
                break;
            }
            if mined(&states) > last {
                (last, progressed) = (mined(&states), std::time::Instant::now());
            }
            assert!(
                progressed.elapsed() < DRAIN_STALL,
                "the outbox stopped draining for {DRAIN_STALL:?}: {states:?}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let drained = draining.elapsed();
        let drained_entries = mined(&parts.outbox_states().await) - mined_before;
        let mut stored = stored_of(parts).await;
        stored.removed_keys = tally.revoked.iter().map(|k| key_hash(k)).collect();
        let mirrored =
            crate::chain::assert_mirrored_once(&parts.anvil, parts.contract, &stored).await;
        let order = parts
            .rows(
                "SELECT o.api_key_hash, o.seq, b.mined_hash FROM chain_outbox o
                 JOIN chain_batches b ON b.id = o.batch_id ORDER BY o.seq",
            )
            .await;
        let mut positions: BTreeMap<Vec<u8>, (u64, u64)> = BTreeMap::new();
        let mut last: BTreeMap<Vec<u8>, ((u64, u64), i64)> = BTreeMap::new();
        for row in &order {
            let hash: Vec<u8> = row.get::<_, Option<Vec<u8>>>(2).expect("a mined batch");
            let at = match positions.get(&hash) {
                Some(at) => *at,
                None => {
                    let at = crate::chain::position_of(&parts.anvil, &hash).await;
                    positions.insert(hash.clone(), at);
                    at
                }
            };
            let account: Vec<u8> = row.get(0);
            let seq: i64 = row.get(1);
            if let Some((before, earlier)) = last.get(&account) {
                assert!(
                    *before <= at,
                    "outbox entry {seq} was mined at {at:?}, before entry {earlier} of the same account at {before:?}"
                );
            }
            last.insert(account, (at, seq));
        }
        // The indexer catches up with the chain's head.
        let head = crate::chain::wallet(&parts.anvil, 0)
            .get_block_number()
            .await
            .expect("the head");
        let caught_up = eventually_async(Duration::from_secs(30), || async {
            let cursors = parts.rows("SELECT block FROM chain_cursors").await;
            !cursors.is_empty() && cursors.iter().all(|r| r.get::<_, i64>(0) as u64 >= head)
        })
        .await;
        assert!(
            caught_up,
            "the indexer did not reach block {head}: {:?}",
            parts
                .rows("SELECT name, block FROM chain_cursors")
                .await
                .iter()
                .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)))
                .collect::<Vec<_>>()
        );
        format!(
            "checked: {} ledger rows, {} balances, {} revocations, {accepted} signatures; \
             {mirrored} (the checker waited {drained:.1?} for the last {drained_entries} to be mined)",
            ledger.len(),
            self.load.accounts.len(),
            tally.revoked.len()
        )
    }
}

/// The request id a log line names (`id=…`), or a string no rule contains.
fn request_of(line: &str) -> String {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("id="))
        .map_or_else(|| "\u{0}".to_owned(), str::to_owned)
}

/// What the store holds that the chain must mirror, by kind, with the outbox's size.
async fn stored_of(parts: &Parts) -> crate::chain::Mirrored {
    let u256s = |rows: Vec<postgres::Row>| -> Vec<U256> {
        rows.iter()
            .map(|r| U256::from_be_slice(&r.get::<_, Vec<u8>>(0)))
            .collect()
    };
    let mut stored = crate::chain::Mirrored::default();
    stored.kinds.insert(
        "accounts",
        u256s(parts.rows("SELECT api_key_hash FROM accounts").await),
    );
    stored.kinds.insert(
        "usage keys",
        u256s(parts.rows("SELECT key_hash FROM usage_keys").await),
    );
    stored.kinds.insert(
        "wallets",
        u256s(
            parts
                .rows("SELECT address FROM wallets WHERE account_id IS NOT NULL")
                .await,
        ),
    );
    stored.kinds.insert(
        "groups",
        parts
            .rows("SELECT id FROM groups")
            .await
            .iter()
            .map(|r| U256::from(r.get::<_, i64>(0) as u64))
            .collect(),
    );
    stored.outbox =
        parts.rows("SELECT count(*) FROM chain_outbox").await[0].get::<_, i64>(0) as usize;
    stored
}
