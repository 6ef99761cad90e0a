//! What the appliance's layering needs beyond what crates and module order express (no
//! import circle among the modules of any level of any crate is `tests/architecture.rs`,
//! for the whole workspace), read from its own source:
//!
//! * the action worker pool never reaches into `api` and never builds an `ApiError`:
//!   `error.rs` is the one place where errors become HTTP responses;
//! * no module names a quote provider (`evidence::{DstackProvider, TsmProvider,
//!   SimulatedProvider, QuoteProvider}`): quotes come from keyservice, the only process
//!   that talks to the guest agent.
//!
//! Code under `#[cfg(test)]` is not counted. Paths are resolved syntactically (`super::x`,
//! `crate::api::x`, `use` trees), which is what a reader follows too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The action execution's source folders: the appliance's `execution` module (who may
/// run what, billing) and the `appliance-execution` crate (the pool, host calls).
const EXECUTION_DIRS: [&str; 2] = ["src/execution", "execution/src"];

fn src_dir(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn parse(path: &Path) -> syn::File {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    syn::parse_file(&text).unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display()))
}

/// Every `.rs` file below `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries =
            std::fs::read_dir(&d).unwrap_or_else(|e| panic!("cannot list {}: {e}", d.display()));
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn has_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string().replace(' ', "").contains("test"))
    })
}

/// Flattens a `use` tree into paths of identifiers (`self` kept as a segment).
fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut path = prefix.clone();
            path.push(n.ident.to_string());
            out.push(path);
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            path.push(r.ident.to_string());
            out.push(path);
        }
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(g) => {
            for item in &g.items {
                use_paths(item, prefix, out);
            }
        }
    }
}

/// Every path a file names outside `#[cfg(test)]` code, plus every identifier it uses.
#[derive(Default)]
struct Names {
    paths: Vec<Vec<String>>,
    idents: BTreeSet<String>,
}

impl<'ast> Visit<'ast> for Names {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            _ => &[],
        };
        if has_cfg_test(attrs) {
            return;
        }
        if let syn::Item::Use(u) = item {
            use_paths(&u.tree, &mut Vec::new(), &mut self.paths);
            for path in &self.paths {
                if let Some(last) = path.last() {
                    self.idents.insert(last.clone());
                }
            }
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.idents.extend(segments.iter().cloned());
        self.paths.push(segments);
        syn::visit::visit_path(self, path);
    }
}

fn names_in(path: &Path) -> Names {
    let mut names = Names::default();
    names.visit_file(&parse(path));
    names
}

#[test]
fn the_worker_pool_does_not_speak_http() {
    let files: Vec<PathBuf> = EXECUTION_DIRS
        .iter()
        .flat_map(|dir| rust_files(&src_dir(dir)))
        .collect();
    assert!(files.len() >= 8, "too few execution files: {files:?}");
    for file in files {
        let names = names_in(&file);
        for path in &names.paths {
            assert!(
                !(path.first().map(String::as_str) == Some("crate")
                    && matches!(path.get(1).map(String::as_str), Some("api" | "http"))),
                "{} imports {}: the worker pool must not depend on the HTTP layer",
                file.display(),
                path.join("::")
            );
        }
        assert!(
            !names.idents.contains("ApiError"),
            "{} names ApiError: only error.rs maps errors to HTTP",
            file.display()
        );
    }
}

/// The evidence crate's provider types: the front end must reach none of them.
const QUOTE_PROVIDERS: [&str; 5] = [
    "DstackProvider",
    "TsmProvider",
    "SimulatedProvider",
    "QuoteProvider",
    "provider",
];

fn names_a_quote_provider(names: &Names) -> Option<String> {
    names
        .paths
        .iter()
        .find(|p| {
            p.first().map(String::as_str) == Some("evidence")
                && p.iter().any(|s| QUOTE_PROVIDERS.contains(&s.as_str()))
        })
        .map(|p| p.join("::"))
        .or_else(|| {
            QUOTE_PROVIDERS[..4]
                .iter()
                .find(|n| names.idents.contains(**n))
                .map(|n| (*n).to_owned())
        })
}

#[test]
fn the_front_end_names_no_quote_provider() {
    // Positive control: the check sees a provider named either way.
    for snippet in [
        "use evidence::DstackProvider;",
        "fn f() { let _ = evidence::provider::TsmProvider::DEFAULT_DIR; }",
    ] {
        let mut names = Names::default();
        names.visit_file(&syn::parse_file(snippet).unwrap());
        assert!(names_a_quote_provider(&names).is_some(), "{snippet}");
    }
    // The front end's crates: this one and those it is built from.
    let files: Vec<PathBuf> = [
        "src",
        "store/src",
        "domain/src",
        "chain/src",
        "execution/src",
    ]
    .iter()
    .flat_map(|dir| rust_files(&src_dir(dir)))
    .collect();
    assert!(files.len() > 40, "too few files: {}", files.len());
    for file in files {
        if let Some(name) = names_a_quote_provider(&names_in(&file)) {
            panic!(
                "{} names {name}: the appliance gets quotes from keyservice only",
                file.display()
            );
        }
    }
}

#[test]
fn the_error_mapping_names_nothing_of_the_http_layer() {
    // `error.rs` maps the domains' errors to statuses; the HTTP layer's own errors (wallet
    // authentication, extractors) are mapped where they are raised, so the two do not
    // import each other in a circle.
    let names = names_in(&src_dir("src/error.rs"));
    assert!(
        names
            .paths
            .iter()
            .any(|p| p.first().map(String::as_str) == Some("crate")),
        "the reader saw no crate paths in error.rs"
    );
    let into_http: Vec<String> = names
        .paths
        .iter()
        .filter(|p| p.first().map(String::as_str) == Some("crate"))
        .filter(|p| p.get(1).map(String::as_str) == Some("http"))
        .map(|p| p.join("::"))
        .collect();
    assert!(
        into_http.is_empty(),
        "error.rs names the HTTP layer: {into_http:?}"
    );
}
