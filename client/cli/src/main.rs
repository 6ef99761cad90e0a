//! `appliance-cli`: the appliance's command line (see `args.rs` for the commands and the
//! exit statuses, and the README beside this crate).
//!
//! May depend on: `appliance-client`, so every call goes through the attested, pinned
//! connection, and `operator-auth`, the requests `appliance-cli operator` signs; never
//! on `appliance-api` directly (the client re-exports it).

mod args;
mod commands;
mod operator;
mod output;
mod profile;

use std::process::ExitCode;

use appliance_client::ClientError;

use crate::profile::ProfileError;

/// Why a command failed, and so the exit status.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// A local input (a file, a JSON argument) is wrong.
    #[error("{0}")]
    Input(String),
    /// The action ran and reported an error (its output was printed).
    #[error("the action reported an error: {0}")]
    Action(String),
}

/// The documented exit statuses (also in `--help`).
pub mod exit {
    pub const OTHER: u8 = 1;
    pub const NOT_VERIFIED: u8 = 3;
    pub const REFUSED: u8 = 4;
    pub const UNAVAILABLE: u8 = 5;
    pub const PROFILE: u8 = 6;
    pub const ACTION_FAILED: u8 = 7;
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Client(e) => match e {
                ClientError::NotVerified { .. }
                | ClientError::UnexpectedComposeHash { .. }
                | ClientError::CertificateNotAttested { .. }
                | ClientError::VerificationFailedEarlier => exit::NOT_VERIFIED,
                ClientError::Api { status, .. } | ClientError::Http { status, .. }
                    if *status < 500 =>
                {
                    exit::REFUSED
                }
                ClientError::Api { .. }
                | ClientError::Http { .. }
                | ClientError::Transport(_)
                | ClientError::Evidence(_)
                | ClientError::Redirect { .. } => exit::UNAVAILABLE,
                ClientError::NoApiKey | ClientError::Config(_) => exit::PROFILE,
                _ => exit::OTHER,
            },
            Self::Profile(_) => exit::PROFILE,
            Self::Input(_) => exit::OTHER,
            Self::Action(_) => exit::ACTION_FAILED,
        }
    }
}

fn main() -> ExitCode {
    let cli = args::Cli::parse_env();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            output::eprint(&format!("appliance-cli: cannot start: {e}\n"));
            return ExitCode::from(exit::OTHER);
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if let CliError::Client(ClientError::NotVerified { report }) = &e {
                output::eprint(&report.to_text());
            }
            output::eprint(&format!("appliance-cli: {e}\n"));
            ExitCode::from(e.exit_code())
        }
    }
}
