//! Quotes: keyservice is the only process that talks to the quote provider (the dstack
//! guest agent, configfs-tsm, or the simulated provider of development), and it offers the
//! front end exactly four narrow operations:
//!
//! * `AttestationQuote` — report data = 64 zero bytes (`/attestation`);
//! * `EvidenceQuote` — report data = SHA-256(`sha256sum.txt`) ‖ 32 zero bytes, where the
//!   bytes must be `sha256sum` output (the evidence files of `/evidences/`);
//! * `FreshEvidenceQuote` — report data = SHA-256(`sha256sum.txt`) ‖ nonce, the same
//!   listing checked the same way, with a verifier's 32-byte nonce (a typed field, not
//!   report data) in place of the zeros, so a relay cannot replay an old quote;
//! * `AttestationInfo` — the deployment's identity (`/info`).
//!
//! No operation takes free-form report data, a key path or an event from the caller, so a front end
//! that holds the keyservice socket cannot obtain a quote over data it chose, derive a
//! guest-agent key (`GetKey`) or extend RTMR3 (`EmitEvent`).
//!
//! A hardware quote is expensive: one runs at a time, at most [`MAX_QUOTES_WAITING`] more
//! wait (for at most [`QUOTE_WAIT`]); beyond that the answer is `QuoteUnavailable`.

use std::path::PathBuf;
use std::time::Duration;

use evidence::{DstackProvider, QuoteProvider, SimulatedProvider, TsmProvider};
use keyservice_api::protocol::{HEADER_LEN, MAX_FRAME_LEN, Request, Response};
use keyservice_api::{DeploymentInfo, QuoteBundle, QuoteSource};
use tokio::sync::Semaphore;

use crate::op_error::OpError;

/// Quote requests that may wait while one runs; more are answered `QuoteUnavailable`.
pub const MAX_QUOTES_WAITING: usize = 16;
/// Longest a quote request waits for its turn.
pub const QUOTE_WAIT: Duration = Duration::from_secs(30);

/// Which provider to use (`--quote-provider`, or `[attestation] provider` of the measured
/// appliance configuration).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ProviderChoice {
    /// The dstack guest agent (`GetQuote`, `Info`) on `--agent-socket`.
    Dstack,
    /// Linux configfs-tsm (`--tsm-dir`), identity from `--compose-file`.
    Tsm,
    /// Simulated, dev-signed quotes: NOT confidential.
    Simulated,
}

impl ProviderChoice {
    /// Parses the appliance configuration's spelling.
    pub fn parse(text: &str) -> Result<Self, UnknownProvider> {
        match text {
            "dstack" => Ok(Self::Dstack),
            "tsm" => Ok(Self::Tsm),
            "simulated" => Ok(Self::Simulated),
            other => Err(UnknownProvider(other.to_owned())),
        }
    }
}

/// A quote provider name [`ProviderChoice::parse`] does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown quote provider {0:?} (expected dstack, tsm or simulated)")]
pub struct UnknownProvider(pub String);

/// An app id that is not 40 hex digits ([`parse_app_id`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("app id {0:?} is not 20 bytes of hex")]
pub struct BadAppId(pub String);

/// Why [`quote_settings_from_toml`] refused the configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QuoteSettingsError {
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    #[error("`{0}` is not a table")]
    NotATable(&'static str),
    /// The key (`attestation.provider`, …) holds something other than a string.
    #[error("{0} is not a string")]
    NotAString(&'static str),
    #[error(transparent)]
    Provider(#[from] UnknownProvider),
    /// `attestation.app_id` or `chain.governance_address` is not an app id.
    #[error("{key}: {source}")]
    AppId {
        key: &'static str,
        #[source]
        source: BadAppId,
    },
}

/// Why [`QuoteConfig::build`] could not make the provider.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QuoteConfigError {
    #[error(
        "the tsm and simulated quote providers need --compose-file (the app-compose.json /info serves)"
    )]
    NoComposeFile,
    #[error("cannot read {}: {source}", path.display())]
    ReadComposeFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What the measured appliance configuration says about quotes (`--chain-config`):
/// `[attestation] provider`, `tsm_dir`, `app_id`, and `[chain] governance_address` as the
/// default app id. Every other key is ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuoteSettings {
    pub provider: Option<ProviderChoice>,
    pub tsm_dir: Option<PathBuf>,
    pub app_id: Option<[u8; 20]>,
}

/// 40 hex digits (`0x` optional) → 20 bytes.
pub fn parse_app_id(text: &str) -> Result<[u8; 20], BadAppId> {
    hex::decode(text.trim_start_matches("0x"))
        .ok()
        .and_then(|b| <[u8; 20]>::try_from(b).ok())
        .ok_or_else(|| BadAppId(text.to_owned()))
}

fn table<'a>(
    root: &'a toml::Table,
    name: &'static str,
) -> Result<Option<&'a toml::Table>, QuoteSettingsError> {
    match root.get(name) {
        None => Ok(None),
        Some(toml::Value::Table(t)) => Ok(Some(t)),
        Some(_) => Err(QuoteSettingsError::NotATable(name)),
    }
}

fn string<'a>(
    t: Option<&'a toml::Table>,
    key: &str,
    what: &'static str,
) -> Result<Option<&'a str>, QuoteSettingsError> {
    match t.and_then(|t| t.get(key)) {
        None => Ok(None),
        Some(toml::Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(QuoteSettingsError::NotAString(what)),
    }
}

/// Reads [`QuoteSettings`] from the appliance's TOML configuration.
pub fn quote_settings_from_toml(text: &str) -> Result<QuoteSettings, QuoteSettingsError> {
    let root: toml::Table = text.parse()?;
    let att = table(&root, "attestation")?;
    let chain = table(&root, "chain")?;
    let provider = string(att, "provider", "attestation.provider")?
        .map(ProviderChoice::parse)
        .transpose()?;
    let tsm_dir = string(att, "tsm_dir", "attestation.tsm_dir")?.map(PathBuf::from);
    let app_id = match (
        string(att, "app_id", "attestation.app_id")?,
        string(chain, "governance_address", "chain.governance_address")?,
    ) {
        (Some(id), _) => Some(
            parse_app_id(id).map_err(|source| QuoteSettingsError::AppId {
                key: "attestation.app_id",
                source,
            })?,
        ),
        (None, Some(address)) => {
            Some(
                parse_app_id(address).map_err(|source| QuoteSettingsError::AppId {
                    key: "chain.governance_address",
                    source,
                })?,
            )
        }
        (None, None) => None,
    };
    Ok(QuoteSettings {
        provider,
        tsm_dir,
        app_id,
    })
}

/// Everything needed to build the provider.
#[derive(Clone, Debug)]
pub struct QuoteConfig {
    pub provider: ProviderChoice,
    /// dstack: the guest agent's socket.
    pub agent_socket: PathBuf,
    /// tsm: the configfs-tsm report directory.
    pub tsm_dir: PathBuf,
    /// tsm, simulated: the app-compose.json file whose bytes `/info` serves.
    pub compose_file: Option<PathBuf>,
    /// tsm, simulated: the app id (default: the first 20 bytes of the compose hash).
    pub app_id: Option<[u8; 20]>,
}

impl QuoteConfig {
    /// The provider this configuration names.
    pub fn build(&self) -> Result<QuoteProvider, QuoteConfigError> {
        let compose = || -> Result<Vec<u8>, QuoteConfigError> {
            let path = self
                .compose_file
                .as_ref()
                .ok_or(QuoteConfigError::NoComposeFile)?;
            std::fs::read(path).map_err(|source| QuoteConfigError::ReadComposeFile {
                path: path.clone(),
                source,
            })
        };
        Ok(match self.provider {
            ProviderChoice::Dstack => DstackProvider::new(&self.agent_socket).into(),
            ProviderChoice::Tsm => {
                let mut p = TsmProvider::new(&self.tsm_dir, compose()?);
                if let Some(id) = self.app_id {
                    p = p.with_app_id(id);
                }
                p.into()
            }
            ProviderChoice::Simulated => {
                let mut p = SimulatedProvider::new(compose()?);
                if let Some(id) = self.app_id {
                    p = p.with_app_id(id);
                }
                p.into()
            }
        })
    }
}

/// Checks that `sums` is `sha256sum` output: one or more `<64 lowercase hex>  <name>\n`
/// lines, names without `/` or control characters. Anything else is refused, so the
/// evidence quote only ever covers a checksum listing.
pub fn check_sha256sum(sums: &[u8]) -> Result<(), OpError> {
    const BAD: OpError = OpError::InvalidArgument(
        "not sha256sum output (`<64 hex>  <name>` lines, each ending in \\n)",
    );
    let text = std::str::from_utf8(sums).map_err(|_| BAD)?;
    let Some(body) = text.strip_suffix('\n') else {
        return Err(BAD);
    };
    for line in body.split('\n') {
        let (hash, name) = line.split_at_checked(64).ok_or(BAD)?;
        let name = name.strip_prefix("  ").ok_or(BAD)?;
        let hash_ok = hash
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        let name_ok = !name.is_empty() && !name.chars().any(|c| c == '/' || c.is_control());
        if !hash_ok || !name_ok {
            return Err(BAD);
        }
    }
    Ok(())
}

/// The quote provider behind a semaphore.
pub struct Quoter {
    provider: QuoteProvider,
    /// One quote at a time.
    running: Semaphore,
    /// The one running plus those allowed to wait.
    admitted: Semaphore,
}

impl Quoter {
    pub fn new(provider: QuoteProvider) -> Self {
        Self {
            provider,
            running: Semaphore::new(1),
            admitted: Semaphore::new(1 + MAX_QUOTES_WAITING),
        }
    }

    pub fn source(&self) -> QuoteSource {
        match self.provider {
            QuoteProvider::Dstack(_) => QuoteSource::Dstack,
            QuoteProvider::ConfigfsTsm(_) => QuoteSource::ConfigfsTsm,
            _ => QuoteSource::Simulated,
        }
    }

    /// Answers `AttestationQuote`, `EvidenceQuote`, `FreshEvidenceQuote` or
    /// `AttestationInfo`.
    pub async fn answer(&self, request: &Request) -> Result<Response, OpError> {
        // Check the input before queueing for the provider.
        let report_data = match request {
            Request::AttestationQuote => Some([0u8; 64]),
            Request::EvidenceQuote { sums } => {
                check_sha256sum(sums)?;
                Some(evidence::report_data_for(sums))
            }
            Request::FreshEvidenceQuote { nonce, sums } => {
                check_sha256sum(sums)?;
                Some(evidence::fresh_report_data_for(sums, nonce))
            }
            Request::AttestationInfo => None,
            _ => return Err(OpError::InvalidArgument("not a quote operation")),
        };
        let Ok(_admitted) = self.admitted.try_acquire() else {
            tracing::warn!(
                waiting = MAX_QUOTES_WAITING,
                "quote request refused: too many waiting"
            );
            return Err(OpError::QuoteUnavailable(format!(
                "too many quote requests waiting (one runs at a time, at most {MAX_QUOTES_WAITING} wait)"
            )));
        };
        let _running = match tokio::time::timeout(QUOTE_WAIT, self.running.acquire()).await {
            Ok(Ok(permit)) => permit,
            Ok(Err(_)) => return Err(OpError::Internal("quote semaphore closed")),
            Err(_) => {
                return Err(OpError::QuoteUnavailable(format!(
                    "no turn at the quote provider within {} s",
                    QUOTE_WAIT.as_secs()
                )));
            }
        };
        let response = match report_data {
            Some(report_data) => {
                let q = self
                    .provider
                    .quote(report_data)
                    .await
                    .map_err(failed(self.provider.kind()))?;
                Response::Quote(QuoteBundle {
                    source: self.source(),
                    quote: q.bytes,
                    event_log: q.event_log_json,
                    vm_config: q.vm_config,
                })
            }
            None => {
                let i = self
                    .provider
                    .info()
                    .await
                    .map_err(failed(self.provider.kind()))?;
                Response::Info(DeploymentInfo {
                    app_id: i.app_id,
                    instance_id: i.instance_id,
                    compose_hash: i.compose_hash,
                    app_compose: i.app_compose,
                    key_provider: i.key_provider,
                    mrtd: i.mrs.mrtd,
                    rtmr0: i.mrs.rtmr0,
                    rtmr1: i.mrs.rtmr1,
                    rtmr2: i.mrs.rtmr2,
                    rtmr3: i.mrs.rtmr3,
                    event_log: i.event_log,
                })
            }
        };
        let mut payload = Vec::new();
        response.encode_payload(&mut payload);
        if payload.len() > MAX_FRAME_LEN - HEADER_LEN {
            tracing::error!(
                bytes = payload.len(),
                "the quote provider's answer does not fit in one frame"
            );
            return Err(OpError::QuoteUnavailable(format!(
                "the quote provider's answer ({} bytes) exceeds the {MAX_FRAME_LEN}-byte frame",
                payload.len()
            )));
        }
        Ok(response)
    }
}

fn failed(kind: &'static str) -> impl Fn(evidence::ProviderError) -> OpError {
    move |err| {
        tracing::warn!(provider = kind, error = %err, "quote provider failed");
        OpError::QuoteUnavailable(format!("quote provider {kind}: {err}"))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn sha256sum_format() {
        let line = |name: &str| format!("{}  {name}\n", "ab".repeat(32));
        assert!(check_sha256sum(line("cert-a.test.pem").as_bytes()).is_ok());
        let two = format!("{}{}", line("acme-account.json"), line("cert-a.pem"));
        assert!(check_sha256sum(two.as_bytes()).is_ok());
        for bad in [
            String::new(),
            "\n".to_owned(),
            line("a").trim_end().to_owned(),
            line("../etc/passwd"),
            line(""),
            format!("{}  a\n", "AB".repeat(32)),
            format!("{}  a\n", "ab".repeat(31)),
            format!("{} a\n", "ab".repeat(32)),
            format!("{}\n{}", line("a"), line("b")),
            format!("{}  a\tb\n", "ab".repeat(32)),
        ] {
            assert!(check_sha256sum(bad.as_bytes()).is_err(), "{bad:?}");
        }
        assert!(check_sha256sum(&[0xff, 0xfe]).is_err());
    }

    #[test]
    fn settings_from_the_appliance_configuration() {
        let s = quote_settings_from_toml(
            "[attestation]\nprovider = \"tsm\"\ntsm_dir = \"/t\"\n[chain]\ngovernance_address = \"0x1111111111111111111111111111111111111111\"\n",
        )
        .unwrap();
        assert_eq!(s.provider, Some(ProviderChoice::Tsm));
        assert_eq!(s.tsm_dir, Some(PathBuf::from("/t")));
        assert_eq!(s.app_id, Some([0x11; 20]));
        let s = quote_settings_from_toml(
            "[attestation]\napp_id = \"2222222222222222222222222222222222222222\"\n[chain]\ngovernance_address = \"0x1111111111111111111111111111111111111111\"\n",
        )
        .unwrap();
        assert_eq!(s.app_id, Some([0x22; 20]));
        assert_eq!(s.provider, None);
        assert_eq!(
            quote_settings_from_toml("").unwrap(),
            QuoteSettings::default()
        );
        assert!(quote_settings_from_toml("[attestation]\nprovider = \"sgx\"\n").is_err());
        assert!(quote_settings_from_toml("[attestation]\napp_id = \"12\"\n").is_err());
        assert!(quote_settings_from_toml("attestation = 3\n").is_err());
    }

    /// What `keyservice run` prints after `--chain-config FILE: `.
    #[test]
    fn settings_errors_name_the_key() {
        let message = |text: &str| quote_settings_from_toml(text).unwrap_err().to_string();
        assert_eq!(
            message("[attestation]\nprovider = \"sgx\"\n"),
            "unknown quote provider \"sgx\" (expected dstack, tsm or simulated)"
        );
        assert_eq!(
            message("[chain]\ngovernance_address = \"0x12\"\n"),
            "chain.governance_address: app id \"0x12\" is not 20 bytes of hex"
        );
        assert_eq!(message("attestation = 3\n"), "`attestation` is not a table");
        assert_eq!(
            message("[attestation]\ntsm_dir = 3\n"),
            "attestation.tsm_dir is not a string"
        );
    }

    #[test]
    fn tsm_without_a_compose_file_is_refused() {
        let config = QuoteConfig {
            provider: ProviderChoice::Tsm,
            agent_socket: PathBuf::from("/nonexistent/agent.sock"),
            tsm_dir: PathBuf::from("/nonexistent/tsm"),
            compose_file: None,
            app_id: None,
        };
        assert!(matches!(
            config.build(),
            Err(QuoteConfigError::NoComposeFile)
        ));
    }
}
