//! The `appliance` command.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use appliance::config::Config;
use appliance::telemetry::metrics::Metrics;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "appliance",
    version,
    about = "The confidential-VM key appliance"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a complete local instance with development defaults (self-signed TLS,
    /// NOT confidential). Prints the base URL on standard output.
    Dev {
        /// Address to listen on; port 0 picks a free port.
        #[arg(long, default_value = "127.0.0.1:8443")]
        listen: SocketAddr,
        /// Directory for the database and generated material.
        #[arg(long, default_value = ".appliance-dev")]
        data_dir: PathBuf,
        /// The compose file whose hash seals the dev keyservice's root. Default:
        /// DATA_DIR/app-compose.json (if missing, the committed compose template is rendered
        /// there with the placeholder dev image; see docs/operators.md).
        #[arg(long)]
        compose_file: Option<PathBuf>,
        /// Take the certificate from a local ACME CA (Debian's Pebble and its DNS
        /// stand-in, run as children), so that every check of `evidence verify` passes
        /// against this stack; prints the exact command once the certificate is issued.
        #[arg(long)]
        local_acme: bool,
    },
    /// Run in production from a TOML configuration file (APPLIANCE_* variables
    /// override any key; see config.example.toml).
    Serve {
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Print the effective configuration (defaults, file, environment) and exit.
    PrintConfig {
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Copy DATA_DIR/state.db into a new file while the appliance serves (SQLite's online
    /// backup API: one consistent snapshot, with the metadata restore judges it by), and
    /// print a one-line summary. Exit status 3: refused (FILE exists, or the store is
    /// PostgreSQL: use pg_dump, docs/operators.md section 8).
    Backup {
        /// The configuration `appliance serve` runs with (it names the data directory).
        #[arg(long)]
        config: Option<PathBuf>,
        /// The data directory (default: data_dir of the configuration).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// The backup file to write (it must not exist).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Replace FILE if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Put a backup written by `appliance backup` in place of DATA_DIR/state.db, with the
    /// appliance stopped; the database it replaces is kept as
    /// state.db.before-restore-<time>. Exit status 3: refused, nothing changed (the
    /// database is in use, or newer than the backup without --force; the backup is
    /// damaged or from a newer build).
    Restore {
        /// The configuration `appliance serve` runs with (it names the data directory).
        #[arg(long)]
        config: Option<PathBuf>,
        /// The data directory (default: data_dir of the configuration).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// The backup file.
        #[arg(long, value_name = "FILE")]
        from: PathBuf,
        /// Restore over a database that is newer than the backup (or unreadable).
        #[arg(long)]
        force: bool,
    },
    /// Reports of the credit ledger (docs/operators.md, "Billing report").
    Billing {
        #[command(subcommand)]
        action: BillingAction,
    },
    /// The shared sealed root of replicas on PostgreSQL (upgrades: export, reseal with
    /// `keyservice reseal`, import; docs/operators.md "Replicas").
    Root {
        #[command(subcommand)]
        action: RootAction,
    },
    /// Deploy AccountConfig and AppGovernance to a chain, make the API payers
    /// AccountConfig payers, and write the addresses (with rpc_url, chain_id and
    /// deploy_block) into the [chain] table of the configuration file, keeping the rest of
    /// it. Signed by keyservice's admin payer (reached through keyservice.socket), or by
    /// the key in the environment variable DEPLOYER_PRIVATE_KEY if set; the signer owns
    /// both contracts unless the --*-owner options hand them on.
    Deploy {
        /// The chain's JSON-RPC URL.
        #[arg(long)]
        rpc: String,
        /// The configuration file to update (created if missing).
        #[arg(long, default_value = "/etc/appliance/appliance.toml")]
        config: PathBuf,
        /// The chain id the endpoint must report. Default: chain.chain_id of the file.
        #[arg(long)]
        chain_id: Option<u64>,
        /// Deploy new contracts even if the file already names some.
        #[arg(long)]
        force: bool,
        /// Transfer AccountConfig's ownership to this address after authorizing the payers.
        #[arg(long)]
        account_config_owner: Option<alloy::primitives::Address>,
        /// Transfer AppGovernance's ownership to this address (e.g. a multisig).
        #[arg(long)]
        governance_owner: Option<alloy::primitives::Address>,
        /// Make this address an AccountConfig API payer instead of keyservice's (repeat
        /// for several). With DEPLOYER_PRIVATE_KEY, keyservice is then not needed.
        #[arg(
            long = "api-payer",
            value_name = "ADDRESS",
            conflicts_with = "without_api_payers"
        )]
        api_payers: Vec<alloy::primitives::Address>,
        /// Authorize no API payer now (e.g. before the CVM whose keyservice will have them
        /// exists: authorize its payers later with setApiPayer). With DEPLOYER_PRIVATE_KEY,
        /// keyservice is then not needed.
        #[arg(long)]
        without_api_payers: bool,
        /// Seconds to wait for each transaction to be mined.
        #[arg(long, default_value_t = 300)]
        receipt_timeout_secs: u64,
    },
    /// Internal (appliance dev): run a helper program and stop it when this process's
    /// parent exits.
    #[command(hide = true)]
    ChildGuard {
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<std::ffi::OsString>,
    },
}

/// Sets up logging to standard error, written in batches by its own thread
/// (`appliance::log_output`), and the trace export when `traces.endpoint` is set
/// (`appliance::telemetry::traces`). Keep the guard until the end: dropping it sends the
/// spans still queued and writes out what is pending. Fails when the thread cannot be
/// started or the exporter cannot be set up. Runs inside the tokio runtime.
fn init_logging(
    config: &Config,
    metrics: Arc<Metrics>,
) -> Result<appliance::log_output::LogGuard, ExitCode> {
    let (writer, mut guard) = appliance::log_output::to_stderr().map_err(|err| {
        let _ = writeln!(
            std::io::stderr(),
            "appliance: cannot start the log thread: {err}"
        );
        ExitCode::FAILURE
    })?;
    match appliance::telemetry::traces::install(&config.log, &config.traces, writer, metrics) {
        Ok(Some(traces)) => guard.keep_until_closed(Box::new(traces)),
        Ok(None) => {}
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "appliance: {err}");
            return Err(ExitCode::FAILURE);
        }
    }
    Ok(guard)
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

/// How `run` starts the appliance.
#[derive(Debug, Clone, Copy)]
enum Mode {
    Serve,
    Dev { local_acme: bool },
}

async fn run(mut config: Config, mode: Mode) -> ExitCode {
    // The appliance's one metrics registry: the trace exporter and every part the
    // composition root starts count into it.
    let metrics = Arc::new(Metrics::new());
    let log = match init_logging(&config, Arc::clone(&metrics)) {
        Ok(guard) => guard,
        Err(code) => return code,
    };
    let dev = matches!(mode, Mode::Dev { .. });
    if dev {
        tracing::warn!(
            "DEVELOPMENT MODE: simulated platform, self-signed or local-CA TLS; nothing here is confidential"
        );
    }
    let local_acme = if matches!(mode, Mode::Dev { local_acme: true }) {
        let (data_dir, listen) = (config.data_dir.clone(), config.listen);
        match appliance::dev::local_acme::start(&mut config.acme, &data_dir, listen).await {
            Ok(local) => Some(local),
            Err(err) => {
                tracing::error!(error = %err, "cannot start the local ACME CA");
                let _ = writeln!(std::io::stderr(), "appliance: {err}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };
    let dev_chain_id = config.chain.chain_id;
    let started = if dev {
        let anvil = if config.chain.rpc_url.is_some() {
            tracing::info!("chain.rpc_url is set: no local chain");
            None
        } else {
            appliance::dev::chain::resolve_anvil(config.chain.dev_anvil.as_deref())
        };
        appliance::start_dev(config, anvil, metrics).await
    } else {
        appliance::start(config, metrics).await
    };
    let mut running = match started {
        Ok(running) => running,
        Err(err) => {
            tracing::error!(error = %err, "cannot start");
            let _ = writeln!(std::io::stderr(), "appliance: {err}");
            if let Some(local) = local_acme {
                local.shutdown().await;
            }
            return ExitCode::FAILURE;
        }
    };
    // Everything logged while starting is in the log before the URL is announced.
    log.flush();
    // The one line scripts and tests read: the base URL.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "appliance listening on {}", running.base_url());
    if let Some(addr) = running.metrics_addr {
        let _ = writeln!(
            out,
            "metrics: {}",
            appliance::metrics_listener::describe(addr)
        );
    }
    if let Some(rpc) = running.dev_rpc_url() {
        let _ = writeln!(
            out,
            "dev chain for actions (chain {dev_chain_id}): new ethers.providers.JsonRpcProvider(\"{rpc}\")"
        );
    }
    if let Some(pem) = &running.self_signed_pem {
        let _ = writeln!(
            out,
            "self-signed certificate: {} (curl --cacert it, or -k)",
            pem.display()
        );
        if local_acme.is_none() {
            // acme-caa cannot apply to a self-signed certificate: the report says so.
            let mut verify = format!(
                "verify it (development only; `--local-acme` for every check): evidence verify --url https://localhost:{} --ca-file {} --allow-simulated",
                running.local_addr.port(),
                pem.display()
            );
            if let Some(rpc) = running.dev_rpc_url() {
                verify.push_str(&format!(" --rpc-url {rpc}"));
            }
            let _ = writeln!(out, "{verify}");
        }
    }
    let _ = out.flush();
    drop(out);
    // With the local CA: once the account exists, publish its CAA record and say how to
    // verify the stack.
    let announce = local_acme.as_ref().and_then(|local| {
        let handle = running.acme.as_ref()?.handle.clone();
        let command = local.verify_command(running.local_addr.port(), running.dev_rpc_url());
        Some(announce_local_acme(handle, local.caa_publisher(), command))
    });
    let announce = async {
        match announce {
            Some(task) => task.await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(announce);

    let signalled = {
        let stopped = async {
            tokio::select! {
                () = shutdown_signal() => {
                    tracing::info!("shutting down");
                    true
                }
                () = running.wait() => false,
            }
        };
        tokio::pin!(stopped);
        loop {
            tokio::select! {
                signalled = &mut stopped => break signalled,
                () = &mut announce => {}
            }
        }
    };
    if signalled {
        running.shutdown().await;
    }
    if let Some(local) = local_acme {
        local.shutdown().await;
    }
    ExitCode::SUCCESS
}

/// Waits for the ACME account and the first certificate, publishes the CAA record that
/// names the account, then prints the `evidence verify` command that passes; then never
/// returns (the caller selects it beside the shutdown).
async fn announce_local_acme(
    acme: appliance::acme::AcmeHandle,
    caa: appliance::dev::local_acme::CaaPublisher,
    command: String,
) {
    let mut issued = acme.subscribe();
    let account = loop {
        let health = acme.health();
        if let (Some(account), true) = (health.account_uri.clone(), issued.borrow().is_some()) {
            break account;
        }
        if issued.changed().await.is_err() {
            return std::future::pending().await;
        }
    };
    match caa.publish(&account).await {
        Ok(()) => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(
                out,
                "local ACME certificate issued; every check passes with:\n  {command}"
            );
            let _ = out.flush();
        }
        Err(err) => tracing::error!(error = %err, "cannot publish the CAA record"),
    }
    std::future::pending().await
}

async fn deploy(args: appliance::commands::deploy::DeployArgs) -> ExitCode {
    let _log = match init_logging(&Config::default(), Default::default()) {
        Ok(guard) => guard,
        Err(code) => return code,
    };
    match appliance::commands::deploy::run(&args).await {
        Ok(d) => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(
                out,
                "AccountConfig {} (block {}), owner {}",
                d.account_config, d.deploy_block, d.account_config_owner
            );
            let _ = writeln!(
                out,
                "AppGovernance {}, owner {}",
                d.governance, d.governance_owner
            );
            let _ = writeln!(out, "written to {}", args.config_path.display());
            ExitCode::SUCCESS
        }
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "appliance deploy: {err}");
            match err {
                appliance::commands::deploy::DeployCmdError::Config(_) => ExitCode::from(2),
                _ => ExitCode::FAILURE,
            }
        }
    }
}

/// Prints the one-line summary of `appliance backup` or `restore` on standard output,
/// or its error on standard error with its exit status.
fn report(
    command: &str,
    done: Result<String, appliance::commands::backup::BackupCmdError>,
) -> ExitCode {
    match done {
        Ok(line) => {
            let _ = writeln!(std::io::stdout(), "{line}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "appliance {command}: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}

fn block_on<F: std::future::Future<Output = ExitCode>>(future: F) -> ExitCode {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(future),
        Err(err) => {
            let _ = writeln!(
                std::io::stderr(),
                "appliance: cannot start the async runtime: {err}"
            );
            ExitCode::FAILURE
        }
    }
}

#[derive(Subcommand)]
enum BillingAction {
    /// Print every account's credits and charges written from --from up to (not
    /// including) --to as CSV: one line per ledger row, then a `total` line per account
    /// (columns: docs/operators.md, "Billing report"). Reads DATA_DIR/state.db read-only,
    /// while the appliance serves. Exit status 3: refused (the store is PostgreSQL, FILE
    /// exists, or the database is missing or of another schema version).
    Report {
        /// The configuration `appliance serve` runs with (it names the data directory).
        #[arg(long)]
        config: Option<PathBuf>,
        /// The data directory (default: data_dir of the configuration).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// The start, inclusive: Unix seconds, a UTC date (2025-12-01) or a UTC time
        /// (2025-12-01T12:00:00Z).
        #[arg(long, value_parser = appliance::commands::billing::parse_time)]
        from: i64,
        /// The end, exclusive (same forms as --from).
        #[arg(long, value_parser = appliance::commands::billing::parse_time)]
        to: i64,
        /// Only this account (its id, as the report's account_id column shows it).
        #[arg(long)]
        account: Option<i64>,
        /// Write the CSV to FILE (it must not exist) instead of standard output.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Replace FILE if it exists.
        #[arg(long, requires = "out")]
        force: bool,
    },
}

/// `appliance billing report`: the CSV on standard output or in FILE (then a one-line
/// summary on standard output), or the error on standard error with its exit status.
fn billing(action: BillingAction) -> ExitCode {
    let BillingAction::Report {
        config,
        data_dir,
        from,
        to,
        account,
        out,
        force,
    } = action;
    let args = appliance::commands::billing::ReportArgs {
        config,
        data_dir,
        from,
        to,
        account,
        out,
        force,
    };
    let mut stdout = std::io::stdout().lock();
    match appliance::commands::billing::run(&args, &mut stdout) {
        Ok(summary) => {
            if let Some(out) = &args.out {
                let _ = writeln!(stdout, "{}", summary.line(out));
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "appliance billing report: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}

#[derive(Subcommand)]
enum RootAction {
    /// Write the database's sealed root (default: the one recorded last) to a new file.
    Export {
        #[arg(long)]
        config: Option<PathBuf>,
        /// The file to write (it must not exist).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// The compose hash the root is sealed to (hex).
        #[arg(long)]
        compose_hash: Option<keyservice_api::ComposeHash>,
    },
    /// Record a sealed root resealed by `keyservice reseal` for a new compose hash.
    Import {
        #[arg(long)]
        config: Option<PathBuf>,
        /// The resealed file.
        #[arg(long, value_name = "FILE")]
        from: PathBuf,
    },
}

async fn root(action: RootAction) -> ExitCode {
    let (RootAction::Export { config, .. } | RootAction::Import { config, .. }) = &action;
    let config = match Config::load(config.as_deref()) {
        Ok(c) => c,
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "appliance: {err}");
            return ExitCode::from(2);
        }
    };
    let outcome = match action {
        RootAction::Export {
            out, compose_hash, ..
        } => appliance::commands::root::export(&config, &out, compose_hash.map(|h| h.0)).await,
        RootAction::Import { from, .. } => appliance::commands::root::import(&config, &from).await,
    };
    match outcome {
        Ok(line) => {
            let _ = writeln!(std::io::stdout(), "{line}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "appliance root: {err}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (config, mode) = match cli.command {
        Command::ChildGuard { mut command } => {
            let program = command.remove(0);
            return block_on(async move {
                match appliance::dev::child_guard::run(program, command).await {
                    Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
                    Err(err) => {
                        let _ = writeln!(std::io::stderr(), "appliance child-guard: {err}");
                        ExitCode::FAILURE
                    }
                }
            });
        }
        Command::Root { action } => {
            return block_on(root(action));
        }
        Command::Billing { action } => return billing(action),
        Command::Deploy {
            rpc,
            config,
            chain_id,
            force,
            account_config_owner,
            governance_owner,
            api_payers,
            without_api_payers,
            receipt_timeout_secs,
        } => {
            use appliance::commands::deploy::ApiPayers;
            let api_payers = if without_api_payers || !api_payers.is_empty() {
                ApiPayers::Given(api_payers)
            } else {
                ApiPayers::FromKeyservice
            };
            return block_on(deploy(appliance::commands::deploy::DeployArgs {
                rpc_url: rpc,
                config_path: config,
                chain_id,
                force,
                account_config_owner,
                governance_owner,
                api_payers,
                receipt_timeout: std::time::Duration::from_secs(receipt_timeout_secs),
            }));
        }
        Command::Backup {
            config,
            data_dir,
            out,
            force,
        } => {
            let done =
                appliance::commands::backup::backup(config.as_deref(), data_dir, &out, force);
            return report("backup", done.map(|summary| summary.line()));
        }
        Command::Restore {
            config,
            data_dir,
            from,
            force,
        } => {
            let done =
                appliance::commands::backup::restore(config.as_deref(), data_dir, &from, force);
            return report("restore", done.map(|summary| summary.line()));
        }
        Command::Dev {
            listen,
            data_dir,
            compose_file,
            local_acme,
        } => {
            let compose_file = compose_file.unwrap_or_else(|| data_dir.join("app-compose.json"));
            match Config::dev(listen, data_dir, compose_file).with_env(std::env::vars()) {
                Ok(c) => (c, Mode::Dev { local_acme }),
                Err(err) => {
                    let _ = writeln!(std::io::stderr(), "appliance: {err}");
                    return ExitCode::from(2);
                }
            }
        }
        Command::Serve { config } => match Config::load(config.as_deref()) {
            Ok(c) => (c, Mode::Serve),
            Err(err) => {
                let _ = writeln!(std::io::stderr(), "appliance: {err}");
                return ExitCode::from(2);
            }
        },
        Command::PrintConfig { config } => {
            return match Config::load(config.as_deref())
                .map(|c| toml::to_string_pretty(&c.redacted()))
            {
                Ok(Ok(text)) => {
                    let _ = write!(std::io::stdout(), "{text}");
                    ExitCode::SUCCESS
                }
                Ok(Err(err)) => {
                    let _ = writeln!(std::io::stderr(), "appliance: {err}");
                    ExitCode::FAILURE
                }
                Err(err) => {
                    let _ = writeln!(std::io::stderr(), "appliance: {err}");
                    ExitCode::from(2)
                }
            };
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            let _ = writeln!(
                std::io::stderr(),
                "appliance: cannot start the async runtime: {err}"
            );
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(config, mode))
}
