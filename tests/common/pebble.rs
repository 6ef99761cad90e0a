//! Debian's Pebble (a test ACME CA) and `pebble-challtestsrv` (its mock DNS), started on
//! free loopback ports with a generated configuration and stopped when dropped.
//!
//! Pebble validates HTTP-01 and TLS-ALPN-01 on the ports given here (the appliance's),
//! resolves names through challtestsrv (every name → 127.0.0.1, no AAAA), and serves its
//! ACME listener with a certificate from a throw-away CA (`ca_file`, the appliance's
//! `acme.ca_bundle`).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;
use test_support::tools::pebble_tool;

pub use test_support::ports::free_port;

/// How to run Pebble.
#[derive(Clone, Debug, Default)]
pub struct PebbleOptions {
    /// Where Pebble connects for HTTP-01 validation.
    pub http_port: u16,
    /// Where Pebble connects for TLS-ALPN-01 validation.
    pub tls_port: u16,
    /// Lifetime of issued certificates (Pebble's default: about five years).
    pub validity_secs: Option<u64>,
    /// `PEBBLE_WFE_NONCEREJECT` (percent of good nonces rejected; Pebble's default 5).
    pub nonce_reject: Option<u32>,
}

/// A running Pebble + challtestsrv pair.
pub struct Pebble {
    pebble: Option<Child>,
    challtestsrv: Option<Child>,
    options: PebbleOptions,
    /// The ACME directory URL.
    pub directory_url: String,
    /// Pebble's management interface (roots, intermediates).
    pub management_url: String,
    /// challtestsrv's management interface (mock DNS records).
    pub dns_management_url: String,
    /// The mock DNS server (`127.0.0.1:port`), for resolvers that should see it.
    pub dns_addr: String,
    /// PEM of the CA that signed Pebble's listener certificate.
    pub ca_pem: String,
    /// That PEM as a file (for `acme.ca_bundle`).
    pub ca_file: PathBuf,
    acme_port: u16,
    management_port: u16,
    dir: tempfile::TempDir,
}

impl Pebble {
    /// Chooses ports and writes the configuration; `start` runs it. Splitting the two
    /// lets a test point the appliance at a directory that is not up yet.
    pub fn prepare(options: PebbleOptions) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "appliance test CA for pebble");
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let leaf_params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
                .unwrap();
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
        let leaf = leaf_params.signed_by(&leaf_key, &issuer).unwrap();
        let ca_file = dir.path().join("ca.pem");
        std::fs::write(&ca_file, ca.pem()).unwrap();
        std::fs::write(dir.path().join("cert.pem"), leaf.pem()).unwrap();
        std::fs::write(dir.path().join("key.pem"), leaf_key.serialize_pem()).unwrap();
        let acme_port = free_port();
        let management_port = free_port();
        let dns_port = free_port();
        let dns_management_port = free_port();
        let mut config = json!({
            "pebble": {
                "listenAddress": format!("127.0.0.1:{acme_port}"),
                "managementListenAddress": format!("127.0.0.1:{management_port}"),
                "certificate": dir.path().join("cert.pem"),
                "privateKey": dir.path().join("key.pem"),
                "httpPort": options.http_port,
                "tlsPort": options.tls_port,
                "ocspResponderURL": "",
                "externalAccountBindingRequired": false
            }
        });
        if let Some(secs) = options.validity_secs {
            config["pebble"]["certificateValidityPeriod"] = json!(secs);
        }
        std::fs::write(
            dir.path().join("pebble.json"),
            serde_json::to_vec_pretty(&config).unwrap(),
        )
        .unwrap();
        let _ = dns_management_port;
        Self {
            pebble: None,
            challtestsrv: None,
            options,
            directory_url: format!("https://127.0.0.1:{acme_port}/dir"),
            management_url: format!("https://127.0.0.1:{management_port}"),
            dns_management_url: format!("http://127.0.0.1:{dns_management_port}"),
            dns_addr: format!("127.0.0.1:{dns_port}"),
            ca_pem: ca.pem(),
            ca_file,
            acme_port,
            management_port,
            dir,
        }
    }

    /// Prepares and starts.
    pub async fn start(options: PebbleOptions) -> Self {
        let mut pebble = Self::prepare(options);
        pebble.run().await;
        pebble
    }

    /// Starts (or restarts) both processes and waits until the directory answers.
    pub async fn run(&mut self) {
        if self.challtestsrv.is_none() {
            let log = std::fs::File::create(self.dir.path().join("challtestsrv.log")).unwrap();
            let dns_management = self
                .dns_management_url
                .trim_start_matches("http://")
                .to_owned();
            let child = Command::new(pebble_tool("pebble-challtestsrv"))
                .args(["-dns01", &self.dns_addr])
                .args(["-management", &dns_management])
                .args(["-http01", "", "-https01", "", "-tlsalpn01", ""])
                .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""])
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .stdin(Stdio::null())
                .spawn()
                .expect("spawn pebble-challtestsrv");
            self.challtestsrv = Some(child);
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("pebble.log"))
            .unwrap();
        let mut cmd = Command::new(pebble_tool("pebble"));
        cmd.arg("-config")
            .arg(self.dir.path().join("pebble.json"))
            .args(["-dnsserver", &self.dns_addr])
            .env("PEBBLE_VA_NOSLEEP", "1");
        if let Some(percent) = self.options.nonce_reject {
            cmd.env("PEBBLE_WFE_NONCEREJECT", percent.to_string());
        }
        let child = cmd
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn pebble");
        self.pebble = Some(child);
        let client = self.client();
        let ready = crate::eventually_async(Duration::from_secs(20), || {
            let client = client.clone();
            let url = self.directory_url.clone();
            async move { client.get(url).send().await.is_ok() }
        })
        .await;
        assert!(ready, "pebble did not start; its log:\n{}", self.log());
        let _ = (self.acme_port, self.management_port);
    }

    /// Stops Pebble itself (the directory becomes unreachable); DNS keeps running.
    pub fn stop_ca(&mut self) {
        if let Some(mut child) = self.pebble.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// A client trusting Pebble's listener certificate.
    pub fn client(&self) -> reqwest::Client {
        reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(self.ca_pem.as_bytes()).unwrap())
            .tls_built_in_root_certs(false)
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap()
    }

    /// The appliance's ACME settings for this Pebble (`APPLIANCE_ACME__*`): its directory,
    /// `domains`, its listener's CA as `acme.ca_bundle`, and fast retries for the tests
    /// (200 ms doubling up to 2 s). Callers add the listener and any other settings.
    pub fn appliance_env(&self, domains: &[&str]) -> Vec<(String, String)> {
        let domains: Vec<String> = domains.iter().map(|d| format!("\"{d}\"")).collect();
        [
            ("APPLIANCE_ACME__DIRECTORY_URL", self.directory_url.clone()),
            (
                "APPLIANCE_ACME__DOMAINS",
                format!("[{}]", domains.join(", ")),
            ),
            (
                "APPLIANCE_ACME__CA_BUNDLE",
                self.ca_file.display().to_string(),
            ),
            ("APPLIANCE_ACME__RETRY_INITIAL_MS", "200".to_owned()),
            ("APPLIANCE_ACME__RETRY_MAX_MS", "2000".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    /// The root certificate Pebble issues under (PEM), from its management interface.
    pub async fn root_pem(&self) -> String {
        let rsp = self
            .client()
            .get(format!("{}/roots/0", self.management_url))
            .send()
            .await
            .unwrap();
        assert!(rsp.status().is_success());
        rsp.text().await.unwrap()
    }

    /// Serves a CAA record for `host` from the mock DNS.
    pub async fn add_caa(&self, host: &str, tag: &str, value: &str) {
        let body = json!({
            "host": host,
            "policies": [{"tag": tag, "value": value}],
        });
        let rsp = reqwest::Client::new()
            .post(format!("{}/add-caa", self.dns_management_url))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(rsp.status().is_success(), "add-caa: {}", rsp.status());
    }

    /// Pebble's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pebble.log")).unwrap_or_default()
    }
}

impl Drop for Pebble {
    fn drop(&mut self) {
        for child in [self.pebble.take(), self.challtestsrv.take()]
            .into_iter()
            .flatten()
        {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
