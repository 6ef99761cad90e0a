//! Replicas of one app on one PostgreSQL: a private PostgreSQL server
//! (`test_support::postgres`) and appliance processes (`appliance dev`, each with its own
//! keyservice child) configured with `[store] engine = "postgres"` and one shared dev
//! secret, as dstack replicas of one app share the KMS's app key.

use std::path::{Path, PathBuf};

use serde_json::Value;
use test_support::postgres::PgServer;

use crate::stall::Stall;
use crate::{Appliance, Launch};

/// A PostgreSQL server and the replicas on it (stopped when dropped).
pub struct Cluster {
    /// The database server (a fault test stops and starts it).
    pub pg: PgServer,
    /// The database, straight to PostgreSQL (the replicas may go through a [`Stall`]).
    pub url: String,
    /// The shared dev secret and the replicas' data directories.
    _dir: tempfile::TempDir,
    pub dirs: Vec<PathBuf>,
    pub env: Vec<(String, String)>,
    pub replicas: Vec<Option<Appliance>>,
}

impl Cluster {
    /// Starts PostgreSQL and two replicas at the same moment (so the first root is
    /// raced for), with `extra` settings for both; `None` (reported) where PostgreSQL
    /// cannot run.
    pub async fn start(extra: Vec<(String, String)>) -> Option<Self> {
        Self::start_n(2, extra).await
    }

    /// As [`Cluster::start`], with `n` replicas (started together).
    pub async fn start_n(n: usize, extra: Vec<(String, String)>) -> Option<Self> {
        Self::start_each(extra, vec![Vec::new(); n]).await
    }

    /// Replicas started together, one per entry of `own` (its settings beside `extra`).
    pub async fn start_each(
        extra: Vec<(String, String)>,
        own: Vec<Vec<(String, String)>>,
    ) -> Option<Self> {
        let pg = started_pg()?;
        let url = pg.new_database();
        Some(Self::start_on(pg, url.clone(), url, extra, own).await)
    }

    /// As [`Cluster::start`], with the replicas reaching PostgreSQL through a forwarder
    /// the test can stall ([`Stall`]); [`Cluster::url`] stays the direct way in.
    pub async fn start_through_stall(extra: Vec<(String, String)>) -> Option<(Self, Stall)> {
        let pg = started_pg()?;
        let url = pg.new_database();
        let stall = Stall::start(pg.port()).await;
        let direct = format!("127.0.0.1:{}/", pg.port());
        assert!(url.contains(&direct), "{url} does not name {direct}");
        let routed = url.replace(&direct, &format!("127.0.0.1:{}/", stall.port));
        let own = vec![Vec::new(); 2];
        Some((Self::start_on(pg, url, routed, extra, own).await, stall))
    }

    /// Replicas on `pg`, reaching it at `replica_url` (the database at `url`).
    async fn start_on(
        pg: PgServer,
        url: String,
        replica_url: String,
        extra: Vec<(String, String)>,
        own: Vec<Vec<(String, String)>>,
    ) -> Self {
        let n = own.len();
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("dev-secret");
        // The dev platform's stand-in for the KMS app key: one secret for every replica
        // (created before any starts, so none races to create its own).
        let mut bytes = [0u8; 32];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
            .unwrap();
        std::fs::write(&secret, bytes).unwrap();
        std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let mut env = vec![
            ("APPLIANCE_STORE__ENGINE".to_owned(), "postgres".to_owned()),
            ("APPLIANCE_STORE__URL".to_owned(), replica_url),
            (
                "APPLIANCE_KEYSERVICE__DEV_SECRET".to_owned(),
                secret.display().to_string(),
            ),
        ];
        env.extend(extra);
        let dirs: Vec<PathBuf> = (0..n).map(|i| dir.path().join(format!("r{i}"))).collect();
        for d in &dirs {
            std::fs::create_dir_all(d).unwrap();
        }
        let envs: Vec<Vec<(String, String)>> = own
            .into_iter()
            .map(|mine| env.iter().cloned().chain(mine).collect())
            .collect();
        let launches = dirs.iter().zip(&envs).map(|(d, env)| launch(d, env));
        let replicas = futures_util::future::join_all(launches)
            .await
            .into_iter()
            .map(Some)
            .collect();
        Self {
            pg,
            url,
            _dir: dir,
            dirs,
            env,
            replicas,
        }
    }

    pub fn a(&self) -> &Appliance {
        self.replica(0)
    }

    pub fn b(&self) -> &Appliance {
        self.replica(1)
    }

    /// Replica `i` (panics if it was stopped).
    pub fn replica(&self, i: usize) -> &Appliance {
        self.replicas[i].as_ref().expect("a running replica")
    }

    /// Starts one more replica on the same database.
    pub async fn add_replica(&mut self) -> usize {
        let i = self.dirs.len();
        let dir = self.dirs[0].parent().unwrap().join(format!("r{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        self.replicas.push(Some(launch(&dir, &self.env).await));
        self.dirs.push(dir);
        i
    }

    /// Runs SQL on the database directly, as its operator (or an attacker) could.
    pub async fn behind_the_back(&self, sql: &str) {
        let (url, sql) = (self.url.clone(), sql.to_owned());
        tokio::task::spawn_blocking(move || {
            let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            client.batch_execute(&sql).unwrap();
        })
        .await
        .unwrap();
    }
}

/// A private PostgreSQL server, or `None` (reported) where PostgreSQL cannot run.
fn started_pg() -> Option<PgServer> {
    PgServer::start()
        .map_err(|unavailable| unavailable.report())
        .ok()
}

/// A dev replica on `dir` with `env`.
pub async fn launch(dir: &Path, env: &[(String, String)]) -> Appliance {
    Appliance::launch(dir, Launch::DevWith { env: env.to_vec() }).await
}

/// `GET /health` of `app`, whatever its status.
pub async fn health(app: &Appliance) -> Value {
    let r = app.client.get(app.url("/health")).send().await.unwrap();
    r.json().await.unwrap()
}

/// A TCP load balancer on a free loopback port: each new connection goes to the next
/// replica port in turn (TLS passes through untouched, as with an L4 balancer).
pub struct Balancer {
    pub port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Balancer {
    /// Balances `listener`'s connections over `upstreams` (a listener bound by the
    /// caller, so its port can be chosen ahead).
    pub fn serve(listener: tokio::net::TcpListener, upstreams: Vec<u16>) -> Self {
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let mut next = 0usize;
            while let Ok((mut inbound, _)) = listener.accept().await {
                let upstream = upstreams[next % upstreams.len()];
                next += 1;
                tokio::spawn(async move {
                    if let Ok(mut outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Self { port, task }
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
