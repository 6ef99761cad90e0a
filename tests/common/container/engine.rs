//! A private Docker engine for one test: `dockerd` (Debian's `docker.io`, which
//! `scripts/setup` installs as root) started on its own socket, data root and exec root in
//! a temporary directory, with `--iptables=false --bridge=none` (no host firewall rules,
//! no default bridge; user-defined networks still work), and taken down completely when
//! dropped — also when the test fails: every container removed, the daemon stopped, what
//! it left mounted unmounted, the directory deleted.
//!
//! Where no engine can run, [`Engine::start`] says why ([`Unavailable`]), and the test
//! prints `SKIPPED: …` and passes:
//! * not root (dockerd needs it), or no `dockerd` / `docker` binary;
//! * `APPLIANCE_CONTAINER_TEST=skip` is set (an explicit opt-out, also printed);
//! * the daemon does not come up (a kernel or sandbox that refuses it): the message
//!   carries the end of its log.
//!
//! `APPLIANCE_CONTAINER_TEST=require` turns the last case into a failure, for a machine
//! where the engine is known to run (this project's development machines: there a
//! daemon that does not start is a regression a skip would hide).

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Why no engine runs here (the test prints it and passes).
#[derive(Debug)]
pub struct Unavailable(pub String);

/// A running private `dockerd`, taken down when dropped.
pub struct Engine {
    dir: Option<tempfile::TempDir>,
    daemon: Option<Child>,
    docker: PathBuf,
    host: String,
}

fn find_binary(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/bin", "/sbin", "/usr/local/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

impl Engine {
    /// Starts a private daemon and waits until it answers; [`Unavailable`] (with the end
    /// of its log) when it does not come up, a panic instead under
    /// `APPLIANCE_CONTAINER_TEST=require`.
    pub fn start() -> Result<Self, Unavailable> {
        if std::env::var("APPLIANCE_CONTAINER_TEST").as_deref() == Ok("skip") {
            return Err(Unavailable(
                "APPLIANCE_CONTAINER_TEST=skip is set (explicit opt-out)".into(),
            ));
        }
        if effective_uid() != Some(0) {
            return Err(Unavailable(
                "not root: the test starts its own dockerd, which needs root".into(),
            ));
        }
        let Some(dockerd) = find_binary("dockerd") else {
            return Err(Unavailable(
                "dockerd is not installed (as root, scripts/setup installs Debian's docker.io)"
                    .into(),
            ));
        };
        let Some(docker) = find_binary("docker") else {
            return Err(Unavailable(
                "the docker client is not installed (as root, scripts/setup installs Debian's docker.io)"
                    .into(),
            ));
        };
        // Short: the daemon's and containerd's Unix sockets live under it (108-byte limit).
        let dir = tempfile::Builder::new()
            .prefix("dk")
            .tempdir_in("/tmp")
            .expect("temporary directory for dockerd");
        let root = dir.path();
        let socket = root.join("d.sock");
        let host = format!("unix://{}", socket.display());
        let log = std::fs::File::create(root.join("dockerd.log")).expect("dockerd log");
        let daemon = Command::new(&dockerd)
            .args(["--iptables=false", "--bridge=none", "--data-root"])
            .arg(root.join("r"))
            .arg("--exec-root")
            .arg(root.join("x"))
            .arg("--pidfile")
            .arg(root.join("pid"))
            .args(["-H", &host])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dockerd log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|err| panic!("cannot run {}: {err}", dockerd.display()));
        let mut engine = Self {
            dir: Some(dir),
            daemon: Some(daemon),
            docker,
            host,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let version = engine.docker(&["version", "--format", "{{.Server.Version}}"]);
            if version.status.success() {
                return Ok(engine);
            }
            let exited = engine
                .daemon
                .as_mut()
                .and_then(|child| child.try_wait().ok().flatten());
            if exited.is_some() || Instant::now() > deadline {
                let why = exited.map_or("no answer within 60 s".to_owned(), |s| s.to_string());
                let log = engine.daemon_log();
                if std::env::var("APPLIANCE_CONTAINER_TEST").as_deref() == Ok("require") {
                    panic!(
                        "dockerd did not start ({why}) and APPLIANCE_CONTAINER_TEST=require \
                         is set. Its log:\n{log}"
                    );
                }
                let tail: Vec<&str> = log.lines().rev().take(5).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                return Err(Unavailable(format!(
                    "dockerd did not start on this machine ({why}; set \
                     APPLIANCE_CONTAINER_TEST=require to make that a failure); the end of its \
                     log: {}",
                    tail.join(" | ")
                )));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The temporary directory (the daemon's state is under it).
    pub fn dir(&self) -> &Path {
        self.dir
            .as_ref()
            .map_or(Path::new("/nonexistent"), |d| d.path())
    }

    /// The last lines of the daemon's log.
    pub fn daemon_log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = std::fs::File::open(self.dir().join("dockerd.log")) {
            let _ = file.read_to_string(&mut text);
        }
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Runs `docker ARGS` against this daemon.
    pub fn docker(&self, args: &[&str]) -> Output {
        self.try_docker(args)
            .unwrap_or_else(|err| panic!("cannot run {}: {err}", self.docker.display()))
    }

    fn try_docker(&self, args: &[&str]) -> std::io::Result<Output> {
        Command::new(&self.docker)
            .args(args)
            .env("DOCKER_HOST", &self.host)
            .env_remove("DOCKER_CONTEXT")
            .stdin(Stdio::null())
            .output()
    }

    /// Runs `docker ARGS` and returns its trimmed standard output; panics with its
    /// standard error when it fails.
    pub fn docker_ok(&self, args: &[&str]) -> String {
        let out = self.docker(args);
        assert!(
            out.status.success(),
            "docker {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// The logs of every container (for failure messages).
    pub fn all_logs(&self) -> String {
        let names = self.docker(&["ps", "-a", "--format", "{{.Names}}"]);
        let mut text = String::new();
        for name in String::from_utf8_lossy(&names.stdout).lines() {
            let out = self.docker(&["logs", "--tail", "40", name]);
            text.push_str(&format!(
                "--- {name}:\n{}{}\n",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        text
    }

    fn unmount_leftovers(&self) {
        let Some(dir) = self.dir.as_ref().map(|d| d.path().to_owned()) else {
            return;
        };
        let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
            return;
        };
        let prefix = dir.to_string_lossy().into_owned();
        let mut points: Vec<&str> = info
            .lines()
            .filter_map(|line| line.split(' ').nth(4))
            .filter(|point| point.starts_with(&prefix))
            .collect();
        // Deepest first.
        points.sort_by_key(|p| std::cmp::Reverse(p.len()));
        for point in points {
            let _ = Command::new("umount")
                .args(["-l", point])
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Containers first (they hold the mounts), then the daemon.
        // (Nothing here may panic: it also runs while a failed test unwinds.)
        let ids = self
            .try_docker(&["ps", "-aq"])
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
            .unwrap_or_default();
        let ids: Vec<&str> = ids.split_whitespace().collect();
        if !ids.is_empty() {
            let mut args = vec!["rm", "-f", "-v"];
            args.extend(ids);
            let _ = self.try_docker(&args);
        }
        let _ = self.try_docker(&["volume", "prune", "-f"]);
        let _ = self.try_docker(&["network", "prune", "-f"]);
        if let Some(mut daemon) = self.daemon.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &daemon.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                match daemon.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    _ => {
                        let _ = daemon.kill();
                        let _ = daemon.wait();
                        break;
                    }
                }
            }
        }
        self.unmount_leftovers();
        if let Some(dir) = self.dir.take() {
            let path = dir.path().to_owned();
            if dir.close().is_err() {
                // Anything still busy: try once more after the lazy unmounts settle.
                std::thread::sleep(Duration::from_millis(500));
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }
}
