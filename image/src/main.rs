//! `image-build` — write the appliance's reproducible OCI image from built binaries.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use oci_image::{DEFAULT_BINARIES, ImageSpec, Libraries, binaries_in, build, write_layout};

#[derive(Parser)]
#[command(
    name = "image-build",
    version,
    about = "Write the appliance's reproducible OCI image (layout + docker-load archive)"
)]
struct Cli {
    /// Directory holding the built binaries (e.g. target/release).
    #[arg(long)]
    bin_dir: PathBuf,
    /// The binaries to include, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = DEFAULT_BINARIES.iter().map(|s| (*s).to_owned()))]
    binaries: Vec<String>,
    /// DEVELOPMENT ONLY: leave out binaries that are not built (with a warning) instead of
    /// failing. An image built this way is incomplete and must not be deployed.
    #[arg(long)]
    allow_missing: bool,
    /// Do not add shared libraries (static binaries only).
    #[arg(long)]
    no_libraries: bool,
    /// Every timestamp in the image. Default: $SOURCE_DATE_EPOCH (required).
    #[arg(long, env = "SOURCE_DATE_EPOCH")]
    source_date_epoch: u64,
    /// The `docker load` tag.
    #[arg(long, default_value = "appliance:latest")]
    tag: String,
    /// Output directory: oci/ (OCI layout), appliance-image.tar (docker load -i), image-digest.
    #[arg(long)]
    out: PathBuf,
    /// The repository name printed with the digest (NAME@sha256:…), for `compose-pin render --image`.
    #[arg(long, default_value = "appliance")]
    repository: String,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            let _ = writeln!(std::io::stderr(), "image-build: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> Result<(), String> {
    let (binaries, missing) =
        binaries_in(&cli.bin_dir, &cli.binaries, cli.allow_missing).map_err(|e| e.to_string())?;
    for name in &missing {
        tracing::warn!(
            binary = %name,
            "binary not built: left out of the image (--allow-missing; do NOT deploy this image)"
        );
    }
    let spec = ImageSpec {
        binaries,
        source_date_epoch: cli.source_date_epoch,
        libraries: if cli.no_libraries {
            Libraries::None
        } else {
            Libraries::Ldd
        },
        tag: cli.tag.clone(),
    };
    let image = build(&spec).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&cli.out)
        .map_err(|e| format!("cannot create {}: {e}", cli.out.display()))?;
    let written =
        write_layout(&image, &cli.out, cli.source_date_epoch).map_err(|e| e.to_string())?;
    tracing::info!(
        binaries = %image.binaries.join(","),
        libraries = image.libraries.len(),
        layout = %written.layout_dir.display(),
        archive = %written.archive.display(),
        "image written"
    );
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", image.digest_string()).map_err(|e| e.to_string())?;
    writeln!(out, "{}@{}", cli.repository, image.digest_string()).map_err(|e| e.to_string())?;
    Ok(())
}
