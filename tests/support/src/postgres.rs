//! A private PostgreSQL server for tests: Debian's `postgresql` server binaries
//! (`initdb`, `postgres`) run on a free 127.0.0.1 port with their data directory, Unix
//! socket and log in a temporary directory, stopped and deleted when the [`PgServer`] is
//! dropped.
//!
//! * The binaries: `$PG_BINDIR` if set (it must hold `initdb` and `postgres`), else the
//!   newest `/usr/lib/postgresql/<major>/bin`, else `pg_config --bindir`.
//! * The cluster: `initdb` with UTF-8 and the C locale, superuser [`SUPERUSER`] with a
//!   random password, `scram-sha-256` over TCP (127.0.0.1 only) and `trust` on the Unix
//!   socket (in the 0700 temporary directory; this module's own administrative
//!   connections use it). `fsync` stays on (durability tests use this server);
//!   `shared_buffers=16MB`, `max_connections=200`.
//! * [`PgServer::start_tls`]: `ssl=on` with a certificate for `127.0.0.1` and `localhost`
//!   from a fresh test CA ([`PgTls`]); TCP connections without TLS are refused, so a client
//!   that gets in has verified that certificate.
//! * Each test takes its own database ([`PgServer::create_database`],
//!   [`PgServer::new_database`]), so tests can share one server: [`PgServer::shared`] is
//!   started once per test process.
//! * PostgreSQL refuses to run as root. When the test runs as root (CI does), `initdb` and
//!   `postgres` run as the `postgres` system user the Debian package creates (through
//!   `setpriv`), and the temporary directory, under `/tmp`, belongs to that user.
//! * No server outlives its test process: each server has a watchdog (`sh`), holding the
//!   read end of a pipe whose write end only this process has. When the process ends in
//!   any way (also `kill -9`, and a test binary's statics are never dropped), the pipe
//!   closes and the watchdog stops the server (fast shutdown, `SIGKILL` after 30 s) and
//!   deletes the directory. (`PR_SET_PDEATHSIG` would need `unsafe` and fires when the
//!   spawning *thread* ends, which for a test is the end of that test.)
//!
//! Where PostgreSQL is not installed, [`PgServer::start`] returns [`Unavailable`], which
//! says what is missing and how to install it; [`pg_or_skip!`](crate::pg_or_skip) prints
//! it as `SKIPPED: …` and returns from the test. With `CI` set (to anything but empty,
//! `false` or `0`), a missing PostgreSQL is a failure (a panic) instead. Any other
//! problem (a server that does not start, a failing `CREATE DATABASE`) panics with the
//! end of the server's log.

use std::fmt::Write as _;
use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::ports::free_port;

/// The superuser every server is created with (its password is [`PgServer::password`]).
pub const SUPERUSER: &str = "test";

/// How long a server may take to accept connections (also after [`PgServer::restart`]).
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a shutdown may take before the server is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// Why no PostgreSQL server can run here: a test prints it and passes (see
/// [`pg_or_skip!`](crate::pg_or_skip)). Never returned when `CI` is set.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{reason}")]
pub struct Unavailable {
    reason: String,
}

impl Unavailable {
    /// What is missing, and how to install it.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// Prints `SKIPPED: <test>: <reason>` on standard error, past the test harness's
    /// capture, so that it shows in every run.
    pub fn report(&self) {
        let current = std::thread::current();
        let test = current.name().unwrap_or("a PostgreSQL test");
        let _ = writeln!(std::io::stderr(), "SKIPPED: {test}: {self}");
    }
}

/// Whether `CI` is set: then a missing PostgreSQL fails the test instead of skipping it.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| !matches!(value.trim(), "" | "0" | "false"))
}

/// The skip for `reason`, or a panic under CI.
fn unavailable(reason: String) -> Unavailable {
    assert!(
        !in_ci(),
        "CI is set, so PostgreSQL is required and the tests that need it may not skip: {reason}"
    );
    Unavailable { reason }
}

/// Starts a server (`pg_or_skip!()`: the process's shared one; `pg_or_skip!(expr)`: any
/// `Result<_, Unavailable>`, such as `PgServer::start()`), or prints why none can run
/// (`SKIPPED: …`) and returns from the test. Under `CI` the start panics instead.
///
/// ```no_run
/// let pg = test_support::pg_or_skip!();
/// let url = pg.new_database();
/// ```
#[macro_export]
macro_rules! pg_or_skip {
    () => {
        $crate::pg_or_skip!($crate::postgres::PgServer::shared())
    };
    ($start:expr) => {
        match $start {
            ::std::result::Result::Ok(server) => server,
            ::std::result::Result::Err(unavailable) => {
                $crate::postgres::Unavailable::report(&unavailable);
                return;
            }
        }
    };
}

/// How [`PgServer::restart`] stops the server before starting it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// `SIGINT`: clients disconnected, a checkpoint, a clean stop.
    Fast,
    /// `SIGQUIT`: no checkpoint; the next start runs crash recovery from the WAL.
    Immediate,
    /// `SIGKILL` of the postmaster: a crash (its other processes follow when they notice).
    Kill,
    /// `SIGKILL` of the postmaster and every process it started, at once: the server's
    /// machine losing power. Open sessions break at once; the next start runs crash
    /// recovery from the WAL.
    KillAll,
}

/// The TLS material of a server started with [`PgServer::start_tls`].
#[derive(Debug, Clone)]
pub struct PgTls {
    /// The test CA's certificate (PEM): what a client trusts.
    pub ca_pem: String,
    /// The same CA certificate in a file in the server's temporary directory.
    pub ca_file: PathBuf,
    /// The server's certificate (PEM; subject alternative names `127.0.0.1`, `localhost`).
    pub cert_pem: String,
}

/// A running private PostgreSQL server; stopped, and its directory deleted, when dropped.
pub struct PgServer {
    bindir: PathBuf,
    run_as: RunAs,
    dir: tempfile::TempDir,
    port: u16,
    password: String,
    tls: Option<PgTls>,
    postmaster: Option<Child>,
    watchdog: Option<Child>,
    databases: AtomicU64,
}

impl std::fmt::Debug for PgServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgServer")
            .field("bindir", &self.bindir)
            .field("dir", &self.dir.path())
            .field("port", &self.port)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

/// What [`PgServer::shared`] keeps: the server, or why there is none.
enum Shared {
    Running(Box<PgServer>),
    Unavailable(Unavailable),
    Failed(String),
}

static SHARED: OnceLock<Shared> = OnceLock::new();

impl PgServer {
    /// A new server (plain TCP, password authentication), ready to accept connections.
    /// [`Unavailable`] when PostgreSQL is not installed (a panic under `CI`); a panic,
    /// with the end of the server's log, when it is installed but does not start.
    pub fn start() -> Result<Self, Unavailable> {
        Self::launch(false)
    }

    /// As [`PgServer::start`], with `ssl=on` and a certificate from a fresh test CA
    /// ([`PgServer::tls`]); TCP connections without TLS are refused. Its URLs carry
    /// `sslmode=require`.
    pub fn start_tls() -> Result<Self, Unavailable> {
        Self::launch(true)
    }

    /// The server shared by every test of this process (started by the first caller; the
    /// others wait for it), for tests that each take their own database. Stopped by its
    /// watchdog when the process exits. The same [`Unavailable`] (or panic) for every
    /// caller when it cannot start.
    pub fn shared() -> Result<&'static Self, Unavailable> {
        let shared = SHARED.get_or_init(|| match std::panic::catch_unwind(Self::start) {
            Ok(Ok(server)) => Shared::Running(Box::new(server)),
            Ok(Err(unavailable)) => Shared::Unavailable(unavailable),
            Err(panic) => Shared::Failed(
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "(no message)".to_owned()),
            ),
        });
        match shared {
            Shared::Running(server) => Ok(server),
            Shared::Unavailable(unavailable) => Err(unavailable.clone()),
            Shared::Failed(message) => {
                panic!("the shared PostgreSQL server did not start: {message}")
            }
        }
    }

    /// Creates database `name` (lower-case letters, digits and `_`, at most 63, not
    /// starting with a digit) and returns its URL ([`PgServer::url`]). Panics when it
    /// exists or cannot be created. Usable from any thread, also inside a tokio runtime.
    pub fn create_database(&self, name: &str) -> String {
        assert!(
            valid_identifier(name),
            "database name {name:?}: use 1 to 63 of a-z, 0-9 and _, not starting with a digit"
        );
        if let Err(err) = self.admin(&format!("CREATE DATABASE \"{name}\"")) {
            panic!(
                "CREATE DATABASE {name} failed: {err}\n{}",
                self.log_tail(20)
            );
        }
        self.url(name)
    }

    /// Creates a database with a name not used before on this server (`test_<n>`) and
    /// returns its URL.
    pub fn new_database(&self) -> String {
        let n = self.databases.fetch_add(1, Ordering::Relaxed);
        self.create_database(&format!("test_{n}"))
    }

    /// `postgres://test:<password>@127.0.0.1:<port>/<database>`, with `?sslmode=require`
    /// for a TLS server (the client brings the TLS configuration that trusts
    /// [`PgTls::ca_pem`]).
    pub fn url(&self, database: &str) -> String {
        let tls = if self.tls.is_some() {
            "?sslmode=require"
        } else {
            ""
        };
        format!(
            "postgres://{SUPERUSER}:{}@127.0.0.1:{}/{database}{tls}",
            self.password, self.port
        )
    }

    /// The TCP port (on 127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The superuser's name ([`SUPERUSER`]).
    pub fn user(&self) -> &str {
        SUPERUSER
    }

    /// The superuser's password (random, hex).
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The TLS material, for a server started with [`PgServer::start_tls`].
    pub fn tls(&self) -> Option<&PgTls> {
        self.tls.as_ref()
    }

    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The directory of the Unix socket (`.s.PGSQL.<port>`), where `SUPERUSER` is trusted.
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's log file (its standard output and error).
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("postgres.log")
    }

    /// The last `lines` lines of the server's log, under a heading.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = fs::read_to_string(self.log_path()).unwrap_or_default();
        let all: Vec<&str> = log.lines().collect();
        let tail = all[all.len().saturating_sub(lines)..].join("\n");
        format!(
            "--- end of the PostgreSQL log ({}) ---\n{tail}",
            self.log_path().display()
        )
    }

    /// Stops the server the way `how` says and starts it again on the same port and data
    /// directory (crash recovery after [`Shutdown::Immediate`] and [`Shutdown::Kill`]);
    /// returns when it accepts connections again. Panics when it does not come back.
    pub fn restart(&mut self, how: Shutdown) {
        self.stop(how);
        self.start_again();
    }

    /// Stops the server the way `how` says and leaves it down (an outage, until
    /// [`PgServer::start_again`]).
    pub fn stop(&mut self, how: Shutdown) {
        self.stop_postmaster(how);
    }

    /// Starts a stopped server again on the same port and data directory; returns when it
    /// accepts connections. Panics when it does not come back.
    pub fn start_again(&mut self) {
        if let Err(err) = self.run_postmaster() {
            panic!("PostgreSQL did not come back: {err}");
        }
    }

    fn launch(tls: bool) -> Result<Self, Unavailable> {
        let bindir = server_bindir()?;
        let run_as = RunAs::detect()?;
        let started = Instant::now();
        let dir = temp_dir(&run_as);
        let password = random_hex(16);
        let mut server = Self {
            bindir,
            run_as,
            dir,
            port: free_port(),
            password,
            tls: None,
            postmaster: None,
            watchdog: None,
            databases: AtomicU64::new(0),
        };
        server.watchdog = Some(server.spawn_watchdog());
        server.initdb();
        if tls {
            server.tls = Some(server.write_tls_files());
        }
        server.write_hba();
        let mut attempts = 0;
        loop {
            match server.run_postmaster() {
                Ok(()) => break,
                // Another process took the port between free_port() and the bind.
                Err(StartError::PortTaken) if attempts < 5 => {
                    attempts += 1;
                    server.port = free_port();
                }
                Err(err) => panic!("PostgreSQL did not start: {err}"),
            }
        }
        tracing_line(&format!(
            "PostgreSQL on 127.0.0.1:{} ({}) ready in {:.2?}",
            server.port,
            server.dir.path().display(),
            started.elapsed()
        ));
        Ok(server)
    }

    fn initdb(&self) {
        let pwfile = self.dir.path().join("pwfile");
        write_private(&pwfile, self.password.as_bytes(), &self.run_as);
        let out = self
            .run_as
            .command(&self.bindir.join("initdb"))
            .arg("--pgdata")
            .arg(self.data_dir())
            .arg(format!("--username={SUPERUSER}"))
            .arg("--pwfile")
            .arg(&pwfile)
            .args([
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--encoding=UTF8",
                "--no-locale",
                // Skips only initdb's final flush of the new cluster to disk, not the
                // server's fsync: a power cut is not what these tests simulate.
                "--no-sync",
            ])
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|err| panic!("cannot run {}/initdb: {err}", self.bindir.display()));
        let _ = fs::remove_file(&pwfile);
        assert!(
            out.status.success(),
            "initdb failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// pg_hba.conf: the superuser trusted on the (private) Unix socket; TCP from 127.0.0.1
    /// with scram-sha-256, and only over TLS for a TLS server.
    fn write_hba(&self) {
        let host = if self.tls.is_some() {
            "hostssl"
        } else {
            "host"
        };
        let hba = format!(
            "# written by test_support::postgres\n\
             local all all trust\n\
             {host} all all 127.0.0.1/32 scram-sha-256\n"
        );
        let path = self.data_dir().join("pg_hba.conf");
        write_private(&path, hba.as_bytes(), &self.run_as);
    }

    /// A test CA and a server certificate for 127.0.0.1 and localhost, the key 0600 and
    /// owned by the server's user (PostgreSQL refuses a key others can read).
    fn write_tls_files(&self) -> PgTls {
        let ca_key = rcgen::KeyPair::generate()
            .unwrap_or_else(|err| panic!("cannot generate the test CA key: {err}"));
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())
            .unwrap_or_else(|err| panic!("test CA parameters: {err}"));
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "test_support PostgreSQL test CA");
        ca_params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key)
            .unwrap_or_else(|err| panic!("cannot sign the test CA: {err}"));

        let key = rcgen::KeyPair::generate()
            .unwrap_or_else(|err| panic!("cannot generate the server key: {err}"));
        let mut params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .unwrap_or_else(|err| panic!("server certificate parameters: {err}"));
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "127.0.0.1");
        let cert = params
            .signed_by(&key, &ca)
            .unwrap_or_else(|err| panic!("cannot sign the server certificate: {err}"));

        let cert_path = self.dir.path().join("server.crt");
        let key_path = self.dir.path().join("server.key");
        let ca_file = self.dir.path().join("ca.pem");
        write_private(&cert_path, cert.pem().as_bytes(), &self.run_as);
        write_private(&key_path, key.serialize_pem().as_bytes(), &self.run_as);
        write_private(&ca_file, ca.pem().as_bytes(), &self.run_as);
        PgTls {
            ca_pem: ca.pem(),
            ca_file,
            cert_pem: cert.pem(),
        }
    }

    /// Starts `postgres` and waits until it answers a query.
    fn run_postmaster(&mut self) -> Result<(), StartError> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let log_offset = fs::metadata(self.log_path()).map_or(0, |m| m.len());
            let child = self.spawn_postmaster();
            let pid = child.id();
            self.postmaster = Some(child);
            match self.wait_ready(deadline) {
                Ok(()) => return Ok(()),
                Err(Exited(status)) => {
                    self.postmaster = None;
                    let log = fs::read_to_string(self.log_path()).unwrap_or_default();
                    let new = log
                        .get(usize::try_from(log_offset).unwrap_or(0)..)
                        .unwrap_or("");
                    if new.contains("could not bind") || new.contains("Address already in use") {
                        return Err(StartError::PortTaken);
                    }
                    // After a crash, processes of the old server may still hold its
                    // shared memory for a moment.
                    let lingering = new.contains("pre-existing shared memory block")
                        || (new.contains("lock file") && new.contains("already exists"));
                    if lingering && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(200));
                        continue;
                    }
                    return Err(StartError::Failed(format!(
                        "postgres (pid {pid}) exited with {status}\n{}",
                        self.log_tail(30)
                    )));
                }
                Err(TimedOut(last)) => {
                    self.stop_postmaster(Shutdown::Kill);
                    return Err(StartError::Failed(format!(
                        "postgres (pid {pid}) did not accept connections within {START_TIMEOUT:?} \
                         (last attempt: {last})\n{}",
                        self.log_tail(30)
                    )));
                }
            }
        }
    }

    fn spawn_postmaster(&self) -> Child {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap_or_else(|err| panic!("cannot open {}: {err}", self.log_path().display()));
        let log_err = log
            .try_clone()
            .unwrap_or_else(|err| panic!("cannot duplicate the log descriptor: {err}"));
        let mut cmd = self.run_as.command(&self.bindir.join("postgres"));
        cmd.arg("-D")
            .arg(self.data_dir())
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-k")
            .arg(self.dir.path())
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "unix_socket_permissions=0700",
                "-c",
                "shared_buffers=16MB",
                "-c",
                "max_connections=200",
                // The same clock reading on every machine.
                "-c",
                "timezone=UTC",
                "-c",
                "log_timezone=UTC",
            ]);
        if self.tls.is_some() {
            cmd.args(["-c", "ssl=on", "-c"])
                .arg(format!(
                    "ssl_cert_file={}",
                    self.dir.path().join("server.crt").display()
                ))
                .arg("-c")
                .arg(format!(
                    "ssl_key_file={}",
                    self.dir.path().join("server.key").display()
                ));
        }
        cmd.current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .unwrap_or_else(|err| panic!("cannot run {}/postgres: {err}", self.bindir.display()))
    }

    fn wait_ready(&mut self, deadline: Instant) -> Result<(), WaitError> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        loop {
            if let Some(child) = self.postmaster.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(Exited(status));
            }
            let last = match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                Err(err) => format!("TCP connect to {addr}: {err}"),
                Ok(_) => match self.admin("SELECT 1") {
                    Ok(()) => return Ok(()),
                    Err(err) => err,
                },
            };
            if Instant::now() >= deadline {
                return Err(TimedOut(last));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs `sql` as the superuser over the Unix socket, on a thread of its own (the
    /// blocking `postgres` client cannot run inside a tokio runtime).
    fn admin(&self, sql: &str) -> Result<(), String> {
        let mut config = postgres::Config::new();
        config
            .host_path(self.dir.path())
            .port(self.port)
            .user(SUPERUSER)
            .dbname("postgres")
            .connect_timeout(Duration::from_secs(5));
        let sql = sql.to_owned();
        std::thread::scope(|scope| {
            scope
                .spawn(move || {
                    let mut client = config
                        .connect(postgres::NoTls)
                        .map_err(|err| format!("connecting over the Unix socket: {err}"))?;
                    client
                        .batch_execute(&sql)
                        .map_err(|err| format!("{sql}: {err}"))
                })
                .join()
                .unwrap_or_else(|_| Err("the administrative connection panicked".to_owned()))
        })
    }

    /// Stops the postmaster if it runs (`how`, then `SIGKILL` after [`STOP_TIMEOUT`]) and
    /// reaps it.
    fn stop_postmaster(&mut self, how: Shutdown) {
        let Some(mut child) = self.postmaster.take() else {
            return;
        };
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        match how {
            Shutdown::Fast => signal(child.id(), "INT"),
            Shutdown::Immediate => signal(child.id(), "QUIT"),
            Shutdown::Kill => {
                let _ = child.kill();
            }
            Shutdown::KillAll => {
                let workers = children_of(child.id());
                let _ = child.kill();
                for pid in &workers {
                    signal(*pid, "KILL");
                }
                // The next postmaster refuses to start while any of them still holds
                // the old shared memory.
                let deadline = Instant::now() + STOP_TIMEOUT;
                while workers
                    .iter()
                    .any(|pid| Path::new(&format!("/proc/{pid}")).exists())
                    && Instant::now() < deadline
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if !matches!(child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The safety net: a shell that waits for end-of-file on its standard input (this
    /// process exiting closes the pipe), then stops whatever postmaster `postmaster.pid`
    /// names and deletes the directory. Ignores the terminal's signals, so that a ^C of
    /// `cargo test` still cleans up. Killed by `Drop`, which does the same itself.
    fn spawn_watchdog(&self) -> Child {
        const SCRIPT: &str = r#"
trap '' INT TERM HUP
read -r _ || :
pidfile="$1/postmaster.pid"
pid=$(head -n 1 "$pidfile" 2>/dev/null) || pid=
case "$pid" in '' | *[!0-9]*) pid= ;; esac
if [ -n "$pid" ] && kill -INT "$pid" 2>/dev/null; then
  n=0
  while [ -e "$pidfile" ] && kill -0 "$pid" 2>/dev/null && [ "$n" -lt 300 ]; do
    sleep 0.1
    n=$((n + 1))
  done
  if [ -e "$pidfile" ]; then kill -KILL "$pid" 2>/dev/null; fi
fi
rm -rf -- "$2"
"#;
        Command::new("/bin/sh")
            .arg("-c")
            .arg(SCRIPT)
            .arg("pg-watchdog")
            .arg(self.data_dir())
            .arg(self.dir.path())
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start the PostgreSQL watchdog (/bin/sh): {err}"))
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop_postmaster(Shutdown::Fast);
        if let Some(mut watchdog) = self.watchdog.take() {
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
        // `dir` (a TempDir) is deleted after this.
    }
}

enum WaitError {
    Exited(ExitStatus),
    TimedOut(String),
}
use WaitError::{Exited, TimedOut};

#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error("the port was taken")]
    PortTaken,
    #[error("{0}")]
    Failed(String),
}

/// The user `initdb` and `postgres` run as.
#[derive(Debug, Clone)]
enum RunAs {
    /// This process's user (not root).
    Me,
    /// Root runs them as the `postgres` system user, through `setpriv`.
    User {
        uid: u32,
        gid: u32,
        setpriv: PathBuf,
    },
}

impl RunAs {
    fn detect() -> Result<Self, Unavailable> {
        if effective_uid() != Some(0) {
            return Ok(Self::Me);
        }
        let Some((uid, gid)) = passwd_ids("postgres") else {
            return Err(unavailable(
                "this test runs as root, PostgreSQL refuses to run as root, and there is no \
                 `postgres` system user to run it as; Debian's postgresql package creates it \
                 (as root: apt-get install postgresql, or scripts/setup)"
                    .to_owned(),
            ));
        };
        let Some(setpriv) = ["/usr/bin/setpriv", "/bin/setpriv"]
            .map(PathBuf::from)
            .into_iter()
            .find(|path| path.is_file())
        else {
            return Err(unavailable(
                "this test runs as root and needs setpriv (util-linux) to run PostgreSQL as \
                 the `postgres` user: apt-get install util-linux"
                    .to_owned(),
            ));
        };
        Ok(Self::User { uid, gid, setpriv })
    }

    fn command(&self, program: &Path) -> Command {
        match self {
            Self::Me => Command::new(program),
            Self::User { uid, gid, setpriv } => {
                let mut cmd = Command::new(setpriv);
                cmd.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .arg("--init-groups")
                    .arg("--")
                    .arg(program);
                cmd
            }
        }
    }

    /// Gives `path` to the server's user.
    fn own(&self, path: &Path) {
        if let Self::User { uid, gid, .. } = self {
            std::os::unix::fs::chown(path, Some(*uid), Some(*gid))
                .unwrap_or_else(|err| panic!("cannot chown {}: {err}", path.display()));
        }
    }
}

/// The directory holding `initdb` and `postgres`, or why there is none.
fn server_bindir() -> Result<PathBuf, Unavailable> {
    let has_server = |dir: &Path| dir.join("initdb").is_file() && dir.join("postgres").is_file();
    if let Some(dir) = std::env::var_os("PG_BINDIR").filter(|dir| !dir.is_empty()) {
        let dir = PathBuf::from(dir);
        assert!(
            has_server(&dir),
            "PG_BINDIR is {} but it has no initdb and postgres",
            dir.display()
        );
        return Ok(dir);
    }
    // The newest /usr/lib/postgresql/<major>/bin (majors like 15, or 9.6 of old).
    let mut newest: Option<(Vec<u32>, PathBuf)> = None;
    for entry in fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name();
        let Some(version) = name
            .to_str()
            .and_then(|name| name.split('.').map(|part| part.parse().ok()).collect())
        else {
            continue;
        };
        let bin = entry.path().join("bin");
        if has_server(&bin) && newest.as_ref().is_none_or(|(best, _)| &version > best) {
            newest = Some((version, bin));
        }
    }
    if let Some((_, bin)) = newest {
        return Ok(bin);
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output()
        && out.status.success()
    {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if has_server(&dir) {
            return Ok(dir);
        }
    }
    Err(unavailable(
        "PostgreSQL is not installed: no initdb and postgres in /usr/lib/postgresql/*/bin, in \
         `pg_config --bindir` or in $PG_BINDIR. Install Debian's postgresql package (as root: \
         apt-get install postgresql, or scripts/setup), or set PG_BINDIR to a directory with \
         initdb and postgres"
            .to_owned(),
    ))
}

/// A fresh directory for one server, owned by the user it runs as. As root under `/tmp`
/// (the `postgres` user must be able to reach it), else under the temporary directory
/// unless that path is too long for a Unix socket.
fn temp_dir(run_as: &RunAs) -> tempfile::TempDir {
    let system = std::env::temp_dir();
    let parent = match run_as {
        RunAs::Me if system.as_os_str().len() <= 64 => system,
        _ => PathBuf::from("/tmp"),
    };
    let dir = tempfile::Builder::new()
        .prefix("pg-test-")
        .tempdir_in(&parent)
        .unwrap_or_else(|err| panic!("cannot create a directory in {}: {err}", parent.display()));
    run_as.own(dir.path());
    dir
}

/// Writes `contents` to a new file at `path`, mode 0600, owned by the server's user.
fn write_private(path: &Path, contents: &[u8], run_as: &RunAs) {
    let _ = fs::remove_file(path);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .unwrap_or_else(|err| panic!("cannot create {}: {err}", path.display()));
    file.write_all(contents)
        .unwrap_or_else(|err| panic!("cannot write {}: {err}", path.display()));
    // The mode of `open` is masked by the umask; 0600 is what PostgreSQL wants of a key.
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))
        .unwrap_or_else(|err| panic!("cannot chmod {}: {err}", path.display()));
    run_as.own(path);
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).unwrap_or_else(|err| panic!("no randomness: {err}"));
    buf.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn valid_identifier(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Sends `SIGsig` to `pid` (the shell's `kill`: no `unsafe` here).
/// The processes whose parent is `pid` (from `/proc`).
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            let stat = fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            // `pid (comm) state ppid …`: the command may hold spaces and parentheses.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|ppid| ppid.parse::<u32>().ok());
            ppid == Some(pid)
        })
        .collect()
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("/bin/sh")
        .arg("-c")
        .arg(r#"kill -s "$0" "$1""#)
        .arg(sig)
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

fn effective_uid() -> Option<u32> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// `(uid, gid)` of `user` in /etc/passwd.
fn passwd_ids(user: &str) -> Option<(u32, u32)> {
    let passwd = fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        if fields.next()? != user {
            return None;
        }
        let _password = fields.next()?;
        Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
    })
}

/// A line on standard error when `PG_TEST_VERBOSE` is set (start-up times).
fn tracing_line(line: &str) {
    if std::env::var_os("PG_TEST_VERBOSE").is_some() {
        let _ = writeln!(std::io::stderr(), "test_support::postgres: {line}");
    }
}

#[cfg(test)]
mod tests;
