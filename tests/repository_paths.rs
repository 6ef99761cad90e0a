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
//!
//! The same goes for symbols: every backticked symbol in `docs/*.md`, in every
//! `README.md` and in the crate documentation (`//!`) of every crate root must be defined
//! by the tracked sources, so renaming a type, a function or a test fails here until the
//! documents follow. Which tokens are symbols is said at `symbol_segments`: a Rust path
//! (`Store::write`, `appliance::chain`), a call or a macro (`render_dev()`,
//! `store_test!`), or a CamelCase name (`KeyClient`); never a lone lower-case word, a
//! capitals-only name, a file, a command or a fragment of JSON, SQL or generics. How
//! they are resolved is said at `Symbols`: Rust items read with `syn` (with their
//! associated items, variants, fields and `use`s), Solidity, JavaScript and TypeScript
//! definitions, SQL functions, and the JavaScript names the action runtime registers; a
//! path is followed member by member through the repository's own crates, modules and
//! types, and not into a dependency. The few names that are someone else's vocabulary are
//! listed, with their reasons, in `NOT_SYMBOLS`.

#![allow(clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
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

// ---------------------------------------------------------------------------------------
// The symbols the documents name.

/// Names every Rust module sees without a `use` (the prelude, and std's derive macros), so
/// a document may name them although no source imports or defines them.
const RUST_PRELUDE: &[&str] = &[
    "Option",
    "Some",
    "None",
    "Result",
    "Ok",
    "Err",
    "Vec",
    "String",
    "Box",
    "ToString",
    "ToOwned",
    "Default",
    "Clone",
    "Copy",
    "Send",
    "Sync",
    "Sized",
    "Unpin",
    "Drop",
    "Fn",
    "FnMut",
    "FnOnce",
    "Iterator",
    "IntoIterator",
    "Extend",
    "From",
    "Into",
    "TryFrom",
    "TryInto",
    "AsRef",
    "AsMut",
    "PartialEq",
    "Eq",
    "PartialOrd",
    "Ord",
    "Debug",
    "Hash",
    "std",
    "core",
    "alloc",
];

/// CamelCase names the documents write in backticks that are not symbols of any source,
/// each with the reason. Keep this list short: a name belongs here only when it is
/// someone else's vocabulary that no source spells as a name of its own.
const NOT_SYMBOLS: &[(&str, &str)] = &[
    ("Allow", "an HTTP header"),
    ("Authorization", "an HTTP header"),
    ("VmRSS", "a field of /proc/PID/status"),
    (
        "Intl",
        "an ECMAScript built-in, named because the action runtime leaves it out",
    ),
    (
        "UpToDate",
        "a TCB status of Intel's collateral (a string to dcap-qvl)",
    ),
    (
        "GetKey",
        "a method of the dstack guest agent's RPC (an HTTP path to the sources)",
    ),
    (
        "GetQuote",
        "a method of the dstack guest agent's RPC (an HTTP path to the sources)",
    ),
    (
        "EmitEvent",
        "a method of the dstack guest agent's RPC (an HTTP path to the sources)",
    ),
];

/// Sources whose string literals that are identifiers are the JavaScript names actions
/// see (globals, methods, properties): the action runtime registers them by string.
const JAVASCRIPT_NAME_SOURCES: &[&str] = &["appliance/runtime/src/sandbox/"];

/// Keywords of Solidity, JavaScript and TypeScript after which a name is defined.
const FOREIGN_DEFINING_KEYWORDS: &[&str] = &[
    "contract",
    "interface",
    "library",
    "struct",
    "enum",
    "event",
    "error",
    "function",
    "modifier",
    "class",
    "type",
    "const",
    "let",
    "var",
];

/// One symbol named by a document.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NamedSymbol {
    file: String,
    line: usize,
    /// The token as written (`Store::write`, `KeyClient`, `render_dev()`).
    token: String,
}

fn rust_identifier(segment: &str) -> bool {
    let mut bytes = segment.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && segment.bytes().any(|b| b != b'_')
}

/// `KeyClient`, `ChainSecured`: an identifier that starts with a capital, has a small
/// letter and no `_` (so not `SCM_RIGHTS`, `POST` or `WAL`).
fn camel_case(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_uppercase())
        && name.bytes().any(|b| b.is_ascii_lowercase())
        && !name.contains('_')
}

/// The path segments of a backticked token that names a symbol, or `None`.
///
/// The rule: after dropping one trailing `()` (a call) or `!` (a macro), the token is a
/// Rust path, identifiers joined by `::` with nothing else (no generics, arguments,
/// spaces, dots or `…`), and it is
/// * a path of two or more segments (`Store::write`, `appliance::chain`), or
/// * marked as a call or a macro (`render_dev()`, `store_test!`), or
/// * one CamelCase identifier (`KeyClient`).
///
/// So a lone lower-case word (a module, a field, a config key, a command, an English
/// word), an all-capital name (an environment variable, a SQL keyword, a constant), a
/// file name, a URL, a command line, a JSON or SQL fragment and a type expression with
/// generics (`Result<Outcome, ExecError>`) are not symbols here.
fn symbol_segments(token: &str) -> Option<Vec<&str>> {
    let (core, marked) = match token.strip_suffix("()").or_else(|| token.strip_suffix('!')) {
        Some(core) => (core, true),
        None => (token, false),
    };
    let segments: Vec<&str> = core.split("::").collect();
    if !segments.iter().all(|s| rust_identifier(s)) {
        return None;
    }
    (segments.len() > 1 || marked || camel_case(core)).then_some(segments)
}

/// The backticked symbols of a document: Markdown prose (outside fenced blocks), or the
/// `//!` lines of a crate root.
fn named_symbols(file: &str, text: &str) -> Vec<NamedSymbol> {
    let lines: Vec<(usize, &str)> = if file.ends_with(".md") {
        markdown_prose(text)
    } else {
        text.lines()
            .enumerate()
            .filter_map(|(index, line)| Some((index + 1, line.trim_start().strip_prefix("//!")?)))
            .collect()
    };
    let mut out = Vec::new();
    for (line, content) in lines {
        for token in backticked(content) {
            let token = token.trim();
            if symbol_segments(token).is_some() {
                out.push(NamedSymbol {
                    file: file.to_owned(),
                    line,
                    token: token.to_owned(),
                });
            }
        }
    }
    out
}

/// The crates the manifests define, and the names Rust code may use for other crates.
#[derive(Default)]
struct Manifests {
    /// Crate root file (repository-relative) → the crate's name in Rust (`-` as `_`).
    roots: BTreeMap<String, String>,
    /// Every dependency key of every manifest, as Rust spells it.
    dependencies: BTreeSet<String>,
}

impl Manifests {
    /// Reads one tracked `Cargo.toml` (`path`, repository-relative).
    fn add(&mut self, path: &str, text: &str, tracked: &BTreeSet<String>) -> Result<(), String> {
        let manifest: toml::Table =
            toml::from_str(text).map_err(|e| format!("{path}: not TOML: {e}"))?;
        let folder = folder_of(path);
        let at = |relative: &str| join(folder, relative).unwrap_or_default();
        let rust = |name: &str| name.replace('-', "_");
        collect_dependency_keys(&manifest, &mut self.dependencies);
        let Some(package) = manifest.get("package").and_then(|p| p.get("name")) else {
            return Ok(());
        };
        let package = package.as_str().unwrap_or_default();
        let lib = manifest.get("lib");
        let lib_name = lib
            .and_then(|l| l.get("name"))
            .and_then(|n| n.as_str())
            .unwrap_or(package);
        let lib_path = lib
            .and_then(|l| l.get("path"))
            .and_then(|p| p.as_str())
            .unwrap_or("src/lib.rs");
        self.roots.insert(at(lib_path), rust(lib_name));
        self.roots.insert(at("src/main.rs"), rust(package));
        for bin in manifest
            .get("bin")
            .and_then(|b| b.as_array())
            .into_iter()
            .flatten()
        {
            let name = bin.get("name").and_then(|n| n.as_str()).unwrap_or(package);
            let path = bin.get("path").and_then(|p| p.as_str());
            let path = path.map_or_else(|| format!("src/bin/{name}.rs"), str::to_owned);
            self.roots.insert(at(&path), rust(name));
        }
        let bins = format!("{}/", at("src/bin"));
        for file in tracked.iter().filter(|f| f.starts_with(&bins)) {
            let stem = file[bins.len()..].trim_end_matches(".rs");
            if !stem.contains('/') && file.ends_with(".rs") {
                self.roots.entry(file.clone()).or_insert_with(|| rust(stem));
            }
        }
        self.roots.retain(|file, _| tracked.contains(file));
        Ok(())
    }
}

/// The keys of every `*dependencies` table of a manifest, wherever it sits (`[workspace]`,
/// `[target.'cfg(…)']`).
fn collect_dependency_keys(table: &toml::Table, out: &mut BTreeSet<String>) {
    for (key, value) in table {
        let Some(inner) = value.as_table() else {
            continue;
        };
        if key.ends_with("dependencies") {
            out.extend(inner.keys().map(|k| k.replace('-', "_")));
        } else {
            collect_dependency_keys(inner, out);
        }
    }
}

/// What the sources define, by name.
///
/// A *container* is anything a path goes through, known by its last name: a crate (its
/// root file), a module (inline, or its file: a file x.rs or x/mod.rs is module `x`), a type
/// (struct, enum, union, trait, or the self type of an `impl`) and a Solidity contract or
/// struct. (A module file is named after its file, or its folder for `mod.rs`.)
/// Resolution is by name, not by full path: `A::b` passes when some container named `A`
/// defines or imports `b`.
#[derive(Default)]
struct Symbols {
    /// Container → the names it defines or imports (items, modules, associated items of
    /// its `impl`s and trait, enum variants, named fields, `use`d names).
    members: BTreeMap<String, BTreeSet<String>>,
    /// Container → containers whose members it has too: `use x as y` (y has x's),
    /// `use x::*` (the module has x's), `type y = x<…>`.
    shares: BTreeMap<String, BTreeSet<String>>,
    /// Names a Rust item of the repository defines: items, associated items, enum
    /// variants, and its crates' names.
    defined: BTreeSet<String>,
    /// The repository's containers: its crates, modules, types and traits, and its
    /// Solidity contracts, interfaces, structs and enums. A path through one is followed
    /// strictly.
    containers: BTreeSet<String>,
    /// Names a `use` brings in: they exist, in the repository or in a dependency, or the
    /// code would not compile.
    imported: BTreeSet<String>,
    /// Every segment of every path the code writes (`fmt::Display`, `Ordering::Relaxed`):
    /// they exist too, but a lower-case one may be a local variable, so only those that
    /// start with a capital count.
    referenced: BTreeSet<String>,
    /// Names defined outside Rust: Solidity, JavaScript and TypeScript definitions, SQL
    /// functions and triggers created by the sources, and the JavaScript names the action
    /// runtime registers ([`JAVASCRIPT_NAME_SOURCES`]).
    foreign: BTreeSet<String>,
    /// The crates of every manifest's dependencies: a path starting with one (and no
    /// container of the repository of that name) is not followed further.
    dependencies: BTreeSet<String>,
    /// Every crate root (repository-relative) → its crate's name.
    crate_roots: BTreeMap<String, String>,
}

impl Symbols {
    /// Reads the sources (repository-relative path, text): every `Cargo.toml`, `*.rs`,
    /// `*.sol`, `*.js`, `*.mjs`, `*.ts` and `*.sql`; anything else is ignored.
    fn from_sources(sources: &[(String, String)]) -> Result<Self, String> {
        let tracked: BTreeSet<String> = sources.iter().map(|(path, _)| path.clone()).collect();
        let mut manifests = Manifests::default();
        for (path, text) in sources {
            if path == "Cargo.toml" || path.ends_with("/Cargo.toml") {
                manifests.add(path, text, &tracked)?;
            }
        }
        let mut symbols = Self {
            dependencies: manifests.dependencies.clone(),
            crate_roots: manifests.roots.clone(),
            ..Self::default()
        };
        symbols.defined.extend(manifests.roots.values().cloned());
        symbols.containers.extend(manifests.roots.values().cloned());
        for (path, text) in sources {
            let ext = extension(path).unwrap_or("");
            if ext == "rs" {
                let container = manifests.roots.get(path).cloned().unwrap_or_else(|| {
                    let file = path.rsplit('/').next().unwrap_or(path);
                    let stem = file.trim_end_matches(".rs");
                    if matches!(stem, "mod" | "lib" | "main") {
                        folder_of(path)
                            .rsplit('/')
                            .next()
                            .unwrap_or(stem)
                            .to_owned()
                    } else {
                        stem.to_owned()
                    }
                    .replace('-', "_")
                });
                let ast = syn::parse_file(text).map_err(|e| format!("{path}: not parsed: {e}"))?;
                let mut collector = Collector {
                    symbols: &mut symbols,
                    stack: vec![container],
                };
                syn::visit::Visit::visit_file(&mut collector, &ast);
                symbols.scan_sql(text);
                if JAVASCRIPT_NAME_SOURCES.iter().any(|p| path.starts_with(p)) {
                    symbols.scan_javascript_names(text);
                }
            } else if matches!(ext, "sol" | "js" | "mjs" | "ts") {
                symbols.scan_foreign(text, ext == "sol");
            } else if ext == "sql" {
                symbols.scan_sql(text);
            }
        }
        Ok(symbols)
    }

    fn member(&mut self, container: &str, name: &str) {
        self.members
            .entry(container.to_owned())
            .or_default()
            .insert(name.to_owned());
    }

    fn define(&mut self, container: &str, name: &str) {
        self.member(container, name);
        self.defined.insert(name.to_owned());
    }

    /// SQL functions and triggers the text creates (`CREATE [OR REPLACE] FUNCTION name`).
    fn scan_sql(&mut self, text: &str) {
        let words: Vec<&str> = text
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        for window in words.windows(3) {
            let create = window[0].eq_ignore_ascii_case("create");
            if create
                && ["function", "trigger"]
                    .iter()
                    .any(|k| window[1].eq_ignore_ascii_case(k))
            {
                self.foreign.insert(window[2].to_owned());
            }
        }
        for window in words.windows(5) {
            let create = window[0].eq_ignore_ascii_case("create")
                && window[1].eq_ignore_ascii_case("or")
                && window[2].eq_ignore_ascii_case("replace");
            if create
                && ["function", "trigger"]
                    .iter()
                    .any(|k| window[3].eq_ignore_ascii_case(k))
            {
                self.foreign.insert(window[4].to_owned());
            }
        }
    }

    /// The string literals of a Rust source that are identifiers (`"TextDecoder"`).
    fn scan_javascript_names(&mut self, text: &str) {
        for literal in text.split('"').skip(1).step_by(2) {
            if rust_identifier(literal) {
                self.foreign.insert(literal.to_owned());
            }
        }
    }

    /// Definitions in Solidity, JavaScript or TypeScript: the name after a defining
    /// keyword. In Solidity the members of a contract, interface, struct or enum are also
    /// recorded (for `IAccountConfig::UsageKeyPermissions`).
    fn scan_foreign(&mut self, text: &str, solidity: bool) {
        let code: String = text
            .lines()
            .map(|line| line.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        // Words and the braces between them, in order.
        let mut tokens: Vec<&str> = Vec::new();
        let mut start = None;
        for (at, c) in code.char_indices() {
            let word = c.is_ascii_alphanumeric() || c == '_' || c == '$';
            match (word, start) {
                (true, None) => start = Some(at),
                (false, Some(from)) => {
                    tokens.push(&code[from..at]);
                    start = None;
                }
                _ => {}
            }
            if matches!(c, '{' | '}' | ';' | ',') {
                tokens.push(&code[at..at + 1]);
            }
        }
        if let Some(from) = start {
            tokens.push(&code[from..]);
        }
        // (container, depth of its body, whether its body lists members by name)
        let mut open: Vec<(String, usize, bool)> = Vec::new();
        let mut depth = 0usize;
        let mut pending: Option<(String, bool)> = None;
        let mut previous = "";
        for (index, &token) in tokens.iter().enumerate() {
            match token {
                "{" => {
                    depth += 1;
                    if let Some((name, listing)) = pending.take() {
                        open.push((name, depth, listing));
                    }
                }
                "}" => {
                    if open.last().is_some_and(|(_, d, _)| *d == depth) {
                        open.pop();
                    }
                    depth = depth.saturating_sub(1);
                }
                ";" => {
                    // A struct field: `uint64 expiration;`.
                    if let Some((container, d, true)) = open.last()
                        && *d == depth
                        && rust_identifier(previous)
                    {
                        let container = container.clone();
                        self.member(&container, previous);
                    }
                }
                _ => {
                    if let Some((container, d, true)) = open.last()
                        && *d == depth
                        && tokens
                            .get(index + 1)
                            .is_some_and(|next| *next == "}" || *next == ",")
                    {
                        // An enum value (the last one has no `,` after it in the tokens).
                        let container = container.clone();
                        self.member(&container, token);
                    }
                    if FOREIGN_DEFINING_KEYWORDS.contains(&previous) && rust_identifier(token) {
                        self.foreign.insert(token.to_owned());
                        if solidity {
                            if let Some((container, _, _)) = open.last() {
                                let container = container.clone();
                                self.member(&container, token);
                            }
                            if matches!(
                                previous,
                                "contract" | "interface" | "library" | "struct" | "enum"
                            ) {
                                self.containers.insert(token.to_owned());
                                pending =
                                    Some((token.to_owned(), matches!(previous, "struct" | "enum")));
                            }
                        }
                    }
                }
            }
            if !matches!(token, "{" | "}" | ";" | ",") {
                previous = token;
            }
        }
    }

    /// Whether `name` is a container of the repository (see [`Symbols::containers`]), or an
    /// alias of one.
    fn internal(&self, name: &str) -> bool {
        let mut seen = BTreeSet::new();
        let mut todo = vec![name];
        while let Some(next) = todo.pop() {
            if !seen.insert(next) {
                continue;
            }
            if self.containers.contains(next) {
                return true;
            }
            todo.extend(
                self.shares
                    .get(next)
                    .into_iter()
                    .flatten()
                    .map(String::as_str),
            );
        }
        false
    }

    fn has_member(&self, container: &str, name: &str) -> bool {
        let mut seen = BTreeSet::new();
        let mut todo = vec![container];
        while let Some(next) = todo.pop() {
            if !seen.insert(next) {
                continue;
            }
            if self.members.get(next).is_some_and(|m| m.contains(name)) {
                return true;
            }
            todo.extend(
                self.shares
                    .get(next)
                    .into_iter()
                    .flatten()
                    .map(String::as_str),
            );
        }
        false
    }

    /// Whether a name exists anywhere: defined, imported, referenced (capitalised names
    /// only), defined outside Rust, a dependency's crate, or named in [`NOT_SYMBOLS`].
    fn exists(&self, name: &str) -> bool {
        NOT_SYMBOLS.iter().any(|(n, _)| *n == name)
            || self.defined.contains(name)
            || self.imported.contains(name)
            || self.referenced.contains(name)
            || self.foreign.contains(name)
            || self.dependencies.contains(name)
            || self.shares.contains_key(name)
            || RUST_PRELUDE.contains(&name)
    }

    /// Whether the symbol a document names exists; the error says which part is missing.
    ///
    /// One name must be defined or imported somewhere. In a path, each segment must be a
    /// member of the container the segment before it names, as long as that one is the
    /// repository's; a segment that names only a dependency's crate or type (it is
    /// imported, never defined here) ends the check, since the dependency's source is not
    /// read.
    fn resolve(&self, token: &str) -> Result<(), String> {
        let Some(segments) = symbol_segments(token) else {
            return Ok(());
        };
        let [first, rest @ ..] = segments.as_slice() else {
            return Ok(());
        };
        if rest.is_empty() {
            return if self.exists(first) {
                Ok(())
            } else {
                Err(format!(
                    "nothing in the repository defines or imports `{first}`"
                ))
            };
        }
        if !self.internal(first) {
            return if self.exists(first) {
                Ok(())
            } else {
                Err(format!(
                    "`{first}` is no crate, module or type of the repository or of a dependency"
                ))
            };
        }
        for pair in segments.windows(2) {
            let (parent, child) = (pair[0], pair[1]);
            if !self.internal(parent) {
                break;
            }
            if !self.has_member(parent, child) {
                return Err(format!(
                    "no `{parent}` of the repository defines or imports `{child}`"
                ));
            }
        }
        Ok(())
    }
}

/// Walks one Rust file, recording into `symbols`; the top of `stack` is the container
/// being read.
struct Collector<'a> {
    symbols: &'a mut Symbols,
    stack: Vec<String>,
}

impl Collector<'_> {
    fn here(&self) -> String {
        self.stack.last().cloned().unwrap_or_default()
    }

    fn define(&mut self, name: &syn::Ident) {
        let here = self.here();
        self.symbols.define(&here, &name.to_string());
    }

    fn define_in(&mut self, container: &str, name: &syn::Ident) {
        self.symbols.define(container, &name.to_string());
    }

    /// Defines a module, type or trait: a name a path may go through.
    fn define_container(&mut self, name: &syn::Ident) {
        self.define(name);
        self.symbols.containers.insert(name.to_string());
    }

    fn use_tree(&mut self, tree: &syn::UseTree, parent: Option<&str>) {
        let here = self.here();
        match tree {
            syn::UseTree::Path(path) => {
                let ident = path.ident.to_string();
                self.use_tree(&path.tree, Some(&ident));
            }
            syn::UseTree::Name(name) => {
                let name = name.ident.to_string();
                let name = if name == "self" {
                    parent.unwrap_or("self").to_owned()
                } else {
                    name
                };
                self.symbols.imported.insert(name.clone());
                self.symbols.member(&here, &name);
            }
            syn::UseTree::Rename(rename) => {
                let target = rename.ident.to_string();
                let target = if target == "self" {
                    parent.unwrap_or("self").to_owned()
                } else {
                    target
                };
                let alias = rename.rename.to_string();
                self.symbols.imported.insert(alias.clone());
                self.symbols.member(&here, &alias);
                self.symbols.shares.entry(alias).or_default().insert(target);
            }
            syn::UseTree::Glob(_) => {
                if let Some(parent) = parent {
                    self.symbols
                        .shares
                        .entry(here)
                        .or_default()
                        .insert(parent.to_owned());
                }
            }
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.use_tree(tree, parent);
                }
            }
        }
    }
}

/// Keywords that introduce an item's name.
const ITEM_KEYWORDS: &[&str] = &[
    "fn", "struct", "enum", "union", "trait", "type", "const", "static", "mod",
];

/// The words of a macro's input in order, with each `$` as a word of its own (so the
/// name after `fn` in `fn $name` is `$`, no identifier).
fn words_and_dollars(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = None;
    for (at, c) in text.char_indices() {
        let word = c.is_ascii_alphanumeric() || c == '_';
        match (word, start) {
            (true, None) => start = Some(at),
            (false, Some(from)) => {
                out.push(&text[from..at]);
                start = None;
            }
            _ => {}
        }
        if c == '$' {
            out.push("$");
        }
    }
    if let Some(from) = start {
        out.push(&text[from..]);
    }
    out
}

/// The last name of a type (`Store` for `crate::Store<T>`), if it is a path.
fn type_name(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Path(path) => path.path.segments.last().map(|s| s.ident.to_string()),
        syn::Type::Reference(reference) => type_name(&reference.elem),
        syn::Type::Group(group) => type_name(&group.elem),
        syn::Type::Paren(paren) => type_name(&paren.elem),
        _ => None,
    }
}

impl<'ast> syn::visit::Visit<'ast> for Collector<'_> {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        self.define_container(&item.ident);
        self.stack.push(item.ident.to_string());
        syn::visit::visit_item_mod(self, item);
        self.stack.pop();
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        self.define(&item.sig.ident);
        syn::visit::visit_item_fn(self, item);
    }

    fn visit_item_struct(&mut self, item: &'ast syn::ItemStruct) {
        self.define_container(&item.ident);
        let name = item.ident.to_string();
        for field in &item.fields {
            if let Some(ident) = &field.ident {
                self.symbols.member(&name, &ident.to_string());
            }
        }
        syn::visit::visit_item_struct(self, item);
    }

    fn visit_item_union(&mut self, item: &'ast syn::ItemUnion) {
        self.define_container(&item.ident);
        let name = item.ident.to_string();
        for field in &item.fields.named {
            if let Some(ident) = &field.ident {
                self.symbols.member(&name, &ident.to_string());
            }
        }
        syn::visit::visit_item_union(self, item);
    }

    fn visit_item_enum(&mut self, item: &'ast syn::ItemEnum) {
        self.define_container(&item.ident);
        let name = item.ident.to_string();
        for variant in &item.variants {
            self.define_in(&name, &variant.ident);
        }
        syn::visit::visit_item_enum(self, item);
    }

    fn visit_item_trait(&mut self, item: &'ast syn::ItemTrait) {
        self.define_container(&item.ident);
        let name = item.ident.to_string();
        for inner in &item.items {
            match inner {
                syn::TraitItem::Fn(f) => self.define_in(&name, &f.sig.ident),
                syn::TraitItem::Const(c) => self.define_in(&name, &c.ident),
                syn::TraitItem::Type(t) => self.define_in(&name, &t.ident),
                _ => {}
            }
        }
        self.stack.push(name);
        syn::visit::visit_item_trait(self, item);
        self.stack.pop();
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        let Some(name) = type_name(&item.self_ty) else {
            return syn::visit::visit_item_impl(self, item);
        };
        for inner in &item.items {
            match inner {
                syn::ImplItem::Fn(f) => self.define_in(&name, &f.sig.ident),
                syn::ImplItem::Const(c) => self.define_in(&name, &c.ident),
                syn::ImplItem::Type(t) => self.define_in(&name, &t.ident),
                _ => {}
            }
        }
        self.stack.push(name);
        syn::visit::visit_item_impl(self, item);
        self.stack.pop();
    }

    /// `type A = B<…>`: `A` has `B`'s members too.
    fn visit_item_type(&mut self, item: &'ast syn::ItemType) {
        self.define_container(&item.ident);
        if let Some(target) = type_name(&item.ty) {
            self.symbols
                .shares
                .entry(item.ident.to_string())
                .or_default()
                .insert(target);
        }
        syn::visit::visit_item_type(self, item);
    }

    fn visit_item_const(&mut self, item: &'ast syn::ItemConst) {
        self.define(&item.ident);
        syn::visit::visit_item_const(self, item);
    }

    fn visit_item_static(&mut self, item: &'ast syn::ItemStatic) {
        self.define(&item.ident);
        syn::visit::visit_item_static(self, item);
    }

    /// `macro_rules! name { … }` defines `name`; in it, and in a macro invoked where an
    /// item may stand (`store_test! { async fn name(db) … }`), an item keyword followed by
    /// a literal name (`const ALL`, `fn name`, not `fn $name`) defines that name here.
    fn visit_item_macro(&mut self, item: &'ast syn::ItemMacro) {
        if let Some(ident) = &item.ident {
            self.define(ident);
        }
        let text = item.mac.tokens.to_string();
        let words = words_and_dollars(&text);
        for pair in words.windows(2) {
            if ITEM_KEYWORDS.contains(&pair[0]) && rust_identifier(pair[1]) {
                let here = self.here();
                self.symbols.define(&here, pair[1]);
            }
        }
        syn::visit::visit_item_macro(self, item);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        for segment in &path.segments {
            let name = segment.ident.to_string();
            if name.starts_with(|c: char| c.is_ascii_uppercase()) {
                self.symbols.referenced.insert(name);
            }
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_item_extern_crate(&mut self, item: &'ast syn::ItemExternCrate) {
        if let Some((_, alias)) = &item.rename {
            let here = self.here();
            self.symbols.member(&here, &alias.to_string());
            self.symbols
                .shares
                .entry(alias.to_string())
                .or_default()
                .insert(item.ident.to_string());
        }
    }

    fn visit_foreign_item_fn(&mut self, item: &'ast syn::ForeignItemFn) {
        self.define(&item.sig.ident);
        syn::visit::visit_foreign_item_fn(self, item);
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&item.tree, None);
    }
}

/// One line per symbol `text` (the document `file`) names that `symbols` lacks:
/// `file:line: `token`: why`.
fn symbol_problems(symbols: &Symbols, file: &str, text: &str) -> Vec<String> {
    named_symbols(file, text)
        .into_iter()
        .filter_map(|named| {
            let why = symbols.resolve(&named.token).err()?;
            Some(format!(
                "{}:{}: `{}`: {why}",
                named.file, named.line, named.token
            ))
        })
        .collect()
}

/// The documents whose symbols are checked: `docs/*.md`, every `README.md`, and the
/// crate roots (their `//!` crate documentation).
fn symbol_documents<'a>(files: &'a [String], roots: &BTreeMap<String, String>) -> Vec<&'a str> {
    files
        .iter()
        .map(String::as_str)
        .filter(|file| {
            let top_doc = file
                .strip_prefix("docs/")
                .is_some_and(|name| name.ends_with(".md") && !name.contains('/'));
            top_doc
                || *file == "README.md"
                || file.ends_with("/README.md")
                || roots.contains_key(*file)
        })
        .collect()
}

fn is_source(file: &str) -> bool {
    file == "Cargo.toml"
        || file.ends_with("/Cargo.toml")
        || extension(file).is_some_and(|e| matches!(e, "rs" | "sol" | "js" | "mjs" | "ts" | "sql"))
}

#[test]
fn every_symbol_the_documents_name_exists() {
    let root = repository_root();
    let files = tracked_files(&root);
    let sources: Vec<(String, String)> = files
        .iter()
        .filter(|file| is_source(file))
        // A tracked file deleted in this checkout has nothing to read.
        .filter_map(|file| Some((file.clone(), std::fs::read_to_string(root.join(file)).ok()?)))
        .collect();
    let symbols = Symbols::from_sources(&sources).unwrap_or_else(|e| panic!("{e}"));
    let mut problems = Vec::new();
    let mut checked = 0usize;
    for file in symbol_documents(&files, &symbols.crate_roots) {
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue;
        };
        checked += named_symbols(file, &text).len();
        problems.extend(symbol_problems(&symbols, file, &text));
    }
    assert!(
        checked > 100,
        "only {checked} symbols found: is the extraction broken?"
    );
    assert!(
        problems.is_empty(),
        "{} symbol(s) named in documents that the sources do not define (rename them in the document, or mark a non-symbol as such):\n{}",
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

/// The symbol rules on a small fake repository.
mod symbol_rules {
    use super::*;

    fn sources() -> Vec<(String, String)> {
        [
            ("Cargo.toml", "[workspace]\n[workspace.dependencies]\nserde = \"1\"\n"),
            ("store/Cargo.toml", "[package]\nname = \"app-store\"\n[dependencies]\nserde.workspace = true\n"),
            (
                "store/src/lib.rs",
                "pub mod writer;\n\
                 pub struct Store { pub path: String }\n\
                 impl Store { pub fn set_telemetry(&self) {} }\n\
                 pub trait PoolTelemetry { fn started(&self); }\n\
                 pub enum Mode { Api, ChainSecured }\n\
                 pub type Alias = Store;\n\
                 #[macro_export]\n\
                 macro_rules! store_test { ($(async fn $name:ident($db:ident) $body:block)*) => {}; }\n\
                 pub mod endpoints;\n",
            ),
            (
                "store/src/endpoints.rs",
                "macro_rules! endpoints { () => { pub const ALL: &[u8] = &[]; }; }\nendpoints!();\n",
            ),
            (
                "store/src/writer.rs",
                "use std::fmt;\nuse serde::Serialize;\n\
                 pub fn commit() {}\n\
                 impl fmt::Display for crate::Store {\n\
                     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { Ok(()) }\n\
                 }\n\
                 #[cfg(test)]\nmod tests { store_test! { async fn commits_once(db) {} } }\n\
                 const M: &str = \"CREATE OR REPLACE FUNCTION appliance_row_changed() RETURNS trigger\";\n",
            ),
            ("app/Cargo.toml", "[package]\nname = \"app\"\n[dependencies]\napp-store = { path = \"../store\" }\nk256 = \"0.13\"\n"),
            ("app/src/lib.rs", "pub use app_store as store;\npub use app_store::writer::*;\n"),
            ("app/src/main.rs", "fn main() {}\n"),
            (
                "contracts/src/IAccountConfig.sol",
                "interface IAccountConfig {\n  struct UsageKeyPermissions { bool a; uint64 b; }\n  \
                 enum Kind { One, Two }\n  event GroupAdded(uint256 id);\n  \
                 function addGroup() external; // a { in a comment\n}\n",
            ),
            ("appliance/runtime/src/sandbox/lit.rs", "fn f() { let n = [\"Lit\", \"getPrivateKey\", \"not a name\"]; }\n"),
            ("sdk/src/client.ts", "export class ApplianceClient {}\nexport function paginate() {}\n"),
        ]
        .into_iter()
        .map(|(path, text)| (path.to_owned(), text.to_owned()))
        .collect()
    }

    fn problems(doc: &str) -> Vec<String> {
        let symbols = Symbols::from_sources(&sources()).expect("the fake sources are read");
        symbol_problems(&symbols, "docs/x.md", doc)
    }

    #[test]
    fn defined_symbols_pass() {
        let doc = "`Store::set_telemetry`, `Store::path`, `PoolTelemetry::started`, \
                   `Mode::ChainSecured`, `app_store::writer::commit`, `store::writer`, \
                   `store::Store`, `app::commit`, `writer::tests::commits_once`, `store_test!`, \
                   `endpoints::ALL`, `appliance_row_changed()`, `IAccountConfig::UsageKeyPermissions`, \
                   `UsageKeyPermissions::b`, `Kind::One`, `Kind::Two`, `Alias::set_telemetry`, `GroupAdded`, `Lit`, `getPrivateKey()`, \
                   `ApplianceClient`, `paginate()`, `k256::ecdsa::SigningKey`, `Serialize`, \
                   `fmt::Display`, `Display`, `Formatter`, `Option`, `Allow`, `Store::fmt`.";
        assert_eq!(problems(doc), Vec::<String>::new());
    }

    #[test]
    fn a_renamed_or_invented_symbol_fails_with_its_line() {
        let doc = "Fine: `Store`.\n\
                   `Store::attach_telemetry` and `KeyClient`\n\
                   `store::Reader`, `render_dev()`, `nope::Store`, `Mode::Legacy`\n\
                   `IAccountConfig::Missing`, `writer::tests::commits_twice`, `not_a_name()`\n\
                   `Kind::Three`, `Alias::gone`";
        assert_eq!(
            problems(doc),
            [
                "docs/x.md:2: `Store::attach_telemetry`: no `Store` of the repository defines or imports `attach_telemetry`",
                "docs/x.md:2: `KeyClient`: nothing in the repository defines or imports `KeyClient`",
                "docs/x.md:3: `store::Reader`: no `store` of the repository defines or imports `Reader`",
                "docs/x.md:3: `render_dev()`: nothing in the repository defines or imports `render_dev`",
                "docs/x.md:3: `nope::Store`: `nope` is no crate, module or type of the repository or of a dependency",
                "docs/x.md:3: `Mode::Legacy`: no `Mode` of the repository defines or imports `Legacy`",
                "docs/x.md:4: `IAccountConfig::Missing`: no `IAccountConfig` of the repository defines or imports `Missing`",
                "docs/x.md:4: `writer::tests::commits_twice`: no `tests` of the repository defines or imports `commits_twice`",
                "docs/x.md:4: `not_a_name()`: nothing in the repository defines or imports `not_a_name`",
                "docs/x.md:5: `Kind::Three`: no `Kind` of the repository defines or imports `Three`",
                "docs/x.md:5: `Alias::gone`: no `Alias` of the repository defines or imports `gone`",
            ]
        );
    }

    #[test]
    fn crate_roots_are_documents_and_their_doc_lines_are_read() {
        let symbols = Symbols::from_sources(&sources()).expect("the fake sources are read");
        let files: Vec<String> = sources()
            .into_iter()
            .map(|(path, _)| path)
            .chain([
                "docs/x.md".to_owned(),
                "docs/sub/y.md".to_owned(),
                "app/README.md".to_owned(),
            ])
            .collect();
        assert_eq!(
            symbol_documents(&files, &symbols.crate_roots),
            [
                "store/src/lib.rs",
                "app/src/lib.rs",
                "app/src/main.rs",
                "docs/x.md",
                "app/README.md"
            ]
        );
        let root = "//! The store: [`Store`], once [`Gone`].\n\
                    //! `Store::set_telemetry`\n\
                    /// Not the crate's documentation: `Elsewhere`.\n\
                    pub struct Store;";
        assert_eq!(
            symbol_problems(&symbols, "store/src/lib.rs", root),
            ["store/src/lib.rs:1: `Gone`: nothing in the repository defines or imports `Gone`"]
        );
    }

    #[test]
    fn only_symbol_shaped_tokens_are_checked() {
        let doc = "`POST`, `SCM_RIGHTS`, `chain.batch_size`, `Result<Outcome, ExecError>`, `a b`, \
                   `Lit.Actions.setResponse`, `heap_bytes`, `appliance/src/lib.rs`, `--json`, \
                   `{\"error\":{}}`, `BEGIN IMMEDIATE`, `Operation::…`, `X-Api-Key`, `_`, `()`, \
                   github.com/x/y `Upstream`.\n\
                   ```\nlet x = Nope::new();\n`Nope`\n```\n\
                   `Named`, `a::b`, `f()`, `m!`";
        let tokens: Vec<String> = named_symbols("docs/x.md", doc)
            .into_iter()
            .map(|n| n.token)
            .collect();
        assert_eq!(tokens, ["Named", "a::b", "f()", "m!"]);
    }
}
