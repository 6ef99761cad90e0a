//! `compose-pin` — render the appliance's compose template with pinned images into a dstack
//! `app-compose.json`, print its compose hash, check a rendered file, and propose a hash
//! to the governance contract.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use alloy::primitives::Address;
use clap::{Args, Parser, Subcommand};
use compose_pin::{
    DEFAULT_NAME, ImageRef, RenderOptions, TEMPLATE, check_app_compose,
    governance::{self, Proposed},
    render,
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

fn parse_hash(s: &str) -> Result<[u8; 32], String> {
    let h = s.trim();
    let h = h.strip_prefix("0x").unwrap_or(h);
    let mut out = [0u8; 32];
    hex::decode_to_slice(h, &mut out)
        .map_err(|_| format!("{s:?} is not a 32-byte hex compose hash"))?;
    Ok(out)
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

fn write_out(path: &std::path::Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn run(cli: Cli) -> Result<bool, String> {
    let mut out = std::io::stdout().lock();
    let mut say = |line: &str| writeln!(out, "{line}").map_err(|e| e.to_string());
    match cli.command {
        Command::Render(args) => {
            let image: ImageRef = args.image.parse().map_err(|e| format!("{e}"))?;
            let template = match &args.template {
                Some(p) => std::fs::read_to_string(p)
                    .map_err(|e| format!("cannot read {}: {e}", p.display()))?,
                None => TEMPLATE.to_owned(),
            };
            let mut options = RenderOptions::new(image);
            options.name = args.name;
            options.public_logs = args.public_logs;
            if let Some(p) = &args.config {
                options.appliance_config = std::fs::read_to_string(p)
                    .map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            }
            if !args.allowed_envs.is_empty() {
                options.allowed_envs = args.allowed_envs;
            }
            let rendered = render(&template, &options).map_err(|e| e.to_string())?;
            match &args.output {
                Some(path) => {
                    write_out(path, rendered.bytes())?;
                    say(&rendered.hash_hex())?;
                }
                None => {
                    std::io::stdout()
                        .write_all(rendered.bytes())
                        .map_err(|e| e.to_string())?;
                    let _ = writeln!(std::io::stderr(), "compose hash {}", rendered.hash_hex());
                }
            }
            Ok(true)
        }
        Command::Dev { output } => {
            let rendered = compose_pin::render_dev().map_err(|e| e.to_string())?;
            if let Some(path) = &output {
                write_out(path, rendered.bytes())?;
            }
            say(&rendered.hash_hex())?;
            Ok(true)
        }
        Command::Hash { file } => {
            let bytes =
                std::fs::read(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let checked =
                check_app_compose(&bytes).map_err(|e| format!("{}: {e}", file.display()))?;
            say(&hex::encode(checked.hash))?;
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
            let key = std::env::var("GOVERNANCE_OWNER_KEY").map_err(|_| {
                "set GOVERNANCE_OWNER_KEY to the owner's private key (or use --calldata-only)"
                    .to_owned()
            })?;
            let result = runtime()?.block_on(governance::propose(
                &args.chain.rpc,
                args.chain.governance,
                &key,
                hash,
            ));
            match result.map_err(|e| e.to_string())? {
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
            let allowed = runtime()?
                .block_on(governance::is_allowed(&args.rpc, args.governance, hash))
                .map_err(|e| e.to_string())?;
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
        Err(message) => {
            let _ = writeln!(std::io::stderr(), "compose-pin: {message}");
            ExitCode::from(2)
        }
    }
}
