//! The repository stands alone: every repository path that a tracked Markdown file or a
//! Rust comment names must exist in the repository, so a moved or renamed file, or a
//! reference to a document kept elsewhere, fails here instead of misleading a reader.
//!
//! What is checked, in the files `git ls-files` lists:
//! * Markdown links `[text](target)` in `*.md` files (outside fenced code blocks),
//!   resolved against the file's own folder, as a Markdown renderer does;
//! * backticked tokens that look like paths (they contain `/`, or end in the extension of
//!   a source or document), in `*.md` files and in the `//`, `///` and `//!` comments of
//!   `*.rs` files, resolved against the repository root, the file's folder or any folder
//!   above it (crate documentation writes paths relative to the crate, as in src/cid.rs).
//!
//! Not checked, each for the reason given at its constant below: URLs, absolute (runtime
//! and API) paths, placeholders and globs, runtime folders, media types, and the paths of
//! another repository cited after its github.com address. A name counts as present when
//! a tracked file or folder has it, so a file that exists only in one checkout
//! (generated, never committed) is reported too.

#![allow(clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

/// A bare file name (no `/`) is a path only with one of these extensions: sources and
/// documents exist only in the repository, whereas bare data-file names (`quote.json`,
/// `app-compose.json`, `sha256sum.txt`) usually name files the programs read or write at
/// run time. (A token with a `/` is a path whatever it ends in.)
const SOURCE_EXTENSIONS: &[&str] = &["md", "rs", "sol", "py", "js", "sh"];

/// First path segments of runtime locations, never in the repository: the build output
/// and the state folder of `scripts/dev`.
const RUNTIME_ROOTS: &[&str] = &["target", ".appliance-dev"];

/// Tokens with a `/` that are identifiers, not paths: media types and the ACME ALPN
/// protocol name.
const NOT_PATH_PREFIXES: &[&str] = &["application/", "text/", "acme-tls/"];

/// Absolute paths are runtime or API paths (`/var/lib/appliance`, `/core/v1/...`) and are
/// skipped, except these: home folders, and the work folder that once leaked into the
/// vector provenance here, belong to a development machine, never to the repository.
// (The last one is spelled in two pieces so that this file does not name it itself.)
const MACHINE_PREFIXES: &[&str] = &["/home/", "/root/", "/Users/", concat!("/wo", "rk/")];

/// Text naming another repository: backticked tokens after it on the same line are that
/// repository's paths (provenance of test vectors, upstream documentation).
const OTHER_REPOSITORY: &str = "github.com/";

/// One path named somewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Named {
    /// The file naming it, relative to the repository root.
    file: String,
    /// 1-based line.
    line: usize,
    /// The path as written.
    path: String,
    /// A Markdown link (resolved against the file's folder only).
    link: bool,
}

/// The tracked files and every folder holding one, relative to the root.
struct Tree {
    files: BTreeSet<String>,
    folders: BTreeSet<String>,
}

impl Tree {
    fn new<'a>(files: impl IntoIterator<Item = &'a str>) -> Self {
        let files: BTreeSet<String> = files.into_iter().map(str::to_owned).collect();
        let mut folders = BTreeSet::new();
        for file in &files {
            let mut path = Path::new(file.as_str());
            while let Some(parent) = path.parent() {
                if parent.as_os_str().is_empty() {
                    break;
                }
                folders.insert(parent.to_string_lossy().into_owned());
                path = parent;
            }
        }
        Self { files, folders }
    }

    fn has(&self, path: &str) -> bool {
        path.is_empty() || self.files.contains(path) || self.folders.contains(path)
    }
}

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the e2e crate lives one folder below the repository root")
        .to_path_buf()
}

fn tracked_files(root: &Path) -> Vec<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["ls-files", "-z"])
        .output()
        .expect("git runs (this test reads the tracked files of a git checkout)");
    assert!(
        out.status.success(),
        "git ls-files failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("tracked file names are UTF-8")
        .split('\0')
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The lines of a Markdown text outside fenced code blocks (commands and examples, not
/// references), with their 1-based numbers.
fn markdown_prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push((index + 1, line));
        }
    }
    out
}

/// The text of the comment lines of a Rust source (`//`, `///`, `//!`).
fn rust_comments(text: &str) -> Vec<(usize, &str)> {
    text.lines()
        .enumerate()
        .filter_map(|(index, line)| {
            let comment = line.trim_start().strip_prefix("//")?;
            Some((index + 1, comment.trim_start_matches(['/', '!'])))
        })
        .collect()
}

/// Backticked tokens of a line that come before any mention of another repository.
fn backticked(line: &str) -> Vec<&str> {
    let own = match line.find(OTHER_REPOSITORY) {
        Some(at) => &line[..at],
        None => line,
    };
    // Between the 1st and 2nd backtick, the 3rd and 4th, ...; an unclosed one is ignored.
    let mut parts: Vec<&str> = own.split('`').collect();
    if parts.len().is_multiple_of(2) {
        parts.pop();
    }
    parts.into_iter().skip(1).step_by(2).collect()
}

/// Targets of the Markdown links `[text](target)` of a line.
fn link_targets(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let Some(end) = rest.find(')') else { break };
        out.push(rest[..end].trim());
        rest = &rest[end..];
    }
    out
}

fn extension(name: &str) -> Option<&str> {
    let file = name.rsplit('/').next()?;
    let (stem, ext) = file.rsplit_once('.')?;
    (!stem.is_empty()).then_some(ext)
}

/// Whether a token is written only with the characters of a repository path. Anything
/// else (spaces, `<…>`, `…`, `*`, `{a,b}`, `$VAR`, `~`, `:`, `@scope`) marks a command,
/// a glob, a placeholder, a URL or a package name.
fn path_characters(token: &str) -> bool {
    !token.is_empty()
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/'))
}

/// A placeholder segment such as `DIR`, `STATE_DIR` or `FILE`: capitals only, no dot.
fn placeholder(segment: &str) -> bool {
    segment.len() > 1
        && segment
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// Whether a backticked token names a repository path (and so is checked).
fn names_repository_path(token: &str) -> bool {
    // Commands, globs, placeholders, URLs, package names; absolute runtime or API paths.
    if !path_characters(token) || token.starts_with('/') {
        return false;
    }
    let ext = extension(token);
    if !token.contains('/') && !ext.is_some_and(|e| SOURCE_EXTENSIONS.contains(&e)) {
        return false;
    }
    let first = token.split('/').next().unwrap_or("");
    // An address prefix (`192.0.0.0/24`, `2002::/16` has a `:` already) is no path.
    if first.parse::<std::net::Ipv4Addr>().is_ok() {
        return false;
    }
    !NOT_PATH_PREFIXES.iter().any(|p| token.starts_with(p))
        && !RUNTIME_ROOTS.contains(&first)
        && !placeholder(first)
}

/// Joins `relative` to `base` (both repository-relative), or `None` if it leaves the
/// repository.
fn join(base: &str, relative: &str) -> Option<String> {
    let mut parts: Vec<String> = Path::new(base)
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    for component in Path::new(relative).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.join("/"))
}

fn folder_of(file: &str) -> &str {
    file.rsplit_once('/').map_or("", |(folder, _)| folder)
}

/// Whether `named` exists in `tree`; the error says what is wrong.
fn check(tree: &Tree, named: &Named) -> Result<(), String> {
    let path = named.path.split('#').next().unwrap_or("");
    let path = path.trim_end_matches('/');
    let folder = folder_of(&named.file);
    if named.link {
        return match join(folder, path) {
            Some(target) if tree.has(&target) => Ok(()),
            Some(target) => Err(format!(
                "links to `{target}`, which is not in the repository"
            )),
            None => Err("links outside the repository".to_owned()),
        };
    }
    if !named.path.contains('/') {
        // A bare source or document name: somewhere in the same top-level folder.
        let top = named.file.split('/').next().unwrap_or("");
        let scope = if named.file.contains('/') { top } else { "" };
        let found = tree.files.iter().any(|file| {
            (scope.is_empty() || file.starts_with(&format!("{scope}/")))
                && file.rsplit('/').next() == Some(path)
        });
        return if found {
            Ok(())
        } else {
            Err(format!(
                "no tracked file is named `{path}` under `{}`",
                if scope.is_empty() { "." } else { scope }
            ))
        };
    }
    let mut bases = vec![String::new()];
    let mut base = folder;
    while !base.is_empty() {
        bases.push(base.to_owned());
        base = folder_of(base);
    }
    let targets: Vec<Option<String>> = bases.iter().map(|base| join(base, path)).collect();
    if targets.iter().flatten().any(|target| tree.has(target)) {
        return Ok(());
    }
    Err(if targets.iter().all(Option::is_none) {
        "points outside the repository".to_owned()
    } else {
        "is not in the repository (relative to the root or to any folder above the file)".to_owned()
    })
}

/// Every path named by `text` (the contents of the tracked file `file`), and every
/// machine path it names (always an error).
fn named_paths(file: &str, text: &str) -> (Vec<Named>, Vec<Named>) {
    let markdown = file.ends_with(".md");
    let lines = if markdown {
        markdown_prose(text)
    } else if file.ends_with(".rs") {
        rust_comments(text)
    } else {
        return (Vec::new(), Vec::new());
    };
    let mut paths = Vec::new();
    let mut machine = Vec::new();
    for (line, content) in lines {
        let named = |path: &str, link: bool| Named {
            file: file.to_owned(),
            line,
            path: path.to_owned(),
            link,
        };
        for token in backticked(content) {
            let token = token.trim();
            if MACHINE_PREFIXES.iter().any(|p| token.starts_with(p)) {
                machine.push(named(token, false));
            } else if names_repository_path(token) {
                paths.push(named(token, false));
            }
        }
        for target in link_targets(content) {
            let path = target.split('#').next().unwrap_or("");
            let is_url = target.contains("://") || target.starts_with("mailto:");
            if is_url || path.is_empty() || !path_characters(path) {
                continue;
            }
            // A link in a Rust comment is taken like a backticked token: rustdoc gives a
            // relative link no meaning inside the repository.
            if markdown || names_repository_path(path) {
                paths.push(named(target, markdown));
            }
        }
    }
    (paths, machine)
}

#[test]
fn every_path_the_repository_names_exists() {
    let root = repository_root();
    let files = tracked_files(&root);
    let tree = Tree::new(files.iter().map(String::as_str));
    let mut problems = Vec::new();
    let mut checked = 0usize;
    for file in &files {
        if !(file.ends_with(".md") || file.ends_with(".rs")) {
            continue;
        }
        // A tracked file deleted in this checkout has nothing to read.
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue;
        };
        let (paths, machine) = named_paths(file, &text);
        for named in machine {
            problems.push(format!(
                "{}:{}: `{}` is a path of a development machine; name the file in the repository or its public source",
                named.file, named.line, named.path
            ));
        }
        for named in paths {
            checked += 1;
            if let Err(why) = check(&tree, &named) {
                problems.push(format!(
                    "{}:{}: `{}` {why}",
                    named.file, named.line, named.path
                ));
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} paths found: is the extraction broken?"
    );
    assert!(
        problems.is_empty(),
        "{} dangling path(s) in documents and comments (fix the reference, or commit the file it names):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The extraction and resolution rules on small inputs.
mod rules {
    use super::*;

    fn tree() -> Tree {
        Tree::new([
            "README.md",
            "docs/operators.md",
            "appliance/src/lib.rs",
            "appliance/src/store/mod.rs",
            "appliance/tests/data/cids.json",
            "scripts/dev",
        ])
    }

    fn problems(file: &str, text: &str) -> Vec<String> {
        let tree = tree();
        let (paths, machine) = named_paths(file, text);
        machine
            .iter()
            .map(|n| format!("machine {}", n.path))
            .chain(
                paths
                    .iter()
                    .filter_map(|n| check(&tree, n).err().map(|e| format!("{}: {e}", n.path))),
            )
            .collect()
    }

    #[test]
    fn present_paths_pass() {
        let md = "See [ops](docs/operators.md#upgrade), `scripts/dev`, `appliance/src/`, \
                  `appliance/tests/data/cids.json` and `lib.rs`.";
        assert_eq!(problems("README.md", md), Vec::<String>::new());
        // Crate-relative and folder-relative names; code outside comments is not read.
        let rs = "//! The store (`store/mod.rs`), data in `tests/data/cids.json`.\n\
                  let x = \"`nope/x.rs`\";";
        assert_eq!(problems("appliance/src/lib.rs", rs), Vec::<String>::new());
    }

    #[test]
    fn links_are_relative_to_their_file() {
        let found = problems("appliance/README.md", "[ops](docs/operators.md)");
        assert_eq!(
            found,
            vec![
                "docs/operators.md: links to `appliance/docs/operators.md`, which is not in the repository"
            ]
        );
        assert!(problems("appliance/README.md", "[ops](../docs/operators.md)").is_empty());
        let found = problems("README.md", "[up](../outside.md)");
        assert_eq!(found, vec!["../outside.md: links outside the repository"]);
    }

    #[test]
    fn dangling_paths_fail() {
        let found = problems(
            "appliance/src/lib.rs",
            "/// Moved: `store/signatures.rs`, `docs/compatibility.md`, `COMPAT.md`.",
        );
        assert_eq!(found.len(), 3, "{found:?}");
        let found = problems("appliance/src/lib.rs", "// see `../../../elsewhere/x.rs`");
        assert_eq!(
            found,
            vec!["../../../elsewhere/x.rs: points outside the repository"]
        );
    }

    #[test]
    fn non_paths_are_skipped() {
        let md = "`https://x.example/a.md`, `/core/v1/new_account`, `<data_dir>/state.db`, \
                  `~/.cache/appliance-tools`, `target/debug`, `.appliance-dev/anvil`, \
                  `STATE_DIR/root.sealed`, `application/json`, `quote.json`, `cert-*.pem`, \
                  `Lit.Actions.setResponse({response})`, `a b/c.rs`, [site](https://x.example/y.md), \
                  github.com/near/mpc, `crates/test-utils/assets/`, `198.18.0.0/15`.\n\
                  ```\ncat missing/file.rs\n```";
        assert_eq!(problems("README.md", md), Vec::<String>::new());
    }

    #[test]
    fn machine_paths_always_fail() {
        let found = problems("README.md", "copied from `/home/dev/vectors/cids.json`");
        assert_eq!(found, vec!["machine /home/dev/vectors/cids.json"]);
    }
}
