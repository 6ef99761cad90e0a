//! The appliance's configuration: one typed struct, loaded once at start, composed of one
//! section per subsystem. The sections of the crates below the front end live with them
//! (`[store]` in `appliance-store`, `[chain]` in `appliance-chain`, `[actions]` in
//! `appliance-execution`); the front end's own (`[http]`, `[rate_limits]`, `[acme]`,
//! `[billing]`, `[log]`, `[metrics]`, `[traces]`, `[tls]`, `[attestation]`,
//! `[keyservice]`, `[operator]`) are the submodules here, one file per subsystem, because the
//! subsystems that read them sit above the state that holds the whole configuration
//! (`tests/architecture.rs` holds every crate's modules free of import circles). Each
//! section owns its keys, defaults and checks; this module loads the file, layers the
//! environment, and checks what crosses sections.
//!
//! Sources, later ones winning: built-in defaults, the TOML file given to
//! `appliance serve --config FILE`, then environment variables. Every key can be set
//! from the environment as `APPLIANCE_<KEY>`, with `__` between nesting levels and the
//! value written as in TOML (strings may be bare): `APPLIANCE_LISTEN=0.0.0.0:443`,
//! `APPLIANCE_HTTP__MAX_BODY_BYTES=1048576`, `APPLIANCE_TLS__HOSTNAMES='["a.example"]'`.
//! Unknown keys, from the file or the environment, are errors, so a typo cannot
//! silently fall back to a default. Two kinds of `APPLIANCE_*` variable are not
//! configuration and are skipped: those of the repository's scripts
//! ([`NOT_CONFIGURATION`]) and those of `appliance-cli`, which all start with
//! [`CLI_ENV_PREFIX`] (`APPLIANCE_CLI_URL`, `APPLIANCE_CLI_API_KEY`, …), so one shell can
//! hold both; no top-level key may therefore be `cli` or start with `cli_`. The CLI's former
//! names (`APPLIANCE_URL`, …) are refused with the name to use instead.
//! `config.example.toml` lists every key with its default and is checked by a test.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

mod acme;
mod attestation;
mod billing;
mod http;
mod keyservice;
mod operator;
mod telemetry;
mod tls;

pub use acme::{AcmeChallenge, AcmeConfig};
pub use appliance_chain::config::ChainConfig;
pub use appliance_domain::settings::{InvalidSetting, SecretString};
pub use appliance_execution::config::ActionsConfig;
pub use appliance_store::config::{StoreConfig, StoreEngine};
pub use attestation::{AttestationConfig, QuoteProviderKind};
pub use billing::BillingConfig;
pub use http::{CorsOrigin, HttpConfig, MAX_CORS_MAX_AGE_SECS, RateLimitsConfig};
pub use keyservice::KeyserviceConfig;
pub use operator::OperatorConfig;
pub use telemetry::{
    LogConfig, LogFormat, MAX_TRACE_QUEUE_SPANS, MIN_METRICS_TOKEN_CHARS, MetricsConfig,
    TracesConfig,
};
pub use tls::{TlsConfig, TlsMode};

/// The prefix of environment overrides.
pub const ENV_PREFIX: &str = "APPLIANCE_";

/// Variables with [`ENV_PREFIX`] that belong to the repository's scripts and tests, not to
/// the configuration (the tool cache, CI's fuzzing time and reproducibility work
/// directory): skipped, so that setting one does not make every appliance started from
/// that shell refuse its configuration. Any other unknown `APPLIANCE_*` is still an error
/// (a misspelt override must not be ignored).
pub const NOT_CONFIGURATION: &[&str] = &[
    "APPLIANCE_TOOLS_DIR",
    "APPLIANCE_CI_FUZZ_SECONDS",
    "APPLIANCE_REPRODUCE_DIR",
];

/// The prefix of `appliance-cli`'s environment variables (`client/cli`): skipped, never
/// configuration.
pub const CLI_ENV_PREFIX: &str = "APPLIANCE_CLI_";

/// `appliance-cli`'s variables before it had [`CLI_ENV_PREFIX`], with their new names:
/// refused (they name no key) with the rename to make.
const FORMER_CLI_VARIABLES: [(&str, &str); 3] = [
    ("APPLIANCE_URL", "APPLIANCE_CLI_URL"),
    ("APPLIANCE_API_KEY", "APPLIANCE_CLI_API_KEY"),
    ("APPLIANCE_PROFILE", "APPLIANCE_CLI_PROFILE"),
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where the HTTPS API listens.
    pub listen: SocketAddr,
    /// Directory for the database and generated TLS material. Created if missing.
    pub data_dir: PathBuf,
    pub store: StoreConfig,
    pub tls: TlsConfig,
    pub acme: AcmeConfig,
    pub attestation: AttestationConfig,
    pub http: HttpConfig,
    pub keyservice: KeyserviceConfig,
    pub operator: OperatorConfig,
    pub actions: ActionsConfig,
    pub chain: ChainConfig,
    pub billing: BillingConfig,
    pub rate_limits: RateLimitsConfig,
    pub log: LogConfig,
    pub metrics: MetricsConfig,
    pub traces: TracesConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([0, 0, 0, 0], 8443)),
            data_dir: PathBuf::from("/var/lib/appliance"),
            store: StoreConfig::default(),
            tls: TlsConfig::default(),
            acme: AcmeConfig::default(),
            attestation: AttestationConfig::default(),
            http: HttpConfig::default(),
            keyservice: KeyserviceConfig::default(),
            operator: OperatorConfig::default(),
            actions: ActionsConfig::default(),
            chain: ChainConfig::default(),
            billing: BillingConfig::default(),
            rate_limits: RateLimitsConfig::default(),
            log: LogConfig::default(),
            metrics: MetricsConfig::default(),
            traces: TracesConfig::default(),
        }
    }
}

/// Keys the appliance once read and no longer does, with the reason: refused with that
/// reason rather than as an unknown key.
const RETIRED_KEYS: [(&str, &str, &str); 2] = [
    (
        "attestation",
        "dstack_socket",
        "the appliance no longer talks to the dstack guest agent; keyservice does (its --agent-socket)",
    ),
    (
        "attestation",
        "compose_file",
        "the app-compose.json behind simulated and configfs-tsm quotes is keyservice's --compose-file",
    ),
];

fn refuse_retired_keys(table: &toml::Table) -> Result<(), ConfigError> {
    for (section, key, why) in RETIRED_KEYS {
        if let Some(toml::Value::Table(t)) = table.get(section)
            && t.contains_key(key)
        {
            return Err(ConfigError::Invalid(format!(
                "{section}.{key} is retired: {why}"
            )));
        }
    }
    Ok(())
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("cannot read the config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the config file {path} is not valid TOML: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("environment variable {var} does not name a config key")]
    BadEnvKey { var: String },
    #[error(
        "environment variable {var} is appliance-cli's former name for {new}, not configuration: rename it {new} (the appliance skips every APPLIANCE_CLI_* variable)"
    )]
    FormerCliVariable { var: String, new: &'static str },
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

impl From<InvalidSetting> for ConfigError {
    fn from(e: InvalidSetting) -> Self {
        Self::Invalid(e.0)
    }
}

impl Config {
    /// The development configuration of `appliance dev`: a keyservice child on the dev
    /// platform, sealed to `compose_file`.
    pub fn dev(listen: SocketAddr, data_dir: PathBuf, compose_file: PathBuf) -> Self {
        let keyservice = KeyserviceConfig {
            socket: data_dir.join("keyservice.sock"),
            spawn: true,
            compose_file: Some(compose_file),
            ..KeyserviceConfig::default()
        };
        // The dev chain (anvil) mines a block per transaction and no others: waiting for
        // confirmations there would wait for the next write.
        let chain = ChainConfig {
            confirmations: 0,
            ..ChainConfig::default()
        };
        let attestation = AttestationConfig {
            provider: QuoteProviderKind::Simulated,
            ..AttestationConfig::default()
        };
        // Workers through a launcher child, as in the image (there under another uid).
        let actions = ActionsConfig {
            spawn_worker_launcher: true,
            ..ActionsConfig::default()
        };
        // Metrics on a free loopback port (printed at start): several dev appliances
        // (the tests run many at once) never compete for one port.
        let metrics = MetricsConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            ..MetricsConfig::default()
        };
        Self {
            listen,
            data_dir,
            keyservice,
            chain,
            attestation,
            actions,
            metrics,
            ..Self::default()
        }
    }

    /// Applies `APPLIANCE_*` overrides from `env` on top of this configuration (used by
    /// `appliance dev`, whose defaults are not a file).
    pub fn with_env(
        self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let table =
            toml::Table::try_from(&self).map_err(|e| ConfigError::Invalid(e.to_string()))?;
        Self::from_table(table, env)
    }

    /// Loads `path` (if given) and applies the process environment.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        Self::load_with_env(path, std::env::vars())
    }

    /// As `load`, with the environment given explicitly (for tests).
    pub fn load_with_env(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let table = match path {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_owned(),
                    source,
                })?;
                text.parse::<toml::Table>()
                    .map_err(|e| ConfigError::Syntax {
                        path: path.to_owned(),
                        message: e.to_string(),
                    })?
            }
            None => toml::Table::new(),
        };
        Self::from_table(table, env)
    }

    /// `table` with the `APPLIANCE_*` overrides of `env` applied, read and checked: the
    /// one path from keys to a configuration, for a file and for `appliance dev`'s
    /// defaults alike.
    fn from_table(
        mut table: toml::Table,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        apply_env(&mut table, env)?;
        refuse_retired_keys(&table)?;
        let config: Config = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError::Invalid(e.message().to_owned()))?;
        config.validate()?;
        Ok(config)
    }

    /// This configuration with its secrets replaced, for `appliance print-config`.
    pub fn redacted(&self) -> Self {
        let mut out = self.clone();
        if out.billing.stripe_secret_key.is_some() {
            out.billing.stripe_secret_key = Some(SecretString::new("<redacted>"));
        }
        if out.store.url.is_some() {
            out.store.url = Some(SecretString::new("<redacted>"));
        }
        if out.metrics.bearer_token.is_some() {
            out.metrics.bearer_token = Some(SecretString::new("<redacted>"));
        }
        // A chain's RPC URL often carries the provider's API key in its path or query.
        for url in out.actions.rpc.chains.values_mut() {
            *url = SecretString::new("<redacted>");
        }
        out
    }

    /// Checks every section (each owns its rules); what crosses sections is checked
    /// here.
    fn validate(&self) -> Result<(), ConfigError> {
        self.store.validate()?;
        self.tls.validate()?;
        self.acme.validate()?;
        self.keyservice.validate()?;
        self.http.validate()?;
        self.actions.validate()?;
        self.chain.validate()?;
        self.billing.validate()?;
        self.rate_limits.validate()?;
        self.metrics.validate()?;
        self.traces.validate()?;
        Ok(())
    }
}

/// Writes each `APPLIANCE_A__B=value` into `table` at `a.b`.
fn apply_env(
    table: &mut toml::Table,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<(), ConfigError> {
    let mut vars: Vec<(String, String)> = env
        .into_iter()
        .filter(|(k, _)| {
            k.starts_with(ENV_PREFIX)
                && !k.starts_with(CLI_ENV_PREFIX)
                && !NOT_CONFIGURATION.contains(&k.as_str())
        })
        .collect();
    vars.sort();
    for (var, raw) in vars {
        if let Some((_, new)) = FORMER_CLI_VARIABLES.iter().find(|(old, _)| *old == var) {
            return Err(ConfigError::FormerCliVariable { var, new });
        }
        let path: Vec<String> = var[ENV_PREFIX.len()..]
            .split("__")
            .map(str::to_ascii_lowercase)
            .collect();
        if path.iter().any(String::is_empty) {
            return Err(ConfigError::BadEnvKey { var });
        }
        let value = parse_env_value(&raw);
        let mut node = &mut *table;
        for key in &path[..path.len() - 1] {
            let entry = node
                .entry(key.clone())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            node = match entry {
                toml::Value::Table(t) => t,
                _ => return Err(ConfigError::BadEnvKey { var }),
            };
        }
        node.insert(path[path.len() - 1].clone(), value);
    }
    Ok(())
}

/// A TOML literal if the text is one (`42`, `true`, `["a"]`), else the text as a string.
fn parse_env_value(raw: &str) -> toml::Value {
    format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn example_file_lists_exactly_the_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.toml");
        let loaded = Config::load_with_env(Some(&path), env(&[])).unwrap();
        assert_eq!(loaded, Config::default());
    }

    #[test]
    fn the_scripts_variables_are_not_configuration_but_a_misspelt_override_is_refused() {
        let mut vars = env(&[("APPLIANCE_LISTEN", "127.0.0.1:9443")]);
        for name in NOT_CONFIGURATION {
            vars.push(((*name).to_owned(), "/somewhere".to_owned()));
        }
        let config = Config::load_with_env(None, vars).unwrap();
        assert_eq!(config.listen, SocketAddr::from(([127, 0, 0, 1], 9443)));

        let err =
            Config::load_with_env(None, env(&[("APPLIANCE_LISTN", "127.0.0.1:9443")])).unwrap_err();
        assert!(err.to_string().contains("unknown field `listn`"), "{err}");
    }

    #[test]
    fn the_clis_variables_are_skipped_and_its_former_names_refused_with_the_new_one() {
        // A shell set up for appliance-cli (client/cli) starts the appliance.
        let config = Config::load_with_env(
            None,
            env(&[
                ("APPLIANCE_LISTEN", "127.0.0.1:9443"),
                ("APPLIANCE_CLI_URL", "https://127.0.0.1:9443"),
                ("APPLIANCE_CLI_API_KEY", "a-key"),
                ("APPLIANCE_CLI_PROFILE", "dev"),
                ("APPLIANCE_CLI_CONFIG_DIR", "/somewhere"),
            ]),
        )
        .unwrap();
        assert_eq!(config.listen, SocketAddr::from(([127, 0, 0, 1], 9443)));
        // So no top-level key may be `cli` or start with `cli_` (`APPLIANCE_CLI_…` could
        // not set it).
        let table = toml::Table::try_from(Config::default()).unwrap();
        let shadowed: Vec<&String> = table
            .keys()
            .filter(|k| *k == "cli" || k.starts_with("cli_"))
            .collect();
        assert!(shadowed.is_empty(), "{shadowed:?}");

        for (old, new) in [
            ("APPLIANCE_URL", "APPLIANCE_CLI_URL"),
            ("APPLIANCE_API_KEY", "APPLIANCE_CLI_API_KEY"),
            ("APPLIANCE_PROFILE", "APPLIANCE_CLI_PROFILE"),
        ] {
            let err = Config::load_with_env(None, env(&[(old, "x")])).unwrap_err();
            assert!(
                err.to_string().contains(&format!("rename it {new}")),
                "{old}: {err}"
            );
        }
    }

    #[test]
    fn environment_overrides_file_and_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "listen = \"127.0.0.1:1\"\n[http]\nmax_body_bytes = 5\n",
        )
        .unwrap();
        let c = Config::load_with_env(
            Some(&path),
            env(&[
                ("APPLIANCE_LISTEN", "127.0.0.1:9"),
                ("APPLIANCE_DATA_DIR", "/tmp/x"),
                ("APPLIANCE_TLS__HOSTNAMES", "[\"a.example\"]"),
                ("APPLIANCE_LOG__FORMAT", "json"),
                ("OTHER", "ignored"),
            ]),
        )
        .unwrap();
        assert_eq!(c.listen, "127.0.0.1:9".parse().unwrap());
        assert_eq!(c.data_dir, PathBuf::from("/tmp/x"));
        assert_eq!(c.http.max_body_bytes, 5, "file value kept");
        assert_eq!(c.tls.hostnames, vec!["a.example".to_string()]);
        assert_eq!(c.log.format, LogFormat::Json);
    }

    #[test]
    fn proxy_protocol_balancers_are_parsed_and_checked() {
        assert!(
            Config::default().http.proxy_protocol_from.is_empty(),
            "off by default"
        );
        let c = Config::load_with_env(
            None,
            env(&[(
                "APPLIANCE_HTTP__PROXY_PROTOCOL_FROM",
                "[\"10.0.0.5\", \"10.1.0.0/24\"]",
            )]),
        )
        .unwrap();
        let balancers = &c.http.proxy_protocol_from;
        assert_eq!(balancers.len(), 2);
        assert!(balancers[1].contains("10.1.0.77".parse().unwrap()));
        assert!(!balancers[0].contains("10.0.0.6".parse().unwrap()));
        let bad = Config::load_with_env(
            None,
            env(&[("APPLIANCE_HTTP__PROXY_PROTOCOL_FROM", "[\"10.1.0.0/40\"]")]),
        );
        assert!(bad.is_err(), "a prefix longer than the address is refused");
    }

    #[test]
    fn cors_origins_are_read_from_the_environment_and_checked() {
        let c = Config::load_with_env(None, env(&[])).unwrap();
        assert!(c.http.cors_allowed_origins.is_empty(), "off by default");
        assert_eq!(c.http.cors_max_age_secs, 600);
        let c = Config::load_with_env(
            None,
            env(&[
                (
                    "APPLIANCE_HTTP__CORS_ALLOWED_ORIGINS",
                    "[\"https://app.example.com\", \"http://localhost:5173\"]",
                ),
                ("APPLIANCE_HTTP__CORS_MAX_AGE_SECS", "7200"),
            ]),
        )
        .unwrap();
        let origins: Vec<&str> = c
            .http
            .cors_allowed_origins
            .iter()
            .map(CorsOrigin::as_str)
            .collect();
        assert_eq!(
            origins,
            ["https://app.example.com", "http://localhost:5173"]
        );
        assert_eq!(c.http.cors_max_age_secs, 7200);
        // Printed and read back unchanged.
        let printed = toml::to_string(&c).unwrap();
        assert!(
            printed.contains("cors_allowed_origins = [\"https://app.example.com\""),
            "{printed}"
        );

        for (value, says) in [
            ("[\"*\"]", "(any origin) is not accepted"),
            (
                "[\"https://app.example.com\", \"*\"]",
                "(any origin) is not accepted",
            ),
            (
                "[\"https://app.example.com/\"]",
                "write \"https://app.example.com\"",
            ),
            ("[\"app.example.com\"]", "is not a web origin"),
        ] {
            let err = Config::load_with_env(
                None,
                env(&[("APPLIANCE_HTTP__CORS_ALLOWED_ORIGINS", value)]),
            )
            .unwrap_err();
            assert!(
                matches!(err, ConfigError::Invalid(_)) && err.to_string().contains(says),
                "{value}: {err}"
            );
        }
        let err =
            Config::load_with_env(None, env(&[("APPLIANCE_HTTP__CORS_MAX_AGE_SECS", "86401")]))
                .unwrap_err();
        assert!(err.to_string().contains("http.cors_max_age_secs"), "{err}");
    }

    #[test]
    fn dev_defaults_take_environment_overrides() {
        let dev = Config::dev(
            "127.0.0.1:0".parse().unwrap(),
            "/tmp/d".into(),
            "/tmp/d/c.json".into(),
        );
        let c = dev
            .clone()
            .with_env(env(&[("APPLIANCE_ACTIONS__MAX_CODE_BYTES", "7")]))
            .unwrap();
        assert_eq!(c.actions.max_code_bytes, 7);
        assert!(c.keyservice.spawn, "dev settings kept");
        assert!(
            c.actions.spawn_worker_launcher,
            "dev runs its workers through a launcher child"
        );
        assert!(!Config::default().actions.spawn_worker_launcher);
        assert_eq!(c.keyservice.socket, dev.keyservice.socket);
        assert!(dev.with_env(env(&[("APPLIANCE_NOPE", "1")])).is_err());
    }

    #[test]
    fn unknown_keys_are_errors() {
        let err = Config::load_with_env(None, env(&[("APPLIANCE_LISTN", "x")])).unwrap_err();
        assert!(err.to_string().contains("listn"), "{err}");
        let err = Config::load_with_env(None, env(&[("APPLIANCE_HTTP__", "1")])).unwrap_err();
        assert!(matches!(err, ConfigError::BadEnvKey { .. }));
    }

    #[test]
    fn retired_attestation_keys_are_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "[attestation]\nprovider = \"dstack\"\ndstack_socket = \"/var/run/dstack.sock\"\n",
        )
        .unwrap();
        let err = Config::load_with_env(Some(&path), env(&[])).unwrap_err();
        assert!(
            err.to_string()
                .contains("attestation.dstack_socket is retired")
                && err.to_string().contains("keyservice does"),
            "{err}"
        );
        let err = Config::load_with_env(
            None,
            env(&[("APPLIANCE_ATTESTATION__COMPOSE_FILE", "/x.json")]),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("attestation.compose_file is retired"),
            "{err}"
        );
        // Positive control: the keys keyservice reads from this file still load.
        std::fs::write(
            &path,
            "[attestation]\nprovider = \"tsm\"\ntsm_dir = \"/t\"\n",
        )
        .unwrap();
        let c = Config::load_with_env(Some(&path), env(&[])).unwrap();
        assert_eq!(c.attestation.provider, QuoteProviderKind::Tsm);
    }

    #[test]
    fn acme_section_from_environment() {
        let c = Config::load_with_env(
            None,
            env(&[
                (
                    "APPLIANCE_ACME__DIRECTORY_URL",
                    "https://127.0.0.1:14000/dir",
                ),
                ("APPLIANCE_ACME__DOMAINS", "[\"a.test\"]"),
                ("APPLIANCE_ACME__CHALLENGE", "http-01"),
                ("APPLIANCE_ACME__HTTP01_LISTEN", "127.0.0.1:5002"),
            ]),
        )
        .unwrap();
        assert!(c.acme.enabled());
        assert_eq!(c.acme.challenge, AcmeChallenge::Http01);
        assert!((c.acme.renew_at - 2.0 / 3.0).abs() < 1e-12);
        let err = Config::load_with_env(
            None,
            env(&[("APPLIANCE_ACME__DIRECTORY_URL", "https://x/dir")]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("acme.domains"), "{err}");
        let err = Config::load_with_env(
            None,
            env(&[
                ("APPLIANCE_ACME__DIRECTORY_URL", "https://x/dir"),
                ("APPLIANCE_ACME__DOMAINS", "[\"a.test\"]"),
                ("APPLIANCE_ACME__RENEW_AT", "1.5"),
            ]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("renew_at"), "{err}");
    }

    #[test]
    fn worker_retirement_settings_are_checked() {
        let c = Config::load_with_env(None, env(&[])).unwrap();
        assert_eq!(c.actions.worker_max_jobs, 1000);
        assert_eq!(
            c.actions.worker_retire_heap_bytes(),
            32 << 20,
            "a quarter of 128 MiB"
        );
        let c = Config::load_with_env(
            None,
            env(&[
                ("APPLIANCE_ACTIONS__WORKER_MAX_JOBS", "1"),
                ("APPLIANCE_ACTIONS__WORKER_RETIRE_HEAP_MB", "127"),
            ]),
        )
        .unwrap();
        assert_eq!(c.actions.worker_max_jobs, 1);
        assert_eq!(c.actions.worker_retire_heap_bytes(), 127 << 20);

        let err = Config::load_with_env(None, env(&[("APPLIANCE_ACTIONS__WORKER_MAX_JOBS", "0")]))
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("actions.worker_max_jobs must be at least 1"),
            "{err}"
        );
        assert_eq!(
            Config::default().actions.worker_bound_idle_ms,
            30_000,
            "a bound worker waits 30 s for its account"
        );
        let err = Config::load_with_env(
            None,
            env(&[("APPLIANCE_ACTIONS__WORKER_BOUND_IDLE_MS", "0")]),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("actions.worker_bound_idle_ms must be at least 1"),
            "{err}"
        );
        for (heap, limit) in [("128", "128"), ("200", "128"), ("64", "64")] {
            let err = Config::load_with_env(
                None,
                env(&[
                    ("APPLIANCE_ACTIONS__WORKER_RETIRE_HEAP_MB", heap),
                    ("APPLIANCE_ACTIONS__MEMORY_LIMIT_MB", limit),
                ]),
            )
            .unwrap_err();
            assert!(
                err.to_string().contains(&format!(
                    "actions.worker_retire_heap_mb ({heap}) must be below actions.memory_limit_mb ({limit})"
                )),
                "{err}"
            );
        }
        // The default threshold follows the memory limit, so lowering the limit alone is
        // never refused.
        let c = Config::load_with_env(None, env(&[("APPLIANCE_ACTIONS__MEMORY_LIMIT_MB", "32")]))
            .unwrap();
        assert_eq!(c.actions.worker_retire_heap_bytes(), 8 << 20);
    }

    #[test]
    fn a_metrics_listener_off_loopback_needs_a_token() {
        let c = Config::load_with_env(None, env(&[])).unwrap();
        assert_eq!(c.metrics.listen, "127.0.0.1:9464".parse().unwrap());
        assert!(c.metrics.enabled && c.metrics.bearer_token.is_none());
        for public in ["0.0.0.0:9464", "[::]:9464", "192.0.2.7:9464"] {
            let err = Config::load_with_env(None, env(&[("APPLIANCE_METRICS__LISTEN", public)]))
                .unwrap_err();
            assert!(err.to_string().contains("metrics.bearer_token"), "{err}");
        }
        let token = "k".repeat(MIN_METRICS_TOKEN_CHARS);
        let c = Config::load_with_env(
            None,
            env(&[
                ("APPLIANCE_METRICS__LISTEN", "0.0.0.0:9464"),
                ("APPLIANCE_METRICS__BEARER_TOKEN", &token),
            ]),
        )
        .unwrap();
        assert_eq!(
            c.metrics.bearer_token,
            Some(SecretString::new(token.clone()))
        );
        let printed = toml::to_string(&c.redacted()).unwrap();
        assert!(!printed.contains(&token), "{printed}");
        let err = Config::load_with_env(None, env(&[("APPLIANCE_METRICS__BEARER_TOKEN", "short")]))
            .unwrap_err();
        assert!(err.to_string().contains("at least 32"), "{err}");
        // Loopback in any spelling is loopback; a disabled endpoint listens nowhere.
        for ok in [
            vec![("APPLIANCE_METRICS__LISTEN", "[::1]:9464")],
            vec![("APPLIANCE_METRICS__LISTEN", "[::ffff:127.0.0.1]:9464")],
            vec![
                ("APPLIANCE_METRICS__LISTEN", "0.0.0.0:9464"),
                ("APPLIANCE_METRICS__ENABLED", "false"),
            ],
        ] {
            Config::load_with_env(None, env(&ok)).unwrap();
        }
        let dev = Config::dev(
            "127.0.0.1:0".parse().unwrap(),
            "/tmp/d".into(),
            "/tmp/d/c.json".into(),
        );
        assert_eq!(dev.metrics.listen.port(), 0, "dev picks a free port");
    }

    #[test]
    fn print_config_hides_the_rpc_urls_of_actions_chains() {
        let url = "https://rpc.example.com/v2/secret-provider-key";
        let c = Config::load_with_env(None, env(&[("APPLIANCE_ACTIONS__RPC__CHAINS__8453", url)]))
            .unwrap();
        assert_eq!(c.actions.rpc.chains.len(), 1);
        let printed = toml::to_string(&c.redacted()).unwrap();
        assert!(!printed.contains("secret-provider-key"), "{printed}");
        assert!(
            printed.contains("8453"),
            "the chain stays listed: {printed}"
        );
    }

    #[test]
    fn trace_settings_are_checked() {
        let c = Config::load_with_env(None, env(&[])).unwrap();
        assert_eq!(c.traces.traces_url(), None, "off by default");
        let c = Config::load_with_env(
            None,
            env(&[("APPLIANCE_TRACES__ENDPOINT", "http://127.0.0.1:4318/")]),
        )
        .unwrap();
        assert_eq!(
            c.traces.traces_url().as_deref(),
            Some("http://127.0.0.1:4318/v1/traces")
        );
        let c = Config::load_with_env(
            None,
            env(&[(
                "APPLIANCE_TRACES__ENDPOINT",
                "https://otel.example/v1/traces",
            )]),
        )
        .unwrap();
        assert_eq!(
            c.traces.traces_url().as_deref(),
            Some("https://otel.example/v1/traces")
        );
        for (key, value, says) in [
            ("APPLIANCE_TRACES__ENDPOINT", "ftp://x", "traces.endpoint"),
            (
                "APPLIANCE_TRACES__ENDPOINT",
                "localhost:4318",
                "traces.endpoint",
            ),
            ("APPLIANCE_TRACES__SAMPLE_RATIO", "1.5", "sample_ratio"),
            ("APPLIANCE_TRACES__MAX_QUEUE_SPANS", "0", "max_queue_spans"),
            (
                "APPLIANCE_TRACES__MAX_QUEUE_SPANS",
                "10000000",
                "max_queue_spans",
            ),
            (
                "APPLIANCE_TRACES__MAX_BATCH_SPANS",
                "4096",
                "max_batch_spans",
            ),
            (
                "APPLIANCE_TRACES__EXPORT_TIMEOUT_MS",
                "0",
                "export_timeout_ms",
            ),
        ] {
            let err = Config::load_with_env(None, env(&[(key, value)])).unwrap_err();
            assert!(err.to_string().contains(says), "{key}={value}: {err}");
        }
    }

    #[test]
    fn files_mode_needs_paths() {
        let err =
            Config::load_with_env(None, env(&[("APPLIANCE_TLS__MODE", "files")])).unwrap_err();
        assert!(err.to_string().contains("cert_file"), "{err}");
    }
}
