//! `keyservice` — run the key process, or reseal / inspect its sealed root.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand, ValueEnum};
use keyservice::attest::{self, ProviderChoice, QuoteConfig, Quoter};
use keyservice::operator::{self, OperatorDesk, OperatorSettingsError};
use keyservice::ops::OpError;
use keyservice::ops::{KeyOps, MAX_API_PAYERS};
use keyservice::payer_policy::{self, PayerPolicyConfig};
use keyservice::platform::dev::DevPlatform;
use keyservice::platform::dstack::{DEFAULT_AGENT_SOCKET, DstackPlatform};
use keyservice::platform::{Platform, PlatformError};
use keyservice::policy::{AllowListFile, ComposeHashPolicy, GovernanceContract, PolicyError};
use keyservice::root::{self, SEALED_FILE_NAME};
use keyservice::sealing::{SealError, SealedRoot};
use keyservice::secret::{RootSecret, SealingKey};
use keyservice::server::{self, ServerConfig};
use keyservice::service::{BuildOps, Service};
use keyservice_api::{ComposeHash, PROTOCOL_VERSION, ServiceStatus};

#[derive(Parser)]
#[command(
    name = "keyservice",
    version,
    about = "The isolated key process of the appliance"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Unseal (or, on the very first run, create) the root and serve the socket; or, with
    /// --shared-root, serve and wait for the appliance to hand over the shared root.
    Run(RunArgs),
    /// Rewrap the root for another compose hash, if the policy allows it.
    Reseal(ResealArgs),
    /// Print the compose hash the platform measures for this instance.
    ComposeHash(PlatformArgs),
    /// Print the header of a sealed-root file (format version, compose hash).
    Inspect {
        /// The sealed-root file.
        file: PathBuf,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum PlatformChoice {
    /// Local dev secret file; NOT confidential.
    Dev,
    /// dstack guest agent.
    Dstack,
}

#[derive(Args)]
struct PlatformArgs {
    /// Where the sealing key comes from.
    #[arg(long, value_enum, env = "KEYSERVICE_PLATFORM")]
    platform: PlatformChoice,
    /// dev: the 32-byte dev secret (created 0600 if missing). Default: STATE_DIR/dev-secret.
    #[arg(long, env = "KEYSERVICE_DEV_SECRET")]
    dev_secret: Option<PathBuf>,
    /// dev: the compose file whose SHA-256 is the compose hash.
    #[arg(long, env = "KEYSERVICE_COMPOSE_FILE")]
    compose_file: Option<PathBuf>,
    /// dstack: the guest agent's socket.
    #[arg(long, env = "KEYSERVICE_AGENT_SOCKET", default_value = DEFAULT_AGENT_SOCKET)]
    agent_socket: PathBuf,
}

#[derive(Args)]
struct RunArgs {
    /// The Unix socket to serve (created 0600; a stale one is replaced).
    #[arg(long, env = "KEYSERVICE_SOCKET")]
    socket: PathBuf,
    /// Directory of the sealed root (created 0700 if missing).
    #[arg(long, env = "KEYSERVICE_STATE_DIR")]
    state_dir: PathBuf,
    /// Use exactly this sealed-root file instead of looking in the state directory.
    #[arg(long, conflicts_with = "shared_root")]
    sealed_file: Option<PathBuf>,
    /// Replicas of one app sharing one root: look for and create no root.sealed* file;
    /// serve at once, answering only Status, RootStatus, CreateSealedRoot and AdoptRoot
    /// until the appliance hands over the shared sealed root (AdoptRoot); exit with an
    /// error if that root does not open here (never make a second one). Only for platforms
    /// whose sealing key is the same on every replica of the app: dstack (the KMS app key)
    /// and dev (every replica given the same --dev-secret file).
    #[arg(
        long,
        env = "KEYSERVICE_SHARED_ROOT",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    shared_root: bool,
    /// Number of API payer (gas) wallets, index 0..N.
    #[arg(long, default_value_t = 4, env = "KEYSERVICE_PAYERS")]
    payers: u32,
    /// Concurrent connections.
    #[arg(long, default_value_t = 128)]
    max_connections: usize,
    /// Requests in flight per connection.
    #[arg(long, default_value_t = 256)]
    max_in_flight: usize,
    /// Stop when the process that started this one exits (a supervisor that was
    /// killed without a chance to stop its child).
    #[arg(long, env = "KEYSERVICE_EXIT_WITH_PARENT")]
    exit_with_parent: bool,
    /// The supervisor's pid, for `--exit-with-parent`: keyservice stops as soon as its
    /// parent is any other process, even if the supervisor died before keyservice could
    /// look (without it, the parent seen at start is the one watched).
    #[arg(long, env = "KEYSERVICE_PARENT_PID", requires = "exit_with_parent")]
    parent_pid: Option<u32>,
    /// Create the socket 0660 instead of 0600, so members of the keyservice's group (the
    /// appliance container's user, via its supplementary group) can connect.
    #[arg(long, env = "KEYSERVICE_SOCKET_GROUP_ACCESS")]
    socket_group_access: bool,
    /// A uid whose processes may connect (the appliance's); repeat for more. The kernel's
    /// account of the peer (SO_PEERCRED) is checked on every connection, whatever the
    /// socket's mode lets through. Default: keyservice's own uid only.
    #[arg(long = "peer-uid", env = "KEYSERVICE_PEER_UIDS", value_delimiter = ',')]
    peer_uids: Vec<u32>,
    #[command(flatten)]
    payer: PayerArgs,
    #[command(flatten)]
    quote: QuoteArgs,
    #[command(flatten)]
    operator: OperatorArgs,
    #[command(flatten)]
    platform: PlatformArgs,
}

/// Who may ask for a reseal over the socket (`OperatorReseal`, relayed by the appliance
/// from the operator's signed request) and what decides the target. Default: `[operator]
/// addresses`, `[chain] governance_address` and `[chain] rpc_url` of --chain-config (the
/// measured configuration); the RPC URL usually comes from `APPLIANCE_CHAIN__RPC_URL`, the
/// secret the appliance gets too.
#[derive(Args)]
struct OperatorArgs {
    /// An operator's address (0x + 40 hex); repeatable, replaces `[operator] addresses`.
    #[arg(long = "operator", env = "KEYSERVICE_OPERATORS", value_delimiter = ',')]
    operators: Vec<String>,
    /// The governance contract whose `allowedComposeHashes` decides reseal targets;
    /// replaces `[chain] governance_address`.
    #[arg(long = "governance", env = "KEYSERVICE_GOVERNANCE")]
    governance: Option<String>,
    /// The JSON-RPC URL to read it with; wins over `APPLIANCE_CHAIN__RPC_URL` and
    /// `[chain] rpc_url`.
    #[arg(
        long = "governance-rpc",
        env = "KEYSERVICE_GOVERNANCE_RPC",
        hide_env_values = true
    )]
    governance_rpc: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum QuoteProviderArg {
    /// The dstack guest agent (`GetQuote`, `Info`) on --agent-socket.
    Dstack,
    /// Linux configfs-tsm (--tsm-dir); identity from --compose-file.
    Tsm,
    /// Simulated quotes from --compose-file: development only, NOT confidential.
    Simulated,
}

/// Where quotes come from. keyservice is the only process that talks to the provider;
/// the socket offers only quotes over report data keyservice builds itself.
#[derive(Args)]
struct QuoteArgs {
    /// The quote provider. Default: `[attestation] provider` of --chain-config, else
    /// dstack with --platform dstack and simulated with --platform dev.
    #[arg(long, value_enum, env = "KEYSERVICE_QUOTE_PROVIDER")]
    quote_provider: Option<QuoteProviderArg>,
    /// tsm: the configfs-tsm report directory. Default: `[attestation] tsm_dir` of
    /// --chain-config, else /sys/kernel/config/tsm/report.
    #[arg(long, env = "KEYSERVICE_TSM_DIR")]
    tsm_dir: Option<PathBuf>,
    /// tsm, simulated: the app id (40 hex digits) `/info` reports. Default:
    /// `[attestation] app_id`, else `[chain] governance_address` of --chain-config, else
    /// the first 20 bytes of the compose hash.
    #[arg(long, env = "KEYSERVICE_APP_ID")]
    app_id: Option<String>,
}

/// Why a command failed; logged, with exit status 1.
#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error("cannot read --chain-config {}: {source}", path.display())]
    ReadChainConfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--chain-config {}: {source}", path.display())]
    ChainConfig {
        path: PathBuf,
        #[source]
        source: ChainConfigError,
    },
    #[error("--app-id: {0}")]
    AppId(#[source] attest::BadAppId),
    #[error("--platform dev needs --compose-file")]
    DevNeedsComposeFile,
    #[error("--payers is at most {MAX_API_PAYERS}")]
    TooManyPayers,
    #[error(transparent)]
    Platform(#[from] PlatformError),
    #[error(transparent)]
    Seal(#[from] SealError),
    #[error(transparent)]
    Quotes(#[from] attest::QuoteConfigError),
    /// Building the key operations from the unsealed root.
    #[error(transparent)]
    Ops(#[from] OpError),
    #[error("cannot start the runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("cannot bind {}: {source}", path.display())]
    Bind {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Shared-root mode: the root handed over did not open here (the service's reason).
    #[error("exiting: {0}")]
    Exiting(String),
    #[error("give either --allow-list FILE or --governance ADDRESS --rpc URL")]
    NoResealPolicy,
    #[error(transparent)]
    ResealPolicy(#[from] PolicyError),
    #[error("no sealed root in {} ({SEALED_FILE_NAME}*) to reseal", state_dir.display())]
    NoSealedRoot { state_dir: PathBuf },
    #[error("--operator: {0}")]
    Operator(String),
}

/// What is wrong in the `--chain-config` file (the appliance's measured configuration).
#[derive(Debug, thiserror::Error)]
enum ChainConfigError {
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    #[error(transparent)]
    Quotes(#[from] attest::QuoteSettingsError),
    #[error(transparent)]
    Chain(#[from] payer_policy::ChainSettingsError),
    #[error("store.engine must be \"sqlite\" or \"postgres\", not {0}")]
    StoreEngine(toml::Value),
    #[error(transparent)]
    Operator(#[from] OperatorSettingsError),
}

/// The text of `--chain-config` at `path`.
fn read_chain_config(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(|source| CliError::ReadChainConfig {
        path: path.to_owned(),
        source,
    })
}

/// `--chain-config PATH: …`.
fn chain_config_error(path: &Path, source: impl Into<ChainConfigError>) -> CliError {
    CliError::ChainConfig {
        path: path.to_owned(),
        source: source.into(),
    }
}

fn quote_config(args: &RunArgs) -> Result<QuoteConfig, CliError> {
    let from_file = match &args.payer.chain_config {
        Some(path) => attest::quote_settings_from_toml(&read_chain_config(path)?)
            .map_err(|e| chain_config_error(path, e))?,
        None => attest::QuoteSettings::default(),
    };
    let provider = match (args.quote.quote_provider, from_file.provider) {
        (Some(QuoteProviderArg::Dstack), _) => ProviderChoice::Dstack,
        (Some(QuoteProviderArg::Tsm), _) => ProviderChoice::Tsm,
        (Some(QuoteProviderArg::Simulated), _) => ProviderChoice::Simulated,
        (None, Some(p)) => p,
        (None, None) => match args.platform.platform {
            PlatformChoice::Dstack => ProviderChoice::Dstack,
            PlatformChoice::Dev => ProviderChoice::Simulated,
        },
    };
    let app_id = match &args.quote.app_id {
        Some(text) => Some(attest::parse_app_id(text).map_err(CliError::AppId)?),
        None => from_file.app_id,
    };
    Ok(QuoteConfig {
        provider,
        agent_socket: args.platform.agent_socket.clone(),
        tsm_dir: args
            .quote
            .tsm_dir
            .clone()
            .or(from_file.tsm_dir)
            .unwrap_or_else(|| PathBuf::from(evidence::TsmProvider::DEFAULT_DIR)),
        compose_file: args.platform.compose_file.clone(),
        app_id,
    })
}

/// What the payers may sign (see README "Payer policy"). Only from the command line,
/// the environment or the measured configuration file: never from the socket.
#[derive(Args)]
struct PayerArgs {
    /// The only chain id payers sign transactions for. Without it (and without
    /// --chain-config), payers sign nothing.
    #[arg(long, env = "KEYSERVICE_CHAIN_ID")]
    chain_id: Option<u64>,
    /// An AccountConfig contract (deployed by someone else) the payers may call.
    /// Repeatable; the environment variable takes a comma-separated list.
    #[arg(
        long = "account-config",
        env = "KEYSERVICE_ACCOUNT_CONFIG",
        value_delimiter = ','
    )]
    account_configs: Vec<keyservice_api::Address>,
    /// The appliance's configuration file: `[chain] chain_id` (default 31337, as the
    /// appliance's) and `account_config_address` are read from it. Flags win.
    #[arg(long, env = "KEYSERVICE_CHAIN_CONFIG")]
    chain_config: Option<PathBuf>,
    /// Cap on gas limit × max fee per gas of one payer transaction, in wei.
    #[arg(long, env = "KEYSERVICE_PAYER_MAX_FEE_WEI")]
    payer_max_fee_wei: Option<u128>,
}

/// Whether the appliance configuration at `path` puts the store in PostgreSQL
/// (`[store] engine = "postgres"`): then the replicas share one root.
fn store_is_shared(path: Option<&Path>) -> Result<bool, CliError> {
    let Some(path) = path else {
        return Ok(false);
    };
    store_engine_is_postgres(&read_chain_config(path)?).map_err(|e| chain_config_error(path, e))
}

/// Whether `[store] engine` of the appliance configuration `text` is `"postgres"`.
fn store_engine_is_postgres(text: &str) -> Result<bool, ChainConfigError> {
    let root: toml::Table = text.parse()?;
    match root.get("store").and_then(|s| s.get("engine")) {
        None => Ok(false),
        Some(toml::Value::String(engine)) if engine == "postgres" => Ok(true),
        Some(toml::Value::String(engine)) if engine == "sqlite" => Ok(false),
        Some(other) => Err(ChainConfigError::StoreEngine(other.clone())),
    }
}

fn payer_policy_config(args: &PayerArgs, state_dir: &Path) -> Result<PayerPolicyConfig, CliError> {
    let mut config = PayerPolicyConfig {
        chain_id: args.chain_id,
        account_configs: args.account_configs.clone(),
        max_fee_wei: args.payer_max_fee_wei,
        state_file: Some(state_dir.join(payer_policy::STATE_FILE)),
    };
    if let Some(path) = &args.chain_config {
        let from_file = payer_policy::chain_settings_from_toml(&read_chain_config(path)?)
            .map_err(|e| chain_config_error(path, e))?;
        config.chain_id = config.chain_id.or(Some(from_file.chain_id));
        config.account_configs.extend(from_file.account_config);
    }
    Ok(config)
}

#[derive(Args)]
struct ResealArgs {
    /// The compose hash to reseal to (hex, `0x` optional).
    #[arg(long)]
    to: ComposeHash,
    /// File of allowed compose hashes, one hex hash per line.
    #[arg(
        long,
        required_unless_present = "governance",
        conflicts_with = "governance"
    )]
    allow_list: Option<PathBuf>,
    /// The AppGovernance contract whose `allowedComposeHashes` decides (with --rpc).
    #[arg(long, requires = "rpc")]
    governance: Option<String>,
    /// JSON-RPC URL of the chain the governance contract is on.
    #[arg(long, requires = "governance")]
    rpc: Option<String>,
    /// Directory of the sealed root.
    #[arg(long, env = "KEYSERVICE_STATE_DIR")]
    state_dir: PathBuf,
    /// The sealed root to read. Default: the one `run` would open.
    #[arg(long)]
    sealed_file: Option<PathBuf>,
    /// Where to write. Default: STATE_DIR/root.sealed.<first 16 hex of the target hash>.
    #[arg(long)]
    output: Option<PathBuf>,
    #[command(flatten)]
    platform: PlatformArgs,
}

fn build_platform(
    args: &PlatformArgs,
    state_dir: Option<&Path>,
) -> Result<Box<dyn Platform>, CliError> {
    match args.platform {
        PlatformChoice::Dev => {
            let compose = args
                .compose_file
                .clone()
                .ok_or(CliError::DevNeedsComposeFile)?;
            let secret = match (&args.dev_secret, state_dir) {
                (Some(p), _) => p.clone(),
                (None, Some(d)) => d.join("dev-secret"),
                (None, None) => PathBuf::from("dev-secret"),
            };
            Ok(Box::new(DevPlatform::new(secret, compose)))
        }
        PlatformChoice::Dstack => Ok(Box::new(DstackPlatform::new(args.agent_socket.clone()))),
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let result = match cli.command {
        Command::Run(args) => run(args),
        Command::Reseal(args) => reseal(args),
        Command::ComposeHash(args) => compose_hash(&args),
        Command::Inspect { file } => inspect(&file),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err}");
            ExitCode::FAILURE
        }
    }
}

/// Where the root comes from: the state directory's file, unsealed at start, or (shared
/// root) the appliance, later.
enum RootSource {
    Unsealed(RootSecret),
    Shared(SealingKey),
}

fn run(args: RunArgs) -> Result<(), CliError> {
    // Before anything slow: the parent to watch for `--exit-with-parent`.
    let parent = args
        .parent_pid
        .unwrap_or_else(std::os::unix::process::parent_id);
    if args.payers > MAX_API_PAYERS {
        return Err(CliError::TooManyPayers);
    }
    let platform: Arc<dyn Platform> =
        Arc::from(build_platform(&args.platform, Some(&args.state_dir))?);
    // The measured configuration decides too: with `[store] engine = "postgres"` every
    // replica shares the root kept in the database.
    let shared_root = args.shared_root || store_is_shared(args.payer.chain_config.as_deref())?;
    let (source, compose_hash, own_file) = if shared_root {
        // No root file is looked for or written; the state directory still holds
        // payer-contracts.json. The sealing key is fetched now, so a platform that cannot
        // give one stops the start-up instead of the adoption.
        root::ensure_state_dir(&args.state_dir)?;
        let measured = platform.measured_compose_hash()?;
        let key = platform.sealing_key(&measured)?;
        (RootSource::Shared(key), measured, None)
    } else {
        let unsealed = root::open_or_create(
            platform.as_ref(),
            &args.state_dir,
            args.sealed_file.as_deref(),
        )?;
        (
            RootSource::Unsealed(unsealed.root),
            unsealed.compose_hash,
            Some(unsealed.path),
        )
    };
    let desk = operator_desk(&args, Arc::clone(&platform), own_file, compose_hash)?;
    let payer_config = payer_policy_config(&args.payer, &args.state_dir)?;
    let quotes = quote_config(&args)?;
    let quoter = Quoter::new(quotes.build()?);
    if quotes.provider == ProviderChoice::Simulated {
        tracing::warn!(
            "quote provider: SIMULATED quotes, NOT confidential (verifiers refuse them unless told to allow simulated evidence)"
        );
    }
    let quote_source = quoter.source();
    let kind = platform.kind();
    let api_payers = args.payers;
    let build: BuildOps = Box::new(move |root| {
        Ok(KeyOps::new(root, kind, compose_hash, api_payers)?
            .with_payer_policy(payer_config)?
            .with_quotes(quoter))
    });
    let service = match source {
        RootSource::Unsealed(root) => Service::ready(build(root)?),
        RootSource::Shared(key) => {
            let status = ServiceStatus {
                protocol_version: PROTOCOL_VERSION,
                platform: kind,
                compose_hash,
                api_payers,
            };
            Service::awaiting_root(status, key, build)
        }
    }
    .with_operator_desk(desk);
    let service = Arc::new(service);
    let config = ServerConfig {
        max_connections: args.max_connections.max(1),
        max_in_flight: args.max_in_flight.max(1),
        peer_uids: if args.peer_uids.is_empty() {
            vec![server::own_uid()]
        } else {
            args.peer_uids.clone()
        },
        ..ServerConfig::default()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(CliError::Runtime)?;
    runtime.block_on(async move {
        let mode = if args.socket_group_access {
            0o660
        } else {
            0o600
        };
        let listener =
            server::bind_with_mode(&args.socket, mode).map_err(|source| CliError::Bind {
                path: args.socket.clone(),
                source,
            })?;
        match service.ops() {
            Some(ops) => tracing::info!(
                socket = %args.socket.display(),
                %compose_hash,
                root_id = %ops.root_id(),
                api_payers = args.payers,
                peer_uids = ?config.peer_uids,
                admin_payer = %ops.payers().admin,
                chain_id = ?ops.payer_policy().chain_id(),
                quote_provider = %quote_source,
                "keyservice ready"
            ),
            None => tracing::info!(
                socket = %args.socket.display(),
                %compose_hash,
                api_payers = args.payers,
                quote_provider = %quote_source,
                "shared-root mode: awaiting the shared sealed root from the appliance (AdoptRoot); \
                 until then only Status, RootStatus, CreateSealedRoot and AdoptRoot are answered"
            ),
        }
        // Remember which socket file is ours: at exit, a successor may already have
        // replaced it, and its socket must not be removed.
        let bound = socket_file::BoundSocket::at(&args.socket);
        let stop = async {
            tokio::select! {
                () = shutdown_signal() => {}
                () = parent_exit(args.exit_with_parent.then_some(parent)) => {}
                // A refused shared root: stop serving (the answer saying why still goes
                // out: in-flight answers are written before the server returns).
                _ = service.failed() => {}
            }
        };
        server::serve(listener, Arc::clone(&service), config, stop).await;
        if let Some(bound) = bound {
            bound.remove(&args.socket);
        }
        if let Some(reason) = service.failure() {
            return Err(CliError::Exiting(reason));
        }
        tracing::info!("stopped");
        Ok(())
    })
}

/// The operator tasks: the operators and governance contract of the measured
/// configuration, the RPC URL from it or (winning) from `APPLIANCE_CHAIN__RPC_URL`.
fn operator_desk(
    args: &RunArgs,
    platform: Arc<dyn Platform>,
    own_file: Option<PathBuf>,
    measured: ComposeHash,
) -> Result<OperatorDesk, CliError> {
    let mut settings = match &args.payer.chain_config {
        Some(path) => operator::settings_from_toml(&read_chain_config(path)?)
            .map_err(|e| chain_config_error(path, e))?,
        None => operator::OperatorSettings::default(),
    };
    if let Some(url) = std::env::var(RPC_URL_ENV)
        .ok()
        .filter(|u| !u.trim().is_empty())
    {
        // The appliance reads `APPLIANCE_*` values as TOML, strings optionally quoted.
        settings.rpc_url = Some(url.trim().trim_matches('"').to_owned());
    }
    if !args.operator.operators.is_empty() {
        settings.operators = args
            .operator
            .operators
            .iter()
            .map(|a| operator::parse_address(a.trim()))
            .collect::<Result<_, _>>()
            .map_err(|e| CliError::Operator(e.to_string()))?;
    }
    if let Some(governance) = &args.operator.governance {
        settings.governance = Some(governance.clone());
    }
    if let Some(rpc) = &args.operator.governance_rpc {
        settings.rpc_url = Some(rpc.clone());
    }
    let policy: Result<Arc<dyn ComposeHashPolicy + Send + Sync>, &'static str> =
        match (&settings.governance, &settings.rpc_url) {
            (None, _) => Err(operator::NO_GOVERNANCE),
            (Some(_), None) => Err(operator::NO_RPC_URL),
            (Some(address), Some(rpc)) => Ok(Arc::new(GovernanceContract::new(address, rpc)?)),
        };
    if !settings.operators.is_empty() {
        tracing::info!(
            operators = settings.operators.len(),
            governance = settings.governance.as_deref().unwrap_or("none"),
            "operator tasks: signed requests of the configured operators are served"
        );
    }
    Ok(OperatorDesk::new(
        settings.operators,
        policy,
        platform,
        args.state_dir.clone(),
        own_file,
        measured,
    ))
}

/// The environment variable of the chain's RPC URL, shared with the appliance.
const RPC_URL_ENV: &str = "APPLIANCE_CHAIN__RPC_URL";

/// Resolves once the parent process is no longer `parent` (never, for `None`).
async fn parent_exit(parent: Option<u32>) {
    let Some(parent) = parent else {
        return std::future::pending().await;
    };
    loop {
        if std::os::unix::process::parent_id() != parent {
            tracing::warn!(parent, "the parent process exited; stopping");
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    match (term, int) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM"),
                _ = int.recv() => tracing::info!("SIGINT"),
            }
        }
        _ => {
            tracing::warn!("cannot install signal handlers; stop with SIGKILL");
            std::future::pending::<()>().await;
        }
    }
}

fn reseal(args: ResealArgs) -> Result<(), CliError> {
    let platform = build_platform(&args.platform, Some(&args.state_dir))?;
    let policy: Box<dyn ComposeHashPolicy> = match (&args.allow_list, &args.governance, &args.rpc) {
        (Some(file), None, None) => Box::new(AllowListFile::load(file)?),
        (None, Some(address), Some(rpc)) => Box::new(GovernanceContract::new(address, rpc)?),
        _ => return Err(CliError::NoResealPolicy),
    };
    let source = match &args.sealed_file {
        Some(p) => p.clone(),
        None => {
            let measured = platform.measured_compose_hash()?;
            match root::locate(&args.state_dir, &measured, None)? {
                root::Location::Existing(p) => p,
                root::Location::Create(_) => {
                    return Err(CliError::NoSealedRoot {
                        state_dir: args.state_dir.clone(),
                    });
                }
            }
        }
    };
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| root::sealed_file_for(&args.state_dir, &args.to));
    root::reseal(
        platform.as_ref(),
        &source,
        &args.to,
        policy.as_ref(),
        &output,
    )?;
    print_line(&format!(
        "resealed {} -> {} for compose hash {}",
        source.display(),
        output.display(),
        args.to
    ));
    Ok(())
}

fn compose_hash(args: &PlatformArgs) -> Result<(), CliError> {
    let platform = build_platform(args, None)?;
    let h = platform.measured_compose_hash()?;
    print_line(&hex::encode(h.as_bytes()));
    Ok(())
}

fn inspect(file: &Path) -> Result<(), CliError> {
    let sealed = SealedRoot::read(file)?;
    print_line(&format!(
        "format version {}\ncompose hash {}",
        keyservice::sealing::FORMAT_VERSION,
        sealed.compose_hash
    ));
    Ok(())
}

/// The CLI's answers go to stdout (logs go to stderr).
#[allow(clippy::print_stdout)]
fn print_line(s: &str) {
    println!("{s}");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The store engine decides shared-root mode; a wrong one is named in the error.
    #[test]
    fn the_store_engine_of_the_chain_config() {
        assert!(matches!(store_engine_is_postgres(""), Ok(false)));
        assert!(matches!(
            store_engine_is_postgres("[store]\nengine = \"sqlite\"\n"),
            Ok(false)
        ));
        assert!(matches!(
            store_engine_is_postgres("[store]\nengine = \"postgres\"\n"),
            Ok(true)
        ));
        let err = CliError::ChainConfig {
            path: PathBuf::from("appliance.toml"),
            source: match store_engine_is_postgres("[store]\nengine = \"mysql\"\n") {
                Err(e) => e,
                Ok(shared) => panic!("mysql accepted (shared: {shared})"),
            },
        };
        assert_eq!(
            err.to_string(),
            "--chain-config appliance.toml: store.engine must be \"sqlite\" or \"postgres\", not \"mysql\""
        );
    }
}
