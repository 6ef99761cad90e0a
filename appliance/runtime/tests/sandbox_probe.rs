//! The lock-down probe. This test program starts itself as a child that applies
//! `action_runtime::lockdown::apply` (the function `action-worker` calls before its first
//! job) and then tries what code escaping the interpreter would try: read `/etc/passwd`
//! and the parent's environment, connect to a Unix and a TCP socket the test made, fork,
//! start a thread, spawn and execve a program; and the system calls of a memory-corruption
//! exploit's next step: executable memory (`mmap`/`mprotect` with `PROT_EXEC`), another
//! process's memory (`ptrace`, `process_vm_readv`), and the kernel surfaces exploits favour
//! (`userfaultfd`, `io_uring_setup`, `perf_event_open`, `personality`). Each attempt must
//! fail (the system calls with `EPERM`, the seccomp filter's answer: a descriptor limit
//! or Landlock would say otherwise); in a control run without the lock-down each must
//! succeed, so a lock-down that stopped working fails the test. (A host may itself refuse
//! `userfaultfd`, `io_uring_setup` or `perf_event_open` — a sysctl, a container's seccomp
//! profile — then the control run says so and the lock-down run alone decides.) The
//! attempts live only here, never in the worker.
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
    "mmap PROT_EXEC",
    "mprotect PROT_EXEC",
    "ptrace",
    "process_vm_readv",
    "userfaultfd",
    "io_uring_setup",
    "perf_event_open",
    "personality",
    "spawn",
    "execve",
];

/// The attempts that are one system call each: under the lock-down each must fail with
/// `EPERM` (os error 1), the seccomp filter's refusal.
const SYSCALLS: &[&str] = &[
    "mmap PROT_EXEC",
    "mprotect PROT_EXEC",
    "ptrace",
    "process_vm_readv",
    "userfaultfd",
    "io_uring_setup",
    "perf_event_open",
    "personality",
];

/// Attempts a host may refuse by itself (sysctls such as `kernel.io_uring_disabled` or
/// `kernel.perf_event_paranoid`, a container runtime's seccomp profile).
const HOST_MAY_REFUSE: &[&str] = &["userfaultfd", "io_uring_setup", "perf_event_open"];

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
        if HOST_MAY_REFUSE.contains(attempt)
            && control
                .get(*attempt)
                .is_some_and(|o| o.starts_with("denied"))
        {
            eprintln!(
                "sandbox_probe: this host refuses {attempt} by itself ({}); only the lock-down run checks it",
                control[*attempt]
            );
            continue;
        }
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
        if SYSCALLS.contains(attempt) {
            assert!(
                outcome.contains("(os error 1)"),
                "locked down: {attempt} should be refused by seccomp (EPERM); got {outcome:?}"
            );
        }
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
    syscalls(ppid);
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

/// The result of a raw system call: its value, or the error `errno` names.
fn checked(rc: libc::c_long) -> Result<libc::c_long, String> {
    if rc == -1 {
        Err(std::io::Error::last_os_error().to_string())
    } else {
        Ok(rc)
    }
}

/// Closes a descriptor a successful attempt created.
fn close(fd: libc::c_long) {
    // SAFETY: `fd` was just returned by the kernel to this process and nothing else owns it.
    unsafe { libc::close(fd as libc::c_int) };
}

/// The single-system-call attempts (`SYSCALLS`), in order.
fn syscalls(ppid: u32) {
    const PAGE: usize = 4096;
    let anonymous = |prot: libc::c_int| {
        // SAFETY: a fresh private anonymous page; nothing else refers to it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE,
                prot,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            Err(std::io::Error::last_os_error().to_string())
        } else {
            Ok(p)
        }
    };
    // SAFETY (both unmaps): the page was mapped above and is not used afterwards.
    report(
        "mmap PROT_EXEC",
        anonymous(libc::PROT_READ | libc::PROT_EXEC).map(|p| unsafe {
            libc::munmap(p, PAGE);
        }),
    );
    report(
        "mprotect PROT_EXEC",
        anonymous(libc::PROT_READ | libc::PROT_WRITE)
            .map_err(|e| format!("mmap without PROT_EXEC: {e}"))
            .and_then(|p| {
                // SAFETY: changes the protection of the page mapped just above.
                let rc = unsafe { libc::mprotect(p, PAGE, libc::PROT_READ | libc::PROT_EXEC) };
                let result = checked(rc.into()).map(drop);
                unsafe { libc::munmap(p, PAGE) };
                result
            }),
    );
    // PTRACE_PEEKDATA on the parent, which this process does not trace: a kernel that is
    // reached answers ESRCH (counted as reached); the lock-down answers EPERM first.
    let mut word: libc::c_long = 0;
    // SAFETY: the raw PEEKDATA writes one word to `word`, which lives across the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_ptrace,
            libc::PTRACE_PEEKDATA,
            ppid as libc::pid_t,
            0usize,
            &mut word as *mut libc::c_long,
        )
    };
    let errno = std::io::Error::last_os_error();
    report(
        "ptrace",
        if rc == 0 || errno.raw_os_error() == Some(libc::ESRCH) {
            Ok(())
        } else {
            Err(errno.to_string())
        },
    );
    let source = [7u8; 8];
    let mut copy = [0u8; 8];
    let local = libc::iovec {
        iov_base: copy.as_mut_ptr().cast(),
        iov_len: copy.len(),
    };
    let remote = libc::iovec {
        iov_base: source.as_ptr() as *mut libc::c_void,
        iov_len: source.len(),
    };
    // SAFETY: reads 8 bytes of this process's own `source` into `copy`, both live.
    let rc = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    report(
        "process_vm_readv",
        checked(rc as libc::c_long).and_then(|_| {
            (copy == source)
                .then_some(())
                .ok_or_else(|| "read other bytes".to_owned())
        }),
    );
    /// `UFFD_USER_MODE_ONLY`: what an unprivileged process may ask for (Linux 5.11).
    const UFFD_USER_MODE_ONLY: libc::c_int = 1;
    // SAFETY: integer flags only; the descriptor is closed at once.
    let rc = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | UFFD_USER_MODE_ONLY) };
    report("userfaultfd", checked(rc).map(close));
    // `struct io_uring_params` is 120 bytes; all zero asks for the defaults.
    let mut params = [0u8; 120];
    // SAFETY: the kernel reads and fills `params`, which is large enough and lives across
    // the call; the ring's descriptor is closed at once (its mappings were never made).
    let rc = unsafe { libc::syscall(libc::SYS_io_uring_setup, 1u32, params.as_mut_ptr()) };
    report("io_uring_setup", checked(rc).map(close));
    // `struct perf_event_attr`, version 0 (64 bytes): a software task clock of this
    // process, user space only (allowed at `perf_event_paranoid` 2), created disabled.
    let mut attr = [0u8; 64];
    attr[0..4].copy_from_slice(&1u32.to_ne_bytes()); // type: PERF_TYPE_SOFTWARE
    attr[4..8].copy_from_slice(&64u32.to_ne_bytes()); // size: PERF_ATTR_SIZE_VER0
    attr[8..16].copy_from_slice(&1u64.to_ne_bytes()); // config: PERF_COUNT_SW_TASK_CLOCK
    let flags: u64 = 1 | 1 << 5 | 1 << 6; // disabled, exclude_kernel, exclude_hv
    attr[40..48].copy_from_slice(&flags.to_ne_bytes());
    /// `PERF_FLAG_FD_CLOEXEC`.
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
    // SAFETY: the kernel reads `attr` (its stated size); the descriptor is closed at once.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_ptr(),
            0 as libc::pid_t,
            -1 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    report("perf_event_open", checked(rc).map(close));
    // 0xffffffff only asks for the current persona and changes nothing.
    // SAFETY: an integer argument only.
    let rc = unsafe { libc::personality(0xffff_ffff) };
    report("personality", checked(rc.into()).map(drop));
}
