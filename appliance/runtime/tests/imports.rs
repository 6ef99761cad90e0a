//! `import` in the worker: code that is a module runs as one, each import is one `import`
//! host call (the specifier as written, the importing module's URL), modules are keyed by
//! the URL the parent answers, and what the parent refuses fails the action. The parent
//! here is the test: a toy CDN of a few sources, resolving `name@x.y.z` and `./` paths.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use action_runtime::protocol::{
    ErrorKind, HostCall, HostRequest, ImportRequest, ImportedModule, ReplyOutcome,
};
use serde_json::json;
use test_support::action_worker::{Worker, failed, job, null, ok};

const CDN: &str = "https://cdn.test/";

/// The test's parent: answers `import` calls from `modules` (URL → source), sending each
/// URL's source once per job, as the appliance does.
struct Parent {
    modules: BTreeMap<String, String>,
    sent: BTreeSet<String>,
}

impl Parent {
    fn new(modules: &[(&str, &str)]) -> Self {
        Self {
            modules: modules
                .iter()
                .map(|(path, source)| (format!("{CDN}{path}"), (*source).to_owned()))
                .collect(),
            sent: BTreeSet::new(),
        }
    }

    fn resolve(specifier: &str, referrer: Option<&str>) -> Result<String, String> {
        if let Some(rest) = specifier.strip_prefix("./") {
            let referrer = referrer.ok_or("relative import without a referrer")?;
            let dir = &referrer[..=referrer.rfind('/').unwrap()];
            return Ok(format!("{dir}{rest}"));
        }
        if specifier.starts_with(CDN) {
            return Ok(specifier.to_owned());
        }
        if !specifier.contains('@') {
            return Err(format!("import `{specifier}`: no version"));
        }
        Ok(format!("{CDN}{specifier}"))
    }

    fn answer(&mut self, call: &HostCall) -> ReplyOutcome {
        let HostRequest::Import(ImportRequest {
            specifier,
            referrer,
        }) = &call.request
        else {
            panic!("unexpected host call {call:?}");
        };
        let url = match Self::resolve(specifier, referrer.as_deref()) {
            Ok(url) => url,
            Err(e) => return ReplyOutcome::Err(e),
        };
        let Some(source) = self.modules.get(&url) else {
            return ReplyOutcome::Err(format!("import `{specifier}`: {url} not found"));
        };
        let source = self.sent.insert(url.clone()).then(|| source.clone());
        ReplyOutcome::Ok(
            serde_json::to_value(ImportedModule {
                url,
                integrity: "sha384-test".into(),
                source,
            })
            .unwrap(),
        )
    }
}

/// Runs `code` against a parent serving `modules`; the done message and the import
/// requests made.
fn run(
    code: &str,
    modules: &[(&str, &str)],
) -> (action_runtime::protocol::JobDone, Vec<ImportRequest>) {
    let mut parent = Parent::new(modules);
    let mut w = Worker::spawn();
    let (done, calls) = w.run_job(job(code, json!({"n": 21})), |call| parent.answer(call));
    let requests = calls
        .into_iter()
        .map(|c| match c.request {
            HostRequest::Import(r) => r,
            other => panic!("not an import: {other:?}"),
        })
        .collect();
    (done, requests)
}

fn import(specifier: &str, referrer: Option<&str>) -> ImportRequest {
    ImportRequest {
        specifier: specifier.into(),
        referrer: referrer.map(str::to_owned),
    }
}

const LIB: (&str, &str) = (
    "lib@1.0.0",
    "export function twice(x) { return 2 * x; } export const version = '1.0.0';",
);

#[test]
fn an_action_with_an_import_runs_as_a_module_and_its_main_is_called() {
    let (done, calls) = run(
        "import { twice } from \"lib@1.0.0\";\nasync function main(p) { return twice(p.n); }",
        &[LIB],
    );
    assert_eq!(ok(&done), &json!(42));
    assert_eq!(calls, [import("lib@1.0.0", None)]);

    // `const main = …` at the top of a module is found too.
    let (done, _) = run(
        "import * as lib from 'lib@1.0.0'; const main = (p) => lib.version + ':' + p.n;",
        &[LIB],
    );
    assert_eq!(ok(&done), &json!("1.0.0:21"));
}

#[test]
fn a_module_without_main_runs_for_its_response() {
    let (done, _) = run(
        "import { twice } from 'lib@1.0.0'; Lit.Actions.setResponse({response: String(twice(4))});",
        &[LIB],
    );
    assert_eq!(ok(&done), &json!("8"));
}

#[test]
fn relative_imports_carry_the_importing_modules_url() {
    let (done, calls) = run(
        "import { answer } from 'pkg@2.0.0/index.js'; export function main() { return answer(); }",
        &[
            (
                "pkg@2.0.0/index.js",
                "import { base } from './util.js'; export const answer = () => base + 1;",
            ),
            ("pkg@2.0.0/util.js", "export const base = 41;"),
        ],
    );
    assert_eq!(ok(&done), &json!(42));
    assert_eq!(
        calls,
        [
            import("pkg@2.0.0/index.js", None),
            import("./util.js", Some("https://cdn.test/pkg@2.0.0/index.js")),
        ]
    );
}

#[test]
fn two_specifiers_of_one_url_are_one_module_evaluated_once() {
    let (done, calls) = run(
        "import { n as a } from 'counter@1.0.0';
         import { n as b } from 'https://cdn.test/counter@1.0.0';
         import 'user@1.0.0';
         function main() { return [a, b, globalThis.evaluations]; }",
        &[
            (
                "counter@1.0.0",
                "globalThis.evaluations = (globalThis.evaluations || 0) + 1; export const n = globalThis.evaluations;",
            ),
            ("user@1.0.0", "import './counter@1.0.0';"),
        ],
    );
    assert_eq!(ok(&done), &json!([1, 1, 1]));
    assert_eq!(calls.len(), 4, "{calls:?}");
}

#[test]
fn a_refused_import_fails_the_action_before_any_of_it_runs() {
    let (done, calls) = run(
        "import { z } from 'zod'; console.log('ran'); function main() { return 1; }",
        &[],
    );
    let message = failed(&done, ErrorKind::Exception);
    assert!(message.contains("import `zod`: no version"), "{message}");
    assert_eq!(done.logs, "", "the action's code ran");
    assert_eq!(calls, [import("zod", None)]);
}

#[test]
fn a_module_the_engine_cannot_parse_is_named_in_the_error() {
    let (done, _) = run(
        "import { x } from 'broken@1.0.0'; function main() { return x; }",
        &[("broken@1.0.0", "export const x = ;")],
    );
    let message = failed(&done, ErrorKind::Exception);
    assert!(
        message.contains("https://cdn.test/broken@1.0.0 is not a module boa can parse"),
        "{message}"
    );
}

#[test]
fn import_attributes_are_refused() {
    let (done, calls) = run(
        "import data from 'data@1.0.0/x.json' with { type: 'json' }; function main() { return data; }",
        &[],
    );
    let message = failed(&done, ErrorKind::Exception);
    assert!(
        message.contains("import attributes are not supported"),
        "{message}"
    );
    assert!(calls.is_empty());
}

#[test]
fn import_meta_url_and_the_import_details() {
    let (done, _) = run(
        "import { here } from 'meta@1.0.0';
         function main() { return { here, details: Lit.Actions.showImportDetails() }; }",
        &[("meta@1.0.0", "export const here = import.meta.url;")],
    );
    assert_eq!(
        ok(&done),
        &json!({
            "here": "https://cdn.test/meta@1.0.0",
            "details": [{"url": "https://cdn.test/meta@1.0.0", "hash": "sha384-test"}],
        })
    );
}

#[test]
fn dynamic_import_from_a_script() {
    let (done, calls) = run(
        "async function main(p) { const lib = await import('lib@1.0.0'); return lib.twice(p.n); }",
        &[LIB],
    );
    assert_eq!(ok(&done), &json!(42));
    assert_eq!(calls, [import("lib@1.0.0", None)]);
}

#[test]
fn top_level_await_makes_a_module() {
    let (done, calls) = run(
        "const v = await Promise.resolve(20); async function main(p) { return v + p.n + 1; }",
        &[],
    );
    assert_eq!(ok(&done), &json!(42));
    assert!(calls.is_empty());
}

#[test]
fn scripts_stay_sloppy_scripts() {
    // A `var` of a script is a global property, and sloppy mode allows `with`: neither
    // would hold for a module.
    let mut w = Worker::spawn();
    let done = w.run(
        "var x = 1; with ({y: 2}) { var z = y; } function main() { return [typeof globalThis.x, z]; }",
        null(),
    );
    assert_eq!(ok(&done), &json!(["number", 2]));
}

#[test]
fn a_syntax_error_in_module_code_is_still_a_syntax_error() {
    let mut w = Worker::spawn();
    let done = w.run(
        "import { x } from 'lib@1.0.0'; function main( { return x; }",
        null(),
    );
    let message = failed(&done, ErrorKind::Exception);
    // The module's error (the real mistake), not the script parser's complaint about
    // `import`.
    assert!(message.starts_with("SyntaxError"), "{message}");
    assert!(!message.contains("import"), "{message}");
    // A script's own syntax error is reported as before.
    let done = w.run("function main( { return 1; }", null());
    let message = failed(&done, ErrorKind::Exception);
    assert!(message.starts_with("SyntaxError"), "{message}");
}

/// Module actions leave nothing behind: the worker's live heap after 100 of them is where
/// it was after 10. (Reading `main` through the module's namespace object would keep
/// every job's realm alive, about 240 KiB each, in boa 0.22.)
#[test]
fn module_actions_do_not_grow_the_workers_heap() {
    let mut parent = Parent::new(&[LIB]);
    let mut w = Worker::spawn();
    let code = "import { twice } from 'lib@1.0.0'; export function main(p) { return twice(p.n); }";
    let mut heap_after = Vec::new();
    for _ in 0..100 {
        parent.sent.clear();
        let (done, _) = w.run_job(job(code, json!({"n": 21})), |call| parent.answer(call));
        assert_eq!(ok(&done), &json!(42));
        heap_after.push(done.heap_bytes.expect("the worker reports its heap"));
    }
    let (early, late) = (heap_after[9], heap_after[99]);
    assert!(
        late < early + 4 * 1024 * 1024,
        "the heap grew from {early} to {late} bytes over 90 module jobs"
    );
}
