//! Helpers for end-to-end tests: start the real `appliance` binary on an ephemeral
//! loopback port, talk to it over HTTPS as a client would (trusting its self-signed
//! certificate, not skipping verification), and stop it when the test ends.

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod chain;
pub mod pebble;
pub mod viem;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use reqwest::{Client, Method, StatusCode, header::HeaderMap};
use serde_json::Value;

/// The directory holding the workspace's built binaries (`target/debug`), found from
/// this test executable's own path (`target/debug/deps/<test>`).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("target dir")
        .to_owned()
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_owned()
}

/// The newest modification time of any file under `dir`.
fn newest_mtime(dir: &Path) -> Option<std::time::SystemTime> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let time = if path.is_dir() {
            newest_mtime(&path)
        } else {
            entry.metadata().ok()?.modified().ok()
        };
        newest = newest.max(time);
    }
    newest
}

/// Path of a workspace binary. `cargo test --workspace` builds it before any test runs
/// (`cargo test -p e2e` alone does not rebuild other packages' binaries, so a binary
/// older than its sources is refused rather than silently tested).
pub fn binary(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    let hint = "run the tests with `cargo test --workspace` (or `scripts/test`)";
    let built = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| panic!("{} is not built; {hint}", path.display()));
    let package = match name {
        "action-worker" => "appliance/runtime",
        other => other,
    };
    let sources = workspace_root().join(package).join("src");
    if let Some(newest) = newest_mtime(&sources) {
        assert!(
            built >= newest,
            "{} is older than {}; {hint}",
            path.display(),
            sources.display()
        );
    }
    path
}

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

/// A response, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
    pub text: String,
    pub version: reqwest::Version,
}

impl Reply {
    /// Asserts the standard error shape and status, and returns the description.
    #[track_caller]
    pub fn assert_error(&self, status: u16) -> String {
        assert_eq!(
            self.status.as_u16(),
            status,
            "unexpected status; body: {}",
            self.text
        );
        let content_type = self
            .headers
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(
            content_type.as_deref(),
            Some("application/json"),
            "{}",
            self.text
        );
        let err = &self.body["error"];
        assert_eq!(
            err["code"].as_u64(),
            Some(u64::from(status)),
            "{}",
            self.text
        );
        assert_eq!(
            err["reason"].as_str(),
            self.status.canonical_reason(),
            "{}",
            self.text
        );
        let description = err["description"].as_str().expect("description").to_owned();
        assert!(!description.is_empty());
        assert_eq!(
            self.body.as_object().unwrap().len(),
            1,
            "only `error` at the top: {}",
            self.text
        );
        assert_eq!(err.as_object().unwrap().len(), 3, "{}", self.text);
        description
    }

    /// A 503 from `/health`, whose body is the health report (not an error body).
    #[track_caller]
    pub fn assert_error_free_503(&self) {
        assert_eq!(self.status.as_u16(), 503, "{}", self.text);
        assert_eq!(
            self.body["status"],
            Value::from("degraded"),
            "{}",
            self.text
        );
    }

    #[track_caller]
    pub fn assert_ok(&self) -> &Value {
        assert_eq!(self.status, StatusCode::OK, "body: {}", self.text);
        &self.body
    }
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
        // The appliance starts the worker found next to itself: refuse a stale one too.
        binary("action-worker");
        let mut cmd = Command::new(binary("appliance"));
        for (key, _) in std::env::vars() {
            if key.starts_with("APPLIANCE_") {
                cmd.env_remove(key);
            }
        }
        // Dev appliances run without their local chain (anvil) unless a test asks for it
        // with APPLIANCE_CHAIN__DEV_ANVIL (tests/deploy.rs).
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

/// Sends a signal by name (`TERM`, `KILL`) with the system's `kill` command.
pub fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name} {pid} failed");
}

/// The state letter and parent pid of `pid`, from `/proc/PID/stat` (the fields after the
/// parenthesised command name).
fn proc_stat(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat.rsplit(')').next()?.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    Some((state, parent))
}

/// Whether `pid` is a live (non-zombie) process.
pub fn alive(pid: u32) -> bool {
    proc_stat(pid).is_some_and(|(state, _)| state != 'Z')
}

/// Live processes whose parent is `parent` and whose command line contains `needle`.
pub fn children_of(parent: u32, needle: &str) -> Vec<u32> {
    processes_matching(&[needle])
        .into_iter()
        .filter(|pid| proc_stat(*pid).is_some_and(|(_, ppid)| ppid == parent))
        .collect()
}

/// Ids of live processes whose command line contains every one of `needles`.
pub fn processes_matching(needles: &[&str]) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        if alive(pid) && needles.iter().all(|n| cmdline.contains(n)) {
            out.push(pid);
        }
    }
    out
}

/// Polls `check` every 50 ms until it is true or `limit` passes.
/// As [`eventually`], with an async check (polled every 100 ms).
pub async fn eventually_async<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    check().await
}

pub async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    check()
}

/// A keyservice process started by a test (dev platform), killed when dropped.
pub struct KeyService {
    child: Option<Child>,
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    pub compose_file: PathBuf,
}

impl KeyService {
    /// Starts keyservice on `socket`, keeping its state in `state_dir`, and waits until
    /// the socket answers.
    pub async fn start(socket: &Path, state_dir: &Path, compose_file: &Path) -> Self {
        if !compose_file.exists() {
            std::fs::write(compose_file, b"{\"test\":\"compose\"}").unwrap();
        }
        let child = Command::new(binary("keyservice"))
            .arg("run")
            .arg("--socket")
            .arg(socket)
            .arg("--state-dir")
            .arg(state_dir)
            .args(["--platform", "dev", "--compose-file"])
            .arg(compose_file)
            // Payers sign only for a configured chain: the tests' anvil.
            .args(["--chain-id", "31337"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn keyservice");
        let client = keyservice_api::KeyClient::new(socket);
        let mut ready = false;
        for _ in 0..200 {
            if client.status().await.is_ok() {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(ready, "keyservice did not come up on {}", socket.display());
        Self {
            child: Some(child),
            socket: socket.to_owned(),
            state_dir: state_dir.to_owned(),
            compose_file: compose_file.to_owned(),
        }
    }

    /// SIGKILL.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
}

impl Drop for KeyService {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// An HTTPS client that trusts exactly `pem` (no verification is skipped).
pub fn client_trusting(pem: &[u8], version: Option<reqwest::Version>) -> Client {
    let cert = reqwest::Certificate::from_pem(pem).unwrap();
    let mut builder = Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(cert)
        .timeout(Duration::from_secs(60));
    builder = match version {
        Some(reqwest::Version::HTTP_11) => builder.http1_only(),
        Some(reqwest::Version::HTTP_2) => builder.http2_prior_knowledge(),
        _ => builder,
    };
    builder.build().unwrap()
}

/// Reads a response whole; a non-JSON body becomes `Value::Null`.
pub async fn read(resp: reqwest::Response) -> Reply {
    let status = resp.status();
    let headers = resp.headers().clone();
    let version = resp.version();
    let text = resp.text().await.unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Reply {
        status,
        headers,
        body,
        text,
        version,
    }
}

// ---------------------------------------------------------------------------------
// Groups, wallets and actions: helpers shared by permissions.rs, groups.rs,
// wallets.rs and actions.rs.
// ---------------------------------------------------------------------------------

/// keccak256 of `data` as `0x` + 64 lowercase hex (a `pkp_id` or a `hashed_cid`).
pub fn keccak_hex(data: &[u8]) -> String {
    use sha3::{Digest, Keccak256};
    format!("0x{}", hex::encode(Keccak256::digest(data)))
}

/// `0x` + `n` zero hex digits: the zero pkp_id (64) or the zero address (40).
pub fn zeros(n: usize) -> String {
    format!("0x{}", "0".repeat(n))
}

/// Bitcoin-alphabet base58 (as CIDv0 uses).
pub fn base58btc(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
    let mut digits: Vec<u8> = Vec::new(); // little-endian base-58 digits
    for &byte in bytes {
        let mut carry = u32::from(byte);
        for digit in &mut digits {
            carry += u32::from(*digit) << 8;
            *digit = (carry % 58) as u8;
            carry /= 58;
        }
        while carry > 0 {
            digits.push((carry % 58) as u8);
            carry /= 58;
        }
    }
    let zeros = bytes.iter().take_while(|b| **b == 0).count();
    let mut out = "1".repeat(zeros);
    out.extend(
        digits
            .iter()
            .rev()
            .map(|d| char::from(ALPHABET[usize::from(*d)])),
    );
    out
}

/// RFC 4648 base32, lowercase, unpadded (as a multibase `b…` CIDv1 uses).
pub fn base32_lower(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut out = String::new();
    let (mut buffer, mut bits) = (0u32, 0u32);
    for &byte in bytes {
        buffer = (buffer << 8) | u32::from(byte);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(ALPHABET[((buffer >> bits) & 31) as usize]));
        }
    }
    if bits > 0 {
        out.push(char::from(ALPHABET[((buffer << (5 - bits)) & 31) as usize]));
    }
    out
}

/// A well-formed CIDv0 (`Qm…`, sha2-256 multihash) whose digest is derived from `seed`,
/// so each seed names a distinct action. (The digest is not the hash of any code; the
/// service only checks a CID's form.)
pub fn cid_v0(seed: &str) -> String {
    use sha3::{Digest, Keccak256};
    let mut multihash = vec![0x12, 0x20];
    multihash.extend_from_slice(&Keccak256::digest(seed.as_bytes()));
    base58btc(&multihash)
}

/// A well-formed CIDv1 in multibase base32 (`b…`): version 1, dag-pb, sha2-256.
pub fn cid_v1(seed: &str) -> String {
    use sha3::{Digest, Keccak256};
    let mut bytes = vec![0x01, 0x70, 0x12, 0x20];
    bytes.extend_from_slice(&Keccak256::digest(seed.as_bytes()));
    format!("b{}", base32_lower(&bytes))
}

/// EIP-55 checksum form of a 20-byte address given as hex (any case, `0x` optional).
pub fn eip55(address: &str) -> String {
    let lower = address
        .trim_start_matches("0x")
        .trim_start_matches("0X")
        .to_ascii_lowercase();
    let hash = keccak_hex(lower.as_bytes());
    let hash = hash.as_bytes();
    let mut out = String::from("0x");
    for (i, c) in lower.chars().enumerate() {
        let nibble = char::from(hash[2 + i]).to_digit(16).unwrap();
        out.push(if c.is_ascii_alphabetic() && nibble >= 8 {
            c.to_ascii_uppercase()
        } else {
            c
        });
    }
    out
}

/// True if `s` is `0x` followed by exactly `n` lowercase hex digits.
pub fn is_lower_hex(s: &str, n: usize) -> bool {
    s.strip_prefix("0x").is_some_and(|h| {
        h.len() == n
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// A wallet as `create_wallet` returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewWallet {
    /// EIP-55.
    pub address: String,
    pub pkp_id: String,
    pub derivation_path: String,
}

impl Appliance {
    /// `POST /create_wallet` with an empty JSON object; panics unless 200.
    pub async fn create_wallet(&self, key: &str) -> NewWallet {
        let reply = self
            .post("/create_wallet", Some(key), serde_json::json!({}))
            .await;
        wallet_from(reply.assert_ok())
    }

    /// `POST /add_group` with `body` (a `group_name` is filled in when absent); returns
    /// the new group's id after checking it is a decimal string.
    pub async fn add_group(&self, key: &str, body: Value) -> u64 {
        let mut body = body;
        if body.get("group_name").is_none() {
            body["group_name"] = Value::from("group");
        }
        let reply = self.post("/add_group", Some(key), body).await;
        group_id_from(reply.assert_ok())
    }

    /// `POST /add_action` with a name; returns the `hashed_cid` after checking it is
    /// keccak256 of the CID text.
    pub async fn add_action(&self, key: &str, cid: &str, name: &str) -> String {
        let reply = self
            .post(
                "/add_action",
                Some(key),
                serde_json::json!({"action_ipfs_cid": cid, "name": name}),
            )
            .await;
        let hashed = reply.assert_ok()["hashed_cid"].as_str().unwrap().to_owned();
        assert_eq!(hashed, keccak_hex(cid.as_bytes()), "hashed_cid of {cid}");
        hashed
    }

    /// GETs a list endpoint and returns its items; panics unless 200 with an array.
    pub async fn list(&self, path: &str, key: &str) -> Vec<Value> {
        let reply = self.get(path, Some(key)).await;
        reply
            .assert_ok()
            .as_array()
            .unwrap_or_else(|| panic!("{path}: not an array: {}", reply.text))
            .clone()
    }

    /// The account's groups (first page of 1000).
    pub async fn groups(&self, key: &str) -> Vec<Value> {
        self.list("/list_groups?page_size=1000", key).await
    }

    /// One group of the account as `list_groups` shows it, if listed.
    pub async fn group(&self, key: &str, id: u64) -> Option<Value> {
        let id = id.to_string();
        self.groups(key)
            .await
            .into_iter()
            .find(|g| g["id"].as_str() == Some(id.as_str()))
    }
}

/// The wallet of a `create_wallet` response, after checking the response's shape.
#[track_caller]
pub fn wallet_from(body: &Value) -> NewWallet {
    let obj = body.as_object().expect("an object");
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["derivation_path", "pkp_id", "wallet_address"],
        "{body}"
    );
    let address = body["wallet_address"].as_str().unwrap().to_owned();
    assert_eq!(address.len(), 42, "{address}");
    assert_eq!(address, eip55(&address), "wallet_address must be EIP-55");
    let pkp_id = body["pkp_id"].as_str().unwrap().to_owned();
    assert!(is_lower_hex(&pkp_id, 64), "pkp_id {pkp_id}");
    let derivation_path = body["derivation_path"].as_str().unwrap().to_owned();
    assert!(
        derivation_path.len() == 66
            && derivation_path.starts_with("0x")
            && hex::decode(&derivation_path[2..]).is_ok(),
        "derivation_path {derivation_path}"
    );
    NewWallet {
        address,
        pkp_id,
        derivation_path,
    }
}

/// The id of an `add_group` response, after checking it is `{"success":true,
/// "group_id":"<decimal>"}`.
#[track_caller]
pub fn group_id_from(body: &Value) -> u64 {
    assert_eq!(body["success"], Value::Bool(true), "{body}");
    assert_eq!(body.as_object().unwrap().len(), 2, "{body}");
    let id = body["group_id"]
        .as_str()
        .unwrap_or_else(|| panic!("group_id is not a string: {body}"));
    assert!(
        !id.is_empty()
            && id.bytes().all(|b| b.is_ascii_digit())
            && (id == "0" || !id.starts_with('0')),
        "group_id is not a decimal string: {body}"
    );
    id.parse().unwrap()
}

/// A JSON body of exactly `n` bytes: a JSON string holding `n - 2` letters `a`.
pub fn json_string_body(n: usize) -> Vec<u8> {
    let mut body = Vec::with_capacity(n);
    body.push(b'"');
    body.resize(n - 1, b'a');
    body.push(b'"');
    body
}

/// `data` as a body streamed in 64 KiB chunks, so no Content-Length is sent.
pub fn streamed_body(data: Vec<u8>) -> reqwest::Body {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    struct Chunks(std::vec::IntoIter<Vec<u8>>);

    impl futures_core::Stream for Chunks {
        type Item = Result<Vec<u8>, std::io::Error>;
        fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
            Poll::Ready(self.0.next().map(Ok))
        }
    }

    let chunks: Vec<Vec<u8>> = data.chunks(64 * 1024).map(<[u8]>::to_vec).collect();
    reqwest::Body::wrap_stream(Chunks(chunks.into_iter()))
}

/// The tools cache `scripts/setup` fills.
pub fn tools_dir() -> PathBuf {
    std::env::var("APPLIANCE_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/appliance-tools")
        })
}

/// Runs `script` with node, with `require` able to load the npm packages of the tools
/// cache; returns its standard output. Fails clearly when the tools are missing.
pub fn node_eval(script: &str, args: &[&str]) -> String {
    let modules = tools_dir().join("node").join("node_modules");
    assert!(
        modules.exists(),
        "{} is missing: run scripts/setup (it installs the npm test tools)",
        modules.display()
    );
    let out = Command::new("node")
        .arg("-e")
        .arg(script)
        .args(args)
        .env("NODE_PATH", &modules)
        .output()
        .expect("node is needed for this test");
    assert!(
        out.status.success(),
        "node failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
