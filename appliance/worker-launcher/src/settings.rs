//! The one setting the launcher takes from the appliance's configuration file.

use std::path::{Path, PathBuf};

/// The appliance's default `actions.memory_limit_mb` (`appliance/execution/src/config.rs`), used
/// when the file does not set it.
pub const DEFAULT_MEMORY_LIMIT_MB: u64 = 128;

/// Why the configuration could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: ParseError,
    },
}

/// Why the configuration text does not give a usable memory limit.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    #[error("actions.memory_limit_mb must be positive")]
    ZeroLimit,
}

#[derive(serde::Deserialize, Default)]
struct ApplianceToml {
    #[serde(default)]
    actions: ActionsSection,
}

#[derive(serde::Deserialize, Default)]
struct ActionsSection {
    memory_limit_mb: Option<u64>,
}

/// `[actions] memory_limit_mb` of the appliance configuration at `path` (the measured
/// file the appliance itself reads), or the appliance's default when it is not set.
/// Every other key is ignored.
pub fn memory_limit_mb(path: &Path) -> Result<u64, SettingsError> {
    let text = std::fs::read_to_string(path).map_err(|source| SettingsError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_memory_limit_mb(&text).map_err(|source| SettingsError::Parse {
        path: path.to_owned(),
        source,
    })
}

fn parse_memory_limit_mb(text: &str) -> Result<u64, ParseError> {
    let parsed: ApplianceToml = toml::from_str(text)?;
    match parsed.actions.memory_limit_mb {
        Some(0) => Err(ParseError::ZeroLimit),
        Some(limit) => Ok(limit),
        None => Ok(DEFAULT_MEMORY_LIMIT_MB),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_the_memory_limit() {
        let text = "listen = \"0.0.0.0:8443\"\n[chain]\nchain_id = 1\n[actions]\ntimeout_ms = 5\nmemory_limit_mb = 96\n";
        assert_eq!(parse_memory_limit_mb(text).unwrap(), 96);
        assert_eq!(
            parse_memory_limit_mb("[chain]\nchain_id = 1\n").unwrap(),
            DEFAULT_MEMORY_LIMIT_MB
        );
        assert!(matches!(
            parse_memory_limit_mb("[actions]\nmemory_limit_mb = 0\n"),
            Err(ParseError::ZeroLimit)
        ));
        assert!(matches!(
            parse_memory_limit_mb("[actions]\nmemory_limit_mb = \"x\"\n"),
            Err(ParseError::Toml(_))
        ));
    }

    #[test]
    fn a_zero_limit_names_the_file_and_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("appliance.toml");
        std::fs::write(&path, "[actions]\nmemory_limit_mb = 0\n").unwrap();
        let err = memory_limit_mb(&path).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}: actions.memory_limit_mb must be positive",
                path.display()
            )
        );
    }
}
