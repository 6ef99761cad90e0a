//! The private server itself: databases, TLS, restart after a crash, and that no server
//! outlives its owner (dropped, or the whole process killed).

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{Ipv4Addr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{PgServer, Shutdown};

/// Set in the child process of `the_shared_server_dies_with_its_process`.
const CHILD_ENV: &str = "TEST_SUPPORT_PG_CHILD";

fn accepts(port: u16) -> bool {
    TcpStream::connect_timeout(
        &(Ipv4Addr::LOCALHOST, port).into(),
        Duration::from_millis(500),
    )
    .is_ok()
}

fn connect(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls)
        .unwrap_or_else(|err| panic!("connect {url}: {err}"))
}

fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

#[test]
fn each_database_is_its_own_and_fsync_stays_on() {
    let started = Instant::now();
    let pg = pg_or_skip!(PgServer::start());
    say(&format!(
        "cold start (initdb + postgres ready): {:.2?}",
        started.elapsed()
    ));
    let created = Instant::now();
    let alpha = pg.create_database("alpha");
    say(&format!("create_database: {:.2?}", created.elapsed()));
    let other = pg.new_database();
    assert_eq!(
        alpha,
        format!(
            "postgres://test:{}@127.0.0.1:{}/alpha",
            pg.password(),
            pg.port()
        )
    );
    assert_ne!(alpha, other);

    let mut a = connect(&alpha);
    let mut b = connect(&other);
    a.batch_execute("CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('α in alpha')")
        .unwrap();
    let row = a
        .query_one("SELECT v, current_database() FROM t", &[])
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "α in alpha");
    assert_eq!(row.get::<_, String>(1), "alpha");
    assert!(
        b.query_one("SELECT v FROM t", &[]).is_err(),
        "the other database must not see alpha's table"
    );
    let settings = b
        .query_one(
            "SELECT current_setting('fsync'), current_setting('max_connections'), \
             current_setting('server_encoding'), current_setting('ssl'), \
             current_setting('TimeZone')",
            &[],
        )
        .unwrap();
    assert_eq!(settings.get::<_, String>(0), "on");
    assert_eq!(settings.get::<_, String>(1), "200");
    assert_eq!(settings.get::<_, String>(2), "UTF8");
    assert_eq!(settings.get::<_, String>(3), "off");
    assert_eq!(settings.get::<_, String>(4), "UTC");

    // The password is checked over TCP.
    let wrong = alpha.replace(pg.password(), "not-the-password");
    assert!(postgres::Client::connect(&wrong, postgres::NoTls).is_err());
}

fn rustls_trusting(ca_pem: &str) -> tokio_postgres_rustls::MakeRustlsConnect {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_postgres_rustls::MakeRustlsConnect::new(config)
}

#[test]
fn a_tls_server_is_reached_only_by_clients_that_verify_its_certificate() {
    let pg = pg_or_skip!(PgServer::start_tls());
    let tls = pg.tls().expect("TLS material").clone();
    assert_eq!(std::fs::read_to_string(&tls.ca_file).unwrap(), tls.ca_pem);
    let url = pg.new_database();
    assert!(url.ends_with("?sslmode=require"), "{url}");

    let mut client = postgres::Client::connect(&url, rustls_trusting(&tls.ca_pem))
        .unwrap_or_else(|err| panic!("TLS connect {url}: {err}"));
    let row = client
        .query_one(
            "SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .unwrap();
    assert!(row.get::<_, bool>(0));
    say(&format!("TLS connection: {}", row.get::<_, String>(1)));

    // No TLS: refused by pg_hba.conf (hostssl only).
    let plain = url.replace("sslmode=require", "sslmode=disable");
    let Err(err) = postgres::Client::connect(&plain, postgres::NoTls) else {
        panic!("a client without TLS got in");
    };
    assert!(
        format!("{err:?}").contains("no pg_hba.conf entry"),
        "{err:?}"
    );

    // A client that trusts another CA fails the handshake.
    let stranger = other_ca_pem();
    let Err(err) = postgres::Client::connect(&url, rustls_trusting(&stranger)) else {
        panic!("a client trusting another CA got in");
    };
    assert!(
        format!("{err:?}").contains("UnknownIssuer"),
        "expected a certificate verification failure, got {err:?}"
    );
}

fn other_ca_pem() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.self_signed(&key).unwrap().pem()
}

#[test]
fn dropping_the_server_stops_it_and_deletes_its_directory() {
    let pg = pg_or_skip!(PgServer::start());
    let port = pg.port();
    let dir = pg.socket_dir().to_owned();
    assert!(accepts(port));
    assert!(dir.join("data/PG_VERSION").is_file());
    let started = Instant::now();
    drop(pg);
    say(&format!("stop: {:.2?}", started.elapsed()));
    assert!(!accepts(port), "port {port} still accepts after drop");
    assert!(!dir.exists(), "{} still exists after drop", dir.display());
}

#[test]
fn committed_rows_survive_a_crash_and_an_immediate_shutdown() {
    let mut pg = pg_or_skip!(PgServer::start());
    let url = pg.new_database();
    {
        let mut client = connect(&url);
        client
            .batch_execute("CREATE TABLE t (n INT); INSERT INTO t VALUES (1)")
            .unwrap();
    }
    pg.restart(Shutdown::Kill);
    {
        let mut client = connect(&url);
        assert_eq!(rows_in_t(&mut client), 1);
        client.batch_execute("INSERT INTO t VALUES (2)").unwrap();
        // This connection's backend outlives the postmaster's SIGQUIT only briefly.
        pg.restart(Shutdown::Immediate);
    }
    let mut client = connect(&url);
    assert_eq!(rows_in_t(&mut client), 2);
    drop(client);
    pg.restart(Shutdown::Fast);
    assert!(accepts(pg.port()));
}

/// `count(*)` of table `t`.
fn rows_in_t(client: &mut postgres::Client) -> i64 {
    client
        .query_one("SELECT count(*) FROM t", &[])
        .unwrap()
        .get(0)
}

#[test]
fn killing_every_process_breaks_open_sessions_and_keeps_committed_rows() {
    let mut pg = pg_or_skip!(PgServer::start());
    let url = pg.new_database();
    let mut open = connect(&url);
    open.batch_execute("CREATE TABLE t (n INT); INSERT INTO t VALUES (1)")
        .unwrap();
    pg.stop(Shutdown::KillAll);
    // Down: the open session is broken (its backend died with the postmaster), and
    // nothing accepts.
    assert!(open.batch_execute("SELECT 1").is_err());
    assert!(!accepts(pg.port()));
    pg.start_again();
    let mut client = connect(&url);
    assert_eq!(rows_in_t(&mut client), 1);
}

/// Runs only as the child of `the_shared_server_dies_with_its_process`: starts the
/// shared server, says where it is, and waits to be killed.
#[test]
fn child_holding_the_shared_server() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let pg = pg_or_skip!(PgServer::shared());
    let mut out = std::io::stdout();
    let _ = writeln!(
        out,
        "\nPG_CHILD_READY {} {}",
        pg.port(),
        pg.socket_dir().display()
    );
    let _ = out.flush();
    std::thread::sleep(Duration::from_secs(120));
}

#[test]
fn the_shared_server_is_one_and_dies_with_its_process() {
    let first = pg_or_skip!(PgServer::shared());
    let second = PgServer::shared().unwrap();
    assert!(std::ptr::eq(first, second));
    let url = first.new_database();
    connect(&url).batch_execute("SELECT 1").unwrap();

    // Another process of this test binary takes its own shared server and is killed
    // (SIGKILL: no destructor, no atexit): the watchdog must stop that server.
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "postgres::tests::child_holding_the_shared_server",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let ready = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|line| {
            line.split_once("PG_CHILD_READY ")
                .map(|(_, rest)| rest.to_owned())
        });
    let Some(ready) = ready else {
        let status = child.wait().unwrap();
        panic!("the child exited ({status}) without starting a server");
    };
    let (port, dir) = ready.split_once(' ').unwrap();
    let port: u16 = port.parse().unwrap();
    let dir = PathBuf::from(dir);
    assert!(accepts(port));
    assert!(dir.is_dir());

    child.kill().unwrap();
    child.wait().unwrap();
    let killed = Instant::now();
    while (accepts(port) || dir.exists()) && killed.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    say(&format!(
        "the watchdog stopped the orphaned server in {:.2?}",
        killed.elapsed()
    ));
    assert!(
        !accepts(port),
        "the orphaned server on {port} still accepts"
    );
    assert!(!dir.exists(), "{} was not deleted", dir.display());
}

#[test]
fn database_names_are_checked() {
    assert!(super::valid_identifier("test_1"));
    assert!(super::valid_identifier("a"));
    for bad in ["", "1a", "A", "a-b", "a\"b", &"a".repeat(64)] {
        assert!(!super::valid_identifier(bad), "{bad:?}");
    }
}

/// The appliance's and the end-to-end tests are async: the blocking administrative
/// client must not run on the runtime's thread (it would panic there).
#[tokio::test]
async fn the_helpers_work_inside_a_tokio_runtime() {
    let pg = pg_or_skip!(PgServer::shared());
    let url = pg.new_database();
    let rows = tokio::task::spawn_blocking(move || {
        connect(&url)
            .query_one("SELECT current_database()", &[])
            .unwrap()
            .get::<_, String>(0)
    })
    .await
    .unwrap();
    assert!(rows.starts_with("test_"), "{rows}");
}
