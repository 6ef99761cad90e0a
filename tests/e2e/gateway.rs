//! Ingress through dstack-gateway (issue 37, point 3), on one machine, with a real
//! SNI-routing TLS passthrough proxy: Debian's HAProxy in TCP mode stands in for the
//! gateway. It reads the server name of each ClientHello (`req_ssl_sni`, after
//! `tcp-request inspect-delay`), passes `appliance.gateway.test` through untouched to the
//! appliance's HTTPS port and closes any other name, as dstack-gateway does for a custom
//! domain whose `_dstack-app-address` TXT record names the app. pebble-challtestsrv serves
//! that record (and the CAA record) to the verifier, and resolves the name to 127.0.0.1
//! for Pebble, whose TLS-ALPN-01 port is HAProxy's: the certificate for the custom name is
//! issued by validations that reach the appliance THROUGH the proxy only.
//!
//! The appliance is the dev appliance (simulated quotes) with the committed compose
//! rendered with `gateway_enabled: true` (as `compose-pin --gateway` renders it), so the
//! attested app_compose itself says it is behind the gateway and `gateway-route` runs;
//! its app id is an `AppGovernance` contract on anvil allowing its compose hash.
//!
//! * `/evidences/` is reachable through the proxy, and `evidence verify --connect` (the
//!   name kept for SNI and the certificate) passes every check through it, the route
//!   record included; a record naming another app id fails `gateway-route` alone.
//! * The attested client (`connect_to`) and `appliance-cli --connect` verify and call
//!   through it.
//! * A ClientHello for another name gets no answer from the proxy, while the appliance
//!   itself answers that name: the routing is real.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use alloy::primitives::B256;
use appliance_client::api::PagingParams;
use appliance_client::api::accounts::NewAccountRequest;
use appliance_client::api::groups::AddGroupRequest;
use appliance_client::evidence::check::Status;
use appliance_client::{Client, Policy};
use chain_contracts::{IAppGovernance, deploy_app_governance};
use e2e::evidence_report::check;
use e2e::pebble::{Pebble, PebbleOptions, free_port};
use e2e::{Appliance, Launch, binary, eventually_async};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The custom domain the proxy routes (a name only challtestsrv resolves).
const NAME: &str = "appliance.gateway.test";
/// The app-address record of [`NAME`].
const RECORD: &str = "_dstack-app-address.appliance.gateway.test";

/// Debian's haproxy (`scripts/setup` installs it).
fn haproxy_binary() -> PathBuf {
    std::env::var_os("PATH")
        .map(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("haproxy"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/sbin/haproxy")])
        .find(|p| p.is_file())
        .expect(
            "haproxy is required for gateway:: (scripts/setup installs Debian's haproxy as root)",
        )
}

/// HAProxy routing TLS by SNI, as dstack-gateway does: [`NAME`] to `upstream`, passed
/// through (TCP mode, TLS untouched); any other name, or none, closed. On 127.0.0.1 at a
/// port chosen now, its configuration in a temporary directory; killed when dropped.
struct SniProxy {
    child: Child,
    port: u16,
    config: String,
    dir: tempfile::TempDir,
}

impl SniProxy {
    async fn start(upstream: u16) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let config = format!(
            "global\n    maxconn 256\n\n\
             defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 60s\n    timeout server 60s\n\n\
             frontend gateway\n    bind 127.0.0.1:{port}\n    tcp-request inspect-delay 5s\n    \
             tcp-request content reject unless {{ req_ssl_sni -i {NAME} }}\n    \
             use_backend app if {{ req_ssl_sni -i {NAME} }}\n\n\
             backend app\n    server appliance 127.0.0.1:{upstream}\n"
        );
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, &config).unwrap();
        let log = std::fs::File::create(dir.path().join("haproxy.log")).unwrap();
        let child = Command::new(haproxy_binary())
            .arg("-db") // foreground
            .arg("-f")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start haproxy");
        let proxy = Self {
            child,
            port,
            config,
            dir,
        };
        let up = eventually_async(Duration::from_secs(10), || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
        })
        .await;
        assert!(
            up,
            "haproxy did not listen on {port}; its config:\n{}\nits log:\n{}",
            proxy.config,
            proxy.log()
        );
        proxy
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("haproxy.log")).unwrap_or_default()
    }
}

impl Drop for SniProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The first bytes a server at `port` answers a ClientHello for `sni` with (empty: the
/// connection was closed without an answer).
async fn answer_to_hello(port: u16, sni: &str) -> Vec<u8> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(sni.to_owned()).unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).unwrap();
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    tcp.write_all(&hello).await.unwrap();
    let mut buf = vec![0u8; 5];
    let read = tokio::time::timeout(Duration::from_secs(15), tcp.read(&mut buf))
        .await
        .expect("neither an answer nor a close within 15 s");
    buf.truncate(read.unwrap_or(0));
    buf
}

/// Sets (replacing) or clears the TXT record `name` in challtestsrv.
async fn set_txt(pebble: &Pebble, name: &str, value: Option<&str>) {
    let http = reqwest::Client::new();
    let host = format!("{name}.");
    let rsp = http
        .post(format!("{}/clear-txt", pebble.dns_management_url))
        .json(&json!({ "host": host }))
        .send()
        .await
        .unwrap();
    assert!(rsp.status().is_success(), "clear-txt: {}", rsp.status());
    if let Some(value) = value {
        let rsp = http
            .post(format!("{}/set-txt", pebble.dns_management_url))
            .json(&json!({ "host": host, "value": value }))
            .send()
            .await
            .unwrap();
        assert!(rsp.status().is_success(), "set-txt: {}", rsp.status());
    }
}

/// `evidence verify --url https://NAME --connect PROXY … --gateway --json`: the exit code
/// and the report.
async fn evidence_verify(proxy: SocketAddr, root: &Path, dns: &str, rpc: &str) -> (i32, Value) {
    let mut command = Command::new(binary("evidence"));
    command
        .args(["verify", "--url"])
        .arg(format!("https://{NAME}"))
        .arg("--connect")
        .arg(proxy.to_string())
        .arg("--ca-file")
        .arg(root)
        .args(["--dns", dns, "--rpc-url", rpc])
        .args(["--gateway", "--allow-simulated", "--json"]);
    // A blocking child process: off the test's runtime, which serves the stand-ins.
    tokio::task::spawn_blocking(move || e2e::evidence_report::run(command))
        .await
        .unwrap()
}

/// Every check passes but `os-image`, N/A on a simulated quote.
fn every_check_passes(report: &Value) {
    for c in report["checks"].as_array().unwrap() {
        let expected = if c["id"] == "os-image" { "n/a" } else { "pass" };
        assert_eq!(c["status"], expected, "{}: {report:#}", c["id"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_and_call_through_an_sni_routing_passthrough_proxy() {
    // The governance contract (the app id) on anvil.
    let anvil = e2e::chain::anvil();
    let chain = e2e::chain::wallet(&anvil, 0);
    let governance = deploy_app_governance(&chain).await.unwrap();

    // The proxy in front of the appliance's port; Pebble validating TLS-ALPN-01 at the
    // proxy's port, with challtestsrv resolving NAME to 127.0.0.1.
    let app_port = free_port();
    let proxy = SniProxy::start(app_port).await;
    let pebble = Pebble::start(PebbleOptions {
        tls_port: proxy.port,
        http_port: free_port(),
        ..PebbleOptions::default()
    })
    .await;
    let root_pem = pebble.root_pem().await;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("pebble-root.pem");
    std::fs::write(&root, &root_pem).unwrap();

    // The compose with the gateway on, measured as the dev stack's app-compose.json.
    let mut options = compose_pin::RenderOptions::dev();
    options.gateway_enabled = true;
    let compose = compose_pin::render(compose_pin::TEMPLATE, &options).unwrap();
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("app-compose.json"), compose.bytes()).unwrap();
    let mut env = pebble.appliance_env(&[NAME]);
    env.extend([
        (
            "APPLIANCE_LISTEN".to_owned(),
            format!("127.0.0.1:{app_port}"),
        ),
        (
            "APPLIANCE_CHAIN__GOVERNANCE_ADDRESS".to_owned(),
            governance.to_string(),
        ),
    ]);
    let app = Appliance::launch(data.path(), Launch::DevWith { env }).await;

    // /evidences/ through the proxy (the name resolves to it here): it lists the ACME
    // certificate once Pebble, validating through the proxy, issued it.
    let plain = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(root_pem.as_bytes()).unwrap())
        .tls_built_in_root_certs(false)
        .resolve(NAME, proxy.addr())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let base = format!("https://{NAME}");
    let cert_name = format!("cert-{NAME}.pem");
    let issued = eventually_async(Duration::from_secs(60), || {
        let (plain, url, cert_name) = (
            plain.clone(),
            format!("{base}/evidences/"),
            cert_name.clone(),
        );
        async move {
            match plain.get(url).send().await {
                Ok(r) if r.status() == 200 => {
                    r.text().await.is_ok_and(|t| t.contains(cert_name.as_str()))
                }
                _ => false,
            }
        }
    })
    .await;
    assert!(
        issued,
        "no ACME certificate for {NAME} through the proxy\nappliance log:\n{}\npebble log:\n{}\nhaproxy log:\n{}",
        app.log(),
        pebble.log(),
        proxy.log()
    );
    let get = |path: &str| {
        let (plain, url) = (plain.clone(), format!("{base}{path}"));
        async move {
            let rsp = plain.get(url).send().await.unwrap();
            assert_eq!(rsp.status(), 200);
            rsp.json::<Value>().await.unwrap()
        }
    };
    let account = get("/evidences/acme-account.json").await;
    let info = get("/info").await;
    let app_id = info["app_id"].as_str().unwrap().to_owned();
    assert_eq!(
        app_id,
        hex::encode(governance.as_slice()),
        "the app id is the governance contract"
    );
    // The attested compose says the gateway routes to this CVM.
    let tcb: Value = match &info["tcb_info"] {
        Value::String(s) => serde_json::from_str(s).unwrap(),
        v => v.clone(),
    };
    let attested: Value = serde_json::from_str(tcb["app_compose"].as_str().unwrap()).unwrap();
    assert_eq!(attested["gateway_enabled"], true);

    // DNS as an operator publishes it: CAA naming the appliance's ACME account, the route
    // record naming the app and the port the compose publishes (443:8443); the compose
    // hash allowed on chain.
    pebble
        .add_caa(
            NAME,
            "issue",
            &format!(
                "pebble.letsencrypt.org; accounturi={}",
                account["uri"].as_str().unwrap()
            ),
        )
        .await;
    set_txt(&pebble, RECORD, Some(format!("{app_id}:443").as_str())).await;
    let compose_hash = B256::from(compose.hash());
    test_support::chain::send(IAppGovernance::new(governance, &chain).addComposeHash(compose_hash))
        .await;

    // evidence verify through the proxy: every check passes, the route record included.
    let rpc = anvil.endpoint();
    let (code, report) = evidence_verify(proxy.addr(), &root, &pebble.dns_addr, &rpc).await;
    assert_eq!(code, 0, "{report:#}");
    every_check_passes(&report);
    let route = check(&report, "gateway-route")["detail"].as_str().unwrap();
    assert!(
        route.contains(&format!("routes {NAME} to this app (app id {app_id}"))
            && route.contains("port 443"),
        "{route}"
    );

    // The record naming another app: gateway-route fails, alone, saying both ids.
    let other = "ab".repeat(20);
    set_txt(&pebble, RECORD, Some(format!("{other}:443").as_str())).await;
    let (code, report) = evidence_verify(proxy.addr(), &root, &pebble.dns_addr, &rpc).await;
    assert_eq!(code, 1, "{report:#}");
    let failed: Vec<&Value> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .collect();
    assert_eq!(failed.len(), 1, "{report:#}");
    let detail = failed[0]["detail"].as_str().unwrap();
    assert_eq!(failed[0]["id"], "gateway-route");
    assert!(
        detail.contains(&format!("TXT says \"{other}:443\""))
            && detail.contains(&format!("the evidence attests app id {app_id}")),
        "{detail}"
    );
    set_txt(&pebble, RECORD, Some(format!("{app_id}:443").as_str())).await;

    // The attested client through the proxy: verifies (the route record included), then
    // creates an account and calls with its key, every connection through the proxy.
    let policy = Policy {
        allow_simulated: true,
        rpc_url: Some(rpc.clone()),
        dns_server: Some(pebble.dns_addr.parse().unwrap()),
        ..Policy::default()
    };
    let client = Client::builder(base.clone())
        .connect_to(proxy.addr())
        .ca_file(&root)
        .policy(policy.clone())
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let verified = client.verify().await.unwrap();
    let route = verified
        .report
        .checks
        .iter()
        .find(|c| c.id == "gateway-route")
        .unwrap();
    assert_eq!(route.status, Status::Pass, "{}", verified.report.to_text());
    let key = client
        .new_account(&NewAccountRequest {
            account_name: "through-the-gateway".into(),
            account_description: None,
            email: None,
        })
        .await
        .unwrap()
        .api_key;
    let keyed = Client::builder(base.clone())
        .connect_to(proxy.addr())
        .ca_file(&root)
        .policy(policy)
        .api_key(key)
        .build()
        .unwrap();
    let group = keyed
        .add_group(&AddGroupRequest {
            group_name: "gw".into(),
            ..AddGroupRequest::default()
        })
        .await
        .unwrap();
    let groups = keyed.list_groups(&PagingParams::default()).await.unwrap();
    assert!(groups.iter().any(|g| g.id == group.group_id), "{groups:?}");
    // A URL whose port is not the proxy's cannot be combined with connect_to.
    let refused = Client::builder(format!("https://{NAME}:{app_port}"))
        .connect_to(proxy.addr())
        .build();
    assert!(refused.is_err());

    // appliance-cli --connect: the same verification from the command line.
    let cli_dir = tempfile::tempdir().unwrap();
    let cli = |args: &[&str]| {
        Command::new(binary("appliance-cli"))
            .args(args)
            .env_clear()
            .env("APPLIANCE_CLI_CONFIG_DIR", cli_dir.path())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .output()
            .unwrap()
    };
    let root_arg = root.display().to_string();
    let dns_arg = pebble.dns_addr.clone();
    let set = cli(&[
        "profile",
        "set",
        "--url",
        &base,
        "--ca-file",
        &root_arg,
        "--allow-simulated",
        "true",
        "--rpc-url",
        &rpc,
        "--dns",
        &dns_arg,
    ]);
    assert!(set.status.success(), "{set:?}");
    let proxy_arg = proxy.addr().to_string();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(binary("appliance-cli"))
            .args(["--connect", proxy_arg.as_str(), "--json", "verify"])
            .env_clear()
            .env("APPLIANCE_CLI_CONFIG_DIR", cli_dir.path())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "appliance-cli --connect verify: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["report"]["ok"], true, "{shown:#}");

    // The routing is real: the appliance answers a ClientHello for any name, but the
    // proxy closes one for another name without a byte, and passes NAME's through.
    let direct = answer_to_hello(app_port, "other.gateway.test").await;
    assert!(!direct.is_empty(), "the appliance itself answers any name");
    let routed = answer_to_hello(proxy.port, NAME).await;
    assert_eq!(
        routed.first(),
        Some(&0x16),
        "a TLS handshake record: {routed:?}"
    );
    let refused = answer_to_hello(proxy.port, "other.gateway.test").await;
    assert!(
        refused.is_empty(),
        "the proxy answered a name it does not route: {refused:?}"
    );
}
