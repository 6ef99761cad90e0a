//! The point of the launcher: workers run under the launcher's uid (10003 in the image)
//! with no supplementary groups, so the keyservice socket and the appliance's data are
//! not theirs to open, whatever becomes of the in-process sandbox.
//!
//! Needs root (to start the launcher as another uid, as the container engine does); as
//! any other user each test says it is skipped and why.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use test_support::binaries::bin_dir;
use test_support::worker_launcher::{Driven, Launcher, PATIENCE, action_worker, proc_status};
use tokio::io::AsyncReadExt as _;
use worker_launcher::client::LaunchError;
use worker_launcher::protocol::Refusal;

const WORKERS_UID: u32 = 10003;
const KEYSERVICE_GID: u32 = 10001;
const APPLIANCE_UID: u32 = 10002;

fn is_root() -> bool {
    if rustix::process::getuid().is_root() {
        return true;
    }
    eprintln!("SKIPPED: this test starts the launcher under uid {WORKERS_UID} and needs root");
    false
}

/// A directory the workers' uid can reach, holding copies of the binaries (the target
/// directory may be under a home directory it cannot enter), a socket directory the
/// launcher owns, and a worker directory with the two things workers must not open.
struct Scene {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    _keyservice: std::os::unix::net::UnixListener,
}

impl Scene {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        chmod(&root, 0o755);
        let bin = root.join("bin");
        std::fs::create_dir(&bin).unwrap();
        chmod(&bin, 0o755);
        for (name, from) in [
            (
                "worker-launcher",
                PathBuf::from(env!("CARGO_BIN_EXE_worker-launcher")),
            ),
            ("action-worker", action_worker()),
            ("uid_probe", bin_dir().join("examples").join("uid_probe")),
        ] {
            let to = bin.join(name);
            std::fs::copy(&from, &to).unwrap_or_else(|e| {
                panic!("copy {}: {e} (cargo test builds examples)", from.display())
            });
            chmod(&to, 0o755);
        }
        let run = root.join("run");
        std::fs::create_dir(&run).unwrap();
        std::os::unix::fs::chown(&run, Some(WORKERS_UID), Some(WORKERS_UID)).unwrap();
        chmod(&run, 0o700);
        // The worker directory, root's, holding a stand-in keyservice socket (root:10001
        // 0660, as the keyservice makes it) and a stand-in of the appliance's data
        // (10002:10002 0600).
        let cwd = root.join("cwd");
        std::fs::create_dir(&cwd).unwrap();
        chmod(&cwd, 0o755);
        let socket = cwd.join("ks.sock");
        let keyservice = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        std::os::unix::fs::chown(&socket, Some(0), Some(KEYSERVICE_GID)).unwrap();
        chmod(&socket, 0o660);
        let state = cwd.join("state");
        std::fs::write(&state, b"sealed").unwrap();
        std::os::unix::fs::chown(&state, Some(APPLIANCE_UID), Some(APPLIANCE_UID)).unwrap();
        chmod(&state, 0o600);
        Self {
            _tmp: tmp,
            root,
            _keyservice: keyservice,
        }
    }

    fn socket(&self, name: &str) -> PathBuf {
        self.root.join("run").join(name)
    }

    /// The launcher under `uid:gid` (no supplementary groups: std drops them when a uid
    /// is set), starting `worker`, accepting `peer_uid`.
    fn command(&self, uid: u32, gid: u32, worker: &str, peer_uid: u32, socket: &Path) -> Command {
        let mut cmd = Command::new(self.root.join("bin/worker-launcher"));
        cmd.uid(uid)
            .gid(gid)
            .arg("--socket")
            .arg(socket)
            .arg("--worker-binary")
            .arg(self.root.join("bin").join(worker))
            .arg("--worker-cwd")
            .arg(self.root.join("cwd"))
            .args(["--memory-limit-mb", "64", "--peer-uid"])
            .arg(peer_uid.to_string());
        cmd
    }

    fn launcher(&self, uid: u32, gid: u32, worker: &str, peer_uid: u32, name: &str) -> Launcher {
        let socket = self.socket(name);
        Launcher::start(self.command(uid, gid, worker, peer_uid, &socket), socket)
    }
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[tokio::test]
async fn workers_run_as_the_launcher_uid_with_no_supplementary_groups() {
    if !is_root() {
        return;
    }
    let scene = Scene::new();
    let launcher = scene.launcher(WORKERS_UID, WORKERS_UID, "action-worker", 0, "a.sock");
    let lpid = launcher.child.id();
    assert!(proc_status(lpid, "Uid").starts_with(&format!("{WORKERS_UID}\t")));
    assert_eq!(proc_status(lpid, "Groups"), "");
    let mut worker = launcher.launch().await.unwrap();
    worker.ready().await;
    let uids = proc_status(worker.pid, "Uid");
    let expected = vec![WORKERS_UID.to_string(); 4];
    assert_eq!(
        uids.split_whitespace().collect::<Vec<_>>(),
        expected,
        "real, effective, saved and filesystem uid"
    );
    let gids = proc_status(worker.pid, "Gid");
    assert_eq!(gids.split_whitespace().collect::<Vec<_>>(), expected);
    assert_eq!(
        proc_status(worker.pid, "Groups"),
        "",
        "no supplementary groups"
    );
    // And it works: the uid changes nothing about running actions.
    let done = worker.run("function main() { return 40 + 2 }").await;
    assert_eq!(done.response, serde_json::json!(42));
}

/// The probe reads its one line from the handed-over stdout.
async fn probe_line(worker: &mut Driven) -> String {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while tokio::time::timeout(PATIENCE, worker.stdout.read_exact(&mut byte))
        .await
        .unwrap()
        .is_ok()
    {
        if byte[0] == b'\n' {
            break;
        }
        line.push(byte[0]);
    }
    String::from_utf8(line).unwrap()
}

#[tokio::test]
async fn without_any_sandbox_the_workers_uid_cannot_open_the_keyservice_socket_or_data() {
    if !is_root() {
        return;
    }
    let scene = Scene::new();
    // The probe stands in for a worker whose seccomp and Landlock layers failed: it only
    // has the credentials the launcher gave it.
    let launcher = scene.launcher(WORKERS_UID, WORKERS_UID, "uid_probe", 0, "p.sock");
    let mut probe = launcher.launch().await.unwrap();
    let line = probe_line(&mut probe).await;
    assert_eq!(
        line,
        format!(
            "uid={WORKERS_UID} gid={WORKERS_UID} groups=[] connect=denied(permission denied) open=denied(permission denied)"
        )
    );
    // Positive control: the same launch path under the keyservice's group as primary gid
    // reaches the socket, so the denial above is the uid's, not a broken probe.
    let control = scene.launcher(WORKERS_UID, KEYSERVICE_GID, "uid_probe", 0, "c.sock");
    let mut probe = control.launch().await.unwrap();
    let line = probe_line(&mut probe).await;
    assert!(
        line.contains("connect=ok") && line.contains("open=denied"),
        "{line}"
    );
}

#[tokio::test]
async fn only_the_named_peer_uid_may_ask_for_workers() {
    if !is_root() {
        return;
    }
    let scene = Scene::new();
    // The test runs as root; a launcher that accepts only uid 4242 refuses it.
    let launcher = scene.launcher(WORKERS_UID, WORKERS_UID, "action-worker", 4242, "r.sock");
    match launcher.launch().await {
        Err(LaunchError::Refused { reason, message }) => {
            assert_eq!(reason, Refusal::PeerNotAllowed);
            assert!(message.contains("uid 0"), "{message}");
        }
        Ok(w) => panic!("a worker started for a foreign peer (pid {})", w.pid),
        Err(other) => panic!("unexpected error {other}"),
    }
    // A worker (same uid as the launcher) is refused too: without the development flag
    // the launcher's own uid is not a peer. Shown from a process of that uid (the probe
    // in its client role).
    let same_uid = scene.launcher(WORKERS_UID, WORKERS_UID, "action-worker", 0, "s.sock");
    let out = Command::new(scene.root.join("bin/uid_probe"))
        .uid(WORKERS_UID)
        .gid(WORKERS_UID)
        .arg("--ask-launcher")
        .arg(&same_uid.socket)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "peer not allowed: uid {WORKERS_UID} may not ask for workers"
        )),
        "stdout {text:?}, stderr {:?}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Positive control: the named peer (root, here) gets a worker from the same launcher.
    let mut worker = same_uid.launch().await.unwrap();
    worker.ready().await;
}

#[test]
fn the_launcher_refuses_root_and_supplementary_groups_without_the_development_flag() {
    if !is_root() {
        return;
    }
    let scene = Scene::new();
    let socket = scene.socket("x.sock");
    // As root.
    let out = Command::new(scene.root.join("bin/worker-launcher"))
        .arg("--socket")
        .arg(&socket)
        .args(["--memory-limit-mb", "64", "--peer-uid", "10002"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("refusing to run as uid 0"), "{log}");
    // As the workers' uid with a supplementary group (the keyservice's).
    let out = Command::new("setpriv")
        .args([
            "--reuid", "10003", "--regid", "10003", "--groups", "10001", "--",
        ])
        .arg(scene.root.join("bin/worker-launcher"))
        .arg("--socket")
        .arg(&socket)
        .args(["--memory-limit-mb", "64", "--peer-uid", "10002"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("supplementary groups [10001]"), "{log}");
    assert!(!socket.exists(), "nothing was bound");
    // Positive control: the same uid with no supplementary groups starts and listens.
    let launcher = scene.launcher(WORKERS_UID, WORKERS_UID, "action-worker", 10002, "x.sock");
    assert!(launcher.socket.exists());
}
