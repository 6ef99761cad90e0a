//! The software bill of materials of the image's binaries, from cargo's own resolution.
//!
//! For each binary, the crates its release build compiles, as `cargo tree` resolves them for
//! the very package selection and target of that build ([`crate::reproduce::PACKAGES`],
//! [`crate::reproduce::TARGET_TRIPLE`]: features unified as in that build), each with the
//! source and checksum `Cargo.lock` pins:
//!
//! * `linked`: reached from the binary's package through normal dependencies, proc-macros
//!   excluded: the code in the binary;
//! * `build`: the rest of what the build compiles and runs for it (build scripts' and
//!   proc-macros' dependencies).
//!
//! The document ([`FORMAT`]) is deterministic: sorted, no timestamps, no paths of the
//! build machine (workspace crates have source `workspace`). `image-build` writes it into
//! the image at [`IMAGE_PATH`] and beside the image as [`FILE_NAME`]; the appliance lists
//! it in its evidence (`sha256sum.txt`, covered by the quote), and `evidence verify`
//! prints its digest.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;
use sha2::{Digest, Sha256};

/// The `format` field of the document.
pub const FORMAT: &str = "appliance-sbom/1";
/// Where the image carries the document.
pub const IMAGE_PATH: &str = "/usr/share/appliance/sbom.json";
/// Its name beside the image (in `image-build --out`).
pub const FILE_NAME: &str = "sbom.json";
/// Source of workspace members (no checksum, no path).
pub const WORKSPACE_SOURCE: &str = "workspace";

/// Each binary of the image and the package that builds it.
pub const BINARY_PACKAGES: &[(&str, &str)] = &[
    ("action-worker", "action-runtime"),
    ("appliance", "appliance"),
    ("evidence", "evidence"),
    ("keyservice", "keyservice"),
    ("worker-launcher", "worker-launcher"),
];

/// Why the SBOM could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SbomError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cargo tree: {0}")]
    CargoTree(String),
    #[error("unexpected cargo tree line {0:?}")]
    TreeLine(String),
    #[error("binary {0} is not one of the image's (no package builds it)")]
    UnknownBinary(String),
    #[error("package {0} is not in the resolved tree")]
    NoPackage(String),
    #[error("{name} {version} is not in Cargo.lock")]
    NotLocked { name: String, version: String },
    #[error("serializing the SBOM: {0}")]
    Json(#[from] serde_json::Error),
}

/// One crate of the document.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Package {
    pub name: String,
    pub version: String,
    /// `Cargo.lock`'s source (`registry+https://…`, `git+…`), or [`WORKSPACE_SOURCE`].
    pub source: String,
    /// `Cargo.lock`'s SHA-256 of the `.crate` file (registry crates only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
}

/// One binary of the document: `name version` of the crates it links and builds with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BinaryEntry {
    pub name: String,
    pub package: String,
    pub linked: Vec<String>,
    pub build: Vec<String>,
}

/// The document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sbom {
    pub format: &'static str,
    pub target: String,
    pub binaries: Vec<BinaryEntry>,
    pub packages: Vec<Package>,
}

impl Sbom {
    /// The exact bytes written (pretty JSON, final newline).
    pub fn to_bytes(&self) -> Result<Vec<u8>, SbomError> {
        let mut bytes = serde_json::to_vec_pretty(self)?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}

/// `sha256:<hex>` of `bytes`.
pub fn digest_string(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// A node of `cargo tree`'s output: name, version, and whether it is a workspace member
/// (a path in parentheses) or a proc-macro.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Node {
    name: String,
    version: String,
}

#[derive(Debug, Default)]
struct Graph {
    edges: BTreeMap<Node, BTreeSet<Node>>,
    proc_macros: BTreeSet<Node>,
    workspace: BTreeSet<Node>,
}

/// Parses `cargo tree --prefix depth --format {p}` output (deduplicated: `(*)` marks a
/// package whose dependencies were printed before) into its dependency edges.
fn parse_tree(text: &str) -> Result<Graph, SbomError> {
    let mut graph = Graph::default();
    let mut stack: Vec<Node> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let digits = line.bytes().take_while(u8::is_ascii_digit).count();
        let depth: usize = line[..digits]
            .parse()
            .map_err(|_| SbomError::TreeLine(line.to_owned()))?;
        let mut words = line[digits..].split_whitespace();
        let (Some(name), Some(version)) = (words.next(), words.next()) else {
            return Err(SbomError::TreeLine(line.to_owned()));
        };
        let version = version
            .strip_prefix('v')
            .ok_or_else(|| SbomError::TreeLine(line.to_owned()))?;
        let node = Node {
            name: name.to_owned(),
            version: version.to_owned(),
        };
        for word in words {
            if word == "(proc-macro)" {
                graph.proc_macros.insert(node.clone());
            } else if word.starts_with("(/") {
                graph.workspace.insert(node.clone());
            }
        }
        if depth > stack.len() {
            return Err(SbomError::TreeLine(line.to_owned()));
        }
        stack.truncate(depth);
        if let Some(parent) = stack.last() {
            graph
                .edges
                .entry(parent.clone())
                .or_default()
                .insert(node.clone());
        }
        graph.edges.entry(node.clone()).or_default();
        stack.push(node);
    }
    Ok(graph)
}

impl Graph {
    fn root(&self, package: &str) -> Result<Node, SbomError> {
        self.workspace
            .iter()
            .find(|n| n.name == package)
            .cloned()
            .ok_or_else(|| SbomError::NoPackage(package.to_owned()))
    }

    /// Everything reachable from `root`; proc-macros neither included nor followed when
    /// `skip_proc_macros`.
    fn closure(&self, root: &Node, skip_proc_macros: bool) -> BTreeSet<Node> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![root.clone()];
        while let Some(node) = todo.pop() {
            if (skip_proc_macros && self.proc_macros.contains(&node)) || !seen.insert(node.clone())
            {
                continue;
            }
            if let Some(deps) = self.edges.get(&node) {
                todo.extend(deps.iter().cloned());
            }
        }
        seen
    }
}

/// `(name, version)` → `(source, checksum)` of every registry or git package in
/// `Cargo.lock` (workspace members have neither).
fn parse_lock(text: &str) -> BTreeMap<(String, String), (Option<String>, Option<String>)> {
    let mut out = BTreeMap::new();
    for block in text.split("[[package]]").skip(1) {
        let field = |key: &str| {
            block.lines().find_map(|l| {
                let (k, v) = l.split_once(" = ")?;
                (k.trim() == key).then(|| v.trim().trim_matches('"').to_owned())
            })
        };
        if let (Some(name), Some(version)) = (field("name"), field("version")) {
            out.insert((name, version), (field("source"), field("checksum")));
        }
    }
    out
}

/// The document for `binaries` from the two `cargo tree` outputs (normal edges only; normal
/// and build edges) of the build and the workspace's `Cargo.lock`.
pub fn from_trees(
    target: &str,
    normal_tree: &str,
    all_tree: &str,
    cargo_lock: &str,
    binaries: &[String],
) -> Result<Sbom, SbomError> {
    let normal = parse_tree(normal_tree)?;
    let all = parse_tree(all_tree)?;
    let lock = parse_lock(cargo_lock);
    let mut entries = Vec::new();
    let mut used = BTreeSet::new();
    let mut names: Vec<&String> = binaries.iter().collect();
    names.sort();
    names.dedup();
    for binary in names {
        let package = BINARY_PACKAGES
            .iter()
            .find(|(b, _)| b == binary)
            .map(|(_, p)| *p)
            .ok_or_else(|| SbomError::UnknownBinary(binary.clone()))?;
        let linked = normal.closure(&normal.root(package)?, true);
        let everything = all.closure(&all.root(package)?, false);
        let label = |n: &Node| format!("{} {}", n.name, n.version);
        entries.push(BinaryEntry {
            name: binary.clone(),
            package: package.to_owned(),
            linked: linked.iter().map(label).collect(),
            build: everything.difference(&linked).map(label).collect(),
        });
        used.extend(everything);
        used.extend(linked);
    }
    let mut packages = Vec::new();
    for node in used {
        let (source, checksum) = if all.workspace.contains(&node) {
            (WORKSPACE_SOURCE.to_owned(), None)
        } else {
            let key = (node.name.clone(), node.version.clone());
            match lock.get(&key) {
                Some((Some(source), checksum)) => (source.clone(), checksum.clone()),
                _ => {
                    return Err(SbomError::NotLocked {
                        name: node.name,
                        version: node.version,
                    });
                }
            }
        };
        packages.push(Package {
            name: node.name,
            version: node.version,
            source,
            checksum,
        });
    }
    packages.sort();
    Ok(Sbom {
        format: FORMAT,
        target: target.to_owned(),
        binaries: entries,
        packages,
    })
}

/// `cargo tree` of the release build ([`crate::reproduce::PACKAGES`] for `target`) in
/// `workspace`, with `edges` (`normal` or `normal,build`). Offline and `--locked`: the
/// build that follows uses the same lock file.
fn cargo_tree(workspace: &Path, target: &str, edges: &str) -> Result<String, SbomError> {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(workspace).args([
        "tree",
        "--locked",
        "--offline",
        "--target",
        target,
        "-e",
        edges,
        "--prefix",
        "depth",
        "--format",
        "{p}",
        "--color",
        "never",
    ]);
    for p in crate::reproduce::PACKAGES {
        cmd.args(["-p", p]);
    }
    let out = cmd
        .output()
        .map_err(|e| SbomError::CargoTree(format!("cannot run cargo: {e}")))?;
    if !out.status.success() {
        return Err(SbomError::CargoTree(
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    String::from_utf8(out.stdout).map_err(|e| SbomError::CargoTree(e.to_string()))
}

/// The document for `binaries` of the workspace at `workspace`, as its release build
/// ([`crate::reproduce::TARGET_TRIPLE`]) resolves them.
pub fn generate(workspace: &Path, binaries: &[String]) -> Result<Sbom, SbomError> {
    let target = crate::reproduce::TARGET_TRIPLE;
    let normal = cargo_tree(workspace, target, "normal")?;
    let all = cargo_tree(workspace, target, "normal,build")?;
    let lock_path = workspace.join("Cargo.lock");
    let lock = std::fs::read_to_string(&lock_path).map_err(|source| SbomError::Io {
        path: lock_path,
        source,
    })?;
    from_trees(target, &normal, &all, &lock, binaries)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const LOCK: &str = r#"
[[package]]
name = "app"
version = "0.1.0"
dependencies = ["a"]

[[package]]
name = "a"
version = "1.0.0"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "aa"

[[package]]
name = "m"
version = "2.0.0"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "mm"

[[package]]
name = "s"
version = "3.0.0"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "ss"

[[package]]
name = "cc"
version = "1.2.0"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "cc"
"#;

    /// `app` links `a`; `a` derives with the proc-macro `m` (which uses `s`); `app`'s build
    /// script uses `cc`. `(*)` repeats `a` without its children.
    const NORMAL: &str =
        "0app v0.1.0 (/home/x/app)\n1a v1.0.0\n2m v2.0.0 (proc-macro)\n3s v3.0.0\n1a v1.0.0 (*)\n";
    const ALL: &str =
        "0app v0.1.0 (/home/x/app)\n1a v1.0.0\n2m v2.0.0 (proc-macro)\n3s v3.0.0\n1cc v1.2.0\n";

    #[test]
    fn linked_crates_exclude_proc_macros_and_build_dependencies() {
        let s = from_trees(
            "t",
            &NORMAL.replace("app ", "appliance "),
            &ALL.replace("app ", "appliance "),
            LOCK,
            &["appliance".to_owned()],
        )
        .unwrap();
        let b = &s.binaries[0];
        assert_eq!(b.linked, ["a 1.0.0", "appliance 0.1.0"]);
        assert_eq!(b.build, ["cc 1.2.0", "m 2.0.0", "s 3.0.0"]);
        let a = s.packages.iter().find(|p| p.name == "a").unwrap();
        assert_eq!(a.checksum.as_deref(), Some("aa"));
        let me = s.packages.iter().find(|p| p.name == "appliance").unwrap();
        assert_eq!(me.source, WORKSPACE_SOURCE);
        assert_eq!(me.checksum, None);
        let bytes = s.to_bytes().unwrap();
        assert!(!String::from_utf8(bytes).unwrap().contains("/home/x"));
    }

    #[test]
    fn a_package_missing_from_the_lock_file_is_an_error() {
        let err = from_trees(
            "t",
            "0appliance v0.1.0 (/x)\n1zz v9.0.0\n",
            "0appliance v0.1.0 (/x)\n1zz v9.0.0\n",
            LOCK,
            &["appliance".to_owned()],
        )
        .unwrap_err();
        assert!(matches!(err, SbomError::NotLocked { .. }), "{err}");
    }

    #[test]
    fn a_binary_without_a_package_is_an_error() {
        let err = from_trees("t", NORMAL, ALL, LOCK, &["sh".to_owned()]).unwrap_err();
        assert!(matches!(err, SbomError::UnknownBinary(_)), "{err}");
        // The fixture's root is `app`, not `appliance`.
        assert!(matches!(
            from_trees("t", NORMAL, ALL, LOCK, &["appliance".to_owned()]),
            Err(SbomError::NoPackage(_))
        ));
    }

    #[test]
    fn every_image_binary_has_a_package_the_release_build_builds() {
        for b in crate::DEFAULT_BINARIES {
            let (_, package) = BINARY_PACKAGES.iter().find(|(name, _)| name == b).unwrap();
            assert!(crate::reproduce::PACKAGES.contains(package), "{package}");
        }
    }
}
