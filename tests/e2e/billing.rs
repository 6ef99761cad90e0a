//! Billing end to end, against a real localstripe (PyPI `localstripe`, installed by
//! `scripts/setup`) bound to 127.0.0.1 on a port the OS picks: payment intents are
//! created by the appliance, confirmed with a test card through the Stripe API, and
//! credited exactly once; billed calls are charged, rejected calls never.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use e2e::{Appliance, Launch};
use serde_json::{Value, json};
use test_support::tools::venv_bin;

const SECRET_KEY: &str = "sk_test_billing0123456789secret";
const PUBLISHABLE_KEY: &str = "pk_test_billing0123456789";

/// Starts localstripe's server on 127.0.0.1 (its own CLI binds every interface), on a
/// port chosen by the OS, with its state kept in memory only.
const LAUNCHER: &str = r#"
import socket
from aiohttp import web
from localstripe import resources, server
resources.Store.dump_to_disk = lambda self: None
sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.bind(("127.0.0.1", 0))
print(sock.getsockname()[1], flush=True)
web.run_app(server.app, sock=sock, print=None)
"#;

/// A running localstripe, killed when dropped.
struct LocalStripe {
    child: Option<Child>,
    base_url: String,
    http: reqwest::Client,
}

impl LocalStripe {
    fn start() -> Self {
        let python = venv_bin("python");
        let mut child = Command::new(python)
            .args(["-c", LAUNCHER])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start localstripe");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("localstripe did not print its port: {line:?}"));
        let stripe = Self {
            child: Some(child),
            base_url: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        };
        stripe.wait_ready();
        stripe
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(self.base_url.trim_start_matches("http://")).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("localstripe did not accept connections");
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// A Stripe API call as a browser's Stripe.js (or a server) would make it.
    async fn post(&self, path: &str, form: &[(&str, &str)]) -> Value {
        let r = self
            .http
            .post(format!("{}{path}", self.base_url))
            .bearer_auth(SECRET_KEY)
            .form(form)
            .send()
            .await
            .unwrap();
        let status = r.status();
        let body: Value = r.json().await.unwrap();
        assert!(status.is_success(), "{path}: {status} {body}");
        body
    }

    /// Pays the intent with Stripe's test card 4242 4242 4242 4242 (`pm_card_visa`).
    async fn pay_with_test_card(&self, intent: &str) {
        self.post(
            &format!("/v1/payment_intents/{intent}"),
            &[("payment_method", "pm_card_visa")],
        )
        .await;
        let done = self
            .post(&format!("/v1/payment_intents/{intent}/confirm"), &[])
            .await;
        assert_eq!(done["status"], json!("succeeded"), "{done}");
    }

    /// The appliance settings that point billing at this localstripe.
    fn env(&self, initial_credit: u64) -> Vec<(String, String)> {
        [
            (
                "APPLIANCE_BILLING__STRIPE_SECRET_KEY",
                SECRET_KEY.to_owned(),
            ),
            (
                "APPLIANCE_BILLING__STRIPE_PUBLISHABLE_KEY",
                PUBLISHABLE_KEY.to_owned(),
            ),
            ("APPLIANCE_BILLING__STRIPE_API_BASE", self.base_url.clone()),
            (
                "APPLIANCE_BILLING__INITIAL_CREDIT_CENTS",
                initial_credit.to_string(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }
}

impl Drop for LocalStripe {
    fn drop(&mut self) {
        self.stop();
    }
}

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
