//! The composition root: the one place that builds the appliance from its parts, in
//! the order each needs the others. It opens the store, binds the ports, starts (or
//! reaches) keyservice and adopts the shared root, starts the worker pool, TLS, ACME,
//! the evidence files and the chain followers, composes the state handlers reach, and
//! serves. Every subsystem gets its configuration section here, and the one metrics
//! registry (`telemetry::metrics::Metrics`, made by `main` so that the trace exporter
//! counts into it too) is handed from here to everything that records.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::config::{Config, TlsMode};
use crate::store::Store;
use crate::telemetry::metrics::Metrics;
use crate::{
    acme, api, attest, billing, chain, config, dev, execution, http, keyservice_client,
    metrics_listener, server, shared_root, state, store, telemetry, tls,
};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    #[error("cannot create the data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("cannot start keyservice ({binary}): {source}")]
    KeyserviceSpawn {
        binary: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("keyservice did not become ready at {socket}: {reason}")]
    KeyserviceNotReady { socket: PathBuf, reason: String },
    #[error("the shared root: {0}")]
    Root(#[from] shared_root::RootError),
    #[error("settlement chain: {0}")]
    Chain(String),
    #[error("cannot start the action runtime: {0}")]
    Runtime(#[from] execution::RuntimeStartError),
    #[error("cannot start the action runtime: {0}")]
    WorkerLauncher(#[from] dev::launcher_child::LauncherChildError),
    #[error("billing: {0}")]
    Billing(#[from] billing::stripe::StripeError),
    #[error(transparent)]
    Acme(#[from] acme::AcmeError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot serve metrics on {addr} (metrics.listen; choose another address, or set metrics.enabled = false): {source}"
    )]
    MetricsBind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// A running appliance.
pub struct Running {
    /// The address actually bound (the port is chosen by the OS for `:0`).
    pub local_addr: SocketAddr,
    /// Where the self-signed certificate was written, in that mode.
    pub self_signed_pem: Option<PathBuf>,
    /// Swaps the served certificate at run time.
    pub certs: Arc<tls::CertResolver>,
    /// The ACME task (stopped on drop), when an ACME directory is configured.
    pub acme: Option<acme::AcmeService>,
    /// Rebuilds the evidence files when the served certificate changes.
    evidence_task: JoinHandle<()>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
    supervisor: Option<dev::keyservice_child::Supervisor>,
    /// The development worker launcher child.
    launcher: Option<dev::launcher_child::Supervisor>,
    /// The chain relayer and indexer (stopped on drop).
    _followers: Option<chain::Followers>,
    /// `appliance dev`'s local chain (anvil).
    dev_chain: Option<dev::chain::DevChain>,
    /// Hands the shared root back to a keyservice that restarted (`shared_root::keep`).
    _root_keeper: AbortOnDrop,
    /// Where the metrics endpoint listens (`GET /metrics`), when enabled.
    pub metrics_addr: Option<SocketAddr>,
    /// The metrics endpoint's task.
    _metrics: Option<AbortOnDrop>,
}

/// A task aborted when its handle is dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Running {
    /// The JSON-RPC URL of `appliance dev`'s local chain, if it runs one.
    pub fn dev_rpc_url(&self) -> Option<&str> {
        self.dev_chain.as_ref().map(|c| c.rpc_url.as_str())
    }

    /// The base URL clients use.
    pub fn base_url(&self) -> String {
        let ip = self.local_addr.ip();
        let host = if ip.is_unspecified() {
            "127.0.0.1".to_owned()
        } else {
            ip.to_string()
        };
        let host = if self.local_addr.is_ipv6() && !ip.is_unspecified() {
            format!("[{host}]")
        } else {
            host
        };
        format!("https://{host}:{}", self.local_addr.port())
    }

    /// Stops accepting, lets in-flight requests finish, and returns when done.
    pub async fn shutdown(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
        self.evidence_task.abort();
        drop(self._followers);
        if let Some(dev_chain) = self.dev_chain {
            dev_chain.shutdown().await;
        }
        if let Some(launcher) = self.launcher {
            launcher.shutdown().await;
        }
        if let Some(supervisor) = self.supervisor {
            supervisor.shutdown().await;
        }
    }

    /// Resolves when the server stops by itself.
    pub async fn wait(&mut self) {
        let _ = (&mut self.task).await;
    }
}

/// Opens the store, sets up TLS, binds, and starts serving; every event is counted in
/// `metrics` (the same registry the trace exporter was given, `telemetry::traces`).
pub async fn start(config: Config, metrics: Arc<Metrics>) -> Result<Running, StartError> {
    start_with(config, None, metrics).await
}

/// As [`start`], for `appliance dev`: with `dev_anvil`, also runs that anvil as a
/// supervised local chain, deploys the contracts to it (once) and mirrors there
/// (see [`chain::dev`]).
pub async fn start_dev(
    config: Config,
    dev_anvil: Option<PathBuf>,
    metrics: Arc<Metrics>,
) -> Result<Running, StartError> {
    start_with(config, dev_anvil, metrics).await
}

/// What a spawned keyservice is told about the chain: the app id (`attestation.app_id`,
/// else the governance contract) and the `AccountConfig` contracts its payers may call.
fn keyservice_chain_args(config: &Config) -> (Option<String>, Vec<String>) {
    let app_id = config
        .attestation
        .app_id
        .clone()
        .or_else(|| config.chain.governance_address.map(|a| a.to_string()));
    let account_configs = config
        .chain
        .account_config_address
        .iter()
        .map(|a| a.to_string())
        .collect();
    (app_id, account_configs)
}

async fn start_with(
    mut config: Config,
    dev_anvil: Option<PathBuf>,
    metrics: Arc<Metrics>,
) -> Result<Running, StartError> {
    std::fs::create_dir_all(&config.data_dir).map_err(|source| StartError::DataDir {
        path: config.data_dir.clone(),
        source,
    })?;
    let store = open_store(&config).await?;
    store.set_telemetry(Arc::new(telemetry::StoreTelemetry(Arc::clone(&metrics))));
    // The ports first: a port that is taken is the commonest misconfiguration, and is
    // reported before anything slower starts. Nothing is accepted until `serve`.
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| StartError::Bind {
            addr: config.listen,
            source,
        })?;
    let local_addr = listener.local_addr().map_err(|source| StartError::Bind {
        addr: config.listen,
        source,
    })?;
    let metrics_listener = bind_metrics(&config.metrics).await?;
    let (keys, supervisor) = start_keyservice(&config, &metrics).await?;
    let start_wait = Duration::from_millis(config.keyservice.start_wait_ms);
    // One root for every replica (`shared_root`): adopted (or made) before anything
    // asks keyservice for a key, and the store's row key with it.
    let mut root_id = shared_root::establish_waiting(&store, &keys, start_wait).await?;
    let told = keyservice_chain_args(&config);
    let dev_chain = match dev_anvil {
        Some(anvil) => Some(
            dev::chain::start(&mut config.chain, &config.data_dir, &keys, anvil)
                .await
                .map_err(|e| StartError::Chain(e.to_string()))?,
        ),
        None => None,
    };
    // Actions reach the dev chain through the appliance, by its id or its URL, although
    // it is on loopback: it goes on `[actions.rpc]`'s list (unless that id is there).
    if let Some(chain) = &dev_chain {
        config
            .actions
            .rpc
            .chains
            .entry(config.chain.chain_id.to_string())
            .or_insert_with(|| crate::config::SecretString::new(chain.rpc_url.clone()));
    }
    // The dev chain has just deployed (or found) the contracts: a spawned keyservice that
    // was started without them is restarted, so that `/info` names the governance
    // contract as the app id and the payers may call this AccountConfig.
    let (keys, supervisor) = match supervisor {
        Some(running) if dev_chain.is_some() && keyservice_chain_args(&config) != told => {
            tracing::info!("restarting the dev keyservice with the dev chain's contracts");
            running.shutdown().await;
            let (keys, supervisor) = start_keyservice(&config, &metrics).await?;
            // The restarted keyservice waits for the shared root once more.
            root_id = shared_root::establish_waiting(&store, &keys, start_wait).await?;
            (keys, supervisor)
        }
        other => (keys, other),
    };
    tracing::info!(%root_id, engine = %store.engine(), "keyservice holds the app's root");
    let root_keeper = tokio::spawn(shared_root::keep(store.clone(), keys.clone()));
    let worker_cwd = config.data_dir.join("worker-cwd");
    std::fs::create_dir_all(&worker_cwd).map_err(|source| StartError::DataDir {
        path: worker_cwd.clone(),
        source,
    })?;
    let worker_binary = config
        .actions
        .worker_binary
        .clone()
        .unwrap_or_else(execution::default_worker_binary);
    let launcher = start_worker_launcher(&mut config, &worker_binary, &worker_cwd).await?;
    let executor = execution::Executor::start(
        &config.actions,
        worker_binary,
        worker_cwd,
        Arc::clone(&metrics),
    )?;

    let (certified, self_signed_pem) = match config.tls.mode {
        TlsMode::SelfSigned => {
            // The key is keyservice's: the front end only ever asks it to sign.
            let key = tls::KeyserviceKey::load(keys.client(), tls::SELF_SIGNED_KEY).await?;
            let hostnames = config.tls.hostnames.clone();
            let (key, pem) =
                tokio::task::spawn_blocking(move || tls::self_signed(&hostnames, &key))
                    .await
                    .map_err(|e| tls::TlsError::Generate(format!("signing task: {e}")))??;
            let path = config.data_dir.join("tls").join("self-signed.pem");
            tls::write_public_pem(&path, &pem)?;
            (key, Some(path))
        }
        TlsMode::Files => {
            // validate() guarantees both paths are present in this mode.
            let (Some(cert), Some(key)) = (&config.tls.cert_file, &config.tls.key_file) else {
                return Err(tls::TlsError::Unusable(
                    "tls.cert_file and tls.key_file are required".into(),
                )
                .into());
            };
            (tls::from_pem_files(cert, key)?, None)
        }
    };
    let certs = tls::CertResolver::new(certified);
    let tls_config = tls::server_config(Arc::clone(&certs))?;

    let (acme, acme_leadership) = match start_acme(&config, &store, &keys, &certs).await? {
        Some((service, leadership)) => (Some(service), leadership),
        None => (None, None),
    };
    let attestation = attest::Attestation::new(
        keys.clone(),
        Duration::from_secs(config.attestation.quote_refresh_secs),
    )
    .with_sbom(attest::read_sbom(std::path::Path::new(
        attest::SBOM_IMAGE_PATH,
    )));
    let evidence_task = attestation.follow(match &acme {
        Some(acme) => acme.handle.subscribe(),
        None => {
            // A self-signed or file certificate: evidence for it, built once.
            let chain_pem = self_signed_pem
                .as_ref()
                .or(config.tls.cert_file.as_ref())
                .and_then(|path| std::fs::read_to_string(path).ok())
                .unwrap_or_default();
            let cert = acme::IssuedCert {
                domains: config.tls.hostnames.clone(),
                chain_pem,
                account_uri: String::new(),
                next_key_sha256: None,
                key_index: match config.tls.mode {
                    TlsMode::SelfSigned => Some(tls::SELF_SIGNED_KEY),
                    TlsMode::Files => None,
                },
            };
            tokio::sync::watch::channel(Some(Arc::new(cert))).1
        }
    });
    let followers = start_chain_followers(&config, &store, &keys, &metrics)?;
    let limits = config.http.clone();
    let billing = Arc::new(billing::Billing::new(&config.billing)?);
    let state = state::AppState::new(state::Services {
        singletons: followers
            .as_ref()
            .map(|f| f.leadership.clone())
            .unwrap_or_default()
            .into_iter()
            .chain(acme_leadership)
            .collect(),
        store,
        keys,
        executor,
        billing,
        operators: operator_auth::Verifier::new(
            config.operator.addresses.iter().map(|a| a.0.0).collect(),
        ),
        config: Arc::new(config),
        acme: acme.as_ref().map(|a| a.handle.clone()),
        attestation,
        metrics: Arc::clone(&metrics),
    });
    let (metrics_addr, metrics_task) = match metrics_listener {
        Some((listener, addr)) => {
            let sources = metrics_listener::Sources {
                state: state.clone(),
                certs: Arc::clone(&certs),
            };
            let token = state.config.metrics.bearer_token.clone();
            let task = tokio::spawn(metrics_listener::serve(listener, token, sources));
            tracing::info!(%addr, "serving metrics at /metrics");
            (Some(addr), Some(AbortOnDrop(task)))
        }
        None => (None, None),
    };
    let app = http::app(state, api::routes());
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server::serve(
        listener,
        tls_config,
        app,
        limits,
        metrics,
        async move {
            let _ = stopped.await;
        },
    ));
    tracing::info!(%local_addr, "serving HTTPS");
    Ok(Running {
        local_addr,
        self_signed_pem,
        certs,
        acme,
        evidence_task,
        stop,
        task,
        supervisor,
        launcher,
        _followers: followers,
        _root_keeper: AbortOnDrop(root_keeper),
        dev_chain,
        metrics_addr,
        _metrics: metrics_task,
    })
}

/// Binds the metrics listener when the endpoint is enabled (a failure to bind stops the
/// start, like the API's own listener: a scraper must not silently reach nothing).
async fn bind_metrics(
    config: &config::MetricsConfig,
) -> Result<Option<(TcpListener, SocketAddr)>, StartError> {
    if !config.enabled {
        return Ok(None);
    }
    let addr = config.listen;
    let bind_err = |source| StartError::MetricsBind { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(bind_err)?;
    let local = listener.local_addr().map_err(bind_err)?;
    Ok(Some((listener, local)))
}

/// The store the configuration names: SQLite in the data directory, or PostgreSQL.
async fn open_store(config: &Config) -> Result<Store, StartError> {
    match config.store.pg_options() {
        Some(options) => {
            tracing::info!(database = %store::postgres_target(&options.url), "store: PostgreSQL");
            Ok(Store::open_postgres(options).await?)
        }
        None => Ok(Store::open(
            &config.data_dir.join(store::config::SQLITE_FILE),
        )?),
    }
}

/// Starts the ACME task (and the HTTP-01 listener) when a directory is configured; the
/// certificate set up above is served until the first issuance.
async fn start_acme(
    config: &Config,
    store: &Store,
    keys: &keyservice_client::Keys,
    certs: &Arc<tls::CertResolver>,
) -> Result<Option<(acme::AcmeService, Option<store::Leadership>)>, StartError> {
    if !config.acme.enabled() {
        return Ok(None);
    }
    // Replicas share one account and one certificate (`acme`: one of them orders).
    let shared = match store.engine() {
        store::Engine::Postgres => Some(acme::Shared {
            store: store.clone(),
            leadership: store.leadership("acme")?,
        }),
        store::Engine::Sqlite => None,
    };
    let leadership = shared.as_ref().map(|s| s.leadership.clone());
    let http01 = match config.acme.challenge {
        config::AcmeChallenge::Http01 => {
            let addr = config.acme.http01_listen;
            Some(
                TcpListener::bind(addr)
                    .await
                    .map_err(|source| StartError::Bind { addr, source })?,
            )
        }
        config::AcmeChallenge::TlsAlpn01 => None,
    };
    let service = acme::AcmeService::start(
        config.acme.clone(),
        &config.data_dir,
        keys.clone(),
        Arc::clone(certs),
        http01,
        shared,
    )?;
    Ok(Some((service, leadership)))
}

/// Starts the chain relayer and indexer when a chain and the `AccountConfig` contract are
/// configured; otherwise API-mode writes wait in the outbox.
fn start_chain_followers(
    config: &Config,
    store: &Store,
    keys: &keyservice_client::Keys,
    metrics: &Arc<Metrics>,
) -> Result<Option<chain::Followers>, StartError> {
    let chain = &config.chain;
    let (Some(rpc_url), Some(contract)) = (&chain.rpc_url, chain.account_config_address) else {
        tracing::warn!("no settlement chain configured: management writes wait in the outbox");
        return Ok(None);
    };
    let client = chain::ChainClient::new(
        rpc_url,
        chain.chain_id,
        keys.client().clone(),
        Duration::from_millis(chain.request_timeout_ms),
    )
    .map_err(|e| StartError::Chain(e.to_string()))?;
    Ok(Some(chain::spawn_followers(
        store.clone(),
        client,
        contract,
        chain.follower_settings(),
        Arc::new(telemetry::ChainTelemetry(Arc::clone(metrics))),
    )?))
}

/// Development: starts `worker-launcher` as a supervised child when
/// `actions.spawn_worker_launcher` is set, and points `actions.worker_launcher_socket` at
/// it, so workers come through the launcher protocol as in the image.
async fn start_worker_launcher(
    config: &mut Config,
    worker_binary: &std::path::Path,
    worker_cwd: &std::path::Path,
) -> Result<Option<dev::launcher_child::Supervisor>, StartError> {
    let actions = &mut config.actions;
    if !actions.spawn_worker_launcher {
        return Ok(None);
    }
    let socket = actions
        .worker_launcher_socket
        .clone()
        .unwrap_or_else(|| config.data_dir.join("worker-launcher.sock"));
    let spec = dev::launcher_child::LauncherSpec {
        binary: actions
            .worker_launcher_binary
            .clone()
            .unwrap_or_else(dev::launcher_child::default_binary),
        socket: socket.clone(),
        worker_binary: worker_binary.to_owned(),
        worker_cwd: worker_cwd.to_owned(),
        memory_limit_mb: actions.memory_limit_mb,
        // Room for the pool and the replacements it starts while killed workers are
        // still being reaped.
        max_workers: execution::pool_size(actions) * 2 + 4,
    };
    let supervisor = dev::launcher_child::Supervisor::start(spec).await?;
    actions.worker_launcher_socket = Some(socket);
    Ok(Some(supervisor))
}

/// Connects to keyservice, first starting it as a supervised child if so configured.
/// A keyservice that runs on its own may come up after the appliance: until then, key
/// operations answer 503.
pub(crate) async fn start_keyservice(
    config: &Config,
    metrics: &Arc<Metrics>,
) -> Result<
    (
        keyservice_client::Keys,
        Option<dev::keyservice_child::Supervisor>,
    ),
    StartError,
> {
    let ks = &config.keyservice;
    let keys = keyservice_client::Keys::new(
        &ks.socket,
        Duration::from_millis(ks.request_timeout_ms),
        Arc::clone(metrics),
    );
    if !ks.spawn {
        if let Err(err) = keys.check().await {
            tracing::warn!(error = %err, "keyservice is not reachable yet; waiting for it (keyservice.start_wait_ms)");
        }
        return Ok((keys, None));
    }
    let binary = ks
        .binary
        .clone()
        .or_else(dev::keyservice_child::default_binary)
        .unwrap_or_else(|| PathBuf::from("keyservice"));
    let compose_file = ks
        .compose_file
        .clone()
        .unwrap_or_else(|| config.data_dir.join("app-compose.json"));
    dev::keyservice_child::ensure_dev_compose(&compose_file).map_err(|source| {
        StartError::DataDir {
            path: compose_file.clone(),
            source,
        }
    })?;
    let (app_id, account_configs) = keyservice_chain_args(config);
    let spec = dev::keyservice_child::ChildSpec {
        binary: binary.clone(),
        socket: ks.socket.clone(),
        state_dir: ks
            .state_dir
            .clone()
            .unwrap_or_else(|| config.data_dir.join("keyservice")),
        compose_file,
        chain_id: config.chain.chain_id,
        quote_provider: config.attestation.provider.as_str(),
        tsm_dir: config.attestation.tsm_dir.clone(),
        app_id,
        account_configs,
        operators: config
            .operator
            .addresses
            .iter()
            .map(ToString::to_string)
            .collect(),
        governance: config.chain.governance_address.map(|a| a.to_string()),
        governance_rpc: config.chain.rpc_url.clone(),
        shared_root: config.store.engine == config::StoreEngine::Postgres,
        dev_secret: ks.dev_secret.clone(),
    };
    // A keyservice still answering on this socket is an orphan of an appliance that
    // died a moment ago (it stops within a fraction of a second of noticing) or belongs
    // to another process: the new child could not bind, and the old one would be taken
    // for it. Wait for it to go, briefly.
    let orphan_deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while keys.check().await.is_ok() {
        if tokio::time::Instant::now() >= orphan_deadline {
            return Err(StartError::KeyserviceNotReady {
                socket: ks.socket.clone(),
                reason: "another keyservice already serves this socket and does not stop \
                         (stop it, or give this appliance its own keyservice.socket)"
                    .into(),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let supervisor = dev::keyservice_child::Supervisor::start(spec)
        .map_err(|source| StartError::KeyserviceSpawn { binary, source })?;
    if let Err(err) = dev::supervise::wait_ready(Duration::from_secs(20), || keys.check()).await {
        supervisor.shutdown().await;
        return Err(StartError::KeyserviceNotReady {
            socket: ks.socket.clone(),
            reason: err.to_string(),
        });
    }
    Ok((keys, Some(supervisor)))
}
