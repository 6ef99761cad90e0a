//! The worker's lock-down: what `action-worker` does to itself after start-up and before it
//! reads its first job, so that a memory-safety bug in the interpreter leaves an attacker a
//! process that can compute and talk to its parent over its pipes, and nothing else.
//!
//! # Layers, in the order [`apply`] sets them
//! 1. `PR_SET_NO_NEW_PRIVS` (no privilege gain through `execve`, required for an
//!    unprivileged seccomp filter) and `PR_SET_DUMPABLE 0` (no core file, and other
//!    processes of the same uid can neither `ptrace` the worker nor read its `/proc` files).
//! 2. Supplementary groups dropped (`setgroups(0)`) where the process holds `CAP_SETGID`;
//!    where it does not, the groups it keeps are named in the startup report (the image
//!    should run workers under a uid without supplementary groups).
//! 3. Capabilities: ambient set cleared, effective, permitted and inheritable sets emptied
//!    (a process may always drop its own), so a worker started by root keeps only root's
//!    uid, not its powers (file permission overrides, raising limits, …).
//! 4. Every descriptor except 0, 1 and 2 closed (`close_range`): the worker talks to its
//!    parent on stdin/stdout and logs to the stderr it was given.
//! 5. Landlock: a ruleset that handles every filesystem right the `landlock` crate knows
//!    (ABI 1 to 10), TCP bind/connect, connecting to abstract Unix sockets and signalling
//!    outside the domain, and grants none of them. Best effort: on a kernel without
//!    Landlock (before Linux 5.13, or not in the `lsm=` list) or with an older ABI, what the
//!    kernel cannot enforce is named in the startup report and the worker runs on.
//! 6. The parent watch thread (exit when the parent dies, even in the middle of an endless
//!    job). It starts here because the seccomp filter forbids creating threads, and after
//!    Landlock so it is in the same domain as the main thread.
//! 7. rlimits (soft = hard): `RLIMIT_NPROC` 0 (no new processes), `RLIMIT_FSIZE` 0 (no file
//!    grows; `SIGXFSZ` is ignored so such a write fails with `EFBIG` instead of killing the
//!    worker), `RLIMIT_CORE` 0, `RLIMIT_NOFILE` 3 (no descriptor beyond the three open
//!    ones). The kernel exempts uid 0 from `RLIMIT_NPROC`; that is reported.
//! 8. A seccomp-bpf allow-list ([`seccomp_filter`], compiled by `seccompiler`, the compiler of
//!    Firecracker, and synchronised to every thread): `read` on fd 0, `write` on fds 1 and 2,
//!    memory management without executable mappings, futex, clocks and sleep, signal
//!    return and masks, `getrandom`, the self-`tgkill` of `abort`, exit (the list and why
//!    each is there: [`seccomp_filter`]). Everything else
//!    (open, socket, connect, execve, fork, clone, ptrace, process_vm_readv, ioctl,
//!    setrlimit, seccomp, userfaultfd, io_uring_setup, perf_event_open, personality, and
//!    `mmap`/`mprotect` asking for `PROT_EXEC`, …) fails with `EPERM`; a syscall of another
//!    architecture kills the process.
//!
//! # Why denials return `EPERM` rather than kill
//! An attacker who controls the worker learns nothing from the error that the allow-list
//! above does not already say, and cannot do more after a refusal than before it. A rare
//! legitimate path that was missed (a libc fallback probing a syscall) then degrades into
//! an ordinary error instead of a dead worker, and the probe test can check each attempt
//! in one process.
//!
//! # What makes the worker refuse to start
//! Failing to set `PR_SET_NO_NEW_PRIVS`, the rlimits, the descriptor closing or the seccomp
//! filter ends the worker (exit status 3). Only Landlock, the supplementary groups and the
//! capabilities degrade, with one startup line each on stderr, because they depend on the
//! kernel's configuration or on privileges the process may not have; seccomp and the
//! rlimits stand on their own. Running as uid 0 is reported too (`RLIMIT_NPROC` does not
//! bind root). The startup lines are written before `RLIMIT_FSIZE` applies.

// The few system calls below have no safe wrapper in std or the crates the worker uses
// (prctl, capset, setgroups, close_range, signal); each block states why it is sound.
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::io::Write as _;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, Ruleset,
    RulesetAttr, RulesetStatus, Scope,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The newest Landlock ABI whose rights the ruleset asks for. Handling a right no rule grants
/// only denies more, so asking for rights the kernel lacks is safe (they are left out).
const LANDLOCK_ABI: ABI = ABI::V10;

/// The ABI from which the startup report calls Landlock fully in force: every filesystem
/// right including truncate and device ioctls, TCP, abstract sockets and signals (Linux
/// 6.12). Newer kernels add rights (Unix socket paths, UDP) that are enforced as well.
const LANDLOCK_BASELINE: ABI = ABI::V6;

/// Descriptors the worker keeps: stdin (jobs and replies), stdout (frames), stderr (log).
const KEPT_FDS: u32 = 3;

/// How often the parent watch thread checks its parent.
const PARENT_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// Failures that stop the worker from starting (exit status 3).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockdownError {
    /// A `prctl` setting failed.
    #[error("prctl({what}): {source}")]
    Prctl {
        /// The setting.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// Closing inherited descriptors failed.
    #[error("closing inherited descriptors: {0}")]
    CloseFds(std::io::Error),
    /// The Landlock ruleset could not be built or applied (an unsupported kernel is not an
    /// error: see [`LandlockState`]).
    #[error("landlock: {0}")]
    Landlock(String),
    /// The parent watch thread could not be started.
    #[error("starting the parent watch thread: {0}")]
    WatchThread(std::io::Error),
    /// An rlimit could not be set.
    #[error("setrlimit({resource}): {source}")]
    Rlimit {
        /// The resource.
        resource: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// The seccomp filter could not be built or installed.
    #[error("seccomp: {0}")]
    Seccomp(String),
}

/// What Landlock enforces for the worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LandlockState {
    /// Every right up to [`LANDLOCK_BASELINE`] is enforced (and those of newer ABIs the
    /// kernel has); `abi` is the kernel's Landlock ABI.
    Full {
        /// The kernel's Landlock ABI version.
        abi: i32,
    },
    /// The kernel's ABI is older than [`LANDLOCK_BASELINE`]: what it has is enforced.
    Partial {
        /// The kernel's Landlock ABI version.
        abi: i32,
    },
    /// Landlock is not available; the reason says why.
    Unavailable(&'static str),
}

/// What [`apply`] could not fully enforce (everything else is in force when it returns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Landlock's state.
    pub landlock: LandlockState,
    /// Supplementary groups the worker still has (no `CAP_SETGID` to drop them).
    pub kept_groups: Vec<u32>,
    /// Why the capability sets could not be emptied, if they could not.
    pub capabilities: Option<String>,
    /// The worker runs as uid 0, which the kernel exempts from `RLIMIT_NPROC`.
    pub root: bool,
}

impl Report {
    /// One line per layer that is weaker than intended; empty when all are in force.
    pub fn degraded(&self) -> Vec<String> {
        let mut lines = Vec::new();
        match &self.landlock {
            LandlockState::Full { .. } => {}
            LandlockState::Partial { abi } => lines.push(format!(
                "landlock ABI {abi} enforces only part of the ruleset (ABI 6, Linux 6.12, needed for all of it)"
            )),
            LandlockState::Unavailable(why) => lines.push(format!(
                "landlock unavailable ({why}); the filesystem is closed by seccomp alone"
            )),
        }
        if !self.kept_groups.is_empty() {
            lines.push(format!(
                "supplementary groups {:?} kept (no CAP_SETGID to drop them); run workers under a uid without supplementary groups",
                self.kept_groups
            ));
        }
        if let Some(why) = &self.capabilities {
            lines.push(format!("capabilities not dropped: {why}"));
        }
        if self.root {
            lines.push(
                "running as uid 0: RLIMIT_NPROC does not bind root; new processes are refused by seccomp alone"
                    .to_owned(),
            );
        }
        lines
    }
}

/// Locks the calling process down (see the module documentation), reports on stderr what
/// it could not enforce, and returns that report. Call it once, from the main thread,
/// while it is the only thread, after everything that needs files (the memory limit reads
/// `/proc/self/status`) and before the first job.
pub fn apply() -> Result<Report, LockdownError> {
    prctl("PR_SET_NO_NEW_PRIVS", libc::PR_SET_NO_NEW_PRIVS, 1)?;
    prctl("PR_SET_DUMPABLE", libc::PR_SET_DUMPABLE, 0)?;
    let kept_groups = drop_groups();
    let capabilities = drop_capabilities().err().map(|e| e.to_string());
    close_inherited_fds()?;
    let landlock = landlock()?;
    watch_parent()?;
    // SAFETY: getuid has no preconditions and cannot fail.
    let root = unsafe { libc::getuid() } == 0;
    let report = Report {
        landlock,
        kept_groups,
        capabilities,
        root,
    };
    let mut stderr = std::io::stderr().lock();
    for line in report.degraded() {
        // Nothing to do if the log is gone; the worker still works.
        let _ = writeln!(stderr, "action-worker: lock-down: {line}");
    }
    drop(stderr);
    rlimits()?;
    seccomp()?;
    Ok(report)
}

fn prctl(
    what: &'static str,
    option: libc::c_int,
    value: libc::c_ulong,
) -> Result<(), LockdownError> {
    // SAFETY: PR_SET_NO_NEW_PRIVS and PR_SET_DUMPABLE take integer arguments only.
    let rc = unsafe {
        libc::prctl(
            option,
            value,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(LockdownError::Prctl {
            what,
            source: std::io::Error::last_os_error(),
        })
    }
}

/// Drops every supplementary group if allowed; returns those that remain.
fn drop_groups() -> Vec<u32> {
    // SAFETY: a null list with size 0 is setgroups' documented way to clear the list; glibc
    // applies it to every thread, and there is only one here.
    if unsafe { libc::setgroups(0, std::ptr::null()) } == 0 {
        return Vec::new();
    }
    // SAFETY: size 0 asks only for the count and writes nothing.
    let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    let Ok(len) = usize::try_from(n) else {
        return Vec::new();
    };
    let mut groups = vec![0 as libc::gid_t; len];
    // SAFETY: the buffer holds `n` entries, the size passed.
    let n = unsafe { libc::getgroups(n, groups.as_mut_ptr()) };
    groups.truncate(usize::try_from(n).unwrap_or(0));
    // The list may repeat the primary group, which the worker keeps in any case.
    // SAFETY: getegid has no preconditions and cannot fail.
    let primary = unsafe { libc::getegid() };
    groups.retain(|g| *g != primary);
    groups
}

/// `struct __user_cap_header_struct` of `<linux/capability.h>`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct` of `<linux/capability.h>`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit sets as two `CapData`.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Empties the ambient, inheritable, permitted and effective capability sets of this thread
/// (threads started later inherit them).
fn drop_capabilities() -> std::io::Result<()> {
    // SAFETY: integer arguments only. Kernels before 4.3 have no ambient set (EINVAL), and
    // then nothing is there to clear.
    let _ = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    let header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: header and data are live, correctly laid out for version 3 (two data
    // entries), and only read by the kernel.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Closes every descriptor above stderr.
fn close_inherited_fds() -> Result<(), LockdownError> {
    // SAFETY: closes descriptors this process owns and no Rust object of the worker holds
    // (std's stdio handles use 0–2 only; nothing else is open yet).
    let rc = unsafe { libc::syscall(libc::SYS_close_range, KEPT_FDS, u32::MAX, 0) };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::ENOSYS) {
        return Err(LockdownError::CloseFds(err));
    }
    // Linux before 5.9: close one by one up to the descriptor limit.
    let (soft, _) = rlimit::Resource::NOFILE
        .get()
        .map_err(LockdownError::CloseFds)?;
    let last = libc::c_int::try_from(soft.min(1 << 20)).unwrap_or(1 << 20);
    for fd in KEPT_FDS as libc::c_int..last {
        // SAFETY: as above; EBADF for descriptors that are not open is expected.
        unsafe { libc::close(fd) };
    }
    Ok(())
}

/// Denies every filesystem, network and scope right Landlock knows.
fn landlock() -> Result<LandlockState, LockdownError> {
    let err = |e: landlock::RulesetError| LockdownError::Landlock(e.to_string());
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(LANDLOCK_ABI))
        .map_err(err)?
        .handle_access(AccessNet::from_all(LANDLOCK_ABI))
        .map_err(err)?
        .scope(Scope::from_all(LANDLOCK_ABI))
        .map_err(err)?
        .create()
        .map_err(err)?
        .restrict_self()
        .map_err(err)?;
    let (effective, abi) = match status.landlock {
        LandlockStatus::NotEnabled => {
            return Ok(LandlockState::Unavailable(
                "not enabled in this kernel's lsm list",
            ));
        }
        LandlockStatus::NotImplemented => {
            return Ok(LandlockState::Unavailable("not built into this kernel"));
        }
        LandlockStatus::Available {
            effective_abi,
            kernel_abi,
        } => (effective_abi, kernel_abi.unwrap_or(effective_abi as i32)),
    };
    Ok(match status.ruleset {
        RulesetStatus::NotEnforced => LandlockState::Unavailable("the ruleset was not enforced"),
        _ if effective >= LANDLOCK_BASELINE => LandlockState::Full { abi },
        _ => LandlockState::Partial { abi },
    })
}

/// Exits the process when the parent dies. A job that never returns (an endless loop)
/// would otherwise keep an orphaned worker spinning after the parent was killed with
/// SIGKILL, because the closed pipe is only noticed between jobs.
fn watch_parent() -> Result<(), LockdownError> {
    let parent = std::os::unix::process::parent_id();
    let (started, running) = std::sync::mpsc::sync_channel(0);
    std::thread::Builder::new()
        .name("parent-watch".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            // A new thread makes set-up calls (rseq registration) before it runs this
            // closure; the seccomp filter must not be installed before they are done.
            let _ = started.send(());
            loop {
                std::thread::sleep(PARENT_POLL);
                if std::os::unix::process::parent_id() != parent {
                    std::process::exit(0);
                }
            }
        })
        .map_err(LockdownError::WatchThread)?;
    running
        .recv()
        .map_err(|_| LockdownError::WatchThread(std::io::Error::other("the thread ended at start")))
}

fn rlimits() -> Result<(), LockdownError> {
    // SAFETY: SIG_IGN is a valid disposition for SIGXFSZ; no handler code is involved.
    if unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) } == libc::SIG_ERR {
        return Err(LockdownError::Rlimit {
            resource: "RLIMIT_FSIZE (ignoring SIGXFSZ)",
            source: std::io::Error::last_os_error(),
        });
    }
    for (resource, name, limit) in [
        (rlimit::Resource::CORE, "RLIMIT_CORE", 0),
        (rlimit::Resource::FSIZE, "RLIMIT_FSIZE", 0),
        (rlimit::Resource::NPROC, "RLIMIT_NPROC", 0),
        (
            rlimit::Resource::NOFILE,
            "RLIMIT_NOFILE",
            u64::from(KEPT_FDS),
        ),
    ] {
        resource
            .set(limit, limit)
            .map_err(|source| LockdownError::Rlimit {
                resource: name,
                source,
            })?;
    }
    Ok(())
}

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, LockdownError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
        .map_err(|e| LockdownError::Seccomp(e.to_string()))
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, LockdownError> {
    SeccompRule::new(conditions).map_err(|e| LockdownError::Seccomp(e.to_string()))
}

/// Builds the allow-list filter; denied calls return `EPERM`.
///
/// The set is what `strace -f` showed the worker doing after the filter was in place
/// while running this crate's tests and the appliance's end-to-end action tests, plus the
/// paths those runs do not reach: the job loop (`read` on stdin, `write` on stdout and
/// stderr), boa and glibc's allocator (`brk`, `mmap`/`mprotect` without `PROT_EXEC`,
/// `munmap`, `mremap`, `madvise`, `futex`), clocks (`clock_gettime`, when the vDSO falls
/// back to the kernel), the parent watch (`clock_nanosleep`, `restart_syscall`,
/// `getppid`), `getrandom` (`crypto.getRandomValues`, hash seeds), and the ways the
/// process ends: `exit`, `exit_group`, `abort`'s `rt_sigprocmask`, `getpid`, `gettid` and
/// `tgkill(own pid, SIGABRT)`, the stack-overflow handler's `sigaltstack`,
/// `rt_sigaction` and `rt_sigreturn`. The one refusal those runs show is `getcwd`, from
/// boa's default module loader canonicalising `.`; it copes, and modules stay unloadable.
pub fn seccomp_filter() -> Result<BpfProgram, LockdownError> {
    let no_exec = || {
        rule(vec![cond(
            2,
            SeccompCmpOp::MaskedEq(libc::PROT_EXEC as u64),
            0,
        )?])
    };
    let pid = u64::from(std::process::id());
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(
        libc::SYS_read,
        vec![rule(vec![cond(0, SeccompCmpOp::Eq, 0)?])?],
    );
    rules.insert(
        libc::SYS_write,
        vec![
            rule(vec![cond(0, SeccompCmpOp::Eq, 1)?])?,
            rule(vec![cond(0, SeccompCmpOp::Eq, 2)?])?,
        ],
    );
    rules.insert(libc::SYS_mmap, vec![no_exec()?]);
    rules.insert(libc::SYS_mprotect, vec![no_exec()?]);
    rules.insert(
        libc::SYS_tgkill,
        vec![rule(vec![
            cond(0, SeccompCmpOp::Eq, pid)?,
            cond(2, SeccompCmpOp::Eq, libc::SIGABRT as u64)?,
        ])?],
    );
    for nr in [
        libc::SYS_munmap,
        libc::SYS_mremap,
        libc::SYS_brk,
        libc::SYS_madvise,
        libc::SYS_futex,
        libc::SYS_clock_gettime,
        libc::SYS_clock_nanosleep,
        libc::SYS_restart_syscall,
        libc::SYS_getrandom,
        libc::SYS_getpid,
        libc::SYS_getppid,
        libc::SYS_gettid,
        libc::SYS_rt_sigreturn,
        libc::SYS_rt_sigprocmask,
        libc::SYS_rt_sigaction,
        libc::SYS_sigaltstack,
        libc::SYS_exit,
        libc::SYS_exit_group,
    ] {
        rules.insert(nr, Vec::new());
    }
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| LockdownError::Seccomp(e.to_string()))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        arch,
    )
    .map_err(|e| LockdownError::Seccomp(e.to_string()))?;
    BpfProgram::try_from(filter).map_err(|e| LockdownError::Seccomp(e.to_string()))
}

/// Installs the filter on every thread of the process (TSYNC).
fn seccomp() -> Result<(), LockdownError> {
    let program = seccomp_filter()?;
    seccompiler::apply_filter_all_threads(&program)
        .map_err(|e| LockdownError::Seccomp(e.to_string()))
}
