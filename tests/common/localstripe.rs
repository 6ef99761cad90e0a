//! A localstripe (PyPI `localstripe`, installed by `scripts/setup`) on 127.0.0.1, on a port
//! the OS picks, with its state in memory only, for appliances that run with billing on.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
        }
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
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
