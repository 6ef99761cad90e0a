//! `appliance dev` as a user starts it: its own anvil (the dev chain actions reach
//! through `[actions.rpc]`), a self-signed certificate, and the lines it prints (the base
//! URL, the dev chain's URL, the `evidence verify` command), with a client trusting it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

/// `appliance dev` with its anvil, its stdout lines and a client trusting it.
pub struct DevStack {
    child: Child,
    pub base_url: String,
    /// The URL the start-up output gives for the dev chain.
    pub rpc_url: String,
    /// The `evidence verify …` command the start-up output gives.
    pub verify_command: String,
    pub client: reqwest::Client,
    dir: tempfile::TempDir,
}

impl Drop for DevStack {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl DevStack {
    /// The self-signed certificate it serves (a CA file to trust).
    pub fn certificate(&self) -> std::path::PathBuf {
        self.dir.path().join("dev/tls/self-signed.pem")
    }

    /// `appliance dev` on a free loopback port, rate limits off, its anvil on.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// [`DevStack::start`] with more `APPLIANCE_*` settings.
    pub fn start_with(env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(dir.path().join("appliance.log")).unwrap();
        for name in ["keyservice", "action-worker", "worker-launcher"] {
            crate::binary(name);
        }
        let mut child = crate::appliance_command()
            .args(["dev", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("dev"))
            .env(
                "APPLIANCE_CHAIN__DEV_ANVIL",
                test_support::tools::anvil_binary(),
            )
            .env("APPLIANCE_RATE_LIMITS__ENABLED", "false")
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let (mut base_url, mut rpc_url, mut verify_command) = (None, None, None);
        while base_url.is_none() || rpc_url.is_none() || verify_command.is_none() {
            let Ok(line) = rx.recv_timeout(Duration::from_secs(120)) else {
                let _ = child.kill();
                let log =
                    std::fs::read_to_string(dir.path().join("appliance.log")).unwrap_or_default();
                panic!("the dev stack printed no base URL or no dev chain line; log:\n{log}");
            };
            if let Some(url) = line.strip_prefix("appliance listening on ") {
                base_url = Some(url.trim().to_owned());
            }
            if let Some(rest) = line.strip_prefix("dev chain for actions (chain 31337): ") {
                let quoted = rest
                    .strip_prefix("new ethers.providers.JsonRpcProvider(\"")
                    .and_then(|r| r.strip_suffix("\")"))
                    .unwrap_or_else(|| panic!("unexpected dev chain line: {line}"));
                rpc_url = Some(quoted.to_owned());
            }
            if let Some((_, command)) = line.split_once("): evidence verify ") {
                verify_command = Some(format!("evidence verify {command}"));
            }
        }
        let pem = std::fs::read(dir.path().join("dev/tls/self-signed.pem")).unwrap();
        Self {
            child,
            base_url: base_url.unwrap(),
            rpc_url: rpc_url.unwrap(),
            verify_command: verify_command.unwrap(),
            client: crate::client_trusting(&pem, None),
            dir,
        }
    }

    /// The appliance's stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("appliance.log")).unwrap_or_default()
    }

    /// `POST /core/v1{path}` with `body`, as `key` if given.
    pub async fn post(&self, path: &str, key: Option<&str>, body: Value) -> crate::Reply {
        let mut req = self
            .client
            .post(format!("{}/core/v1{path}", self.base_url))
            .json(&body);
        if let Some(key) = key {
            req = req.bearer_auth(key);
        }
        crate::read(req.send().await.unwrap()).await
    }

    /// Runs `code` with `params`; the response, or a panic with the error and the log.
    pub async fn run(&self, key: &str, code: &str, params: Value) -> Value {
        let reply = self
            .post(
                "/lit_action",
                Some(key),
                json!({"code": code, "js_params": params}),
            )
            .await;
        let body = reply.assert_ok().clone();
        assert_eq!(
            body["has_error"],
            false,
            "the action failed: {body}\nlog:\n{}",
            self.log()
        );
        body["response"].clone()
    }

    /// One JSON-RPC call to anvil, from the test (not through the appliance).
    pub async fn anvil(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let reply: Value = reqwest::Client::new()
            .post(&self.rpc_url)
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(reply.get("error").is_none(), "{method}: {reply}");
        reply["result"].clone()
    }

    /// The balance of `address` on anvil, in wei.
    pub async fn balance(&self, address: &str) -> u128 {
        let hex = self
            .anvil("eth_getBalance", json!([address, "latest"]))
            .await;
        u128::from_str_radix(hex.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
    }
}
