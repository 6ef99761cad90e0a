//! Profiles: where a deployment is, the API key for it, and the verification policy, kept
//! in `profiles.toml` in the user's config directory.
//!
//! The file holds API keys, so it is the user's alone: it is written with mode 0600 in a
//! directory of mode 0700, through a temporary file and a rename (a crash leaves the old
//! file or the new one, never half of one), and a file that group or others can read is
//! refused rather than used.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use appliance_client::Policy;
use appliance_client::evidence::collateral::CollateralSource;
use appliance_client::evidence::os_image::OsPolicy;
use serde::{Deserialize, Serialize};

/// The file's name inside the config directory.
pub const FILE_NAME: &str = "profiles.toml";
/// The profile used when none is named.
pub const DEFAULT_PROFILE: &str = "default";

/// Why the profiles could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("no config directory: set APPLIANCE_CLI_CONFIG_DIR, XDG_CONFIG_HOME or HOME")]
    NoConfigDir,
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Parse { path: PathBuf, reason: String },
    #[error(
        "{path} can be read by group or others (mode {mode:o}) and holds API keys: run `chmod 600 {path}` and rotate the keys it holds if others had access"
    )]
    TooOpen { path: PathBuf, mode: u32 },
    #[error("profile {0:?} does not exist: create it with `appliance-cli profile set --url …`")]
    Missing(String),
    #[error("profile {profile:?}: {reason}")]
    Invalid { profile: String, reason: String },
    #[error(
        "OS measurements policy {path}: {reason} (the format of `evidence verify --os-measurements`, as `evidence os-measure` writes it)"
    )]
    OsMeasurements { path: PathBuf, reason: String },
}

/// One deployment and how to trust it. Absent fields take the library's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// `https://host[:port]` of the deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The API key (account or usage key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// Extra CA certificates (PEM) to trust beside the web PKI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// Accept simulated quotes: the development stack only, NOT confidential.
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_simulated: bool,
    /// Accept an evidence quote without the nonce the client sent (a stale or replayed
    /// quote): for deployments that do not answer `?nonce=`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_stale: bool,
    /// Policy file of accepted OS measurements (MRTD, RTMR0-2 per OS image and VM shape:
    /// `evidence verify --os-measurements`); read at every run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_measurements: Option<PathBuf>,
    /// Accept a genuine quote whose OS measurements no policy pins.
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_unpinned_os: bool,
    /// Compose hashes the deployment must run (empty: any that governance allows).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compose_hashes: Vec<String>,
    /// TCB statuses that pass (empty: `UpToDate`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accept_statuses: Vec<String>,
    /// JSON-RPC URL of the chain holding the governance contract.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpc_url: Option<String>,
    /// PCCS base URL for quote collateral.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pccs_url: Option<String>,
    /// A dcap-qvl collateral file instead of a PCCS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collateral: Option<PathBuf>,
    /// DNS server (IP:PORT) for the CAA check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<SocketAddr>,
    /// Domain whose CAA records govern the certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caa_domain: Option<String>,
    /// Checks accepted as not run (by `evidence verify` name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip: Vec<String>,
    /// Seconds a verification is trusted (default 3600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_secs: Option<u64>,
    /// Seconds a request may take (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Profile {
    /// The verification policy this profile asks for (reading its OS measurements file).
    pub fn policy(&self) -> Result<Policy, ProfileError> {
        let os_measurements = self
            .os_measurements
            .as_ref()
            .map(|path| {
                OsPolicy::load(path).map_err(|e| ProfileError::OsMeasurements {
                    path: path.clone(),
                    reason: e.to_string(),
                })
            })
            .transpose()?;
        let mut policy = Policy {
            allow_simulated: self.allow_simulated,
            allow_stale: self.allow_stale,
            os_measurements,
            allow_unpinned_os: self.allow_unpinned_os,
            compose_hashes: self.compose_hashes.clone(),
            rpc_url: self.rpc_url.clone(),
            dns_server: self.dns,
            caa_domain: self.caa_domain.clone(),
            skip: self.skip.clone(),
            collateral: match (&self.pccs_url, &self.collateral) {
                (Some(url), _) => Some(CollateralSource::Pccs(url.clone())),
                (None, Some(file)) => Some(CollateralSource::File(file.clone())),
                (None, None) => None,
            },
            ..Policy::default()
        };
        if !self.accept_statuses.is_empty() {
            policy.accepted_statuses = self.accept_statuses.clone();
        }
        if let Some(secs) = self.cache_secs {
            policy.cache_for = Duration::from_secs(secs);
        }
        Ok(policy)
    }

    /// Checks that make a profile unusable before anything is sent.
    pub fn check(&self, name: &str) -> Result<(), ProfileError> {
        let invalid = |reason: String| ProfileError::Invalid {
            profile: name.to_owned(),
            reason,
        };
        if let Some(url) = &self.url
            && !url.starts_with("https://")
        {
            return Err(invalid(format!("url {url:?} must start with https://")));
        }
        if self.pccs_url.is_some() && self.collateral.is_some() {
            return Err(invalid("set pccs_url or collateral, not both".into()));
        }
        Ok(())
    }
}

/// Every profile, by name, as the file holds them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profiles {
    #[serde(default)]
    pub profiles: BTreeMap<String, Profile>,
}

/// The variable naming the config directory.
pub const ENV_CONFIG_DIR: &str = "APPLIANCE_CLI_CONFIG_DIR";

/// The config directory: `$APPLIANCE_CLI_CONFIG_DIR`, else `$XDG_CONFIG_HOME/appliance-cli`,
/// else `$HOME/.config/appliance-cli`.
pub fn config_dir() -> Result<PathBuf, ProfileError> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var(ENV_CONFIG_DIR) {
        return Ok(PathBuf::from(dir));
    }
    if let Some(xdg) = var("XDG_CONFIG_HOME") {
        return Ok(PathBuf::from(xdg).join("appliance-cli"));
    }
    var("HOME")
        .map(|home| PathBuf::from(home).join(".config").join("appliance-cli"))
        .ok_or(ProfileError::NoConfigDir)
}

/// The profiles file in `dir`.
pub fn path_in(dir: &Path) -> PathBuf {
    dir.join(FILE_NAME)
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ProfileError + '_ {
    move |source| ProfileError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Reads the profiles in `dir` (none if the file does not exist yet).
pub fn load(dir: &Path) -> Result<Profiles, ProfileError> {
    let path = path_in(dir);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Profiles::default()),
        Err(e) => return Err(io(&path)(e)),
    };
    refuse_if_open(&path)?;
    toml::from_str(&text).map_err(|e| ProfileError::Parse {
        path: path.clone(),
        reason: e.to_string(),
    })
}

#[cfg(unix)]
fn refuse_if_open(path: &Path) -> Result<(), ProfileError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .map_err(io(path))?
        .permissions()
        .mode()
        & 0o777;
    if mode & 0o077 != 0 {
        return Err(ProfileError::TooOpen {
            path: path.to_owned(),
            mode,
        });
    }
    Ok(())
}

#[cfg(not(unix))]
fn refuse_if_open(_path: &Path) -> Result<(), ProfileError> {
    Ok(())
}

/// Writes `profiles` to `dir` atomically: a 0600 temporary file beside it, synced, then
/// renamed over the old one. Creates `dir` with mode 0700 if needed.
pub fn save(dir: &Path, profiles: &Profiles) -> Result<PathBuf, ProfileError> {
    create_private_dir(dir)?;
    let path = path_in(dir);
    let text = toml::to_string_pretty(profiles).map_err(|e| ProfileError::Parse {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    let tmp = dir.join(format!(".{FILE_NAME}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = private_file(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        // The rename is durable once the directory is synced.
        std::fs::File::open(dir)?.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(&path)(e));
    }
    Ok(path)
}

#[cfg(unix)]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> Result<(), ProfileError> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io(dir))
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> Result<(), ProfileError> {
    std::fs::create_dir_all(dir).map_err(io(dir))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn sample() -> Profiles {
        let mut profiles = Profiles::default();
        profiles.profiles.insert(
            "dev".into(),
            Profile {
                url: Some("https://localhost:8443".into()),
                api_key: Some("secret-key".into()),
                allow_simulated: true,
                accept_statuses: vec!["UpToDate".into(), "SWHardeningNeeded".into()],
                pccs_url: Some("https://pccs.example:8081".into()),
                cache_secs: Some(60),
                ..Profile::default()
            },
        );
        profiles
    }

    #[cfg(unix)]
    #[test]
    fn saved_profiles_are_private_and_read_back() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("nested").join("appliance-cli");
        let path = save(&dir, &sample()).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(load(&dir).unwrap(), sample());
        // Saving again replaces the file and leaves no temporary file behind.
        save(&dir, &Profiles::default()).unwrap();
        assert_eq!(load(&dir).unwrap(), Profiles::default());
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(FILE_NAME)]);
    }

    #[cfg(unix)]
    #[test]
    fn a_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let path = save(tmp.path(), &sample()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let err = load(tmp.path()).unwrap_err();
        assert!(
            matches!(err, ProfileError::TooOpen { mode: 0o640, .. }),
            "{err}"
        );
        assert!(!err.to_string().contains("secret-key"));
    }

    #[test]
    fn the_policy_follows_the_profile() {
        let profile = &sample().profiles["dev"];
        let policy = profile.policy().unwrap();
        assert!(policy.allow_simulated);
        assert_eq!(policy.accepted_statuses, ["UpToDate", "SWHardeningNeeded"]);
        assert_eq!(policy.cache_for, Duration::from_secs(60));
        assert_eq!(
            policy.collateral,
            Some(CollateralSource::Pccs("https://pccs.example:8081".into()))
        );
        // An empty profile is the library's strict default.
        assert_eq!(Profile::default().policy().unwrap(), Policy::default());
    }

    /// An OS measurements policy file of one entry (as `evidence os-measure` writes it).
    pub(crate) fn os_policy_json() -> String {
        serde_json::json!({"entries": [{
            "os_image_hash": "7d".repeat(32),
            "vm_shape": {"cpu_count": 2, "memory_size": 2147483648u64},
            "mrtd": ["a1".repeat(48)],
            "rtmr0": "b2".repeat(48),
            "rtmr1": "c3".repeat(48),
            "rtmr2": "d4".repeat(48),
        }]})
        .to_string()
    }

    #[test]
    fn the_os_measurements_file_is_read_into_the_policy() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("os.json");
        std::fs::write(&file, os_policy_json()).unwrap();
        let profile = Profile {
            os_measurements: Some(file.clone()),
            allow_unpinned_os: true,
            ..Profile::default()
        };
        let policy = profile.policy().unwrap();
        assert_eq!(
            policy.os_measurements,
            Some(OsPolicy::parse(os_policy_json().as_bytes()).unwrap())
        );
        assert!(policy.allow_unpinned_os);
        // Stored and read back as TOML.
        let text = toml::to_string(&profile).unwrap();
        assert!(text.contains("os_measurements") && text.contains("allow_unpinned_os = true"));
        assert_eq!(toml::from_str::<Profile>(&text).unwrap(), profile);

        // A file that is not a policy, or is missing, makes the profile unusable, and says
        // which file and why.
        std::fs::write(
            &file,
            r#"{"entries": [{"os_image_hash": "00", "mrtd": [], "rtmr1": "00", "rtmr2": "00"}]}"#,
        )
        .unwrap();
        let err = profile.policy().unwrap_err().to_string();
        assert!(err.contains("os.json") && err.contains("entry 0"), "{err}");
        std::fs::remove_file(&file).unwrap();
        let err = profile.policy().unwrap_err().to_string();
        assert!(
            err.contains("OS measurements policy") && err.contains("os.json"),
            "{err}"
        );
    }

    #[test]
    fn unknown_keys_and_plain_http_are_refused() {
        assert!(toml::from_str::<Profiles>("[profiles.x]\nurll = \"https://a\"\n").is_err());
        let profile = Profile {
            url: Some("http://a".into()),
            ..Profile::default()
        };
        assert!(profile.check("x").is_err());
    }
}
