//! A localstripe (PyPI `localstripe`, installed by `scripts/setup`) on 127.0.0.1, on a port
//! the OS picks, with its state in memory only, for appliances that run with billing on.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use test_support::tools::venv_bin;

/// The Stripe keys the appliance is configured with (localstripe accepts any test key).
pub const SECRET_KEY: &str = "sk_test_billing0123456789secret";
pub const PUBLISHABLE_KEY: &str = "pk_test_billing0123456789";

/// Starts localstripe's server on 127.0.0.1 (its own CLI binds every interface).
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
pub struct LocalStripe {
    child: Option<Child>,
    pub base_url: String,
    http: reqwest::Client,
}

impl LocalStripe {
    pub fn start() -> Self {
        let mut child = Command::new(venv_bin("python"))
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
        let addr = format!("127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "localstripe did not accept connections"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            child: Some(child),
            base_url: format!("http://{addr}"),
            http: reqwest::Client::new(),
        }
    }

    /// Stops the server (Stripe becomes unreachable for the appliance).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// A Stripe API call as a browser's Stripe.js (or a server) would make it.
    pub async fn post(&self, path: &str, form: &[(&str, &str)]) -> Value {
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
    pub async fn pay_with_test_card(&self, intent: &str) {
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

    /// The appliance settings that turn billing on against this localstripe, with
    /// `initial_credit` cents for every new account.
    pub fn env(&self, initial_credit: u64) -> Vec<(String, String)> {
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
