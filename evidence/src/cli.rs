//! The `evidence` command: `verify` (online or offline), `os-measure` to publish an OS
//! image's measurements, plus `quote` and `replay` to look inside a quote or an event log.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};

use crate::bundle::{Bundle, ConnectTo};
use crate::check::{CHECKS, Options};
use crate::collateral::CollateralSource;
use crate::event_log::EventLog;
use crate::os_image::{OsImage, OsPolicy, VmShape, hex48 as evidence_hex48, parse_memory_size};
use crate::quote::{TdxQuote, decode_quote_text};
use crate::verify::Policy;

/// Exit code when a required check failed.
pub const EXIT_FAILED: u8 = 1;
/// Exit code for usage errors and evidence that could not be collected.
pub const EXIT_ERROR: u8 = 2;

#[derive(Parser, Debug)]
#[command(
    name = "evidence",
    version,
    about = "Verify a deployment's TDX attestation evidence"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check a deployment: the spec's six rules, the DCAP quote, the RTMR replay and the
    /// compose-hash event. Exit status 0 = verified, 1 = a check failed, 2 = error.
    Verify(Box<VerifyArgs>),
    /// Parse a quote (hex, 0x-hex, JSON byte array, or raw bytes) and print its fields.
    Quote { file: PathBuf },
    /// Replay an event log (JSON array, or a JSON string holding one) and print the RTMRs
    /// and the identity recorded before system-ready.
    Replay { file: PathBuf },
    /// Recompute the measurements of a dstack OS image for a VM shape and write them as a
    /// policy entry for `evidence verify --os-measurements` (MRTD, RTMR1, RTMR2 from the
    /// image; RTMR0 only if given with --rtmr0).
    OsMeasure(OsMeasureArgs),
}

#[derive(Args, Debug)]
struct OsMeasureArgs {
    /// The image directory (metadata.json, sha256sum.txt and the files they name).
    dir: PathBuf,
    /// vCPUs of the VM.
    #[arg(long)]
    cpus: u32,
    /// Memory of the VM: bytes, or e.g. 2G, 4096M.
    #[arg(long, value_parser = parse_memory_size)]
    memory: u64,
    /// RTMR0 (96 hex) of a VM of this shape, if known (e.g. read from a deployment's
    /// quote, or computed with dstack-mr): without it, RTMR0 stays unpinned.
    #[arg(long, value_name = "HEX")]
    rtmr0: Option<String>,
    /// Further vm_config shape fields the entry applies to, as KEY=JSON (e.g.
    /// qemu_version="9.2.1", num_gpus=0).
    #[arg(long = "shape", value_name = "KEY=JSON")]
    shape: Vec<String>,
    /// Add the entry to this policy file (created if absent; an entry for the same image
    /// and shape is replaced) instead of printing a policy with only this entry.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct VerifyArgs {
    /// Fetch the evidence from a running deployment (https://host[:port]).
    #[arg(long, conflicts_with = "bundle", required_unless_present = "bundle")]
    url: Option<String>,
    /// Verify saved responses in DIR (layout in the README).
    #[arg(long, value_name = "DIR")]
    bundle: Option<PathBuf>,
    /// Save what was fetched with --url as a bundle in DIR.
    #[arg(long, value_name = "DIR", requires = "url")]
    save: Option<PathBuf>,
    /// Extra CA certificate(s) (PEM) to trust for --url, beside the web PKI.
    #[arg(long, value_name = "PEM")]
    ca_file: Option<PathBuf>,
    /// Connect to IP:PORT instead of where the --url host resolves (as curl's
    /// --connect-to): the host name stays the TLS server name (SNI), the name the
    /// certificate must carry and the Host header. E.g. a dstack-gateway node before DNS
    /// points at it. The URL must name no port, or this one.
    #[arg(long, value_name = "IP:PORT", requires = "url")]
    connect: Option<SocketAddr>,
    /// DNS server for the CAA and gateway-route lookups (IP:PORT); default: the system
    /// resolver (online only).
    #[arg(long, value_name = "IP:PORT")]
    dns: Option<SocketAddr>,
    /// The deployment must be behind dstack-gateway: gateway-route fails unless the
    /// attested app_compose enables the gateway and the domain's _dstack-app-address TXT
    /// record names the attested app id (or instance id) and a port its compose publishes.
    /// Without it, gateway-route runs whenever the attested app_compose enables the gateway.
    #[arg(long)]
    gateway: bool,
    /// Domain for the CAA lookup (default: the host of --url, or the bundle's domain.txt).
    #[arg(long)]
    domain: Option<String>,
    /// JSON-RPC URL of the settlement chain, for the governance contract (rule 6).
    #[arg(long, value_name = "URL")]
    rpc_url: Option<String>,
    /// dcap-qvl collateral JSON (QuoteCollateralV3) for the quotes.
    #[arg(long, value_name = "FILE", conflicts_with = "pccs_url")]
    collateral: Option<PathBuf>,
    /// Fetch collateral from this PCCS (e.g. https://pccs.example:8081).
    #[arg(long, value_name = "URL")]
    pccs_url: Option<String>,
    /// Judge quotes and collateral at this Unix time (default: now).
    #[arg(long, value_name = "UNIX_SECONDS")]
    at: Option<u64>,
    /// TCB statuses that pass (default: UpToDate).
    #[arg(long, value_delimiter = ',', default_value = "UpToDate")]
    accept_status: Vec<String>,
    /// Accept quotes from the `simulated` provider (development only: NOT confidential).
    #[arg(long)]
    allow_simulated: bool,
    /// Skip checks by name (comma-separated).
    #[arg(long, value_delimiter = ',')]
    skip: Vec<String>,
    /// Count skipped checks as failures.
    #[arg(long)]
    strict: bool,
    /// Accept an evidence quote that does not carry the nonce this run sent (a stale or
    /// replayed quote): `freshness` is then skipped instead of failing. A nonce is sent
    /// either way.
    #[arg(long)]
    allow_stale: bool,
    /// Accepted OS measurements: a policy file (JSON, written by `evidence os-measure`).
    #[arg(long, value_name = "FILE")]
    os_measurements: Option<PathBuf>,
    /// A dstack OS image directory to recompute MRTD, RTMR1 and RTMR2 from.
    #[arg(long, value_name = "DIR")]
    os_image: Option<PathBuf>,
    /// Accept a quote whose OS measurements (MRTD, RTMR0-2) are not all pinned: the report
    /// then does not verify which OS ran.
    #[arg(long)]
    allow_unpinned_os: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return error(&format!("tokio runtime: {e}")),
    };
    match cli.command {
        Command::Verify(args) => runtime.block_on(verify(*args)),
        Command::Quote { file } => show_quote(&file),
        Command::Replay { file } => replay(&file),
        Command::OsMeasure(args) => os_measure(&args),
    }
}

fn out(s: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(s.as_bytes());
    let _ = o.flush();
}

fn error(msg: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr().lock(), "evidence: {msg}");
    ExitCode::from(EXIT_ERROR)
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

async fn verify(args: VerifyArgs) -> ExitCode {
    for s in &args.skip {
        if !CHECKS.iter().any(|(id, _)| id == s) {
            let names: Vec<&str> = CHECKS.iter().map(|(id, _)| *id).collect();
            return error(&format!(
                "unknown check {s:?} in --skip; checks: {}",
                names.join(", ")
            ));
        }
    }
    let os_policy = match &args.os_measurements {
        Some(f) => match OsPolicy::load(f) {
            Ok(p) => Some(p),
            Err(e) => return error(&format!("--os-measurements: {e}")),
        },
        None => None,
    };
    let os_image = match &args.os_image {
        Some(d) => match OsImage::load(d) {
            Ok(i) => Some(Arc::new(i)),
            Err(e) => return error(&format!("--os-image {}: {e}", d.display())),
        },
        None => None,
    };
    let (bundle, online) = match (&args.url, &args.bundle) {
        (Some(url), _) => {
            let connect = match args.connect.map(|addr| ConnectTo::new(url, addr)) {
                None => None,
                Some(Ok(c)) => Some(c),
                Some(Err(e)) => return error(&e.to_string()),
            };
            match Bundle::fetch_via(url, args.ca_file.as_deref(), connect.as_ref()).await {
                Ok(b) => (b, true),
                Err(e) => return error(&e.to_string()),
            }
        }
        (None, Some(dir)) => match Bundle::load(dir) {
            Ok(b) => (b, false),
            Err(e) => return error(&e.to_string()),
        },
        (None, None) => return error("give --url or --bundle"),
    };
    if let Some(dir) = &args.save
        && let Err(e) = bundle.save(dir)
    {
        return error(&e.to_string());
    }
    let collateral = match (&args.collateral, &args.pccs_url) {
        (Some(f), _) => Some(CollateralSource::File(f.clone())),
        (None, Some(u)) => Some(CollateralSource::Pccs(u.clone())),
        (None, None) => None,
    };
    let opts = Options {
        policy: Policy {
            accepted_statuses: args.accept_status,
            allow_simulated: args.allow_simulated,
        },
        at: args.at.unwrap_or_else(now),
        collateral,
        rpc_url: args.rpc_url,
        dns_server: args.dns,
        online,
        domain: args.domain,
        skip: args.skip,
        strict: args.strict,
        allow_stale: args.allow_stale,
        os_policy,
        os_image,
        allow_unpinned_os: args.allow_unpinned_os,
        gateway: args.gateway,
    };
    let report = crate::check::run(&bundle, &opts).await;
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(s) => out(&format!("{s}\n")),
            Err(e) => return error(&e.to_string()),
        }
    } else {
        out(&report.to_text());
    }
    if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    }
}

fn os_measure(args: &OsMeasureArgs) -> ExitCode {
    let image = match OsImage::load(&args.dir) {
        Ok(i) => i,
        Err(e) => return error(&format!("{}: {e}", args.dir.display())),
    };
    let rtmr0 = match args
        .rtmr0
        .as_deref()
        .map(|r| evidence_hex48(r, "--rtmr0").map_err(|e| e.to_string()))
    {
        None => None,
        Some(Ok(r)) => Some(r),
        Some(Err(e)) => return error(&e),
    };
    let mut shape = VmShape {
        cpu_count: Some(args.cpus),
        memory_size: Some(args.memory),
        ..VmShape::default()
    };
    for kv in &args.shape {
        let Some((k, v)) = kv.split_once('=') else {
            return error(&format!("--shape {kv:?}: give KEY=JSON"));
        };
        if matches!(k, "cpu_count" | "memory_size") {
            return error("--shape: give the CPU count and memory with --cpus and --memory");
        }
        let value = serde_json::from_str(v).unwrap_or_else(|_| serde_json::json!(v));
        shape.other.insert(k.to_owned(), value);
    }
    let entry = match image.entry(shape, rtmr0) {
        Ok(e) => e,
        Err(e) => return error(&e.to_string()),
    };
    let mut policy = match &args.out {
        Some(f) if f.exists() => match OsPolicy::load(f) {
            Ok(p) => p,
            Err(e) => return error(&e.to_string()),
        },
        _ => OsPolicy::default(),
    };
    policy.insert(entry);
    let text = match serde_json::to_string_pretty(&policy) {
        Ok(t) => format!("{t}\n"),
        Err(e) => return error(&e.to_string()),
    };
    match &args.out {
        Some(f) => {
            if let Err(e) = std::fs::write(f, text) {
                return error(&format!("{}: {e}", f.display()));
            }
        }
        None => out(&text),
    }
    ExitCode::SUCCESS
}

/// A file a command could not read.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
struct ReadError {
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

fn read_quote(file: &PathBuf) -> Result<Vec<u8>, ReadError> {
    let bytes = std::fs::read(file).map_err(|source| ReadError {
        path: file.clone(),
        source,
    })?;
    if let Ok(text) = std::str::from_utf8(&bytes)
        && let Ok(q) = decode_quote_text(text)
    {
        return Ok(q);
    }
    Ok(bytes)
}

fn show_quote(file: &PathBuf) -> ExitCode {
    let bytes = match read_quote(file) {
        Ok(b) => b,
        Err(e) => return error(&e.to_string()),
    };
    match TdxQuote::parse(&bytes) {
        Ok(q) => {
            let v = serde_json::json!({
                "simulated": q.is_simulated(),
                "header": q.header,
                "report": q.report,
                "signed_len": q.signed_len,
                "signature_data_len": q.signature_data.len(),
            });
            out(&format!(
                "{}\n",
                serde_json::to_string_pretty(&v).unwrap_or_default()
            ));
            ExitCode::SUCCESS
        }
        Err(e) => error(&e.to_string()),
    }
}

fn replay(file: &PathBuf) -> ExitCode {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => return error(&format!("{}: {e}", file.display())),
    };
    let value: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return error(&format!("not JSON: {e}")),
    };
    // Accept a bare log, a string holding one, or an object with `event_log`.
    let value = value.get("event_log").cloned().unwrap_or(value);
    let log = match EventLog::from_value(&value) {
        Ok(l) => l,
        Err(e) => return error(&e.to_string()),
    };
    let rtmrs = log.replay();
    let identity = match log.identity() {
        Ok(i) => serde_json::to_value(i).unwrap_or_default(),
        Err(e) => serde_json::json!({ "error": e.to_string() }),
    };
    let v = serde_json::json!({
        "events": log.events.len(),
        "rtmr0": hex::encode(rtmrs[0]),
        "rtmr1": hex::encode(rtmrs[1]),
        "rtmr2": hex::encode(rtmrs[2]),
        "rtmr3": hex::encode(rtmrs[3]),
        "identity": identity,
    });
    out(&format!(
        "{}\n",
        serde_json::to_string_pretty(&v).unwrap_or_default()
    ));
    ExitCode::SUCCESS
}
