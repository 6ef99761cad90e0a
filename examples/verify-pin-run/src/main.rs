//! Verify, pin, run: the three steps of a client that does not take a deployment's word
//! for what it runs.
//!
//! ```text
//! verify-pin-run <base-url> [--ca-file PEM] [--rpc-url URL] [--allow-simulated]
//! ```
//!
//! 1. **Verify**: [`appliance_client::Client::verify`] fetches the deployment's evidence
//!    (TDX quote with a fresh nonce, event log, compose, certificate binding) and runs
//!    every check of `evidence verify`; anything short of a pass stops here, before any
//!    credential exists. `--allow-simulated` accepts the development stack's simulated
//!    quote (NOT confidential); `--rpc-url` is the chain of the governance check (the
//!    development stack prints it); `--ca-file` trusts a self-signed certificate.
//! 2. **Pin**: from then on the client's connections accept only the certificate the
//!    evidence attests, checked in the TLS handshake.
//! 3. **Run**: over those connections, create an account and run an action with a
//!    parameter, then print what the action returned.
//!
//! Against `scripts/dev` (its start-up output names the RPC URL):
//!
//! ```text
//! cargo run -p verify-pin-run -- https://localhost:8443 \
//!     --ca-file .appliance-dev/tls/self-signed.pem --allow-simulated --rpc-url http://127.0.0.1:PORT
//! ```
//!
//! Exit status 0 when all three steps succeeded, 1 otherwise (the error on stderr).
//!
//! May depend on: `appliance-client`.

#![allow(clippy::print_stdout)]

use std::process::ExitCode;

use appliance_client::api::accounts::NewAccountRequest;
use appliance_client::api::execution::LitActionRequest;
use appliance_client::{Client, ClientError, Policy};

/// The action: logs and doubles its parameter.
const ACTION: &str = r#"async function main({ n }) {
  console.log("running with", n);
  return { doubled: n * 2 };
}"#;

struct Args {
    base_url: String,
    ca_file: Option<String>,
    rpc_url: Option<String>,
    allow_simulated: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let mut parsed = Args {
        base_url: String::new(),
        ca_file: None,
        rpc_url: None,
        allow_simulated: false,
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--ca-file" => parsed.ca_file = Some(args.next().ok_or("--ca-file needs a file")?),
            "--rpc-url" => parsed.rpc_url = Some(args.next().ok_or("--rpc-url needs a URL")?),
            "--allow-simulated" => parsed.allow_simulated = true,
            url if !url.starts_with('-') && parsed.base_url.is_empty() => {
                parsed.base_url = url.to_owned();
            }
            other => return Err(format!("unexpected argument {other:?}")),
        }
    }
    if parsed.base_url.is_empty() {
        return Err(
            "usage: verify-pin-run <base-url> [--ca-file PEM] [--rpc-url URL] [--allow-simulated]"
                .into(),
        );
    }
    Ok(parsed)
}

fn client(args: &Args, api_key: Option<&str>) -> Result<Client, ClientError> {
    let policy = Policy {
        allow_simulated: args.allow_simulated,
        rpc_url: args.rpc_url.clone(),
        ..Policy::default()
    };
    let mut builder = Client::builder(args.base_url.clone()).policy(policy);
    if let Some(ca) = &args.ca_file {
        builder = builder.ca_file(ca);
    }
    if let Some(key) = api_key {
        builder = builder.api_key(key);
    }
    builder.build()
}

async fn verify_pin_run(args: &Args) -> Result<(), ClientError> {
    // 1. verify (no credential exists yet)
    let anonymous = client(args, None)?;
    let verified = anonymous.verify().await?;
    println!("verified {}", args.base_url);
    println!("  compose hash: {}", verified.compose_hash);
    if verified.simulated {
        println!("  quote: SIMULATED (development stack, NOT confidential)");
    }
    // 2. pinned: every connection of this client must show one of these certificates
    for leaf in &verified.pinned_leaves {
        println!("  pinned certificate: sha256 {leaf}");
    }
    // 3. run, over pinned connections
    let account = anonymous
        .new_account(&NewAccountRequest {
            account_name: "verify-pin-run example".into(),
            account_description: None,
            email: None,
        })
        .await?;
    println!("account created; its wallet: {}", account.wallet_address);
    let keyed = client(args, Some(&account.api_key))?;
    let params = serde_json::value::to_raw_value(&serde_json::json!({ "n": 21 }))
        .map_err(|e| ClientError::Config(e.to_string()))?;
    let answer = keyed
        .lit_action(&LitActionRequest {
            code: Some(ACTION.into()),
            ipfs_id: None,
            js_params: Some(params),
        })
        .await?;
    if answer.has_error {
        let why = answer
            .error
            .map_or_else(|| "no error given".to_owned(), |e| e.message);
        return Err(ClientError::Config(format!("the action failed: {why}")));
    }
    print!("action logs: {}", answer.logs);
    println!("action response: {}", answer.response);
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(usage) => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    match verify_pin_run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("verify-pin-run: {err}");
            ExitCode::FAILURE
        }
    }
}
