//! The appliance's docker-compose template, rendered into a dstack `app-compose.json` with
//! every image pinned by `@sha256:` digest, and its compose hash.
//!
//! * [`TEMPLATE`] is the committed `compose/docker-compose.yml`; `{{image}}` in it is the
//!   appliance image.
//! * [`render`] substitutes a pinned [`ImageRef`], refuses anything unpinned, and wraps the
//!   compose file into `app-compose.json` bytes with a fixed serialization: keys in
//!   lexicographic order, no whitespace, ASCII only — the same canonical form as the dstack
//!   SDKs' `get_compose_hash` / `getComposeHash` (which sort the keys and serialize
//!   compactly). The compose hash is the SHA-256 of exactly these bytes ([`compose_hash`]);
//!   `tests/dstack_sdk_hash.rs` checks it against both SDKs.
//! * Two forms ([`ComposeFormat`]): the current one (dstack 0.5.6 and later) names the key
//!   provider, `key_provider: "kms"`, and can pin the KMS by `key_provider_id` (the hex of
//!   its root CA public key); the legacy one, for older hosts that ignore `key_provider`,
//!   says `kms_enabled: true` and `local_key_provider_enabled: false` instead.
//! * [`check_app_compose`] / [`check_docker_compose`] verify a rendered file: every `image:`
//!   carries a digest, no service is built at deploy time, and (either form) the keys come
//!   from the dstack KMS.
//! * [`render_dev`] is what `appliance dev` seals to: the same template with the documented
//!   placeholder image [`DEV_IMAGE`].
//! * [`governance`] proposes a compose hash to the `AppGovernance` contract.
//!
//! May depend on: `chain-contracts` (the `AppGovernance` binding and its RPC client, for
//! [`governance`]); never on `appliance`, whose `deploy` command uses this crate.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub mod governance;

/// The committed docker-compose template (`compose/docker-compose.yml`).
pub const TEMPLATE: &str = include_str!("../docker-compose.yml");

/// The placeholder in [`TEMPLATE`] replaced by the pinned appliance image.
pub const IMAGE_PLACEHOLDER: &str = "{{image}}";

/// The dstack app name used unless another is given.
pub const DEFAULT_NAME: &str = "appliance";

/// The app name of the development compose ([`render_dev`]).
pub const DEV_NAME: &str = "appliance-dev";

/// The image `appliance dev` pins when it renders its compose: a documented placeholder
/// (all-zero digest), since development runs the binaries from the target directory, not
/// an image. Deployments render with the digest `image-build` prints.
pub const DEV_IMAGE: &str =
    "appliance-dev@sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// Environment variables dstack may inject (encrypted secrets) — exactly the names the
/// template passes to the appliance.
pub const ALLOWED_ENVS: &[&str] = &[
    "APPLIANCE_CHAIN__RPC_URL",
    "APPLIANCE_BILLING__STRIPE_SECRET_KEY",
    "APPLIANCE_STORE__URL",
];

/// The placeholder in [`TEMPLATE`] (alone on its line) replaced by the appliance's
/// configuration file, indented into the compose file's `configs:` entry.
pub const CONFIG_PLACEHOLDER: &str = "{{appliance_config}}";

/// dstack's name of the key provider the appliance needs (`key_provider`).
pub const KMS: &str = "kms";

/// The configuration rendered when none is given: the defaults.
pub const DEFAULT_APPLIANCE_CONFIG: &str =
    "# appliance defaults (appliance/config.example.toml lists every key)\n";

/// Why a template, image reference or compose file was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PinError {
    /// An image reference without a `@sha256:` digest.
    #[error(
        "image {reference:?} is not pinned: every image must be referenced as NAME@sha256:<64 hex> (a tag alone can be moved)"
    )]
    Unpinned { reference: String },
    /// An image reference that has a digest but is malformed.
    #[error("image reference {reference:?} is malformed: {reason}")]
    BadReference { reference: String, reason: String },
    /// A service that is built at deploy time (`build:`), so its image is not pinned.
    #[error("line {line}: `build:` is not allowed; every service must use a pinned image")]
    Build { line: usize },
    /// The compose file names no image at all.
    #[error("the compose file references no image")]
    NoImage,
    /// A `{{…}}` placeholder left after rendering.
    #[error("line {line}: unknown template placeholder {placeholder:?}")]
    Placeholder { line: usize, placeholder: String },
    /// Non-ASCII text: refused so that every JSON serializer produces the same bytes.
    #[error("line {line}: only ASCII text is allowed in the compose template")]
    NonAscii { line: usize },
    /// The file is not an `app-compose.json`.
    #[error("not a dstack app-compose.json: {0}")]
    AppCompose(String),
    /// A compose whose keys would not come from the dstack KMS.
    #[error(
        "{found}, so its keys would not come from the dstack KMS; the appliance's keys come from the KMS, which releases them only to a compose hash the app's governance contract allows: use key_provider \"kms\" (or kms_enabled true in the legacy form)"
    )]
    NotKms { found: String },
    /// A `key_provider_id` that is not an even number of hex digits.
    #[error("key_provider_id {input:?} is not hex bytes: {reason}")]
    KeyProviderId { input: String, reason: String },
}

/// An image reference pinned by digest: `NAME[:TAG]@sha256:<64 lowercase hex>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ImageRef {
    name: String,
    digest: [u8; 32],
}

impl ImageRef {
    /// A reference to `name` (repository, optionally with registry and tag) at `digest`.
    pub fn new(name: &str, digest: [u8; 32]) -> Result<Self, PinError> {
        Self::from_str(&format!("{name}@sha256:{}", hex::encode(digest)))
    }

    /// The repository part (everything before `@`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The manifest digest.
    pub fn digest(&self) -> [u8; 32] {
        self.digest
    }

    /// `sha256:<hex>`.
    pub fn digest_string(&self) -> String {
        format!("sha256:{}", hex::encode(self.digest))
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@sha256:{}", self.name, hex::encode(self.digest))
    }
}

impl FromStr for ImageRef {
    type Err = PinError;

    fn from_str(s: &str) -> Result<Self, PinError> {
        let bad = |reason: &str| PinError::BadReference {
            reference: s.to_owned(),
            reason: reason.to_owned(),
        };
        let Some((name, digest)) = s.split_once('@') else {
            return Err(PinError::Unpinned {
                reference: s.to_owned(),
            });
        };
        let Some(hex_digest) = digest.strip_prefix("sha256:") else {
            return Err(PinError::Unpinned {
                reference: s.to_owned(),
            });
        };
        if hex_digest.len() != 64
            || !hex_digest
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(bad("the digest must be 64 lowercase hex characters"));
        }
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(hex_digest, &mut bytes).map_err(|_| bad("the digest is not hex"))?;
        if name.is_empty()
            || !name.bytes().all(|b| {
                b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || matches!(b, b'.' | b'_' | b'-' | b'/' | b':')
            })
            || name.starts_with(['/', ':', '.', '-'])
            || name.ends_with(['/', ':'])
        {
            return Err(bad(
                "the name must be a lowercase repository (registry/path[:tag])",
            ));
        }
        Ok(Self {
            name: name.to_owned(),
            digest: bytes,
        })
    }
}

/// The form of the rendered `app-compose.json`: how it tells dstack that the keys come
/// from the KMS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ComposeFormat {
    /// dstack 0.5.6 and later: `key_provider: "kms"` and `key_provider_id` (the KMS root
    /// CA public key, hex; empty: any KMS the host names).
    #[default]
    Current,
    /// Hosts older than 0.5.6, which ignore `key_provider` (and would then start the app
    /// with no key provider): `kms_enabled: true`, `local_key_provider_enabled: false`, no
    /// `key_provider` fields.
    Legacy,
}

/// Parses a `key_provider_id` as an operator gives it: hex digits, an even number of them,
/// `0x` optional, either case. The rendered file carries the bytes as lowercase hex without
/// `0x`, as dstack writes them.
pub fn parse_key_provider_id(input: &str) -> Result<Vec<u8>, PinError> {
    let bad = |reason: &str| PinError::KeyProviderId {
        input: input.to_owned(),
        reason: reason.to_owned(),
    };
    let digits = input.strip_prefix("0x").unwrap_or(input);
    if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad(
            "only the hex digits 0-9 and a-f (either case) are allowed, after an optional 0x",
        ));
    }
    if !digits.len().is_multiple_of(2) {
        return Err(bad("an odd number of hex digits"));
    }
    hex::decode(digits).map_err(|e| bad(&e.to_string()))
}

/// The settings of one rendering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderOptions {
    /// dstack app name.
    pub name: String,
    /// The appliance image (both services run it).
    pub image: ImageRef,
    /// The appliance's TOML configuration (measured: it is part of the compose file).
    /// Default: [`DEFAULT_APPLIANCE_CONFIG`].
    pub appliance_config: String,
    /// Encrypted environment variables dstack may inject. Default: [`ALLOWED_ENVS`].
    pub allowed_envs: Vec<String>,
    /// Let the dstack host show container logs. Default false (logs may name accounts).
    pub public_logs: bool,
    /// Let the dstack host show system information. Default true.
    pub public_sysinfo: bool,
    /// Publish the TCB info (measurements, app_compose) through the host. Default true.
    pub public_tcbinfo: bool,
    /// Connect the CVM to the dstack gateway (its WireGuard network, over which the
    /// gateway forwards connections to the app). Default false. The appliance terminates
    /// TLS itself either way.
    pub gateway_enabled: bool,
    /// Block the boot until the guest's clock is synchronized (dstack's `secure_time`).
    /// Default false, as dstack's own CLI renders it: the strict wait fails the boot, and
    /// the CVM restarts, whenever no time source answers.
    pub secure_time: bool,
    /// The form ([`ComposeFormat::Current`] unless the host is older than dstack 0.5.6).
    /// Either way the keys come from the dstack KMS, which asks the governance contract.
    pub format: ComposeFormat,
    /// The KMS the CVM accepts keys from, pinned by its root CA public key (the bytes;
    /// rendered as hex). Empty (the default): no pin. Only in the current form.
    pub key_provider_id: Vec<u8>,
}

impl RenderOptions {
    /// The defaults, with `image`.
    pub fn new(image: ImageRef) -> Self {
        Self {
            name: DEFAULT_NAME.to_owned(),
            image,
            appliance_config: DEFAULT_APPLIANCE_CONFIG.to_owned(),
            allowed_envs: ALLOWED_ENVS.iter().map(|s| (*s).to_owned()).collect(),
            public_logs: false,
            public_sysinfo: true,
            public_tcbinfo: true,
            gateway_enabled: false,
            secure_time: false,
            format: ComposeFormat::Current,
            key_provider_id: Vec::new(),
        }
    }

    /// What `appliance dev` renders: [`DEV_NAME`] and [`DEV_IMAGE`].
    pub fn dev() -> Self {
        #[allow(clippy::expect_used, reason = "a constant, checked by a unit test")]
        let image = DEV_IMAGE.parse().expect("DEV_IMAGE is a pinned reference");
        Self {
            name: DEV_NAME.to_owned(),
            ..Self::new(image)
        }
    }
}

/// The dstack `app-compose.json` (manifest version 2), as [`render`] writes it. The
/// fields are declared in lexicographic order, so the serialization is the canonical one
/// whatever serde_json features the build enables. The key-provider fields of the form
/// not rendered are absent (`None`): `key_provider` and `key_provider_id` in the current
/// form, `kms_enabled` and `local_key_provider_enabled` in the legacy one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppCompose {
    pub allowed_envs: Vec<String>,
    pub docker_compose_file: String,
    pub gateway_enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_provider_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kms_enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_key_provider_enabled: Option<bool>,
    pub manifest_version: u32,
    pub name: String,
    pub no_instance_id: bool,
    pub public_logs: bool,
    pub public_sysinfo: bool,
    pub public_tcbinfo: bool,
    pub runner: String,
    pub secure_time: bool,
}

/// A rendered `app-compose.json`: its exact bytes and their hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    bytes: Vec<u8>,
    hash: [u8; 32],
}

impl Rendered {
    /// The exact bytes to deploy (and to hash).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// SHA-256 of [`Self::bytes`]: the compose hash.
    pub fn hash(&self) -> [u8; 32] {
        self.hash
    }

    /// The compose hash as 64 lowercase hex characters (no `0x`), as dstack shows it.
    pub fn hash_hex(&self) -> String {
        hex::encode(self.hash)
    }
}

/// SHA-256 of `bytes`: the compose hash of an `app-compose.json`.
pub fn compose_hash(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Renders `template` (a docker-compose file with `{{image}}`) into `app-compose.json`.
pub fn render(template: &str, options: &RenderOptions) -> Result<Rendered, PinError> {
    let mut config = String::new();
    for line in options.appliance_config.lines() {
        if !line.is_empty() {
            config.push_str("      ");
            config.push_str(line);
        }
        config.push('\n');
    }
    if config.is_empty() {
        config.push('\n');
    }
    let docker_compose_file = template
        .replace(&format!("{CONFIG_PLACEHOLDER}\n"), &config)
        .replace(IMAGE_PLACEHOLDER, &options.image.to_string());
    check_docker_compose(&docker_compose_file)?;
    for env in &options.allowed_envs {
        if env.is_empty()
            || !env
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        {
            return Err(PinError::AppCompose(format!(
                "allowed env {env:?} must be an upper-case variable name"
            )));
        }
    }
    let mut allowed_envs = options.allowed_envs.clone();
    allowed_envs.sort();
    allowed_envs.dedup();
    if !options.name.is_ascii() {
        return Err(PinError::AppCompose("the app name must be ASCII".into()));
    }
    // The key provider: always the dstack KMS, in the words the host understands.
    let (key_provider, key_provider_id, kms_enabled, local_key_provider_enabled) = match options
        .format
    {
        ComposeFormat::Current => (
            Some(KMS.to_owned()),
            Some(hex::encode(&options.key_provider_id)),
            None,
            None,
        ),
        ComposeFormat::Legacy if options.key_provider_id.is_empty() => {
            (None, None, Some(true), Some(false))
        }
        ComposeFormat::Legacy => {
            return Err(PinError::AppCompose(
                    "a key_provider_id pin needs the current form (dstack 0.5.6 and later), not the legacy one".into(),
                ));
        }
    };
    let app = AppCompose {
        allowed_envs,
        docker_compose_file,
        gateway_enabled: options.gateway_enabled,
        key_provider,
        key_provider_id,
        kms_enabled,
        local_key_provider_enabled,
        manifest_version: 2,
        name: options.name.clone(),
        no_instance_id: false,
        public_logs: options.public_logs,
        public_sysinfo: options.public_sysinfo,
        public_tcbinfo: options.public_tcbinfo,
        runner: "docker-compose".to_owned(),
        secure_time: options.secure_time,
    };
    let bytes = serde_json::to_vec(&app).map_err(|e| PinError::AppCompose(e.to_string()))?;
    let hash = compose_hash(&bytes);
    Ok(Rendered { bytes, hash })
}

/// The committed template rendered with `image` and the default options.
pub fn render_template(image: ImageRef) -> Result<Rendered, PinError> {
    render(TEMPLATE, &RenderOptions::new(image))
}

/// The development compose: the committed template with [`DEV_IMAGE`] ([`RenderOptions::dev`]).
pub fn render_dev() -> Result<Rendered, PinError> {
    render(TEMPLATE, &RenderOptions::dev())
}

/// Checks a docker-compose text: ASCII, no placeholder left, no `build:`, and every
/// `image:` pinned by digest. Returns the images in order of appearance.
///
/// The check is line-based (block-style YAML, as the template is written): a line whose
/// first key is `image:` (optionally after `- `) is an image reference.
pub fn check_docker_compose(text: &str) -> Result<Vec<ImageRef>, PinError> {
    let mut images = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if !line.is_ascii() {
            return Err(PinError::NonAscii { line: n });
        }
        if let Some(start) = line.find("{{") {
            let rest = &line[start..];
            let end = rest.find("}}").map_or(rest.len(), |e| e + 2);
            return Err(PinError::Placeholder {
                line: n,
                placeholder: rest[..end].to_owned(),
            });
        }
        let content = line.trim_start();
        if content.starts_with('#') {
            continue;
        }
        let content = content.strip_prefix("- ").unwrap_or(content).trim_start();
        let key_value = |key: &str| {
            content
                .strip_prefix(key)
                .and_then(|r| r.strip_prefix(':'))
                .map(str::trim)
        };
        if key_value("build").is_some() || key_value("\"build\"").is_some() {
            return Err(PinError::Build { line: n });
        }
        if let Some(value) = key_value("image").or_else(|| key_value("\"image\"")) {
            let value = match value.find(" #") {
                Some(at) => value[..at].trim_end(),
                None => value,
            };
            let value = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(value);
            images.push(value.parse::<ImageRef>()?);
        }
    }
    if images.is_empty() {
        return Err(PinError::NoImage);
    }
    Ok(images)
}

/// A checked `app-compose.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedAppCompose {
    /// SHA-256 of the file's bytes.
    pub hash: [u8; 32],
    /// The dstack app name.
    pub name: String,
    /// The pinned images of its docker-compose file, in order of appearance.
    pub images: Vec<ImageRef>,
    /// [`ComposeFormat::Current`] when the file names its `key_provider`, else
    /// [`ComposeFormat::Legacy`] (`kms_enabled`).
    pub format: ComposeFormat,
    /// The KMS pin (`key_provider_id`, decoded); empty when there is none.
    pub key_provider_id: Vec<u8>,
}

/// Parses an `app-compose.json` (any field order: the hash is over the bytes as given) and
/// checks that every image of its `docker_compose_file` is pinned and that its keys come
/// from the dstack KMS, read as dstack reads it: `key_provider` when present (it must be
/// `"kms"`), else the legacy `kms_enabled` (it must be true). A `key_provider_id` must be
/// hex bytes (dstack refuses anything else).
pub fn check_app_compose(bytes: &[u8]) -> Result<CheckedAppCompose, PinError> {
    #[derive(Deserialize)]
    struct Minimal {
        #[serde(default)]
        name: String,
        runner: String,
        docker_compose_file: Option<String>,
        #[serde(default)]
        key_provider: Option<String>,
        #[serde(default)]
        key_provider_id: Option<String>,
        #[serde(default)]
        kms_enabled: bool,
        #[serde(default)]
        local_key_provider_enabled: bool,
    }
    let app: Minimal =
        serde_json::from_slice(bytes).map_err(|e| PinError::AppCompose(e.to_string()))?;
    if app.runner != "docker-compose" {
        return Err(PinError::AppCompose(format!(
            "runner is {:?}, expected \"docker-compose\"",
            app.runner
        )));
    }
    let format = match &app.key_provider {
        Some(kind) if kind == KMS => ComposeFormat::Current,
        Some(kind) => {
            return Err(PinError::NotKms {
                found: format!("the compose names key_provider {kind:?}"),
            });
        }
        None if app.kms_enabled => ComposeFormat::Legacy,
        None => {
            let found = if app.local_key_provider_enabled {
                "the compose (legacy form: kms_enabled false, local_key_provider_enabled true) names the local key provider"
            } else {
                "the compose names no key provider (no key_provider, and kms_enabled false or absent): none"
            };
            return Err(PinError::NotKms {
                found: found.to_owned(),
            });
        }
    };
    let key_provider_id = match &app.key_provider_id {
        None => Vec::new(),
        // dstack reads it as plain hex: no `0x`.
        Some(id) if id.starts_with("0x") => {
            return Err(PinError::KeyProviderId {
                input: id.clone(),
                reason: "dstack reads it without a 0x prefix".into(),
            });
        }
        Some(id) => parse_key_provider_id(id)?,
    };
    let compose = app
        .docker_compose_file
        .ok_or_else(|| PinError::AppCompose("no docker_compose_file".into()))?;
    let images = check_docker_compose(&compose)?;
    Ok(CheckedAppCompose {
        hash: compose_hash(bytes),
        name: app.name,
        images,
        format,
        key_provider_id,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const DIGEST: &str = "4f5c9c6f1d9e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b";

    fn image() -> ImageRef {
        format!("ghcr.io/example/appliance@sha256:{DIGEST}")
            .parse()
            .unwrap()
    }

    #[test]
    fn image_references_must_be_pinned() {
        assert_eq!(image().name(), "ghcr.io/example/appliance");
        assert_eq!(image().digest_string(), format!("sha256:{DIGEST}"));
        assert!(
            format!("registry:5000/a/b:1.2@sha256:{DIGEST}")
                .parse::<ImageRef>()
                .is_ok()
        );
        for unpinned in ["appliance", "appliance:latest", "ghcr.io/x/appliance:v1"] {
            let err = unpinned.parse::<ImageRef>().unwrap_err();
            assert!(matches!(err, PinError::Unpinned { .. }), "{unpinned}");
            assert!(err.to_string().contains("not pinned"));
        }
        for bad in [
            "appliance@sha256:abc".to_owned(),
            format!("appliance@sha256:{}", DIGEST.to_uppercase()),
            format!("@sha256:{DIGEST}"),
            format!("Appliance@sha256:{DIGEST}"),
        ] {
            assert!(
                matches!(bad.parse::<ImageRef>(), Err(PinError::BadReference { .. })),
                "{bad}"
            );
        }
        assert!(matches!(
            format!("appliance@sha512:{DIGEST}").parse::<ImageRef>(),
            Err(PinError::Unpinned { .. })
        ));
    }

    #[test]
    fn rendering_pins_every_image_and_is_canonical() {
        let rendered = render_template(image()).unwrap();
        let text = std::str::from_utf8(rendered.bytes()).unwrap();
        // Canonical JSON: sorted keys, no whitespace between tokens.
        assert!(text.starts_with("{\"allowed_envs\":["), "{text}");
        assert!(text.ends_with(",\"runner\":\"docker-compose\",\"secure_time\":false}"));
        assert_canonical(rendered.bytes());
        let value: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(value["manifest_version"], 2);
        let compose = value["docker_compose_file"].as_str().unwrap();
        assert!(compose.contains(&format!("\n    image: {}\n", image())));
        assert!(compose.ends_with(&format!(
            "    content: |\n      {}",
            DEFAULT_APPLIANCE_CONFIG
        )));
        // keyservice, appliance and workers: one image.
        assert_eq!(
            check_docker_compose(compose).unwrap(),
            vec![image(), image(), image()]
        );
        let checked = check_app_compose(rendered.bytes()).unwrap();
        assert_eq!(checked.hash, rendered.hash());
        assert_eq!(checked.name, DEFAULT_NAME);
        assert_eq!(rendered.hash(), compose_hash(rendered.bytes()));
        assert_eq!(
            hex::encode(Sha256::digest(rendered.bytes())),
            rendered.hash_hex()
        );
        // Deterministic; another digest, another hash.
        assert_eq!(render_template(image()).unwrap(), rendered);
        let other = ImageRef::new("ghcr.io/example/appliance", [7; 32]).unwrap();
        assert_ne!(render_template(other).unwrap().hash(), rendered.hash());
    }

    /// The bytes equal a serialization built here key by key: the keys in byte order,
    /// each value compact, nothing between tokens.
    fn assert_canonical(bytes: &[u8]) {
        let value: serde_json::Value = serde_json::from_slice(bytes).unwrap();
        let object = value.as_object().unwrap();
        let mut keys: Vec<&String> = object.keys().collect();
        keys.sort();
        let fields: Vec<String> = keys
            .iter()
            .map(|k| {
                format!(
                    "{}:{}",
                    serde_json::to_string(k).unwrap(),
                    serde_json::to_string(&object[k.as_str()]).unwrap()
                )
            })
            .collect();
        let expected = format!("{{{}}}", fields.join(","));
        assert_eq!(std::str::from_utf8(bytes).unwrap(), expected);
        assert!(bytes.is_ascii());
    }

    /// The top-level keys of rendered bytes, in the order written.
    fn keys_in_order(bytes: &[u8]) -> Vec<String> {
        let value: serde_json::Value = serde_json::from_slice(bytes).unwrap();
        let text = std::str::from_utf8(bytes).unwrap();
        let mut keys: Vec<(usize, String)> = value
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| {
                // A key is written as `"k":<value>`; the first such place is the field.
                let written = format!("{}:{}", serde_json::to_string(k).unwrap(), v);
                (text.find(&written).unwrap(), k.clone())
            })
            .collect();
        keys.sort();
        keys.into_iter().map(|(_, k)| k).collect()
    }

    #[test]
    fn the_current_form_names_the_kms_and_its_pin() {
        let rendered = render_template(image()).unwrap();
        assert_eq!(
            keys_in_order(rendered.bytes()),
            [
                "allowed_envs",
                "docker_compose_file",
                "gateway_enabled",
                "key_provider",
                "key_provider_id",
                "manifest_version",
                "name",
                "no_instance_id",
                "public_logs",
                "public_sysinfo",
                "public_tcbinfo",
                "runner",
                "secure_time",
            ]
        );
        let value: serde_json::Value = serde_json::from_slice(rendered.bytes()).unwrap();
        assert_eq!(value["key_provider"], "kms");
        // No pin by default: dstack takes the KMS the host names.
        assert_eq!(value["key_provider_id"], "");
        assert_eq!(value["gateway_enabled"], false);
        assert_eq!(value["secure_time"], false);
        assert_eq!(value["no_instance_id"], false);
        assert_eq!(value["public_logs"], false);
        assert_eq!(value["public_sysinfo"], true);
        assert_eq!(value["public_tcbinfo"], true);
        assert_eq!(value["runner"], "docker-compose");
        let checked = check_app_compose(rendered.bytes()).unwrap();
        assert_eq!(checked.format, ComposeFormat::Current);
        assert!(checked.key_provider_id.is_empty());

        // A pin: the bytes, as lowercase hex; another pin, another hash.
        let mut options = RenderOptions::new(image());
        options.key_provider_id = parse_key_provider_id("0x3059301306072A8648CE3D0201").unwrap();
        let pinned = render(TEMPLATE, &options).unwrap();
        assert_canonical(pinned.bytes());
        let value: serde_json::Value = serde_json::from_slice(pinned.bytes()).unwrap();
        assert_eq!(value["key_provider_id"], "3059301306072a8648ce3d0201");
        assert_ne!(pinned.hash(), rendered.hash());
        let checked = check_app_compose(pinned.bytes()).unwrap();
        assert_eq!(checked.key_provider_id, options.key_provider_id);

        // The gateway and secure time, each on its own.
        for set in [
            (|o: &mut RenderOptions| o.gateway_enabled = true) as fn(&mut RenderOptions),
            |o: &mut RenderOptions| o.secure_time = true,
        ] {
            let mut options = RenderOptions::new(image());
            set(&mut options);
            let bytes = render(TEMPLATE, &options).unwrap().bytes().to_vec();
            assert_canonical(&bytes);
            let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(
                value["gateway_enabled"].as_bool().unwrap(),
                options.gateway_enabled
            );
            assert_eq!(value["secure_time"].as_bool().unwrap(), options.secure_time);
            assert_ne!(compose_hash(&bytes), rendered.hash());
        }
    }

    #[test]
    fn the_legacy_form_says_kms_enabled_for_older_hosts() {
        let mut options = RenderOptions::new(image());
        options.format = ComposeFormat::Legacy;
        let legacy = render(TEMPLATE, &options).unwrap();
        assert_canonical(legacy.bytes());
        assert_eq!(
            keys_in_order(legacy.bytes()),
            [
                "allowed_envs",
                "docker_compose_file",
                "gateway_enabled",
                "kms_enabled",
                "local_key_provider_enabled",
                "manifest_version",
                "name",
                "no_instance_id",
                "public_logs",
                "public_sysinfo",
                "public_tcbinfo",
                "runner",
                "secure_time",
            ]
        );
        let value: serde_json::Value = serde_json::from_slice(legacy.bytes()).unwrap();
        assert_eq!(value["kms_enabled"], true);
        assert_eq!(value["local_key_provider_enabled"], false);
        let checked = check_app_compose(legacy.bytes()).unwrap();
        assert_eq!(checked.format, ComposeFormat::Legacy);
        assert_ne!(legacy.hash(), render_template(image()).unwrap().hash());

        // A pin has no place in the legacy form.
        options.key_provider_id = vec![1, 2, 3];
        let err = render(TEMPLATE, &options).unwrap_err();
        assert!(err.to_string().contains("current form"), "{err}");
    }

    #[test]
    fn key_provider_ids_must_be_hex_bytes() {
        assert_eq!(parse_key_provider_id("").unwrap(), Vec::<u8>::new());
        assert_eq!(parse_key_provider_id("0x").unwrap(), Vec::<u8>::new());
        assert_eq!(parse_key_provider_id("aBcD").unwrap(), vec![0xab, 0xcd]);
        for (bad, why) in [
            ("abc", "odd number"),
            ("0xabc", "odd number"),
            ("zz", "hex digits"),
            ("ab cd", "hex digits"),
            ("0X12", "hex digits"),
        ] {
            let err = parse_key_provider_id(bad).unwrap_err();
            assert!(matches!(err, PinError::KeyProviderId { .. }), "{bad}");
            let text = err.to_string();
            assert!(text.contains(&format!("{bad:?}")), "{text}");
            assert!(text.contains(why), "{bad}: {text}");
        }
    }

    /// `rendered` (current form) with its key-provider fields replaced by `fields`.
    fn with_key_provider(fields: serde_json::Value) -> Vec<u8> {
        let rendered = render_template(image()).unwrap();
        let mut value: serde_json::Value = serde_json::from_slice(rendered.bytes()).unwrap();
        let object = value.as_object_mut().unwrap();
        for key in [
            "key_provider",
            "key_provider_id",
            "kms_enabled",
            "local_key_provider_enabled",
        ] {
            object.remove(key);
        }
        object.extend(fields.as_object().unwrap().clone());
        serde_json::to_vec(&value).unwrap()
    }

    #[test]
    fn the_check_reads_the_key_provider_as_dstack_does() {
        use serde_json::json;
        // Accepted: either form, and a file that says both (any dstack version).
        for (fields, format) in [
            (json!({"key_provider": "kms"}), ComposeFormat::Current),
            (
                json!({"key_provider": "kms", "key_provider_id": "00ff"}),
                ComposeFormat::Current,
            ),
            (
                json!({"key_provider": "kms", "kms_enabled": true}),
                ComposeFormat::Current,
            ),
            (json!({"kms_enabled": true}), ComposeFormat::Legacy),
            (
                json!({"key_provider": null, "kms_enabled": true}),
                ComposeFormat::Legacy,
            ),
            (
                json!({"kms_enabled": true, "key_provider_id": ""}),
                ComposeFormat::Legacy,
            ),
        ] {
            let checked = check_app_compose(&with_key_provider(fields.clone()))
                .unwrap_or_else(|e| panic!("{fields}: {e}"));
            assert_eq!(checked.format, format, "{fields}");
        }
        // Refused: any other key provider, named. key_provider wins over kms_enabled, as
        // in dstack.
        for (fields, named) in [
            (json!({"key_provider": "none"}), "key_provider \"none\""),
            (json!({"key_provider": "local"}), "key_provider \"local\""),
            (json!({"key_provider": "tpm"}), "key_provider \"tpm\""),
            (
                json!({"key_provider": "local", "kms_enabled": true}),
                "key_provider \"local\"",
            ),
            (json!({"kms_enabled": false}), "none"),
            (json!({}), "none"),
            (
                json!({"kms_enabled": false, "local_key_provider_enabled": true}),
                "local key provider",
            ),
        ] {
            let err = check_app_compose(&with_key_provider(fields.clone())).unwrap_err();
            assert!(matches!(err, PinError::NotKms { .. }), "{fields}: {err}");
            let text = err.to_string();
            assert!(text.contains(named), "{fields}: {text}");
            assert!(text.contains("keys come from the KMS"), "{text}");
        }
        // A pin dstack could not read.
        for id in ["abc", "0x00ff", "zz"] {
            let fields = json!({"key_provider": "kms", "key_provider_id": id});
            let err = check_app_compose(&with_key_provider(fields)).unwrap_err();
            assert!(matches!(err, PinError::KeyProviderId { .. }), "{id}: {err}");
        }
    }

    #[test]
    fn the_configuration_is_embedded_and_measured() {
        let mut options = RenderOptions::new(image());
        options.appliance_config =
            "listen = \"0.0.0.0:8443\"\n\n[chain]\nchain_id = 8453\n".to_owned();
        let rendered = render(TEMPLATE, &options).unwrap();
        let app: AppCompose = serde_json::from_slice(rendered.bytes()).unwrap();
        assert!(app.docker_compose_file.ends_with(
            "    content: |\n      listen = \"0.0.0.0:8443\"\n\n      [chain]\n      chain_id = 8453\n"
        ));
        assert_ne!(rendered.hash(), render_template(image()).unwrap().hash());
    }

    #[test]
    fn the_template_passes_exactly_the_allowed_envs() {
        for env in ALLOWED_ENVS {
            assert!(TEMPLATE.contains(&format!("      - {env}\n")), "{env}");
        }
        assert!(!TEMPLATE.contains("network_mode: host"));
        // The guest agent is keyservice's alone (see tests/guest_agent.rs).
        assert_eq!(
            TEMPLATE
                .matches("/var/run/dstack.sock:/var/run/dstack.sock")
                .count(),
            1
        );
    }

    #[test]
    fn keyservice_serves_only_the_appliance_uid() {
        // SO_PEERCRED: the 0660 socket's group is not enough to be served.
        let keyservice = service(TEMPLATE, "keyservice");
        assert!(
            keyservice.contains("\"--peer-uid\", \"10002\""),
            "{keyservice}"
        );
        assert_eq!(keyservice.matches("--peer-uid").count(), 1, "{keyservice}");
    }

    #[test]
    fn keyservice_reads_its_payer_policy_from_the_measured_configuration() {
        // The chain id and AccountConfig the payers may sign for come from the same
        // embedded (measured) configuration the appliance runs with.
        assert!(TEMPLATE.contains("\"--chain-config\", \"/etc/keyservice/appliance.toml\"]"));
        assert!(TEMPLATE.contains(
            "    configs:\n      - source: appliance_toml\n        target: /etc/keyservice/appliance.toml\n"
        ));
    }

    #[test]
    fn workers_run_under_their_own_user_with_only_the_launcher_socket() {
        let workers = service(TEMPLATE, "workers");
        assert!(workers.contains("    user: \"10003:10003\"\n"), "{workers}");
        assert!(
            !workers.contains("group_add"),
            "workers get no supplementary group"
        );
        assert!(workers.contains("    network_mode: none\n"));
        assert!(workers.contains("    read_only: true\n"));
        assert!(workers.contains("\"--peer-uid\", \"10002\""));
        // Its only volume is the launcher socket: no keyservice socket, data or dstack.
        let volumes: Vec<&str> = workers
            .lines()
            .filter(|l| l.starts_with("      - ") && l.contains(":/"))
            .collect();
        assert_eq!(
            volumes,
            ["      - worker-launcher-socket:/run/worker-launcher"]
        );
        // The memory limit comes from the same measured configuration.
        assert!(
            workers.contains("\"--appliance-config\", \"/etc/worker-launcher/appliance.toml\"")
        );
        assert!(workers.contains("        target: /etc/worker-launcher/appliance.toml\n"));
        // The appliance reaches the launcher and is told where it is.
        let appliance = service(TEMPLATE, "appliance");
        assert!(appliance.contains("      - worker-launcher-socket:/run/worker-launcher\n"));
        assert!(appliance.contains(
            "      - APPLIANCE_ACTIONS__WORKER_LAUNCHER_SOCKET=/run/worker-launcher/worker-launcher.sock\n"
        ));
        // Positive control: the same helper sees the appliance's own extra group.
        assert!(appliance.contains("group_add"));
        // Rendering keeps it.
        let rendered = render_template(image()).unwrap();
        let app: AppCompose = serde_json::from_slice(rendered.bytes()).unwrap();
        assert!(app.docker_compose_file.contains("  workers:\n"));
    }

    /// The lines of one service of a compose template (until the next top-level or
    /// service key).
    fn service(template: &str, name: &str) -> String {
        let header = format!("  {name}:\n");
        let start = template
            .find(&header)
            .unwrap_or_else(|| panic!("no service {name}"));
        let body = &template[start + header.len()..];
        body.lines()
            .take_while(|l| l.starts_with("    ") || l.trim_start().starts_with('#'))
            .filter(|l| !l.trim_start().starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect()
    }

    #[test]
    fn unpinned_or_built_services_are_refused() {
        let with = |line: &str| TEMPLATE.replacen("image: {{image}}", line, 1);
        let t = with("image: ghcr.io/example/appliance:latest");
        let err = render(&t, &RenderOptions::new(image())).unwrap_err();
        assert!(
            matches!(&err, PinError::Unpinned { reference } if reference == "ghcr.io/example/appliance:latest"),
            "{err}"
        );
        let t = with("build: .");
        assert!(matches!(
            render(&t, &RenderOptions::new(image())),
            Err(PinError::Build { .. })
        ));
        let t = with("image: {{other}}");
        assert!(matches!(
            render(&t, &RenderOptions::new(image())),
            Err(PinError::Placeholder { placeholder, .. }) if placeholder == "{{other}}"
        ));
        let t = format!("{TEMPLATE}# caf\u{e9}\n");
        assert!(matches!(
            render(&t, &RenderOptions::new(image())),
            Err(PinError::NonAscii { .. })
        ));
        // Quoted and list forms are still checked.
        assert!(matches!(
            check_docker_compose("services:\n  a:\n    image: \"busybox:1\"\n"),
            Err(PinError::Unpinned { .. })
        ));
        assert!(matches!(
            check_docker_compose("services: {}\n"),
            Err(PinError::NoImage)
        ));
        // A rendered file whose compose was edited to an unpinned image is refused.
        let mut app: AppCompose =
            serde_json::from_slice(render_template(image()).unwrap().bytes()).unwrap();
        app.docker_compose_file =
            app.docker_compose_file
                .replacen(&image().to_string(), "busybox", 1);
        let bytes = serde_json::to_vec(&app).unwrap();
        assert!(matches!(
            check_app_compose(&bytes),
            Err(PinError::Unpinned { .. })
        ));
    }

    #[test]
    fn dev_compose_uses_the_placeholder_image() {
        let dev = render_dev().unwrap();
        let checked = check_app_compose(dev.bytes()).unwrap();
        assert_eq!(checked.name, DEV_NAME);
        assert_eq!(checked.images[0].to_string(), DEV_IMAGE);
        assert_eq!(checked.images[0].digest(), [0; 32]);
    }
}
