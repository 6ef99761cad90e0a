//! The image under a real container engine: the services of the rendered compose file,
//! run as it describes them (users, groups, read-only root, tmpfs, volumes, configs, ports,
//! network mode, start order, restart policy), with a stand-in for the dstack guest agent
//! in a container of its own, and the key boundary checked from inside each container;
//! then a signing action, keyservice killed and recovered, and an upgrade to another
//! compose hash with a resealed root.
//!
//! The test starts its own `dockerd` (`e2e::container::Engine`; skipped with a printed
//! `SKIPPED:` where none can start, see there), takes the release image `scripts/image`
//! wrote (`CONTAINER_TEST_IMAGE`: `scripts/test` sets it to the image of its
//! reproducibility stage, the one whose digest two clones agreed on) or, when that is
//! not set, builds one from this target directory's static binaries (`static_bin_dir`:
//! the release image takes nothing else) with the `oci-image` library (what
//! `image-build` runs), loads it,
//! renders the compose with `compose-pin`'s library pinned to the image's digest, and
//! translates it generically (`e2e::container::compose`): nothing here names a service's
//! flags, so a change to `compose/docker-compose.yml` is tested as it is written, and a
//! compose key the translator does not know fails the test.
//!
//! The probes run `container-probe` (this package's test-only binary, compiled static by
//! the test like the image's binaries, bind-mounted
//! read-only into every container as scaffolding) with `docker exec`, so each attempt is
//! made with the container's own user, groups and mounts. Every denial has a control that
//! succeeds, so that no check passes because the probe itself is broken.
//!
//! The guest agent is `test_support::dstack_agent` as its own binary,
//! `dstack-agent-standin` (`tests/support/src/bin/dstack-agent-standin.rs`, compiled static
//! by the test with cargo, `static_agent`), run in a container of the loaded image with the
//! binary bind-mounted read-only (`AgentContainer`): its socket, in a host folder, is what
//! the compose's `/var/run/dstack.sock` bind mount gets, so only keyservice reaches it; it
//! logs every key request to a file there, so the test sees which sealing keys were asked
//! for.
//!
//! After the boundary checks, with the account `new_account` made:
//! * a signing action (`Lit.Actions.signEcdsa` with the account's wallet) whose signature
//!   recovers to the wallet's address;
//! * keyservice's process killed with SIGKILL from the host (a crash): the engine's restart
//!   policy (`restart: always`) brings it back, it opens the same sealed file (no second
//!   root) and the wallet signs the same signature. Then `docker kill` (which the engine
//!   counts as an operator's stop: no restart): while it is down, `new_account` answers 503
//!   at once, a signing action ends with "the key service is unavailable", `/health` says
//!   `unavailable` and a request needing no key is served; `docker start` and it signs
//!   the same again;
//! * the upgrade: a second compose (another appliance configuration, so another compose
//!   hash) with an agent reporting it. Its keyservice, as composed and on the same volumes,
//!   refuses the old root (naming both hashes) and makes none of its own; the running
//!   keyservice refuses to reseal to a hash off the allow-list, then `docker exec …
//!   keyservice reseal --platform dstack --to NEW --allow-list` (the list a read-only
//!   scaffolding mount) writes `root.sealed.<first 16 hex of NEW>` beside the old file; the
//!   old containers are stopped and removed, the new compose's started on the same
//!   volumes, and the wallet made before signs the same signature (same address).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use compose_pin::{ImageRef, RenderOptions, TEMPLATE, render};
use e2e::container::{Context, Engine, Plan, translate};
use e2e::{bin_dir, binary, client_trusting, read, workspace_root};
use serde_json::{Value, json};

/// The measured appliance configuration of the test: the defaults (HTTPS on
/// 0.0.0.0:8443, data in /var/lib/appliance, a self-signed certificate for localhost and
/// 127.0.0.1, keyservice at /run/keyservice/keyservice.sock, no settlement chain — writes
/// wait in the outbox —, billing off), with two workers instead of two per CPU.
const APPLIANCE_CONFIG: &str = "\
# container test: the defaults, two action workers
[actions]
workers = 2
";

/// The compose project (prefix of containers, volumes and the network).
const PROJECT: &str = "boundary";

/// Where the probe is mounted in every container.
const PROBE: &str = "/probe/container-probe";

/// Checks written for the final layout of issue 17 that cannot hold on this branch yet,
/// each with what it waits for. A pending check that fails is printed as `PENDING` and
/// does not fail the test; one that holds is printed too, as a reminder to remove it from
/// this list.
const PENDING: &[(&str, &str)] = &[];

/// Writes a line to standard error past the test harness's capture, so that a skip, a
/// pending check and the timings show in every run, not only with `--nocapture`.
fn say(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// errno values the probes report.
const ENOENT: i32 = 2;
const EACCES: i32 = 13;
const EROFS: i32 = 30;

/// What one probe printed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Probe {
    Ok(String),
    Err(i32),
    /// The probe could not run (no such container, …).
    Broken(String),
}

/// What a check expects.
enum Expect {
    /// Succeeds, and its output contains each of these.
    Ok(&'static [&'static str]),
    /// `id` succeeds with this uid and gid, and exactly these groups besides the gid (the
    /// kernel's list of a container process also holds its primary group).
    Identity {
        uid: u32,
        gid: u32,
        others: &'static [u32],
    },
    /// Succeeds, and its output does not contain this (comma-separated item).
    OkWithout(&'static str),
    /// Fails with this errno.
    Errno(i32),
    /// Fails with any errno.
    Fails,
}

struct Check {
    /// A group of checks named in [`PENDING`] (or "" for none).
    pending: &'static str,
    service: &'static str,
    op: &'static str,
    arg: String,
    expect: Expect,
    why: &'static str,
}

fn check(
    service: &'static str,
    op: &'static str,
    arg: &str,
    expect: Expect,
    why: &'static str,
) -> Check {
    Check {
        pending: "",
        service,
        op,
        arg: arg.to_owned(),
        expect,
        why,
    }
}

fn pending(group: &'static str, mut c: Check) -> Check {
    c.pending = group;
    c
}

fn run_probe(engine: &Engine, plan: &Plan, service: &str, op: &str, arg: &str) -> Probe {
    let Some(svc) = plan.service(service) else {
        return Probe::Broken(format!("no service {service:?} in the compose"));
    };
    let mut args = vec!["exec", svc.container.as_str(), PROBE, op];
    if !arg.is_empty() {
        args.push(arg);
    }
    let out = engine.docker(&args);
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if let Some(rest) = stdout.strip_prefix("ok") {
        return Probe::Ok(rest.trim().to_owned());
    }
    if let Some(errno) = stdout
        .strip_prefix("err errno=")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
    {
        return Probe::Err(errno);
    }
    Probe::Broken(format!(
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

fn holds(expect: &Expect, probe: &Probe) -> bool {
    match (expect, probe) {
        (Expect::Ok(needles), Probe::Ok(out)) => needles.iter().all(|n| out.contains(n)),
        (Expect::Identity { uid, gid, others }, Probe::Ok(out)) => {
            identity(out) == Some((*uid, *gid, others.to_vec()))
        }
        (Expect::OkWithout(item), Probe::Ok(out)) => !out.split(',').any(|i| i == *item),
        (Expect::Errno(want), Probe::Err(got)) => want == got,
        (Expect::Fails, Probe::Err(_)) => true,
        _ => false,
    }
}

/// `uid=U gid=G groups=A,B` → (U, G, the groups other than G, sorted).
fn identity(out: &str) -> Option<(u32, u32, Vec<u32>)> {
    let mut fields = out.split(' ');
    let uid = fields.next()?.strip_prefix("uid=")?.parse().ok()?;
    let gid: u32 = fields.next()?.strip_prefix("gid=")?.parse().ok()?;
    let groups = fields.next()?.strip_prefix("groups=")?;
    let mut others: Vec<u32> = groups
        .split(',')
        .filter(|g| !g.is_empty())
        .map(|g| g.parse().ok())
        .collect::<Option<_>>()?;
    others.retain(|g| *g != gid);
    others.sort_unstable();
    Some((uid, gid, others))
}

/// The loaded image for `reference` (`NAME@sha256:<manifest digest>`): `docker load` keeps
/// no manifest digest (the engine's image id is the config digest), so the pin is checked
/// against the manifest that was built and the image is run by its config digest.
fn image_resolver(
    pinned: ImageRef,
    config_digest: String,
) -> impl Fn(&str) -> Result<String, String> {
    move |reference: &str| {
        let asked: ImageRef = reference
            .parse()
            .map_err(|e| format!("not a pinned reference: {e}"))?;
        if asked != pinned {
            return Err(format!(
                "pins {asked}, but the image built and loaded is {pinned}"
            ));
        }
        Ok(config_digest.clone())
    }
}

/// The command that builds the image's binaries statically for this test when no release
/// image is named by [`RELEASE_IMAGE`] (run it before `cargo test`): the release build's
/// linking (gnu target, `+crt-static`) in the test profile.
const STATIC_BUILD: &str = "RUSTFLAGS='-Ctarget-feature=+crt-static --cfg=getrandom_backend=\"linux_getrandom\"' cargo build --locked \
     --target x86_64-unknown-linux-gnu -p appliance -p keyservice -p action-runtime -p worker-launcher -p evidence";

/// Where [`STATIC_BUILD`] puts the binaries: `<target>/x86_64-unknown-linux-gnu/debug`
/// beside this test's `<target>/debug`. Each is checked fresh against its package's
/// sources, as [`binary`] checks the dynamic ones.
fn static_bin_dir(names: &[String]) -> PathBuf {
    let debug = bin_dir();
    let target = debug.parent().expect("<target>/debug has a parent");
    let dir = target
        .join(oci_image::reproduce::TARGET_TRIPLE)
        .join(debug.file_name().expect("profile directory"));
    for name in names {
        binary(name); // the test build's, fresh: the same check for the dynamic one
        let package = match name.as_str() {
            "action-worker" => "appliance/runtime",
            "worker-launcher" => "appliance/worker-launcher",
            other => other,
        };
        let sources = workspace_root().join(package).join("src");
        let path = dir.join(name);
        let built = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .unwrap_or_else(|_| panic!("{} is not built; run: {STATIC_BUILD}", path.display()));
        assert!(
            test_support::binaries::newest_mtime(&sources).is_none_or(|newest| built >= newest),
            "{} is older than {}; run: {STATIC_BUILD}",
            path.display(),
            sources.display()
        );
    }
    dir
}

/// `container-probe` (std only) compiled statically into `dir`, as the image's binaries
/// are: the image carries no loader, so the dynamic test build of it could not start there.
fn static_probe(dir: &Path) -> PathBuf {
    let out = dir.join("container-probe");
    let source = workspace_root().join("tests/probe/container_probe.rs");
    let built = oci_image::reproduce::rustc_static(&source, &out)
        .current_dir(workspace_root())
        .output()
        .expect("rustc runs");
    assert!(
        built.status.success(),
        "container-probe: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    out
}

/// The variable naming a release image's output directory (`scripts/image DIR`: `DIR/oci/`,
/// `DIR/appliance-image.tar`, `DIR/image-digest`) for the test to run instead of building
/// one from the test profile's static binaries.
const RELEASE_IMAGE: &str = "CONTAINER_TEST_IMAGE";

/// The image the test runs: the release image named by [`RELEASE_IMAGE`], or one built
/// under `out` from this target directory's static binaries. Returns (pinned reference,
/// config digest, docker archive).
fn the_image(out: &Path) -> (ImageRef, String, PathBuf) {
    match std::env::var_os(RELEASE_IMAGE) {
        Some(dir) => {
            let (pinned, config, archive) = release_image(Path::new(&dir));
            say(&format!(
                "container test: the release image {pinned} from {}",
                Path::new(&dir).display()
            ));
            (pinned, config, archive)
        }
        None => {
            say(&format!(
                "container test: an image of the test profile's static binaries \
                 ({RELEASE_IMAGE} is not set)"
            ));
            build_image(out)
        }
    }
}

/// A release image as `scripts/image DIR` wrote it, checked: `image-digest` names a
/// manifest blob of the layout whose bytes hash to it, and that manifest names the config.
fn release_image(dir: &Path) -> (ImageRef, String, PathBuf) {
    use sha2::Digest as _;
    let digest_file = dir.join("image-digest");
    let digest = std::fs::read_to_string(&digest_file)
        .unwrap_or_else(|e| panic!("{}: {e}", digest_file.display()))
        .trim()
        .to_owned();
    let hex = digest
        .strip_prefix("sha256:")
        .unwrap_or_else(|| panic!("{}: not sha256:<hex>: {digest}", dir.display()));
    let manifest_path = dir.join("oci/blobs/sha256").join(hex);
    let manifest = std::fs::read(&manifest_path)
        .unwrap_or_else(|e| panic!("{}: {e}", manifest_path.display()));
    assert_eq!(
        hex::encode(sha2::Sha256::digest(&manifest)),
        hex,
        "the manifest blob does not hash to the image digest"
    );
    let manifest: Value = serde_json::from_slice(&manifest).expect("manifest JSON");
    let config = manifest["config"]["digest"]
        .as_str()
        .expect("the manifest names its config")
        .to_owned();
    let archive = dir.join("appliance-image.tar");
    assert!(archive.is_file(), "{} is missing", archive.display());
    let pinned: ImageRef = format!("appliance@{digest}")
        .parse()
        .expect("pinned reference");
    (pinned, config, archive)
}

/// Builds the image from this target directory's static binaries (checked fresh), writes
/// the layout under `out`; returns (pinned reference, config digest, docker archive).
fn build_image(out: &Path) -> (ImageRef, String, PathBuf) {
    let names: Vec<String> = oci_image::DEFAULT_BINARIES
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let dir = static_bin_dir(&names);
    let (binaries, _) = oci_image::binaries_in(&dir, &names, false).expect("binaries");
    // StaticOnly: a dynamic binary is refused, so the containers run with nothing of
    // this machine's system in their root file system.
    let spec = oci_image::ImageSpec {
        binaries,
        source_date_epoch: 1,
        libraries: oci_image::Libraries::StaticOnly,
        tag: "appliance:container-test".into(),
    };
    let image = oci_image::build(&spec).expect("image build");
    let written = oci_image::write_layout(&image, out, 1).expect("image layout");
    let pinned = ImageRef::new("appliance", image.digest()).expect("pinned reference");
    (pinned, image.config.digest_string(), written.archive)
}

/// The 32-byte app key the stand-in agent derives keys from (the KMS's app key in dstack:
/// the same for every version of the app, so a reseal can ask for the new version's
/// sealing key).
const AGENT_SEED: [u8; 32] = [7; 32];

/// Where the stand-in agent's binary is mounted in its container, and the folder (a host
/// folder, bind-mounted) where it keeps its socket, the compose it reports and its key log.
const AGENT_BIN: &str = "/agent/dstack-agent-standin";
const AGENT_DIR: &str = "/run/dstack";

/// Where the scaffolding folder (the reseal's allow-list) is mounted, read-only, in every
/// container.
const SCAFFOLD: &str = "/scaffold";

/// The measured appliance configuration of the upgrade: another configuration (three
/// workers), so another compose hash.
const APPLIANCE_CONFIG_V2: &str = "\
# container test, the upgrade: the defaults, three action workers
[actions]
workers = 3
";

/// The digest every signature of the test is made over.
const DIGEST: [u8; 32] = [0x5a; 32];

/// `dstack-agent-standin` (test-support's binary wrapping `test_support::dstack_agent`)
/// compiled statically, as [`STATIC_BUILD`] compiles the image's binaries (same flags, so
/// the two builds share their dependencies), copied into `dir`. It has dependencies, so
/// cargo builds it (not `rustc` alone, as for [`static_probe`]): about two minutes the
/// first time on the 2-core machine, nothing afterwards.
fn static_agent(dir: &Path) -> PathBuf {
    let debug = bin_dir();
    let target = debug.parent().expect("<target>/debug has a parent");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let mut command = std::process::Command::new(cargo);
    // What `cargo test` set for this test process describes this package, not the build:
    // left in, `CARGO_MANIFEST_DIR` alone makes ring (which tracks it) and everything
    // above it rebuild whenever this build and one from a shell alternate.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_MANIFEST_")
            || [
                "CARGO_CRATE_NAME",
                "CARGO_BIN_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
                "CARGO_RUSTC_CURRENT_DIR",
                "OUT_DIR",
            ]
            .contains(&name.as_ref())
        {
            command.env_remove(name.as_ref());
        }
    }
    let built = command
        .current_dir(workspace_root())
        .args([
            "build",
            "--locked",
            "--target",
            oci_image::reproduce::TARGET_TRIPLE,
            "-p",
            "test-support",
            "--bin",
            "dstack-agent-standin",
        ])
        .env("CARGO_TARGET_DIR", target)
        .env(
            "RUSTFLAGS",
            format!(
                "-Ctarget-feature=+crt-static {}",
                oci_image::reproduce::GETRANDOM_CFG
            ),
        )
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .output()
        .expect("cargo runs");
    assert!(
        built.status.success(),
        "static build of dstack-agent-standin: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let from = target
        .join(oci_image::reproduce::TARGET_TRIPLE)
        .join(debug.file_name().expect("profile directory"))
        .join("dstack-agent-standin");
    let out = dir.join("dstack-agent-standin");
    std::fs::copy(&from, &out).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    out
}

/// A stand-in guest agent running in a container of its own (from the loaded image, as
/// root, no network, read-only root), reporting one version's `app-compose.json`. Its
/// socket, the compose and its key log are in `dir` on the host; the socket file is what
/// the compose's `/var/run/dstack.sock` bind mount gets.
struct AgentContainer {
    name: String,
    dir: PathBuf,
}

impl AgentContainer {
    /// Starts the agent `name` for `compose` and waits until its socket accepts.
    fn start(
        engine: &Engine,
        image: &str,
        binary: &Path,
        dir: &Path,
        name: &str,
        compose: &compose_pin::Rendered,
    ) -> Self {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::create_dir_all(dir).expect("agent dir");
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::write(dir.join("app-compose.json"), compose.bytes()).expect("app-compose.json");
        let socket = dir.join("dstack.sock");
        let _ = std::fs::remove_file(&socket); // a previous agent's (killed) socket
        let binary_mount = format!(
            "type=bind,src={},dst={AGENT_BIN},readonly",
            binary.display()
        );
        let dir_mount = format!("type=bind,src={},dst={AGENT_DIR}", dir.display());
        let seed = hex::encode(AGENT_SEED);
        engine.docker_ok(&[
            "create",
            "--name",
            name,
            "--user",
            "0:0",
            "--network",
            "none",
            "--read-only",
            "--mount",
            &binary_mount,
            "--mount",
            &dir_mount,
            "--entrypoint",
            AGENT_BIN,
            image,
            &format!("{AGENT_DIR}/dstack.sock"),
            "666",
            &format!("{AGENT_DIR}/app-compose.json"),
            &seed,
            &format!("{AGENT_DIR}/key-requests.log"),
        ]);
        engine.docker_ok(&["start", name]);
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(
                Instant::now() < deadline,
                "the stand-in agent {name} did not listen within 30 s; logs:\n{}",
                engine.all_logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Self {
            name: name.to_owned(),
            dir: dir.to_owned(),
        }
    }

    /// The socket on the host (the stand-in for the compose's `/var/run/dstack.sock`).
    fn socket(&self) -> PathBuf {
        self.dir.join("dstack.sock")
    }

    /// `(path, purpose)` of every `/GetKey` request the agent answered so far (it writes
    /// them to its key log within 50 ms).
    fn key_requests(&self) -> Vec<(String, String)> {
        std::thread::sleep(Duration::from_millis(150));
        std::fs::read_to_string(self.dir.join("key-requests.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.split_once('\t'))
            .map(|(path, purpose)| (path.to_owned(), purpose.to_owned()))
            .collect()
    }

    /// Whether the agent was asked for the sealing key of `compose_hash`.
    fn sealing_key_asked(&self, compose_hash: &[u8; 32]) -> bool {
        let path = format!("keyservice/seal/v1/{}", hex::encode(compose_hash));
        self.key_requests()
            .iter()
            .any(|(p, purpose)| *p == path && purpose == "keyservice-root-sealing")
    }

    /// Kills and removes the container (the agent has no SIGTERM handler).
    fn remove(self, engine: &Engine) {
        engine.docker_ok(&["rm", "-f", &self.name]);
    }
}

/// Renders the compose with `config` as the measured appliance configuration.
fn render_with(config: &str, pinned: &ImageRef) -> (compose_pin::Rendered, String) {
    let rendered = render(
        TEMPLATE,
        &RenderOptions {
            appliance_config: config.to_owned(),
            ..RenderOptions::new(pinned.clone())
        },
    )
    .expect("compose-pin render");
    let app_compose: Value = serde_json::from_slice(rendered.bytes()).expect("app-compose.json");
    let yaml = app_compose["docker_compose_file"]
        .as_str()
        .expect("docker_compose_file")
        .to_owned();
    (rendered, yaml)
}

/// Creates and starts `plan`'s networks, volumes (both only if missing: an upgrade keeps
/// them) and services, dependencies first.
fn create_and_start(engine: &Engine, plan: &Plan) {
    for network in &plan.networks {
        if !engine
            .docker(&["network", "inspect", network])
            .status
            .success()
        {
            engine.docker_ok(&["network", "create", network]);
        }
    }
    for volume in plan.volumes.values() {
        engine.docker_ok(&["volume", "create", volume]);
    }
    for service in &plan.services {
        let mut args = vec!["create"];
        args.extend(service.create_args.iter().map(String::as_str));
        engine.docker_ok(&args);
        engine.docker_ok(&["start", &service.container]);
    }
}

/// Stops (SIGTERM, as `docker compose` does for an upgrade) and removes `plan`'s
/// containers; the volumes stay.
fn stop_and_remove(engine: &Engine, plan: &Plan) {
    let mut args = vec!["stop", "-t", "10"];
    args.extend(plan.services.iter().map(|s| s.container.as_str()));
    engine.docker_ok(&args);
    args.splice(0..3, ["rm"]);
    engine.docker_ok(&args);
}

/// The host folder of a named volume of `plan`.
fn volume_on_host(engine: &Engine, plan: &Plan, volume: &str) -> PathBuf {
    let name = plan
        .volumes
        .get(volume)
        .expect("the volume is in the compose");
    PathBuf::from(engine.docker_ok(&["volume", "inspect", "--format", "{{.Mountpoint}}", name]))
}

/// The names in keyservice's state volume that start with `root.sealed`, sorted.
fn sealed_roots(engine: &Engine, plan: &Plan) -> Vec<String> {
    let dir = volume_on_host(engine, plan, "keyservice-state");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("root.sealed"))
        .collect();
    names.sort();
    names
}

/// Waits until the appliance of `plan` answers `/health` with 200 over TLS on its
/// published port, trusting exactly its own self-signed certificate (read from its data
/// volume on the host); returns the client, the address and the health answer.
async fn api_of(engine: &Engine, plan: &Plan) -> (reqwest::Client, String, e2e::Reply) {
    let appliance = plan.service("appliance").expect("an appliance service");
    let port = appliance
        .ports
        .first()
        .map(|(_, container_port)| *container_port)
        .expect("the appliance publishes a port");
    let published = engine.docker_ok(&["port", &appliance.container, &port.to_string()]);
    let address = published
        .lines()
        .find(|line| line.starts_with("127.0.0.1:"))
        .unwrap_or_else(|| panic!("not published on 127.0.0.1: {published}"))
        .to_owned();
    let pem_path = volume_on_host(engine, plan, "appliance-data")
        .join("tls")
        .join("self-signed.pem");
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut last = String::from("no answer");
    while Instant::now() < deadline {
        if let Ok(pem) = std::fs::read(&pem_path) {
            let client = client_trusting(&pem, None);
            if let Ok(resp) = client.get(format!("https://{address}/health")).send().await {
                let reply = read(resp).await;
                if reply.status == 200 {
                    return (client, address, reply);
                }
                last = format!("{} {}", reply.status, reply.text);
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    panic!(
        "the appliance did not answer /health with 200 within 90 s on {address} (last: {last}); logs:\n{}",
        engine.all_logs()
    );
}

/// Runs an action that signs [`DIGEST`] with the wallet `pkp_id` inside keyservice
/// (`Lit.Actions.signEcdsa`).
async fn sign_action(
    client: &reqwest::Client,
    address: &str,
    key: &str,
    pkp_id: &str,
) -> e2e::Reply {
    let code = "async function main(p) { return await Lit.Actions.signEcdsa({pkpId: p.pkpId, toSign: p.digest}); }";
    read(
        client
            .post(format!("https://{address}/core/v1/lit_action"))
            .bearer_auth(key)
            .json(&json!({
                "code": code,
                "js_params": {"pkpId": pkp_id, "digest": format!("0x{}", hex::encode(DIGEST))},
            }))
            .send()
            .await
            .expect("lit_action"),
    )
    .await
}

/// The signature a signing action returned (`0x` + r ‖ s ‖ v), after checking the run
/// succeeded.
#[track_caller]
fn signature_of(reply: &e2e::Reply, logs: impl FnOnce() -> String) -> String {
    assert!(
        reply.status == 200 && reply.body["has_error"] == json!(false),
        "the signing action: {} {}\n{}",
        reply.status,
        reply.text,
        logs()
    );
    let signature = reply.body["response"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(signature.len(), 132, "0x + r ‖ s ‖ v: {}", reply.text);
    signature
}

/// The EIP-55 address whose key made `signature` (`0x` + r ‖ s ‖ v, v 27 or 28) over
/// [`DIGEST`].
fn signer(signature: &str) -> String {
    use k256::ecdsa::{RecoveryId, Signature, VerifyingKey};
    let bytes = hex::decode(signature.trim_start_matches("0x")).expect("hex signature");
    let sig = Signature::from_slice(&bytes[..64]).expect("r ‖ s");
    let recovery = RecoveryId::from_byte(bytes[64].wrapping_sub(27)).expect("v is 27 or 28");
    let key = VerifyingKey::recover_from_prehash(&DIGEST, &sig, recovery).expect("recovers");
    let point = key.to_encoded_point(false);
    let hash = e2e::keccak_hex(&point.as_bytes()[1..]);
    e2e::eip55(&format!("0x{}", &hash[2 + 24..]))
}

/// What a container wrote (standard output and error; the services log to the latter).
fn container_log(engine: &Engine, container: &str) -> String {
    let out = engine.docker(&["logs", container]);
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `docker inspect` of one field of a container.
fn inspect(engine: &Engine, container: &str, format: &str) -> String {
    engine.docker_ok(&["inspect", "--format", format, container])
}

/// Retries the signing action until keyservice answers again (at most 60 s); returns the
/// signature.
async fn sign_when_back(
    engine: &Engine,
    client: &reqwest::Client,
    address: &str,
    key: &str,
    pkp_id: &str,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let reply = sign_action(client, address, key, pkp_id).await;
        let unavailable = reply.text.contains("key service is unavailable");
        if !unavailable || Instant::now() > deadline {
            return signature_of(&reply, || engine.all_logs());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_compose_keeps_the_key_boundary_under_a_real_engine() {
    // No browser test runs while this engine adds and removes interfaces (dropped last).
    let _network = e2e::NETWORK_CHANGES.lock().await;
    let started = Instant::now();
    let engine = match Engine::start() {
        Ok(engine) => engine,
        Err(unavailable) => {
            say(&format!(
                "SKIPPED: container::the_compose_keeps_the_key_boundary_under_a_real_engine: {}",
                unavailable.0
            ));
            return;
        }
    };
    let engine_ready = started.elapsed();
    let work = tempfile::Builder::new()
        .prefix("ct")
        .tempdir_in("/tmp")
        .expect("work dir");

    // The image, loaded.
    let (pinned, config_digest, archive) = the_image(&work.path().join("image"));
    let archive = archive.to_string_lossy().into_owned();
    engine.docker_ok(&["load", "-i", &archive]);
    let loaded = engine.docker_ok(&["image", "inspect", "--format", "{{.Id}}", &config_digest]);
    assert_eq!(
        loaded, config_digest,
        "the engine's image id is the config digest of the image built"
    );
    let image_loaded = started.elapsed();

    // The compose, rendered with the pinned image and the test configuration; and the
    // upgrade's compose (another configuration, so another compose hash).
    let (rendered, compose_yaml) = render_with(APPLIANCE_CONFIG, &pinned);
    let (upgraded, upgraded_yaml) = render_with(APPLIANCE_CONFIG_V2, &pinned);
    assert_ne!(
        rendered.hash(),
        upgraded.hash(),
        "the upgrade changes the compose hash"
    );

    // The guest agent's stand-in, in a container of its own (as dstack's agent is outside
    // the app's containers), its socket reachable by any container user that has it
    // mounted: only keyservice does.
    let agent_binary = static_agent(work.path());
    let agent = AgentContainer::start(
        &engine,
        &config_digest,
        &agent_binary,
        &work.path().join("agent-v1"),
        "dstack-agent-v1",
        &rendered,
    );
    let agent_up = started.elapsed();
    let host_paths = BTreeMap::from([("/var/run/dstack.sock".to_owned(), agent.socket())]);
    let configs = work.path().join("configs");
    std::fs::create_dir(&configs).expect("configs dir");
    let probe = static_probe(work.path());
    let probe = probe.display();
    // Scaffolding, read-only in every container: the probe, and the reseal's allow-list
    // (the upgrade's compose hash).
    let scaffold = work.path().join("scaffold");
    std::fs::create_dir(&scaffold).expect("scaffold dir");
    std::fs::write(
        scaffold.join("allow-list"),
        format!("# the upgrade\n{}\n", hex::encode(upgraded.hash())),
    )
    .expect("allow-list");
    let scaffolding = [
        format!("type=bind,src={probe},dst={PROBE},readonly"),
        format!(
            "type=bind,src={},dst={SCAFFOLD},readonly",
            scaffold.display()
        ),
    ];
    let resolve = image_resolver(pinned, config_digest.clone());
    let environment = BTreeMap::new();
    let plan = translate(
        &compose_yaml,
        &Context {
            project: PROJECT,
            resolve_image: &resolve,
            host_paths: &host_paths,
            environment: &environment,
            config_dir: &configs,
            scaffolding_mounts: &scaffolding,
        },
    )
    .unwrap_or_else(|err| panic!("{err}"));

    // Create and start everything, dependencies first.
    create_and_start(&engine, &plan);

    // The API over TLS, on the published port, trusting exactly the appliance's own
    // self-signed certificate (read from its data volume on the host).
    let (client, address, health) = api_of(&engine, &plan).await;
    let api_up = started.elapsed();
    assert_eq!(
        health.body["checks"]["keyservice"], "ok",
        "keyservice answers the appliance across the containers: {}",
        health.text
    );

    // One real request through the whole chain: an account (a wallet from keyservice)
    // and an action run by a worker.
    let reply = read(
        client
            .post(format!("https://{address}/core/v1/new_account"))
            .json(&json!({"account_name": "container"}))
            .send()
            .await
            .expect("new_account"),
    )
    .await;
    let account = reply.assert_ok().clone();
    let key = account["api_key"].as_str().expect("api_key").to_owned();
    let reply = read(
        client
            .post(format!("https://{address}/core/v1/lit_action"))
            .bearer_auth(&key)
            .json(&json!({"code": "async function main(p) { return p * 2; }", "js_params": 21}))
            .send()
            .await
            .expect("lit_action"),
    )
    .await;
    assert_eq!(
        reply.status,
        reqwest::StatusCode::OK,
        "lit_action: {}\n{}",
        reply.text,
        engine.all_logs()
    );
    let run = reply.body.clone();
    assert_eq!(run["has_error"], json!(false), "{}", reply.text);
    assert_eq!(run["response"], json!(42), "{}", reply.text);

    // TLS only: plain HTTP on the same port gets no HTTP answer, and a client that does
    // not trust the appliance's certificate does not get through.
    let plain = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let plain = plain.get(format!("http://{address}/health")).send().await;
    assert!(
        plain.as_ref().map_or(true, |r| r.status() != 200),
        "plain HTTP must not be answered: {plain:?}"
    );
    let stranger = client_trusting(
        rcgen::generate_simple_self_signed(vec!["localhost".into()])
            .expect("other certificate")
            .cert
            .pem()
            .as_bytes(),
        None,
    );
    assert!(
        stranger
            .get(format!("https://{address}/health"))
            .send()
            .await
            .is_err(),
        "a client trusting another certificate must fail the handshake"
    );

    // On the host, each service's volume is its own user's alone: the named volumes take
    // the owner and mode of the image's directories (0700), so a process of another uid
    // (the appliance's 10002 for keyservice's state) is refused there too.
    for (volume, owner) in [("keyservice-state", 10001), ("appliance-data", 10002)] {
        use std::os::unix::fs::MetadataExt as _;
        let name = plan
            .volumes
            .get(volume)
            .expect("the volume is in the compose");
        let on_host = engine.docker_ok(&["volume", "inspect", "--format", "{{.Mountpoint}}", name]);
        let meta = std::fs::metadata(&on_host).expect("volume directory");
        assert_eq!(
            (meta.uid(), meta.mode() & 0o777),
            (owner, 0o700),
            "{volume} on the host ({on_host}) belongs to {owner} alone"
        );
    }

    // keyservice used the stand-in agent it was given, across the containers: the agent
    // (in its own container) was asked for the sealing key of this compose hash.
    assert!(
        agent.sealing_key_asked(&rendered.hash()),
        "keyservice derived its sealing key from the stand-in agent: {:?}",
        agent.key_requests()
    );

    // The boundary, from inside each container.
    let ks_list = run_probe(&engine, &plan, "keyservice", "list", "/var/lib/keyservice");
    let sealed_root = match &ks_list {
        Probe::Ok(names) => names
            .split(',')
            .find(|n| n.starts_with("root.sealed"))
            .map(|n| format!("/var/lib/keyservice/{n}")),
        _ => None,
    }
    .unwrap_or_else(|| {
        panic!("keyservice lists its state volume and finds its sealed root: {ks_list:?}")
    });
    let socket = "/run/keyservice/keyservice.sock";
    let checks = vec![
        // keyservice: its own state, the agent, its socket; a read-only root.
        check(
            "keyservice",
            "id",
            "",
            Expect::Identity {
                uid: 10001,
                gid: 10001,
                others: &[],
            },
            "keyservice runs as 10001:10001 without other groups",
        ),
        check(
            "keyservice",
            "open",
            &sealed_root,
            Expect::Ok(&["101 bytes"]),
            "keyservice reads its sealed root (control)",
        ),
        check(
            "keyservice",
            "mounts",
            "",
            Expect::Ok(&["/var/lib/keyservice", "/run/keyservice"]),
            "the state and socket volumes are mounted in keyservice (control)",
        ),
        check(
            "keyservice",
            "connect",
            "/var/run/dstack.sock",
            Expect::Ok(&[]),
            "keyservice reaches the guest agent (control)",
        ),
        check(
            "keyservice",
            "connect",
            socket,
            Expect::Ok(&[]),
            "keyservice's socket accepts (control)",
        ),
        check(
            "keyservice",
            "write",
            "/probe-write",
            Expect::Errno(EROFS),
            "keyservice's root filesystem is read-only",
        ),
        check(
            "keyservice",
            "write",
            "/var/lib/keyservice/.probe-write",
            Expect::Ok(&[]),
            "keyservice can write its state volume (control for the read-only root)",
        ),
        // appliance: the socket, its data; not the state, not the agent.
        check(
            "appliance",
            "id",
            "",
            Expect::Identity {
                uid: 10002,
                gid: 10002,
                others: &[10001],
            },
            "the appliance runs as 10002:10002 with group 10001 only",
        ),
        check(
            "appliance",
            "connect",
            socket,
            Expect::Ok(&[]),
            "the appliance reaches keyservice's socket (control)",
        ),
        check(
            "appliance",
            "list",
            "/var/lib/appliance",
            Expect::Ok(&["state.db"]),
            "the appliance reads its data volume (control)",
        ),
        check(
            "appliance",
            "mounts",
            "",
            Expect::OkWithout("/var/lib/keyservice"),
            "keyservice's state volume is not mounted in the appliance",
        ),
        check(
            "appliance",
            "list",
            "/var/lib/keyservice",
            Expect::Errno(EACCES),
            "the appliance cannot list keyservice's state directory",
        ),
        check(
            "appliance",
            "open",
            &sealed_root,
            Expect::Errno(EACCES),
            "the appliance cannot open keyservice's sealed root",
        ),
        check(
            "appliance",
            "write",
            "/probe-write",
            Expect::Errno(EROFS),
            "the appliance's root filesystem is read-only",
        ),
        check(
            "appliance",
            "write",
            "/tmp/probe-write",
            Expect::Ok(&[]),
            "the appliance can write its tmpfs (control for the read-only root)",
        ),
        pending(
            "appliance-no-agent",
            check(
                "appliance",
                "connect",
                "/var/run/dstack.sock",
                Expect::Errno(ENOENT),
                "the appliance cannot connect to the guest agent",
            ),
        ),
        pending(
            "appliance-no-agent",
            check(
                "appliance",
                "open",
                "/var/run/dstack.sock",
                Expect::Errno(ENOENT),
                "the guest agent's socket is not in the appliance",
            ),
        ),
        // workers: no groups, no socket, no data, no agent.
        pending(
            "workers",
            check(
                "workers",
                "id",
                "",
                Expect::Identity {
                    uid: 10003,
                    gid: 10003,
                    others: &[],
                },
                "workers run as 10003:10003 with no supplementary groups",
            ),
        ),
        pending(
            "workers",
            check(
                "workers",
                "list",
                "/",
                Expect::Ok(&["usr"]),
                "the probe runs in the workers container (control)",
            ),
        ),
        pending(
            "workers",
            check(
                "workers",
                "connect",
                socket,
                Expect::Fails,
                "a worker cannot connect to keyservice's socket",
            ),
        ),
        pending(
            "workers",
            check(
                "workers",
                "list",
                "/var/lib/appliance",
                Expect::Fails,
                "a worker cannot read the appliance's data",
            ),
        ),
        pending(
            "workers",
            check(
                "workers",
                "list",
                "/var/lib/keyservice",
                Expect::Fails,
                "a worker cannot read keyservice's state",
            ),
        ),
        pending(
            "workers",
            check(
                "workers",
                "connect",
                "/var/run/dstack.sock",
                Expect::Fails,
                "a worker cannot connect to the guest agent",
            ),
        ),
        pending(
            "workers",
            check(
                "workers",
                "write",
                "/probe-write",
                Expect::Errno(EROFS),
                "the workers' root filesystem is read-only",
            ),
        ),
    ];
    let mut failures = Vec::new();
    for c in &checks {
        let probe = run_probe(&engine, &plan, c.service, c.op, &c.arg);
        let ok = holds(&c.expect, &probe);
        let line = format!("{} `{} {}` → {probe:?}: {}", c.service, c.op, c.arg, c.why);
        let waiting = PENDING.iter().find(|(group, _)| *group == c.pending);
        match (ok, waiting) {
            (true, None) => eprintln!("holds: {line}"),
            (true, Some((group, _))) => {
                say(&format!(
                    "PENDING check now holds (remove {group:?} from PENDING): {line}"
                ));
            }
            (false, Some((_, reason))) => say(&format!("PENDING ({reason}): {line}")),
            (false, None) => failures.push(line),
        }
    }
    assert!(
        failures.is_empty(),
        "boundary checks failed:\n{}\nlogs:\n{}",
        failures.join("\n"),
        engine.all_logs()
    );
    let probed = started.elapsed();

    // A signing action: the account's wallet signs inside keyservice, and the signature
    // recovers to the wallet's address.
    let wallets = read(
        client
            .get(format!("https://{address}/core/v1/list_wallets"))
            .bearer_auth(&key)
            .send()
            .await
            .expect("list_wallets"),
    )
    .await;
    let wallet = wallets.assert_ok()[0].clone();
    let pkp_id = wallet["pkp_id"].as_str().expect("pkp_id").to_owned();
    let wallet_address = e2e::eip55(wallet["wallet_address"].as_str().expect("address"));
    assert_eq!(
        json!(wallet_address),
        json!(e2e::eip55(
            account["wallet_address"].as_str().expect("address")
        )),
        "the account's wallet is the one new_account named"
    );
    let first_signature =
        signature_of(&sign_action(&client, &address, &key, &pkp_id).await, || {
            engine.all_logs()
        });
    assert_eq!(
        signer(&first_signature),
        wallet_address,
        "the signature recovers to the wallet"
    );

    // keyservice crashes (SIGKILL of its process, not through the engine): the engine's
    // restart policy (`restart: always`) brings it back, it unseals the same root from the
    // same file, and the wallet signs again, the same signature (RFC 6979).
    let keyservice = plan
        .service("keyservice")
        .expect("keyservice")
        .container
        .clone();
    let pid: u32 = inspect(&engine, &keyservice, "{{.State.Pid}}")
        .parse()
        .expect("keyservice's pid");
    e2e::signal(pid, "KILL");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let state = inspect(
            &engine,
            &keyservice,
            "{{.RestartCount}} {{.State.Running}} {{.State.Pid}}",
        );
        if state.starts_with("1 true ") && !state.ends_with(&format!(" {pid}")) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the engine did not restart keyservice (restart: always) within 30 s: {state}\n{}",
            engine.all_logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let after_crash = sign_when_back(&engine, &client, &address, &key, &pkp_id).await;
    assert_eq!(
        after_crash, first_signature,
        "after the crash the same root signs: same wallet, same signature"
    );
    assert_eq!(
        sealed_roots(&engine, &plan),
        ["root.sealed"],
        "the restart opened the sealed root; it did not make another"
    );

    // `docker kill`: the engine counts it as stopped by the operator and does not restart
    // it. While keyservice is down, requests that need a key fail at once with a clear
    // error (no hang); the others are served.
    engine.docker_ok(&["kill", &keyservice]);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        inspect(&engine, &keyservice, "{{.State.Running}} {{.RestartCount}}"),
        "false 1",
        "a container killed through the engine stays down"
    );
    let down = Instant::now();
    let reply = read(
        client
            .post(format!("https://{address}/core/v1/new_account"))
            .json(&json!({"account_name": "while down"}))
            .send()
            .await
            .expect("new_account while keyservice is down"),
    )
    .await;
    let description = reply.assert_error(503);
    assert!(description.contains("key service"), "{description}");
    let reply = sign_action(&client, &address, &key, &pkp_id).await;
    assert!(
        reply.status == 200
            && reply.body["has_error"] == json!(true)
            && reply.body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("key service is unavailable")),
        "a signing action while keyservice is down ends with a clear error: {}",
        reply.text
    );
    let health = read(
        client
            .get(format!("https://{address}/health"))
            .send()
            .await
            .expect("health"),
    )
    .await;
    health.assert_error_free_503();
    assert_eq!(health.body["checks"]["keyservice"], json!("unavailable"));
    let exists = read(
        client
            .get(format!("https://{address}/core/v1/account_exists"))
            .bearer_auth(&key)
            .send()
            .await
            .expect("account_exists"),
    )
    .await;
    assert_eq!(
        exists.assert_ok(),
        &json!(true),
        "requests needing no key are served"
    );
    assert!(
        down.elapsed() < Duration::from_secs(10),
        "the failures came at once, not after a hang: {:?}",
        down.elapsed()
    );
    // Started again (as the engine starts it at boot): the same root, the same signature.
    engine.docker_ok(&["start", &keyservice]);
    let after_kill = sign_when_back(&engine, &client, &address, &key, &pkp_id).await;
    assert_eq!(
        after_kill, first_signature,
        "after docker kill and start, the same root signs"
    );
    let recovered = started.elapsed();

    // The upgrade. The new version's keyservice, exactly as its compose describes it and on
    // the same volumes, with an agent reporting the new app-compose, refuses the old root
    // until it is resealed (it names both hashes) and makes no root of its own. (Run beside
    // the old version under another name: it stops before it touches the socket.)
    let agent_v2 = AgentContainer::start(
        &engine,
        &config_digest,
        &agent_binary,
        &work.path().join("agent-v2"),
        "dstack-agent-v2",
        &upgraded,
    );
    let host_paths_v2 = BTreeMap::from([("/var/run/dstack.sock".to_owned(), agent_v2.socket())]);
    let configs_v2 = work.path().join("configs-v2");
    std::fs::create_dir(&configs_v2).expect("configs dir");
    let plan_v2 = translate(
        &upgraded_yaml,
        &Context {
            project: PROJECT,
            resolve_image: &resolve,
            host_paths: &host_paths_v2,
            environment: &environment,
            config_dir: &configs_v2,
            scaffolding_mounts: &scaffolding,
        },
    )
    .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(
        plan_v2.volumes, plan.volumes,
        "the upgrade keeps the volumes"
    );
    let early = "boundary-keyservice-unresealed";
    let mut args: Vec<String> = vec!["create".into()];
    args.extend(
        plan_v2
            .service("keyservice")
            .expect("keyservice")
            .create_args
            .iter()
            .map(|a| {
                if *a == keyservice {
                    early.to_owned()
                } else {
                    a.clone()
                }
            }),
    );
    engine.docker_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    engine.docker_ok(&["start", early]);
    let v1_hex = hex::encode(rendered.hash());
    let v2_hex = hex::encode(upgraded.hash());
    let deadline = Instant::now() + Duration::from_secs(30);
    let refusal = loop {
        let log = container_log(&engine, early);
        if log.contains(&format!("is bound to compose hash 0x{v1_hex}"))
            && log.contains(&format!("measured compose hash is 0x{v2_hex}"))
        {
            break log;
        }
        assert!(
            Instant::now() < deadline,
            "the new version's keyservice did not refuse the old root within 30 s: {log}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        !refusal.contains("keyservice ready"),
        "the new version's keyservice never serves with the old root: {refusal}"
    );
    engine.docker_ok(&["rm", "-f", early]);
    assert_eq!(
        sealed_roots(&engine, &plan),
        ["root.sealed"],
        "the refused start made no root of its own"
    );

    // The reseal, run by the running version in its own container with the policy's
    // allow-list: a hash not on it is refused and nothing is written; the upgrade's is
    // resealed to `root.sealed.<first 16 hex>`, asking the running version's agent for the
    // new version's sealing key.
    let reseal = |to: &str| {
        engine.docker(&[
            "exec",
            &keyservice,
            "/usr/local/bin/keyservice",
            "reseal",
            "--platform",
            "dstack",
            "--state-dir",
            "/var/lib/keyservice",
            "--to",
            to,
            "--allow-list",
            &format!("{SCAFFOLD}/allow-list"),
        ])
    };
    let refused = reseal(&"ab".repeat(32));
    assert!(
        !refused.status.success(),
        "a reseal to a hash off the allow-list is refused: {}",
        String::from_utf8_lossy(&refused.stdout)
    );
    assert_eq!(
        sealed_roots(&engine, &plan),
        ["root.sealed"],
        "and writes nothing"
    );
    let resealed = reseal(&v2_hex);
    assert!(
        resealed.status.success(),
        "keyservice reseal: {}{}",
        String::from_utf8_lossy(&resealed.stdout),
        String::from_utf8_lossy(&resealed.stderr)
    );
    let new_root = format!("root.sealed.{}", &v2_hex[..16]);
    assert_eq!(
        sealed_roots(&engine, &plan),
        ["root.sealed".to_owned(), new_root.clone()],
        "the reseal wrote the new version's root beside the old one"
    );
    assert!(
        agent.sealing_key_asked(&upgraded.hash()),
        "the reseal asked the running version's agent for the new sealing key: {:?}",
        agent.key_requests()
    );

    // Stop the old version, start the new one on the same volumes (its agent reports the
    // new app-compose): it serves, and the wallet created before signs the same.
    stop_and_remove(&engine, &plan);
    agent.remove(&engine);
    create_and_start(&engine, &plan_v2);
    let (client, address, health) = api_of(&engine, &plan_v2).await;
    assert_eq!(health.body["checks"]["keyservice"], "ok", "{}", health.text);
    let after_upgrade = signature_of(&sign_action(&client, &address, &key, &pkp_id).await, || {
        engine.all_logs()
    });
    assert_eq!(
        signer(&after_upgrade),
        wallet_address,
        "after the upgrade the wallet signs with the same address"
    );
    assert_eq!(
        after_upgrade, first_signature,
        "the same root: the same signature"
    );
    assert!(
        agent_v2.sealing_key_asked(&upgraded.hash()),
        "the new version unsealed with its own sealing key: {:?}",
        agent_v2.key_requests()
    );
    let ks_v2 = &plan_v2.service("keyservice").expect("keyservice").container;
    assert!(
        container_log(&engine, ks_v2).contains(&format!("compose_hash=0x{v2_hex}")),
        "the new keyservice runs under the new compose hash"
    );
    let listed = run_probe(
        &engine,
        &plan_v2,
        "keyservice",
        "list",
        "/var/lib/keyservice",
    );
    assert!(
        matches!(&listed, Probe::Ok(names) if names.split(',').any(|n| n == new_root)),
        "the new keyservice's state volume holds {new_root}: {listed:?}"
    );
    let upgraded_at = started.elapsed();

    say(&format!(
        "container test timings: engine {:?}, image built and loaded {:?}, agent built and started {:?}, \
         API answering {:?}, probes {:?}, signing and keyservice kill and recovery {:?}, \
         upgrade with a resealed root {:?}, total {:?}",
        engine_ready,
        image_loaded - engine_ready,
        agent_up - image_loaded,
        api_up - agent_up,
        probed - api_up,
        recovered - probed,
        upgraded_at - recovered,
        started.elapsed()
    ));
}

/// Translates `yaml` with the test's stand-ins and an image resolver that accepts only
/// `good@sha256:…`; the configs go to `dir`.
fn translate_for_test(
    yaml: &str,
    dir: &Path,
    environment: &BTreeMap<String, String>,
) -> Result<Plan, e2e::container::TranslateError> {
    let host_paths = BTreeMap::from([(
        "/var/run/dstack.sock".to_owned(),
        PathBuf::from("/stand-in/dstack.sock"),
    )]);
    let resolve = |reference: &str| -> Result<String, String> {
        if reference.starts_with("good@sha256:") {
            Ok("IMAGE".to_owned())
        } else {
            Err("not the loaded image".to_owned())
        }
    };
    translate(
        yaml,
        &Context {
            project: PROJECT,
            resolve_image: &resolve,
            host_paths: &host_paths,
            environment,
            config_dir: dir,
            scaffolding_mounts: &[],
        },
    )
}

/// Whether `args` holds `flag value` as neighbours.
fn has_pair(args: &[String], flag: &str, value: &str) -> bool {
    args.windows(2).any(|w| w[0] == flag && w[1] == value)
}

/// The committed template, translated without an engine: each service gets the user,
/// groups, read-only root, volumes, configs, ports and start order the compose gives it.
#[test]
fn translator_describes_each_service_as_the_compose_does() {
    let dir = tempfile::tempdir().expect("dir");
    let image = ImageRef::new("good", [1; 32]).expect("reference");
    let rendered = render(
        TEMPLATE,
        &RenderOptions {
            appliance_config: APPLIANCE_CONFIG.to_owned(),
            ..RenderOptions::new(image)
        },
    )
    .expect("render");
    let app_compose: Value = serde_json::from_slice(rendered.bytes()).expect("json");
    let yaml = app_compose["docker_compose_file"].as_str().expect("yaml");
    let environment = BTreeMap::from([(
        "APPLIANCE_CHAIN__RPC_URL".to_owned(),
        "http://rpc.invalid".to_owned(),
    )]);
    let plan = translate_for_test(yaml, dir.path(), &environment).unwrap_or_else(|e| panic!("{e}"));

    let position = |name: &str| plan.services.iter().position(|s| s.service == name);
    assert!(
        position("keyservice") < position("appliance") && position("keyservice").is_some(),
        "keyservice starts before the appliance that depends on it"
    );
    let ks = &plan.service("keyservice").expect("keyservice").create_args;
    assert!(has_pair(ks, "--user", "10001:10001"), "{ks:?}");
    assert!(ks.contains(&"--read-only".to_owned()), "{ks:?}");
    assert!(
        has_pair(
            ks,
            "--mount",
            "type=volume,src=boundary_keyservice-state,dst=/var/lib/keyservice"
        ),
        "{ks:?}"
    );
    assert!(
        has_pair(
            ks,
            "--mount",
            "type=bind,src=/stand-in/dstack.sock,dst=/var/run/dstack.sock"
        ),
        "{ks:?}"
    );
    assert!(
        has_pair(ks, "--entrypoint", "/usr/local/bin/keyservice"),
        "{ks:?}"
    );
    assert!(
        has_pair(ks, "IMAGE", "run"),
        "the image, then the command: {ks:?}"
    );

    let app = &plan.service("appliance").expect("appliance").create_args;
    assert!(has_pair(app, "--user", "10002:10002"), "{app:?}");
    assert!(has_pair(app, "--group-add", "10001"), "{app:?}");
    assert!(has_pair(app, "--tmpfs", "/tmp"), "{app:?}");
    assert!(
        has_pair(app, "--publish", "127.0.0.1::8443"),
        "published on loopback only: {app:?}"
    );
    assert!(
        has_pair(app, "--env", "APPLIANCE_CHAIN__RPC_URL=http://rpc.invalid"),
        "{app:?}"
    );
    assert!(
        !app.iter()
            .any(|a| a.starts_with("APPLIANCE_BILLING__STRIPE_SECRET_KEY")),
        "a pass-through name without a value is not passed: {app:?}"
    );
    assert!(
        !app.iter().any(|a| a.contains("keyservice-state")),
        "the appliance does not get keyservice's state volume: {app:?}"
    );
    assert!(
        has_pair(
            app,
            "--mount",
            &format!(
                "type=bind,src={},dst=/etc/appliance/appliance.toml,readonly",
                dir.path().join("appliance_toml").display()
            )
        ),
        "{app:?}"
    );
    let config = std::fs::read_to_string(dir.path().join("appliance_toml")).expect("config file");
    assert!(
        config.contains("workers = 2"),
        "the measured configuration is mounted: {config}"
    );
}

/// A compose key or form the translator does not know fails loudly, naming it (each next
/// to a file that translates, so the refusals are not the base file's fault).
#[test]
fn translator_refuses_what_it_does_not_understand() {
    let dir = tempfile::tempdir().expect("dir");
    let none = BTreeMap::new();
    let base = "services:\n  a:\n    image: good@sha256:00\n    user: \"1:1\"\n    volumes: [\"v:/v\", \"/var/run/dstack.sock:/s\"]\n  b:\n    image: good@sha256:00\n    depends_on: [a]\n    network_mode: none\nvolumes:\n  v:\n";
    let plan = translate_for_test(base, dir.path(), &none).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plan.services.len(), 2);
    let hardened = base.replace(
        "    user: \"1:1\"",
        "    user: \"1:1\"\n    cap_drop: [ALL]\n    security_opt: [\"no-new-privileges:true\"]\n    pids_limit: 64\n    ulimits: {nofile: {soft: 64, hard: 128}, core: 0}",
    );
    let a = translate_for_test(&hardened, dir.path(), &none).unwrap_or_else(|e| panic!("{e}"));
    let a = &a.service("a").expect("a").create_args;
    assert!(has_pair(a, "--cap-drop", "ALL"), "{a:?}");
    assert!(
        has_pair(a, "--security-opt", "no-new-privileges:true"),
        "{a:?}"
    );
    assert!(has_pair(a, "--pids-limit", "64"), "{a:?}");
    assert!(
        has_pair(a, "--ulimit", "nofile=64:128") && has_pair(a, "--ulimit", "core=0"),
        "{a:?}"
    );
    assert_eq!(plan.networks, vec!["boundary_default".to_owned()]);
    assert!(has_pair(
        &plan.service("b").expect("b").create_args,
        "--network",
        "none"
    ));

    let cases: &[(&str, &str)] = &[
        (
            &base.replace("    user:", "    devices: [/dev/kvm]\n    user:"),
            "devices",
        ),
        (
            &base.replace(
                "    user:",
                "    ulimits: {nofile: {soft: 1, max: 2}}\n    user:",
            ),
            "ulimits",
        ),
        (
            &base.replace("    user:", "    privileged: true\n    user:"),
            "privileged",
        ),
        (&format!("{base}networks:\n  n:\n"), "networks"),
        (
            &base.replace("volumes:\n  v:\n", "volumes:\n  v:\n    driver: local\n"),
            "driver",
        ),
        (&base.replace("\"v:/v\"", "\"/etc:/host-etc\""), "/etc"),
        (&base.replace("\"v:/v\"", "\"w:/w\""), "does not declare"),
        (&base.replace("\"v:/v\"", "\"v:/v:z\""), "SOURCE:TARGET"),
        (
            &base.replace("network_mode: none", "network_mode: host"),
            "host",
        ),
        (
            &base.replace("depends_on: [a]", "depends_on: [c]"),
            "not a service",
        ),
        (
            &base.replace("    user: \"1:1\"", "    depends_on: [b]"),
            "circle",
        ),
        (
            &base.replace("    user: \"1:1\"", "    entrypoint: /bin/sh -c x"),
            "entrypoint",
        ),
        (
            &base.replace(
                "image: good@sha256:00\n    user",
                "image: evil@sha256:00\n    user",
            ),
            "not the loaded image",
        ),
        (
            &base.replace("    user: \"1:1\"", "    environment: [\"A B=1\"]"),
            "environment",
        ),
        (
            &base.replace("    user: \"1:1\"", "    ports: [\"1:2:3:4\"]"),
            "port",
        ),
        (
            &base.replace(
                "    user: \"1:1\"",
                "    configs: [{source: nope, target: /x}]",
            ),
            "nope",
        ),
    ];
    for (yaml, named) in cases {
        match translate_for_test(yaml, dir.path(), &none) {
            Ok(_) => panic!("translated although it should not:\n{yaml}"),
            Err(err) => assert!(
                err.to_string().contains(named),
                "the error names {named:?}: {err}\n{yaml}"
            ),
        }
    }
}
