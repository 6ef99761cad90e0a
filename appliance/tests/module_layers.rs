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

use std::path::{Path, PathBuf};

use test_support::rust_source::{Names, names_in, names_in_text};

/// The action execution's source folders: the appliance's `execution` module (who may
/// run what, billing) and the `appliance-execution` crate (the pool, host calls).
const EXECUTION_DIRS: [&str; 2] = ["src/execution", "execution/src"];

fn src_dir(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
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
        assert!(
            names_a_quote_provider(&names_in_text(snippet)).is_some(),
            "{snippet}"
        );
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
