//! `[actions.imports]`: where actions' `import`s come from, and their bounds.

use std::path::PathBuf;

use action_runtime::protocol::MAX_FRAME_LEN;
use appliance_domain::settings::InvalidSetting;
use serde::{Deserialize, Serialize};

/// Largest `max_module_bytes`: a module's source travels to the worker in one frame, and
/// JSON escaping may grow it.
pub const MAX_MODULE_BYTES_LIMIT: usize = MAX_FRAME_LEN / 2;

/// Module imports for actions (`import { z } from "zod@3.22.4"`). Off unless `cdn` is set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ImportsConfig {
    /// The ESM CDN every module comes from, as a base URL ending in `/`:
    /// `https://esm.sh/`, or `https://cdn.jsdelivr.net/npm/` (with `entry_suffix =
    /// "/+esm"`). `name@x.y.z[/file]` resolves under it, a full URL must lie under it,
    /// and so must every module a module imports. Unset: `import` is refused.
    pub cdn: Option<String>,
    /// Appended to `name@x.y.z` when it names no file: `""` for esm.sh (whose package URL
    /// is the entry module), `"/+esm"` for jsDelivr.
    pub entry_suffix: String,
    /// Largest module body, in bytes (at most [`MAX_MODULE_BYTES_LIMIT`]).
    pub max_module_bytes: usize,
    /// Distinct modules one action may import (its imports' imports included, failed
    /// imports too). A bundling
    /// CDN serves a package as a few modules; an unbundled ESM build is many (viem 2's
    /// own files and its dependencies' are about 450).
    pub max_modules_per_action: usize,
    /// Module bytes one action may load in all.
    pub max_bytes_per_action: usize,
    /// Time limit of one module fetch, in ms. Fetches also count against the action's
    /// own `timeout_ms`.
    pub fetch_timeout_ms: u64,
    /// Module bodies kept in memory by their SHA-384, least recently used evicted beyond
    /// it; 0 = none (every import fetches).
    pub cache_bytes: usize,
    /// PEM CA certificates to trust for the CDN instead of the public roots (a private
    /// mirror; the tests' local stand-in). Unset: the public roots.
    pub ca_bundle: Option<PathBuf>,
}

impl Default for ImportsConfig {
    fn default() -> Self {
        Self {
            cdn: None,
            entry_suffix: String::new(),
            max_module_bytes: 4 * 1024 * 1024,
            max_modules_per_action: 1024,
            max_bytes_per_action: 16 * 1024 * 1024,
            fetch_timeout_ms: 30_000,
            cache_bytes: 64 * 1024 * 1024,
            ca_bundle: None,
        }
    }
}

impl ImportsConfig {
    /// Checks the CDN URL and the bounds.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if let Some(cdn) = &self.cdn {
            super::specifier::cdn_base(cdn)
                .map_err(|why| InvalidSetting(format!("actions.imports.cdn ({cdn}): {why}")))?;
        }
        if !self.entry_suffix.is_empty() && !self.entry_suffix.starts_with('/') {
            return Err(InvalidSetting::new(
                "actions.imports.entry_suffix must be empty or start with `/` (`/+esm`)",
            ));
        }
        if self.max_module_bytes == 0 || self.max_module_bytes > MAX_MODULE_BYTES_LIMIT {
            return Err(InvalidSetting(format!(
                "actions.imports.max_module_bytes must be between 1 and {MAX_MODULE_BYTES_LIMIT}"
            )));
        }
        if self.max_modules_per_action == 0 || self.max_bytes_per_action == 0 {
            return Err(InvalidSetting::new(
                "actions.imports.max_modules_per_action and max_bytes_per_action must be at least 1",
            ));
        }
        if self.fetch_timeout_ms == 0 {
            return Err(InvalidSetting::new(
                "actions.imports.fetch_timeout_ms must be at least 1",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_are_refused_by_name() {
        let cases = [
            (
                ImportsConfig {
                    cdn: Some("http://esm.sh/".into()),
                    ..ImportsConfig::default()
                },
                "actions.imports.cdn",
            ),
            (
                ImportsConfig {
                    cdn: Some("https://cdn.jsdelivr.net/npm".into()),
                    ..ImportsConfig::default()
                },
                "actions.imports.cdn",
            ),
            (
                ImportsConfig {
                    entry_suffix: "+esm".into(),
                    ..ImportsConfig::default()
                },
                "actions.imports.entry_suffix",
            ),
            (
                ImportsConfig {
                    max_module_bytes: MAX_MODULE_BYTES_LIMIT + 1,
                    ..ImportsConfig::default()
                },
                "actions.imports.max_module_bytes",
            ),
            (
                ImportsConfig {
                    max_modules_per_action: 0,
                    ..ImportsConfig::default()
                },
                "actions.imports.max_modules_per_action",
            ),
            (
                ImportsConfig {
                    fetch_timeout_ms: 0,
                    ..ImportsConfig::default()
                },
                "actions.imports.fetch_timeout_ms",
            ),
        ];
        for (config, key) in cases {
            let err = config.validate().unwrap_err();
            assert!(err.0.contains(key), "{key}: {err}");
        }
        assert!(ImportsConfig::default().validate().is_ok());
        let jsdelivr = ImportsConfig {
            cdn: Some("https://cdn.jsdelivr.net/npm/".into()),
            entry_suffix: "/+esm".into(),
            ..ImportsConfig::default()
        };
        assert!(jsdelivr.validate().is_ok());
    }
}
