//! The `appliance` command.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use appliance::config::{Config, LogFormat};
use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

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
        /// DATA_DIR/app-compose.json (a placeholder is written if it does not exist).
        #[arg(long)]
        compose_file: Option<PathBuf>,
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
}

fn init_logging(config: &Config) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&config.log.filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match config.log.format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
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

async fn run(config: Config, dev: bool) -> ExitCode {
    init_logging(&config);
    if dev {
        tracing::warn!(
            "DEVELOPMENT MODE: self-signed TLS, simulated platform; nothing here is confidential"
        );
    }
    let mut running = match appliance::start(config).await {
        Ok(running) => running,
        Err(err) => {
            tracing::error!(error = %err, "cannot start");
            let _ = writeln!(std::io::stderr(), "appliance: {err}");
            return ExitCode::FAILURE;
        }
    };
    // The one line scripts and tests read: the base URL.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "appliance listening on {}", running.base_url());
    if let Some(pem) = &running.self_signed_pem {
        let _ = writeln!(
            out,
            "self-signed certificate: {} (curl --cacert it, or -k)",
            pem.display()
        );
    }
    let _ = out.flush();
    drop(out);

    tokio::select! {
        () = shutdown_signal() => {
            tracing::info!("shutting down");
            running.shutdown().await;
        }
        () = running.wait() => {}
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (config, dev) = match cli.command {
        Command::Dev {
            listen,
            data_dir,
            compose_file,
        } => {
            let compose_file = compose_file.unwrap_or_else(|| data_dir.join("app-compose.json"));
            match Config::dev(listen, data_dir, compose_file).with_env(std::env::vars()) {
                Ok(c) => (c, true),
                Err(err) => {
                    let _ = writeln!(std::io::stderr(), "appliance: {err}");
                    return ExitCode::from(2);
                }
            }
        }
        Command::Serve { config } => match Config::load(config.as_deref()) {
            Ok(c) => (c, false),
            Err(err) => {
                let _ = writeln!(std::io::stderr(), "appliance: {err}");
                return ExitCode::from(2);
            }
        },
        Command::PrintConfig { config } => {
            return match Config::load(config.as_deref()).map(|c| toml::to_string_pretty(&c)) {
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
    runtime.block_on(run(config, dev))
}
