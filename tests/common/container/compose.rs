//! The rendered docker-compose file, translated into plain `docker` commands (this
//! machine's Docker has no compose plugin).
//!
//! The file is parsed into types that deny every key they do not know, so a compose key
//! added to `compose/docker-compose.yml` that this translator does not understand stops
//! the container test with an error naming it, instead of being left out silently: the
//! test keeps running the compose that is deployed, not an older idea of it.
//!
//! Understood, for every service: `image` (resolved to the loaded image by the test),
//! `user`, `group_add`, `entrypoint` and `command` (list forms), `read_only`, `tmpfs`,
//! `volumes` (short syntax; named volumes and bind mounts of host paths the test stands
//! in for), `configs` (the top-level `content`, written to a file and bind-mounted
//! read-only at the target), `environment` (list form; a bare name is passed only when the
//! test gives it a value), `ports` (published on 127.0.0.1 only, host port chosen at run
//! time), `network_mode` (`none`; otherwise the project's default network), `depends_on`
//! (start order), `restart`, and the hardening keys `cap_add`, `cap_drop`, `security_opt`,
//! `pids_limit`, `mem_limit`, `ulimits`, `init`, `working_dir`, `stop_signal`. At the top
//! level: `services`, `volumes` (without options) and `configs` (with `content`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Why the compose file could not be translated.
#[derive(Debug, thiserror::Error)]
pub enum TranslateError {
    /// Not YAML, or a key or form the translator does not understand (the message names it).
    #[error("the compose file is not understood by the container test's translator: {0}")]
    Parse(#[from] serde_norway::Error),
    #[error("service {service}: depends on {dependency}, which is not a service")]
    UnknownDependency { service: String, dependency: String },
    #[error("services depend on each other in a circle: {0:?}")]
    DependencyCycle(Vec<String>),
    #[error(
        "service {service}: bind mount of host path {path}: the test has no stand-in for it (add one to the host paths it passes)"
    )]
    HostPath { service: String, path: String },
    #[error("service {service}: volume {spec:?}: {reason}")]
    Volume {
        service: String,
        spec: String,
        reason: String,
    },
    #[error(
        "service {service}: config {source_name:?} is not declared with `content` at the top level"
    )]
    Config {
        service: String,
        source_name: String,
    },
    #[error("service {service}: port {spec:?} is not understood")]
    Port { service: String, spec: String },
    #[error("service {service}: network_mode {mode:?} is not supported by the test")]
    NetworkMode { service: String, mode: String },
    #[error("service {service}: environment entry {entry:?} is not NAME or NAME=VALUE")]
    Environment { service: String, entry: String },
    #[error("service {service}: image {image:?}: {reason}")]
    Image {
        service: String,
        image: String,
        reason: String,
    },
    #[error("cannot write the config file {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ComposeFile {
    services: BTreeMap<String, Service>,
    #[serde(default)]
    volumes: BTreeMap<String, Option<NamedVolume>>,
    #[serde(default)]
    configs: BTreeMap<String, ConfigSource>,
}

/// A named volume declared without options (any option is an unknown key).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NamedVolume {}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigSource {
    content: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigRef {
    source: String,
    target: String,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Scalar {
    Text(String),
    Number(u64),
}

impl Scalar {
    fn text(&self) -> String {
        match self {
            Self::Text(s) => s.clone(),
            Self::Number(n) => n.to_string(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Service {
    image: String,
    #[serde(default)]
    user: Option<Scalar>,
    #[serde(default)]
    group_add: Vec<Scalar>,
    #[serde(default)]
    entrypoint: Option<Vec<String>>,
    #[serde(default)]
    command: Option<Vec<String>>,
    #[serde(default)]
    read_only: bool,
    #[serde(default)]
    tmpfs: Vec<String>,
    #[serde(default)]
    volumes: Vec<String>,
    #[serde(default)]
    configs: Vec<ConfigRef>,
    #[serde(default)]
    environment: Vec<String>,
    #[serde(default)]
    ports: Vec<String>,
    #[serde(default)]
    network_mode: Option<String>,
    #[serde(default)]
    depends_on: Vec<String>,
    #[serde(default)]
    restart: Option<String>,
    #[serde(default)]
    cap_add: Vec<String>,
    #[serde(default)]
    cap_drop: Vec<String>,
    #[serde(default)]
    security_opt: Vec<String>,
    #[serde(default)]
    pids_limit: Option<i64>,
    #[serde(default)]
    mem_limit: Option<Scalar>,
    #[serde(default)]
    ulimits: BTreeMap<String, Ulimit>,
    #[serde(default)]
    init: Option<bool>,
    #[serde(default)]
    working_dir: Option<String>,
    #[serde(default)]
    stop_signal: Option<String>,
}

/// `name: N` or `name: {soft: N, hard: M}`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Ulimit {
    Single(i64),
    Pair(SoftHard),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SoftHard {
    soft: i64,
    hard: i64,
}

/// What the test supplies around the compose file.
pub struct Context<'a> {
    /// The compose project name (prefix of containers, volumes and the network).
    pub project: &'a str,
    /// Maps an `image:` reference to what `docker create` should run (the test checks
    /// the pinned digest against the image it loaded).
    pub resolve_image: &'a dyn Fn(&str) -> Result<String, String>,
    /// Host paths of bind mounts → the test's stand-ins for them.
    pub host_paths: &'a BTreeMap<String, PathBuf>,
    /// Values for the environment names the compose passes through.
    pub environment: &'a BTreeMap<String, String>,
    /// Where the configs' contents are written.
    pub config_dir: &'a Path,
    /// Test scaffolding mounted into every container (`--mount` values), not part of the
    /// compose: the probe binary.
    pub scaffolding_mounts: &'a [String],
}

/// One service as `docker create` arguments.
#[derive(Debug, Clone)]
pub struct ServicePlan {
    pub service: String,
    pub container: String,
    /// Everything after `docker create`.
    pub create_args: Vec<String>,
    /// Container ports published on 127.0.0.1 (host port chosen at run time), with the
    /// host port the compose asks for (ignored by the test).
    pub ports: Vec<(Option<u16>, u16)>,
    pub network_mode: Option<String>,
}

/// The whole project: what to create, in order.
#[derive(Debug, Clone)]
pub struct Plan {
    /// `docker network create` names (the default network, if any service uses it).
    pub networks: Vec<String>,
    /// `docker volume create` names, by compose name.
    pub volumes: BTreeMap<String, String>,
    /// In start order (dependencies first).
    pub services: Vec<ServicePlan>,
}

impl Plan {
    /// The plan of `service`, if the compose has it.
    pub fn service(&self, service: &str) -> Option<&ServicePlan> {
        self.services.iter().find(|s| s.service == service)
    }
}

/// Translates `yaml` (a rendered docker-compose file) into a [`Plan`], writing the
/// configs' contents under `ctx.config_dir`.
pub fn translate(yaml: &str, ctx: &Context<'_>) -> Result<Plan, TranslateError> {
    let file: ComposeFile = serde_norway::from_str(yaml)?;
    let order = start_order(&file.services)?;
    let project = ctx.project;
    let default_network = format!("{project}_default");
    let volumes: BTreeMap<String, String> = file
        .volumes
        .keys()
        .map(|name| (name.clone(), format!("{project}_{name}")))
        .collect();
    let mut config_files = BTreeMap::new();
    let mut uses_default_network = false;
    let mut services = Vec::new();
    for name in order {
        let service = &file.services[&name];
        let container = format!("{project}-{name}-1");
        let mut args: Vec<String> = vec!["--name".into(), container.clone()];
        if let Some(user) = &service.user {
            push(&mut args, "--user", user.text());
        }
        for group in &service.group_add {
            push(&mut args, "--group-add", group.text());
        }
        if service.read_only {
            args.push("--read-only".into());
        }
        for path in &service.tmpfs {
            push(&mut args, "--tmpfs", path.clone());
        }
        if let Some(policy) = &service.restart {
            push(&mut args, "--restart", policy.clone());
        }
        for cap in &service.cap_add {
            push(&mut args, "--cap-add", cap.clone());
        }
        for cap in &service.cap_drop {
            push(&mut args, "--cap-drop", cap.clone());
        }
        for opt in &service.security_opt {
            push(&mut args, "--security-opt", opt.clone());
        }
        if let Some(limit) = service.pids_limit {
            push(&mut args, "--pids-limit", limit.to_string());
        }
        if let Some(limit) = &service.mem_limit {
            push(&mut args, "--memory", limit.text());
        }
        for (name, limit) in &service.ulimits {
            let value = match limit {
                Ulimit::Single(n) => format!("{name}={n}"),
                Ulimit::Pair(SoftHard { soft, hard }) => format!("{name}={soft}:{hard}"),
            };
            push(&mut args, "--ulimit", value);
        }
        if service.init == Some(true) {
            args.push("--init".into());
        }
        if let Some(dir) = &service.working_dir {
            push(&mut args, "--workdir", dir.clone());
        }
        if let Some(signal) = &service.stop_signal {
            push(&mut args, "--stop-signal", signal.clone());
        }
        for spec in &service.volumes {
            push(
                &mut args,
                "--mount",
                volume_mount(&name, spec, &volumes, ctx)?,
            );
        }
        for config in &service.configs {
            let Some(source) = file.configs.get(&config.source) else {
                return Err(TranslateError::Config {
                    service: name.clone(),
                    source_name: config.source.clone(),
                });
            };
            let path = match config_files.get(&config.source) {
                Some(path) => Clone::clone(path),
                None => {
                    let path = ctx.config_dir.join(&config.source);
                    write_config(&path, &source.content)?;
                    config_files.insert(config.source.clone(), path.clone());
                    path
                }
            };
            push(
                &mut args,
                "--mount",
                format!(
                    "type=bind,src={},dst={},readonly",
                    path.display(),
                    config.target
                ),
            );
        }
        for entry in &service.environment {
            match entry.split_once('=') {
                Some((key, _)) if valid_env_name(key) => push(&mut args, "--env", entry.clone()),
                None if valid_env_name(entry) => {
                    if let Some(value) = ctx.environment.get(entry) {
                        push(&mut args, "--env", format!("{entry}={value}"));
                    }
                }
                _ => {
                    return Err(TranslateError::Environment {
                        service: name.clone(),
                        entry: entry.clone(),
                    });
                }
            }
        }
        let mut ports = Vec::new();
        for spec in &service.ports {
            let (host, container_port) = parse_port(spec).ok_or_else(|| TranslateError::Port {
                service: name.clone(),
                spec: spec.clone(),
            })?;
            push(
                &mut args,
                "--publish",
                format!("127.0.0.1::{container_port}"),
            );
            ports.push((host, container_port));
        }
        match service.network_mode.as_deref() {
            None => {
                uses_default_network = true;
                push(&mut args, "--network", default_network.clone());
                push(&mut args, "--network-alias", name.clone());
            }
            Some("none") => push(&mut args, "--network", "none".into()),
            Some(other) => {
                return Err(TranslateError::NetworkMode {
                    service: name.clone(),
                    mode: other.to_owned(),
                });
            }
        }
        for mount in ctx.scaffolding_mounts {
            push(&mut args, "--mount", mount.clone());
        }
        let mut trailing = Vec::new();
        if let Some(entrypoint) = &service.entrypoint {
            let Some((first, rest)) = entrypoint.split_first() else {
                return Err(TranslateError::Image {
                    service: name.clone(),
                    image: service.image.clone(),
                    reason: "an empty entrypoint list".into(),
                });
            };
            push(&mut args, "--entrypoint", first.clone());
            trailing.extend(rest.iter().cloned());
        }
        let image =
            (ctx.resolve_image)(&service.image).map_err(|reason| TranslateError::Image {
                service: name.clone(),
                image: service.image.clone(),
                reason,
            })?;
        args.push(image);
        args.extend(trailing);
        if let Some(command) = &service.command {
            args.extend(command.iter().cloned());
        }
        services.push(ServicePlan {
            service: name.clone(),
            container,
            create_args: args,
            ports,
            network_mode: service.network_mode.clone(),
        });
    }
    Ok(Plan {
        networks: if uses_default_network {
            vec![default_network]
        } else {
            Vec::new()
        },
        volumes,
        services,
    })
}

/// Appends `flag value`.
fn push(args: &mut Vec<String>, flag: &str, value: String) {
    args.push(flag.to_owned());
    args.push(value);
}

fn valid_env_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `SOURCE:TARGET[:ro|rw]`: a named volume, or a bind mount of a host path the test has
/// a stand-in for.
fn volume_mount(
    service: &str,
    spec: &str,
    volumes: &BTreeMap<String, String>,
    ctx: &Context<'_>,
) -> Result<String, TranslateError> {
    let bad = |reason: &str| TranslateError::Volume {
        service: service.to_owned(),
        spec: spec.to_owned(),
        reason: reason.to_owned(),
    };
    let parts: Vec<&str> = spec.split(':').collect();
    let (source, target, readonly) = match parts[..] {
        [source, target] => (source, target, false),
        [source, target, "ro"] => (source, target, true),
        [source, target, "rw"] => (source, target, false),
        _ => return Err(bad("expected SOURCE:TARGET[:ro|rw]")),
    };
    if !target.starts_with('/') {
        return Err(bad("the target must be an absolute path"));
    }
    let ro = if readonly { ",readonly" } else { "" };
    if source.starts_with('/') || source.starts_with('.') || source.starts_with('~') {
        let Some(stand_in) = ctx.host_paths.get(source) else {
            return Err(TranslateError::HostPath {
                service: service.to_owned(),
                path: source.to_owned(),
            });
        };
        Ok(format!(
            "type=bind,src={},dst={target}{ro}",
            stand_in.display()
        ))
    } else {
        let Some(volume) = volumes.get(source) else {
            return Err(bad(
                "a named volume that the top-level `volumes:` does not declare",
            ));
        };
        Ok(format!("type=volume,src={volume},dst={target}{ro}"))
    }
}

/// `[IP:][HOST:]CONTAINER[/tcp]` → (host port, container port).
fn parse_port(spec: &str) -> Option<(Option<u16>, u16)> {
    let spec = spec.strip_suffix("/tcp").unwrap_or(spec);
    let parts: Vec<&str> = spec.split(':').collect();
    match parts[..] {
        [container] => Some((None, container.parse().ok()?)),
        [host, container] | [_, host, container] => {
            Some((Some(host.parse().ok()?), container.parse().ok()?))
        }
        _ => None,
    }
}

fn write_config(path: &Path, content: &str) -> Result<(), TranslateError> {
    use std::os::unix::fs::PermissionsExt as _;
    let write = || -> std::io::Result<()> {
        std::fs::write(path, content)?;
        // Readable by every container user, as compose's file-backed configs are.
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o444))
    };
    write().map_err(|source| TranslateError::Write {
        path: path.to_owned(),
        source,
    })
}

/// Services ordered so that each comes after everything it depends on (ties by name).
fn start_order(services: &BTreeMap<String, Service>) -> Result<Vec<String>, TranslateError> {
    for (name, service) in services {
        for dependency in &service.depends_on {
            if !services.contains_key(dependency) {
                return Err(TranslateError::UnknownDependency {
                    service: name.clone(),
                    dependency: dependency.clone(),
                });
            }
        }
    }
    let mut order = Vec::new();
    let mut placed = BTreeSet::new();
    while placed.len() < services.len() {
        let ready: Vec<&String> = services
            .iter()
            .filter(|(name, service)| {
                !placed.contains(*name) && service.depends_on.iter().all(|d| placed.contains(d))
            })
            .map(|(name, _)| name)
            .collect();
        if ready.is_empty() {
            return Err(TranslateError::DependencyCycle(
                services
                    .keys()
                    .filter(|name| !placed.contains(*name))
                    .cloned()
                    .collect(),
            ));
        }
        for name in ready {
            placed.insert(name.clone());
            order.push(name.clone());
        }
    }
    Ok(order)
}
