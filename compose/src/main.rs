//! `compose-pin` — render the appliance's compose template with pinned images into a dstack
//! `app-compose.json`, print its compose hash, check a rendered file, and propose a hash
//! to the governance contract.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use alloy::primitives::Address;
use clap::{Args, Parser, Subcommand};
use compose_pin::{
    ComposeFormat, DEFAULT_NAME, ImageRef, PinError, RenderOptions, TEMPLATE, check_app_compose,
    governance::{self, GovernanceError, Proposed},
    parse_key_provider_id, render,
};

#[derive(Parser)]
#[command(
    name = "compose-pin",
    version,
    about = "Pinned dstack app-compose.json and its compose hash"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Render the template with a pinned image into app-compose.json; print its compose hash.
    Render(RenderArgs),
    /// Render the development compose that `appliance dev` seals to; print its hash.
    Dev {
        /// Where to write it (default: only print the hash).
        #[arg(long)]
        output: Option<PathBuf>,
    },
    /// Check a rendered app-compose.json (every image pinned) and print its compose hash.
    Hash {
        /// The app-compose.json.
        file: PathBuf,
    },
    /// Send addComposeHash(HASH) to the governance contract from the owner key in
    /// $GOVERNANCE_OWNER_KEY (or print the calldata for a multisig owner).
    Propose(ProposeArgs),
    /// Print whether the governance contract allows HASH (exit status 1 if not).
    Allowed(ChainArgs),
}

#[derive(Args)]
struct RenderArgs {
    /// The appliance image, pinned: NAME@sha256:<64 hex> (as `image-build` prints it).
    #[arg(long)]
    image: String,
    /// The docker-compose template. Default: the committed compose/docker-compose.yml.
    #[arg(long)]
    template: Option<PathBuf>,
    /// The dstack app name.
    #[arg(long, default_value = DEFAULT_NAME)]
    name: String,
    /// An encrypted environment variable dstack may inject (repeat). Default: the names
    /// the template passes through.
    #[arg(long = "allowed-env")]
    allowed_envs: Vec<String>,
    /// The appliance's TOML configuration, embedded in the compose file (measured).
    /// Default: the built-in defaults.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Let the dstack host show the containers' logs.
    #[arg(long)]
    public_logs: bool,
    /// Pin the KMS: the hex of its root CA public key (`0x` optional), as the KMS's
    /// GetMeta shows it (bootstrap_info.ca_pubkey) and the KMS contract stores it
    /// (caPubkey). The CVM then takes keys from no other KMS. Default: no pin.
    #[arg(long, value_name = "HEX", conflicts_with = "legacy_compose")]
    key_provider_id: Option<String>,
    /// Connect the CVM to the dstack gateway (gateway_enabled true). Default: off.
    #[arg(long)]
    gateway: bool,
    /// Make the boot wait for a synchronized clock (secure_time true). Default: off, as
    /// dstack's own CLI renders it: the strict wait fails the boot when no time source
    /// answers.
    #[arg(long)]
    secure_time: bool,
    /// Render the legacy form (kms_enabled true, no key_provider) for dstack hosts older
    /// than 0.5.6, which ignore key_provider.
    #[arg(long)]
    legacy_compose: bool,
    /// Where to write app-compose.json (default: standard output, and the hash on stderr).
    #[arg(long)]
    output: Option<PathBuf>,
}

#[derive(Args)]
struct ChainArgs {
    /// The AppGovernance contract.
    #[arg(long)]
    governance: Address,
    /// JSON-RPC URL of the chain it lives on.
    #[arg(long, env = "COMPOSE_PIN_RPC_URL")]
    rpc: String,
    /// The compose hash (hex, `0x` optional).
    #[arg(long)]
    hash: String,
}

#[derive(Args)]
struct ProposeArgs {
    #[command(flatten)]
    chain: ChainArgs,
    /// Print `to` and `data` of the transaction instead of sending it (multisig owners).
    #[arg(long)]
    calldata_only: bool,
}

/// Why a command failed; printed after `compose-pin: ` with exit status 2.
#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error("{input:?} is not a 32-byte hex compose hash")]
    BadHash {
        input: String,
        #[source]
        source: hex::FromHexError,
    },
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Standard output could not be written.
    #[error(transparent)]
    Stdout(std::io::Error),
    /// A bad image reference, template or rendering.
    #[error(transparent)]
    Pin(#[from] PinError),
    /// `hash` refused the file at `path`.
    #[error("{path}: {source}")]
    Check {
        path: PathBuf,
        #[source]
        source: PinError,
    },
    #[error("set GOVERNANCE_OWNER_KEY to the owner's private key (or use --calldata-only)")]
    NoOwnerKey,
    #[error(transparent)]
    Governance(#[from] GovernanceError),
}

fn parse_hash(s: &str) -> Result<[u8; 32], CliError> {
    let h = s.trim();
    let h = h.strip_prefix("0x").unwrap_or(h);
    let mut out = [0u8; 32];
    hex::decode_to_slice(h, &mut out).map_err(|source| CliError::BadHash {
        input: s.to_owned(),
        source,
    })?;
    Ok(out)
}

fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CliError::Runtime)
}

fn read_text(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(|source| CliError::Read {
        path: path.to_owned(),
        source,
    })
}

fn write_out(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    std::fs::write(path, bytes).map_err(|source| CliError::Write {
        path: path.to_owned(),
        source,
    })
}

fn run(cli: Cli) -> Result<bool, CliError> {
    let mut out = std::io::stdout().lock();
    let mut say = |line: &str| writeln!(out, "{line}").map_err(CliError::Stdout);
    match cli.command {
        Command::Render(args) => {
            let image: ImageRef = args.image.parse()?;
            let template = match &args.template {
                Some(p) => read_text(p)?,
                None => TEMPLATE.to_owned(),
            };
            let mut options = RenderOptions::new(image);
            options.name = args.name;
            options.public_logs = args.public_logs;
            options.gateway_enabled = args.gateway;
            options.secure_time = args.secure_time;
            if args.legacy_compose {
                options.format = ComposeFormat::Legacy;
            }
            if let Some(id) = &args.key_provider_id {
                options.key_provider_id = parse_key_provider_id(id)?;
            }
            if let Some(p) = &args.config {
                options.appliance_config = read_text(p)?;
            }
            if !args.allowed_envs.is_empty() {
                options.allowed_envs = args.allowed_envs;
            }
            let rendered = render(&template, &options)?;
            match &args.output {
                Some(path) => {
                    write_out(path, rendered.bytes())?;
                    say(&rendered.hash_hex())?;
                }
                None => {
                    std::io::stdout()
                        .write_all(rendered.bytes())
                        .map_err(CliError::Stdout)?;
                    let _ = writeln!(std::io::stderr(), "compose hash {}", rendered.hash_hex());
                }
            }
            Ok(true)
        }
        Command::Dev { output } => {
            let rendered = compose_pin::render_dev()?;
            if let Some(path) = &output {
                write_out(path, rendered.bytes())?;
            }
            say(&rendered.hash_hex())?;
            Ok(true)
        }
        Command::Hash { file } => {
            let bytes = std::fs::read(&file).map_err(|source| CliError::Read {
                path: file.clone(),
                source,
            })?;
            let checked = check_app_compose(&bytes).map_err(|source| CliError::Check {
                path: file.clone(),
                source,
            })?;
            say(&hex::encode(checked.hash))?;
            let form = match checked.format {
                ComposeFormat::Current => "current form (key_provider \"kms\")",
                ComposeFormat::Legacy => "legacy form (kms_enabled true, for dstack before 0.5.6)",
            };
            let pin = if checked.key_provider_id.is_empty() {
                "no KMS pin".to_owned()
            } else {
                format!("KMS pinned to {}", hex::encode(checked.key_provider_id))
            };
            let _ = writeln!(std::io::stderr(), "{form}, {pin}");
            Ok(true)
        }
        Command::Propose(args) => {
            let hash = parse_hash(&args.chain.hash)?;
            if args.calldata_only {
                say(&format!("to   {}", args.chain.governance))?;
                say(&format!(
                    "data {}",
                    governance::add_compose_hash_calldata(hash)
                ))?;
                return Ok(true);
            }
            let key = std::env::var("GOVERNANCE_OWNER_KEY").map_err(|_| CliError::NoOwnerKey)?;
            let result = runtime()?.block_on(governance::propose(
                &args.chain.rpc,
                args.chain.governance,
                &key,
                hash,
            ));
            match result? {
                Proposed::Added(tx) => say(&format!(
                    "compose hash {} allowed (transaction {tx})",
                    hex::encode(hash)
                ))?,
                Proposed::AlreadyAllowed => say(&format!(
                    "compose hash {} was already allowed; nothing sent",
                    hex::encode(hash)
                ))?,
            }
            Ok(true)
        }
        Command::Allowed(args) => {
            let hash = parse_hash(&args.hash)?;
            let allowed =
                runtime()?.block_on(governance::is_allowed(&args.rpc, args.governance, hash))?;
            say(if allowed { "allowed" } else { "not allowed" })?;
            Ok(allowed)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match run(cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "compose-pin: {err}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_hash_is_named_as_given() {
        assert_eq!(
            parse_hash(" 0x01 ").err().map(|e| e.to_string()).as_deref(),
            Some("\" 0x01 \" is not a 32-byte hex compose hash")
        );
        let hash = format!("0x{}", "ab".repeat(32));
        assert_eq!(parse_hash(&hash).ok(), Some([0xab; 32]));
    }
}
