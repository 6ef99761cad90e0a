//! The command line.
//!
//! The CLI's environment variables all start with [`ENV_PREFIX`], which the appliance
//! server skips when it reads its own `APPLIANCE_*` configuration overrides, so one shell
//! can hold both. The names before it (`APPLIANCE_URL`, `APPLIANCE_API_KEY`,
//! `APPLIANCE_PROFILE`) still work, with a warning on stderr ([`Cli::parse_env`]):
//! the server refuses them as unknown configuration keys.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};

/// The prefix of every environment variable the CLI reads.
pub const ENV_PREFIX: &str = "APPLIANCE_CLI_";
pub const ENV_PROFILE: &str = "APPLIANCE_CLI_PROFILE";
pub const ENV_URL: &str = "APPLIANCE_CLI_URL";
pub const ENV_API_KEY: &str = "APPLIANCE_CLI_API_KEY";

/// The names the CLI read before it had its own prefix, each with its argument's id and
/// the name that replaces it.
const DEPRECATED_ENV: [(&str, &str, &str); 3] = [
    ("APPLIANCE_PROFILE", "profile", ENV_PROFILE),
    ("APPLIANCE_URL", "url", ENV_URL),
    ("APPLIANCE_API_KEY", "api_key", ENV_API_KEY),
];

/// appliance-cli: verify an appliance deployment's TDX evidence, then manage accounts,
/// keys, groups, wallets and actions over a connection pinned to what was verified.
///
/// Exit status: 0 success; 1 another failure; 2 a usage error; 3 the deployment did not
/// verify (nothing was sent with the API key); 4 the server refused the request (4xx);
/// 5 the server failed or could not be reached (5xx, network, timeout); 6 the profile is
/// missing or unusable (or the OS measurements file it names); 7 an action ran and
/// reported an error.
#[derive(Parser, Debug)]
#[command(name = "appliance-cli", version)]
pub struct Cli {
    /// The profile to use (in profiles.toml of the config directory).
    #[arg(long, global = true, env = ENV_PROFILE, default_value = crate::profile::DEFAULT_PROFILE)]
    pub profile: String,
    /// Print one JSON document on stdout instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// Deployment URL for this run, instead of the profile's.
    #[arg(long, global = true, env = ENV_URL, value_name = "URL")]
    pub url: Option<String>,
    /// API key for this run, instead of the profile's (prefer the environment variable:
    /// a command line is visible to other users).
    #[arg(
        long,
        global = true,
        env = ENV_API_KEY,
        hide_env_values = true,
        value_name = "KEY"
    )]
    pub api_key: Option<String>,
    /// Connect to IP:PORT for this run instead of where the URL's host resolves (as curl's
    /// --connect-to): the host name stays the TLS server name and the name the attested
    /// certificate must carry. E.g. a dstack-gateway node before DNS points at it. The URL
    /// must name no port, or this one.
    #[arg(long, global = true, value_name = "IP:PORT")]
    pub connect: Option<SocketAddr>,
    /// Policy file of accepted OS measurements for this run, instead of the profile's (the
    /// format of `evidence verify --os-measurements`, written by `evidence os-measure`): a
    /// genuine quote's MRTD and RTMR0-2 must match one of its entries.
    #[arg(long, global = true, value_name = "FILE")]
    pub os_measurements: Option<PathBuf>,
    /// Accept a genuine quote whose OS (MRTD, RTMR0-2) no policy pins, for this run
    /// (`--allow-unpinned-os=false` refuses what the profile accepts): the client then does
    /// not know which firmware, kernel and command line produced the quote.
    #[arg(
        long,
        global = true,
        value_name = "true|false",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    pub allow_unpinned_os: Option<bool>,
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The command line and the process environment, deprecated names included; the
    /// warnings about those are written to stderr. Exits on a usage error (status 2).
    pub fn parse_env() -> Self {
        let matches = Self::command().get_matches();
        let mut cli = Self::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
        let warnings = cli.apply_deprecated_env(&matches, |name| std::env::var(name).ok());
        for warning in warnings {
            crate::output::eprint(&format!("appliance-cli: warning: {warning}\n"));
        }
        cli
    }

    /// Takes each setting given only under a deprecated variable name (no option, no
    /// `APPLIANCE_CLI_*` variable) from that variable; returns a warning for every
    /// deprecated variable set, used or not. `var` reads the environment.
    fn apply_deprecated_env(
        &mut self,
        matches: &ArgMatches,
        var: impl Fn(&str) -> Option<String>,
    ) -> Vec<String> {
        let mut warnings = Vec::new();
        for (old, id, new) in DEPRECATED_ENV {
            let Some(value) = var(old).filter(|v| !v.is_empty()) else {
                continue;
            };
            let given = matches
                .value_source(id)
                .is_some_and(|s| matches!(s, ValueSource::CommandLine | ValueSource::EnvVariable));
            if given {
                warnings.push(format!(
                    "{old} is ignored ({new} or --{} is set); unset it: the appliance server refuses unknown APPLIANCE_* variables",
                    id.replace('_', "-")
                ));
                continue;
            }
            match id {
                "profile" => self.profile = value,
                "url" => self.url = Some(value),
                _ => self.api_key = Some(value),
            }
            warnings.push(format!(
                "{old} is deprecated: rename it {new} (the appliance server skips {ENV_PREFIX}* variables but refuses other unknown APPLIANCE_* ones, so {old} in the same shell stops it from starting)"
            ));
        }
        warnings
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Show or change a profile.
    #[command(subcommand)]
    Profile(ProfileCommand),
    /// Verify the deployment and print the report.
    Verify,
    /// Accounts.
    #[command(subcommand)]
    Account(AccountCommand),
    /// Usage API keys (needs the account key).
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Groups.
    #[command(subcommand)]
    Groups(GroupsCommand),
    /// Wallets (PKPs).
    #[command(subcommand)]
    Wallets(WalletsCommand),
    /// Registered actions, and running one.
    #[command(subcommand)]
    Actions(ActionsCommand),
    /// Credit.
    #[command(subcommand)]
    Billing(BillingCommand),
    /// The operator's day-2 tasks (inspect, export the sealed root, back up the database,
    /// reseal for an upgrade), each a request signed with the operator's key for the app
    /// and compose hash just verified. The key is read from `APPLIANCE_CLI_OPERATOR_KEY`
    /// (0x + 64 hex digits; never a command-line argument), or sign elsewhere with
    /// `--print-request` / `--request-file` and `--signature`.
    #[command(subcommand)]
    Operator(OperatorCommand),
}

/// The environment variable holding the operator's private key.
pub const ENV_OPERATOR_KEY: &str = "APPLIANCE_CLI_OPERATOR_KEY";

#[derive(Subcommand, Debug)]
pub enum OperatorCommand {
    /// What the deployment runs and holds: versions, root id, sealed roots, operators.
    Status(OperatorSigning),
    /// Write keyservice's state files (sealed roots, payer-contract record) and, on
    /// PostgreSQL, the shared root's sealed copies into DIR.
    ExportRoot {
        /// A new or empty directory.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        #[command(flatten)]
        signing: OperatorSigning,
    },
    /// Write a consistent copy of the SQLite database to FILE (which must not exist).
    BackupDatabase {
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        #[command(flatten)]
        signing: OperatorSigning,
    },
    /// Reseal the root for the compose hash HASH of the next version (it must be allowed
    /// on the governance contract first).
    Reseal {
        #[arg(long, value_name = "HASH")]
        to: String,
        #[command(flatten)]
        signing: OperatorSigning,
    },
}

/// How the request gets its signature.
#[derive(Args, Debug, Default)]
pub struct OperatorSigning {
    /// Verify, print the request text to sign (EIP-191, e.g. `cast wallet sign`) and stop.
    #[arg(long, conflicts_with_all = ["request_file", "signature"])]
    pub print_request: bool,
    /// Send this request text (as printed by --print-request, within 5 minutes) ...
    #[arg(long, value_name = "FILE", requires = "signature")]
    pub request_file: Option<PathBuf>,
    /// ... with this signature (0x + 130 hex digits).
    #[arg(long, value_name = "HEX", requires = "request_file")]
    pub signature: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum ProfileCommand {
    /// Create or change the profile: only the options given change. The global `--url`,
    /// `--api-key` (or `APPLIANCE_CLI_URL`, `APPLIANCE_CLI_API_KEY`), `--os-measurements` and
    /// `--allow-unpinned-os` are stored too.
    Set(Box<ProfileSet>),
    /// Print the profile (the API key is never printed) and where it is stored.
    Show,
}

#[derive(Args, Debug, Default)]
pub struct ProfileSet {
    /// Read the API key from the first line of stdin and store it.
    #[arg(long)]
    pub api_key_stdin: bool,
    /// Forget the stored API key.
    #[arg(long, conflicts_with = "api_key_stdin")]
    pub clear_api_key: bool,
    /// Extra CA certificates (PEM) to trust beside the web PKI.
    #[arg(long, value_name = "PEM")]
    pub ca_file: Option<PathBuf>,
    /// Accept simulated quotes (the development stack only: NOT confidential).
    #[arg(long, value_name = "true|false")]
    pub allow_simulated: Option<bool>,
    /// Forget the stored OS measurements policy file.
    #[arg(long)]
    pub clear_os_measurements: bool,
    /// Accept an evidence quote without the nonce the client sent (stale or replayed).
    #[arg(long, value_name = "true|false")]
    pub allow_stale: Option<bool>,
    /// Compose hash the deployment must run (repeat for several; replaces the list).
    #[arg(long = "compose-hash", value_name = "HEX")]
    pub compose_hashes: Vec<String>,
    /// TCB statuses that pass (comma-separated; replaces the list).
    #[arg(long, value_delimiter = ',')]
    pub accept_status: Vec<String>,
    /// JSON-RPC URL of the chain holding the governance contract.
    #[arg(long, value_name = "URL")]
    pub rpc_url: Option<String>,
    /// PCCS URL for quote collateral.
    #[arg(long, value_name = "URL", conflicts_with = "collateral")]
    pub pccs_url: Option<String>,
    /// dcap-qvl collateral file for the quotes.
    #[arg(long, value_name = "FILE")]
    pub collateral: Option<PathBuf>,
    /// DNS server for the CAA check.
    #[arg(long, value_name = "IP:PORT")]
    pub dns: Option<SocketAddr>,
    /// Domain whose CAA records govern the certificate.
    #[arg(long)]
    pub caa_domain: Option<String>,
    /// Checks accepted as not run (comma-separated; replaces the list).
    #[arg(long, value_delimiter = ',')]
    pub skip: Vec<String>,
    /// Seconds a verification is trusted.
    #[arg(long, value_name = "SECONDS")]
    pub cache_secs: Option<u64>,
    /// Seconds a request may take.
    #[arg(long, value_name = "SECONDS")]
    pub timeout_secs: Option<u64>,
}

#[derive(Subcommand, Debug)]
pub enum AccountCommand {
    /// Create an API-mode account; prints its account key (shown once).
    New {
        #[arg(long)]
        name: String,
        #[arg(long)]
        description: Option<String>,
        #[arg(long)]
        email: Option<String>,
        /// Store the new account key in the profile.
        #[arg(long)]
        save: bool,
    },
    /// Whether the API key is a live account key.
    Exists,
}

/// Permissions of a usage key.
#[derive(Args, Debug, Default, Clone)]
pub struct KeyPermissions {
    #[arg(long)]
    pub can_create_groups: bool,
    #[arg(long)]
    pub can_delete_groups: bool,
    #[arg(long)]
    pub can_create_pkps: bool,
    /// Group whose actions the key may run (repeat).
    #[arg(long = "execute-in-group", value_name = "GROUP")]
    pub execute_in_groups: Vec<u64>,
    /// Group whose action list the key may change (repeat).
    #[arg(long = "manage-actions-in-group", value_name = "GROUP")]
    pub manage_ipfs_ids_in_groups: Vec<u64>,
    /// Group the key may add wallets to (repeat).
    #[arg(long = "add-wallet-to-group", value_name = "GROUP")]
    pub add_pkp_to_groups: Vec<u64>,
    /// Group the key may remove wallets from (repeat).
    #[arg(long = "remove-wallet-from-group", value_name = "GROUP")]
    pub remove_pkp_from_groups: Vec<u64>,
}

/// A page of a list.
#[derive(Args, Debug, Default, Clone, Copy)]
pub struct Page {
    /// 0-based page.
    #[arg(long)]
    pub page: Option<u64>,
    /// Items per page (server default 100, at most 1000).
    #[arg(long)]
    pub page_size: Option<u32>,
}

#[derive(Subcommand, Debug)]
pub enum KeysCommand {
    /// Create a usage key; prints it (shown once).
    Add {
        #[arg(long)]
        name: String,
        #[arg(long, default_value = "")]
        description: String,
        #[command(flatten)]
        permissions: KeyPermissions,
    },
    List(Page),
    /// Replace a usage key's permissions (and optionally its name and description).
    Update {
        /// The usage key.
        key: String,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        description: Option<String>,
        #[command(flatten)]
        permissions: KeyPermissions,
    },
    /// Revoke a usage key.
    Remove {
        key: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum GroupsCommand {
    Add {
        #[arg(long)]
        name: String,
        #[arg(long, default_value = "")]
        description: String,
        /// Wallet (pkp id) permitted in the group (repeat).
        #[arg(long = "wallet", value_name = "PKP_ID")]
        wallets: Vec<String>,
        /// Action (hashed CID) permitted in the group (repeat).
        #[arg(long = "action", value_name = "HASHED_CID")]
        actions: Vec<String>,
    },
    List(Page),
    /// Replace a group's name, description, wallets and actions.
    Update {
        group: u64,
        #[arg(long)]
        name: String,
        #[arg(long, default_value = "")]
        description: String,
        #[arg(long = "wallet", value_name = "PKP_ID")]
        wallets: Vec<String>,
        #[arg(long = "action", value_name = "HASHED_CID")]
        actions: Vec<String>,
    },
    Remove {
        group: u64,
    },
    AddWallet {
        group: u64,
        pkp_id: String,
    },
    RemoveWallet {
        group: u64,
        pkp_id: String,
    },
    /// Permit an action (by IPFS CID) in a group.
    AddAction {
        group: u64,
        cid: String,
    },
    /// Remove an action (by hashed CID) from a group.
    RemoveAction {
        group: u64,
        hashed_cid: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum WalletsCommand {
    /// Create a wallet (a server-held secp256k1 key).
    New {
        #[arg(long, default_value = "")]
        name: String,
        #[arg(long, default_value = "")]
        description: String,
    },
    List {
        /// Only the wallets of this group.
        #[arg(long)]
        group: Option<u64>,
        #[command(flatten)]
        page: Page,
    },
}

#[derive(Subcommand, Debug)]
pub enum ActionsCommand {
    /// Register the JavaScript in FILE as an action (its CID is computed by the server).
    Add {
        file: PathBuf,
        #[arg(long)]
        name: String,
        #[arg(long, default_value = "")]
        description: String,
        /// Also permit it in this group.
        #[arg(long)]
        group: Option<u64>,
    },
    List {
        #[arg(long)]
        group: Option<u64>,
        #[command(flatten)]
        page: Page,
    },
    /// Delete a registered action (by hashed CID).
    Remove { hashed_cid: String },
    /// Run the JavaScript in FILE (or a registered action by --cid).
    Run {
        #[arg(required_unless_present = "cid", conflicts_with = "cid")]
        file: Option<PathBuf>,
        /// The IPFS CID of a registered action.
        #[arg(long)]
        cid: Option<String>,
        /// The action's `jsParams`, as JSON.
        #[arg(long, value_name = "JSON")]
        params: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum BillingCommand {
    /// The account's prepaid credit.
    Balance,
    /// What calls cost.
    Prices,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// Parses `args` with `env` standing for the deprecated variables (the new ones are
    /// not in the test's environment, so only options are given here).
    fn parse(args: &[&str], env: &[(&str, &str)]) -> (Cli, Vec<String>) {
        let mut all = vec!["appliance-cli"];
        all.extend_from_slice(args);
        let matches = Cli::command().try_get_matches_from(all).unwrap();
        let mut cli = Cli::from_arg_matches(&matches).unwrap();
        let warnings = cli.apply_deprecated_env(&matches, |name| {
            env.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        });
        (cli, warnings)
    }

    #[test]
    fn the_deprecated_names_still_work_with_a_warning() {
        let (cli, warnings) = parse(
            &["verify"],
            &[
                ("APPLIANCE_URL", "https://old.example"),
                ("APPLIANCE_API_KEY", "k3y"),
                ("APPLIANCE_PROFILE", "staging"),
            ],
        );
        assert_eq!(cli.url.as_deref(), Some("https://old.example"));
        assert_eq!(cli.api_key.as_deref(), Some("k3y"));
        assert_eq!(cli.profile, "staging");
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        for (old, new) in [
            ("APPLIANCE_URL", "APPLIANCE_CLI_URL"),
            ("APPLIANCE_API_KEY", "APPLIANCE_CLI_API_KEY"),
            ("APPLIANCE_PROFILE", "APPLIANCE_CLI_PROFILE"),
        ] {
            assert!(
                warnings
                    .iter()
                    .any(|w| w.starts_with(&format!("{old} is deprecated: rename it {new}"))),
                "{old}: {warnings:?}"
            );
        }
        // No warning for the values themselves (the key is never echoed).
        assert!(!warnings.iter().any(|w| w.contains("k3y")));
    }

    #[test]
    fn options_win_over_the_deprecated_names_which_are_then_ignored() {
        let (cli, warnings) = parse(
            &["--url", "https://new.example", "--profile", "p", "verify"],
            &[
                ("APPLIANCE_URL", "https://old.example"),
                ("APPLIANCE_PROFILE", "staging"),
            ],
        );
        assert_eq!(cli.url.as_deref(), Some("https://new.example"));
        assert_eq!(cli.profile, "p");
        assert_eq!(cli.api_key, None);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings
                .iter()
                .all(|w| w.contains("is ignored") && w.contains("unset it")),
            "{warnings:?}"
        );
    }

    #[test]
    fn nothing_set_nothing_said() {
        let (cli, warnings) = parse(&["verify"], &[("APPLIANCE_URL", "")]);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(cli.url, None);
        assert_eq!(cli.profile, crate::profile::DEFAULT_PROFILE);
    }

    #[test]
    fn every_variable_has_the_prefix_the_server_skips() {
        for name in [
            ENV_PROFILE,
            ENV_URL,
            ENV_API_KEY,
            crate::profile::ENV_CONFIG_DIR,
        ] {
            assert!(name.starts_with(ENV_PREFIX), "{name}");
        }
        let help = Cli::command().render_long_help().to_string();
        for name in [ENV_PROFILE, ENV_URL, ENV_API_KEY] {
            assert!(
                help.contains(&format!("env: {name}")),
                "{name} not in:\n{help}"
            );
        }
    }
}
