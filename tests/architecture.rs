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
