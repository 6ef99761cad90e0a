//! The whole attested chain on one machine, for the client's tests: a dev appliance
//! (simulated quotes) whose certificate comes from Pebble by TLS-ALPN-01, CAA records
//! naming its ACME account in pebble-challtestsrv, and its compose hash allowed by an
//! `AppGovernance` contract on anvil whose address is the appliance's `app_id`. Every
//! check of `evidence verify` passes against it (with simulated quotes allowed).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use alloy::node_bindings::AnvilInstance;
use alloy::primitives::{Address, B256};
use alloy::providers::DynProvider;
use chain_contracts::{IAppGovernance, deploy_app_governance};
use serde_json::Value;

use crate::pebble::{Pebble, PebbleOptions, free_port};
use crate::{Appliance, Launch};

/// The domain whose CAA records govern issuance (served by challtestsrv).
pub const CAA_DOMAIN: &str = "appliance.acme.test";
/// The name clients connect to (the system resolver knows it).
pub const DOMAIN: &str = "localhost";

/// Fields drop in order: the appliance stops first, then Pebble and anvil.
pub struct AttestedStack {
    pub app: Appliance,
    pub anvil: AnvilInstance,
    pub chain: DynProvider,
    pub governance: Address,
    pub pebble: Pebble,
    /// `https://localhost:PORT`.
    pub base: String,
    pub port: u16,
    /// Pebble's root (the issuer of the appliance's certificate), as a file.
    pub root_file: PathBuf,
    pub root_pem: String,
    /// A plain client trusting that root (no pinning).
    pub plain: reqwest::Client,
    pub compose_hash: B256,
    pub cert_name: String,
    pub tmp: tempfile::TempDir,
    _data: tempfile::TempDir,
}

impl AttestedStack {
    pub async fn start() -> Self {
        Self::start_with(Vec::new()).await
    }

    /// [`Self::start`] with more `APPLIANCE_*` (or `KEYSERVICE_*`) variables for the
    /// appliance and its keyservice child.
    pub async fn start_with(extra_env: Vec<(String, String)>) -> Self {
        let anvil = crate::chain::anvil();
        let chain = crate::chain::wallet(&anvil, 0);
        let governance = deploy_app_governance(&chain).await.unwrap();
        let port = free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let pebble = Pebble::start(PebbleOptions {
            tls_port: port,
            http_port: free_port(),
            ..PebbleOptions::default()
        })
        .await;
        let root_pem = pebble.root_pem().await;
        let tmp = tempfile::tempdir().unwrap();
        let root_file = tmp.path().join("pebble-root.pem");
        std::fs::write(&root_file, &root_pem).unwrap();
        let mut env = pebble.appliance_env(&[CAA_DOMAIN, DOMAIN]);
        env.extend([
            ("APPLIANCE_LISTEN".to_owned(), format!("127.0.0.1:{port}")),
            (
                "APPLIANCE_CHAIN__GOVERNANCE_ADDRESS".to_owned(),
                governance.to_string(),
            ),
            // keyservice (a child of the dev appliance, which has no chain of its own here)
            // reads the governance contract from this chain to decide reseal targets.
            ("KEYSERVICE_GOVERNANCE_RPC".to_owned(), anvil.endpoint()),
        ]);
        env.extend(extra_env);
        let data = tempfile::tempdir().unwrap();
        let app = Appliance::launch(data.path(), Launch::DevWith { env }).await;
        let plain = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(root_pem.as_bytes()).unwrap())
            .tls_built_in_root_certs(false)
            .resolve(DOMAIN, addr)
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let base = format!("https://{DOMAIN}:{port}");
        let cert_name = format!("cert-{CAA_DOMAIN}.pem");
        let ready = crate::eventually_async(Duration::from_secs(60), || {
            let (plain, url, cert_name) = (
                plain.clone(),
                format!("{base}/evidences/"),
                cert_name.clone(),
            );
            async move {
                match plain.get(url).send().await {
                    Ok(r) if r.status() == 200 => r
                        .text()
                        .await
                        .map(|t| t.contains(&cert_name))
                        .unwrap_or(false),
                    _ => false,
                }
            }
        })
        .await;
        assert!(
            ready,
            "no evidence for the ACME certificate; log:\n{}",
            app.log()
        );
        let account: Value = serde_json::from_slice(
            &get(&plain, &format!("{base}/evidences/acme-account.json")).await,
        )
        .unwrap();
        let account_uri = account["uri"].as_str().unwrap().to_owned();
        pebble
            .add_caa(
                CAA_DOMAIN,
                "issue",
                &format!("pebble.letsencrypt.org; accounturi={account_uri}"),
            )
            .await;
        let info: Value =
            serde_json::from_slice(&get(&plain, &format!("{base}/info")).await).unwrap();
        let compose_hash =
            B256::from_slice(&hex::decode(info["compose_hash"].as_str().unwrap()).unwrap());
        let stack = Self {
            app,
            anvil,
            chain,
            governance,
            pebble,
            base,
            port,
            root_file,
            root_pem,
            plain,
            compose_hash,
            cert_name,
            tmp,
            _data: data,
        };
        stack.allow(true).await;
        stack
    }

    /// Adds (or removes) the appliance's compose hash to the governance allow-list.
    pub async fn allow(&self, allowed: bool) {
        let gov = IAppGovernance::new(self.governance, &self.chain);
        let sent = if allowed {
            gov.addComposeHash(self.compose_hash).send().await
        } else {
            gov.removeComposeHash(self.compose_hash).send().await
        };
        sent.unwrap().get_receipt().await.unwrap();
    }

    /// The served certificate file's current contents.
    pub async fn cert_pem(&self) -> Vec<u8> {
        get(
            &self.plain,
            &format!("{}/evidences/{}", self.base, self.cert_name),
        )
        .await
    }

    /// The RPC URL of the chain holding the governance contract.
    pub fn rpc_url(&self) -> String {
        self.anvil.endpoint()
    }

    /// `appliance-cli profile set …` for this stack: its URL, Pebble's root, simulated
    /// quotes allowed, its chain, DNS server and CAA domain.
    pub fn cli_profile_args(&self) -> Vec<String> {
        vec![
            "profile".into(),
            "set".into(),
            "--url".into(),
            self.base.clone(),
            "--ca-file".into(),
            self.root_file.display().to_string(),
            "--allow-simulated".into(),
            "true".into(),
            "--rpc-url".into(),
            self.rpc_url(),
            "--dns".into(),
            self.dns().to_string(),
            "--caa-domain".into(),
            CAA_DOMAIN.into(),
        ]
    }

    /// challtestsrv's DNS server.
    pub fn dns(&self) -> SocketAddr {
        self.pebble.dns_addr.parse().unwrap()
    }
}

/// The body of a GET.
async fn get(client: &reqwest::Client, url: &str) -> Vec<u8> {
    client
        .get(url)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec()
}
