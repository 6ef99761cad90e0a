//! `dstack-agent-standin`: the stand-in dstack guest agent of
//! [`test_support::dstack_agent`] as a process of its own, so that the container test
//! (`tests/e2e/container.rs`) can run it in a container of its own, as dstack runs its
//! guest agent outside the app's containers, instead of inside the test process.
//!
//! ```text
//! dstack-agent-standin SOCKET MODE APP_COMPOSE SEED [KEY_LOG]
//! ```
//!
//! * `SOCKET`: where it listens (a stale file is replaced);
//! * `MODE`: the socket's permission bits, in octal (`666`: any container user that has the
//!   socket mounted may connect);
//! * `APP_COMPOSE`: the `app-compose.json` file it reports (its SHA-256 is the compose hash);
//! * `SEED`: the 32-byte app key standing for the KMS's, in hex (keys are
//!   `sha256(seed ‖ path)`);
//! * `KEY_LOG`: a file it appends `PATH<TAB>PURPOSE` to for every `/GetKey` request, so the
//!   test can see which keys were asked for (the in-process agent's `key_requests`).
//!
//! It serves until it is killed (as PID 1 of a container it has no SIGTERM handler: the
//! test removes its container with SIGKILL). Usage errors exit 2, other failures 1.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use test_support::dstack_agent::StandInAgent;

const USAGE: &str = "usage: dstack-agent-standin SOCKET MODE APP_COMPOSE SEED [KEY_LOG]";

/// How often new `/GetKey` requests are written to the key log.
const KEY_LOG_INTERVAL: Duration = Duration::from_millis(50);

#[derive(Debug, thiserror::Error)]
enum StandInError {
    #[error("{USAGE}")]
    Usage,
    #[error("MODE must be octal permission bits (e.g. 666): {0:?}")]
    Mode(String),
    #[error("SEED must be 32 bytes in hex: {0:?}")]
    Seed(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

struct Args {
    socket: PathBuf,
    mode: u32,
    app_compose: PathBuf,
    seed: [u8; 32],
    key_log: Option<PathBuf>,
}

fn parse(args: &[String]) -> Result<Args, StandInError> {
    let (socket, mode, app_compose, seed, key_log) = match args {
        [socket, mode, compose, seed] => (socket, mode, compose, seed, None),
        [socket, mode, compose, seed, log] => (socket, mode, compose, seed, Some(log)),
        _ => return Err(StandInError::Usage),
    };
    let mode = u32::from_str_radix(mode, 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| StandInError::Mode(mode.clone()))?;
    let seed = hex::decode(seed)
        .ok()
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .ok_or_else(|| StandInError::Seed(seed.clone()))?;
    Ok(Args {
        socket: socket.into(),
        mode,
        app_compose: app_compose.into(),
        seed,
        key_log: key_log.map(PathBuf::from),
    })
}

fn serve(args: &Args) -> Result<(), StandInError> {
    let io = |path: &PathBuf| {
        let path = path.clone();
        move |source| StandInError::Io { path, source }
    };
    let compose = std::fs::read(&args.app_compose).map_err(io(&args.app_compose))?;
    let mut log = match &args.key_log {
        Some(path) => Some((
            path,
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o644)
                .open(path)
                .map_err(io(path))?,
        )),
        None => None,
    };
    let agent = StandInAgent::start(&args.socket, args.mode, &compose, args.seed);
    eprintln!(
        "dstack-agent-standin: listening on {} (mode {:o}), compose hash {}",
        args.socket.display(),
        args.mode,
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&compose))
    );
    let mut logged = 0;
    loop {
        std::thread::sleep(KEY_LOG_INTERVAL);
        let Some((log_path, file)) = log.as_mut() else {
            continue;
        };
        let requests = agent.key_requests();
        for (path, purpose) in requests.iter().skip(logged) {
            writeln!(file, "{path}\t{purpose}").map_err(io(log_path))?;
        }
        logged = requests.len();
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = parse(&args).and_then(|args| serve(&args));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err @ StandInError::Usage) => {
            eprintln!("{err}");
            ExitCode::from(2)
        }
        Err(err) => {
            eprintln!("dstack-agent-standin: {err}");
            ExitCode::FAILURE
        }
    }
}
