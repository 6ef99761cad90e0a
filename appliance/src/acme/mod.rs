//! ACME: an account and a certificate for the configured domains from any ACME
//! directory, renewed before expiry and swapped into the TLS resolver without a restart
//! (open connections keep the certificate they were opened with).
//!
//! One task owns the whole life cycle: load the stored certificate (keys unsealed by
//! keyservice) or issue one; sleep until `renew_at` of its lifetime has passed (or until
//! a forced renewal: `SIGUSR1`); on failure retry with exponential backoff. Challenges:
//! TLS-ALPN-01 answered by the HTTPS listener's resolver, or HTTP-01 on a small
//! plain-HTTP listener. The state is on `/health` (`acme`).
//!
//! No private key is in this process: the certificate keys are keyservice TLS keys, and
//! the ACME account key is keyservice's ACME account key, which signs every JWS the CA
//! receives ([`jws`]); the stored state names key indexes and the account URL only.
//!
//! Replicas on PostgreSQL ([`Shared`]) share one account and one certificate, kept in
//! the store (`store::acme_state`): the replica that leads `acme` orders and renews, and
//! publishes each challenge's answer in the store before telling the CA it is ready, so
//! every replica answers it, whichever one the CA's validation reaches behind the load
//! balancer. The other replicas follow: they install the stored certificate (and its
//! announced next key) within [`FOLLOW_EVERY`] of its issuance. Every replica thus serves
//! the same leaf, which its own evidence binds to its own quote, and a client pinned to
//! that leaf reaches any replica.

mod http;
mod jws;
mod rollover;
mod sealed;

use appliance_domain::backoff::Backoff;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use appliance_api::system::AcmeHealth;
use instant_acme::{
    Account, AccountCredentials, AuthorizationStatus, ChallengeType, Identifier, NewAccount,
    NewOrder, OrderStatus, RetryPolicy,
};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::config::{AcmeChallenge, AcmeConfig};
use crate::keyservice_client::Keys;
use crate::tls::{self, CertResolver};

use self::http::{AcmeHttp, Http01Tokens, KeyserviceSignedHttp};
use self::jws::{AccountKey, KeyserviceSigner};
use self::sealed::{AcmeStore, StoredAccount};

/// The longest single sleep of the renewal task (it re-checks the clock after it).
const MAX_SLEEP: Duration = Duration::from_secs(6 * 3600);
/// How often a replica that does not lead `acme` looks for a new certificate.
pub const FOLLOW_EVERY: Duration = Duration::from_secs(5);
/// How often every replica picks up the challenges the leader published.
const CHALLENGES_EVERY: Duration = Duration::from_millis(500);
/// How long the leader waits after publishing a challenge before the CA may validate it
/// (longer than [`CHALLENGES_EVERY`], so every replica answers by then).
const CHALLENGE_SPREAD: Duration = Duration::from_millis(1500);

/// Replicas: the shared store and this replica's leadership of `acme`.
#[derive(Clone)]
pub struct Shared {
    pub store: crate::store::Store,
    pub leadership: crate::store::Leadership,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AcmeError {
    #[error("ACME configuration: {0}")]
    Config(String),
    #[error("ACME: {0}")]
    Protocol(#[from] instant_acme::Error),
    #[error("ACME order failed: {0}")]
    Order(String),
    #[error("keyservice: {0}")]
    Keyservice(keyservice_api::KeyError),
    #[error("ACME account key: {0}")]
    Jws(#[from] jws::JwsError),
    #[error("ACME account key change: {0}")]
    KeyChange(String),
    #[error("ACME state: {0}")]
    Storage(String),
    #[error("certificate: {0}")]
    Certificate(String),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
}

/// The certificate being served, as published to whoever builds evidence from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedCert {
    pub domains: Vec<String>,
    /// PEM chain, leaf first.
    pub chain_pem: String,
    /// The ACME account the certificate was issued to.
    pub account_uri: String,
    /// SHA-256 (hex) of the SubjectPublicKeyInfo DER of the key the next certificate
    /// will use, announced in this certificate's evidence (`next-tls-key.json`).
    pub next_key_sha256: Option<String>,
    /// The keyservice TLS key the leaf carries (`None`: an operator's key file, for which
    /// keyservice quotes no evidence).
    pub key_index: Option<u32>,
}

/// A cheap handle on the ACME task: its status, a forced-renewal trigger, and the
/// certificate it serves.
#[derive(Clone)]
pub struct AcmeHandle {
    status: Arc<Mutex<AcmeHealth>>,
    trigger: Arc<Notify>,
    issued: watch::Receiver<Option<Arc<IssuedCert>>>,
}

impl AcmeHandle {
    pub fn health(&self) -> AcmeHealth {
        match self.status.lock() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Renews now, whatever the certificate's age.
    pub fn renew_now(&self) {
        self.trigger.notify_one();
    }

    /// The served ACME certificate, updated at every issuance.
    pub fn subscribe(&self) -> watch::Receiver<Option<Arc<IssuedCert>>> {
        self.issued.clone()
    }
}

/// The running ACME task (and HTTP-01 listener), stopped when dropped.
pub struct AcmeService {
    pub handle: AcmeHandle,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for AcmeService {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl AcmeService {
    /// Starts the ACME task for `config` (which must be enabled). `http01` is the bound
    /// HTTP-01 listener when that challenge is configured.
    pub fn start(
        config: AcmeConfig,
        data_dir: &std::path::Path,
        keys: Keys,
        resolver: Arc<CertResolver>,
        http01: Option<TcpListener>,
        shared: Option<Shared>,
    ) -> Result<Self, AcmeError> {
        let Some(directory_url) = config.directory_url.clone() else {
            return Err(AcmeError::Config("acme.directory_url is not set".into()));
        };
        let http = AcmeHttp::new(
            config.ca_bundle.as_deref(),
            Duration::from_millis(config.request_timeout_ms),
        )?;
        let status = Arc::new(Mutex::new(AcmeHealth {
            state: "pending".to_owned(),
            last_error: None,
            account_uri: None,
            not_after: None,
            renew_after: None,
            issued: 0,
        }));
        let trigger = Arc::new(Notify::new());
        let (publish, issued) = watch::channel(None);
        let tokens = Http01Tokens::default();
        let mut tasks = Vec::new();
        if let Some(listener) = http01 {
            tasks.push(tokio::spawn(http::serve_http01(listener, tokens.clone())));
        }
        if let Some(shared) = &shared {
            tasks.push(tokio::spawn(follow_challenges(
                shared.store.clone(),
                Arc::clone(&resolver),
                tokens.clone(),
            )));
        }
        let backing = match &shared {
            Some(shared) => sealed::Backing::Shared(shared.store.clone()),
            None => sealed::Backing::Dir(data_dir.join("acme")),
        };
        let manager = Manager {
            store: AcmeStore::new(backing, keys),
            directory_url,
            http,
            config,
            resolver,
            tokens,
            status: Arc::clone(&status),
            publish,
            account: None,
            current: None,
            next_key: None,
            shared,
            followed: None,
        };
        tasks.push(tokio::spawn(manager.run(Arc::clone(&trigger))));
        let handle = AcmeHandle {
            status,
            trigger,
            issued,
        };
        #[cfg(unix)]
        tasks.push(tokio::spawn(renew_on_sigusr1(handle.clone())));
        Ok(Self { handle, tasks })
    }
}

/// `kill -USR1 <pid>` forces a renewal (an operator's trigger).
#[cfg(unix)]
async fn renew_on_sigusr1(handle: AcmeHandle) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut usr1) = signal(SignalKind::user_defined1()) else {
        tracing::warn!("cannot listen for SIGUSR1; forced ACME renewal is unavailable");
        return;
    };
    while usr1.recv().await.is_some() {
        tracing::info!("SIGUSR1: renewing the ACME certificate now");
        handle.renew_now();
    }
}

/// When to renew the certificate in service.
struct Current {
    renew_after: SystemTime,
}

struct Manager {
    config: AcmeConfig,
    directory_url: String,
    store: AcmeStore,
    /// The transport to the CA (instant-acme gets it wrapped in [`KeyserviceSignedHttp`]).
    http: AcmeHttp,
    resolver: Arc<CertResolver>,
    tokens: Http01Tokens,
    status: Arc<Mutex<AcmeHealth>>,
    publish: watch::Sender<Option<Arc<IssuedCert>>>,
    /// The account, and keyservice's signer of its requests.
    account: Option<(Account, Arc<KeyserviceSigner>)>,
    current: Option<Current>,
    /// The keyservice TLS key index the next certificate will use; its public key is
    /// announced in the current evidence.
    next_key: Option<u32>,
    /// Replicas: the shared store and the `acme` leadership.
    shared: Option<Shared>,
    /// A follower: the digest of the stored documents (certificate, next key) it
    /// installed last.
    followed: Option<[u8; 32]>,
}

/// SHA-256 over stored documents (each absent, or length-prefixed), so a follower can
/// tell whether anything changed since its last turn.
fn documents_digest(documents: &[Option<Vec<u8>>]) -> [u8; 32] {
    use sha2::Digest as _;
    let mut hash = sha2::Sha256::new();
    for document in documents {
        match document {
            None => hash.update([0u8]),
            Some(bytes) => {
                hash.update([1u8]);
                hash.update((bytes.len() as u64).to_be_bytes());
                hash.update(bytes);
            }
        }
    }
    hash.finalize().into()
}

fn unix(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

impl Manager {
    fn set_status(&self, f: impl FnOnce(&mut AcmeHealth)) {
        match self.status.lock() {
            Ok(mut s) => f(&mut s),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    async fn run(mut self, trigger: Arc<Notify>) {
        let mut failures: u32 = 0;
        let mut force = false;
        loop {
            if let Some(shared) = self.shared.clone()
                && !shared.leadership.leads()
            {
                // Another replica orders and renews; serve what it stored.
                if let Err(err) = self.follow().await {
                    tracing::warn!(error = %err, "cannot load the shared ACME certificate");
                }
                let mut leadership = shared.leadership;
                tokio::select! {
                    () = tokio::time::sleep(FOLLOW_EVERY) => {}
                    () = leadership.wait_to_lead() => {}
                }
                continue;
            }
            let wait = match self.step(force).await {
                Ok(renew_after) => {
                    failures = 0;
                    self.set_status(|s| {
                        s.state = "ok".to_owned();
                        s.last_error = None;
                    });
                    renew_after
                        .duration_since(SystemTime::now())
                        .unwrap_or(Duration::ZERO)
                }
                Err(err) => {
                    failures = failures.saturating_add(1);
                    let delay = Backoff::after_failures(
                        Duration::from_millis(self.config.retry_initial_ms),
                        Duration::from_millis(self.config.retry_max_ms),
                        failures,
                    );
                    tracing::warn!(error = %err, retry_in_ms = delay.as_millis() as u64, "ACME failed; retrying");
                    let message = err.to_string();
                    self.set_status(|s| {
                        s.state = "failed".to_owned();
                        s.last_error = Some(message);
                    });
                    delay
                }
            };
            // A renewal was only forced if it had its turn: a failure keeps `force`.
            force = force && failures > 0;
            tokio::select! {
                () = tokio::time::sleep(wait.min(MAX_SLEEP)) => {}
                () = trigger.notified() => force = true,
            }
        }
    }

    /// Makes sure a fresh enough certificate is served; returns when to look again.
    async fn step(&mut self, force: bool) -> Result<SystemTime, AcmeError> {
        if self.next_key.is_none() {
            self.next_key = Some(self.load_or_make_next_key().await?);
        }
        if self.current.is_none() {
            self.load_stored().await?;
        }
        // An account whose key the front end once held (sealed, format 2) moves onto
        // keyservice's key at once, not at the next renewal.
        if self.account.is_none()
            && let Some(StoredAccount::Sealed { .. }) =
                self.store.load_account(&self.directory_url).await?
        {
            self.account().await?;
        }
        if let Some(current) = &self.current
            && !force
            && SystemTime::now() < current.renew_after
        {
            return Ok(current.renew_after);
        }
        self.set_status(|s| s.state = "renewing".to_owned());
        let (account, signer) = self.account().await?;
        let (chain_pem, key_index) = match self.issue(&account, signer.key()).await {
            Ok(issued) => issued,
            Err(AcmeError::Protocol(instant_acme::Error::Api(problem)))
                if problem.r#type.as_deref()
                    == Some("urn:ietf:params:acme:error:accountDoesNotExist") =>
            {
                // The CA no longer knows the account (a test CA restarted, or it was
                // deactivated elsewhere): the next attempt registers a new one.
                self.account = None;
                self.store.forget_account().await?;
                return Err(AcmeError::Order(format!(
                    "the CA does not know the account any more; registering a new one: {problem}"
                )));
            }
            Err(err) => return Err(err),
        };
        // The announced key is in use now: announce the following one with this certificate.
        let fresh = following_key(key_index);
        self.store.save_next_key(fresh).await?;
        self.next_key = Some(fresh);
        let renew_after = self.install(&chain_pem, key_index).await?;
        self.store
            .save_certificate(&self.config.domains, &chain_pem, key_index)
            .await?;
        self.set_status(|s| s.issued += 1);
        tracing::info!(domains = ?self.config.domains, "ACME certificate issued and installed");
        Ok(renew_after)
    }

    /// A follower's turn: installs the stored certificate and announced key if another
    /// replica stored new ones since the last turn.
    async fn follow(&mut self) -> Result<(), AcmeError> {
        let documents = documents_digest(&[
            self.store.raw("certificate.json").await?,
            self.store.raw("next-key.json").await?,
        ]);
        if self.followed == Some(documents) {
            return Ok(());
        }
        if let Some(index) = self.store.load_next_key().await? {
            self.next_key = Some(index);
        }
        self.current = None;
        self.load_stored().await?;
        if self.current.is_some() {
            self.set_status(|s| {
                s.state = "ok".to_owned();
                s.last_error = None;
            });
        }
        self.followed = Some(documents);
        Ok(())
    }

    /// Serves the stored certificate, if there is one for these domains that has not
    /// expired yet.
    async fn load_stored(&mut self) -> Result<(), AcmeError> {
        let Some((chain_pem, key_index)) =
            self.store.load_certificate(&self.config.domains).await?
        else {
            return Ok(());
        };
        let account_uri = match self.store.load_account(&self.directory_url).await? {
            Some(stored) => stored.account_uri().to_owned(),
            None => return Ok(()),
        };
        let (_, not_after) = validity(&chain_pem)?;
        if not_after <= SystemTime::now() {
            return Ok(());
        }
        self.set_status(|s| s.account_uri = Some(account_uri));
        self.install(&chain_pem, key_index).await?;
        tracing::info!("serving the stored ACME certificate");
        Ok(())
    }

    /// Swaps `chain_pem` in and publishes it; returns when to renew it.
    async fn install(&mut self, chain_pem: &str, key_index: u32) -> Result<SystemTime, AcmeError> {
        let client = self.store.keys().client();
        let key = tls::KeyserviceKey::load(client, key_index).await?;
        let certified = tls::keyservice_chain(chain_pem, &key)
            .map_err(|e| AcmeError::Certificate(e.to_string()))?;
        let next_key_sha256 = match self.next_key {
            Some(index) => Some(tls::KeyserviceKey::load(client, index).await?.spki_sha256()),
            None => None,
        };
        let (not_before, not_after) = validity(chain_pem)?;
        let lifetime = not_after
            .duration_since(not_before)
            .map_err(|_| AcmeError::Certificate("notAfter precedes notBefore".into()))?;
        let renew_after = not_before + lifetime.mul_f64(self.config.renew_at);
        self.resolver.replace(certified);
        self.current = Some(Current { renew_after });
        let account_uri = self.health_account_uri();
        self.set_status(|s| {
            s.not_after = Some(unix(not_after));
            s.renew_after = Some(unix(renew_after));
        });
        let _ = self.publish.send(Some(Arc::new(IssuedCert {
            domains: self.config.domains.clone(),
            chain_pem: chain_pem.to_owned(),
            account_uri: account_uri.unwrap_or_default(),
            next_key_sha256,
            key_index: Some(key_index),
        })));
        Ok(renew_after)
    }

    fn health_account_uri(&self) -> Option<String> {
        match self.status.lock() {
            Ok(s) => s.account_uri.clone(),
            Err(poisoned) => poisoned.into_inner().account_uri.clone(),
        }
    }

    /// The ACME account of keyservice's account key: the stored one, an account whose key
    /// the front end once held moved onto keyservice's key (`rollover.rs`), or the one
    /// newAccount registers or finds for keyservice's key. instant-acme is given a
    /// throwaway key and [`KeyserviceSignedHttp`], which re-signs every request with
    /// keyservice's key ([`jws`]).
    async fn account(&mut self) -> Result<(Account, Arc<KeyserviceSigner>), AcmeError> {
        if let Some((account, signer)) = &self.account {
            return Ok((account.clone(), Arc::clone(signer)));
        }
        let signer = Arc::new(KeyserviceSigner::load(self.store.keys().client()).await?);
        let thumbprint = signer.key().thumbprint().to_owned();
        let mut known = None;
        let mut stored_as_is = false;
        match self.store.load_account(&self.directory_url).await? {
            Some(StoredAccount::Keyservice {
                account_uri,
                key_thumbprint,
            }) => {
                if key_thumbprint == thumbprint {
                    known = Some(account_uri);
                    stored_as_is = true;
                } else {
                    tracing::warn!(
                        account = %account_uri,
                        "the stored ACME account belongs to another key (another root?); \
                         looking up the account of keyservice's key"
                    );
                }
            }
            Some(StoredAccount::Sealed {
                account_uri,
                sealed_credentials,
            }) => {
                known = self
                    .roll_over_sealed(&account_uri, &sealed_credentials, &signer)
                    .await?
                    .then_some(account_uri);
            }
            None => {}
        }
        let http = Box::new(KeyserviceSignedHttp::new(
            self.http.clone(),
            Arc::clone(&signer),
        ));
        let (account, uri) = match known {
            Some(uri) => {
                // The throwaway key: instant-acme signs with it, keyservice re-signs.
                let (_, throwaway) = instant_acme::Key::generate_pkcs8()?;
                let account = Account::builder_with_http(http)
                    .from_parts(uri.clone(), throwaway, self.directory_url.clone())
                    .await?;
                (account, uri)
            }
            None => {
                let contact: Vec<&str> = self.config.contact.iter().map(String::as_str).collect();
                // newAccount registers keyservice's key, or answers the account it already
                // has (RFC 8555 §7.3.1); the credentials returned hold the throwaway key
                // and are dropped.
                let (account, _throwaway) = Account::builder_with_http(http)
                    .create(
                        &NewAccount {
                            contact: &contact,
                            terms_of_service_agreed: true,
                            only_return_existing: false,
                        },
                        self.directory_url.clone(),
                        None,
                    )
                    .await?;
                let uri = account.id().to_owned();
                tracing::info!(account = %uri, "ACME account of keyservice's key");
                (account, uri)
            }
        };
        if !stored_as_is {
            self.store
                .save_account(&self.directory_url, &uri, &thumbprint)
                .await?;
        }
        self.set_status(|s| s.account_uri = Some(uri.clone()));
        self.account = Some((account.clone(), Arc::clone(&signer)));
        Ok((account, signer))
    }

    /// Moves the format-2 account at `account_uri` (its key sealed in
    /// `sealed_credentials`) onto keyservice's key; `false` if that cannot be done (the
    /// caller registers keyservice's key instead), an error if it should be tried again.
    async fn roll_over_sealed(
        &self,
        account_uri: &str,
        sealed_credentials: &str,
        signer: &KeyserviceSigner,
    ) -> Result<bool, AcmeError> {
        let Some(credentials) = self
            .store
            .unseal_legacy_credentials(sealed_credentials)
            .await?
        else {
            return Ok(false);
        };
        let credentials: AccountCredentials = match serde_json::from_slice(&credentials) {
            Ok(credentials) => credentials,
            Err(err) => {
                tracing::warn!(error = %err, "unreadable sealed ACME account credentials");
                return Ok(false);
            }
        };
        match rollover::roll_over(
            &self.http,
            &self.directory_url,
            account_uri,
            credentials.private_key().secret_pkcs8_der(),
            signer,
        )
        .await
        {
            Ok(()) => {
                tracing::info!(
                    account = %account_uri,
                    "ACME account moved onto keyservice's account key; the sealed key is dropped"
                );
                Ok(true)
            }
            Err(rollover::RolloverError::Refused(why)) => {
                tracing::warn!(
                    account = %account_uri,
                    reason = %why,
                    "the CA did not move the ACME account onto keyservice's key; registering \
                     keyservice's key (a CAA accounturi naming the old account must follow)"
                );
                Ok(false)
            }
            Err(rollover::RolloverError::Failed(err)) => Err(err),
        }
    }

    /// One order: challenges, finalization with the announced keyservice key (its CSR
    /// signed by keyservice), the chain and that key's index.
    async fn issue(
        &mut self,
        account: &Account,
        key: &AccountKey,
    ) -> Result<(String, u32), AcmeError> {
        let identifiers: Vec<Identifier> = self
            .config
            .domains
            .iter()
            .map(|d| Identifier::Dns(d.clone()))
            .collect();
        let mut order = account.new_order(&NewOrder::new(&identifiers)).await?;
        let mut pending = PendingChallenges {
            resolver: Arc::clone(&self.resolver),
            tokens: self.tokens.clone(),
            domains: Vec::new(),
            tokens_set: Vec::new(),
        };
        let mut published: Vec<(String, String)> = Vec::new();
        let wanted = match self.config.challenge {
            AcmeChallenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
            AcmeChallenge::Http01 => ChallengeType::Http01,
        };
        {
            let mut authorizations = order.authorizations();
            while let Some(authz) = authorizations.next().await {
                let mut authz = authz?;
                match authz.status {
                    AuthorizationStatus::Pending => {}
                    AuthorizationStatus::Valid => continue,
                    other => {
                        return Err(AcmeError::Order(format!(
                            "authorization for {} is {other:?}",
                            authz.identifier()
                        )));
                    }
                }
                let domain = authz.identifier().to_string();
                let mut challenge = authz.challenge(wanted.clone()).ok_or_else(|| {
                    AcmeError::Order(format!(
                        "the CA offers no {wanted:?} challenge for {domain}"
                    ))
                })?;
                // Over keyservice's key, never instant-acme's throwaway one.
                let key_auth = key.key_authorization(&challenge.token);
                let answer = match self.config.challenge {
                    AcmeChallenge::TlsAlpn01 => {
                        use sha2::Digest as _;
                        let digest = sha2::Sha256::digest(key_auth.as_bytes());
                        let cert = tls::acme_validation_cert(&domain, &digest)?;
                        self.resolver.set_challenge(&domain, cert);
                        pending.domains.push(domain.clone());
                        ("tls-alpn-01", domain, hex::encode(digest))
                    }
                    AcmeChallenge::Http01 => {
                        self.tokens.insert(&challenge.token, &key_auth);
                        pending.tokens_set.push(challenge.token.clone());
                        ("http-01", challenge.token.clone(), key_auth)
                    }
                };
                if let Some(shared) = &self.shared {
                    // Every replica must answer before the CA looks.
                    let (kind, name, value) = answer;
                    let expires = unix(SystemTime::now() + timeout_of(&self.config));
                    shared
                        .store
                        .put_acme_challenge(
                            crate::store::AcmeChallenge {
                                kind: kind.to_owned(),
                                name: name.clone(),
                                value,
                            },
                            expires,
                        )
                        .await
                        .map_err(|e| AcmeError::Storage(format!("publishing a challenge: {e}")))?;
                    published.push((kind.to_owned(), name));
                    tokio::time::sleep(CHALLENGE_SPREAD).await;
                }
                challenge.set_ready().await?;
            }
        }
        let timeout = timeout_of(&self.config);
        let status = order
            .poll_ready(
                &RetryPolicy::new()
                    .initial_delay(Duration::from_millis(250))
                    .backoff(1.5)
                    .timeout(timeout),
            )
            .await;
        drop(pending);
        if let Some(shared) = &self.shared {
            for (kind, name) in published {
                if let Err(err) = shared.store.remove_acme_challenge(kind, name).await {
                    tracing::warn!(error = %err, "cannot withdraw a published challenge; it expires by itself");
                }
            }
        }
        let status = status?;
        if status != OrderStatus::Ready {
            let mut reasons = Vec::new();
            let mut authorizations = order.authorizations();
            while let Some(Ok(mut authz)) = authorizations.next().await {
                if let Ok(state) = authz.refresh().await {
                    for c in &state.challenges {
                        if let Some(err) = &c.error {
                            reasons.push(err.to_string());
                        }
                    }
                }
            }
            return Err(AcmeError::Order(format!(
                "order is {status:?}: {}",
                if reasons.is_empty() {
                    "no reason given".to_owned()
                } else {
                    reasons.join("; ")
                }
            )));
        }

        // The key announced in the current evidence (the first ACME key if none was).
        let key_index = self.next_key.unwrap_or(tls::FIRST_ACME_KEY);
        let key = tls::KeyserviceKey::load(self.store.keys().client(), key_index).await?;
        let domains = self.config.domains.clone();
        // rcgen signs synchronously: keyservice's signature is a blocking call.
        let csr = tokio::task::spawn_blocking(move || {
            let mut params = rcgen::CertificateParams::new(domains)
                .map_err(|e| AcmeError::Certificate(format!("CSR: {e}")))?;
            params.distinguished_name = rcgen::DistinguishedName::new();
            params
                .serialize_request(&key)
                .map(|csr| csr.der().to_vec())
                .map_err(|e| AcmeError::Certificate(format!("CSR: {e}")))
        })
        .await
        .map_err(|e| AcmeError::Certificate(format!("CSR task: {e}")))??;
        order.finalize_csr(&csr).await?;
        let chain_pem = order
            .poll_certificate(
                &RetryPolicy::new()
                    .initial_delay(Duration::from_millis(250))
                    .backoff(1.5)
                    .timeout(timeout),
            )
            .await?;
        Ok((chain_pem, key_index))
    }

    /// The stored next key index, or the one after the stored certificate's (stored before
    /// it is announced).
    async fn load_or_make_next_key(&self) -> Result<u32, AcmeError> {
        if let Some(index) = self.store.load_next_key().await? {
            return Ok(index);
        }
        let index = match self.store.stored_certificate().await? {
            Some(file) => following_key(file.key_index),
            None => tls::FIRST_ACME_KEY,
        };
        self.store.save_next_key(index).await?;
        Ok(index)
    }
}

/// How long an order may take.
fn timeout_of(config: &AcmeConfig) -> Duration {
    Duration::from_millis(config.order_timeout_ms)
}

/// Every replica: answers the challenges the leader of `acme` published, for as long as
/// they stay published (polled every [`CHALLENGES_EVERY`]).
async fn follow_challenges(
    store: crate::store::Store,
    resolver: Arc<CertResolver>,
    tokens: Http01Tokens,
) {
    let mut installed: std::collections::HashSet<crate::store::AcmeChallenge> =
        std::collections::HashSet::new();
    loop {
        match store.acme_challenges().await {
            Ok(now) => {
                let now: std::collections::HashSet<_> = now.into_iter().collect();
                for c in now.difference(&installed) {
                    match c.kind.as_str() {
                        "tls-alpn-01" => match hex::decode(&c.value)
                            .ok()
                            .and_then(|digest| tls::acme_validation_cert(&c.name, &digest).ok())
                        {
                            Some(cert) => resolver.set_challenge(&c.name, cert),
                            None => {
                                tracing::warn!(domain = %c.name, "unusable published challenge")
                            }
                        },
                        _ => tokens.insert(&c.name, &c.value),
                    }
                }
                for c in installed.difference(&now) {
                    match c.kind.as_str() {
                        "tls-alpn-01" => resolver.clear_challenge(&c.name),
                        _ => tokens.remove(&c.name),
                    }
                }
                installed = now;
            }
            Err(err) => tracing::debug!(error = %err, "cannot read the published challenges"),
        }
        tokio::time::sleep(CHALLENGES_EVERY).await;
    }
}

/// The keyservice TLS key index after `index` (ACME keys never wrap onto the
/// self-signed certificate's key).
fn following_key(index: u32) -> u32 {
    index.checked_add(1).unwrap_or(tls::FIRST_ACME_KEY)
}

/// Removes the challenge answers an order set up, however the order ends.
struct PendingChallenges {
    resolver: Arc<CertResolver>,
    tokens: Http01Tokens,
    domains: Vec<String>,
    tokens_set: Vec<String>,
}

impl Drop for PendingChallenges {
    fn drop(&mut self) {
        for domain in &self.domains {
            self.resolver.clear_challenge(domain);
        }
        for token in &self.tokens_set {
            self.tokens.remove(token);
        }
    }
}

/// The leaf's notBefore and notAfter.
fn validity(chain_pem: &str) -> Result<(SystemTime, SystemTime), AcmeError> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let leaf = CertificateDer::pem_slice_iter(chain_pem.as_bytes())
        .next()
        .ok_or_else(|| AcmeError::Certificate("no certificate in the chain".into()))?
        .map_err(|e| AcmeError::Certificate(e.to_string()))?;
    let (_, cert) = x509_parser::parse_x509_certificate(leaf.as_ref())
        .map_err(|e| AcmeError::Certificate(format!("unparsable leaf: {e}")))?;
    let at = |t: i64| {
        u64::try_from(t)
            .map(|s| UNIX_EPOCH + Duration::from_secs(s))
            .map_err(|_| AcmeError::Certificate("validity before 1970".into()))
    };
    let validity = cert.validity();
    Ok((
        at(validity.not_before.timestamp())?,
        at(validity.not_after.timestamp())?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_indexes_move_on_and_never_reach_the_self_signed_key() {
        assert_eq!(following_key(tls::FIRST_ACME_KEY), tls::FIRST_ACME_KEY + 1);
        assert_eq!(following_key(u32::MAX), tls::FIRST_ACME_KEY);
        assert_ne!(tls::FIRST_ACME_KEY, tls::SELF_SIGNED_KEY);
    }

    #[test]
    fn validity_reads_the_leaf() {
        let mut params = rcgen::CertificateParams::new(vec!["a.test".to_string()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2030, 1, 1);
        params.not_after = rcgen::date_time_ymd(2030, 1, 31);
        let key = rcgen::KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        let (nb, na) = validity(&pem).unwrap();
        assert_eq!(
            na.duration_since(nb).unwrap(),
            Duration::from_secs(30 * 86400)
        );
        assert!(validity("").is_err());
    }
}
