//! `docs/architecture.md` draws the crate graph ("The crates"): every workspace crate and
//! the workspace crates it depends on in production code. This test reads the manifests
//! (`cargo metadata`) and fails when the picture and the code disagree, in either
//! direction, so the page a newcomer reads first cannot drift from the layering the
//! compiler enforces.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The graph as the manifests have it: normal, non-optional dependencies on other
/// workspace crates.
fn manifests() -> Graph {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
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
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
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
                .filter(|d| d["kind"].is_null() && d["optional"] != true)
                .map(|d| d["name"].as_str().unwrap().to_owned())
                .filter(|d| names.contains(d))
                .collect();
            (p["name"].as_str().unwrap().to_owned(), deps)
        })
        .collect()
}

/// The graph as `text` draws it: the first ```text block after "## The crates", one
/// `crate → dep, dep` line per crate (`(none)` for no dependency).
fn drawn(text: &str) -> Graph {
    let section = text
        .split("## The crates")
        .nth(1)
        .expect("a section \"## The crates\"");
    let block = section
        .split("```text\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a ```text block in the section");
    let mut graph = Graph::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let (name, deps) = line
            .split_once('→')
            .unwrap_or_else(|| panic!("not `crate → deps`: {line}"));
        let deps = deps.trim();
        let deps: BTreeSet<String> = if deps == "(none)" {
            BTreeSet::new()
        } else {
            deps.split(',').map(|d| d.trim().to_owned()).collect()
        };
        let previous = graph.insert(name.trim().to_owned(), deps);
        assert!(previous.is_none(), "{} is drawn twice", name.trim());
    }
    graph
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
    let page = "## The crates\n\n```text\na → (none)\nb → a\nc → (none)\n```\n";
    let found = differences(&drawn(page), &real);
    assert_eq!(
        found,
        [
            "a: edges not drawn [\"b\"], drawn edges that do not exist []",
            "b: edges not drawn [], drawn edges that do not exist [\"a\"]",
            "c: drawn, but no such workspace crate",
        ]
    );
    let exact = "## The crates\n```text\na → b\nb → (none)\n```";
    assert!(differences(&drawn(exact), &real).is_empty());
}
