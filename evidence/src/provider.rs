//! Quote providers: where the appliance gets its TDX quote and identity from.
//!
//! * [`DstackProvider`] — the dstack guest agent (`GetQuote`, `Info`) over its Unix socket.
//! * [`TsmProvider`] — Linux configfs-tsm (`/sys/kernel/config/tsm/report`) on any TDX host.
//! * [`SimulatedProvider`] — development without TDX: quote-shaped, dev-signed, marked, and
//!   refused by the verifier unless simulated evidence is allowed (see [`crate::simulated`]).
//!
//! [`QuoteProvider`] is the enum the appliance holds (its `attest` module and `/info`
//! endpoint); keep its API stable.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use serde::{Deserialize, Serialize};

use crate::event_log::EventLog;
use crate::quote::TdxQuote;
use crate::{compose_hash_bytes, simulated};

/// Largest guest-agent response read (quotes with event logs are a few tens of KiB).
const MAX_AGENT_RESPONSE: usize = 4 << 20;
/// Bound on one guest-agent or configfs round trip.
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a provider could not answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("dstack guest agent: {0}")]
    Agent(String),
    #[error("malformed provider answer: {0}")]
    Malformed(String),
    #[error("quote provider unavailable: {0}")]
    Unavailable(String),
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ProviderError {
    let what = what.into();
    move |source| ProviderError::Io { what, source }
}

/// A fresh quote and the event log that explains its RTMRs.
#[derive(Debug, Clone, Serialize)]
pub struct Quote {
    #[serde(with = "hex_vec")]
    pub bytes: Vec<u8>,
    /// JSON array text of events (`imr`, `event_type`, `digest`, `event`, `event_payload`).
    pub event_log_json: String,
    /// dstack's `vm_config` string; empty where unknown.
    pub vm_config: String,
}

impl Quote {
    /// The spec's `/attestation` body.
    pub fn attestation_json(&self) -> serde_json::Value {
        serde_json::json!({
            "quote": hex::encode(&self.bytes),
            "event_log": self.event_log_json,
            "vm_config": self.vm_config,
        })
    }

    /// The `/evidences/quote.json` body: the attestation fields plus `report_data` (hex,
    /// read back from the quote itself).
    pub fn evidence_quote_json(&self) -> serde_json::Value {
        let report_data = TdxQuote::parse(&self.bytes)
            .map(|q| hex::encode(q.report.report_data))
            .unwrap_or_default();
        serde_json::json!({
            "quote": hex::encode(&self.bytes),
            "report_data": report_data,
            "event_log": self.event_log_json,
            "vm_config": self.vm_config,
        })
    }
}

/// The measurement registers, as lowercase hex.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Measurements {
    pub mrtd: String,
    pub rtmr0: String,
    pub rtmr1: String,
    pub rtmr2: String,
    pub rtmr3: String,
}

impl Measurements {
    fn from_quote(bytes: &[u8]) -> Result<Self, ProviderError> {
        let q = TdxQuote::parse(bytes).map_err(|e| ProviderError::Malformed(e.to_string()))?;
        Ok(Self {
            mrtd: hex::encode(q.report.mr_td),
            rtmr0: hex::encode(q.report.rtmr0),
            rtmr1: hex::encode(q.report.rtmr1),
            rtmr2: hex::encode(q.report.rtmr2),
            rtmr3: hex::encode(q.report.rtmr3),
        })
    }
}

/// The deployment's identity (what `/info` serves).
#[derive(Debug, Clone, Serialize)]
pub struct Info {
    /// hex, no `0x` (20 bytes on dstack: the governance contract's address)
    pub app_id: String,
    /// hex, no `0x`; may be empty
    pub instance_id: String,
    /// hex SHA-256 of `app_compose`, no `0x`
    pub compose_hash: String,
    /// the exact app-compose.json text that was hashed
    pub app_compose: String,
    pub key_provider: Option<String>,
    pub mrs: Measurements,
    /// JSON array text of the full event log
    pub event_log: String,
}

impl Info {
    /// The spec's `/info` body.
    pub fn info_json(&self) -> serde_json::Value {
        let events: serde_json::Value =
            serde_json::from_str(&self.event_log).unwrap_or(serde_json::Value::Array(vec![]));
        serde_json::json!({
            "app_id": self.app_id,
            "instance_id": self.instance_id,
            "compose_hash": self.compose_hash,
            "key_provider": self.key_provider,
            "tcb_info": {
                "mrtd": self.mrs.mrtd,
                "rtmr0": self.mrs.rtmr0,
                "rtmr1": self.mrs.rtmr1,
                "rtmr2": self.mrs.rtmr2,
                "rtmr3": self.mrs.rtmr3,
                "compose_hash": self.compose_hash,
                "app_compose": self.app_compose,
                "event_log": events,
            },
        })
    }
}

/// One of the three quote sources. Cheap to clone.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum QuoteProvider {
    Dstack(DstackProvider),
    ConfigfsTsm(TsmProvider),
    Simulated(SimulatedProvider),
}

impl QuoteProvider {
    /// A TDX quote over `report_data`, with its event log.
    pub async fn quote(&self, report_data: [u8; 64]) -> Result<Quote, ProviderError> {
        match self {
            Self::Dstack(p) => p.quote(report_data).await,
            Self::ConfigfsTsm(p) => p.quote(report_data).await,
            Self::Simulated(p) => Ok(p.quote(report_data)),
        }
    }

    /// The deployment's identity.
    pub async fn info(&self) -> Result<Info, ProviderError> {
        match self {
            Self::Dstack(p) => p.info().await,
            Self::ConfigfsTsm(p) => p.info().await,
            Self::Simulated(p) => Ok(p.info()),
        }
    }

    /// `"dstack"`, `"configfs-tsm"` or `"simulated"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Dstack(_) => "dstack",
            Self::ConfigfsTsm(_) => "configfs-tsm",
            Self::Simulated(_) => "simulated",
        }
    }

    /// True only for the simulated provider (NOT confidential).
    pub fn is_simulated(&self) -> bool {
        matches!(self, Self::Simulated(_))
    }
}

impl From<DstackProvider> for QuoteProvider {
    fn from(p: DstackProvider) -> Self {
        Self::Dstack(p)
    }
}
impl From<TsmProvider> for QuoteProvider {
    fn from(p: TsmProvider) -> Self {
        Self::ConfigfsTsm(p)
    }
}
impl From<SimulatedProvider> for QuoteProvider {
    fn from(p: SimulatedProvider) -> Self {
        Self::Simulated(p)
    }
}

// ---------------------------------------------------------------------------------------
// dstack guest agent

/// The dstack guest agent, spoken to as HTTP/1.1 JSON over its Unix socket.
#[derive(Debug, Clone)]
pub struct DstackProvider {
    socket: Arc<PathBuf>,
}

#[derive(Deserialize)]
struct AgentQuote {
    quote: String,
    #[serde(default)]
    event_log: String,
    #[serde(default)]
    vm_config: String,
}

#[derive(Deserialize)]
struct AgentInfo {
    #[serde(default)]
    app_id: String,
    #[serde(default)]
    instance_id: String,
    #[serde(default)]
    compose_hash: String,
    /// JSON text: {mrtd, rtmr0..3, event_log: [...], app_compose: "..."}
    #[serde(default)]
    tcb_info: serde_json::Value,
    #[serde(default)]
    key_provider_info: Option<String>,
}

#[derive(Deserialize)]
struct AgentTcbInfo {
    #[serde(default)]
    mrtd: String,
    #[serde(default)]
    rtmr0: String,
    #[serde(default)]
    rtmr1: String,
    #[serde(default)]
    rtmr2: String,
    #[serde(default)]
    rtmr3: String,
    #[serde(default)]
    event_log: serde_json::Value,
    #[serde(default)]
    app_compose: String,
}

impl DstackProvider {
    /// Where dstack mounts the guest agent's socket.
    pub const DEFAULT_SOCKET: &'static str = "/var/run/dstack.sock";

    pub fn new(socket: impl Into<PathBuf>) -> Self {
        Self {
            socket: Arc::new(socket.into()),
        }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    async fn call(&self, method: &str, body: serde_json::Value) -> Result<Bytes, ProviderError> {
        tokio::time::timeout(PROVIDER_TIMEOUT, self.call_inner(method, body))
            .await
            .map_err(|_| ProviderError::Unavailable(format!("{method}: timed out")))?
    }

    async fn call_inner(
        &self,
        method: &str,
        body: serde_json::Value,
    ) -> Result<Bytes, ProviderError> {
        let stream = tokio::net::UnixStream::connect(self.socket.as_path())
            .await
            .map_err(|e| {
                ProviderError::Unavailable(format!("connect {}: {e}", self.socket.display()))
            })?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| ProviderError::Agent(format!("handshake: {e}")))?;
        let conn_task = tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "guest agent connection ended");
            }
        });
        let request = http::Request::builder()
            .method(http::Method::POST)
            .uri(format!("/{method}"))
            .header(http::header::HOST, "dstack")
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| ProviderError::Agent(e.to_string()))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| ProviderError::Agent(format!("{method}: {e}")))?;
        let status = response.status();
        let body = Limited::new(response.into_body(), MAX_AGENT_RESPONSE)
            .collect()
            .await
            .map_err(|e| ProviderError::Agent(format!("{method} body: {e}")))?
            .to_bytes();
        conn_task.abort();
        if !status.is_success() {
            return Err(ProviderError::Agent(format!(
                "{method} answered {status}: {}",
                String::from_utf8_lossy(&body[..body.len().min(512)])
            )));
        }
        Ok(body)
    }

    pub async fn quote(&self, report_data: [u8; 64]) -> Result<Quote, ProviderError> {
        let body = self
            .call(
                "GetQuote",
                serde_json::json!({ "report_data": hex::encode(report_data) }),
            )
            .await?;
        let q: AgentQuote = serde_json::from_slice(&body)
            .map_err(|e| ProviderError::Malformed(format!("GetQuote: {e}")))?;
        let bytes = crate::quote::decode_quote_text(&q.quote)
            .map_err(|e| ProviderError::Malformed(e.to_string()))?;
        Ok(Quote {
            bytes,
            event_log_json: q.event_log,
            vm_config: q.vm_config,
        })
    }

    pub async fn info(&self) -> Result<Info, ProviderError> {
        let body = self.call("Info", serde_json::json!({})).await?;
        let info: AgentInfo = serde_json::from_slice(&body)
            .map_err(|e| ProviderError::Malformed(format!("Info: {e}")))?;
        let tcb: AgentTcbInfo = match &info.tcb_info {
            serde_json::Value::String(s) => serde_json::from_str(s),
            v => serde_json::from_value(v.clone()),
        }
        .map_err(|e| ProviderError::Malformed(format!("Info.tcb_info: {e}")))?;
        let event_log = match &tcb.event_log {
            serde_json::Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        let compose_hash = if info.compose_hash.is_empty() {
            hex::encode(compose_hash_bytes(tcb.app_compose.as_bytes()))
        } else {
            info.compose_hash.trim_start_matches("0x").to_owned()
        };
        Ok(Info {
            app_id: info.app_id.trim_start_matches("0x").to_owned(),
            instance_id: info.instance_id.trim_start_matches("0x").to_owned(),
            compose_hash,
            app_compose: tcb.app_compose,
            key_provider: info.key_provider_info,
            mrs: Measurements {
                mrtd: tcb.mrtd,
                rtmr0: tcb.rtmr0,
                rtmr1: tcb.rtmr1,
                rtmr2: tcb.rtmr2,
                rtmr3: tcb.rtmr3,
            },
            event_log,
        })
    }
}

// ---------------------------------------------------------------------------------------
// Linux configfs-tsm

/// Linux configfs-tsm: write 64 bytes of report data to `inblob`, read the quote from
/// `outblob`. There is no dstack event log on a plain TDX host, so the identity comes from
/// the local app-compose.json and the event log is empty.
#[derive(Debug, Clone)]
pub struct TsmProvider {
    dir: Arc<PathBuf>,
    app_compose: Arc<Vec<u8>>,
    app_id: Option<[u8; 20]>,
}

impl TsmProvider {
    /// Where the kernel mounts configfs-tsm reports.
    pub const DEFAULT_DIR: &'static str = "/sys/kernel/config/tsm/report";

    pub fn new(report_dir: impl Into<PathBuf>, app_compose: Vec<u8>) -> Self {
        Self {
            dir: Arc::new(report_dir.into()),
            app_compose: Arc::new(app_compose),
            app_id: None,
        }
    }

    /// The governance contract's address (defaults to the first 20 bytes of the compose hash).
    pub fn with_app_id(mut self, app_id: [u8; 20]) -> Self {
        self.app_id = Some(app_id);
        self
    }

    pub async fn quote(&self, report_data: [u8; 64]) -> Result<Quote, ProviderError> {
        let dir = self.dir.clone();
        let bytes = tokio::time::timeout(
            PROVIDER_TIMEOUT,
            tokio::task::spawn_blocking(move || tsm_quote(&dir, &report_data)),
        )
        .await
        .map_err(|_| ProviderError::Unavailable("configfs-tsm: timed out".to_owned()))?
        .map_err(|e| ProviderError::Unavailable(format!("configfs-tsm task: {e}")))??;
        Ok(Quote {
            bytes,
            event_log_json: "[]".to_owned(),
            vm_config: String::new(),
        })
    }

    pub async fn info(&self) -> Result<Info, ProviderError> {
        let q = self.quote([0u8; 64]).await?;
        let hash = compose_hash_bytes(&self.app_compose);
        let app_id = self.app_id.unwrap_or_else(|| default_app_id(&hash));
        Ok(Info {
            app_id: hex::encode(app_id),
            instance_id: String::new(),
            compose_hash: hex::encode(hash),
            app_compose: String::from_utf8_lossy(&self.app_compose).into_owned(),
            key_provider: None,
            mrs: Measurements::from_quote(&q.bytes)?,
            event_log: q.event_log_json,
        })
    }
}

fn tsm_quote(dir: &Path, report_data: &[u8; 64]) -> Result<Vec<u8>, ProviderError> {
    // A fresh entry per request, so concurrent callers never read each other's outblob.
    let mut nonce = [0u8; 8];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce)
        .map_err(|_| ProviderError::Unavailable("no randomness".to_owned()))?;
    let entry = dir.join(format!("evidence-{}", hex::encode(nonce)));
    std::fs::create_dir(&entry).map_err(io_err(format!("mkdir {}", entry.display())))?;
    let result = (|| {
        if let Ok(provider) = std::fs::read_to_string(entry.join("provider"))
            && provider.trim() != "tdx_guest"
        {
            return Err(ProviderError::Unavailable(format!(
                "configfs-tsm provider is {:?}, not tdx_guest",
                provider.trim()
            )));
        }
        std::fs::write(entry.join("inblob"), report_data)
            .map_err(io_err("write configfs-tsm inblob"))?;
        std::fs::read(entry.join("outblob")).map_err(io_err("read configfs-tsm outblob"))
    })();
    if let Err(e) = std::fs::remove_dir(&entry) {
        tracing::warn!(entry = %entry.display(), error = %e, "could not remove configfs-tsm entry");
    }
    result
}

// ---------------------------------------------------------------------------------------
// simulated

/// Development quotes without TDX (NOT confidential; see [`crate::simulated`]).
#[derive(Debug, Clone)]
pub struct SimulatedProvider {
    app_compose: Arc<Vec<u8>>,
    /// SHA-256 of `app_compose`, computed once.
    compose_hash: [u8; 32],
    app_id: Option<[u8; 20]>,
    instance_id: Vec<u8>,
}

fn default_app_id(compose_hash: &[u8; 32]) -> [u8; 20] {
    let mut id = [0u8; 20];
    id.copy_from_slice(&compose_hash[..20]);
    id
}

impl SimulatedProvider {
    /// `app_compose`: the bytes of the local app-compose.json; its SHA-256 is recorded.
    pub fn new(app_compose: Vec<u8>) -> Self {
        Self {
            compose_hash: compose_hash_bytes(&app_compose),
            app_compose: Arc::new(app_compose),
            app_id: None,
            instance_id: Vec::new(),
        }
    }

    /// The governance contract's address (defaults to the first 20 bytes of the compose hash).
    pub fn with_app_id(mut self, app_id: [u8; 20]) -> Self {
        self.app_id = Some(app_id);
        self
    }

    pub fn with_instance_id(mut self, instance_id: [u8; 20]) -> Self {
        self.instance_id = instance_id.to_vec();
        self
    }

    fn app_id(&self) -> [u8; 20] {
        self.app_id
            .unwrap_or_else(|| default_app_id(&self.compose_hash))
    }

    fn log(&self) -> EventLog {
        simulated::event_log(&self.app_id(), &self.compose_hash, &self.instance_id)
    }

    pub fn quote(&self, report_data: [u8; 64]) -> Quote {
        let log = self.log();
        Quote {
            bytes: simulated::quote(&log, &self.compose_hash, &report_data),
            event_log_json: log.to_json(),
            vm_config: r#"{"simulated":true}"#.to_owned(),
        }
    }

    pub fn info(&self) -> Info {
        let log = self.log();
        let rtmrs = log.replay();
        Info {
            app_id: hex::encode(self.app_id()),
            instance_id: hex::encode(&self.instance_id),
            compose_hash: hex::encode(self.compose_hash),
            app_compose: String::from_utf8_lossy(&self.app_compose).into_owned(),
            key_provider: Some(r#"{"name":"simulated","id":"NOT-CONFIDENTIAL"}"#.to_owned()),
            mrs: Measurements {
                mrtd: hex::encode(simulated::mr_td()),
                rtmr0: hex::encode(rtmrs[0]),
                rtmr1: hex::encode(rtmrs[1]),
                rtmr2: hex::encode(rtmrs[2]),
                rtmr3: hex::encode(rtmrs[3]),
            },
            event_log: log.to_json(),
        }
    }
}

mod hex_vec {
    use serde::Serializer;

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(v))
    }
}
