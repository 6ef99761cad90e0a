//! `worker-launcher`: see the crate documentation and README.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;
use worker_launcher::server::{self, LauncherConfig};
use worker_launcher::settings;

/// Starts action workers for the appliance, one per connection, under this process's uid.
#[derive(Debug, Parser)]
#[command(name = "worker-launcher", version)]
struct Args {
    /// The Unix socket to listen on.
    #[arg(long, env = "WORKER_LAUNCHER_SOCKET")]
    socket: PathBuf,
    /// The action-worker binary. Default: `action-worker` next to this binary.
    #[arg(long, env = "WORKER_LAUNCHER_WORKER_BINARY")]
    worker_binary: Option<PathBuf>,
    /// The directory workers run in (empty; read-only in the image).
    #[arg(long, env = "WORKER_LAUNCHER_WORKER_CWD", default_value = "/var/empty")]
    worker_cwd: PathBuf,
    /// The workers' memory limit in MiB. Default: `[actions] memory_limit_mb` of
    /// `--appliance-config`.
    #[arg(long, env = "WORKER_LAUNCHER_MEMORY_LIMIT_MB", value_parser = clap::value_parser!(u64).range(1..))]
    memory_limit_mb: Option<u64>,
    /// The appliance's configuration file (the measured one); only `[actions]
    /// memory_limit_mb` is read from it.
    #[arg(long, env = "WORKER_LAUNCHER_APPLIANCE_CONFIG")]
    appliance_config: Option<PathBuf>,
    /// Workers alive at once; requests beyond it are refused (`busy`).
    #[arg(long, env = "WORKER_LAUNCHER_MAX_WORKERS", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    max_workers: u64,
    /// A uid that may ask for workers (the appliance's); repeat for more. Connections
    /// from any other uid are refused.
    #[arg(
        long = "peer-uid",
        env = "WORKER_LAUNCHER_PEER_UIDS",
        value_delimiter = ','
    )]
    peer_uids: Vec<u32>,
    /// DEVELOPMENT ONLY: run as root or with supplementary groups, and accept peers of
    /// this process's own uid. Workers then share the appliance's uid: the uid layer of
    /// the worker sandbox is absent.
    #[arg(long, env = "WORKER_LAUNCHER_ALLOW_SAME_UID_DEV")]
    allow_same_uid_dev: bool,
    /// Stop when the parent process exits (development: the appliance's child).
    #[arg(long)]
    exit_with_parent: bool,
    /// The supervisor's pid, for `--exit-with-parent`: the launcher stops as soon as its
    /// parent is any other process, even if the supervisor died before the launcher
    /// could look (without it, the parent seen at start is the one watched).
    #[arg(long, requires = "exit_with_parent")]
    parent_pid: Option<u32>,
}

#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error(
        "refusing to run as uid 0: workers would run as root (run as the workers' own uid, or pass --allow-same-uid-dev in development)"
    )]
    Root,
    #[error(
        "refusing to run with supplementary groups {0:?}: workers would inherit them (run with no supplementary groups, or pass --allow-same-uid-dev in development)"
    )]
    Groups(Vec<u32>),
    #[error(
        "no --peer-uid given: name the appliance's uid (or pass --allow-same-uid-dev in development)"
    )]
    NoPeer,
    #[error("give --memory-limit-mb or --appliance-config")]
    NoMemoryLimit,
    #[error(transparent)]
    Settings(#[from] settings::SettingsError),
    #[error("the worker directory {path}: {source}")]
    WorkerCwd {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the worker binary {0} is not a file")]
    WorkerBinary(PathBuf),
    #[error("cannot listen on {path}: {source}")]
    Bind {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err}");
            ExitCode::from(2)
        }
    }
}

/// Supplementary groups other than the primary group.
fn supplementary_groups() -> Vec<u32> {
    let primary = rustix::process::getgid().as_raw();
    rustix::process::getgroups()
        .map(|groups| {
            groups
                .into_iter()
                .map(|g| g.as_raw())
                .filter(|g| *g != primary)
                .collect()
        })
        .unwrap_or_default()
}

fn run(args: Args) -> Result<(), StartError> {
    let uid = rustix::process::getuid().as_raw();
    let groups = supplementary_groups();
    if args.allow_same_uid_dev {
        tracing::warn!(
            uid,
            groups = ?groups,
            "DEVELOPMENT ONLY (--allow-same-uid-dev): workers run as uid {uid} with this launcher's groups and may share the appliance's uid; the uid layer of the worker sandbox is absent"
        );
    } else {
        if uid == 0 {
            return Err(StartError::Root);
        }
        if !groups.is_empty() {
            return Err(StartError::Groups(groups));
        }
        if args.peer_uids.is_empty() {
            return Err(StartError::NoPeer);
        }
    }
    let memory_limit_mb = match (args.memory_limit_mb, &args.appliance_config) {
        (Some(limit), _) => limit,
        (None, Some(path)) => settings::memory_limit_mb(path)?,
        (None, None) => return Err(StartError::NoMemoryLimit),
    };
    let worker_binary = args.worker_binary.unwrap_or_else(|| {
        std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(|dir| dir.join("action-worker")))
            .unwrap_or_else(|| PathBuf::from("action-worker"))
    });
    if !worker_binary.is_file() {
        return Err(StartError::WorkerBinary(worker_binary));
    }
    let cwd_meta = std::fs::metadata(&args.worker_cwd).map_err(|source| StartError::WorkerCwd {
        path: args.worker_cwd.clone(),
        source,
    })?;
    if !cwd_meta.is_dir() {
        return Err(StartError::WorkerCwd {
            path: args.worker_cwd.clone(),
            source: std::io::Error::other("not a directory"),
        });
    }
    // Other processes of this uid (the workers) may neither ptrace the launcher nor read
    // its memory through /proc.
    if let Err(err) =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        tracing::warn!(error = %err, "could not make the launcher non-dumpable");
    }
    // Watched by polling, not PR_SET_PDEATHSIG: that signal follows the parent *thread*
    // that spawned us (a runtime's pool thread may exit long before the appliance does),
    // and it misses a parent that died before we asked.
    let parent = args.exit_with_parent.then(|| {
        args.parent_pid
            .unwrap_or_else(std::os::unix::process::parent_id)
    });
    let config = LauncherConfig {
        worker_binary,
        worker_cwd: args.worker_cwd,
        memory_limit_mb,
        max_workers: usize::try_from(args.max_workers).unwrap_or(4096),
        peer_uids: args.peer_uids,
        allow_same_uid: args.allow_same_uid_dev,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(StartError::Runtime)?;
    runtime.block_on(async {
        // Peers of another uid reach the socket through the directory it is in (the
        // image makes that directory 0750, owned by the workers' uid and the appliance's
        // group); who may ask is decided by the peer check. Same-uid only: 0600.
        let mode = if config.peer_uids.is_empty() {
            0o600
        } else {
            0o666
        };
        let listener = server::bind(&args.socket, mode).map_err(|source| StartError::Bind {
            path: args.socket.clone(),
            source,
        })?;
        let bound = socket_file::BoundSocket::at(&args.socket);
        tracing::info!(
            socket = %args.socket.display(),
            uid,
            worker = %config.worker_binary.display(),
            memory_limit_mb = config.memory_limit_mb,
            max_workers = config.max_workers,
            peer_uids = ?config.peer_uids,
            "worker launcher listening"
        );
        let stop = async {
            tokio::select! {
                () = shutdown_signal() => {}
                () = parent_exit(parent) => {}
            }
        };
        server::serve(listener, config, stop).await;
        if let Some(bound) = bound {
            bound.remove(&args.socket);
        }
        tracing::info!("worker launcher stopped");
        Ok(())
    })
}

/// Resolves once the parent process is no longer `parent` (never, for `None`).
async fn parent_exit(parent: Option<u32>) {
    let Some(parent) = parent else {
        return std::future::pending().await;
    };
    loop {
        if std::os::unix::process::parent_id() != parent {
            tracing::warn!(parent, "the parent process exited; stopping");
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM"),
                _ = int.recv() => tracing::info!("SIGINT"),
            }
        }
        _ => std::future::pending().await,
    }
}
