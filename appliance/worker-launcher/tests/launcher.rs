//! The launcher with real processes: actions run through it, its kills and exit reports,
//! and its bounds. These tests run the launcher as the test's own uid (the development
//! setting, `--allow-same-uid-dev`); `tests/uid.rs` runs it under the workers' uid.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::json;
use test_support::worker_launcher::{Launcher, PATIENCE, alive, wait_gone};
use worker_launcher::client::{self, LaunchError};
use worker_launcher::protocol::{self, Refusal, Response, WorkerExit};

#[tokio::test]
async fn an_action_runs_through_the_launcher() {
    let dir = tempfile::tempdir().unwrap();
    let launcher = Launcher::dev(dir.path(), &["--memory-limit-mb", "96"]);
    let mut worker = launcher.launch().await.unwrap();
    assert_eq!(
        worker.memory_limit_mb, 96,
        "the limit the worker got is reported"
    );
    // The worker is the launcher's child, not ours.
    assert_eq!(
        test_support::worker_launcher::proc_status(worker.pid, "PPid"),
        launcher.child.id().to_string()
    );
    worker.ready().await;
    let done = worker
        .run("async function main() { return { sum: 1 + 2, s: 'ok' } }")
        .await;
    assert!(done.error.is_none(), "{:?}", done.error);
    assert_eq!(done.response, json!({ "sum": 3, "s": "ok" }));
    // A second job on the same worker: the pipes stay usable.
    let done = worker.run("function main() { return 7 }").await;
    assert_eq!(done.response, json!(7));
    // Closing stdin ends the worker normally; the launcher reports its exit code.
    worker.stdin.take();
    let exit = tokio::time::timeout(PATIENCE, worker.connection().wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(exit, WorkerExit::Code(0));
    wait_gone(worker.pid).await;
}

#[tokio::test]
async fn an_endless_action_is_killed_through_the_launcher_and_the_next_one_runs() {
    let dir = tempfile::tempdir().unwrap();
    let launcher = Launcher::dev(dir.path(), &["--memory-limit-mb", "64"]);
    let mut worker = launcher.launch().await.unwrap();
    worker.ready().await;
    worker
        .start("async function main() { while (true) {} }")
        .await;
    // The appliance's deadline: no `done` comes, so it kills the worker.
    assert!(
        tokio::time::timeout(Duration::from_millis(300), worker.recv())
            .await
            .is_err(),
        "an endless loop finished"
    );
    assert!(alive(worker.pid));
    worker.connection().kill().unwrap();
    let exit = tokio::time::timeout(PATIENCE, worker.connection().wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(exit, WorkerExit::Signal(9), "killed with SIGKILL");
    wait_gone(worker.pid).await;
    // The launcher serves the next one normally.
    let mut next = launcher.launch().await.unwrap();
    next.ready().await;
    assert_eq!(
        next.run("function main() { return 'next' }").await.response,
        json!("next")
    );
}

#[tokio::test]
async fn running_out_of_memory_is_reported_as_the_signal_that_ended_the_worker() {
    let dir = tempfile::tempdir().unwrap();
    let launcher = Launcher::dev(dir.path(), &["--memory-limit-mb", "64"]);
    let mut worker = launcher.launch().await.unwrap();
    worker.ready().await;
    // The end-to-end test's allocation bomb (tests/e2e/execution.rs), which the pool
    // reports as `memory` because the worker dies of SIGABRT/SIGSEGV.
    worker
        .start("async function main() { const a = []; while (true) { a.push('x'.repeat(1 << 20) + a.length); } }")
        .await;
    let frame = tokio::time::timeout(PATIENCE, worker.recv()).await.unwrap();
    assert!(
        frame.is_none(),
        "the worker answered instead of dying: {frame:?}"
    );
    let exit = tokio::time::timeout(PATIENCE, worker.connection().wait())
        .await
        .unwrap()
        .unwrap();
    let WorkerExit::Signal(signal) = exit else {
        panic!("expected a signal, got {exit:?}");
    };
    assert!(matches!(signal, 6 | 11), "signal {signal}");
    // What the pool looks at: the status converted back.
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(exit.to_status().signal(), Some(signal));
}

#[tokio::test]
async fn the_max_workers_bound_refuses_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let launcher = Launcher::dev(
        dir.path(),
        &["--memory-limit-mb", "64", "--max-workers", "2"],
    );
    let mut first = launcher.launch().await.unwrap();
    let mut second = launcher.launch().await.unwrap();
    first.ready().await;
    second.ready().await;
    match launcher.launch().await {
        Err(LaunchError::Refused { reason, message }) => {
            assert_eq!(reason, Refusal::Busy);
            assert!(message.contains("maximum of 2 workers"), "{message}");
            assert!(message.contains("--max-workers"), "{message}");
        }
        Ok(w) => panic!("a third worker started (pid {})", w.pid),
        Err(other) => panic!("unexpected error {other}"),
    }
    // A slot freed (its worker reaped) is usable again.
    first.connection().kill().unwrap();
    first.connection().wait().await.unwrap();
    let mut third = launcher.launch().await.unwrap();
    third.ready().await;
    assert_eq!(
        third.run("function main() { return 3 }").await.response,
        json!(3)
    );
}

#[tokio::test]
async fn closing_the_connection_kills_the_worker() {
    let dir = tempfile::tempdir().unwrap();
    let launcher = Launcher::dev(dir.path(), &["--memory-limit-mb", "64"]);
    let mut worker = launcher.launch().await.unwrap();
    worker.ready().await;
    let pid = worker.pid;
    assert!(alive(pid));
    // Keep its stdin open (so it is not the end of stdin that ends it) and drop only the
    // connection, as an appliance that crashed or dropped the worker would.
    drop(worker.connection.take());
    wait_gone(pid).await;
    assert!(worker.stdin.is_some());
}

#[tokio::test]
async fn a_worker_that_ends_by_itself_is_reported_with_its_code() {
    let dir = tempfile::tempdir().unwrap();
    let launcher = Launcher::dev(dir.path(), &["--memory-limit-mb", "64"]);
    let mut worker = launcher.launch().await.unwrap();
    worker.ready().await;
    // A frame the worker cannot parse: it ends with status 2 (protocol violation).
    let stdin = worker.stdin.as_mut().unwrap();
    use tokio::io::AsyncWriteExt as _;
    stdin
        .write_all(&[0, 0, 0, 3, b'x', b'y', b'z'])
        .await
        .unwrap();
    let exit = tokio::time::timeout(PATIENCE, worker.connection().wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(exit, WorkerExit::Code(2));
}

#[test]
fn malformed_and_foreign_requests_are_refused_and_a_good_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let launcher = Launcher::dev(dir.path(), &["--memory-limit-mb", "64"]);
    let refused = |request: &[u8]| match client::raw_exchange(&launcher.socket, request) {
        Ok(Response::Refused { reason, message }) => (reason, message),
        other => panic!("expected a refusal for {request:?}, got {other:?}"),
    };
    let (reason, message) = refused(&[0, 0, 0, 2, 9, 1]);
    assert_eq!(reason, Refusal::UnsupportedVersion);
    assert!(message.contains("version 9"), "{message}");
    let (reason, message) = refused(&[0, 1, 0, 0, 1, 1]);
    assert_eq!(reason, Refusal::BadRequest);
    assert!(message.contains("65536"), "{message}");
    let (reason, _) = refused(&[0, 0, 0, 2, 1, 0x55]);
    assert_eq!(reason, Refusal::BadRequest);
    // Positive control: the well-formed request through the same path starts a worker.
    match client::raw_exchange(
        &launcher.socket,
        &protocol::encode_request(protocol::Request::Spawn),
    ) {
        Ok(Response::Spawned {
            memory_limit_mb, ..
        }) => assert_eq!(memory_limit_mb, 64),
        other => panic!("expected Spawned, got {other:?}"),
    }
}

#[test]
fn the_memory_limit_comes_from_the_appliance_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("appliance.toml");
    std::fs::write(
        &config,
        "[actions]\nmemory_limit_mb = 80\ntimeout_ms = 1000\n",
    )
    .unwrap();
    let launcher = Launcher::dev(
        dir.path(),
        &["--appliance-config", config.to_str().unwrap()],
    );
    match client::raw_exchange(
        &launcher.socket,
        &protocol::encode_request(protocol::Request::Spawn),
    ) {
        Ok(Response::Spawned {
            memory_limit_mb, ..
        }) => assert_eq!(memory_limit_mb, 80),
        other => panic!("expected Spawned, got {other:?}"),
    }
}

/// `--exit-with-parent --parent-pid P` (how `appliance dev` starts the launcher): a
/// launcher whose supervisor died before it looked stops by itself, and one whose named
/// parent is its real parent keeps serving (control).
#[tokio::test]
async fn a_launcher_whose_supervisor_is_already_gone_stops() {
    let dir = tempfile::tempdir().unwrap();
    let own_pid = std::process::id().to_string();
    let mut kept = Launcher::dev(
        dir.path(),
        &[
            "--memory-limit-mb",
            "96",
            "--exit-with-parent",
            "--parent-pid",
            &own_pid,
        ],
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        kept.child.try_wait().unwrap().is_none(),
        "the launcher stopped although its parent lives"
    );
    let mut worker = kept.launch().await.unwrap();
    worker.ready().await;

    let socket = dir.path().join("orphan.sock");
    let mut orphan = std::process::Command::new(env!("CARGO_BIN_EXE_worker-launcher"))
        .arg("--socket")
        .arg(&socket)
        .arg("--worker-binary")
        .arg(test_support::worker_launcher::action_worker())
        .arg("--worker-cwd")
        .arg(dir.path())
        .args(["--memory-limit-mb", "96", "--allow-same-uid-dev"])
        .args(["--exit-with-parent", "--parent-pid", "1"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = orphan.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = orphan.kill();
            let _ = orphan.wait();
            break None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.is_some(), "the launcher outlived its supervisor");
    assert!(!socket.exists(), "a stopped launcher removes its socket");
}
