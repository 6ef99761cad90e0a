//! Billing end to end, against a real localstripe (PyPI `localstripe`, installed by
//! `scripts/setup`) bound to 127.0.0.1 on a port the OS picks: payment intents are
//! created by the appliance, confirmed with a test card through the Stripe API, and
//! credited exactly once; billed calls are charged, rejected calls never.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use e2e::localstripe::{PUBLISHABLE_KEY, SECRET_KEY};
use e2e::{Appliance, Launch, LocalStripe};
use serde_json::{Value, json};

async fn launch(dir: &Path, stripe: &LocalStripe, initial_credit: u64) -> Appliance {
    Appliance::launch(
        dir,
        Launch::DevWith {
            env: stripe.env(initial_credit),
        },
    )
    .await
}

async fn balance(app: &Appliance, key: &str) -> u64 {
    app.get("/billing/balance", Some(key)).await.assert_ok()["balance_cents"]
        .as_u64()
        .unwrap()
}

async fn create_intent(app: &Appliance, key: &str, cents: u64) -> (String, String) {
    let r = app
        .post(
            "/billing/create_payment_intent",
            Some(key),
            json!({ "amount_cents": cents }),
        )
        .await;
    let body = r.assert_ok();
    (
        body["payment_intent_id"].as_str().unwrap().to_owned(),
        body["client_secret"].as_str().unwrap().to_owned(),
    )
}

async fn group_count(app: &Appliance, key: &str) -> usize {
    app.groups(key).await.len()
}

#[tokio::test]
async fn a_card_payment_is_credited_exactly_once() {
    let mut stripe = LocalStripe::start();
    let dir = tempfile::tempdir().unwrap();
    let mut app = launch(dir.path(), &stripe, 0).await;
    let (alice, _) = app.new_account("alice").await;
    let (bob, _) = app.new_account("bob").await;

    let config = app.get("/billing/stripe_config", None).await;
    assert_eq!(
        config.assert_ok(),
        &json!({ "publishable_key": PUBLISHABLE_KEY })
    );
    assert_eq!(
        app.get("/billing/balance", Some(&alice)).await.assert_ok(),
        &json!({"balance_cents": 0, "balance_display": "$0.00"})
    );

    // The minimum is 500 cents; amounts must be integers.
    for bad in [
        json!(499),
        json!(0),
        json!(-500),
        json!(500.5),
        json!("500"),
    ] {
        app.post(
            "/billing/create_payment_intent",
            Some(&alice),
            json!({ "amount_cents": bad }),
        )
        .await
        .assert_error(400);
    }
    let (intent, client_secret) = create_intent(&app, &alice, 500).await;
    assert!(intent.starts_with("pi_"), "{intent}");
    assert!(client_secret.starts_with(&intent), "{client_secret}");

    // Not paid yet: nothing is credited.
    let early = app
        .post(
            "/billing/confirm_payment",
            Some(&alice),
            json!({ "payment_intent_id": intent }),
        )
        .await;
    assert!(early.assert_error(409).contains("requires_payment_method"));
    assert_eq!(balance(&app, &alice).await, 0);

    stripe.pay_with_test_card(&intent).await;

    // Another account cannot claim it, before or after it was credited.
    app.post(
        "/billing/confirm_payment",
        Some(&bob),
        json!({ "payment_intent_id": intent }),
    )
    .await
    .assert_error(404);

    // Ten concurrent confirmations: all succeed, one credits.
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let client = app.client.clone();
        let url = app.api("/billing/confirm_payment");
        let (key, intent) = (alice.clone(), intent.clone());
        tasks.push(tokio::spawn(async move {
            let r = client
                .post(url)
                .bearer_auth(key)
                .json(&json!({ "payment_intent_id": intent }))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            r.json::<Value>().await.unwrap()
        }));
    }
    let mut credited = 0;
    for t in tasks {
        let body = t.await.unwrap();
        assert_eq!(body["success"], json!(true), "{body}");
        assert_eq!(body["balance_cents"], json!(500), "{body}");
        credited += body["credited_cents"].as_u64().unwrap();
    }
    assert_eq!(credited, 500, "exactly one confirmation credited");
    assert_eq!(
        app.get("/billing/balance", Some(&alice)).await.assert_ok(),
        &json!({"balance_cents": 500, "balance_display": "$5.00"})
    );
    app.post(
        "/billing/confirm_payment",
        Some(&bob),
        json!({ "payment_intent_id": intent }),
    )
    .await
    .assert_error(404);
    assert_eq!(balance(&app, &bob).await, 0);

    // Credit pays for management writes (one cent each); a usage key may read the
    // balance but not pay.
    let (usage, _) = app.add_usage_key(&alice, json!({})).await;
    assert_eq!(balance(&app, &usage).await, 499);
    app.post(
        "/billing/create_payment_intent",
        Some(&usage),
        json!({"amount_cents": 500}),
    )
    .await
    .assert_error(403);
    app.post(
        "/billing/confirm_payment",
        Some(&usage),
        json!({ "payment_intent_id": intent }),
    )
    .await
    .assert_error(403);
    app.post(
        "/billing/confirm_payment",
        Some(&alice),
        json!({ "payment_intent_id": "pi_does/../not" }),
    )
    .await
    .assert_error(400);
    app.post(
        "/billing/confirm_payment",
        Some(&alice),
        json!({ "payment_intent_id": "pi_Unknown123" }),
    )
    .await
    .assert_error(404);

    // After a restart, confirming again still credits nothing more.
    app.terminate().await;
    let mut app = launch(dir.path(), &stripe, 0).await;
    let again = app
        .post(
            "/billing/confirm_payment",
            Some(&alice),
            json!({ "payment_intent_id": intent }),
        )
        .await;
    assert_eq!(
        again.assert_ok(),
        &json!({"success": true, "balance_cents": 499, "credited_cents": 0})
    );
    // A second payment adds to the first.
    let (second, _) = create_intent(&app, &alice, 750).await;
    stripe.pay_with_test_card(&second).await;
    let r = app
        .post(
            "/billing/confirm_payment",
            Some(&alice),
            json!({ "payment_intent_id": second }),
        )
        .await;
    assert_eq!(r.assert_ok()["balance_cents"], json!(1249));

    // Stripe down: a clear 503 after bounded retries, and the balance is unchanged.
    stripe.stop();
    let started = Instant::now();
    let down = app
        .post(
            "/billing/create_payment_intent",
            Some(&alice),
            json!({"amount_cents": 500}),
        )
        .await;
    assert!(down.assert_error(503).contains("Stripe"));
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(balance(&app, &alice).await, 1249);

    // The secret key never reaches the log.
    app.terminate().await;
    assert!(
        !app.log().contains(SECRET_KEY),
        "the Stripe secret key was logged"
    );
}

#[tokio::test]
async fn billed_calls_are_charged_and_rejected_calls_are_not() {
    let stripe = LocalStripe::start();
    let dir = tempfile::tempdir().unwrap();
    let app = launch(dir.path(), &stripe, 4).await;

    let prices = app.get("/billing/prices", None).await;
    assert_eq!(
        prices.assert_ok(),
        &json!({
            "billing_enabled": true,
            "currency": "usd",
            "management_write_cents": 1,
            "action_second_cents": 1,
            "read_cents": 0,
            "minimum_payment_cents": 500,
            "initial_credit_cents": 4,
        })
    );

    // The starting credit is granted with the account.
    let (key, _) = app.new_account("payer").await;
    assert_eq!(balance(&app, &key).await, 4);

    // Usage keys are created free of charge? No: it is a billed management write.
    let (reader, _) = app.add_usage_key(&key, json!({})).await;
    assert_eq!(balance(&app, &key).await, 3);

    // Rejected calls are never charged: authentication, permission, validation,
    // nonexistent resources.
    let group_body = json!({"group_name": "g", "group_description": "", "pkp_ids_permitted": [], "cid_hashes_permitted": []});
    app.post("/add_group", None, group_body.clone())
        .await
        .assert_error(401);
    app.post(
        "/add_group",
        Some("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
        group_body.clone(),
    )
    .await
    .assert_error(401);
    app.post("/add_group", Some(&reader), group_body.clone())
        .await
        .assert_error(403);
    app.post("/add_group", Some(&key), json!({"group_description": "x"}))
        .await
        .assert_error(400);
    app.post(
        "/add_group",
        Some(&key),
        json!({"group_name": "g", "pkp_ids_permitted": ["0x12"]}),
    )
    .await
    .assert_error(400);
    app.post(
        "/update_group",
        Some(&key),
        json!({"group_id": 999999, "name": "n", "pkp_ids_permitted": [], "cid_hashes_permitted": []}),
    )
    .await
    .assert_error(404);
    app.post(
        "/lit_action",
        Some(&reader),
        json!({"code": "async function main() { return 1; }"}),
    )
    .await
    .assert_error(403);
    app.post("/lit_action", Some(&key), json!({}))
        .await
        .assert_error(400);
    // Reads are free.
    assert_eq!(group_count(&app, &key).await, 0);
    app.get("/list_wallets", Some(&key)).await.assert_ok();
    assert_eq!(balance(&app, &key).await, 3);

    // One charge per billed call.
    app.add_group(&key, group_body.clone()).await;
    assert_eq!(balance(&app, &key).await, 2);
    let ran = app
        .post(
            "/lit_action",
            Some(&key),
            json!({"code": "async function main() { return 6 * 7; }"}),
        )
        .await;
    assert_eq!(ran.assert_ok()["response"], json!(42));
    assert_eq!(
        balance(&app, &key).await,
        1,
        "a short action costs one second"
    );

    // An action that would run longer than the credit is stopped when it runs out.
    let started = Instant::now();
    let stopped = app
        .post(
            "/lit_action",
            Some(&key),
            json!({"code": "async function main() { console.log('spinning'); while (true) {} }"}),
        )
        .await;
    let body = stopped.assert_ok();
    assert_eq!(body["has_error"], json!(true), "{body}");
    assert_eq!(body["error"]["kind"], json!("limit"), "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("credit"), "{message}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "stopped by the credit, not the 30 s timeout"
    );
    assert_eq!(balance(&app, &key).await, 0);

    // At zero credit every billed call is 402 and changes nothing; reads still work.
    let wallets_before = app.list("/list_wallets", &key).await.len();
    let refused = app.post("/add_group", Some(&key), group_body.clone()).await;
    assert!(refused.assert_error(402).contains("credit"));
    app.get("/create_wallet", Some(&key))
        .await
        .assert_error(402);
    app.post(
        "/add_usage_api_key",
        Some(&key),
        json!({"name": "k", "description": ""}),
    )
    .await
    .assert_error(402);
    app.post(
        "/lit_action",
        Some(&key),
        json!({"code": "async function main() { return 1; }"}),
    )
    .await
    .assert_error(402);
    assert_eq!(group_count(&app, &key).await, 1);
    assert_eq!(app.list("/list_wallets", &key).await.len(), wallets_before);
    assert_eq!(app.list("/list_api_keys", &key).await.len(), 1);
    assert_eq!(balance(&app, &key).await, 0);
    // Validation still comes first at zero credit.
    app.post("/add_group", Some(&key), json!({}))
        .await
        .assert_error(400);

    // The OpenAPI description names the 402 of billed routes.
    let doc = app.get("/openapi.json", None).await.assert_ok().clone();
    for (path, method) in [
        ("/core/v1/add_group", "post"),
        ("/core/v1/lit_action", "post"),
    ] {
        assert!(
            doc["paths"][path][method]["responses"]["402"].is_object(),
            "{path}"
        );
    }
    assert!(doc["paths"]["/core/v1/list_groups"]["get"]["responses"]["402"].is_null());
}

#[tokio::test]
async fn acknowledged_charges_survive_kill_9() {
    let stripe = LocalStripe::start();
    let dir = tempfile::tempdir().unwrap();
    let mut app = launch(dir.path(), &stripe, 1000).await;
    let (key, _) = app.new_account("burst").await;
    assert_eq!(balance(&app, &key).await, 1000);

    let mut tasks = Vec::new();
    for i in 0..40 {
        let client = app.client.clone();
        let url = app.api("/add_group");
        let key = key.clone();
        tasks.push(tokio::spawn(async move {
            let r = client
                .post(url)
                .bearer_auth(key)
                .json(&json!({"group_name": format!("g{i}")}))
                .send()
                .await
                .ok()?;
            if r.status() != 200 {
                return None;
            }
            let body: Value = r.json().await.ok()?;
            body["group_id"].as_str().map(str::to_owned)
        }));
    }
    let mut acknowledged = Vec::new();
    for (i, t) in tasks.into_iter().enumerate() {
        if i == 20 {
            app.kill9();
        }
        if let Ok(Some(id)) = t.await {
            acknowledged.push(id);
        }
    }
    assert!(acknowledged.len() >= 20, "{}", acknowledged.len());

    let app = launch(dir.path(), &stripe, 1000).await;
    let groups = app.groups(&key).await;
    let stored: Vec<&str> = groups.iter().map(|g| g["id"].as_str().unwrap()).collect();
    for id in &acknowledged {
        assert!(
            stored.contains(&id.as_str()),
            "acknowledged group {id} lost"
        );
    }
    // Every stored write was charged exactly once, and nothing else was.
    assert_eq!(
        balance(&app, &key).await,
        1000 - stored.len() as u64,
        "{} groups stored",
        stored.len()
    );
}

#[tokio::test]
async fn billing_disabled_charges_nothing_and_answers_503() {
    let app = Appliance::start().await;
    let (key, _) = app.new_account("free").await;
    let r = app.get("/billing/stripe_config", None).await;
    assert!(r.assert_error(503).contains("disabled"));
    app.post(
        "/billing/create_payment_intent",
        Some(&key),
        json!({"amount_cents": 500}),
    )
    .await
    .assert_error(503);
    app.post(
        "/billing/confirm_payment",
        Some(&key),
        json!({"payment_intent_id": "pi_x"}),
    )
    .await
    .assert_error(503);
    assert_eq!(
        app.get("/billing/balance", Some(&key)).await.assert_ok(),
        &json!({"balance_cents": 0, "balance_display": "$0.00"})
    );
    app.get("/billing/balance", None).await.assert_error(401);
    let prices = app.get("/billing/prices", None).await;
    assert_eq!(prices.assert_ok()["billing_enabled"], json!(false));
    // Billed calls are free: they succeed at zero balance.
    app.add_group(&key, json!({"group_name": "g"})).await;
    app.post(
        "/lit_action",
        Some(&key),
        json!({"code": "async function main() { return 1; }"}),
    )
    .await
    .assert_ok();
    assert_eq!(balance(&app, &key).await, 0);
}

/// Anvil's well-known dev key 2 (a public test key, no value anywhere).
const ADMIN_KEY: &str = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a";

/// A fresh `X-Wallet-Auth` value (each is accepted once).
fn wallet_auth(chain_id: u64, issued_at: u64) -> String {
    use base64::Engine as _;
    let signed = e2e::viem::signed(ADMIN_KEY, "BillingAuth", chain_id, issued_at as i64);
    base64::engine::general_purpose::STANDARD.encode(
        json!({"typed_data": signed["typed_data"], "signature": signed["signature"]}).to_string(),
    )
}

#[tokio::test]
async fn a_converted_account_keeps_its_credit_and_pays_with_wallet_auth() {
    let stripe = LocalStripe::start();
    let dir = tempfile::tempdir().unwrap();
    let app = launch(dir.path(), &stripe, 7).await;
    let chain_id = app.get("/get_node_chain_config", None).await.assert_ok()["chain_id"]
        .as_u64()
        .unwrap();
    let (key, _) = app.new_account("to convert").await;
    app.add_group(&key, json!({"group_name": "g"})).await;
    assert_eq!(balance(&app, &key).await, 6);

    // Convert to ChainSecured (the admin wallet signs ConvertAccount).
    let convert = e2e::viem::signed(ADMIN_KEY, "ConvertAccount", chain_id, e2e::viem::unix_now());
    let body = json!({
        "typed_data": convert["typed_data"],
        "signature": convert["signature"],
        "new_admin_wallet_address": convert["typed_data"]["message"]["address"],
    });
    app.post("/convert_to_chain_secured_account", Some(&key), body)
        .await
        .assert_ok();

    // The former account key no longer reads the balance; the admin wallet does, and the
    // credit is still there.
    app.get("/billing/balance", Some(&key))
        .await
        .assert_error(403);
    let now = e2e::viem::unix_now() as u64;
    let get_balance = |issued_at: u64| {
        let req = app
            .client
            .get(app.api("/billing/balance"))
            .header("X-Wallet-Auth", wallet_auth(chain_id, issued_at));
        app.send(req)
    };
    let r = get_balance(now).await;
    assert_eq!(
        r.assert_ok(),
        &json!({"balance_cents": 6, "balance_display": "$0.06"})
    );

    // It pays with a card, authenticated by fresh wallet signatures.
    let req = app
        .client
        .post(app.api("/billing/create_payment_intent"))
        .header("X-Wallet-Auth", wallet_auth(chain_id, now + 1))
        .json(&json!({"amount_cents": 600}));
    let created = app.send(req).await;
    let intent = created.assert_ok()["payment_intent_id"]
        .as_str()
        .unwrap()
        .to_owned();
    stripe.pay_with_test_card(&intent).await;
    let req = app
        .client
        .post(app.api("/billing/confirm_payment"))
        .header("X-Wallet-Auth", wallet_auth(chain_id, now + 2))
        .json(&json!({"payment_intent_id": intent}));
    let confirmed = app.send(req).await;
    assert_eq!(
        confirmed.assert_ok(),
        &json!({"success": true, "balance_cents": 606, "credited_cents": 600})
    );
    assert_eq!(
        get_balance(now + 3).await.assert_ok()["balance_cents"],
        json!(606)
    );
}

// ---- Every run is paid for: one test per way an action can end. ----

/// Credit every account in the run-charge tests starts with.
const START_CREDIT: u64 = 1000;
/// Spins for about 1.2 s, so the run costs 2 started seconds (2 cents).
const SPIN_1200_MS: &str = "const t0 = Date.now(); while (Date.now() - t0 < 1200) {}";

/// An appliance with billing on (1 cent per started second of an action), `extra`
/// settings, and one account holding `START_CREDIT` cents.
struct Billed {
    _stripe: LocalStripe,
    _dir: tempfile::TempDir,
    app: Appliance,
    key: String,
}

impl Billed {
    async fn start(extra: &[(&str, &str)]) -> Self {
        let stripe = LocalStripe::start();
        let dir = tempfile::tempdir().unwrap();
        let mut env = stripe.env(START_CREDIT);
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let app = Appliance::launch(dir.path(), Launch::DevWith { env }).await;
        let (key, _) = app.new_account("runner").await;
        Self {
            _stripe: stripe,
            _dir: dir,
            app,
            key,
        }
    }

    fn db(&self) -> rusqlite::Connection {
        rusqlite::Connection::open_with_flags(
            self.app.data_dir.join("state.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap()
    }

    /// The `lit_action` charges in the ledger (cents, positive), oldest first.
    fn action_charges(&self) -> Vec<i64> {
        let db = self.db();
        let mut stmt = db
            .prepare(
                "SELECT -amount_cents FROM credit_ledger WHERE kind = 'charge' AND operation = 'lit_action' ORDER BY id",
            )
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// Waits (up to `limit`) until `n` actions have been charged; returns the charges.
    async fn charges_after(&self, n: usize, limit: Duration) -> Vec<i64> {
        let deadline = Instant::now() + limit;
        loop {
            let charges = self.action_charges();
            if charges.len() >= n || Instant::now() > deadline {
                return charges;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Checks the ledger once every charge is in: exactly `expected` was charged for
    /// actions, in one row each, the balance (API) is the start credit less every charge,
    /// and equals the sum of the rows.
    async fn assert_ledger(&self, expected: &[std::ops::RangeInclusive<i64>]) {
        let charges = self
            .charges_after(expected.len(), Duration::from_secs(15))
            .await;
        // Nothing more arrives later (a second charge for the same run).
        tokio::time::sleep(Duration::from_millis(500)).await;
        let charges_now = self.action_charges();
        assert_eq!(charges, charges_now, "charged again later");
        assert_eq!(
            charges.len(),
            expected.len(),
            "one row per run: {charges:?}"
        );
        for (got, want) in charges.iter().zip(expected) {
            assert!(want.contains(got), "charged {got} cents, expected {want:?}");
        }
        let db = self.db();
        let (sum, other_charges): (i64, i64) = db
            .query_row(
                "SELECT SUM(amount_cents), SUM(CASE WHEN kind = 'charge' AND operation != 'lit_action' THEN -amount_cents ELSE 0 END) FROM credit_ledger",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        let balance = balance(&self.app, &self.key).await as i64;
        assert_eq!(balance, sum, "the balance is the sum of the ledger's rows");
        assert_eq!(
            balance,
            START_CREDIT as i64 - other_charges - charges.iter().sum::<i64>()
        );
    }

    async fn lit_action(&self, key: &str, body: Value) -> e2e::Reply {
        self.app.post("/lit_action", Some(key), body).await
    }
}

#[tokio::test]
async fn a_successful_run_is_charged_once() {
    let b = Billed::start(&[]).await;
    let code = format!("async function main() {{ {SPIN_1200_MS} return 6 * 7; }}");
    let r = b.lit_action(&b.key, json!({ "code": code })).await;
    assert_eq!(r.assert_ok()["response"], json!(42));
    b.assert_ledger(&[2..=2]).await;
}

#[tokio::test]
async fn a_run_ending_in_an_exception_is_charged_once() {
    let b = Billed::start(&[]).await;
    let code = format!("async function main() {{ {SPIN_1200_MS} throw new Error('boom'); }}");
    let r = b.lit_action(&b.key, json!({ "code": code })).await;
    let body = r.assert_ok();
    assert_eq!(body["error"]["kind"], json!("exception"), "{body}");
    b.assert_ledger(&[2..=2]).await;
}

/// An HTTP server on 127.0.0.1 counting the requests it gets (actions fetch it).
async fn counting_server() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hit", listener.local_addr().unwrap());
    let hits = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                if matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {
                    counter.fetch_add(1, Ordering::SeqCst);
                    let _ = socket
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                        )
                        .await;
                }
            });
        }
    });
    (url, hits)
}

#[tokio::test]
async fn a_refused_wallet_stops_the_run_at_once_and_charges_it() {
    use std::sync::atomic::Ordering;
    let b = Billed::start(&[("APPLIANCE_ACTIONS__FETCH_ALLOW_PRIVATE", "true")]).await;
    let (url, hits) = counting_server().await;
    // After the refusal (caught by the code) it would fetch, sign with a permitted
    // wallet, and spin for 6 s.
    let code = format!(
        r#"async function main(p) {{
            {SPIN_1200_MS}
            try {{ await Lit.Actions.signEcdsa({{pkpId: p.out, toSign: "0x" + "11".repeat(32)}}); }} catch (e) {{}}
            await fetch(p.url);
            await Lit.Actions.signEcdsa({{pkpId: p.in, toSign: "0x" + "22".repeat(32)}});
            const t1 = Date.now(); while (Date.now() - t1 < 6000) {{}}
            return "finished";
        }}"#
    );
    let app = &b.app;
    let cid = app.cid_of(&code).await;
    let w_in = app.create_wallet(&b.key).await;
    let w_out = app.create_wallet(&b.key).await;
    let group = app
        .add_group(
            &b.key,
            json!({"group_name": "X", "pkp_ids_permitted": [w_in.pkp_id]}),
        )
        .await;
    app.add_action_to_group(&b.key, group, &cid).await;
    let (runner, _) = app
        .add_usage_key(&b.key, json!({"execute_in_groups": [group]}))
        .await;

    // Positive control: the fetch reaches the counting server.
    let probe = "async function main(p) { return (await fetch(p.url)).status; }";
    let r = b
        .lit_action(&b.key, json!({"code": probe, "js_params": {"url": url}}))
        .await;
    assert_eq!(r.assert_ok()["response"], json!(200), "{r:?}");
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    let started = Instant::now();
    let refused = b
        .lit_action(
            &runner,
            json!({"code": code, "js_params": {"in": w_in.pkp_id, "out": w_out.pkp_id, "url": url}}),
        )
        .await;
    let elapsed = started.elapsed();
    assert!(
        refused.assert_error(403).contains("not available"),
        "{refused:?}"
    );
    assert!(
        elapsed < Duration::from_secs(5),
        "answered at the refusal, not after the 6 s spin: {elapsed:?}"
    );
    // Nothing after the refusal ran: no fetch, and the charge is the 1.2 s before it
    // (2 cents) plus the probe's second, not the 6 s spin after it.
    b.assert_ledger(&[1..=1, 2..=2]).await;
    assert_eq!(
        hits.load(Ordering::SeqCst),
        1,
        "the code fetched after the refusal"
    );
}

/// A `while (true)` action (30 s limit) stopped after about 1.5 s costs 2 cents (3 on a
/// slow machine), never the 30 it would have run.
const ENDLESS: &str = "async function main() { while (true) {} }";
const STOPPED_CHARGE: std::ops::RangeInclusive<i64> = 2..=3;

#[tokio::test]
async fn a_run_whose_client_goes_away_is_stopped_and_charged() {
    let b = Billed::start(&[]).await;
    let client = b.app.client_with(reqwest::Version::HTTP_11);
    let request = client
        .post(b.app.api("/lit_action"))
        .bearer_auth(&b.key)
        .json(&json!({ "code": ENDLESS }))
        .send();
    let gone = tokio::time::timeout(Duration::from_millis(1500), request).await;
    assert!(gone.is_err(), "the endless action answered: {gone:?}");
    drop(client);
    // Stopped at once: charged within seconds, not after the 30 s limit.
    let charges = b.charges_after(1, Duration::from_secs(8)).await;
    assert_eq!(charges.len(), 1, "not charged soon after the client left");
    b.assert_ledger(&[STOPPED_CHARGE]).await;
}

#[tokio::test]
async fn a_run_whose_http2_stream_is_reset_is_stopped_and_charged() {
    use http_body_util::{BodyExt as _, Full};
    let b = Billed::start(&[]).await;
    let mut sender = h2_sender(&b.app).await;
    let request = |path: &str, body: Value| {
        http::Request::post(b.app.api(path))
            .header("authorization", format!("Bearer {}", b.key))
            .header("content-type", "application/json")
            .body(Full::new(bytes::Bytes::from(body.to_string())))
            .unwrap()
    };
    let running = sender.send_request(request("/lit_action", json!({ "code": ENDLESS })));
    // Dropping the response future resets the stream (RST_STREAM); the connection stays.
    let reset = tokio::time::timeout(Duration::from_millis(1500), running).await;
    assert!(reset.is_err(), "the endless action answered");
    let charges = b.charges_after(1, Duration::from_secs(8)).await;
    assert_eq!(charges.len(), 1, "not charged soon after the stream reset");
    // The same connection still serves requests: only the stream was reset.
    sender
        .ready()
        .await
        .expect("the connection outlived the reset stream");
    let quick = sender
        .send_request(request(
            "/lit_action",
            json!({"code": "async function main() { return 1; }"}),
        ))
        .await
        .expect("the connection outlived the reset stream");
    assert_eq!(quick.status(), 200);
    let body = quick.into_body().collect().await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["response"], json!(1), "{body}");
    b.assert_ledger(&[STOPPED_CHARGE, 1..=1]).await;
}

/// An HTTP/2 connection (ALPN h2) to the dev appliance, trusting its certificate.
async fn h2_sender(
    app: &Appliance,
) -> hyper::client::conn::http2::SendRequest<http_body_util::Full<bytes::Bytes>> {
    let tls = e2e::flood::tls_connect(app, b"h2").await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    sender
}

#[tokio::test]
async fn a_run_cut_by_the_request_timeout_is_stopped_and_charged() {
    let b = Billed::start(&[("APPLIANCE_HTTP__REQUEST_TIMEOUT_MS", "1500")]).await;
    let started = Instant::now();
    let r = b.lit_action(&b.key, json!({ "code": ENDLESS })).await;
    assert!(r.assert_error(503).contains("did not complete"), "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let charges = b.charges_after(1, Duration::from_secs(8)).await;
    assert_eq!(charges.len(), 1, "not charged soon after the timeout");
    b.assert_ledger(&[STOPPED_CHARGE]).await;
}

// ---- The usage history (`/billing/usage`) and the operator's report. ----

/// The `X-Request-Id` a reply carried.
fn request_id(reply: &e2e::Reply) -> String {
    reply
        .headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .expect("every reply carries X-Request-Id")
        .to_owned()
}

/// `GET /billing/usage` + `query` with `key`.
async fn usage(app: &Appliance, query: &str, key: &str) -> e2e::Reply {
    app.get(&format!("/billing/usage{query}"), Some(key)).await
}

/// Every charge is in the account's usage history with the request id its response
/// carried (and, for a run, the action's CID), newest first and paged; another account,
/// and a usage key of the same one, cannot read it; `appliance billing report` lists the
/// same rows from the database file.
#[tokio::test]
async fn the_usage_history_names_each_charge_and_the_request_behind_it() {
    let b = Billed::start(&[]).await;
    let app = &b.app;
    let created = app
        .post("/new_account", None, json!({ "account_name": "historian" }))
        .await;
    let key = created.assert_ok()["api_key"].as_str().unwrap().to_owned();
    let created_id = request_id(&created);

    // A billed management write, and an action run.
    let write = app
        .post(
            "/add_group",
            Some(&key),
            json!({"group_name": "g", "group_description": "", "pkp_ids_permitted": [], "cid_hashes_permitted": []}),
        )
        .await;
    write.assert_ok();
    let write_id = request_id(&write);
    let code = "async function main() { return 6 * 7; }";
    let cid = app
        .post("/get_lit_action_ipfs_id", None, json!(code))
        .await
        .assert_ok()
        .as_str()
        .unwrap()
        .to_owned();
    let run = app
        .post("/lit_action", Some(&key), json!({ "code": code }))
        .await;
    assert_eq!(run.assert_ok()["response"], json!(42));
    let run_id = request_id(&run);
    assert!(created_id != write_id && write_id != run_id);

    let reply = usage(app, "", &key).await;
    let items = reply.assert_ok().as_array().unwrap().clone();
    let seen: Vec<(&str, i64, u64, &str, &Value, &Value)> = items
        .iter()
        .map(|i| {
            (
                i["kind"].as_str().unwrap(),
                i["amount_cents"].as_i64().unwrap(),
                i["balance_after_cents"].as_u64().unwrap(),
                i["operation"].as_str().unwrap(),
                &i["request_id"],
                &i["action_cid"],
            )
        })
        .collect();
    let start = START_CREDIT;
    assert_eq!(
        seen,
        vec![
            (
                "charge",
                -1,
                start - 2,
                "lit_action",
                &json!(run_id),
                &json!(cid)
            ),
            (
                "charge",
                -1,
                start - 1,
                "add_group",
                &json!(write_id),
                &Value::Null
            ),
            (
                "initial",
                start as i64,
                start,
                "initial credit",
                &json!(created_id),
                &Value::Null
            ),
        ]
    );
    assert_eq!(balance(app, &key).await, start - 2);
    // Times both ways, ids decreasing, no payment intent on these.
    for item in &items {
        let at = item["at_unix"].as_i64().unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        assert!((now - 120..=now + 5).contains(&at), "{item}");
        // RFC 3339 in UTC, the same instant (its time of day checked here; the date's
        // arithmetic is the store's unit tests').
        let of_day = at % 86_400;
        let clock = format!(
            "T{:02}:{:02}:{:02}Z",
            of_day / 3600,
            of_day % 3600 / 60,
            of_day % 60
        );
        let text = item["at"].as_str().unwrap();
        assert!(text.len() == 20 && text.ends_with(&clock), "{item}");
        assert_eq!(item["payment_intent_id"], Value::Null);
    }
    let ids: Vec<u64> = items
        .iter()
        .map(|i| i["id"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "{ids:?}");

    // Paging: one entry per page, newest first, then an empty page.
    for (page, item) in items.iter().enumerate() {
        let one = usage(app, &format!("?page_number={page}&page_size=1"), &key).await;
        assert_eq!(one.assert_ok(), &json!([item]), "page {page}");
    }
    let past_the_end = usage(app, "?page_number=3&page_size=1", &key).await;
    assert_eq!(past_the_end.assert_ok(), &json!([]));
    // The time range: `from` inclusive, `to` exclusive.
    let newest = items[0]["at_unix"].as_i64().unwrap();
    let later = usage(app, &format!("?from={}", newest + 3600), &key).await;
    assert_eq!(later.assert_ok(), &json!([]));
    let until_now = usage(app, &format!("?from=0&to={}", newest + 1), &key).await;
    assert_eq!(until_now.assert_ok(), &json!(items));
    usage(app, "?from=yesterday", &key).await.assert_error(400);
    // An empty range (`from` after `to`) is an empty answer.
    let empty = usage(app, "?from=20&to=10", &key).await;
    assert_eq!(empty.assert_ok(), &json!([]));

    // Another account sees only its own history; a usage key sees none; no key, 401.
    let other = usage(app, "", &b.key).await;
    let theirs = other.assert_ok().as_array().unwrap();
    assert_eq!(theirs.len(), 1, "{theirs:?}");
    assert_eq!(theirs[0]["kind"], json!("initial"));
    let text = other.body.to_string();
    for id in [&created_id, &write_id, &run_id] {
        assert!(!text.contains(id.as_str()), "{text}");
    }
    let (usage_key, _) = app.add_usage_key(&key, json!({})).await;
    usage(app, "", &usage_key).await.assert_error(403);
    app.get("/billing/usage", None).await.assert_error(401);

    // The operator's report of the same database: both charges, with their request
    // ids and the action, and the account's totals.
    let out = e2e::appliance_command()
        .args(["billing", "report", "--data-dir"])
        .arg(&app.data_dir)
        .args(["--from", "1970-01-01", "--to", "2100-01-01"])
        .output()
        .unwrap();
    let csv = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{csv}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = csv.lines().collect();
    assert!(
        lines[0].starts_with("record,account_id,account_name,"),
        "{csv}"
    );
    let mine: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.split(',').nth(2) == Some("historian"))
        .collect();
    // Its three charges: the write, the run, and the usage key made above (billed too).
    assert_eq!(mine.len(), 5, "{csv}");
    assert!(
        mine[0].starts_with("entry,") && mine[0].contains(&created_id),
        "{csv}"
    );
    assert!(
        mine[1].contains(&format!(",add_group,,{write_id},,0,1,{}", start - 1)),
        "{csv}"
    );
    assert!(
        mine[2].contains(&format!(",lit_action,{cid},{run_id},,0,1,{}", start - 2)),
        "{csv}"
    );
    assert!(mine[3].contains(",add_usage_api_key,"), "{csv}");
    assert!(
        mine[4].starts_with("total,") && mine[4].ends_with(&format!(",{start},3,{}", start - 3)),
        "{csv}"
    );
    // A range that ends before the first entry: the header alone.
    let out = e2e::appliance_command()
        .args(["billing", "report", "--data-dir"])
        .arg(&app.data_dir)
        .args(["--from", "0", "--to", "1000"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
}
