//! Module imports for actions: `import { z } from "zod@3.22.4"`, resolved against the
//! operator's ESM CDN (`[actions.imports]`), fetched here (never by the worker, which has
//! no network) and verified before the worker sees a byte.
//!
//! One import, as the worker's `import` host call asks for it ([`JobImports::import`]):
//! 1. **Resolve** the specifier to a URL under the CDN ([`specifier`]): exact versions
//!    only, relative paths only inside a module, never off the CDN.
//! 2. **Expect a hash.** An inline pin (`#sha384-…`) decides. Otherwise the URL's
//!    integrity lock in the store (`appliance_store::ModuleLock`, sealed rows: the
//!    database cannot choose the code), remembered here once read.
//! 3. **Find the body.** From the cache by that hash, or fetched from the CDN (no
//!    redirects, bounded in bytes and time) and hashed: a body whose SHA-384 differs from
//!    the pin or the lock is refused. A URL with neither is trusted on first use: its
//!    hash becomes its lock, and a later different body is refused. A verified body is
//!    kept in the cache by its hash, so a second import of it costs no fetch.
//! 4. **Budget.** Each job may try at most `max_modules_per_action` distinct imports
//!    (a failed one counts too: a loop of `import()` in `try` cannot make the appliance
//!    fetch without end) and load `max_bytes_per_action` bytes of modules; a URL it
//!    already loaded costs nothing and its source is not sent again. The fetch runs while the job's deadline runs: module
//!    fetches count against the action's time, and parsing and evaluating the modules
//!    against the worker's memory.
//!
//! Imported code runs with the same rights as the action that imports it.

mod cache;
pub mod config;
pub mod specifier;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use action_runtime::protocol::{ImportRequest, ImportedModule, MAX_FRAME_LEN};
use appliance_store::{MAX_MODULE_URL_LEN, ModuleLock, Store, StoreError};
use reqwest::Url;
use sha2::{Digest as _, Sha384};

use self::cache::ModuleCache;
pub use self::config::ImportsConfig;
use self::specifier::{SpecifierError, Sri};

/// Why an import failed. The text is what the action sees (after "import `spec`: ").
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    #[error("module imports are not enabled on this appliance (no actions.imports.cdn)")]
    Disabled,
    #[error(transparent)]
    Specifier(#[from] SpecifierError),
    #[error("the importing module {0} was not loaded by this action")]
    UnknownReferrer(String),
    #[error("the module URL is over {MAX_MODULE_URL_LEN} bytes")]
    UrlTooLong,
    #[error("an action may import at most {0} modules (failed imports count too)")]
    TooManyModules(usize),
    #[error("an action may load at most {max} bytes of modules; {url} would bring it to {total}")]
    ActionBytes {
        max: usize,
        total: usize,
        url: String,
    },
    #[error("{url} is over the module size limit of {max} bytes")]
    ModuleTooLarge { url: String, max: usize },
    #[error("fetching {url} timed out after {ms} ms")]
    Timeout { url: String, ms: u64 },
    #[error("fetching {url} failed: {why}")]
    Fetch { url: String, why: String },
    #[error("the CDN answered {status} for {url}")]
    Status { url: String, status: u16 },
    #[error("the CDN redirected {url}; redirects are not followed (import the final URL)")]
    Redirect { url: String },
    #[error("{url} is not UTF-8 text")]
    NotUtf8 { url: String },
    #[error(
        "{url} does not match its inline pin: expected {expected}, the CDN sent {actual}; refused"
    )]
    PinMismatch {
        url: String,
        expected: String,
        actual: String,
    },
    #[error(
        "{url} changed since it was first imported: its integrity lock is {locked}, the CDN now sends {actual}; refused"
    )]
    LockMismatch {
        url: String,
        locked: String,
        actual: String,
    },
    #[error("{url} is too large to hand to the worker once encoded ({bytes} bytes)")]
    FrameTooLarge { url: String, bytes: usize },
    #[error("the integrity lock of {url} failed its integrity check in the database; refused")]
    LockTampered { url: String },
    #[error("the module integrity lock is unavailable; retry shortly")]
    Store,
    /// The HTTP client could not be built (at start, not per import).
    #[error("the module client: {0}")]
    Client(String),
}

/// The appliance's module importer: the CDN, its client, the cache. Cheap to clone.
#[derive(Clone)]
pub struct ModuleImports {
    inner: Arc<Inner>,
}

struct Inner {
    base: Url,
    entry_suffix: String,
    config: ImportsConfig,
    client: reqwest::Client,
    cache: Mutex<ModuleCache>,
}

impl ModuleImports {
    /// The importer for `config`; `Ok(None)` when imports are off (no `cdn`).
    pub fn new(config: &ImportsConfig) -> Result<Option<Self>, ImportError> {
        let Some(cdn) = &config.cdn else {
            return Ok(None);
        };
        let base = specifier::cdn_base(cdn).map_err(ImportError::Client)?;
        let timeout = Duration::from_millis(config.fetch_timeout_ms);
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .connect_timeout(timeout)
            .no_proxy();
        if let Some(path) = &config.ca_bundle {
            let pem = std::fs::read(path).map_err(|e| {
                ImportError::Client(format!("actions.imports.ca_bundle {}: {e}", path.display()))
            })?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| ImportError::Client(format!("actions.imports.ca_bundle: {e}")))?;
            if certs.is_empty() {
                return Err(ImportError::Client(format!(
                    "actions.imports.ca_bundle {} holds no certificate",
                    path.display()
                )));
            }
            builder = builder.tls_built_in_root_certs(false);
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        let client = builder
            .build()
            .map_err(|e| ImportError::Client(e.to_string()))?;
        Ok(Some(Self {
            inner: Arc::new(Inner {
                base,
                entry_suffix: config.entry_suffix.clone(),
                config: config.clone(),
                client,
                cache: Mutex::new(ModuleCache::new(config.cache_bytes)),
            }),
        }))
    }

    /// A fresh budget for one job.
    pub fn for_job(&self) -> JobImports {
        JobImports {
            imports: Some(self.clone()),
            loaded: HashMap::new(),
            bytes: 0,
            attempts: 0,
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, ModuleCache> {
        // The cache holds no invariant a panic could break halfway (each call is one
        // map operation), so a poisoned lock is still usable.
        self.inner
            .cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The verified body of `url`: the hash it must have, and its text.
    async fn body(
        &self,
        store: &Store,
        url: &str,
        pin: Option<[u8; 48]>,
    ) -> Result<([u8; 48], Arc<str>), ImportError> {
        let remembered = self.cache().lock(url);
        let lock = match remembered {
            Some(hash) => Some(hash),
            None => {
                let lock = store
                    .module_lock(url)
                    .await
                    .map_err(|e| store_error(url, e))?
                    .map(|l| l.sha384);
                if let Some(hash) = lock {
                    self.cache().remember_lock(url, hash);
                }
                lock
            }
        };
        // The inline pin takes priority over the lock (as in the reference).
        if let Some(expected) = pin.or(lock) {
            let cached = self.cache().body(&expected);
            if let Some(text) = cached {
                return Ok((expected, text));
            }
        }
        let bytes = self.fetch(url).await?;
        let actual: [u8; 48] = Sha384::digest(&bytes).into();
        if let Some(pin) = pin
            && pin != actual
        {
            return Err(ImportError::PinMismatch {
                url: url.to_owned(),
                expected: Sri(&pin).to_string(),
                actual: Sri(&actual).to_string(),
            });
        }
        let mismatch = |locked: &[u8; 48]| ImportError::LockMismatch {
            url: url.to_owned(),
            locked: Sri(locked).to_string(),
            actual: Sri(&actual).to_string(),
        };
        match lock {
            Some(locked) if pin.is_none() && locked != actual => {
                tracing::error!(
                    url,
                    locked = %Sri(&locked),
                    actual = %Sri(&actual),
                    "an imported module changed since its first use; refused"
                );
                return Err(mismatch(&locked));
            }
            Some(_) => {}
            None => {
                let recorded = store
                    .lock_module(
                        url,
                        ModuleLock {
                            sha384: actual,
                            bytes: bytes.len() as u64,
                        },
                    )
                    .await
                    .map_err(|e| store_error(url, e))?;
                self.cache().remember_lock(url, recorded.sha384);
                if recorded.sha384 == actual {
                    tracing::info!(url, sha384 = %Sri(&actual), "module locked on first use");
                } else if pin.is_none() {
                    // Another job or replica locked a different body first.
                    return Err(mismatch(&recorded.sha384));
                }
            }
        }
        let text: Arc<str> = String::from_utf8(bytes)
            .map_err(|_| ImportError::NotUtf8 {
                url: url.to_owned(),
            })?
            .into();
        self.cache().keep(actual, Arc::clone(&text));
        Ok((actual, text))
    }

    /// GET `url` from the CDN: 200 only, no redirects, bounded in bytes and time.
    async fn fetch(&self, url: &str) -> Result<Vec<u8>, ImportError> {
        let max = self.inner.config.max_module_bytes;
        let failed = |e: reqwest::Error| {
            if e.is_timeout() {
                ImportError::Timeout {
                    url: url.to_owned(),
                    ms: self.inner.config.fetch_timeout_ms,
                }
            } else {
                ImportError::Fetch {
                    url: url.to_owned(),
                    why: cause_chain(&e.without_url()),
                }
            }
        };
        let mut response = self.inner.client.get(url).send().await.map_err(failed)?;
        let status = response.status();
        if status.is_redirection() {
            return Err(ImportError::Redirect {
                url: url.to_owned(),
            });
        }
        if status != reqwest::StatusCode::OK {
            return Err(ImportError::Status {
                url: url.to_owned(),
                status: status.as_u16(),
            });
        }
        let too_large = || ImportError::ModuleTooLarge {
            url: url.to_owned(),
            max,
        };
        if response.content_length().is_some_and(|n| n > max as u64) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(failed)? {
            if body.len() + chunk.len() > max {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// The error's message and its causes (the URL is in the caller's message already).
fn cause_chain(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

fn store_error(url: &str, err: StoreError) -> ImportError {
    match err {
        StoreError::Tampered { .. } => {
            tracing::error!(url, error = %err, "a module's integrity lock was refused");
            ImportError::LockTampered {
                url: url.to_owned(),
            }
        }
        other => {
            tracing::error!(url, error = %other, "the module integrity lock is unavailable");
            ImportError::Store
        }
    }
}

/// The length of `text` as a JSON string (quotes and escapes included), as serde_json
/// writes it.
fn json_string_len(text: &str) -> usize {
    2 + text
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// The `ok` value of an `import` reply, built without copying the source again.
pub fn reply(module: ImportedModule) -> serde_json::Value {
    use serde_json::Value;
    let mut map = serde_json::Map::new();
    map.insert("url".into(), Value::String(module.url));
    map.insert("integrity".into(), Value::String(module.integrity));
    map.insert(
        "source".into(),
        module.source.map_or(Value::Null, Value::String),
    );
    Value::Object(map)
}

/// One job's imports: what it loaded (URL → integrity), how many bytes, and how many
/// imports it tried.
pub struct JobImports {
    imports: Option<ModuleImports>,
    loaded: HashMap<String, String>,
    bytes: usize,
    attempts: usize,
}

impl JobImports {
    /// A job on an appliance without imports: every import is refused.
    pub fn disabled() -> Self {
        Self {
            imports: None,
            loaded: HashMap::new(),
            bytes: 0,
            attempts: 0,
        }
    }

    /// Answers one `import` host call: the module's URL, integrity, and its source unless
    /// this job was sent it already.
    pub async fn import(
        &mut self,
        store: &Store,
        request: &ImportRequest,
    ) -> Result<ImportedModule, ImportError> {
        let imports = self.imports.clone().ok_or(ImportError::Disabled)?;
        let inner = &imports.inner;
        let referrer = match &request.referrer {
            None => None,
            Some(referrer) if self.loaded.contains_key(referrer) => Some(
                Url::parse(referrer).map_err(|_| ImportError::UnknownReferrer(referrer.clone()))?,
            ),
            Some(referrer) => return Err(ImportError::UnknownReferrer(referrer.clone())),
        };
        let resolved = specifier::resolve(
            &inner.base,
            &inner.entry_suffix,
            &request.specifier,
            referrer.as_ref(),
        )?;
        let url = resolved.url.to_string();
        if url.len() > MAX_MODULE_URL_LEN {
            return Err(ImportError::UrlTooLong);
        }
        if let Some(integrity) = self.loaded.get(&url) {
            if let Some(pin) = resolved.pin
                && specifier::integrity(&pin) != *integrity
            {
                return Err(ImportError::PinMismatch {
                    url,
                    expected: Sri(&pin).to_string(),
                    actual: integrity.clone(),
                });
            }
            return Ok(ImportedModule {
                url,
                integrity: integrity.clone(),
                source: None,
            });
        }
        let limits = &inner.config;
        if self.attempts >= limits.max_modules_per_action {
            return Err(ImportError::TooManyModules(limits.max_modules_per_action));
        }
        self.attempts += 1;
        let (hash, text) = imports.body(store, &url, resolved.pin).await?;
        let total = self.bytes.saturating_add(text.len());
        if total > limits.max_bytes_per_action {
            return Err(ImportError::ActionBytes {
                max: limits.max_bytes_per_action,
                total,
                url,
            });
        }
        // JSON escaping may grow the source: it must still fit the reply's frame.
        let encoded = json_string_len(&text);
        if encoded.saturating_add(url.len()).saturating_add(512) > MAX_FRAME_LEN {
            return Err(ImportError::FrameTooLarge {
                url,
                bytes: encoded,
            });
        }
        let integrity = specifier::integrity(&hash);
        self.bytes = total;
        self.loaded.insert(url.clone(), integrity.clone());
        Ok(ImportedModule {
            url,
            integrity,
            source: Some(text.to_string()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_encoded_length_is_what_serde_json_writes() {
        for text in [
            "",
            "export const a = \"x\\y\";\n\t",
            "\u{0}\u{1}\u{1f}\u{7f} é 漢 😀 \u{8}\u{c}\r",
        ] {
            assert_eq!(
                json_string_len(text),
                serde_json::to_string(text).unwrap().len(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn the_reply_is_the_protocols_imported_module() {
        let module = ImportedModule {
            url: "https://cdn.test/a@1.0.0".into(),
            integrity: "sha384-x".into(),
            source: Some("export {}".into()),
        };
        assert_eq!(
            reply(module.clone()),
            serde_json::to_value(&module).unwrap()
        );
        let repeat = ImportedModule {
            source: None,
            ..module
        };
        assert_eq!(
            reply(repeat.clone()),
            serde_json::to_value(&repeat).unwrap()
        );
    }

    #[tokio::test]
    async fn an_appliance_without_a_cdn_refuses_every_import() {
        assert!(
            ModuleImports::new(&ImportsConfig::default())
                .unwrap()
                .is_none()
        );
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        let err = JobImports::disabled()
            .import(
                &store,
                &ImportRequest {
                    specifier: "zod@3.22.4".into(),
                    referrer: None,
                },
            )
            .await
            .unwrap_err();
        assert!(matches!(err, ImportError::Disabled), "{err}");
        assert!(err.to_string().contains("actions.imports.cdn"), "{err}");
    }
}
