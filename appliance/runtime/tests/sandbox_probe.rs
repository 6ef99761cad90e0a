//! The lock-down probe. This test program starts itself as a child that applies
//! `action_runtime::lockdown::apply` (the function `action-worker` calls before its first
//! job) and then tries what code escaping the interpreter would try: read `/etc/passwd`
//! and the parent's environment, connect to a Unix and a TCP socket the test made, fork,
//! start a thread, spawn and execve a program. Each attempt must fail; in a control run
//! without the lock-down each must succeed, so a lock-down that stopped working fails the
//! test. The attempts live only here, never in the worker.
//!
//! (`harness = false`: the program is both the test and the probe.)

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    unsafe_code
)]

use std::collections::BTreeMap;
use std::io::Read as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The attempts, in the order the probe makes them (`execve` last: it replaces the probe).
const ATTEMPTS: &[&str] = &[
    "open /etc/passwd",
    "read /proc/<ppid>/environ",
    "connect unix",
    "connect tcp",
    "fork",
    "thread",
    "spawn",
    "execve",
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("--probe") => probe(&args[2..]),
        Some("--exec-marker") => println!("execve: ok"),
        _ => {
            run_tests();
            println!("sandbox_probe: ok");
        }
    }
}

fn run_tests() {
    let dir = std::env::temp_dir().join(format!("sandbox-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("probe.sock");
    let _ = std::fs::remove_file(&socket);
    let unix = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let tcp_addr = tcp.local_addr().unwrap().to_string();

    let control = run_probe(&socket, &tcp_addr, false);
    for attempt in ATTEMPTS {
        assert_eq!(
            control.get(*attempt).map(String::as_str),
            Some("ok"),
            "control run (no lock-down): {attempt} should succeed; got {control:#?}"
        );
    }

    let locked = run_probe(&socket, &tcp_addr, true);
    eprintln!("sandbox_probe: {}", locked.get("report").unwrap());
    for attempt in ATTEMPTS {
        let outcome = locked
            .get(*attempt)
            .unwrap_or_else(|| panic!("locked probe did not report {attempt}: {locked:#?}"));
        assert!(
            outcome.starts_with("denied"),
            "locked down: {attempt} should fail; got {outcome:?}"
        );
        eprintln!("sandbox_probe: {attempt}: {outcome}");
    }
    drop((unix, tcp));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs the probe child and returns its `attempt: outcome` lines.
fn run_probe(socket: &Path, tcp_addr: &str, lock_down: bool) -> BTreeMap<String, String> {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.arg("--probe")
        .arg(socket)
        .arg(tcp_addr)
        .arg(if lock_down { "lock-down" } else { "control" })
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "probe ({}) failed: {}\n{stdout}",
        if lock_down { "lock-down" } else { "control" },
        out.status
    );
    stdout
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn report(attempt: &str, result: Result<(), String>) {
    match result {
        Ok(()) => println!("{attempt}: ok"),
        Err(e) => println!("{attempt}: denied ({e})"),
    }
}

fn probe(args: &[String]) {
    let socket = PathBuf::from(&args[0]);
    let tcp_addr = args[1].clone();
    let exe = std::env::current_exe().unwrap();
    if args[2] == "lock-down" {
        let r = action_runtime::lockdown::apply().expect("lock-down");
        println!("report: {r:?}");
    } else {
        println!("report: none (control)");
    }

    report(
        "open /etc/passwd",
        std::fs::File::open("/etc/passwd")
            .and_then(|mut f| f.read_to_string(&mut String::new()))
            .map(drop)
            .map_err(|e| e.to_string()),
    );
    let ppid = std::os::unix::process::parent_id();
    report(
        "read /proc/<ppid>/environ",
        std::fs::read(format!("/proc/{ppid}/environ"))
            .map_err(|e| e.to_string())
            .and_then(|env| {
                // cargo runs tests with a non-empty environment (PATH, CARGO_*).
                if env.is_empty() {
                    Err("empty".to_owned())
                } else {
                    Ok(())
                }
            }),
    );
    report(
        "connect unix",
        std::os::unix::net::UnixStream::connect(&socket)
            .map(drop)
            .map_err(|e| e.to_string()),
    );
    report(
        "connect tcp",
        std::net::TcpStream::connect(&tcp_addr)
            .map(drop)
            .map_err(|e| e.to_string()),
    );
    // SAFETY: the child only calls _exit; the parent reaps it.
    let pid = unsafe { libc::fork() };
    report(
        "fork",
        match pid {
            -1 => Err(std::io::Error::last_os_error().to_string()),
            0 => unsafe { libc::_exit(0) },
            pid => {
                let mut status = 0;
                // SAFETY: waits for the child forked above.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                Ok(())
            }
        },
    );
    report(
        "thread",
        std::thread::Builder::new()
            .spawn(|| ())
            .map_err(|e| e.to_string())
            .and_then(|h| h.join().map_err(|_| "panicked".to_owned())),
    );
    report(
        "spawn",
        Command::new(&exe)
            .arg("--exec-marker")
            .stdout(Stdio::null())
            .status()
            .map_err(|e| e.to_string())
            .and_then(|s| s.success().then_some(()).ok_or(s.to_string())),
    );
    // On success this process becomes the marker, which prints "execve: ok".
    let err = Command::new(&exe).arg("--exec-marker").exec();
    report("execve", Err(err.to_string()));
}
