//! The appliance's OCI image, written as files (no container engine needed) and
//! reproducible: the same binaries and `SOURCE_DATE_EPOCH` give the same image digest,
//! and [`reproduce`] builds the same binaries from the same source on another machine.
//!
//! Layout of the image:
//!
//! * layer 1 (base): `/etc/passwd`, `/etc/group` (users `keyservice` 10001, `appliance`
//!   10002 and `actions` 10003; `appliance` is a member of group `keyservice` so it can
//!   reach the 0660 socket; `actions`, the uid action workers and their launcher run
//!   under, is a member of no group but its own), the state directories with their owners
//!   (`/var/lib/keyservice` 0700 keyservice, `/var/lib/appliance` 0700 appliance,
//!   `/run/keyservice` 0750 keyservice, `/run/worker-launcher` 0750 actions:appliance so
//!   the launcher can create its socket and only the appliance's group can reach it,
//!   `/var/empty` 0555 root, the workers' empty working directory, `/tmp` 1777) and
//!   `/etc/nsswitch.conf` ([`NSSWITCH`]: glibc's built-in sources only). All of
//!   it is generated here: no file of the build host's system is in the image.
//! * layer 2 (app): the binaries in `/usr/local/bin`, 0755 root. Release images take
//!   statically linked binaries only ([`Libraries::StaticOnly`], checked from their ELF
//!   headers by [`elf`]), so the image needs no shared library and carries none.
//!   `image-build` adds the binaries' SBOM, `/usr/share/appliance/sbom.json` ([`sbom`],
//!   through [`build_with_files`]).
//!
//! Both layers are uncompressed tars (`application/vnd.oci.image.layer.v1.tar`) written by
//! [`tar`]: sorted entries, every mtime = `SOURCE_DATE_EPOCH`, numeric owners, no names,
//! no extended attributes. The config's `created` is `SOURCE_DATE_EPOCH` too, so nothing
//! in the image depends on when or where it was built beyond its inputs.
//!
//! Output ([`write_layout`]): an OCI image layout directory (`oci-layout`, `index.json`,
//! `blobs/sha256/…`) that also carries a Docker `manifest.json`, and the same tree as one
//! deterministic tar that `docker load` accepts. The image digest is the SHA-256 of the
//! manifest, the value to pin in the compose file (`NAME@sha256:…`).
//!
//! May depend on: no workspace crate: it packs the built binaries as files, whatever
//! they link.

use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

pub mod elf;
pub mod reproduce;
pub mod sbom;
pub mod tar;

use tar::{Entry, Tree};

/// The binaries the image carries by default (in `/usr/local/bin`).
pub const DEFAULT_BINARIES: &[&str] = &[
    "appliance",
    "keyservice",
    "action-worker",
    "worker-launcher",
    "evidence",
];

/// uid/gid of the keyservice user.
pub const KEYSERVICE_UID: u32 = 10001;
/// uid/gid of the appliance user.
pub const APPLIANCE_UID: u32 = 10002;
/// uid/gid of the action workers and their launcher: in no group but its own, so the
/// keyservice socket (group 10001) and the appliance's data (10002, 0700) are not theirs.
pub const ACTIONS_UID: u32 = 10003;

/// Where the binaries live in the image.
pub const BIN_DIR: &str = "/usr/local/bin";

const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar";
const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";

/// Why the image could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "binary {name} not found at {}; build it (scripts/image does a release build), or pass --allow-missing for a development image",
        path.display()
    )]
    MissingBinary { name: String, path: PathBuf },
    #[error(
        "{}: {why}; the image carries no shared library of the build host, so every binary must be statically linked (scripts/image builds them so)",
        path.display()
    )]
    NotStatic { path: PathBuf, why: String },
    #[error("build: {0}")]
    Build(String),
    #[error("path {0:?} cannot be stored in the image")]
    Path(String),
    #[error("value {0} does not fit a tar header")]
    TooLarge(u64),
    #[error("bad binary name {0:?}")]
    BinaryName(String),
    #[error("bad tag {0:?}: expected NAME:TAG")]
    Tag(String),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ImageError + '_ {
    move |source| ImageError::Io {
        path: path.to_owned(),
        source,
    }
}

/// One binary to put in the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binary {
    /// The file name in `/usr/local/bin`.
    pub name: String,
    /// Where it is on this machine.
    pub path: PathBuf,
}

/// What the binaries must be. Either way the image carries no shared library: nothing
/// of the build host's system goes into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Libraries {
    /// Every binary must be a statically linked ELF executable (the release image, and
    /// the default of `image-build`).
    StaticOnly,
    /// No check (test inputs that are not executables).
    Unchecked,
}

/// The inputs of one image.
#[derive(Debug, Clone)]
pub struct ImageSpec {
    pub binaries: Vec<Binary>,
    /// Every timestamp in the image (seconds since the epoch).
    pub source_date_epoch: u64,
    pub libraries: Libraries,
    /// `docker load` tag, `NAME:TAG`.
    pub tag: String,
}

/// The binaries `names` in `dir`. Missing ones are an error unless `allow_missing`, in
/// which case they are left out (and returned as the second value, for a warning).
pub fn binaries_in(
    dir: &Path,
    names: &[String],
    allow_missing: bool,
) -> Result<(Vec<Binary>, Vec<String>), ImageError> {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for name in names {
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Err(ImageError::BinaryName(name.clone()));
        }
        let path = dir.join(name);
        if path.is_file() {
            found.push(Binary {
                name: name.clone(),
                path,
            });
        } else if allow_missing {
            missing.push(name.clone());
        } else {
            return Err(ImageError::MissingBinary {
                name: name.clone(),
                path,
            });
        }
    }
    Ok((found, missing))
}

/// Fails unless `binary` is a statically linked ELF executable ([`elf::linkage`]).
pub fn check_static(binary: &Path) -> Result<(), ImageError> {
    let bytes = std::fs::read(binary).map_err(io_err(binary))?;
    let why = match elf::linkage(&bytes) {
        elf::Linkage::Static => return Ok(()),
        elf::Linkage::Dynamic {
            interpreter,
            needed,
        } => format!(
            "dynamically linked (loader {}, {needed} shared libraries needed)",
            interpreter.as_deref().unwrap_or("none")
        ),
        elf::Linkage::NotElf(why) => format!("not an executable: {why}"),
    };
    Err(ImageError::NotStatic {
        path: binary.to_owned(),
        why,
    })
}

fn passwd() -> String {
    format!(
        "root:x:0:0:root:/root:/sbin/nologin\n\
         keyservice:x:{KEYSERVICE_UID}:{KEYSERVICE_UID}:keyservice:/var/lib/keyservice:/sbin/nologin\n\
         appliance:x:{APPLIANCE_UID}:{APPLIANCE_UID}:appliance:/var/lib/appliance:/sbin/nologin\n\
         actions:x:{ACTIONS_UID}:{ACTIONS_UID}:actions:/var/empty:/sbin/nologin\n"
    )
}

/// glibc's name service switch: only its built-in `files` and `dns` sources, which a
/// static binary has without loading any NSS module, and `/etc/hosts` (which the
/// container engine provides) before DNS, as on any distribution (glibc's default without
/// this file would ask DNS first and not read `/etc/hosts` after a negative answer).
pub const NSSWITCH: &str = "passwd: files\ngroup: files\nhosts: files dns\n";

fn group() -> String {
    format!(
        "root:x:0:\n\
         keyservice:x:{KEYSERVICE_UID}:appliance\n\
         appliance:x:{APPLIANCE_UID}:\n\
         actions:x:{ACTIONS_UID}:\n"
    )
}

/// The base layer's tree: users and directories, all generated (nothing is read from
/// this machine).
pub fn base_tree() -> Result<Tree, ImageError> {
    let mut t = Tree::new();
    t.insert("etc/passwd", Entry::file(passwd().into_bytes(), 0o644))?;
    t.insert("etc/group", Entry::file(group().into_bytes(), 0o644))?;
    t.insert(
        "etc/nsswitch.conf",
        Entry::file(NSSWITCH.as_bytes().to_vec(), 0o644),
    )?;
    t.insert("tmp", Entry::dir(0o1777, 0, 0))?;
    t.insert(
        "run/keyservice",
        Entry::dir(0o750, KEYSERVICE_UID, KEYSERVICE_UID),
    )?;
    // The launcher (actions) creates its socket here; the appliance reaches it through
    // the group (its primary group); nobody else may enter.
    t.insert(
        "run/worker-launcher",
        Entry::dir(0o750, ACTIONS_UID, APPLIANCE_UID),
    )?;
    t.insert("var/empty", Entry::dir(0o555, 0, 0))?;
    t.insert(
        "var/lib/keyservice",
        Entry::dir(0o700, KEYSERVICE_UID, KEYSERVICE_UID),
    )?;
    t.insert(
        "var/lib/appliance",
        Entry::dir(0o700, APPLIANCE_UID, APPLIANCE_UID),
    )?;
    t.insert("etc/appliance", Entry::dir(0o755, 0, 0))?;
    Ok(t)
}

/// The app layer's tree: the binaries in [`BIN_DIR`].
pub fn app_tree(binaries: &[Binary]) -> Result<Tree, ImageError> {
    let mut t = Tree::new();
    t.insert(BIN_DIR, Entry::dir(0o755, 0, 0))?;
    for b in binaries {
        let bytes = std::fs::read(&b.path).map_err(io_err(&b.path))?;
        t.insert(&format!("{BIN_DIR}/{}", b.name), Entry::file(bytes, 0o755))?;
    }
    Ok(t)
}

/// A content-addressed blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    pub media_type: &'static str,
    pub bytes: Vec<u8>,
}

impl Blob {
    pub fn digest(&self) -> [u8; 32] {
        Sha256::digest(&self.bytes).into()
    }

    pub fn digest_string(&self) -> String {
        format!("sha256:{}", hex::encode(self.digest()))
    }

    fn descriptor(&self) -> Descriptor {
        Descriptor {
            media_type: self.media_type.to_owned(),
            digest: self.digest_string(),
            size: self.bytes.len() as u64,
            annotations: None,
        }
    }
}

#[derive(Serialize)]
struct Descriptor {
    #[serde(rename = "mediaType")]
    media_type: String,
    digest: String,
    size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<Annotations>,
}

#[derive(Serialize)]
struct Annotations {
    #[serde(rename = "io.containerd.image.name")]
    containerd_name: String,
    #[serde(rename = "org.opencontainers.image.ref.name")]
    ref_name: String,
}

#[derive(Serialize)]
struct Manifest {
    #[serde(rename = "schemaVersion")]
    schema_version: u32,
    #[serde(rename = "mediaType")]
    media_type: &'static str,
    config: Descriptor,
    layers: Vec<Descriptor>,
}

#[derive(Serialize)]
struct Index {
    #[serde(rename = "schemaVersion")]
    schema_version: u32,
    #[serde(rename = "mediaType")]
    media_type: &'static str,
    manifests: Vec<Descriptor>,
}

#[derive(Serialize)]
struct ImageConfig {
    architecture: &'static str,
    os: &'static str,
    created: String,
    config: RunConfig,
    rootfs: RootFs,
    history: Vec<History>,
}

#[derive(Serialize)]
struct RunConfig {
    #[serde(rename = "User")]
    user: String,
    #[serde(rename = "Env")]
    env: Vec<String>,
    #[serde(rename = "Cmd")]
    cmd: Vec<String>,
    #[serde(rename = "WorkingDir")]
    working_dir: &'static str,
}

#[derive(Serialize)]
struct RootFs {
    #[serde(rename = "type")]
    kind: &'static str,
    diff_ids: Vec<String>,
}

#[derive(Serialize)]
struct History {
    created: String,
    created_by: String,
}

#[derive(Serialize)]
struct DockerManifestEntry {
    #[serde(rename = "Config")]
    config: String,
    #[serde(rename = "RepoTags")]
    repo_tags: Vec<String>,
    #[serde(rename = "Layers")]
    layers: Vec<String>,
}

/// `SOURCE_DATE_EPOCH` as RFC 3339 (UTC).
pub fn rfc3339(epoch: u64) -> String {
    let days = epoch / 86_400;
    let secs = epoch % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// A built image, in memory.
#[derive(Debug, Clone)]
pub struct Image {
    pub layers: Vec<Blob>,
    pub config: Blob,
    pub manifest: Blob,
    pub tag: String,
    /// The binaries it carries, by name.
    pub binaries: Vec<String>,
}

impl Image {
    /// The image digest: SHA-256 of the manifest (what `NAME@sha256:…` pins).
    pub fn digest(&self) -> [u8; 32] {
        self.manifest.digest()
    }

    /// `sha256:<hex>`.
    pub fn digest_string(&self) -> String {
        self.manifest.digest_string()
    }
}

/// Builds the image described by `spec` (reads the binaries; with
/// [`Libraries::StaticOnly`] fails on one that is not statically linked).
pub fn build(spec: &ImageSpec) -> Result<Image, ImageError> {
    build_with_files(spec, &[])
}

/// [`build`], with `files` (absolute path in the image, content) added to the app layer,
/// 0644 root: the SBOM at [`sbom::IMAGE_PATH`].
pub fn build_with_files(spec: &ImageSpec, files: &[(&str, &[u8])]) -> Result<Image, ImageError> {
    if spec
        .tag
        .split_once(':')
        .is_none_or(|(n, t)| n.is_empty() || t.is_empty())
    {
        return Err(ImageError::Tag(spec.tag.clone()));
    }
    if spec.libraries == Libraries::StaticOnly {
        for b in &spec.binaries {
            check_static(&b.path)?;
        }
    }
    let epoch = spec.source_date_epoch;
    let base = base_tree()?.to_tar(epoch)?;
    let mut app = app_tree(&spec.binaries)?;
    for (path, bytes) in files {
        app.insert(path, Entry::file(bytes.to_vec(), 0o644))?;
    }
    let app = app.to_tar(epoch)?;
    let layers: Vec<Blob> = [base, app]
        .into_iter()
        .map(|bytes| Blob {
            media_type: LAYER_MEDIA_TYPE,
            bytes,
        })
        .collect();
    let created = rfc3339(epoch);
    let config = ImageConfig {
        architecture: "amd64",
        os: "linux",
        created: created.clone(),
        config: RunConfig {
            // The compose file sets user, entrypoint and command per service; by
            // default the image runs the appliance as its own user.
            user: format!("{APPLIANCE_UID}:{APPLIANCE_UID}"),
            env: vec![format!("PATH={BIN_DIR}:/usr/bin:/bin")],
            cmd: vec![format!("{BIN_DIR}/appliance"), "serve".to_owned()],
            working_dir: "/",
        },
        rootfs: RootFs {
            kind: "layers",
            diff_ids: layers.iter().map(Blob::digest_string).collect(),
        },
        history: vec![
            History {
                created: created.clone(),
                created_by: "image-build: users, directories".to_owned(),
            },
            History {
                created,
                created_by: format!(
                    "image-build: {}",
                    spec.binaries
                        .iter()
                        .map(|b| b.name.as_str())
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
            },
        ],
    };
    let config = Blob {
        media_type: CONFIG_MEDIA_TYPE,
        bytes: to_json(&config)?,
    };
    let manifest = Manifest {
        schema_version: 2,
        media_type: MANIFEST_MEDIA_TYPE,
        config: config.descriptor(),
        layers: layers.iter().map(Blob::descriptor).collect(),
    };
    let manifest = Blob {
        media_type: MANIFEST_MEDIA_TYPE,
        bytes: to_json(&manifest)?,
    };
    Ok(Image {
        layers,
        config,
        manifest,
        tag: spec.tag.clone(),
        binaries: spec.binaries.iter().map(|b| b.name.clone()).collect(),
    })
}

fn to_json<T: Serialize>(value: &T) -> Result<Vec<u8>, ImageError> {
    serde_json::to_vec(value).map_err(|e| ImageError::Path(e.to_string()))
}

/// The files of the OCI layout (plus Docker's `manifest.json`), as (path, bytes).
pub fn layout_files(image: &Image) -> Result<Vec<(String, Vec<u8>)>, ImageError> {
    let (_, tag) = image
        .tag
        .rsplit_once(':')
        .ok_or_else(|| ImageError::Tag(image.tag.clone()))?;
    let mut manifest = image.manifest.descriptor();
    manifest.annotations = Some(Annotations {
        containerd_name: image.tag.clone(),
        ref_name: tag.to_owned(),
    });
    let index = Index {
        schema_version: 2,
        media_type: INDEX_MEDIA_TYPE,
        manifests: vec![manifest],
    };
    let blob_path = |b: &Blob| format!("blobs/sha256/{}", hex::encode(b.digest()));
    let docker = vec![DockerManifestEntry {
        config: blob_path(&image.config),
        repo_tags: vec![image.tag.clone()],
        layers: image.layers.iter().map(blob_path).collect(),
    }];
    let mut files = vec![
        (
            "oci-layout".to_owned(),
            b"{\"imageLayoutVersion\":\"1.0.0\"}".to_vec(),
        ),
        ("index.json".to_owned(), to_json(&index)?),
        ("manifest.json".to_owned(), to_json(&docker)?),
    ];
    for blob in image.layers.iter().chain([&image.config, &image.manifest]) {
        files.push((blob_path(blob), blob.bytes.clone()));
    }
    files.sort();
    files.dedup_by(|a, b| a.0 == b.0);
    Ok(files)
}

/// Where [`write_layout`] put things.
#[derive(Debug, Clone)]
pub struct Written {
    /// The OCI image layout directory.
    pub layout_dir: PathBuf,
    /// The `docker load` archive (the layout as one tar).
    pub archive: PathBuf,
    /// A file holding `sha256:<hex>` of the image.
    pub digest_file: PathBuf,
}

/// Writes `<out>/oci/` (the layout), `<out>/appliance-image.tar` (`docker load -i`) and
/// `<out>/image-digest`. An existing `<out>/oci` is replaced.
pub fn write_layout(image: &Image, out: &Path, epoch: u64) -> Result<Written, ImageError> {
    let files = layout_files(image)?;
    let layout_dir = out.join("oci");
    if layout_dir.exists() {
        std::fs::remove_dir_all(&layout_dir).map_err(io_err(&layout_dir))?;
    }
    let mut archive_tree = Tree::new();
    for (path, bytes) in &files {
        let target = layout_dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        std::fs::write(&target, bytes).map_err(io_err(&target))?;
        archive_tree.insert(path, Entry::file(bytes.clone(), 0o644))?;
    }
    let archive = out.join("appliance-image.tar");
    std::fs::write(&archive, archive_tree.to_tar(epoch)?).map_err(io_err(&archive))?;
    let digest_file = out.join("image-digest");
    std::fs::write(&digest_file, format!("{}\n", image.digest_string()))
        .map_err(io_err(&digest_file))?;
    Ok(Written {
        layout_dir,
        archive,
        digest_file,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_of_known_epochs() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn users_are_distinct_and_appliance_may_reach_the_socket() {
        assert!(passwd().contains("keyservice:x:10001:10001:"));
        assert!(passwd().contains("appliance:x:10002:10002:"));
        assert!(group().contains("keyservice:x:10001:appliance\n"));
    }

    #[test]
    fn the_actions_user_is_in_no_group_but_its_own() {
        assert!(passwd().contains("actions:x:10003:10003:"));
        assert!(group().contains("actions:x:10003:\n"));
        // No group line lists it as a member.
        for line in group().lines() {
            let members = line.rsplit(':').next().unwrap_or("");
            assert!(
                !members.split(',').any(|m| m == "actions"),
                "actions is a member of {line}"
            );
        }
        // Positive control: the same check sees the appliance in group keyservice.
        assert!(
            group()
                .lines()
                .any(|l| l.rsplit(':').next() == Some("appliance"))
        );
    }
}
