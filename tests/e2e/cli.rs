//! `appliance-cli` (`client/cli`) end to end, as an operator would run it, against the
//! whole attested chain on one machine (`e2e::attested::AttestedStack`): a profile stored
//! with mode 0600, `verify`, an account created and its key saved, then keys, groups,
//! wallets, actions and billing, every `--json` output parsed, and the documented exit
//! statuses for a deployment that does not verify, a refused request, a failing action
//! and an unsafe profile file; `--os-measurements` and `--allow-unpinned-os` (flags and
//! profile settings) decide the `os-image` check of a real dstack quote (the near-mpc
//! deployment's, served through a relay) and leave the simulated dev stack's N/A. One
//! shell holds the CLI's `APPLIANCE_CLI_*` variables and runs the appliance too: the
//! server starts with them set, and the CLI works from that same environment.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use e2e::attested::{AttestedStack, DOMAIN};
use e2e::relay::{Relay, Tamper};
use e2e::{Appliance, Launch};
use serde_json::{Value, json};

/// The CLI, with its own config directory and none of the caller's variables.
struct Cli {
    bin: PathBuf,
    config: tempfile::TempDir,
}

impl Cli {
    fn new() -> Self {
        Self {
            bin: e2e::binary("appliance-cli"),
            config: tempfile::tempdir().unwrap(),
        }
    }

    fn dir(&self) -> PathBuf {
        self.config.path().join("appliance-cli")
    }

    fn file(&self) -> PathBuf {
        self.dir().join("profiles.toml")
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(&self.bin)
            .args(args)
            .env_clear()
            .env("APPLIANCE_CLI_CONFIG_DIR", self.dir())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .output()
            .unwrap()
    }

    /// Runs a command that must succeed, and returns its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "appliance-cli {args:?}: {:?}\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains('\r'),
            "progress on a stderr that is not a terminal: {stderr:?}"
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs a `--json` command that must succeed, and parses its stdout.
    fn json(&self, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let text = self.ok(&all);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"))
    }

    /// Runs a command that must fail with exit status `code`; returns stderr.
    fn fails(&self, code: i32, args: &[&str]) -> String {
        let out = self.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(
            out.status.code(),
            Some(code),
            "appliance-cli {args:?}\nstdout: {}\nstderr: {stderr}",
            String::from_utf8_lossy(&out.stdout)
        );
        stderr
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn profile_args(stack: &AttestedStack) -> Vec<String> {
    stack.cli_profile_args()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_session_from_profile_to_action() {
    let stack = AttestedStack::start().await;
    let cli = Cli::new();

    // A command before any profile exists says how to make one.
    let err = cli.fails(6, &["groups", "list"]);
    assert!(err.contains("profile set"), "{err}");

    // The profile: stored with mode 0600 in a 0700 directory, the key never shown.
    let set = profile_args(&stack);
    let shown = cli.json(&strs(&set));
    assert_eq!(shown["settings"]["url"], Value::String(stack.base.clone()));
    assert_eq!(mode(&cli.file()), 0o600);
    assert_eq!(mode(&cli.dir()), 0o700);

    // verify: every check passes, the report says simulated.
    let report = cli.json(&["verify"]);
    assert_eq!(report["report"]["ok"], Value::Bool(true), "{report}");
    assert_eq!(report["simulated"], Value::Bool(true));
    let text = cli.ok(&["verify"]);
    // A simulated quote has no OS measurement (`os-image` N/A): verified for development.
    assert!(text.contains("verified for DEVELOPMENT only"), "{text}");
    assert!(text.contains("NOT confidential"), "{text}");

    // A call that needs a key, with none stored, fails locally.
    cli.fails(6, &["groups", "list"]);

    // account new --save: the key lands in the profile, which stays private.
    let account = cli.json(&["account", "new", "--name", "cli", "--save"]);
    let key = account["api_key"].as_str().unwrap().to_owned();
    assert!(std::fs::read_to_string(cli.file()).unwrap().contains(&key));
    assert_eq!(mode(&cli.file()), 0o600);
    let show = cli.ok(&["profile", "show"]);
    assert!(!show.contains(&key), "profile show printed the key");
    assert!(show.contains("(set, not shown)"), "{show}");
    assert_eq!(cli.json(&["account", "exists"]), Value::Bool(true));

    // Wallets and groups.
    let wallet = cli.json(&["wallets", "new", "--name", "hot"]);
    let address = wallet["wallet_address"].as_str().unwrap().to_owned();
    let pkp = wallet["pkp_id"].as_str().unwrap().to_owned();
    let listed = cli.json(&["wallets", "list"]);
    // The account's own wallet, then the new one.
    let hot: Vec<&Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["wallet_address"] == Value::String(address.clone()))
        .collect();
    assert_eq!(hot.len(), 1, "{listed}");
    assert_eq!(hot[0]["name"], Value::String("hot".into()));
    let table = cli.ok(&["wallets", "list"]);
    assert!(table.starts_with("ID "), "{table}");
    assert!(table.contains(&address) && table.contains("hot"), "{table}");

    let group = cli.json(&["groups", "add", "--name", "ops"]);
    let group_id = group["group_id"].as_str().unwrap().to_owned();
    cli.json(&["groups", "add-wallet", &group_id, &pkp]);
    let in_group = cli.json(&["wallets", "list", "--group", &group_id]);
    assert_eq!(
        in_group[0]["pkp_id"],
        Value::String(pkp.clone()),
        "{in_group}"
    );
    let groups = cli.ok(&["groups", "list"]);
    assert!(groups.contains("ops"), "{groups}");

    // Actions: register a file in the group, list it, run it with parameters.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("add.js");
    std::fs::write(&file, "async function main(p) { return p.a + p.b; }").unwrap();
    let file = file.display().to_string();
    let added = cli.json(&[
        "actions", "add", &file, "--name", "adder", "--group", &group_id,
    ]);
    let cid = added["ipfs_cid"].as_str().unwrap().to_owned();
    assert!(cid.starts_with("Qm"), "{added}");
    let actions = cli.json(&["actions", "list", "--group", &group_id]);
    assert_eq!(
        actions[0]["ipfs_cid"],
        Value::String(cid.clone()),
        "{actions}"
    );
    let ran = cli.json(&["actions", "run", &file, "--params", r#"{"a":2,"b":40}"#]);
    assert_eq!(ran["response"], serde_json::json!(42), "{ran}");
    let ran = cli.json(&[
        "actions",
        "run",
        "--cid",
        &cid,
        "--params",
        r#"{"a":1,"b":1}"#,
    ]);
    assert_eq!(ran["response"], serde_json::json!(2), "{ran}");
    // An action that throws: its output is printed, and the exit status says so.
    let bad = dir.path().join("bad.js");
    std::fs::write(&bad, "async function main() { throw new Error('boom'); }").unwrap();
    let err = cli.fails(7, &["actions", "run", bad.to_str().unwrap()]);
    assert!(err.contains("boom"), "{err}");
    cli.fails(1, &["actions", "run", &file, "--params", "{not json"]);

    // Usage keys: add, list, update, remove.
    let usage = cli.json(&[
        "keys",
        "add",
        "--name",
        "runner",
        "--execute-in-group",
        &group_id,
    ]);
    let usage_key = usage["usage_api_key"].as_str().unwrap().to_owned();
    let keys = cli.json(&["keys", "list"]);
    assert_eq!(keys[0]["name"], Value::String("runner".into()), "{keys}");
    assert_eq!(
        keys[0]["execute_in_groups"][0],
        Value::String(group_id.clone())
    );
    cli.json(&[
        "keys",
        "update",
        &usage_key,
        "--name",
        "runner2",
        "--can-create-pkps",
    ]);
    let keys = cli.json(&["keys", "list"]);
    assert_eq!(keys[0]["name"], Value::String("runner2".into()), "{keys}");
    assert_eq!(keys[0]["can_create_pkps"], Value::Bool(true));
    assert_eq!(keys[0]["execute_in_groups"], serde_json::json!([]));
    // The usage key works for this run only, with --api-key.
    cli.json(&["--api-key", &usage_key, "wallets", "new"]);
    cli.json(&["keys", "remove", &usage_key]);
    assert_eq!(cli.json(&["keys", "list"]), serde_json::json!([]));
    // A removed key is refused by the server: exit status 4.
    let err = cli.fails(4, &["--api-key", &usage_key, "wallets", "list"]);
    assert!(err.contains("401") || err.contains("403"), "{err}");

    // Billing.
    let prices = cli.json(&["billing", "prices"]);
    assert!(prices["billing_enabled"].is_boolean(), "{prices}");
    let balance = cli.json(&["billing", "balance"]);
    assert!(balance["balance_cents"].is_u64(), "{balance}");

    // Removing the group.
    cli.json(&["groups", "remove", &group_id]);
    assert_eq!(cli.json(&["groups", "list"]), serde_json::json!([]));

    // A profile that expects another compose hash: NOT verified (3), nothing sent.
    let mut strict = vec!["--profile".to_owned(), "strict".to_owned()];
    strict.extend(profile_args(&stack));
    strict.extend(["--compose-hash".to_owned(), "00".repeat(32)]);
    cli.json(&strs(&strict));
    let err = cli.fails(3, &["--profile", "strict", "verify"]);
    assert!(err.contains("compose hash"), "{err}");

    os_measurements_decide_the_os_image_check(&stack, &cli).await;

    // An unreachable deployment: exit status 5.
    let out = cli.run(&["--json", "--url", "https://127.0.0.1:1", "verify"]);
    assert_eq!(out.status.code(), Some(5), "{out:?}");

    // A profile file that others can read is refused, not used.
    std::fs::set_permissions(cli.file(), std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = cli.fails(6, &["groups", "list"]);
    assert!(err.contains("chmod 600"), "{err}");
    assert!(!err.contains(&key), "the error printed the key");
}

/// An API key of the right shape that no appliance issued (one from another deployment).
const STALE_KEY: &str = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=";

/// A user who set up `appliance-cli` as its README says (`APPLIANCE_CLI_URL`,
/// `APPLIANCE_CLI_API_KEY`, `APPLIANCE_CLI_PROFILE`, `APPLIANCE_CLI_CONFIG_DIR` exported)
/// starts a dev appliance from the same shell: it starts (it skips the CLI's variables),
/// and the CLI, run with exactly that environment, verifies it, is refused with the
/// stale key the environment holds, creates an account, and works once the environment
/// holds the new key. The CLI's former names stop the server with the rename to make.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shell_holds_the_clis_variables_and_runs_the_appliance() {
    let config = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let port = e2e::pebble::free_port();
    let config_dir = config.path().join("appliance-cli").display().to_string();
    let mut shell: Vec<(String, String)> = [
        ("APPLIANCE_CLI_URL", format!("https://localhost:{port}")),
        ("APPLIANCE_CLI_API_KEY", STALE_KEY.to_owned()),
        ("APPLIANCE_CLI_PROFILE", "dev".to_owned()),
        ("APPLIANCE_CLI_CONFIG_DIR", config_dir.clone()),
        // Where scripts/dev would listen, as an operator sets it.
        ("APPLIANCE_LISTEN", format!("127.0.0.1:{port}")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();

    // The server, as `scripts/dev` runs it (`appliance dev`), in that environment.
    let app = Appliance::launch(data.path(), Launch::DevWith { env: shell.clone() }).await;
    assert!(app.base_url.contains(&port.to_string()), "{}", app.base_url);

    // The CLI, in the same environment (and nothing else of this process's).
    let cli = |shell: &[(String, String)], args: &[&str]| -> Output {
        Command::new(e2e::binary("appliance-cli"))
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(shell.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .unwrap()
    };
    let ok = |out: Output| -> Value {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{:?}\nstdout: {}\nstderr: {stderr}\nappliance log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            app.log()
        );
        assert!(!stderr.contains("warning"), "{stderr}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let pem = app.data_dir.join("tls").join("self-signed.pem");
    let pem = pem.display().to_string();
    // The profile named by APPLIANCE_CLI_PROFILE, with the URL of APPLIANCE_CLI_URL, in
    // the directory of APPLIANCE_CLI_CONFIG_DIR.
    let shown = ok(cli(
        &shell,
        &[
            "--json",
            "profile",
            "set",
            "--ca-file",
            &pem,
            "--allow-simulated",
            "true",
            "--skip",
            "governance",
        ],
    ));
    assert_eq!(shown["profile"], "dev", "{shown}");
    assert_eq!(
        shown["settings"]["url"],
        format!("https://localhost:{port}")
    );
    assert!(Path::new(&config_dir).join("profiles.toml").exists());

    let report = ok(cli(&shell, &["--json", "verify"]));
    assert_eq!(report["report"]["ok"], Value::Bool(true), "{report}");

    // The stale key from the environment is what the CLI sends: refused (exit 4).
    let refused = cli(&shell, &["--json", "groups", "list"]);
    assert_eq!(refused.status.code(), Some(4), "{refused:?}");

    let account = ok(cli(
        &shell,
        &["--json", "account", "new", "--name", "shell"],
    ));
    let key = account["api_key"].as_str().unwrap().to_owned();
    for (k, v) in &mut shell {
        if k == "APPLIANCE_CLI_API_KEY" {
            v.clone_from(&key);
        }
    }
    let wallet = ok(cli(&shell, &["--json", "wallets", "new", "--name", "w"]));
    let listed = ok(cli(&shell, &["--json", "wallets", "list"]));
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["pkp_id"] == wallet["pkp_id"]),
        "{listed}"
    );
    // `profile set` stored the key the environment held then (as documented); the new
    // key reached the CLI through the environment alone.
    let stored = std::fs::read_to_string(Path::new(&config_dir).join("profiles.toml")).unwrap();
    assert!(stored.contains(STALE_KEY) && !stored.contains(&key));

    // The CLI's former names: the server refuses to start and says what to rename.
    for (old, new) in [
        ("APPLIANCE_URL", "APPLIANCE_CLI_URL"),
        ("APPLIANCE_API_KEY", "APPLIANCE_CLI_API_KEY"),
    ] {
        let out = e2e::appliance_command()
            .arg("print-config")
            .envs(shell.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env(old, "x")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{old}: {stderr}");
        assert!(
            stderr.contains(&format!("rename it {new}")),
            "{old}: {stderr}"
        );
    }
    let out = e2e::appliance_command()
        .arg("print-config")
        .envs(shell.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(app);
}

/// A long wait shows progress on a terminal (here a pseudo-terminal from util-linux's
/// `script`), and nothing when stderr is not a terminal. The deployment here accepts
/// connections and never answers, so the verification waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_shows_on_a_terminal_only() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://127.0.0.1:{}", silent.local_addr().unwrap().port());
    let cli = Cli::new();
    let command = format!("{} --url {url} verify", cli.bin.display());
    let run = |tty: bool| {
        let mut cmd = if tty {
            let mut c = Command::new("script");
            c.args(["-qefc", &command, "/dev/null"]);
            c
        } else {
            let mut c = Command::new(&cli.bin);
            c.args(["--url", &url, "verify"]);
            c
        };
        let mut child = cmd
            .env("APPLIANCE_CLI_CONFIG_DIR", cli.dir())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let on_tty = run(true);
    assert!(
        on_tty.contains(&format!("verifying {url}")) && on_tty.contains(" s)"),
        "no progress on a terminal: {on_tty:?}"
    );
    let piped = run(false);
    assert!(
        !piped.contains("verifying"),
        "progress without a terminal: {piped:?}"
    );
    drop(silent);
}

/// The near-mpc deployment's real evidence (`evidence/tests/data/dstack-near-mpc`): its
/// `/info` and `/attestation` bodies, and its OS registers as its guest agent reported
/// them (`tcb_info.json`).
fn near_mpc() -> (Value, Value, Value) {
    let dir = e2e::workspace_root().join("evidence/tests/data/dstack-near-mpc");
    let read = |f: &str| std::fs::read(dir.join(f)).unwrap();
    let tcb: Value = serde_json::from_slice(&read("tcb_info.json")).unwrap();
    let quote: Vec<u8> = serde_json::from_slice(&read("quote.json")).unwrap();
    let info = json!({
        "app_id": "2911e1f733466216dedb862d6d669e11256ee7a3",
        "instance_id": "",
        "compose_hash": tcb["compose_hash"],
        "tcb_info": tcb,
    });
    let attestation = json!({
        "quote": hex::encode(quote),
        "event_log": tcb["event_log"].to_string(),
        "vm_config": "",
    });
    (info, attestation, tcb)
}

/// A policy file (as `evidence os-measure` writes one) for the near-mpc OS, with
/// `rtmr1` replaced if given.
fn near_policy(tcb: &Value, rtmr1: Option<&str>) -> String {
    json!({"entries": [{
        "os_image_hash": tcb["os_image_hash"],
        "vm_shape": {},
        "mrtd": [tcb["mrtd"]],
        "rtmr0": tcb["rtmr0"],
        "rtmr1": rtmr1.map_or(tcb["rtmr1"].clone(), |r| json!(r)),
        "rtmr2": tcb["rtmr2"],
    }]})
    .to_string()
}

/// The `os-image` line of a `--json verify` report (the report is on stdout whether or
/// not the deployment verified).
fn os_image_check(out: &Output) -> (String, String) {
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let checks = v["checks"].as_array().or(v["report"]["checks"].as_array());
    let c = checks
        .and_then(|cs| cs.iter().find(|c| c["id"] == "os-image"))
        .unwrap_or_else(|| panic!("no os-image check in {v}"));
    (
        c["status"].as_str().unwrap().to_owned(),
        c["detail"].as_str().unwrap().to_owned(),
    )
}

/// `--os-measurements` and `--allow-unpinned-os`, as flags and as profile settings, reach
/// the verification: on a genuine quote (the near-mpc deployment's, served in place of
/// the dev stack's `/info` and `/attestation` by a relay) a policy that does not match
/// fails `os-image` and names the register, one that matches passes, none fails unless
/// unpinned is accepted; on the simulated dev stack the check stays N/A. (The near-mpc
/// evidence fails other checks here, so every genuine-quote run exits 3: what is
/// asserted is the `os-image` line.)
async fn os_measurements_decide_the_os_image_check(stack: &AttestedStack, cli: &Cli) {
    let (info, attestation, tcb) = near_mpc();
    let files = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let p = files.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let rtmr1 = tcb["rtmr1"].as_str().unwrap();
    let off = format!(
        "{}{}",
        &rtmr1[..95],
        if rtmr1.ends_with('0') { '1' } else { '0' }
    );
    let matching = file("match.json", &near_policy(&tcb, None));
    let wrong = file("wrong.json", &near_policy(&tcb, Some(&off)));
    let malformed = file(
        "bad.json",
        r#"{"entries": [{"os_image_hash": "00", "mrtd": [], "rtmr1": "00", "rtmr2": "00"}]}"#,
    );

    // The simulated dev stack: os-image N/A whatever the policy says; verified.
    let dev = cli.json(&["verify", "--os-measurements", &wrong]);
    assert_eq!(dev["report"]["ok"], Value::Bool(true), "{dev}");
    let (status, detail) =
        os_image_check(&cli.run(&["--json", "verify", "--os-measurements", &wrong]));
    assert_eq!(status, "n/a", "{detail}");
    assert!(detail.contains("simulated quote"), "{detail}");
    // A file that is not a policy: the profile's run is unusable (6), and says why.
    let err = cli.fails(6, &["verify", "--os-measurements", &malformed]);
    assert!(err.contains("bad.json") && err.contains("entry 0"), "{err}");

    // A genuine quote, through a relay that answers with the near-mpc evidence.
    let tamper: Tamper = Arc::new(move |path: &str, body: Vec<u8>| {
        if path == "/info" {
            info.to_string().into_bytes()
        } else if path.starts_with("/attestation") {
            attestation.to_string().into_bytes()
        } else {
            body
        }
    });
    let relay = Relay::start(
        DOMAIN,
        stack.plain.clone(),
        stack.base.clone(),
        Some(tamper),
    )
    .await;
    let roots = file("roots.pem", &format!("{}{}", stack.root_pem, relay.ca_pem));
    let url = format!("https://{DOMAIN}:{}", relay.port);
    let near = ["--profile", "near"];
    cli.json(
        &[
            &near[..],
            &["profile", "set", "--url", &url, "--ca-file", &roots][..],
        ]
        .concat(),
    );
    let verify = |extra: &[&str]| {
        let out = cli.run(&[&near[..], &["--json", "verify"][..], extra].concat());
        assert_eq!(out.status.code(), Some(3), "{out:?}");
        os_image_check(&out)
    };

    let (status, detail) = verify(&["--os-measurements", &wrong]);
    assert_eq!(status, "fail", "{detail}");
    assert!(detail.contains("differs in RTMR1"), "{detail}");
    let (status, detail) = verify(&["--os-measurements", &matching]);
    assert_eq!(status, "pass", "{detail}");
    assert!(detail.contains("policy entry 0 matches"), "{detail}");
    // No policy: the OS is not pinned, a failure that says how to pin it or accept it.
    let (status, detail) = verify(&[]);
    assert_eq!(status, "fail", "{detail}");
    assert!(
        detail.contains("--os-measurements") && detail.contains("--allow-unpinned-os"),
        "{detail}"
    );
    let (status, detail) = verify(&["--allow-unpinned-os"]);
    assert_eq!(status, "n/a", "{detail}");
    assert!(detail.contains("accepted unpinned"), "{detail}");

    // The same from the profile: stored (as an absolute path), used, overridden, cleared.
    let shown = cli.json(
        &[
            &near[..],
            &["profile", "set", "--os-measurements", &matching][..],
        ]
        .concat(),
    );
    assert_eq!(
        shown["settings"]["os_measurements"],
        Value::String(matching.clone()),
        "{shown}"
    );
    assert_eq!(verify(&[]).0, "pass");
    assert_eq!(verify(&["--os-measurements", &wrong]).0, "fail");
    cli.fails(
        6,
        &[
            &near[..],
            &["profile", "set", "--os-measurements", &malformed][..],
        ]
        .concat(),
    );
    let shown = cli.json(
        &[
            &near[..],
            &[
                "profile",
                "set",
                "--clear-os-measurements",
                "--allow-unpinned-os",
            ][..],
        ]
        .concat(),
    );
    assert_eq!(shown["settings"].get("os_measurements"), None, "{shown}");
    assert_eq!(
        shown["settings"]["allow_unpinned_os"],
        Value::Bool(true),
        "{shown}"
    );
    assert_eq!(verify(&[]).0, "n/a");
    assert_eq!(verify(&["--allow-unpinned-os=false"]).0, "fail");
}
