//! Module imports end to end: real `action-worker` processes in the pool, the appliance's
//! importer, a store for the integrity locks, and a local HTTPS stand-in for the CDN (on
//! 127.0.0.1, with a self-signed certificate the importer is told to trust through
//! `actions.imports.ca_bundle`). The stand-in counts the requests for each path, so a
//! test sees what was fetched and what came from the cache.
//!
//! Needs the worker binary: `cargo build -p action-runtime --bin action-worker`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use action_runtime::protocol::{self, ErrorKind, JobDone};
use appliance_execution::fetch::{FetchLimits, Fetcher};
use appliance_execution::host::HostContext;
use appliance_execution::imports::{ImportsConfig, ModuleImports};
use appliance_execution::pool::{
    Admission, JobLimits, Pool, ResolvedJob, RetirePolicy, Run, Unobserved,
};
use appliance_execution::spawn::{Spawner, WorkerSpec};
use appliance_store::{AccountId, Store, WalletScope};
use base64::Engine as _;
use keyservice_api::KeyClient;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha384};
use tokio::io::AsyncWriteExt as _;

// ---------------------------------------------------------------------------------------
// The CDN stand-in

/// What the stand-in answers for a path.
#[derive(Clone)]
enum Answer {
    Body(String),
    /// Never answers (the importer's timeout must end the wait).
    Stall,
    Redirect(&'static str),
}

#[derive(Default)]
struct Served {
    answers: HashMap<String, Answer>,
    hits: HashMap<String, usize>,
}

/// An HTTPS server on 127.0.0.1 serving [`Answer`]s by path, stopped when dropped.
struct Cdn {
    base: String,
    ca_file: PathBuf,
    served: Arc<Mutex<Served>>,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Cdn {
    async fn start() -> Self {
        let tls = test_support::tls::self_signed("127.0.0.1");
        let dir = tempfile::tempdir().unwrap();
        let ca_file = dir.path().join("cdn-ca.pem");
        std::fs::write(&ca_file, &tls.pem).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let served = Arc::new(Mutex::new(Served::default()));
        let state = Arc::clone(&served);
        let acceptor = tls.acceptor;
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, state) = (acceptor.clone(), Arc::clone(&state));
                tokio::spawn(async move {
                    let Ok(mut stream) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Some(head) = test_support::tls::read_request_head(&mut stream).await else {
                        return;
                    };
                    let head = String::from_utf8_lossy(&head).into_owned();
                    let path = head.split(' ').nth(1).unwrap_or("/").to_owned();
                    let answer = {
                        let mut state = state.lock().unwrap();
                        *state.hits.entry(path.clone()).or_default() += 1;
                        state.answers.get(&path).cloned()
                    };
                    let response = match answer {
                        Some(Answer::Body(body)) => format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/javascript\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        ),
                        Some(Answer::Stall) => {
                            tokio::time::sleep(Duration::from_secs(30)).await;
                            return;
                        }
                        Some(Answer::Redirect(to)) => format!(
                            "HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                        ),
                        None => "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_owned(),
                    };
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Self {
            base: format!("https://127.0.0.1:{port}/"),
            ca_file,
            served,
            task,
            _dir: dir,
        }
    }

    fn serve(&self, path: &str, answer: Answer) {
        self.served
            .lock()
            .unwrap()
            .answers
            .insert(path.to_owned(), answer);
    }

    fn body(&self, path: &str, body: &str) {
        self.serve(path, Answer::Body(body.to_owned()));
    }

    /// Requests for `path` so far.
    fn hits(&self, path: &str) -> usize {
        self.served
            .lock()
            .unwrap()
            .hits
            .get(path)
            .copied()
            .unwrap_or(0)
    }

    fn total_hits(&self) -> usize {
        self.served.lock().unwrap().hits.values().sum()
    }

    /// The importer's configuration for this CDN.
    fn config(&self) -> ImportsConfig {
        ImportsConfig {
            cdn: Some(self.base.clone()),
            ca_bundle: Some(self.ca_file.clone()),
            ..ImportsConfig::default()
        }
    }
}

impl Drop for Cdn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ---------------------------------------------------------------------------------------
// The appliance's side

struct Fixture {
    dir: tempfile::TempDir,
    store: Store,
    pool: Arc<Pool>,
}

impl Fixture {
    fn new() -> Self {
        let _ = tracing_subscriber::fmt().with_test_writer().try_init();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("cwd")).unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        let spec = WorkerSpec {
            binary: test_support::binaries::workspace_binary("action-worker"),
            memory_limit_mb: 256,
            cwd: dir.path().join("cwd"),
        };
        let limits = JobLimits {
            timeout: Duration::from_secs(30),
            queue_timeout: Duration::from_secs(60),
            admission: Admission {
                per_account: 1,
                queued_per_account: 100,
                queued_total: 100,
            },
            worker: protocol::JobLimits::default(),
            retire: RetirePolicy {
                max_jobs: u32::MAX,
                heap_limit_bytes: u64::MAX,
                bound_idle: Duration::from_secs(3600),
            },
        };
        let pool = Pool::new(Spawner::Direct(spec), limits, 1, Arc::new(Unobserved));
        Self { dir, store, pool }
    }

    /// One job's host side, importing through `imports`.
    fn host(&self, imports: &ModuleImports) -> HostContext {
        let fetcher = Fetcher::new(FetchLimits {
            timeout: Duration::from_secs(1),
            max_response_bytes: 1024,
            max_request_bytes: 1024,
            allow_private: false,
        })
        .unwrap();
        HostContext::new(
            self.store.clone(),
            KeyClient::with_config(
                self.dir.path().join("no-keyservice.sock"),
                keyservice_api::ClientConfig {
                    request_timeout: Duration::from_secs(1),
                    ..keyservice_api::ClientConfig::default()
                },
            ),
            fetcher,
            AccountId(1),
            WalletScope::Account,
            "QmTest".into(),
            0,
        )
        .with_imports(Some(imports))
    }

    async fn run(&self, imports: &ModuleImports, code: &str) -> JobDone {
        let mut host = self.host(imports);
        let job = ResolvedJob {
            code: code.into(),
            action_cid: "QmTest".into(),
            js_params: json!({"n": 21}),
        };
        match self
            .pool
            .run(job, &mut host, None, std::future::pending())
            .await
            .unwrap()
        {
            Run::Finished(timed) => timed.outcome,
            other => panic!("not finished: {other:?}"),
        }
    }
}

fn importer(config: &ImportsConfig) -> ModuleImports {
    ModuleImports::new(config).unwrap().expect("imports are on")
}

#[track_caller]
fn ok(done: &JobDone) -> &Value {
    assert!(
        done.error.is_none(),
        "action failed: {:?}\nlogs: {}",
        done.error,
        done.logs
    );
    &done.response
}

#[track_caller]
fn exception(done: &JobDone) -> String {
    let error = done.error.as_ref().expect("the action failed");
    assert_eq!(error.kind, ErrorKind::Exception, "{}", error.message);
    error.message.clone()
}

fn sha384(text: &str) -> [u8; 48] {
    Sha384::digest(text.as_bytes()).into()
}

fn sri(text: &str) -> String {
    format!(
        "sha384-{}",
        base64::engine::general_purpose::STANDARD.encode(sha384(text))
    )
}

/// A package in the shape esm.sh serves: an entry module re-exporting a build module
/// by absolute path, which imports a sibling by a relative one.
const ENTRY: &str = "export * from \"/v135/lib@1.0.0/es2022/lib.mjs\";";
const BUILD: &str =
    "import { base } from \"./util.mjs\";\nexport function twice(x) { return base * x; }";
const UTIL: &str = "export const base = 2;";

fn serve_lib(cdn: &Cdn) {
    cdn.body("/lib@1.0.0", ENTRY);
    cdn.body("/v135/lib@1.0.0/es2022/lib.mjs", BUILD);
    cdn.body("/v135/lib@1.0.0/es2022/util.mjs", UTIL);
}

const USES_LIB: &str =
    "import { twice } from \"lib@1.0.0\";\nasync function main(p) { return twice(p.n); }";

// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_pinned_import_runs_its_graph_and_a_second_run_fetches_nothing() {
    let cdn = Cdn::start().await;
    serve_lib(&cdn);
    let f = Fixture::new();
    let imports = importer(&cdn.config());

    let done = f.run(&imports, USES_LIB).await;
    assert_eq!(ok(&done), &json!(42));
    for path in [
        "/lib@1.0.0",
        "/v135/lib@1.0.0/es2022/lib.mjs",
        "/v135/lib@1.0.0/es2022/util.mjs",
    ] {
        assert_eq!(cdn.hits(path), 1, "{path}");
        // Trust on first use: each URL's SHA-384 is now locked in the store.
        let url = format!("{}{}", cdn.base, &path[1..]);
        let lock = f.store.module_lock(&url).await.unwrap().expect("locked");
        let body = match path {
            "/lib@1.0.0" => ENTRY,
            "/v135/lib@1.0.0/es2022/lib.mjs" => BUILD,
            _ => UTIL,
        };
        assert_eq!(lock.sha384, sha384(body), "{path}");
    }

    // A second job (another worker context, the same appliance): from the cache.
    let done = f
        .run(
            &imports,
            "import { twice } from 'lib@1.0.0'; export const main = () => twice(50);",
        )
        .await;
    assert_eq!(ok(&done), &json!(100));
    assert_eq!(cdn.total_hits(), 3, "the second run fetched again");

    // What the action can see of its imports.
    let done = f
        .run(
            &imports,
            "import 'lib@1.0.0'; function main() { return Lit.Actions.showImportDetails(); }",
        )
        .await;
    let details = ok(&done).as_array().unwrap().clone();
    assert_eq!(details.len(), 3);
    assert!(details.contains(&json!({
        "url": format!("{}lib@1.0.0", cdn.base),
        "hash": sri(ENTRY),
    })));
}

#[tokio::test]
async fn unpinned_and_off_cdn_imports_are_refused_before_any_fetch() {
    let cdn = Cdn::start().await;
    serve_lib(&cdn);
    let f = Fixture::new();
    let imports = importer(&cdn.config());
    for (code, expected) in [
        (
            "import { z } from 'zod'; function main() { return 1; }",
            "import `zod`: `zod` names no version: import an exact version, such as `zod@1.2.3`",
        ),
        (
            "import { z } from 'zod@^3'; function main() { return 1; }",
            "`^3` is not an exact version of `zod`",
        ),
        (
            "import { z } from 'zod@latest'; function main() { return 1; }",
            "is not an exact version",
        ),
        (
            "import { x } from './local.js'; function main() { return 1; }",
            "a relative import needs a module to be relative to",
        ),
        (
            "import { x } from 'https://evil.example/x@1.0.0'; function main() { return 1; }",
            "modules come only from the configured CDN",
        ),
    ] {
        let done = f.run(&imports, code).await;
        let message = exception(&done);
        assert!(message.contains(expected), "{code}\n{message}");
    }
    assert_eq!(cdn.total_hits(), 0);
}

#[tokio::test]
async fn trust_on_first_use_refuses_a_changed_body() {
    let cdn = Cdn::start().await;
    serve_lib(&cdn);
    let f = Fixture::new();
    let done = f.run(&importer(&cdn.config()), USES_LIB).await;
    assert_eq!(ok(&done), &json!(42));

    // The CDN now serves other code under the same URL; a fresh importer (a restart, or
    // another replica: nothing cached) fetches it and refuses it.
    let changed =
        "import { base } from \"./util.mjs\";\nexport function twice(x) { return 1000 * x; }";
    cdn.body("/v135/lib@1.0.0/es2022/lib.mjs", changed);
    let done = f.run(&importer(&cdn.config()), USES_LIB).await;
    let message = exception(&done);
    assert!(
        message.contains(&format!(
            "{}v135/lib@1.0.0/es2022/lib.mjs changed since it was first imported: its integrity lock is {}, the CDN now sends {}; refused",
            cdn.base,
            sri(BUILD),
            sri(changed)
        )),
        "{message}"
    );
    // The lock still holds the first body.
    let url = format!("{}v135/lib@1.0.0/es2022/lib.mjs", cdn.base);
    let lock = f.store.module_lock(&url).await.unwrap().unwrap();
    assert_eq!(lock.sha384, sha384(BUILD));
}

#[tokio::test]
async fn an_inline_pin_must_match() {
    let cdn = Cdn::start().await;
    cdn.body("/pinned@1.0.0/index.js", "export const v = 7;");
    let f = Fixture::new();
    let imports = importer(&cdn.config());
    let wrong = sri("export const v = 8;");
    let done = f
        .run(
            &imports,
            &format!("import {{ v }} from 'pinned@1.0.0/index.js#{wrong}'; function main() {{ return v; }}"),
        )
        .await;
    let message = exception(&done);
    assert!(
        message.contains(&format!(
            "does not match its inline pin: expected {wrong}, the CDN sent {}; refused",
            sri("export const v = 7;")
        )),
        "{message}"
    );
    // Nothing is locked from a refused body.
    let url = format!("{}pinned@1.0.0/index.js", cdn.base);
    assert_eq!(f.store.module_lock(&url).await.unwrap(), None);

    // The right pin runs, as a full URL too.
    let right = sri("export const v = 7;");
    let done = f
        .run(
            &imports,
            &format!("import {{ v }} from '{url}#{right}'; function main() {{ return v; }}"),
        )
        .await;
    assert_eq!(ok(&done), &json!(7));
}

#[tokio::test]
async fn each_bound_is_enforced_with_a_clear_error() {
    let cdn = Cdn::start().await;
    cdn.body(
        "/big@1.0.0",
        &format!("export const s = '{}';", "x".repeat(2000)),
    );
    cdn.body("/a@1.0.0", "export const a = 1;");
    cdn.body("/b@1.0.0", "export const b = 2;");
    cdn.body("/c@1.0.0", "export const c = 3;");
    cdn.serve("/slow@1.0.0", Answer::Stall);
    cdn.serve("/moved@1.0.0", Answer::Redirect("/a@1.0.0"));
    let f = Fixture::new();
    let with = |config: ImportsConfig| importer(&config);
    let cases = [
        (
            with(ImportsConfig {
                max_module_bytes: 1000,
                ..cdn.config()
            }),
            "import { s } from 'big@1.0.0'; function main() { return s; }",
            format!(
                "{}big@1.0.0 is over the module size limit of 1000 bytes",
                cdn.base
            ),
        ),
        (
            with(ImportsConfig {
                max_modules_per_action: 2,
                ..cdn.config()
            }),
            "import 'a@1.0.0'; import 'b@1.0.0'; import 'c@1.0.0'; function main() { return 1; }",
            "import `c@1.0.0`: an action may import at most 2 modules".to_owned(),
        ),
        (
            // Failed imports count: a loop of caught `import()`s cannot fetch forever.
            with(ImportsConfig {
                max_modules_per_action: 2,
                ..cdn.config()
            }),
            "async function main() {
                for (const name of ['gone1@1.0.0', 'gone2@1.0.0']) {
                    try { await import(name); } catch (e) {}
                }
                return (await import('a@1.0.0')).a;
            }",
            "import `a@1.0.0`: an action may import at most 2 modules (failed imports count too)"
                .to_owned(),
        ),
        (
            with(ImportsConfig {
                max_bytes_per_action: 30,
                ..cdn.config()
            }),
            "import 'a@1.0.0'; import 'b@1.0.0'; function main() { return 1; }",
            format!(
                "an action may load at most 30 bytes of modules; {}b@1.0.0 would bring it to 38",
                cdn.base
            ),
        ),
        (
            with(ImportsConfig {
                fetch_timeout_ms: 300,
                ..cdn.config()
            }),
            "import 'slow@1.0.0'; function main() { return 1; }",
            format!("fetching {}slow@1.0.0 timed out after 300 ms", cdn.base),
        ),
        (
            with(cdn.config()),
            "import 'moved@1.0.0'; function main() { return 1; }",
            format!(
                "the CDN redirected {}moved@1.0.0; redirects are not followed",
                cdn.base
            ),
        ),
        (
            with(cdn.config()),
            "import 'missing@1.0.0'; function main() { return 1; }",
            format!("the CDN answered 404 for {}missing@1.0.0", cdn.base),
        ),
    ];
    for (imports, code, expected) in &cases {
        let done = f.run(imports, code).await;
        let message = exception(&done);
        assert!(message.contains(expected.as_str()), "{code}\n{message}");
        // Within its bound the same importer works.
        let done = f
            .run(
                imports,
                "import { a } from 'a@1.0.0'; function main() { return a; }",
            )
            .await;
        assert_eq!(ok(&done), &json!(1), "{code}");
    }
}

#[tokio::test]
async fn a_module_loaded_twice_in_one_action_is_sent_and_evaluated_once() {
    let cdn = Cdn::start().await;
    cdn.body(
        "/count@1.0.0",
        "globalThis.n = (globalThis.n || 0) + 1; export const n = globalThis.n;",
    );
    cdn.body("/user@1.0.0", "export { n } from '/count@1.0.0';");
    let f = Fixture::new();
    let imports = importer(&ImportsConfig {
        // Two distinct modules fit; a repeat of one must not count again.
        max_modules_per_action: 2,
        ..cdn.config()
    });
    let done = f
        .run(
            &imports,
            &format!(
                "import {{ n as a }} from 'count@1.0.0';
                 import {{ n as b }} from '{}count@1.0.0';
                 import {{ n as c }} from 'user@1.0.0';
                 function main() {{ return [a, b, c, globalThis.n]; }}",
                cdn.base
            ),
        )
        .await;
    assert_eq!(ok(&done), &json!([1, 1, 1, 1]));
    assert_eq!(cdn.hits("/count@1.0.0"), 1);
}

// ---------------------------------------------------------------------------------------
// Measurement (not an assertion): `cargo test -p appliance-execution --test imports --
// --ignored --nocapture cached_import_cost`.

#[tokio::test]
#[ignore = "a measurement: run it by name to print the cost of a cached import"]
async fn cached_import_cost() {
    let cdn = Cdn::start().await;
    let small = "export const twice = (x) => 2 * x;".to_owned();
    // About 100 KiB of ordinary code: 2000 small functions.
    let large: String = (0..2000)
        .map(|i| format!("export function f{i}(x) {{ return x + {i}; }}\n"))
        .collect();
    cdn.body("/small@1.0.0", &small);
    cdn.body("/large@1.0.0", &large);
    let f = Fixture::new();
    let imports = importer(&cdn.config());
    let n = 200;
    let measure = async |label: &str, code: &str| {
        assert!(ok(&f.run(&imports, code).await).is_number()); // warm: fetch, lock, cache
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            let started = Instant::now();
            let done = f.run(&imports, code).await;
            times.push(started.elapsed());
            assert!(ok(&done).is_number());
        }
        times.sort();
        let mean = times.iter().sum::<Duration>() / n as u32;
        println!(
            "{label:<44} n={n} mean {mean:>9.1?}  p50 {:>9.1?}  p99 {:>9.1?}",
            times[n / 2],
            times[n * 99 / 100]
        );
        mean
    };
    let bare = measure("no import", "function main(p) { return 2 * p.n; }").await;
    let script = measure(
        "module without import",
        "export {}; function main(p) { return 2 * p.n; }",
    )
    .await;
    let small_t = measure(
        &format!("cached import, {} B", small.len()),
        "import { twice } from 'small@1.0.0'; function main(p) { return twice(p.n); }",
    )
    .await;
    let large_t = measure(
        &format!("cached import, {} B", large.len()),
        "import { f1 } from 'large@1.0.0'; function main(p) { return f1(p.n); }",
    )
    .await;
    println!(
        "import cost over a module without import: small {:?}, large {:?} (module mode itself: {:?})",
        small_t.saturating_sub(script),
        large_t.saturating_sub(script),
        script.saturating_sub(bare)
    );
    assert_eq!(cdn.hits("/small@1.0.0") + cdn.hits("/large@1.0.0"), 2);
}
