//! An `appliance` process started on an ephemeral loopback port (`dev` or `serve`),
//! reached over HTTPS with a client that trusts its self-signed certificate, and stopped
//! when the test ends.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use reqwest::{Client, Method};
use serde_json::Value;

use crate::binaries::binary;
use crate::http::{Reply, client_trusting, read};
use crate::process::signal;

/// How to start the appliance.
pub enum Launch {
    /// `appliance dev`: self-signed TLS, keyservice as a supervised child.
    Dev,
    /// `appliance dev` with `APPLIANCE_*` overrides.
    DevWith { env: Vec<(String, String)> },
    /// `appliance serve` configured by environment variables (`APPLIANCE_*`).
    Serve { env: Vec<(String, String)> },
    /// `appliance serve --config FILE` (listen address and data dir still from the
    /// environment, plus `APPLIANCE_*` overrides).
    ServeConfig {
        config: PathBuf,
        env: Vec<(String, String)>,
    },
}

/// A running appliance, killed when dropped.
pub struct Appliance {
    child: Option<Child>,
    pub base_url: String,
    pub data_dir: PathBuf,
    pub client: Client,
    _tmp: Option<tempfile::TempDir>,
}

impl Appliance {
    /// Starts a fresh dev appliance with `APPLIANCE_*` overrides, in a temporary
    /// data directory.
    pub async fn start_with(env: &[(&str, &str)]) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut app = Self::launch(tmp.path(), Launch::DevWith { env }).await;
        app._tmp = Some(tmp);
        app
    }

    /// Starts a fresh appliance with its own temporary data directory.
    pub async fn start() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_owned();
        let mut app = Self::start_in(&dir).await;
        app._tmp = Some(tmp);
        app
    }

    /// Starts a dev-mode appliance on an existing data directory (a restart).
    pub async fn start_in(data_dir: &Path) -> Self {
        Self::launch(data_dir, Launch::Dev).await
    }

    /// Starts an appliance on `data_dir` as `launch` says.
    pub async fn launch(data_dir: &Path, launch: Launch) -> Self {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(data_dir.join("appliance.log"))
            .unwrap();
        // The appliance starts the worker (and, in dev, the worker launcher) found next to
        // itself: refuse stale ones too.
        binary("action-worker");
        binary("worker-launcher");
        let mut cmd = crate::appliance_command();
        // Rate limits off: tests create accounts and mint keys from 127.0.0.1 far faster
        // than the production limits allow. A test of the limits turns them back on with
        // its own overrides (APPLIANCE_RATE_LIMITS__ENABLED=true, tests/e2e/abuse_quotas.rs),
        // which come after this.
        cmd.env("APPLIANCE_RATE_LIMITS__ENABLED", "false");
        // Dev appliances run without their local chain (anvil) unless a test asks for it
        // with APPLIANCE_CHAIN__DEV_ANVIL (tests/e2e/deploy.rs).
        match launch {
            Launch::Dev => {
                cmd.args(["dev", "--listen", "127.0.0.1:0", "--data-dir"])
                    .arg(data_dir)
                    .env("APPLIANCE_CHAIN__DEV_ANVIL", "");
            }
            Launch::DevWith { env } => {
                cmd.args(["dev", "--listen", "127.0.0.1:0", "--data-dir"])
                    .arg(data_dir)
                    .env("APPLIANCE_CHAIN__DEV_ANVIL", "")
                    .envs(env);
            }
            Launch::Serve { env } => {
                cmd.arg("serve")
                    .env("APPLIANCE_LISTEN", "127.0.0.1:0")
                    .env("APPLIANCE_DATA_DIR", data_dir)
                    .envs(env);
            }
            Launch::ServeConfig { config, env } => {
                cmd.arg("serve")
                    .arg("--config")
                    .arg(config)
                    .env("APPLIANCE_LISTEN", "127.0.0.1:0")
                    .env("APPLIANCE_DATA_DIR", data_dir)
                    .envs(env);
            }
        }
        let mut child = cmd
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn appliance");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(url) = line.split_whitespace().find(|w| w.starts_with("https://")) {
                    let _ = tx.send(url.to_owned());
                }
            }
        });
        let base_url = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(url) => url,
            Err(_) => {
                let _ = child.kill();
                let log =
                    std::fs::read_to_string(data_dir.join("appliance.log")).unwrap_or_default();
                panic!("appliance did not print its URL; its log:\n{log}");
            }
        };
        let pem = std::fs::read(data_dir.join("tls").join("self-signed.pem")).unwrap();
        let client = client_trusting(&pem, None);
        Self {
            child: Some(child),
            base_url,
            data_dir: data_dir.to_owned(),
            client,
            _tmp: None,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base_url, path)
    }

    /// `/core/v1` + path.
    pub fn api(&self, path: &str) -> String {
        self.url(&format!("/core/v1{path}"))
    }

    /// A client trusting this appliance's certificate, limited to one HTTP version.
    pub fn client_with(&self, version: reqwest::Version) -> Client {
        let pem = std::fs::read(self.data_dir.join("tls").join("self-signed.pem")).unwrap();
        client_trusting(&pem, Some(version))
    }

    /// POSTs JSON to `/core/v1` + path with an optional key (as Bearer).
    pub async fn post(&self, path: &str, key: Option<&str>, body: Value) -> Reply {
        let mut req = self.client.post(self.api(path)).json(&body);
        if let Some(key) = key {
            req = req.bearer_auth(key);
        }
        read(req.send().await.expect("request")).await
    }

    /// GETs `/core/v1` + path with an optional key (as Bearer).
    pub async fn get(&self, path: &str, key: Option<&str>) -> Reply {
        let mut req = self.client.get(self.api(path));
        if let Some(key) = key {
            req = req.bearer_auth(key);
        }
        read(req.send().await.expect("request")).await
    }

    /// Any request, built by the caller.
    pub async fn send(&self, req: reqwest::RequestBuilder) -> Reply {
        read(req.send().await.expect("request")).await
    }

    pub fn request(&self, method: Method, url: &str) -> reqwest::RequestBuilder {
        self.client.request(method, url)
    }

    /// Creates an account and returns `(api_key, wallet_address)`.
    pub async fn new_account(&self, name: &str) -> (String, String) {
        let reply = self
            .post(
                "/new_account",
                None,
                serde_json::json!({ "account_name": name }),
            )
            .await;
        let body = reply.assert_ok();
        (
            body["api_key"].as_str().unwrap().to_owned(),
            body["wallet_address"].as_str().unwrap().to_owned(),
        )
    }

    /// Creates a usage key with the given permission fields; returns `(key, hash)`.
    pub async fn add_usage_key(&self, account_key: &str, fields: Value) -> (String, String) {
        let mut body = serde_json::json!({ "name": "key", "description": "" });
        for (k, v) in fields.as_object().unwrap() {
            body[k] = v.clone();
        }
        let reply = self
            .post("/add_usage_api_key", Some(account_key), body)
            .await;
        let body = reply.assert_ok();
        (
            body["usage_api_key"].as_str().unwrap().to_owned(),
            body["api_key_hash"].as_str().unwrap().to_owned(),
        )
    }

    /// The appliance's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Sends SIGTERM and waits for the exit without blocking the runtime (so this
    /// test's own open connections can take part in the graceful shutdown).
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        signal(child.id(), "TERM");
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends SIGKILL: no shutdown code runs.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    /// The appliance's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.join("appliance.log")).unwrap_or_default()
    }
}

impl Drop for Appliance {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
