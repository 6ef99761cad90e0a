//! The disk fills (issue 39): SQLite on a small tmpfs that fills under load, then gets
//! its space back.
//!
//! The appliance's data directory is a tmpfs of [`TMPFS_MIB`] MiB of its own (mounted by
//! the test: it needs root, or `CAP_SYS_ADMIN`; without it the test prints
//! `SKIPPED: … cannot mount tmpfs (…)` and passes). Everything the appliance keeps there is
//! on it, as on a CVM's data volume: `state.db` and its WAL, keyservice's sealed state,
//! the TLS certificate, keyservice's socket. Its log is not: the harness writes the
//! appliance's standard error to `appliance.log` in the data directory, and here that
//! name is a link to a file outside the tmpfs, as in production, where standard error
//! goes to the container's log driver and not to the data volume (the appliance ignores
//! a failing log write either way, `log_output`), so the test can show the log lines of
//! the fault.
//!
//! Two writers create groups one at a time and two readers list them and ask
//! `/account_exists`, while a filler file takes every free byte of the tmpfs; the fault
//! lasts until the writers have been refused for a while ([`HOLD`] after the first
//! refusal, which comes within [`FIRST_REFUSAL_WITHIN`] of the fill), then the filler is
//! deleted. The bounds:
//!
//! * every answer, during the fault too, is 200 or 503 and comes within the request
//!   deadline ([`DEADLINE`]) plus 2 s: never a 500, never a hang;
//! * while the disk is full, writes that cannot be stored answer 503 with the standard
//!   error body, a description that says the storage is full (not "internal error"), and
//!   `Retry-After`; the metrics count each as a 503 of its route; reads (`/list_groups`,
//!   `/account_exists`) go on answering 200; `/health` answers within its own 2 s bound,
//!   200 with the store `ok`: it checks that the store answers, and it does (a write
//!   that SQLite can still fit in the space its WAL already has is acknowledged, too);
//! * once the space is back, writes answer 200 again without a restart: every write sent
//!   one second after the filler was deleted is acknowledged;
//! * every acknowledged group exists exactly once, as the running appliance reads it and
//!   after a `kill -9` and a restart on the same directory.
//!
//! The fault lasts about 2.5 s; the whole test takes about 8 s here (two appliance starts
//! included).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashSet};
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use e2e::{Appliance, Launch, Reply, read};
use serde_json::json;
use test_support::metrics::{metrics_listen, scrape};

/// The request deadline the appliance runs with here (`http.request_timeout_ms`).
const DEADLINE: Duration = Duration::from_secs(4);
/// How long an answer may take: the deadline, plus room for the answer to travel.
const ANSWER_WITHIN: Duration = Duration::from_secs(6);
/// The data directory's size: room for the database, its WAL and keyservice's state.
const TMPFS_MIB: u32 = 16;
/// The first write refused after the fill comes within this (SQLite first reuses the
/// space its WAL already has).
const FIRST_REFUSAL_WITHIN: Duration = Duration::from_secs(15);
/// How long the disk stays full after the first refusal.
const HOLD: Duration = Duration::from_secs(2);
/// How long after the space is back every write must be acknowledged again.
const RECOVERY: Duration = Duration::from_secs(1);
/// How long the writers go on after the space is back.
const AFTER: Duration = Duration::from_secs(3);

/// A tmpfs mounted on a fresh temporary directory, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `mib` MiB, or says why it cannot.
    fn mount(mib: u32) -> Result<Self, String> {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={mib}m,mode=0700"),
                "tmpfs",
            ])
            .arg(dir.path())
            .output()
            .map_err(|err| format!("`mount` did not run: {err}"))?;
        if out.status.success() {
            Ok(Self { dir })
        } else {
            Err(format!(
                "`mount -t tmpfs` failed with {}: {}; it needs root or CAP_SYS_ADMIN",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // The killed appliance's children (keyservice, the worker launcher) exit on their
        // own a moment later: until then the filesystem is busy.
        for _ in 0..50 {
            let unmounted = Command::new("umount")
                .arg(self.dir.path())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if unmounted {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // Still held: detach it now; the kernel frees it when the last file is closed.
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Prints why the test cannot run, past the harness's capture (as
/// `test_support::postgres::Unavailable::report` does).
fn skip(reason: &str) {
    let current = std::thread::current();
    let test = current.name().unwrap_or("disk_full");
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED: {test}: cannot mount tmpfs ({reason})"
    );
}

/// Fills the filesystem of `path`'s folder with the file `path`: writes until the
/// filesystem says it has no space left, in smaller and smaller pieces so that no byte is
/// left. Returns the bytes written.
fn fill(path: &Path) -> u64 {
    let mut file = std::fs::File::create(path).unwrap();
    let chunk = vec![0xa5_u8; 1 << 20];
    let mut written = 0u64;
    for size in [1 << 20, 4096, 1] {
        loop {
            match file.write(&chunk[..size]) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(err) if err.raw_os_error() == Some(28) => break, // ENOSPC
                Err(err) => panic!("filling {}: {err}", path.display()),
            }
        }
    }
    written
}

/// What the writers were told.
#[derive(Default)]
struct Writes {
    /// Groups whose creation was acknowledged (200), with when each was sent.
    acknowledged: Vec<(String, Instant)>,
    /// Writes answered 503, with when each was sent.
    refused: Vec<Instant>,
    /// The first 503, whole.
    first_refusal: Option<Reply>,
    /// Every 503's description and `Retry-After`, counted.
    refusal_kinds: BTreeMap<(String, Option<String>), usize>,
    /// Anything but 200 or 503, a transport error, or an answer later than
    /// [`ANSWER_WITHIN`]: each a failure of the test.
    wrong: Vec<String>,
}

/// What the readers were told.
#[derive(Default)]
struct Reads {
    /// When each read answered 200 was sent.
    ok: Vec<Instant>,
    /// Anything but 200 (a read never needs to write), or late: failures.
    wrong: Vec<String>,
}

/// Sends `request`: its reply, or the transport error, or `Err` when no answer came
/// within [`ANSWER_WITHIN`].
async fn within(
    request: reqwest::RequestBuilder,
) -> Result<Result<e2e::Reply, reqwest::Error>, tokio::time::error::Elapsed> {
    tokio::time::timeout(ANSWER_WITHIN, async {
        Ok(read(request.send().await?).await)
    })
    .await
}

/// Creates groups named `w{writer}-{n}` on `app` until `stop`, one at a time; counts the
/// 503s in `refusals` as they come.
async fn write_until(
    app: &Appliance,
    key: &str,
    writer: usize,
    stop: &AtomicBool,
    refusals: &AtomicUsize,
) -> Writes {
    let mut writes = Writes::default();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let name = format!("w{writer}-{n}");
        let sent = Instant::now();
        let request = app
            .client
            .post(app.api("/add_group"))
            .bearer_auth(key)
            .json(&json!({"group_name": name, "group_description": "",
                          "pkp_ids_permitted": [], "cid_hashes_permitted": []}));
        match within(request).await {
            Err(_) => writes
                .wrong
                .push(format!("{name}: no answer within {ANSWER_WITHIN:?}")),
            Ok(Err(err)) => writes.wrong.push(format!("{name}: {err}")),
            Ok(Ok(reply)) => match reply.status.as_u16() {
                200 => writes.acknowledged.push((name, sent)),
                503 => {
                    refusals.fetch_add(1, Ordering::Relaxed);
                    writes.refused.push(sent);
                    let description = reply.body["error"]["description"]
                        .as_str()
                        .unwrap_or(&reply.text)
                        .to_owned();
                    let retry_after = reply
                        .headers
                        .get("retry-after")
                        .map(|v| v.to_str().unwrap_or_default().to_owned());
                    *writes
                        .refusal_kinds
                        .entry((description, retry_after))
                        .or_default() += 1;
                    if writes.first_refusal.is_none() {
                        writes.first_refusal = Some(reply);
                    }
                }
                status => writes
                    .wrong
                    .push(format!("{name}: {status} {}", reply.text)),
            },
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    writes
}

/// Lists the first page of groups and asks `/account_exists`, in turn, until `stop`.
async fn read_until(app: &Appliance, key: &str, stop: &AtomicBool) -> Reads {
    let mut reads = Reads::default();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let path = if n.is_multiple_of(2) {
            "/list_groups?page_size=100&page_number=0"
        } else {
            "/account_exists"
        };
        let sent = Instant::now();
        let request = app.client.get(app.api(path)).bearer_auth(key);
        match within(request).await {
            Err(_) => reads
                .wrong
                .push(format!("{path}: no answer within {ANSWER_WITHIN:?}")),
            Ok(Err(err)) => reads.wrong.push(format!("{path}: {err}")),
            Ok(Ok(reply)) if reply.status.as_u16() == 200 => reads.ok.push(sent),
            Ok(Ok(reply)) => reads
                .wrong
                .push(format!("{path}: {} {}", reply.status, reply.text)),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    reads
}

/// `GET /health`: its status, body and how long it took.
async fn health_of(app: &Appliance) -> (u16, serde_json::Value, Duration) {
    let asked = Instant::now();
    let response = app.client.get(app.url("/health")).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap(), asked.elapsed())
}

/// Every group name of the account `key`.
async fn group_names(app: &Appliance, key: &str) -> Vec<String> {
    let mut names = Vec::new();
    for page in 0.. {
        let reply = app
            .get(
                &format!("/list_groups?page_size=1000&page_number={page}"),
                Some(key),
            )
            .await;
        let items = reply.assert_ok().as_array().unwrap().clone();
        names.extend(items.iter().map(|g| g["name"].as_str().unwrap().to_owned()));
        if items.len() < 1000 {
            break;
        }
    }
    names
}

/// Every acknowledged group is there, once; nothing is there that no writer sent.
async fn check_kept(app: &Appliance, key: &str, acknowledged: &[(String, Instant)], when: &str) {
    let names = group_names(app, key).await;
    let mut seen = HashSet::new();
    for name in &names {
        assert!(
            seen.insert(name.as_str()),
            "{when}: group {name} exists twice"
        );
        assert!(name.starts_with('w'), "{when}: group {name} was never sent");
    }
    let missing: Vec<_> = acknowledged
        .iter()
        .filter(|(name, _)| !seen.contains(name.as_str()))
        .map(|(name, _)| name.as_str())
        .collect();
    assert!(
        missing.is_empty(),
        "{when}: acknowledged but lost: {missing:?} (of {} acknowledged)",
        acknowledged.len()
    );
    eprintln!(
        "disk_full ({when}): {} groups stored, all {} acknowledged among them",
        names.len(),
        acknowledged.len()
    );
}

/// The appliance on `dir`, with its log in `log` (outside the tmpfs), and where it
/// serves its metrics.
async fn launch(dir: &Path, log: &Path) -> (Appliance, SocketAddr) {
    let link = dir.join("appliance.log");
    if std::fs::symlink_metadata(&link).is_err() {
        std::os::unix::fs::symlink(log, &link).unwrap();
    }
    let (metrics, (name, value)) = metrics_listen();
    let env = vec![
        (
            "APPLIANCE_HTTP__REQUEST_TIMEOUT_MS".to_owned(),
            DEADLINE.as_millis().to_string(),
        ),
        (name.to_owned(), value),
    ];
    (
        Appliance::launch(dir, Launch::DevWith { env }).await,
        metrics,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_with_503_keeps_reads_and_recovers_by_itself() {
    let tmpfs = match Tmpfs::mount(TMPFS_MIB) {
        Ok(tmpfs) => tmpfs,
        Err(reason) => return skip(&reason),
    };
    let logs = tempfile::tempdir().unwrap();
    let log: PathBuf = logs.path().join("appliance.log");
    let dir = tmpfs.path().to_owned();
    let (mut app, metrics) = launch(&dir, &log).await;
    let (key, _) = app.new_account("disk-full").await;

    let stop = AtomicBool::new(false);
    let refusals = AtomicUsize::new(0);
    let filler = dir.join("filler");
    let writers = futures_util::future::join_all(
        (0..2).map(|w| write_until(&app, &key, w, &stop, &refusals)),
    );
    let readers = futures_util::future::join_all((0..2).map(|_| read_until(&app, &key, &stop)));
    let timeline = Mutex::new(Vec::<String>::new());
    let fault = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        // The data volume fills: another file takes every free byte.
        let filling = Instant::now();
        let filled = tokio::task::block_in_place(|| fill(&filler));
        let full_at = Instant::now();
        timeline.lock().unwrap().push(format!(
            "filler of {} KiB written in {:?}",
            filled / 1024,
            full_at - filling
        ));
        let before = refusals.load(Ordering::Relaxed);
        while refusals.load(Ordering::Relaxed) == before && full_at.elapsed() < FIRST_REFUSAL_WITHIN
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let first_refusal = full_at.elapsed();
        timeline.lock().unwrap().push(format!(
            "first write refused {first_refusal:?} after the fill"
        ));
        tokio::time::sleep(HOLD / 2).await;
        let health = health_of(&app).await;
        tokio::time::sleep(HOLD / 2).await;
        // Space comes back.
        std::fs::remove_file(&filler).unwrap();
        let freed_at = Instant::now();
        tokio::time::sleep(AFTER).await;
        stop.store(true, Ordering::Relaxed);
        (full_at, first_refusal, health, freed_at)
    };
    let (writes, reads, (full_at, first_refusal, health, freed_at)) =
        tokio::join!(writers, readers, fault);
    for line in timeline.into_inner().unwrap() {
        eprintln!("disk_full: {line}");
    }

    let mut all = Writes::default();
    for w in writes {
        all.acknowledged.extend(w.acknowledged);
        all.refused.extend(w.refused);
        all.wrong.extend(w.wrong);
        all.first_refusal = all.first_refusal.or(w.first_refusal);
        for (kind, n) in w.refusal_kinds {
            *all.refusal_kinds.entry(kind).or_default() += n;
        }
    }
    let mut read_ok = Vec::new();
    let mut read_wrong = Vec::new();
    for r in reads {
        read_ok.extend(r.ok);
        read_wrong.extend(r.wrong);
    }
    let during = |at: &Instant| *at >= full_at && *at < freed_at;
    let acknowledged_during = all.acknowledged.iter().filter(|(_, at)| during(at)).count();
    let refused_during = all.refused.iter().filter(|at| during(at)).count();
    let reads_during = read_ok.iter().filter(|at| during(at)).count();
    eprintln!(
        "disk_full: disk full for {:.2?}: {} writes acknowledged in all ({} before the fill, \
         {acknowledged_during} while full, {} after), {} refused with 503 ({refused_during} while full); \
         {} reads answered 200 ({reads_during} while full)",
        freed_at - full_at,
        all.acknowledged.len(),
        all.acknowledged
            .iter()
            .filter(|(_, at)| *at < full_at)
            .count(),
        all.acknowledged
            .iter()
            .filter(|(_, at)| *at >= freed_at)
            .count(),
        all.refused.len(),
        read_ok.len(),
    );
    let (health_status, health_body, health_took) = &health;
    eprintln!("disk_full: /health while full: {health_status} in {health_took:?}: {health_body}");

    // Only 200 or 503, always in time.
    assert!(
        all.wrong.is_empty(),
        "writes answered otherwise: {:#?}",
        all.wrong
    );
    assert!(
        read_wrong.is_empty(),
        "reads answered otherwise: {read_wrong:#?}"
    );
    // The fault was seen, and said what it is.
    assert!(
        first_refusal < FIRST_REFUSAL_WITHIN,
        "no write was refused within {FIRST_REFUSAL_WITHIN:?} of the disk filling"
    );
    // The standard error body; every refusal says the storage is full and when to
    // retry.
    all.first_refusal.as_ref().expect("a 503").assert_error(503);
    for ((description, retry_after), n) in &all.refusal_kinds {
        eprintln!("disk_full: {n} x 503 {description:?} (Retry-After: {retry_after:?})");
        assert!(
            description.contains("storage is full"),
            "a 503 that does not say the storage is full: {description}"
        );
        assert!(
            retry_after.is_some(),
            "a 503 for a full disk without Retry-After: {description}"
        );
    }
    // Reads went on.
    assert!(
        reads_during > 0,
        "no read was answered while the disk was full"
    );
    // `/health` answered promptly. It checks that the store answers, and it does (reads
    // go on): 200, so a load balancer keeps sending the reads to the only SQLite replica.
    assert!(
        *health_took < Duration::from_secs(3),
        "/health took {health_took:?}"
    );
    assert_eq!(*health_status, 200, "{health_body}");
    assert_eq!(health_body["checks"]["store"], "ok", "{health_body}");
    assert_eq!(health_body["checks"]["keyservice"], "ok", "{health_body}");
    // Writes were acknowledged before the fault, and again after it without a restart:
    // every write sent once the space had been back for a second.
    assert!(
        all.acknowledged.iter().any(|(_, at)| *at < full_at),
        "no write was acknowledged before the disk filled"
    );
    let late_refusals = all
        .refused
        .iter()
        .filter(|at| **at >= freed_at + RECOVERY)
        .count();
    assert_eq!(
        late_refusals, 0,
        "writes still refused more than {RECOVERY:?} after the space came back"
    );
    assert!(
        all.acknowledged
            .iter()
            .any(|(_, at)| *at >= freed_at + RECOVERY),
        "no write was acknowledged after the space came back"
    );
    let (status, body, _) = health_of(&app).await;
    assert_eq!(status, 200, "/health after the fault: {body}");
    // The metrics count every refusal as a 503 of its route, and no 500 at all.
    let scraped = scrape(metrics).await;
    // (Whole counts: a sum of no samples is -0.0.)
    let count = |labels: &[(&str, &str)]| {
        scraped.sum("appliance_http_requests_total", labels).abs() as usize
    };
    let add_group = |status| count(&[("route", "/core/v1/add_group"), ("status", status)]);
    let errors = count(&[("status", "500")]);
    eprintln!(
        "disk_full: metrics: add_group answered 200 x{}, 503 x{}; any route 500 x{errors}",
        add_group("200"),
        add_group("503"),
    );
    assert_eq!(add_group("503"), all.refused.len());
    assert_eq!(errors, 0);

    // What the operator's log says: that the disk is full, and that writes commit again,
    // once each (not a line per refused batch, which would flood the log for as long as
    // the disk stays full).
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    let count = |needle: &str| logged.lines().filter(|l| l.contains(needle)).count();
    let full = count("the disk is full: writes are refused");
    let again = count("writes are committed again");
    eprintln!(
        "disk_full: the log says the disk is full {full} time(s), writes commit again {again} time(s)"
    );
    // (Right after the fill a write may still commit in space the WAL already had, so
    // the state may flip a few times; never once per refused batch.)
    assert!(
        full >= 1 && full == again && full <= 5 && full < all.refused.len(),
        "the log's disk-full lines: {full} full, {again} recovered, for {} refused writes",
        all.refused.len()
    );

    // Nothing acknowledged was lost: now, and after a power cut and a restart.
    check_kept(&app, &key, &all.acknowledged, "after the fault").await;
    app.kill9();
    let (app, _) = launch(&dir, &log).await;
    check_kept(&app, &key, &all.acknowledged, "after kill -9 and a restart").await;
}
