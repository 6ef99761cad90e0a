//! `image-build` — the appliance's reproducible OCI image: written from built static
//! binaries, or (`build`, `verify`) from a reproducible release build of the checkout.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use oci_image::reproduce::{BuildPaths, PACKAGES, SourceState, source_state, toolchain_summary};
use oci_image::sbom::SbomError;
use oci_image::{
    DEFAULT_BINARIES, Image, ImageError, ImageSpec, Libraries, Written, binaries_in,
    build_with_files, sbom, write_layout,
};
use sha2::Digest as _;

#[derive(Parser)]
#[command(
    name = "image-build",
    version,
    about = "Write the appliance's reproducible OCI image (layout + docker-load archive)",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Without a subcommand: write the image from binaries built already.
    #[command(flatten)]
    write: WriteArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Reproducible release build of the checked-out source (static binaries, remapped
    /// paths, SOURCE_DATE_EPOCH = commit time), then the image.
    Build(BuildArgs),
    /// The release build of some of the image's packages only, compiled exactly as
    /// `build` compiles them; prints `sha256  binary` per binary they produce (the quick
    /// reproducibility check of scripts/reproduce compares two such lists).
    Compile {
        /// A package of the image (appliance, keyservice, action-runtime,
        /// worker-launcher, evidence); repeatable.
        #[arg(long = "package", short = 'p', required = true)]
        packages: Vec<String>,
        #[command(flatten)]
        build: BuildArgs,
    },
    /// Rebuild as `build` does and say whether the pinned digest is what this source
    /// produces. Exit status: 0 it is, 1 it is not, 2 the build failed.
    Verify {
        /// The pinned image: `sha256:<hex>` or `NAME@sha256:<hex>`.
        #[arg(long, required_unless_present = "compose", conflicts_with = "compose")]
        digest: Option<String>,
        /// Take the pinned image from this file instead (e.g. `app-compose.json`): every
        /// `@sha256:<hex>` in it must name the same image.
        #[arg(long)]
        compose: Option<PathBuf>,
        #[command(flatten)]
        build: BuildArgs,
    },
}

#[derive(Args)]
struct WriteArgs {
    /// Directory holding the built binaries (statically linked, e.g.
    /// target/x86_64-unknown-linux-gnu/release as `build` makes them).
    #[arg(long, required = true)]
    bin_dir: Option<PathBuf>,
    /// The binaries to include, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = DEFAULT_BINARIES.iter().map(|s| (*s).to_owned()))]
    binaries: Vec<String>,
    /// DEVELOPMENT ONLY: leave out binaries that are not built (with a warning) instead of
    /// failing. An image built this way is incomplete and must not be deployed.
    #[arg(long)]
    allow_missing: bool,
    /// TESTS ONLY: do not check that the binaries are statically linked (inputs that are
    /// not executables). The image carries no shared library either way.
    #[arg(long)]
    unchecked: bool,
    /// Every timestamp in the image. Default: $SOURCE_DATE_EPOCH (required).
    #[arg(long, env = "SOURCE_DATE_EPOCH", required = true)]
    source_date_epoch: Option<u64>,
    /// The `docker load` tag.
    #[arg(long, default_value = "appliance:latest")]
    tag: String,
    /// Output directory: oci/ (OCI layout), appliance-image.tar (docker load -i), image-digest.
    #[arg(long, required = true)]
    out: Option<PathBuf>,
    /// The repository name printed with the digest (NAME@sha256:…), for `compose-pin render --image`.
    #[arg(long, default_value = "appliance")]
    repository: String,
    /// The checkout the binaries were built from: the image then carries the binaries' SBOM
    /// (`cargo tree` of the release build, in /usr/share/appliance/sbom.json and OUT/sbom.json).
    #[arg(long)]
    sbom_workspace: Option<PathBuf>,
}

#[derive(Args)]
struct BuildArgs {
    /// The checkout to build (its commit's time is SOURCE_DATE_EPOCH).
    #[arg(long, default_value = ".")]
    source: PathBuf,
    /// Cargo's target directory for the release build. Default: $CARGO_TARGET_DIR, else
    /// SOURCE/target.
    #[arg(long, env = "CARGO_TARGET_DIR")]
    target_dir: Option<PathBuf>,
    /// Output directory of the image. Default: TARGET_DIR/image.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The repository name printed with the digest (NAME@sha256:…).
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
    let result = match &cli.command {
        None => write_cmd(&cli.write).map(|()| ExitCode::SUCCESS),
        Some(Command::Build(args)) => build_cmd(args).map(|()| ExitCode::SUCCESS),
        Some(Command::Compile { packages, build }) => {
            compile_cmd(packages, build).map(|()| ExitCode::SUCCESS)
        }
        Some(Command::Verify {
            digest,
            compose,
            build,
        }) => verify_cmd(digest.as_deref(), compose.as_deref(), build),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "image-build: {err}");
            ExitCode::from(2)
        }
    }
}

/// Why a command failed; printed after `image-build: ` with exit status 2.
#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error("--bin-dir, --out and --source-date-epoch are required")]
    MissingWriteArgs,
    #[error("give --digest or --compose")]
    NoPinnedImage,
    #[error("{package} is not a package of the image (one of {})", PACKAGES.join(", "))]
    NotAPackage { package: String },
    #[error(transparent)]
    Image(#[from] ImageError),
    #[error(transparent)]
    Sbom(#[from] SbomError),
    #[error("cannot create {path}: {source}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read {path}: {source}")]
    ReadBinary {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Reading the `--compose` file or writing `OUT/sbom.json`.
    #[error("{path}: {source}")]
    File {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot run cargo: {0}")]
    Cargo(#[source] std::io::Error),
    #[error("the release build failed ({0})")]
    BuildFailed(std::process::ExitStatus),
    /// The `--digest` given.
    #[error(transparent)]
    Pinned(#[from] PinnedError),
    /// The `--compose` file at `path`.
    #[error("{path}: {source}")]
    Compose {
        path: PathBuf,
        #[source]
        source: PinnedError,
    },
    /// Standard output could not be written.
    #[error(transparent)]
    Stdout(std::io::Error),
}

/// Why a reference or a compose file does not name exactly one pinned image.
#[derive(Debug, thiserror::Error)]
enum PinnedError {
    #[error("{reference:?} is not a pinned image (sha256:<64 hex> or NAME@sha256:<64 hex>)")]
    NotPinned { reference: String },
    #[error("it pins no image (no NAME@sha256:<hex>)")]
    NoImage,
    #[error("it pins several images: {}", .0.join(", "))]
    Several(Vec<String>),
}

fn print_digest(image: &Image, repository: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", image.digest_string()).map_err(CliError::Stdout)?;
    writeln!(out, "{repository}@{}", image.digest_string()).map_err(CliError::Stdout)
}

fn create_dir(out: &Path) -> Result<(), CliError> {
    std::fs::create_dir_all(out).map_err(|source| CliError::CreateDir {
        path: out.to_owned(),
        source,
    })
}

/// Runs a release build; an error if cargo cannot be run or the build fails.
fn cargo(mut command: std::process::Command) -> Result<(), CliError> {
    let status = command.status().map_err(CliError::Cargo)?;
    if !status.success() {
        return Err(CliError::BuildFailed(status));
    }
    Ok(())
}

fn write_cmd(cli: &WriteArgs) -> Result<(), CliError> {
    let (Some(bin_dir), Some(out), Some(epoch)) = (&cli.bin_dir, &cli.out, cli.source_date_epoch)
    else {
        return Err(CliError::MissingWriteArgs);
    };
    let (binaries, missing) = binaries_in(bin_dir, &cli.binaries, cli.allow_missing)?;
    for name in &missing {
        tracing::warn!(
            binary = %name,
            "binary not built: left out of the image (--allow-missing; do NOT deploy this image)"
        );
    }
    let spec = ImageSpec {
        binaries,
        source_date_epoch: epoch,
        libraries: if cli.unchecked {
            Libraries::Unchecked
        } else {
            Libraries::StaticOnly
        },
        tag: cli.tag.clone(),
    };
    let names: Vec<String> = spec.binaries.iter().map(|b| b.name.clone()).collect();
    let sbom = match &cli.sbom_workspace {
        Some(workspace) => Some(sbom_of(workspace, &names)?),
        None => None,
    };
    let image = build_with_sbom(&spec, sbom.as_deref())?;
    create_dir(out)?;
    let written = write_layout(&image, out, epoch)?;
    write_sbom(out, sbom.as_deref())?;
    log_written(&image, &written);
    print_digest(&image, &cli.repository)
}

/// The SBOM of `binaries` as `workspace`'s release build resolves them ([`sbom`]).
fn sbom_of(workspace: &Path, binaries: &[String]) -> Result<Vec<u8>, CliError> {
    let bytes = sbom::generate(workspace, binaries).and_then(|s| s.to_bytes())?;
    tracing::info!(sbom = %sbom::digest_string(&bytes), "SBOM of the binaries");
    Ok(bytes)
}

/// [`build_with_files`] with the SBOM, if any, at [`sbom::IMAGE_PATH`].
fn build_with_sbom(spec: &ImageSpec, sbom: Option<&[u8]>) -> Result<Image, CliError> {
    let files: Vec<(&str, &[u8])> = sbom.map(|b| (sbom::IMAGE_PATH, b)).into_iter().collect();
    Ok(build_with_files(spec, &files)?)
}

/// `OUT/sbom.json` beside the image (or no file without an SBOM).
fn write_sbom(out: &Path, sbom: Option<&[u8]>) -> Result<(), CliError> {
    let path = out.join(sbom::FILE_NAME);
    match sbom {
        Some(bytes) => std::fs::write(&path, bytes),
        None => match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
    }
    .map_err(|source| CliError::File { path, source })
}

fn log_written(image: &Image, written: &Written) {
    tracing::info!(
        binaries = %image.binaries.join(","),
        layout = %written.layout_dir.display(),
        archive = %written.archive.display(),
        "image written"
    );
}

/// The binary of the image that package `package` builds.
fn binary_of(package: &str) -> Option<&'static str> {
    sbom::BINARY_PACKAGES
        .iter()
        .find(|(_, p)| *p == package)
        .map(|(binary, _)| *binary)
}

fn compile_cmd(packages: &[String], args: &BuildArgs) -> Result<(), CliError> {
    let mut binaries = Vec::new();
    for p in packages {
        binaries.push(binary_of(p).ok_or_else(|| CliError::NotAPackage { package: p.clone() })?);
    }
    let state = source_state(&args.source)?;
    let target_dir = args
        .target_dir
        .clone()
        .unwrap_or_else(|| args.source.join("target"));
    let paths = BuildPaths::for_build(&args.source, &target_dir)?;
    let packages: Vec<&str> = packages.iter().map(String::as_str).collect();
    cargo(paths.cargo_build_packages(state.commit_time, &packages))?;
    let mut out = std::io::stdout().lock();
    for name in binaries {
        let path = paths.release_dir().join(name);
        let bytes = std::fs::read(&path).map_err(|source| CliError::ReadBinary {
            path: path.clone(),
            source,
        })?;
        let digest = hex::encode(sha2::Sha256::digest(&bytes));
        writeln!(out, "{digest}  {name}").map_err(CliError::Stdout)?;
    }
    Ok(())
}

/// The release build of `args.source` and its image.
fn reproducible_build(args: &BuildArgs) -> Result<(Image, SourceState), CliError> {
    let state = source_state(&args.source)?;
    if state.dirty {
        tracing::warn!(
            commit = %state.commit,
            "the checkout has uncommitted changes: this image is of the work tree, not of the commit"
        );
    }
    let target_dir = args
        .target_dir
        .clone()
        .unwrap_or_else(|| args.source.join("target"));
    let paths = BuildPaths::for_build(&args.source, &target_dir)?;
    tracing::info!(
        commit = %state.commit,
        source_date_epoch = state.commit_time,
        target_dir = %paths.target_dir.display(),
        "release build (static, remapped paths)"
    );
    cargo(paths.cargo_build(state.commit_time))?;
    let names: Vec<String> = DEFAULT_BINARIES.iter().map(|s| (*s).to_owned()).collect();
    let (binaries, _) = binaries_in(&paths.release_dir(), &names, false)?;
    let short = state.commit.get(..12).unwrap_or(&state.commit);
    let spec = ImageSpec {
        binaries,
        source_date_epoch: state.commit_time,
        libraries: Libraries::StaticOnly,
        tag: format!("appliance:{short}"),
    };
    let sbom = sbom_of(&args.source, &names)?;
    let image = build_with_sbom(&spec, Some(&sbom))?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| paths.target_dir.join("image"));
    create_dir(&out)?;
    let written = write_layout(&image, &out, state.commit_time)?;
    write_sbom(&out, Some(&sbom))?;
    log_written(&image, &written);
    Ok((image, state))
}

fn build_cmd(args: &BuildArgs) -> Result<(), CliError> {
    let (image, _) = reproducible_build(args)?;
    print_digest(&image, &args.repository)
}

/// `sha256:<64 lowercase hex>` from `sha256:…` or `NAME@sha256:…`.
fn parse_pinned(reference: &str) -> Result<String, PinnedError> {
    let digest = reference
        .rsplit_once('@')
        .map_or(reference, |(_, d)| d)
        .trim();
    match digest.strip_prefix("sha256:") {
        Some(hex)
            if hex.len() == 64
                && hex
                    .bytes()
                    .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)) =>
        {
            Ok(digest.to_owned())
        }
        _ => Err(PinnedError::NotPinned {
            reference: reference.to_owned(),
        }),
    }
}

/// The one image digest `text` pins (every `@sha256:<hex>` in it).
fn pinned_in(text: &str) -> Result<String, PinnedError> {
    let mut found: Vec<String> = Vec::new();
    for (at, _) in text.match_indices("@sha256:") {
        let candidate = text.get(at + 1..at + 1 + 7 + 64).unwrap_or_default();
        let digest = parse_pinned(candidate)?;
        if !found.contains(&digest) {
            found.push(digest);
        }
    }
    match found.len() {
        1 => Ok(found.swap_remove(0)),
        0 => Err(PinnedError::NoImage),
        _ => Err(PinnedError::Several(found)),
    }
}

fn verify_cmd(
    digest: Option<&str>,
    compose: Option<&Path>,
    args: &BuildArgs,
) -> Result<ExitCode, CliError> {
    let pinned = match (digest, compose) {
        (Some(d), _) => parse_pinned(d)?,
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path).map_err(|source| CliError::File {
                path: path.to_owned(),
                source,
            })?;
            pinned_in(&text).map_err(|source| CliError::Compose {
                path: path.to_owned(),
                source,
            })?
        }
        (None, None) => return Err(CliError::NoPinnedImage),
    };
    let (image, state) = reproducible_build(args)?;
    let rebuilt = image.digest_string();
    let tree = if state.dirty {
        "the work tree, with uncommitted changes"
    } else {
        "clean"
    };
    let mut out = std::io::stdout().lock();
    let w = |out: &mut std::io::StdoutLock<'_>, line: String| {
        writeln!(out, "{line}").map_err(CliError::Stdout)
    };
    w(&mut out, format!("pinned:  {pinned}"))?;
    w(
        &mut out,
        format!("rebuilt: {rebuilt}  (commit {}, {tree})", state.commit),
    )?;
    if rebuilt == pinned {
        w(
            &mut out,
            "MATCH: the pinned image is the one this source builds".into(),
        )?;
        Ok(ExitCode::SUCCESS)
    } else {
        w(
            &mut out,
            "MISMATCH: this source does not build the pinned image".into(),
        )?;
        w(
            &mut out,
            format!(
                "built with: {}  (the image depends on the commit, the pinned Rust toolchain, and the C compiler and static glibc of the build system: see image/README.md)",
                toolchain_summary(&args.source)
            ),
        )?;
        Ok(ExitCode::from(1))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn pinned_references_parse_in_both_forms_and_nothing_else() {
        let want = format!("sha256:{HEX}");
        assert_eq!(parse_pinned(&want).unwrap(), want);
        assert_eq!(parse_pinned(&format!("appliance@{want}")).unwrap(), want);
        assert!(parse_pinned(&format!("sha256:{}", HEX.to_uppercase())).is_err());
        assert!(parse_pinned(&want[..70]).is_err());
        assert!(parse_pinned("appliance:latest").is_err());
    }

    #[test]
    fn a_compose_must_pin_exactly_one_image() {
        let one = format!(
            "{{\"docker_compose_file\":\"image: appliance@sha256:{HEX}\\n  x: appliance@sha256:{HEX}\"}}"
        );
        assert_eq!(pinned_in(&one).unwrap(), format!("sha256:{HEX}"));
        assert!(pinned_in("image: appliance:latest").is_err());
        let other = HEX.replace('0', "1");
        let two = format!("a@sha256:{HEX} b@sha256:{other}");
        let several = pinned_in(&two).unwrap_err();
        assert!(matches!(&several, PinnedError::Several(d) if d.len() == 2));
        assert!(matches!(
            pinned_in("image: appliance:latest"),
            Err(PinnedError::NoImage)
        ));
        // What `verify --compose` prints: the file, then why.
        let err = CliError::Compose {
            path: "app-compose.json".into(),
            source: several,
        };
        assert_eq!(
            err.to_string(),
            format!("app-compose.json: it pins several images: sha256:{HEX}, sha256:{other}")
        );
    }

    #[test]
    fn an_unpinned_digest_is_quoted_back() {
        assert_eq!(
            parse_pinned("appliance:latest").unwrap_err().to_string(),
            "\"appliance:latest\" is not a pinned image (sha256:<64 hex> or NAME@sha256:<64 hex>)"
        );
    }
}
