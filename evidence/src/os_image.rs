//! The operating system a TD booted: dstack OS images, the measurements they produce, and
//! the policy file of accepted measurements a verifier pins.
//!
//! * A dstack OS image directory holds `metadata.json` (`bios`, `kernel`, `initrd`,
//!   `cmdline`, and optionally `version`, `is_dev`), the files it names, and
//!   `sha256sum.txt` (`<sha256>  <file>` lines). The image's identity, `os_image_hash`, is
//!   the SHA-256 of `sha256sum.txt` itself (as dstack defines it); [`OsImage::load`] checks
//!   every listed file against its line, so the hash covers them all.
//! * From an image, [`OsImage::measure`] recomputes MRTD (from the TDVF metadata of the
//!   firmware, [`crate::tdvf`]) and RTMR1/RTMR2 (kernel, command line, initrd,
//!   [`crate::kernel`]). RTMR0 also covers the ACPI tables QEMU builds for the VM shape
//!   (CPUs, memory, devices), which are not recomputed here: the `os-image` check holds
//!   RTMR0's other events to the firmware ([`crate::rtmr0`]), but RTMR0 as a whole comes
//!   from a policy entry.
//! * A policy file ([`OsPolicy`]) lists accepted `{os_image_hash, mrtd, rtmr0, rtmr1,
//!   rtmr2, vm_shape}` entries, for verifiers who pin known releases without downloading
//!   images; `evidence os-measure` writes entries.
//! * `vm_config` ([`VmConfig`]) is what dstack says about the VM (image hash, shape); it
//!   is not measured itself: only the quote's registers, compared with recomputed or
//!   pinned values, establish which OS ran.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::kernel;
use crate::tdvf::{PageOrder, Tdvf, TdvfError};

/// Largest `sha256sum.txt` or `metadata.json` read.
const MAX_SMALL_FILE: u64 = 1 << 20;
/// Largest image file read (firmware, kernel, initrd).
const MAX_IMAGE_FILE: u64 = 1 << 30;

/// Why an OS image, `vm_config` or policy file is unusable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OsImageError {
    #[error("{path}: {reason}")]
    Io { path: String, reason: String },
    #[error("{0}")]
    Invalid(String),
    #[error("firmware: {0}")]
    Firmware(#[from] TdvfError),
    #[error("kernel: {0}")]
    Kernel(#[from] kernel::KernelError),
}

fn invalid(s: impl Into<String>) -> OsImageError {
    OsImageError::Invalid(s.into())
}

/// The digits of a hex value as policy files, `vm_config` and `sha256sum.txt` give them:
/// surrounding ASCII whitespace ignored, at most one lowercase `0x` prefix (`0X`, `0x0x`:
/// malformed), then digits of either case (checked by the decoder).
pub(crate) fn hex_digits(s: &str) -> &str {
    let t = s.trim_ascii();
    t.strip_prefix("0x").unwrap_or(t)
}

/// A 48-byte register value (96 hex digits).
pub(crate) fn hex48(s: &str, what: &str) -> Result<[u8; 48], OsImageError> {
    let mut out = [0u8; 48];
    hex::decode_to_slice(hex_digits(s), &mut out)
        .map_err(|_| invalid(format!("{what}: not 96 hex digits")))?;
    Ok(out)
}

/// A 32-byte hash (64 hex digits).
fn hex32(s: &str, what: &str) -> Result<[u8; 32], OsImageError> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(hex_digits(s), &mut out)
        .map_err(|_| invalid(format!("{what}: not 64 hex digits")))?;
    Ok(out)
}

/// Largest `memory_size`: the largest integer a JSON number holds exactly in every
/// reader (2^53 - 1; JavaScript's `Number.MAX_SAFE_INTEGER`).
pub const MAX_MEMORY_SIZE: u64 = (1 << 53) - 1;

/// A JSON number whose value is a whole number from 0 to `max` (`2` and `2.0` alike);
/// anything else (a string, a negative or fractional number, null) is `None`.
fn whole_number(v: &serde_json::Value, max: u64) -> Option<u64> {
    if let Some(n) = v.as_u64() {
        return (n <= max).then_some(n);
    }
    if v.is_i64() {
        return None;
    }
    let f = v.as_f64()?;
    // `max` is at most 2^53 - 1, exact as an f64.
    (f.is_finite() && f.fract() == 0.0 && f >= 0.0 && f <= max as f64).then_some(f as u64)
}

/// A policy entry's `vm_shape.<field>`: a whole number from 0 to `max`, else the file is
/// refused.
fn shape_number<'de, D: serde::Deserializer<'de>>(
    d: D,
    field: &str,
    max: u64,
) -> Result<Option<u64>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    whole_number(&v, max).map(Some).ok_or_else(|| {
        serde::de::Error::custom(format!(
            "vm_shape.{field}: not a whole number from 0 to {max}"
        ))
    })
}

fn de_cpu_count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    Ok(shape_number(d, "cpu_count", u32::MAX.into())?.and_then(|n| u32::try_from(n).ok()))
}

fn de_memory_size<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    shape_number(d, "memory_size", MAX_MEMORY_SIZE)
}

/// A JSON value as text with object keys sorted and whole numbers up to 2^53 written
/// without a fraction (`2.0` as `2`): how shape values are compared and shown, the same
/// text the JS SDK's checkOsMeasurements writes.
fn canonical(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => u.to_string(),
            (_, Some(i), _) => i.to_string(),
            (_, _, Some(f)) if f.fract() == 0.0 && f.abs() <= MAX_MEMORY_SIZE as f64 => {
                (f as i64).to_string()
            }
            _ => v.to_string(),
        },
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            let fields: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&o[k])))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        _ => v.to_string(),
    }
}

/// The VM's shape: what, beside the image, determines RTMR0 (and RTMR1, through the
/// memory size). Fields a side does not state are not compared.
///
/// In a policy entry `cpu_count` (0 to 2^32 - 1) and `memory_size` (0 to 2^53 - 1) must be
/// whole numbers or the file is refused. From `vm_config` every shape field is kept as
/// stated: a `cpu_count` or `memory_size` that is not such a number (`"4"`, `-1`, `null`)
/// stays in [`VmShape::other`] and so never equals an entry's number.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmShape {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de_cpu_count"
    )]
    pub cpu_count: Option<u32>,
    /// Bytes.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de_memory_size"
    )]
    pub memory_size: Option<u64>,
    /// Anything else dstack's `vm_config` records (`qemu_version`, `pci_hole64_size`,
    /// `num_gpus`, `hugepages`, `hotplug_off`, …), compared as JSON values.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// `vm_config` fields that describe the shape (the rest are identity or measurement
/// material), beside `cpu_count` and `memory_size`.
const SHAPE_FIELDS: [&str; 12] = [
    "qemu_version",
    "qemu_single_pass_add_pages",
    "pic",
    "pci_hole64_size",
    "hugepages",
    "num_gpus",
    "num_nvswitches",
    "num_nics",
    "num_verity_volumes",
    "swtpm",
    "hotplug_off",
    "host_share_mode",
];

impl VmShape {
    /// Every field the shape states, by name.
    fn fields(&self) -> BTreeMap<&str, serde_json::Value> {
        let mut out: BTreeMap<&str, serde_json::Value> = self
            .other
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        if let Some(c) = self.cpu_count {
            out.insert("cpu_count", c.into());
        }
        if let Some(m) = self.memory_size {
            out.insert("memory_size", m.into());
        }
        out
    }

    /// The fields where `self` and `other` both state a value and differ (`name self !=
    /// other`, values as canonical JSON), in the order of the field names.
    pub fn differences(&self, other: &VmShape) -> Vec<String> {
        let theirs = other.fields();
        self.fields()
            .into_iter()
            .filter_map(|(k, a)| {
                let (a, b) = (canonical(&a), canonical(theirs.get(k)?));
                (a != b).then(|| format!("{k} {a} != {b}"))
            })
            .collect()
    }
}

/// What dstack's `vm_config` (served in `/attestation`) says about the VM.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VmConfig {
    pub os_image_hash: Option<[u8; 32]>,
    /// The image name (e.g. `dstack-dev-0.5.3`), as the host states it.
    pub image: Option<String>,
    pub shape: VmShape,
}

impl VmConfig {
    /// Parses dstack's `vm_config` JSON text (an empty string: nothing known).
    pub fn parse(text: &str) -> Result<Self, OsImageError> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| invalid(format!("vm_config: {e}")))?;
        let obj = v
            .as_object()
            .ok_or_else(|| invalid("vm_config is not a JSON object"))?;
        let os_image_hash = match obj.get("os_image_hash").and_then(|h| h.as_str()) {
            Some(h) if !h.is_empty() => Some(hex32(h, "vm_config os_image_hash")?),
            _ => None,
        };
        let mut other: BTreeMap<String, serde_json::Value> = SHAPE_FIELDS
            .iter()
            .filter_map(|k| obj.get(*k).map(|v| ((*k).to_owned(), v.clone())))
            .collect();
        // A count stated as something else than a whole number is kept as stated (in
        // `other`), so that it differs from every entry's number.
        let mut number = |field: &str, max: u64| {
            let v = obj.get(field)?;
            let n = whole_number(v, max);
            if n.is_none() {
                other.insert(field.to_owned(), v.clone());
            }
            n
        };
        let cpu_count = number("cpu_count", u32::MAX.into()).and_then(|n| u32::try_from(n).ok());
        let memory_size = number("memory_size", MAX_MEMORY_SIZE);
        let shape = VmShape {
            cpu_count,
            memory_size,
            other,
        };
        Ok(Self {
            os_image_hash,
            image: obj.get("image").and_then(|i| i.as_str()).map(str::to_owned),
            shape,
        })
    }

    /// Version and dev flag from the image name (`dstack-0.5.3`, `dstack-dev-0.5.3`): the
    /// host's word, not a measurement.
    pub fn image_name_info(&self) -> Option<(String, bool)> {
        let name = self.image.as_deref()?;
        let version = name.rsplit('-').next()?;
        let numeric = version.split('.').take(3).all(|p| p.parse::<u32>().is_ok())
            && version.split('.').count() >= 3;
        numeric.then(|| (version.to_owned(), name.contains("-dev-")))
    }
}

/// `metadata.json` of a dstack OS image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageMetadata {
    pub bios: String,
    pub kernel: String,
    pub initrd: String,
    pub cmdline: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub is_dev: bool,
}

/// One accepted OS measurement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsEntry {
    /// SHA-256 of the image's `sha256sum.txt` (64 hex).
    pub os_image_hash: String,
    /// The dstack OS version (from the image's `metadata.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Whether the image is a development build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_dev: Option<bool>,
    /// The VM shape these registers are for.
    #[serde(default)]
    pub vm_shape: VmShape,
    /// Accepted MRTD values (96 hex each): the firmware's pages added in one pass (QEMU 9
    /// and later) and in two (QEMU 8). A single string is accepted too.
    #[serde(deserialize_with = "one_or_many")]
    pub mrtd: Vec<String>,
    /// RTMR0 (firmware configuration and QEMU's ACPI tables for the shape); `null`: not
    /// pinned by this entry.
    #[serde(default)]
    pub rtmr0: Option<String>,
    pub rtmr1: String,
    pub rtmr2: String,
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

/// An [`OsEntry`] with its values decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedOs {
    pub os_image_hash: [u8; 32],
    pub mrtd: Vec<[u8; 48]>,
    pub rtmr0: Option<[u8; 48]>,
    pub rtmr1: [u8; 48],
    pub rtmr2: [u8; 48],
}

impl OsEntry {
    /// The entry's values, checked.
    pub fn decode(&self) -> Result<PinnedOs, OsImageError> {
        if self.mrtd.is_empty() {
            return Err(invalid("mrtd: no value"));
        }
        Ok(PinnedOs {
            os_image_hash: hex32(&self.os_image_hash, "os_image_hash")?,
            mrtd: self
                .mrtd
                .iter()
                .map(|m| hex48(m, "mrtd"))
                .collect::<Result<_, _>>()?,
            rtmr0: self
                .rtmr0
                .as_deref()
                .map(|r| hex48(r, "rtmr0"))
                .transpose()?,
            rtmr1: hex48(&self.rtmr1, "rtmr1")?,
            rtmr2: hex48(&self.rtmr2, "rtmr2")?,
        })
    }
}

/// A policy file: the OS measurements a verifier accepts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsPolicy {
    pub entries: Vec<OsEntry>,
}

impl OsPolicy {
    /// Parses and checks a policy file (JSON `{"entries": […]}`).
    /// Any malformed entry refuses the whole file, the error naming the entry and field.
    pub fn parse(json: &[u8]) -> Result<Self, OsImageError> {
        let v: serde_json::Value =
            serde_json::from_slice(json).map_err(|e| invalid(format!("policy file: {e}")))?;
        let raw = v
            .as_object()
            .ok_or_else(|| invalid("policy file is not a JSON object"))?
            .get("entries")
            .and_then(|e| e.as_array())
            .ok_or_else(|| invalid("policy file: no \"entries\" array"))?;
        let mut entries = Vec::with_capacity(raw.len());
        for (i, e) in raw.iter().enumerate() {
            let entry = OsEntry::deserialize(e)
                .map_err(|err| invalid(format!("policy file entry {i}: {err}")))?;
            entry
                .decode()
                .map_err(|err| invalid(format!("policy file entry {i}: {err}")))?;
            entries.push(entry);
        }
        Ok(Self { entries })
    }

    /// Reads a policy file.
    pub fn load(path: &Path) -> Result<Self, OsImageError> {
        Self::parse(&read_bounded(path, MAX_SMALL_FILE)?)
    }

    /// Adds `entry`, replacing an entry for the same image and shape.
    pub fn insert(&mut self, entry: OsEntry) {
        self.entries
            .retain(|e| !(e.os_image_hash == entry.os_image_hash && e.vm_shape == entry.vm_shape));
        self.entries.push(entry);
    }
}

/// The key provider recorded in the event log (`key-provider`, dstack's
/// `{"name": …, "id": …}`: e.g. `kms` and the KMS's public key, or `local`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyProvider {
    pub name: String,
    pub id: String,
}

impl KeyProvider {
    /// Decodes the `key-provider` event payload; `None` if it is not that JSON.
    pub fn decode(payload: &str) -> Option<Self> {
        serde_json::from_str(payload).ok()
    }
}

/// Registers a TD's OS produces, recomputed from an image for a memory size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recomputed {
    /// MRTD with the pages added in one pass, and in two.
    pub mrtd_single_pass: [u8; 48],
    pub mrtd_two_pass: [u8; 48],
    pub rtmr1: [u8; 48],
    pub rtmr2: [u8; 48],
}

/// A loaded dstack OS image, every file checked against `sha256sum.txt`.
#[derive(Clone)]
pub struct OsImage {
    pub os_image_hash: [u8; 32],
    pub metadata: ImageMetadata,
    firmware: Vec<u8>,
    kernel: Vec<u8>,
    initrd: Vec<u8>,
}

impl std::fmt::Debug for OsImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OsImage")
            .field("os_image_hash", &hex::encode(self.os_image_hash))
            .field("metadata", &self.metadata)
            .finish_non_exhaustive()
    }
}

fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, OsImageError> {
    let io = |reason: String| OsImageError::Io {
        path: path.display().to_string(),
        reason,
    };
    let meta = std::fs::metadata(path).map_err(|e| io(e.to_string()))?;
    if meta.len() > max {
        return Err(io(format!("larger than {max} bytes")));
    }
    std::fs::read(path).map_err(|e| io(e.to_string()))
}

/// `<hex>  <name>` lines of a `sha256sum.txt` (a `*` before the name marks binary mode).
pub fn parse_checksums(text: &str) -> Result<Vec<([u8; 32], String)>, OsImageError> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let (hash, name) = line
            .split_once(char::is_whitespace)
            .ok_or_else(|| invalid(format!("sha256sum.txt line {}: no file name", n + 1)))?;
        let name = name.trim_start().trim_start_matches('*');
        let hash = hex32(hash, &format!("sha256sum.txt line {}", n + 1))?;
        if name.is_empty()
            || name.contains('/')
            || name.contains('\\')
            || name.starts_with('.')
            || name == "sha256sum.txt"
        {
            return Err(invalid(format!(
                "sha256sum.txt line {}: {name:?} is not a plain file name of the image",
                n + 1
            )));
        }
        if out.iter().any(|(_, existing)| existing == name) {
            return Err(invalid(format!("sha256sum.txt lists {name} twice")));
        }
        out.push((hash, name.to_owned()));
    }
    Ok(out)
}

impl OsImage {
    /// Reads image directory `dir`: `sha256sum.txt` (its SHA-256 is the image hash), every
    /// file it lists (each must match), and `metadata.json`, whose firmware, kernel and
    /// initrd must be among the listed files.
    pub fn load(dir: &Path) -> Result<Self, OsImageError> {
        let sums = read_bounded(&dir.join("sha256sum.txt"), MAX_SMALL_FILE)?;
        let os_image_hash: [u8; 32] = Sha256::digest(&sums).into();
        let text = std::str::from_utf8(&sums).map_err(|_| invalid("sha256sum.txt is not UTF-8"))?;
        let listed = parse_checksums(text)?;
        let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for (hash, name) in &listed {
            let bytes = read_bounded(&dir.join(name), MAX_IMAGE_FILE)?;
            if <[u8; 32]>::from(Sha256::digest(&bytes)) != *hash {
                return Err(invalid(format!(
                    "{name} does not match its line in sha256sum.txt"
                )));
            }
            files.insert(name.clone(), bytes);
        }
        let metadata_bytes = files
            .get("metadata.json")
            .ok_or_else(|| invalid("sha256sum.txt does not cover metadata.json"))?;
        let metadata: ImageMetadata = serde_json::from_slice(metadata_bytes)
            .map_err(|e| invalid(format!("metadata.json: {e}")))?;
        let take = |name: &str, what: &str| {
            files.get(name).cloned().ok_or_else(|| {
                invalid(format!(
                    "metadata.json's {what} {name:?} is not covered by sha256sum.txt"
                ))
            })
        };
        let firmware = take(&metadata.bios, "bios")?;
        let kernel = take(&metadata.kernel, "kernel")?;
        let initrd = take(&metadata.initrd, "initrd")?;
        Ok(Self {
            os_image_hash,
            metadata,
            firmware,
            kernel,
            initrd,
        })
    }

    /// The TDVF metadata of the image's firmware (what RTMR0's TD HOB event depends on,
    /// beside the memory size).
    pub fn tdvf(&self) -> Result<Tdvf, OsImageError> {
        Ok(Tdvf::parse(&self.firmware)?)
    }

    /// The kernel command line the firmware measures.
    pub fn measured_cmdline(&self) -> String {
        format!(
            "{}{}",
            self.metadata.cmdline,
            kernel::FIRMWARE_CMDLINE_SUFFIX
        )
    }

    /// MRTD and RTMR1/RTMR2 of a TD with `memory_size` bytes booting this image.
    pub fn measure(&self, memory_size: u64) -> Result<Recomputed, OsImageError> {
        let tdvf = Tdvf::parse(&self.firmware)?;
        let patched = kernel::qemu_patched_kernel(
            &self.kernel,
            self.initrd.len() as u64,
            memory_size,
            kernel::QEMU_ACPI_DATA_SIZE,
        )?;
        let rtmr1 = kernel::replay(&kernel::rtmr1_log(kernel::authenticode_sha384(&patched)?));
        let rtmr2 = kernel::replay(&kernel::rtmr2_log(
            kernel::cmdline_digest(&self.measured_cmdline()),
            kernel::sha384(&self.initrd),
        ));
        Ok(Recomputed {
            mrtd_single_pass: tdvf.mrtd(&self.firmware, PageOrder::SinglePass)?,
            mrtd_two_pass: tdvf.mrtd(&self.firmware, PageOrder::TwoPass)?,
            rtmr1,
            rtmr2,
        })
    }

    /// A policy entry for this image and `shape` (which must give the memory size);
    /// `rtmr0` if the caller knows it for that shape.
    pub fn entry(&self, shape: VmShape, rtmr0: Option<[u8; 48]>) -> Result<OsEntry, OsImageError> {
        let memory = shape
            .memory_size
            .ok_or_else(|| invalid("the VM shape needs a memory size"))?;
        let r = self.measure(memory)?;
        Ok(OsEntry {
            os_image_hash: hex::encode(self.os_image_hash),
            version: (!self.metadata.version.is_empty()).then(|| self.metadata.version.clone()),
            is_dev: Some(self.metadata.is_dev),
            vm_shape: shape,
            mrtd: vec![
                hex::encode(r.mrtd_single_pass),
                hex::encode(r.mrtd_two_pass),
            ],
            rtmr0: rtmr0.map(hex::encode),
            rtmr1: hex::encode(r.rtmr1),
            rtmr2: hex::encode(r.rtmr2),
        })
    }
}

/// A memory size [`parse_memory_size`] refused (as given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a memory size (bytes, or e.g. 2G)")]
pub struct BadMemorySize(pub String);

/// Parses a memory size: bytes, or a number with `K`, `M`, `G` or `T` (binary units,
/// optional `i`/`B`: `2G`, `2GiB`, `2048M`).
pub fn parse_memory_size(s: &str) -> Result<u64, BadMemorySize> {
    let t = s.trim();
    let t = t.strip_suffix('B').unwrap_or(t);
    let t = t.strip_suffix('i').unwrap_or(t);
    let (num, shift) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 30),
        Some('T' | 't') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let bad = || BadMemorySize(s.to_owned());
    let n: u64 = num.trim().parse().map_err(|_| bad())?;
    n.checked_mul(1u64 << shift)
        .filter(|&b| b > 0)
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--memory` of `evidence os-measure`: clap shows the refusal as given.
    #[test]
    fn memory_sizes() {
        assert_eq!(parse_memory_size("2G"), Ok(2 << 30));
        assert_eq!(parse_memory_size("2048MiB"), Ok(2 << 30));
        assert_eq!(parse_memory_size("4096"), Ok(4096));
        for bad in ["", "0", "2X", "-1G", "99999999T"] {
            assert_eq!(
                parse_memory_size(bad),
                Err(BadMemorySize(bad.to_owned())),
                "{bad}"
            );
        }
        assert_eq!(
            BadMemorySize("2X".into()).to_string(),
            "\"2X\" is not a memory size (bytes, or e.g. 2G)"
        );
    }
}
