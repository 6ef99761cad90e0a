//! The root's life cycle: find the sealed root for the measured compose hash, unseal it,
//! create it on the very first run, and reseal it for an allowed upgrade.
//!
//! Files in the state directory:
//! * `root.sealed` — written on first run;
//! * `root.sealed.<first 16 hex of a compose hash>` — written by `reseal` for that hash.
//!
//! At start the keyservice opens `root.sealed.<its hash prefix>` if present, else
//! `root.sealed`. It creates a new root only when no `root.sealed*` file exists at all:
//! a root that does not open (wrong hash, tampered, truncated) stops the start-up.
//!
//! Shared-root mode (`run --shared-root`, replicas of one app) uses no file here: the same
//! sealed format travels as bytes through the front end's shared database
//! ([`create_sealed`], [`open_shared`]; the state machine is [`crate::service`]).

use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use keyservice_api::ComposeHash;
use ring::rand::SystemRandom;

use crate::platform::Platform;
use crate::policy::ComposeHashPolicy;
use crate::sealing::{SealError, SealedRoot, write_new_file};
use crate::secret::{RootSecret, SealingKey};

/// Name of the first sealed root in the state directory.
pub const SEALED_FILE_NAME: &str = "root.sealed";

/// `root.sealed.<16 hex>` for a compose hash.
pub fn sealed_file_for(state_dir: &Path, compose_hash: &ComposeHash) -> PathBuf {
    state_dir.join(format!("{SEALED_FILE_NAME}.{}", compose_hash.short_hex()))
}

/// What start-up found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A sealed root to open.
    Existing(PathBuf),
    /// No sealed root anywhere: first run, create one here.
    Create(PathBuf),
}

/// Finds the sealed root for `measured` (see the module docs). With `explicit`, only that
/// file is considered.
pub fn locate(
    state_dir: &Path,
    measured: &ComposeHash,
    explicit: Option<&Path>,
) -> Result<Location, SealError> {
    if let Some(p) = explicit {
        return Ok(if fs::symlink_metadata(p).is_ok() {
            Location::Existing(p.to_path_buf())
        } else {
            Location::Create(p.to_path_buf())
        });
    }
    let specific = sealed_file_for(state_dir, measured);
    if fs::symlink_metadata(&specific).is_ok() {
        return Ok(Location::Existing(specific));
    }
    let first = state_dir.join(SEALED_FILE_NAME);
    if fs::symlink_metadata(&first).is_ok() {
        return Ok(Location::Existing(first));
    }
    let mut others = Vec::new();
    match fs::read_dir(state_dir) {
        Ok(entries) => {
            for entry in entries {
                let entry = entry.map_err(|source| SealError::Io {
                    path: state_dir.to_path_buf(),
                    source,
                })?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with(SEALED_FILE_NAME) {
                    others.push(name);
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(SealError::Io {
                path: state_dir.to_path_buf(),
                source,
            });
        }
    }
    if !others.is_empty() {
        others.sort();
        return Err(SealError::OtherRootsPresent {
            dir: state_dir.to_path_buf(),
            expected: *measured,
            found: others.join(", "),
        });
    }
    Ok(Location::Create(first))
}

/// Opens an existing sealed root with the platform's key for the measured compose hash.
/// The compose hash in the file must equal the measured one.
pub fn open(
    platform: &dyn Platform,
    path: &Path,
    measured: &ComposeHash,
) -> Result<RootSecret, SealError> {
    let sealed = SealedRoot::read(path)?;
    check_compose_hash(&sealed, measured, path)?;
    let key = platform.sealing_key(measured)?;
    sealed.unseal(&key, path)
}

/// A sealed root opens only under the compose hash it was sealed for.
fn check_compose_hash(
    sealed: &SealedRoot,
    measured: &ComposeHash,
    path: &Path,
) -> Result<(), SealError> {
    if sealed.compose_hash != *measured {
        return Err(SealError::ComposeHashMismatch {
            path: path.to_path_buf(),
            expected: *measured,
            found: sealed.compose_hash,
        });
    }
    Ok(())
}

/// The unsealed root and where it came from.
pub struct Unsealed {
    pub root: RootSecret,
    pub compose_hash: ComposeHash,
    pub path: PathBuf,
    pub created: bool,
}

/// Creates keyservice's state directory (and its parents), readable by its owner only.
pub fn ensure_state_dir(state_dir: &Path) -> Result<(), SealError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(state_dir)
        .map_err(|source| SealError::Io {
            path: state_dir.to_path_buf(),
            source,
        })
}

/// Start-up: measure, locate, then open — or create on the very first run.
pub fn open_or_create(
    platform: &dyn Platform,
    state_dir: &Path,
    explicit: Option<&Path>,
) -> Result<Unsealed, SealError> {
    ensure_state_dir(state_dir)?;
    let measured = platform.measured_compose_hash()?;
    match locate(state_dir, &measured, explicit)? {
        Location::Existing(path) => {
            let root = open(platform, &path, &measured)?;
            tracing::info!(path = %path.display(), compose_hash = %measured, "unsealed the root");
            Ok(Unsealed {
                root,
                compose_hash: measured,
                path,
                created: false,
            })
        }
        Location::Create(path) => {
            let key = platform.sealing_key(&measured)?;
            let (root, sealed) = create_sealed(&key, measured)?;
            write_new_file(&path, &sealed.to_bytes(), &SystemRandom::new())?;
            tracing::info!(
                path = %path.display(),
                compose_hash = %measured,
                "first run: generated and sealed a new root"
            );
            Ok(Unsealed {
                root,
                compose_hash: measured,
                path,
                created: true,
            })
        }
    }
}

/// What error messages call a sealed root handed over as bytes (it has no file name).
pub const SHARED_ROOT_NAME: &str = "<shared sealed root>";

/// Shared-root mode: a new root from the OS CSPRNG sealed to `measured` with `key` (the
/// platform's sealing key for `measured`), exactly as a first run seals its file, but
/// written nowhere: the caller hands the bytes out and keeps nothing.
pub fn create_sealed(
    key: &SealingKey,
    measured: ComposeHash,
) -> Result<(RootSecret, SealedRoot), SealError> {
    let rng = SystemRandom::new();
    let root = RootSecret::generate(&rng)?;
    let sealed = SealedRoot::seal(&root, measured, key, &rng)?;
    Ok((root, sealed))
}

/// Shared-root mode: opens a sealed root handed over as bytes, as [`open`] opens a file:
/// the layout must parse, its compose hash must equal `measured`, and it must authenticate
/// under `key` (the platform's sealing key for `measured`).
pub fn open_shared(
    bytes: &[u8],
    key: &SealingKey,
    measured: &ComposeHash,
) -> Result<RootSecret, SealError> {
    let name = Path::new(SHARED_ROOT_NAME);
    let sealed = SealedRoot::parse(bytes, name)?;
    check_compose_hash(&sealed, measured, name)?;
    sealed.unseal(key, name)
}

/// Rewraps the root in `source` (which must open under the measured compose hash) for
/// `target`, if `policy` allows it, into the new file `output`. The source is untouched
/// and `output` must not exist. The result is re-opened with the target key before
/// returning, so a bad write is caught here rather than at the upgrade.
pub fn reseal(
    platform: &dyn Platform,
    source: &Path,
    target: &ComposeHash,
    policy: &dyn ComposeHashPolicy,
    output: &Path,
) -> Result<(), SealError> {
    let allowed = policy.is_allowed(target)?;
    if !allowed {
        return Err(SealError::NotAllowed {
            target: *target,
            policy: policy.describe(),
        });
    }
    let measured = platform.measured_compose_hash()?;
    let root = open(platform, source, &measured)?;
    let rng = SystemRandom::new();
    let target_key = platform.sealing_key(target)?;
    let sealed = SealedRoot::seal(&root, *target, &target_key, &rng)?;
    write_new_file(output, &sealed.to_bytes(), &rng)?;
    let check = SealedRoot::read(output)?.unseal(&target_key, output)?;
    if check.expose_secret() != root.expose_secret() {
        return Err(SealError::Crypto);
    }
    tracing::info!(
        from = %measured,
        to = %target,
        output = %output.display(),
        "resealed the root"
    );
    Ok(())
}
