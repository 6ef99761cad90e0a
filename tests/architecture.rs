//! `docs/architecture.md` draws the crate graph ("The crates", a Mermaid flowchart): every
//! workspace crate and the workspace crates it depends on in production code. This test reads the manifests
//! (`cargo metadata`) and fails when the picture and the code disagree, in either
//! direction, so the page a newcomer reads first cannot drift from the layering the
//! compiler enforces.
//!
//! Each crate says the same about itself: its crate documentation (the `//!` lines of its
//! library root, or of its binary root when it has no library) or its `README.md` opens
//! with its one job and has a paragraph starting `May depend on:` that names, in
//! backticks, every workspace crate it depends on in production and no workspace crate it
//! does not depend on (an optional dependency may be named, with its feature); crates
//! named after the word "never" in that paragraph are those it must not depend on. The page
//! names no crate or binary that does not exist. (Its files are checked by
//! `repository_paths`'s path check, its symbols by the symbol check there.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

type Graph = BTreeMap<String, BTreeSet<String>>;

fn repository_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// `cargo metadata` of the workspace (its own crates only).
fn metadata() -> serde_json::Value {
    let root = repository_root();
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The graph as the manifests have it: normal dependencies on other workspace crates,
/// the optional ones too if `optional`.
fn graph(metadata: &serde_json::Value, optional: bool) -> Graph {
    let packages = metadata["packages"].as_array().unwrap();
    let names: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null() && (optional || d["optional"] != true))
                .map(|d| d["name"].as_str().unwrap().to_owned())
                .filter(|d| names.contains(d))
                .collect();
            (p["name"].as_str().unwrap().to_owned(), deps)
        })
        .collect()
}

/// The graph as the manifests have it: normal, non-optional dependencies on other
/// workspace crates.
fn manifests() -> Graph {
    graph(&metadata(), false)
}

/// The graph as `text` draws it: the ```mermaid flowchart after "## The crates". A node
/// is `id` or `id[label]`, and its crate is the label if it has one (`id` otherwise);
/// `a --> b & c` (or the dotted `a -.-> b`) says that `a` depends on `b` and `c`. A crate
/// drawn without an arrow from it depends on no workspace crate. Lines that start with
/// `flowchart`, `subgraph`, `end`, `%%`, `classDef`, `class` or `style` draw no crate.
fn drawn(text: &str) -> Graph {
    let section = text
        .split("## The crates")
        .nth(1)
        .expect("a section \"## The crates\"");
    let block = section
        .split("```mermaid\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a ```mermaid block in the section");
    let mut labels = BTreeMap::new();
    let mut node = |written: &str| -> String {
        let written = written.trim();
        let (id, label) = match written.split_once('[') {
            Some((id, label)) => (
                id.trim(),
                Some(label.trim_end_matches(']').trim_matches('"')),
            ),
            None => (written, None),
        };
        assert!(
            !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "not a node `id` or `id[label]`: {written}"
        );
        if let Some(label) = label {
            labels.insert(id.to_owned(), label.to_owned());
        }
        id.to_owned()
    };
    let mut ids: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in block.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let keyword = line.split_whitespace().next().unwrap_or("");
        if matches!(
            keyword,
            "flowchart" | "graph" | "subgraph" | "end" | "classDef" | "class" | "style"
        ) || line.starts_with("%%")
        {
            continue;
        }
        match line.split_once("-->").or_else(|| line.split_once("-.->")) {
            Some((from, to)) => {
                let from = node(from);
                let to: Vec<String> = to.split('&').map(&mut node).collect();
                for dep in &to {
                    ids.entry(dep.clone()).or_default();
                }
                ids.entry(from).or_default().extend(to);
            }
            None => {
                ids.entry(node(line)).or_default();
            }
        }
    }
    let name = |id: &String| labels.get(id).cloned().unwrap_or_else(|| id.clone());
    ids.iter()
        .map(|(id, deps)| (name(id), deps.iter().map(name).collect()))
        .collect()
}

/// What differs between the two graphs, one line per crate.
fn differences(drawn: &Graph, real: &Graph) -> Vec<String> {
    let crates: BTreeSet<&String> = drawn.keys().chain(real.keys()).collect();
    let mut out = Vec::new();
    for name in crates {
        match (drawn.get(name), real.get(name)) {
            (None, Some(_)) => out.push(format!("{name}: a crate the page does not draw")),
            (Some(_), None) => out.push(format!("{name}: drawn, but no such workspace crate")),
            (Some(d), Some(r)) if d != r => {
                let missing: Vec<&String> = r.difference(d).collect();
                let extra: Vec<&String> = d.difference(r).collect();
                out.push(format!(
                    "{name}: edges not drawn {missing:?}, drawn edges that do not exist {extra:?}"
                ));
            }
            _ => {}
        }
    }
    out
}

#[test]
fn the_crate_graph_of_the_architecture_page_is_the_manifests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let text = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let real = manifests();
    assert!(
        real.get("appliance")
            .is_some_and(|d| d.contains("appliance-store")),
        "the manifests were not read: {real:?}"
    );
    let found = differences(&drawn(&text), &real);
    assert!(
        found.is_empty(),
        "docs/architecture.md's crate graph differs from the manifests:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_missing_or_invented_edge_is_reported() {
    let real = Graph::from([
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::new()),
    ]);
    let page = "## The crates\n\n```mermaid\nflowchart TD\n  a\n  b[b] --> a\n  c\n```\n";
    let found = differences(&drawn(page), &real);
    assert_eq!(
        found,
        [
            "a: edges not drawn [\"b\"], drawn edges that do not exist []",
            "b: edges not drawn [], drawn edges that do not exist [\"a\"]",
            "c: drawn, but no such workspace crate",
        ]
    );
    let exact = "## The crates\n```mermaid\nflowchart TD\n  %% a comment\n  a_1[a] -.-> b\n```";
    assert!(differences(&drawn(exact), &real).is_empty());
    let labelled = drawn("## The crates\n```mermaid\nflowchart TD\n x_y[x-y] --> a & b\n```");
    assert_eq!(
        labelled["x-y"],
        BTreeSet::from(["a".to_owned(), "b".to_owned()]),
        "an arrow to several crates, from a labelled node"
    );
}

/// What a crate's documentation says about it.
#[derive(Debug)]
struct CrateDoc {
    /// Where it was found (repository-relative).
    source: String,
    /// Its first line: the crate's job.
    job: String,
    /// The workspace crates its `May depend on:` paragraph names, if it has one: before
    /// the word "never", and after it.
    may_depend_on: Option<(BTreeSet<String>, BTreeSet<String>)>,
}

/// The lines of a crate root's `//!` documentation, or of a README (without its title).
fn doc_lines(file: &str, text: &str) -> Vec<String> {
    if file.ends_with(".md") {
        text.lines()
            .filter(|l| !l.starts_with("# "))
            .map(str::to_owned)
            .collect()
    } else {
        text.lines()
            .map(str::trim_start)
            .skip_while(|l| !l.starts_with("//!"))
            .map_while(|l| l.strip_prefix("//!"))
            .map(|l| l.strip_prefix(' ').unwrap_or(l).to_owned())
            .collect()
    }
}

/// Reads one crate documentation: the first non-empty line is the job; the paragraph
/// starting `May depend on:` (to the next empty line) names the allowed workspace crates,
/// in backticks, by package name, and after the word "never" the forbidden ones.
fn crate_doc(file: &str, text: &str, workspace: &BTreeSet<String>) -> CrateDoc {
    let lines = doc_lines(file, text);
    let job = lines
        .iter()
        .find(|l| !l.trim().is_empty())
        .cloned()
        .unwrap_or_default();
    let may_depend_on = lines
        .iter()
        .position(|l| l.starts_with("May depend on:"))
        .map(|start| {
            let paragraph: Vec<&str> = lines[start..]
                .iter()
                .map(String::as_str)
                .take_while(|l| !l.trim().is_empty())
                .collect();
            let paragraph = paragraph.join(" ");
            let lower = paragraph.to_ascii_lowercase();
            let split = lower
                .match_indices("never")
                .map(|(at, _)| at)
                .find(|&at| at == 0 || !lower.as_bytes()[at - 1].is_ascii_alphanumeric())
                .unwrap_or(paragraph.len());
            let names = |text: &str| -> BTreeSet<String> {
                text.split('`')
                    .skip(1)
                    .step_by(2)
                    .filter(|name| workspace.contains(*name))
                    .map(str::to_owned)
                    .collect()
            };
            (names(&paragraph[..split]), names(&paragraph[split..]))
        });
    CrateDoc {
        source: file.to_owned(),
        job,
        may_depend_on,
    }
}

/// What is wrong with a crate's documentation of itself, given its production
/// dependencies (`required`) and those it may also name (`allowed`: the optional ones).
fn crate_doc_problems(
    name: &str,
    docs: &[CrateDoc],
    required: &BTreeSet<String>,
    allowed: &BTreeSet<String>,
) -> Vec<String> {
    let mut out = Vec::new();
    if docs.iter().all(|d| d.job.trim().is_empty()) {
        out.push(format!(
            "{name}: no crate documentation (`//!` at the top of its root) or README.md saying its job"
        ));
    }
    let stated: Vec<&CrateDoc> = docs.iter().filter(|d| d.may_depend_on.is_some()).collect();
    if stated.is_empty() {
        out.push(format!(
            "{name}: its crate documentation or README.md has no paragraph starting `May depend on:`"
        ));
    }
    for doc in stated {
        let (named, never) = doc.may_depend_on.as_ref().unwrap();
        let missing: Vec<&String> = required.difference(named).collect();
        let invented: Vec<&String> = named.difference(allowed).collect();
        if !missing.is_empty() || !invented.is_empty() {
            out.push(format!(
                "{name} ({}): `May depend on:` leaves out {missing:?} and names {invented:?}, which it does not depend on",
                doc.source
            ));
        }
        let broken: Vec<&String> = never.intersection(allowed).collect();
        if !broken.is_empty() {
            out.push(format!(
                "{name} ({}): `May depend on:` says never {broken:?}, but it depends on them",
                doc.source
            ));
        }
    }
    out
}

#[test]
fn every_crate_says_its_job_and_what_it_may_depend_on() {
    let root = repository_root();
    let metadata = metadata();
    let required = graph(&metadata, false);
    let allowed = graph(&metadata, true);
    let workspace: BTreeSet<String> = required.keys().cloned().collect();
    let mut problems = Vec::new();
    for package in metadata["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap();
        let targets = package["targets"].as_array().unwrap();
        let kind =
            |t: &&serde_json::Value, k: &str| t["kind"].as_array().unwrap().iter().any(|x| x == k);
        let crate_root = targets
            .iter()
            .find(|t| kind(t, "lib"))
            .or_else(|| targets.iter().find(|t| kind(t, "bin") && t["name"] == name))
            .or_else(|| targets.iter().find(|t| kind(t, "bin")))
            .map(|t| Path::new(t["src_path"].as_str().unwrap()).to_path_buf());
        let manifest = Path::new(package["manifest_path"].as_str().unwrap());
        let readme = manifest.parent().unwrap().join("README.md");
        let mut docs = Vec::new();
        for file in crate_root.into_iter().chain([readme]) {
            if let Ok(text) = std::fs::read_to_string(&file) {
                let relative = file
                    .strip_prefix(root)
                    .unwrap_or(&file)
                    .to_string_lossy()
                    .into_owned();
                docs.push(crate_doc(&relative, &text, &workspace));
            }
        }
        problems.extend(crate_doc_problems(
            name,
            &docs,
            &required[name],
            &allowed[name],
        ));
    }
    assert!(
        problems.is_empty(),
        "crates whose documentation does not say their job and dependencies as the manifests have them:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_crate_doc_naming_a_wrong_dependency_or_none_is_reported() {
    let workspace = BTreeSet::from([
        "a".to_owned(),
        "b".to_owned(),
        "c".to_owned(),
        "d".to_owned(),
    ]);
    let required = BTreeSet::from(["b".to_owned()]);
    let allowed = BTreeSet::from(["b".to_owned(), "d".to_owned()]);
    let root = "#![forbid(unsafe_code)]\n//! `a`: does one thing.\n//!\n//! May depend on: `b` (its\n//! rules) and `d` with the `x` feature;\n//! never on `c`.\n//!\n//! Not `c` here either.\nmod m;";
    let good = crate_doc("a/src/lib.rs", root, &workspace);
    assert_eq!(good.job, "`a`: does one thing.");
    assert_eq!(
        crate_doc_problems("a", &[good], &required, &allowed),
        Vec::<String>::new()
    );
    let root = "//! Does one thing.\n//!\n//! May depend on: `d`; never on `b` or `c`.";
    let wrong = crate_doc("a/src/lib.rs", root, &workspace);
    assert_eq!(
        crate_doc_problems("a", &[wrong], &required, &allowed),
        [
            "a (a/src/lib.rs): `May depend on:` leaves out [\"b\"] and names [], which it does not depend on",
            "a (a/src/lib.rs): `May depend on:` says never [\"b\"], but it depends on them",
        ]
    );
    let readme = "# a\n\nDoes one thing.\n\nMay depend on: no workspace crate.\n";
    let wrong = crate_doc("a/README.md", readme, &workspace);
    assert_eq!(
        crate_doc_problems("a", &[wrong], &required, &allowed),
        [
            "a (a/README.md): `May depend on:` leaves out [\"b\"] and names [], which it does not depend on"
        ]
    );
    let silent = crate_doc("a/src/lib.rs", "//! Does one thing.\nmod m;", &workspace);
    assert_eq!(
        crate_doc_problems("a", &[silent], &required, &allowed),
        ["a: its crate documentation or README.md has no paragraph starting `May depend on:`"]
    );
    assert_eq!(
        crate_doc_problems("a", &[], &required, &allowed).len(),
        2,
        "no documentation at all: neither the job nor the dependencies"
    );
}

/// Backticked tokens of `text` outside fenced blocks that are shaped like a crate or
/// binary name with a `-` (`appliance-store`, `action-worker`).
fn hyphenated_names(text: &str) -> Vec<(usize, String)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        for token in line.split('`').skip(1).step_by(2) {
            let shaped = token.contains('-')
                && !token.starts_with('-')
                && !token.ends_with('-')
                && token
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if shaped {
                out.push((index + 1, token.to_owned()));
            }
        }
    }
    out
}

#[test]
fn the_architecture_page_names_only_real_crates_and_binaries() {
    let text = std::fs::read_to_string(repository_root().join("docs/architecture.md")).unwrap();
    let metadata = metadata();
    let mut known = BTreeSet::new();
    for package in metadata["packages"].as_array().unwrap() {
        known.insert(package["name"].as_str().unwrap().to_owned());
        for target in package["targets"].as_array().unwrap() {
            known.insert(target["name"].as_str().unwrap().to_owned());
        }
    }
    let names = hyphenated_names(&text);
    assert!(
        names.len() > 20,
        "only {} crate names found: is the extraction broken?",
        names.len()
    );
    let unknown: Vec<String> = names
        .iter()
        .filter(|(_, name)| !known.contains(name))
        .map(|(line, name)| format!("docs/architecture.md:{line}: `{name}`"))
        .collect();
    assert!(
        unknown.is_empty(),
        "the architecture page names crates or binaries that do not exist:\n{}",
        unknown.join("\n")
    );
    assert_eq!(
        hyphenated_names(
            "`appliance-store`, `--json`, `x`, `a b-c`\n```\n`gone-crate`\n```\n`gone-crate`"
        ),
        [
            (1, "appliance-store".to_owned()),
            (5, "gone-crate".to_owned())
        ]
    );
}

// ---------------------------------------------------------------------------------------
// Inside the crates: no import circle among the modules of any level of any crate.
//
// The crate graph is held by the compiler; what it cannot hold is the order of modules
// inside one crate. At every level of every workspace crate (the crate root's modules,
// then each folder module's), the modules form a graph — module `a` → module `b` when a
// file of `a` names `b` through `crate::…`, `super::…` or `self::…` (directly, or through an
// item the level's root re-exports with `pub use`) — and that graph must have no circle,
// so every level reads as layers. The level's root file (`lib.rs`, `main.rs`, `mod.rs`) is
// the shared base and is not part of its graph. Code under `#[cfg(test)]` is not counted.
// Paths are resolved syntactically, as a reader follows them.

mod module_graph {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    use test_support::rust_source::{flatten_use, is_test_only, names_in, parse};

    pub type Graph = BTreeMap<String, BTreeSet<String>>;

    /// A module and where its children live.
    struct Module {
        /// From the crate root (`[]` for the root itself).
        path: Vec<String>,
        /// Its own file (the crate root, a flat module's file, or a folder's mod.rs).
        file: PathBuf,
        /// Where its children's files are (the root's folder, or the module's own folder).
        dir: PathBuf,
    }

    /// The out-of-line child modules `module`'s file declares (test-only ones skipped),
    /// each as a module of its own.
    fn children(module: &Module) -> Vec<Module> {
        let mut out = Vec::new();
        for item in parse(&module.file).items {
            let syn::Item::Mod(m) = item else { continue };
            if m.content.is_some() || is_test_only(&m.attrs) {
                continue;
            }
            let name = m.ident.to_string();
            let flat = module.dir.join(format!("{name}.rs"));
            let folder = module.dir.join(&name);
            let file = if flat.exists() {
                flat
            } else {
                folder.join("mod.rs")
            };
            assert!(file.exists(), "module {name} of {}", module.file.display());
            out.push(Module {
                path: [module.path.as_slice(), &[name]].concat(),
                file,
                dir: folder,
            });
        }
        out
    }

    /// The module's file and those of every module below it, each with its module path.
    fn files_below(module: &Module, out: &mut Vec<(Vec<String>, PathBuf)>) {
        out.push((module.path.clone(), module.file.clone()));
        for child in children(module) {
            files_below(&child, out);
        }
    }

    /// The absolute module path `path` points into, when it names something of this
    /// crate (`crate::…`, `super::…`, `self::…`), from a file whose module is `from`.
    fn absolute(path: &[String], from: &[String]) -> Option<Vec<String>> {
        match path.first().map(String::as_str) {
            Some("crate") => Some(path[1..].to_vec()),
            Some("super" | "self") => {
                let mut at = from.to_vec();
                let mut rest = path;
                while let Some(first) = rest.first() {
                    match first.as_str() {
                        "super" => {
                            at.pop()?;
                        }
                        "self" => {}
                        _ => break,
                    }
                    rest = &rest[1..];
                }
                Some([at.as_slice(), rest].concat())
            }
            _ => None,
        }
    }

    /// `pub use child::…::Item` in a level's root: item → the child that defines it.
    fn reexports(root: &Module, children: &BTreeSet<String>) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for item in parse(&root.file).items {
            let syn::Item::Use(u) = item else { continue };
            if matches!(u.vis, syn::Visibility::Inherited) {
                continue;
            }
            let mut paths = Vec::new();
            flatten_use(&u.tree, &mut Vec::new(), &mut paths);
            for path in paths {
                let path = absolute(&path, &root.path)
                    .and_then(|p| p.strip_prefix(root.path.as_slice()).map(<[_]>::to_vec))
                    .unwrap_or(path);
                if let (Some(first), Some(last)) = (path.first(), path.last())
                    && path.len() > 1
                    && children.contains(first)
                {
                    out.insert(last.clone(), first.clone());
                }
            }
        }
        out
    }

    /// The graph among `level`'s children.
    fn level_graph(level: &Module) -> Graph {
        let kids = children(level);
        let names: BTreeSet<String> = kids
            .iter()
            .map(|k| k.path.last().unwrap().clone())
            .collect();
        let reexported = reexports(level, &names);
        let mut graph = Graph::new();
        for kid in &kids {
            let name = kid.path.last().unwrap().clone();
            let mut files = Vec::new();
            files_below(kid, &mut files);
            let mut deps = BTreeSet::new();
            for (module, file) in files {
                for path in names_in(&file).paths {
                    let Some(abs) = absolute(&path, &module) else {
                        continue;
                    };
                    let Some(rest) = abs.strip_prefix(level.path.as_slice()) else {
                        continue;
                    };
                    let target = match rest.first() {
                        Some(first) if names.contains(first) => Some(first.clone()),
                        Some(first) => reexported.get(first).cloned(),
                        None => None,
                    };
                    if let Some(target) = target
                        && target != name
                    {
                        deps.insert(target);
                    }
                }
            }
            graph.insert(name, deps);
        }
        graph
    }

    /// One circle of `graph`, if it has any (as `a → b → a`).
    pub fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
        fn visit(
            node: &str,
            graph: &Graph,
            stack: &mut Vec<String>,
            done: &mut BTreeSet<String>,
        ) -> Option<Vec<String>> {
            if let Some(at) = stack.iter().position(|n| n == node) {
                return Some([&stack[at..], &[node.to_owned()]].concat());
            }
            if done.contains(node) {
                return None;
            }
            stack.push(node.to_owned());
            for next in graph.get(node).into_iter().flatten() {
                if let Some(cycle) = visit(next, graph, stack, done) {
                    return Some(cycle);
                }
            }
            stack.pop();
            done.insert(node.to_owned());
            None
        }
        let mut done = BTreeSet::new();
        graph
            .keys()
            .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
    }

    /// Every level (a crate root or folder module with children) below the crate root
    /// `root_file`, named `crate` or `crate::a::b`, with its graph.
    pub fn levels(root_file: &Path) -> Vec<(String, Graph)> {
        let root = Module {
            path: Vec::new(),
            file: root_file.to_owned(),
            dir: root_file.parent().unwrap().to_owned(),
        };
        let mut out = Vec::new();
        let mut stack = vec![root];
        while let Some(level) = stack.pop() {
            let kids = children(&level);
            if kids.is_empty() {
                continue;
            }
            let name = ["crate".to_owned()]
                .into_iter()
                .chain(level.path.iter().cloned())
                .collect::<Vec<_>>()
                .join("::");
            out.push((name, level_graph(&level)));
            stack.extend(kids);
        }
        out
    }
}

/// The library and binary roots of every workspace crate.
fn crate_roots() -> Vec<(String, std::path::PathBuf)> {
    let metadata = metadata();
    let mut out = Vec::new();
    for package in metadata["packages"].as_array().unwrap() {
        for target in package["targets"].as_array().unwrap() {
            let kinds: Vec<&str> = target["kind"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|k| k.as_str())
                .collect();
            if kinds
                .iter()
                .any(|k| matches!(*k, "lib" | "rlib" | "bin" | "proc-macro"))
            {
                out.push((
                    format!(
                        "{} ({})",
                        package["name"].as_str().unwrap(),
                        target["name"].as_str().unwrap()
                    ),
                    target["src_path"].as_str().unwrap().into(),
                ));
            }
        }
    }
    out
}

#[test]
fn no_module_of_any_crate_imports_its_own_importer_in_a_circle() {
    let mut levels = 0;
    let mut edges = 0;
    let mut circles = Vec::new();
    for (name, root) in crate_roots() {
        for (level, graph) in module_graph::levels(&root) {
            levels += 1;
            edges += graph.values().map(BTreeSet::len).sum::<usize>();
            if let Some(cycle) = module_graph::find_cycle(&graph) {
                circles.push(format!("{name}, {level}: {}", cycle.join(" → ")));
            }
        }
    }
    // Guards the reader itself: seeing nothing would pass vacuously.
    assert!(
        levels >= 30 && edges >= 100,
        "too little seen: {levels} levels, {edges} edges"
    );
    assert!(
        circles.is_empty(),
        "modules that import each other in a circle (make one of them the lower layer: move \
         what both need below them, or into the level's root):\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_module_reader_sees_circles_and_layers() {
    let dir = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "lib.rs",
        "mod a; mod b; mod c; pub use b::Thing; #[cfg(test)] mod tests;",
    );
    write("a.rs", "use crate::Thing; pub fn f() {}");
    write("b/mod.rs", "mod inner; pub struct Thing;");
    write("b/inner.rs", "fn g() { super::super::c::h() }");
    write(
        "c.rs",
        "pub fn h() {} #[cfg(test)] mod t { use crate::a::f; }",
    );
    let levels = module_graph::levels(&dir.path().join("lib.rs"));
    let (_, root) = levels.iter().find(|(n, _)| n == "crate").unwrap();
    assert_eq!(
        root["a"],
        BTreeSet::from(["b".to_owned()]),
        "through the re-export"
    );
    assert_eq!(
        root["b"],
        BTreeSet::from(["c".to_owned()]),
        "from a nested file"
    );
    assert!(root["c"].is_empty(), "test-only code is not counted");
    assert_eq!(module_graph::find_cycle(root), None);

    write("c.rs", "pub fn h() { crate::a::f() }");
    let levels = module_graph::levels(&dir.path().join("lib.rs"));
    let (_, root) = levels.iter().find(|(n, _)| n == "crate").unwrap();
    assert_eq!(
        module_graph::find_cycle(root),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}
