//! The PostgreSQL engine: connecting (TLS by rustls), the bounded session pool, and the
//! change feed that keeps every replica's key cache honest.
//!
//! Sessions are blocking `postgres` clients (the synchronous face of `tokio-postgres`):
//! the store's transactions are synchronous closures shared with SQLite, and a blocking
//! client does its I/O on the thread that runs the closure, without a hop to another
//! runtime per statement. Reads run on tokio's blocking pool, each holding one pooled
//! session; the writer thread owns a session of its own (`store::writer`). At most
//! [`PgOptions::max_connections`] read sessions exist at once; a read that finds none
//! free waits at most [`PgOptions::acquire_timeout`] and then fails as `Unavailable`.
//!
//! Every session is bounded on the server side too: `statement_timeout`, `lock_timeout`
//! and `idle_in_transaction_session_timeout`, so a stuck database or a lock held by a dead
//! replica cannot hold a thread forever.

use appliance_domain::backoff::Backoff;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator as _;
use tokio::sync::Semaphore;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::key_cache::KeyCache;
use super::sql::{PgSession, SqlError};
use super::{Result, StoreError};

/// The channel every committed write batch that changed API keys notifies (`store::writer`).
pub(super) const CHANGES_CHANNEL: &str = "appliance_store";

/// How the store reaches PostgreSQL.
#[derive(Clone)]
pub struct PgOptions {
    /// `postgres://user:password@host:port/database?sslmode=require` (or the key=value
    /// form). Holds a password: never logged.
    pub url: String,
    /// PEM of the CA that signs the server's certificate; `None`: the public web PKI
    /// (webpki roots).
    pub ca_pem: Option<String>,
    /// Most read sessions open at once (the writer and the change feed hold one more
    /// each).
    pub max_connections: usize,
    /// How long a read waits for a free session before failing as `Unavailable`.
    pub acquire_timeout: Duration,
    /// Server-side bound on any one statement.
    pub statement_timeout: Duration,
    /// How often the store lists the database's triggers, rules and functions and checks
    /// its write epoch (`store::integrity`); also done once at start.
    pub integrity_check_interval: Duration,
}

impl std::fmt::Debug for PgOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgOptions")
            .field("url", &redact(&self.url))
            .field("ca_pem", &self.ca_pem.as_ref().map(|_| "…"))
            .field("max_connections", &self.max_connections)
            .field("acquire_timeout", &self.acquire_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field("integrity_check_interval", &self.integrity_check_interval)
            .finish()
    }
}

impl PgOptions {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            ca_pem: None,
            max_connections: 16,
            acquire_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(30),
            integrity_check_interval: Duration::from_secs(60),
        }
    }
}

/// The URL with its password (if any) replaced, for messages.
pub fn redact(url: &str) -> String {
    match url.parse::<postgres::Config>() {
        Ok(config) => {
            let hosts: Vec<String> = config
                .get_hosts()
                .iter()
                .map(|h| match h {
                    postgres::config::Host::Tcp(name) => name.clone(),
                    postgres::config::Host::Unix(path) => path.display().to_string(),
                })
                .collect();
            format!(
                "postgres://{}@{}:{}/{}",
                config.get_user().unwrap_or("?"),
                hosts.join(","),
                config.get_ports().first().copied().unwrap_or(5432),
                config.get_dbname().unwrap_or("?")
            )
        }
        Err(_) => "postgres://(unparsable URL)".to_owned(),
    }
}

/// Whether every host of `config` is a loopback address (or a Unix socket).
fn loopback_only(config: &postgres::Config) -> bool {
    config.get_hosts().iter().all(|h| match h {
        postgres::config::Host::Unix(_) => true,
        postgres::config::Host::Tcp(name) => {
            name == "localhost"
                || name
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
    })
}

/// Connects sessions and lends them out.
pub(super) struct PgPool {
    config: postgres::Config,
    tls: MakeRustlsConnect,
    statement_timeout: Duration,
    idle: Mutex<Vec<PgSession>>,
    permits: Arc<Semaphore>,
    acquire_timeout: Duration,
    max_idle: usize,
}

impl PgPool {
    /// Parses the options; no connection is made here.
    pub(super) fn new(options: &PgOptions) -> Result<Self> {
        let bad = |why: String| StoreError::Config(why);
        let mut config: postgres::Config = options
            .url
            .parse()
            .map_err(|e| bad(format!("store.url is not a PostgreSQL URL: {e}")))?;
        if config.get_hosts().is_empty() {
            return Err(bad("store.url names no host".into()));
        }
        // The database is outside the TEE: anything but loopback goes over verified TLS.
        if config.get_ssl_mode() != postgres::config::SslMode::Require && !loopback_only(&config) {
            return Err(bad(format!(
                "store.url ({}) reaches a database over the network without TLS; add sslmode=require (the server's certificate is verified against store.ca_pem, else the web PKI)",
                redact(&options.url)
            )));
        }
        if config.get_application_name().is_none() {
            config.application_name("appliance");
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        config.keepalives(true);
        config.keepalives_idle(Duration::from_secs(30));
        let tls = MakeRustlsConnect::new(client_tls(options.ca_pem.as_deref())?);
        Ok(Self {
            config,
            tls,
            statement_timeout: options.statement_timeout,
            idle: Mutex::new(Vec::new()),
            permits: Arc::new(Semaphore::new(options.max_connections.max(1))),
            acquire_timeout: options.acquire_timeout,
            max_idle: options.max_connections.max(1),
        })
    }

    /// A new session, with the server-side bounds set. Blocks: call it from a blocking
    /// thread.
    pub(super) fn connect(&self) -> std::result::Result<PgSession, SqlError> {
        let client = self.config.connect(self.tls.clone())?;
        let session = PgSession::new(client);
        let ms = self.statement_timeout.as_millis();
        session.batch(&format!(
            "SET statement_timeout = {ms}; SET lock_timeout = {ms}; \
             SET idle_in_transaction_session_timeout = {}",
            ms * 2
        ))?;
        Ok(session)
    }

    /// Runs `f` on a pooled session, on tokio's blocking pool.
    pub(super) async fn run<T, F>(self: &Arc<Self>, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&PgSession) -> Result<T> + Send + 'static,
    {
        let permit = tokio::time::timeout(
            self.acquire_timeout,
            Arc::clone(&self.permits).acquire_owned(),
        )
        .await
        .map_err(|_| {
            StoreError::Unavailable("every database connection is busy; retry shortly".into())
        })?
        .map_err(|_| StoreError::Task("the database pool is closed".into()))?;
        let pool = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let session = match pool.take_idle() {
                Some(s) => s,
                None => pool.connect().map_err(StoreError::from)?,
            };
            session.clear_failure();
            let out = f(&session);
            pool.give_back(session);
            out
        })
        .await
        .map_err(|e| StoreError::Task(format!("a database read failed: {e}")))?
    }

    fn take_idle(&self) -> Option<PgSession> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(session) = idle.pop() {
            if !session.is_closed() {
                return Some(session);
            }
        }
        None
    }

    /// Keeps a session for the next read, unless it is broken or the pool is full.
    fn give_back(&self, session: PgSession) {
        if session.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < self.max_idle {
            idle.push(session);
        }
    }
}

impl Drop for PgPool {
    fn drop(&mut self) {
        // A blocking client owns a small runtime, which must not be dropped on an async
        // task: hand the idle sessions to a thread of their own.
        let idle = std::mem::take(&mut *self.idle.lock().unwrap_or_else(PoisonError::into_inner));
        if !idle.is_empty() {
            let _ = std::thread::Builder::new()
                .name("store-pg-close".into())
                .spawn(move || drop(idle));
        }
    }
}

/// The rustls client configuration: the given CA, else the web PKI; ring only.
fn client_tls(ca_pem: Option<&str>) -> Result<rustls::ClientConfig> {
    let bad = |why: String| StoreError::Config(why);
    let mut roots = rustls::RootCertStore::empty();
    match ca_pem {
        Some(pem) => {
            let mut reader = std::io::BufReader::new(pem.as_bytes());
            let mut added = 0;
            for cert in pem_certs(&mut reader)? {
                roots
                    .add(cert)
                    .map_err(|e| bad(format!("store.ca_pem: {e}")))?;
                added += 1;
            }
            if added == 0 {
                return Err(bad("store.ca_pem holds no certificate".into()));
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// The certificates of a PEM text.
fn pem_certs(
    reader: &mut dyn std::io::BufRead,
) -> Result<Vec<rustls_pki_types::CertificateDer<'static>>> {
    use rustls_pki_types::pem::PemObject as _;
    let mut text = Vec::new();
    reader
        .read_to_end(&mut text)
        .map_err(|e| StoreError::Config(format!("store.ca_pem: {e}")))?;
    rustls_pki_types::CertificateDer::pem_slice_iter(&text)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| StoreError::Config(format!("store.ca_pem: {e}")))
}

/// Follows the writes of every replica: each committed write batch that changed a row
/// keys resolve from notifies [`CHANGES_CHANNEL`], and every notification empties this
/// replica's key cache. While
/// the feed is down (reconnecting) the cache is emptied once per attempt and the key
/// cache's own time bound applies (`store::key_cache`). Ends when the store is dropped.
pub(super) fn follow_changes(pool: Arc<PgPool>, keys: Weak<KeyCache>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("store-pg-changes".into())
        .spawn(move || {
            let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
            loop {
                let Some(cache) = keys.upgrade() else { return };
                cache.invalidate();
                drop(cache);
                match listen(&pool, &keys) {
                    Ok(()) => return, // the store is gone
                    Err(err) => {
                        tracing::warn!(error = %err, "store: the change feed from PostgreSQL broke; reconnecting");
                        std::thread::sleep(backoff.next_delay());
                    }
                }
            }
        })
        .map(|_| ())
}

/// Listens until the store is dropped (`Ok`) or the connection fails.
fn listen(pool: &PgPool, keys: &Weak<KeyCache>) -> std::result::Result<(), SqlError> {
    let session = pool.connect()?;
    session.batch(&format!("LISTEN {CHANGES_CHANNEL}"))?;
    // Anything committed before LISTEN took effect is covered by the caller's
    // invalidation; from here on every commit notifies.
    if let Some(cache) = keys.upgrade() {
        cache.invalidate();
    }
    let mut client = session.client();
    loop {
        {
            let mut notes = client.notifications();
            let mut iter = notes.timeout_iter(Duration::from_secs(1));
            // Each notification empties the cache at once: under a steady stream of
            // writes the iterator never runs dry, and a revocation must not wait.
            while iter.next().map_err(SqlError::from)?.is_some() {
                let Some(cache) = keys.upgrade() else {
                    return Ok(());
                };
                cache.invalidate();
            }
        }
        if keys.strong_count() == 0 {
            return Ok(());
        }
        if client.is_closed() {
            return Err(SqlError::Closed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Store, StoreError};

    #[test]
    fn a_database_over_the_network_needs_tls_and_its_password_is_never_shown() {
        let plain = PgOptions::new("postgres://app:hunter2@db.example.com:5432/app");
        match PgPool::new(&plain) {
            Err(StoreError::Config(why)) => {
                assert!(why.contains("sslmode=require"), "{why}");
                assert!(!why.contains("hunter2"), "{why}");
            }
            Err(other) => panic!("unexpected {other}"),
            Ok(_) => panic!("a remote database without TLS was accepted"),
        }
        let tls = PgOptions::new("postgres://app:hunter2@db.example.com:5432/app?sslmode=require");
        assert!(PgPool::new(&tls).is_ok());
        assert!(PgPool::new(&PgOptions::new("postgres://app:x@127.0.0.1/app")).is_ok());
        assert!(!format!("{tls:?}").contains("hunter2"));
        assert_eq!(redact(&tls.url), "postgres://app@db.example.com:5432/app");
        let mut bad_ca = tls.clone();
        bad_ca.ca_pem = Some("not a certificate".into());
        assert!(matches!(PgPool::new(&bad_ca), Err(StoreError::Config(_))));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_database_is_reached_over_tls_verified_against_its_ca_only() {
        let server = match test_support::postgres::PgServer::start_tls() {
            Ok(server) => server,
            Err(unavailable) => {
                unavailable.report();
                return;
            }
        };
        let url = server.new_database();
        assert!(url.contains("sslmode=require"), "{url}");
        let ca = server.tls().unwrap().ca_pem.clone();
        let mut options = PgOptions::new(url.clone());
        options.ca_pem = Some(ca);
        let store = Store::open_postgres(options).await.unwrap();
        store.check().await.unwrap();
        // A CA that did not sign the server's certificate: no connection at all.
        let other = rcgen::CertificateParams::new(Vec::<String>::new())
            .unwrap()
            .self_signed(&rcgen::KeyPair::generate().unwrap())
            .unwrap();
        let mut options = PgOptions::new(url);
        options.ca_pem = Some(other.pem());
        assert!(Store::open_postgres(options).await.is_err());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn reads_wait_for_a_bounded_pool_and_statements_for_a_bounded_time() {
        let Some(db) = crate::testing::TestDb::postgres() else {
            return;
        };
        let mut options = PgOptions::new(db.postgres_url().unwrap());
        options.max_connections = 1;
        options.acquire_timeout = Duration::from_millis(200);
        options.statement_timeout = Duration::from_millis(300);
        let store = Store::open_postgres(options).await.unwrap();
        // One read holds the only connection; the next waits, then gets 503.
        let (release, released) = std::sync::mpsc::channel::<()>();
        let (started, wait_started) = tokio::sync::oneshot::channel();
        let holder = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .read(move |_| {
                        let _ = started.send(());
                        let _ = released.recv();
                        Ok(())
                    })
                    .await
            })
        };
        wait_started.await.unwrap();
        let refused = store.check().await;
        assert!(
            matches!(&refused, Err(StoreError::Unavailable(why)) if why.contains("busy")),
            "{refused:?}"
        );
        release.send(()).unwrap();
        holder.await.unwrap().unwrap();
        store.check().await.unwrap();
        // A statement past the server-side limit is cancelled: 503, not a stuck thread.
        let slow = store
            .read(|conn| {
                conn.query_row("SELECT pg_sleep(5)", crate::sql::params![], |_| Ok(()))?;
                Ok(())
            })
            .await;
        assert!(matches!(slow, Err(StoreError::Unavailable(_))), "{slow:?}");
        store.check().await.unwrap();
    }
}
