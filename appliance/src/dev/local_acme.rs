//! `appliance dev --local-acme`: the development stack with its certificate from a local
//! ACME CA, so that every check of `evidence verify` can run and pass on one machine.
//!
//! It runs Debian's `pebble` (a test ACME CA) and `pebble-challtestsrv` (its DNS stand-in,
//! which answers every name with 127.0.0.1) under `appliance child-guard`, so both stop
//! with the appliance even after `kill -9`; points `[acme]` at Pebble for
//! `appliance.acme.test` and `localhost` (TLS-ALPN-01 on the appliance's own port); once
//! the ACME account exists it publishes the CAA record naming it; and it writes Pebble's
//! root certificate where `evidence verify --ca-file` can read it.
//!
//! Pebble makes a new root at every start, so a certificate from an earlier run chains to
//! nothing: the ACME state of the data directory is cleared at each start (a fresh
//! account and certificate every run). Everything lives in `<data_dir>/pebble/`.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use crate::config::{AcmeChallenge, AcmeConfig};

/// The domain whose CAA record governs issuance (served by challtestsrv).
pub const CAA_DOMAIN: &str = "appliance.acme.test";
/// The name clients connect to (the system resolver knows it).
pub const CLIENT_DOMAIN: &str = "localhost";
/// How long Pebble gets to answer its directory.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Why the local ACME CA could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalAcmeError {
    #[error(
        "{0} is not installed: run `scripts/setup acme` (it installs Debian's pebble package, as root)"
    )]
    NotInstalled(&'static str),
    #[error("--local-acme needs a fixed listen port (Pebble validates on it), not port 0")]
    NoFixedPort,
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Certificate(String),
    #[error("pebble did not start: {0} (see {1})")]
    Start(String, PathBuf),
    #[error("challtestsrv: {0}")]
    Dns(String),
}

/// The running CA and DNS stand-in (stopped on drop).
pub struct LocalAcme {
    /// challtestsrv's DNS server, for `evidence verify --dns`.
    pub dns: SocketAddr,
    /// Pebble's root (the issuer of the appliance's certificate), for `--ca-file`.
    pub root_file: PathBuf,
    dns_management: String,
    children: Vec<Child>,
}

impl Drop for LocalAcme {
    /// SIGTERM to each guard, which stops its program (a SIGKILL would orphan it).
    fn drop(&mut self) {
        for child in &self.children {
            if let Some(pid) = child.id() {
                let _ = std::process::Command::new("kill")
                    .args(["-TERM", &pid.to_string()])
                    .status();
            }
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LocalAcmeError + '_ {
    move |source| LocalAcmeError::Io {
        path: path.to_owned(),
        source,
    }
}

/// `name` in /usr/bin, /usr/local/bin or on `PATH`.
fn find(name: &'static str) -> Result<PathBuf, LocalAcmeError> {
    let mut dirs = vec![PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")];
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.into_iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or(LocalAcmeError::NotInstalled(name))
}

/// A port free on 127.0.0.1 right now.
fn free_port(dir: &Path) -> Result<u16, LocalAcmeError> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(io(dir))
}

/// Starts Pebble and challtestsrv for an appliance listening on `listen`, and points
/// `acme` at them.
pub async fn start(
    acme: &mut AcmeConfig,
    data_dir: &Path,
    listen: SocketAddr,
) -> Result<LocalAcme, LocalAcmeError> {
    if listen.port() == 0 {
        return Err(LocalAcmeError::NoFixedPort);
    }
    let pebble = find("pebble")?;
    let challtestsrv = find("pebble-challtestsrv")?;
    let guard = std::env::current_exe().map_err(io(Path::new("/proc/self/exe")))?;
    let dir = data_dir.join("pebble");
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    // A certificate from an earlier Pebble chains to a root that no longer exists.
    let acme_state = data_dir.join("acme");
    if acme_state.exists() {
        std::fs::remove_dir_all(&acme_state).map_err(io(&acme_state))?;
    }

    // Pebble's own HTTPS listener needs a certificate (not a CA) that its clients trust.
    let (ca_pem, cert_pem, key_pem) = listener_certificate()?;
    let ca_file = dir.join("listener-ca.pem");
    for (name, text) in [
        ("listener-ca.pem", &ca_pem),
        ("listener-cert.pem", &cert_pem),
        ("listener-key.pem", &key_pem),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(io(&path))?;
    }
    let acme_port = free_port(&dir)?;
    let management_port = free_port(&dir)?;
    let dns_port = free_port(&dir)?;
    let dns_management_port = free_port(&dir)?;
    let http01_port = free_port(&dir)?;
    let config = serde_json::json!({
        "pebble": {
            "listenAddress": format!("127.0.0.1:{acme_port}"),
            "managementListenAddress": format!("127.0.0.1:{management_port}"),
            "certificate": dir.join("listener-cert.pem"),
            "privateKey": dir.join("listener-key.pem"),
            "httpPort": http01_port,
            "tlsPort": listen.port(),
            "ocspResponderURL": "",
            "externalAccountBindingRequired": false
        }
    });
    let config_file = dir.join("pebble.json");
    std::fs::write(&config_file, config.to_string()).map_err(io(&config_file))?;

    let dns = SocketAddr::from(([127, 0, 0, 1], dns_port));
    let dns_management = format!("127.0.0.1:{dns_management_port}");
    let mut children = Vec::new();
    let log = |name: &str| -> Result<std::fs::File, LocalAcmeError> {
        let path = dir.join(name);
        std::fs::File::create(&path).map_err(io(&path))
    };
    let dns_log = log("challtestsrv.log")?;
    let mut cmd = Command::new(&guard);
    cmd.arg("child-guard")
        .arg("--")
        .arg(&challtestsrv)
        .args(["-dns01", &dns.to_string()])
        .args(["-management", &dns_management])
        .args(["-http01", "", "-https01", "", "-tlsalpn01", ""])
        .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""]);
    children.push(spawn(cmd, dns_log, &dir)?);
    let pebble_log_path = dir.join("pebble.log");
    let pebble_log = log("pebble.log")?;
    let mut cmd = Command::new(&guard);
    cmd.arg("child-guard")
        .arg("--")
        .arg(&pebble)
        .arg("-config")
        .arg(&config_file)
        .args(["-dnsserver", &dns.to_string()])
        .env("PEBBLE_VA_NOSLEEP", "1");
    children.push(spawn(cmd, pebble_log, &dir)?);
    let local = LocalAcme {
        dns,
        root_file: dir.join("root.pem"),
        dns_management,
        children,
    };

    // Pebble is up once its directory answers; then its root can be read.
    let client = reqwest::Client::builder()
        .add_root_certificate(
            reqwest::Certificate::from_pem(ca_pem.as_bytes())
                .map_err(|e| LocalAcmeError::Certificate(e.to_string()))?,
        )
        .tls_built_in_root_certs(false)
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| LocalAcmeError::Certificate(e.to_string()))?;
    let directory_url = format!("https://127.0.0.1:{acme_port}/dir");
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if client.get(&directory_url).send().await.is_ok() {
            break;
        }
        if Instant::now() >= deadline {
            local.shutdown().await;
            return Err(LocalAcmeError::Start(
                format!("no answer from {directory_url} within {START_TIMEOUT:?}"),
                pebble_log_path,
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let root = client
        .get(format!("https://127.0.0.1:{management_port}/roots/0"))
        .send()
        .await
        .and_then(|r| r.error_for_status());
    let root = match root {
        Ok(r) => r
            .text()
            .await
            .map_err(|e| LocalAcmeError::Start(e.to_string(), pebble_log_path.clone()))?,
        Err(e) => {
            local.shutdown().await;
            return Err(LocalAcmeError::Start(e.to_string(), pebble_log_path));
        }
    };
    std::fs::write(&local.root_file, root).map_err(io(&local.root_file))?;

    acme.directory_url = Some(directory_url);
    acme.ca_bundle = Some(ca_file);
    acme.domains = vec![CAA_DOMAIN.to_owned(), CLIENT_DOMAIN.to_owned()];
    acme.challenge = AcmeChallenge::TlsAlpn01;
    acme.retry_initial_ms = 200;
    acme.retry_max_ms = 2_000;
    tracing::info!(dns = %local.dns, root = %local.root_file.display(), "local ACME CA (Pebble) started");
    Ok(local)
}

fn spawn(mut cmd: Command, log: std::fs::File, dir: &Path) -> Result<Child, LocalAcmeError> {
    let err_log = log.try_clone().map_err(io(dir))?;
    cmd.stdin(Stdio::null())
        .stdout(log)
        .stderr(err_log)
        .env_remove("RUST_LOG")
        .kill_on_drop(true)
        .spawn()
        .map_err(io(dir))
}

/// Publishes CAA records in challtestsrv.
#[derive(Debug, Clone)]
pub struct CaaPublisher {
    dns_management: String,
}

impl CaaPublisher {
    /// Publishes the CAA record naming `account_uri` (the appliance's ACME account) for
    /// [`CAA_DOMAIN`].
    pub async fn publish(&self, account_uri: &str) -> Result<(), LocalAcmeError> {
        let body = serde_json::json!({
            "host": CAA_DOMAIN,
            "policies": [{
                "tag": "issue",
                "value": format!("pebble.letsencrypt.org; accounturi={account_uri}"),
            }],
        });
        let rsp = reqwest::Client::new()
            .post(format!("http://{}/add-caa", self.dns_management))
            .json(&body)
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .map_err(|e| LocalAcmeError::Dns(e.to_string()))?;
        if !rsp.status().is_success() {
            return Err(LocalAcmeError::Dns(format!("add-caa: {}", rsp.status())));
        }
        Ok(())
    }
}

/// A CA and a leaf for 127.0.0.1 and localhost signed by it: (CA PEM, leaf PEM, key PEM).
fn listener_certificate() -> Result<(String, String, String), LocalAcmeError> {
    let fail = |e: rcgen::Error| LocalAcmeError::Certificate(e.to_string());
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(fail)?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(
        rcgen::DnType::CommonName,
        "appliance dev: Pebble listener CA",
    );
    let ca_key = rcgen::KeyPair::generate().map_err(fail)?;
    let ca = ca_params.self_signed(&ca_key).map_err(fail)?;
    let leaf_key = rcgen::KeyPair::generate().map_err(fail)?;
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .map_err(fail)?
        .signed_by(&leaf_key, &issuer)
        .map_err(fail)?;
    Ok((ca.pem(), leaf.pem(), leaf_key.serialize_pem()))
}

impl LocalAcme {
    /// Stops Pebble and challtestsrv (through their guards) and waits for them.
    pub async fn shutdown(mut self) {
        for mut child in std::mem::take(&mut self.children) {
            super::child_guard::terminate(&mut child, Duration::from_secs(10)).await;
        }
    }

    /// What publishes the CAA record (a handle that outlives no process).
    pub fn caa_publisher(&self) -> CaaPublisher {
        CaaPublisher {
            dns_management: self.dns_management.clone(),
        }
    }

    /// The `evidence verify` command that passes against this stack.
    pub fn verify_command(&self, port: u16, rpc_url: Option<&str>) -> String {
        let mut cmd = format!(
            "evidence verify --url https://{CLIENT_DOMAIN}:{port} --ca-file {} --allow-simulated --dns {} --domain {CAA_DOMAIN}",
            self.root_file.display(),
            self.dns
        );
        if let Some(rpc) = rpc_url {
            cmd.push_str(&format!(" --rpc-url {rpc}"));
        }
        cmd
    }
}
