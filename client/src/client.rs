//! [`Client`]: verify, pin, then call.
//!
//! Every request goes through one reqwest client whose rustls configuration carries the
//! pinning verifier ([`crate::pinning`]), with redirects off, 0-RTT off and session
//! resumption off (a resumed TLS session shows no certificate, and every new connection
//! must show an attested one). Nothing but the evidence fetch (public documents, no
//! credential) leaves the client before a verification has succeeded.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use http::{HeaderValue, Method, StatusCode};
use rustls::RootCertStore;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde::Serialize;
use serde::de::DeserializeOwned;
use zeroize::Zeroizing;

use appliance_api::error::ErrorBody;

use crate::error::ClientError;
use crate::pinning::{LeafHash, PinnedVerifier, Pins, Refusal};
use crate::policy::Policy;
use crate::verification::{Verification, unix_now, verify_bundle, verify_deployment_via};

/// The API's path prefix.
pub const API_PREFIX: &str = "/core/v1";

/// Largest response body read (the server's own limit is 10 MiB of request).
const MAX_RESPONSE: usize = 16 << 20;

/// Builds a [`Client`].
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    base_url: String,
    api_key: Option<Zeroizing<String>>,
    policy: Policy,
    ca_file: Option<PathBuf>,
    timeout: Duration,
    pool_idle_timeout: Option<Duration>,
    reuse_connections: bool,
    connect: Option<SocketAddr>,
}

impl ClientBuilder {
    /// A client for the deployment at `base_url` (`https://host[:port]`).
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            api_key: None,
            policy: Policy::default(),
            ca_file: None,
            timeout: Duration::from_secs(60),
            pool_idle_timeout: Some(Duration::from_secs(90)),
            reuse_connections: true,
            connect: None,
        }
    }

    /// Connect to `addr` instead of where the URL's host resolves (curl's `--connect-to`):
    /// the host name stays the TLS server name (SNI), the name the certificate must carry
    /// and the `Host` header, and the pinning is unchanged. For a deployment behind a
    /// TLS-passthrough proxy (dstack-gateway) reached before DNS points at it. The URL
    /// must name no port, or `addr`'s.
    pub fn connect_to(mut self, addr: SocketAddr) -> Self {
        self.connect = Some(addr);
        self
    }

    /// The API key sent (as `Authorization: Bearer`) on calls that need one.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(Zeroizing::new(key.into()));
        self
    }

    /// The verification policy.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Extra trusted root certificate(s), PEM, beside the web PKI (a private ACME CA, or
    /// the development stack's self-signed certificate).
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_file = Some(path.into());
        self
    }

    /// Timeout of one request (default 60 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long an idle keep-alive connection is kept (default 90 s; `None`: forever).
    pub fn pool_idle_timeout(mut self, idle: Option<Duration>) -> Self {
        self.pool_idle_timeout = idle;
        self
    }

    /// Whether calls reuse keep-alive connections (default `true`). `false` opens a
    /// connection (and checks the pin) for every call.
    pub fn reuse_connections(mut self, reuse: bool) -> Self {
        self.reuse_connections = reuse;
        self
    }

    /// Builds the client. Nothing is fetched or verified yet: the first call (or
    /// [`Client::verify`]) does that.
    pub fn build(self) -> Result<Client, ClientError> {
        if !self.base_url.starts_with("https://") {
            return Err(ClientError::Config(format!(
                "{}: the URL must be https://host[:port]",
                self.base_url
            )));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        if let Some(path) = &self.ca_file {
            for der in read_pem_certs(path)? {
                roots
                    .add(der)
                    .map_err(|e| ClientError::Config(format!("{}: {e}", path.display())))?;
            }
        }
        let connect = self
            .connect
            .map(|addr| evidence::bundle::ConnectTo::new(&self.base_url, addr))
            .transpose()
            .map_err(|e| ClientError::Config(e.to_string()))?;
        let pins = Arc::new(Pins::default());
        let verifier = PinnedVerifier::new(roots, provider.clone(), pins.clone())
            .map_err(|e| ClientError::Config(format!("TLS verifier: {e}")))?;
        let evidence_verifier = verifier.for_evidence();
        let tls = pinned_tls(provider.clone(), verifier)?;
        // The re-verification's evidence fetch: credential-free, to an attested leaf or
        // one with the announced next key, on its own connections.
        let via = |b: reqwest::ClientBuilder| match &connect {
            Some(c) => c.apply(b),
            None => b,
        };
        let evidence_http = via(reqwest::Client::builder())
            .use_preconfigured_tls(pinned_tls(provider, evidence_verifier)?)
            .tls_info(true)
            .redirect(reqwest::redirect::Policy::none())
            .timeout(self.timeout)
            .pool_max_idle_per_host(0)
            .build()
            .map_err(|e| ClientError::Config(format!("HTTP client: {e}")))?;
        let mut http = via(reqwest::Client::builder());
        if !self.reuse_connections {
            http = http.pool_max_idle_per_host(0);
        }
        let http = http
            .use_preconfigured_tls(tls)
            .redirect(reqwest::redirect::Policy::none())
            .timeout(self.timeout)
            .pool_idle_timeout(self.pool_idle_timeout)
            .build()
            .map_err(|e| ClientError::Config(format!("HTTP client: {e}")))?;
        Ok(Client {
            inner: Arc::new(Inner {
                base: self.base_url,
                api_key: self.api_key,
                policy: self.policy,
                ca_file: self.ca_file,
                connect,
                http,
                evidence_http,
                pins,
                standing: tokio::sync::Mutex::new(Standing::Usable),
                current: RwLock::new(None),
                verifications: AtomicU64::new(0),
            }),
        })
    }
}

/// A rustls configuration with `verifier`, no session resumption and no 0-RTT (every
/// new connection shows its certificate).
fn pinned_tls(
    provider: Arc<rustls::crypto::CryptoProvider>,
    verifier: PinnedVerifier,
) -> Result<rustls::ClientConfig, ClientError> {
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ClientError::Config(format!("TLS: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    tls.resumption = rustls::client::Resumption::disabled();
    tls.enable_early_data = false;
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tls)
}

fn read_pem_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, ClientError> {
    let err = |e: String| ClientError::Config(format!("CA file {}: {e}", path.display()));
    let pem = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| err(e.to_string()))?;
    if certs.is_empty() {
        return Err(err("no certificate in the file".to_owned()));
    }
    Ok(certs)
}

/// Where a verification fetches the evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fetch {
    /// From whatever server answers for the URL (the first verification, a scheduled
    /// one): nothing is pinned yet, or the pin is due for renewal.
    Open,
    /// Only from a server showing an attested leaf or the announced next key (after a
    /// renewal the verified evidence announced).
    Pinned,
}

/// Where the client stands.
#[derive(Debug, Clone, Copy)]
enum Standing {
    /// Unverified, or verified (see `Inner::current` for how fresh).
    Usable,
    /// A verification failed: every call is refused until `verify` succeeds.
    Failed,
}

/// The verification in force, and until when it is trusted.
#[derive(Debug)]
struct Current {
    verification: Arc<Verification>,
    valid_until: Instant,
}

#[derive(Debug)]
struct Inner {
    base: String,
    api_key: Option<Zeroizing<String>>,
    policy: Policy,
    ca_file: Option<PathBuf>,
    /// Where connections go instead of where the URL's host resolves.
    connect: Option<evidence::bundle::ConnectTo>,
    http: reqwest::Client,
    /// For the evidence fetch of a re-verification after an announced renewal.
    evidence_http: reqwest::Client,
    pins: Arc<Pins>,
    /// Serializes verifications (one at a time; callers that waited reuse the result).
    standing: tokio::sync::Mutex<Standing>,
    /// Read without that lock on every call (the fast path); `None` when unverified or
    /// failed.
    current: RwLock<Option<Current>>,
    verifications: AtomicU64,
}

/// An attested-TLS client of one deployment. Cheap to clone (shared state).
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// How a request authenticates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    /// No credential.
    None,
    /// The configured API key, as `Authorization: Bearer`.
    ApiKey,
}

/// What one attempt produced.
enum Attempt {
    /// The status, the `Location` of a redirect (the only header a caller reads: the
    /// header map is not copied on every call), and the body.
    Answer(StatusCode, Option<String>, Vec<u8>),
    Transport(String),
}

impl Client {
    /// Starts a [`ClientBuilder`].
    pub fn builder(base_url: impl Into<String>) -> ClientBuilder {
        ClientBuilder::new(base_url)
    }

    /// The deployment's base URL.
    pub fn base_url(&self) -> &str {
        &self.inner.base
    }

    /// Whether an API key is configured.
    pub fn has_api_key(&self) -> bool {
        self.inner.api_key.is_some()
    }

    /// The policy in force.
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }

    /// The current verification (report, compose hash, pinned leaves), if any.
    pub fn verification(&self) -> Option<Arc<Verification>> {
        self.inner
            .current
            .read()
            .ok()
            .and_then(|c| c.as_ref().map(|c| c.verification.clone()))
    }

    /// Whether a verification is in force and young enough under the policy.
    fn fresh(&self) -> bool {
        self.inner
            .current
            .read()
            .ok()
            .and_then(|c| c.as_ref().map(|c| Instant::now() < c.valid_until))
            .unwrap_or(false)
    }

    fn set_current(&self, current: Option<Current>) {
        if let Ok(mut c) = self.inner.current.write() {
            *c = current;
        }
    }

    /// How many verifications this client has run (successful or not).
    pub fn verification_count(&self) -> u64 {
        self.inner.verifications.load(Ordering::Relaxed)
    }

    /// Verifies the deployment now (whatever the cache says) and pins what it attests.
    /// On failure the client refuses every call until a later `verify` succeeds.
    pub async fn verify(&self) -> Result<Arc<Verification>, ClientError> {
        let mut standing = self.inner.standing.lock().await;
        self.verify_locked(&mut standing, Fetch::Open).await
    }

    async fn verify_locked(
        &self,
        standing: &mut Standing,
        fetch: Fetch,
    ) -> Result<Arc<Verification>, ClientError> {
        self.inner.verifications.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let verified = match fetch {
            Fetch::Open => {
                verify_deployment_via(
                    &self.inner.base,
                    self.inner.ca_file.as_deref(),
                    self.inner.connect.as_ref(),
                    &self.inner.policy,
                )
                .await
            }
            Fetch::Pinned => match evidence::bundle::Bundle::fetch_using(
                &self.inner.base,
                &self.inner.evidence_http,
            )
            .await
            {
                Ok(bundle) => {
                    verify_bundle(&self.inner.base, &bundle, &self.inner.policy, unix_now()).await
                }
                Err(e) => Err(e.into()),
            },
        };
        match verified {
            Ok(v) => {
                let v = Arc::new(v);
                self.inner.pins.replace(v.pins.clone(), v.next_keys.clone());
                let valid_until = started
                    .checked_add(self.inner.policy.cache_for)
                    .or_else(|| started.checked_add(Duration::from_secs(100 * 365 * 86_400)))
                    .unwrap_or(started);
                self.set_current(Some(Current {
                    verification: v.clone(),
                    valid_until,
                }));
                *standing = Standing::Usable;
                tracing::info!(
                    url = %self.inner.base,
                    compose_hash = %v.compose_hash,
                    simulated = v.simulated,
                    "deployment verified; its certificate is pinned"
                );
                Ok(v)
            }
            Err(e) => {
                self.inner.pins.clear();
                self.set_current(None);
                *standing = Standing::Failed;
                tracing::warn!(url = %self.inner.base, error = %e, "deployment did not verify");
                Err(e)
            }
        }
    }

    /// A verification young enough under the policy, running one if there is none.
    async fn ensure_verified(&self) -> Result<(), ClientError> {
        if self.fresh() {
            return Ok(());
        }
        let mut standing = self.inner.standing.lock().await;
        match *standing {
            Standing::Failed => Err(ClientError::VerificationFailedEarlier),
            // Another call verified while this one waited for the lock.
            Standing::Usable if self.fresh() => Ok(()),
            Standing::Usable => self
                .verify_locked(&mut standing, Fetch::Open)
                .await
                .map(|_| ()),
        }
    }

    /// After a handshake refused leaf `leaf`: verify once more. The call goes on only if
    /// the fresh evidence attests that very leaf (an ACME renewal).
    async fn reverify_for(&self, leaf: LeafHash, fetch: Fetch) -> Result<(), ClientError> {
        let mut standing = self.inner.standing.lock().await;
        if let Some(v) = self.verification()
            && v.pins.contains(&leaf)
        {
            return Ok(()); // another call re-verified meanwhile
        }
        if matches!(*standing, Standing::Failed) {
            return Err(ClientError::VerificationFailedEarlier);
        }
        tracing::info!(
            leaf_sha256 = %hex::encode(leaf),
            "the server presented a new certificate; verifying its evidence again"
        );
        match self.verify_locked(&mut standing, fetch).await {
            Ok(v) if v.pins.contains(&leaf) => Ok(()),
            Ok(_) => Err(ClientError::CertificateNotAttested {
                leaf_sha256: hex::encode(leaf),
                reason: "the deployment's current evidence attests another certificate".into(),
            }),
            Err(ClientError::NotVerified { report }) => Err(ClientError::CertificateNotAttested {
                leaf_sha256: hex::encode(leaf),
                reason: format!(
                    "its evidence did not verify (failed checks: {})",
                    report.failed().join(", ")
                ),
            }),
            Err(e) => Err(ClientError::CertificateNotAttested {
                leaf_sha256: hex::encode(leaf),
                reason: e.to_string(),
            }),
        }
    }

    /// Sends one request to `path` (under the base URL, e.g. `/core/v1/list_groups`) and
    /// decodes a 2xx JSON answer as `T`; any other answer is a typed error.
    pub async fn request<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        query: Option<&(dyn erased::Query + Sync)>,
        body: Option<Vec<u8>>,
        credential: Credential,
    ) -> Result<T, ClientError> {
        let bytes = self
            .request_bytes(method, path, query, body, credential)
            .await?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode(e.to_string()))
    }

    /// [`Client::request`] with a JSON body.
    pub async fn post_json<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
        credential: Credential,
    ) -> Result<T, ClientError> {
        let body = serde_json::to_vec(body).map_err(|e| ClientError::Config(e.to_string()))?;
        self.request(Method::POST, path, None, Some(body), credential)
            .await
    }

    /// Sends one request and returns the 2xx body as bytes.
    pub async fn request_bytes(
        &self,
        method: Method,
        path: &str,
        query: Option<&(dyn erased::Query + Sync)>,
        body: Option<Vec<u8>>,
        credential: Credential,
    ) -> Result<Vec<u8>, ClientError> {
        let key = match credential {
            Credential::None => None,
            Credential::ApiKey => {
                let key = self.inner.api_key.as_ref().ok_or(ClientError::NoApiKey)?;
                let mut value = HeaderValue::from_str(&format!("Bearer {}", key.as_str()))
                    .map_err(|_| ClientError::Config("the API key is not a valid header".into()))?;
                value.set_sensitive(true);
                Some(value)
            }
        };
        let query_pairs = match query {
            Some(q) => q.pairs()?,
            None => Vec::new(),
        };
        self.ensure_verified().await?;
        let send = || self.attempt(&method, path, &query_pairs, body.clone(), key.clone());
        let (status, location, bytes) = match send().await {
            Attempt::Answer(s, h, b) => (s, h, b),
            Attempt::Transport(e) => match self.inner.pins.take_refused() {
                Some(Refusal {
                    leaf,
                    announced: false,
                }) if !self.inner.policy.reverify_on_new_certificate => {
                    return Err(ClientError::CertificateNotAttested {
                        leaf_sha256: hex::encode(leaf),
                        reason: "its key is not the one the verified evidence announced".to_owned(),
                    });
                }
                Some(Refusal { leaf, announced }) => {
                    let fetch = if announced {
                        Fetch::Pinned
                    } else {
                        Fetch::Open
                    };
                    self.reverify_for(leaf, fetch).await?;
                    match send().await {
                        Attempt::Answer(s, h, b) => (s, h, b),
                        Attempt::Transport(e) => return Err(self.transport_error(e)),
                    }
                }
                None => return Err(ClientError::Transport(e)),
            },
        };
        if status.is_success() {
            return Ok(bytes);
        }
        if status.is_redirection() {
            return Err(ClientError::Redirect {
                status: status.as_u16(),
                location,
            });
        }
        match serde_json::from_slice::<ErrorBody>(&bytes) {
            Ok(env) => Err(ClientError::Api {
                status: status.as_u16(),
                error: env.error,
            }),
            Err(_) => Err(ClientError::Http {
                status: status.as_u16(),
                excerpt: String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
                    .chars()
                    .filter(|c| !c.is_control())
                    .collect(),
            }),
        }
    }

    /// A transport failure after a re-verification: a second refusal means the fresh
    /// evidence does not attest what the server shows.
    fn transport_error(&self, e: String) -> ClientError {
        match self.inner.pins.take_refused() {
            Some(refusal) => ClientError::CertificateNotAttested {
                leaf_sha256: hex::encode(refusal.leaf),
                reason: "refused again after a re-verification".to_owned(),
            },
            None => ClientError::Transport(e),
        }
    }

    async fn attempt(
        &self,
        method: &Method,
        path: &str,
        query: &[(String, String)],
        body: Option<Vec<u8>>,
        key: Option<HeaderValue>,
    ) -> Attempt {
        let url = format!("{}{path}", self.inner.base);
        let mut req = self.inner.http.request(method.clone(), url);
        if !query.is_empty() {
            req = req.query(query);
        }
        if let Some(key) = key {
            req = req.header(http::header::AUTHORIZATION, key);
        }
        if let Some(body) = body {
            req = req
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(body);
        }
        let rsp = match req.send().await {
            Ok(r) => r,
            Err(e) => return Attempt::Transport(error_chain(&e)),
        };
        let status = rsp.status();
        let location = status
            .is_redirection()
            .then(|| rsp.headers().get(http::header::LOCATION))
            .flatten()
            .and_then(|l| l.to_str().ok())
            .map(str::to_owned);
        match evidence::bundle::read_limited(rsp, MAX_RESPONSE).await {
            Ok(body) => Attempt::Answer(status, location, body),
            Err(e) => Attempt::Transport(e.to_string()),
        }
    }
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}

/// Query strings from any `Serialize` value, behind a trait object.
pub mod erased {
    use crate::error::ClientError;

    /// A value that serializes as a flat query string.
    pub trait Query {
        /// `(name, value)` pairs.
        fn pairs(&self) -> Result<Vec<(String, String)>, ClientError>;
    }

    impl<T: serde::Serialize> Query for T {
        fn pairs(&self) -> Result<Vec<(String, String)>, ClientError> {
            let value =
                serde_json::to_value(self).map_err(|e| ClientError::Config(e.to_string()))?;
            let mut out = Vec::new();
            if let serde_json::Value::Object(map) = value {
                for (k, v) in map {
                    match v {
                        serde_json::Value::Null => {}
                        serde_json::Value::String(s) => out.push((k, s)),
                        other => out.push((k, other.to_string())),
                    }
                }
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests;
