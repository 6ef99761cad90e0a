//! A worker never serves two accounts (issue 33). An interpreter exploit that keeps
//! running inside its worker after its job would otherwise see later tenants' code and
//! params, forge their responses and make host calls in their scopes. The pool binds a
//! worker to the account of its first job (`appliance/execution/src/idle.rs`); these tests
//! point a real appliance at `hostile-worker` (`tests/hostile/worker.rs`), a stand-in for
//! a fully compromised worker that keeps and records everything it receives, and run many
//! accounts' actions through the HTTP API.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use e2e::Appliance;
use serde_json::{Value, json};

/// Accounts, and jobs of each in the concurrent round.
const ACCOUNTS: usize = 20;
const JOBS: usize = 6;

/// Each tenant's own code, so the record shows the tenant by the code as well as by the
/// params.
fn code_of(tenant: usize) -> String {
    format!("async function main(p) {{ return 'tenant {tenant}'; }}")
}

/// Runs one job of `tenant` and checks what the worker answered: everything the hostile
/// worker kept (the `js_params` of every job it has run) must be this tenant's own.
/// Returns the worker's pid.
async fn job(app: &Appliance, key: &str, tenant: usize, n: usize) -> u64 {
    let params = json!({"tenant": tenant, "job": n});
    let reply = app
        .post(
            "/lit_action",
            Some(key),
            json!({"code": code_of(tenant), "js_params": params}),
        )
        .await;
    let body = reply.assert_ok();
    let response = &body["response"];
    let seen = response["seen"]
        .as_array()
        .expect("the hostile worker's answer");
    assert_eq!(seen.last(), Some(&params), "{body}");
    let foreign: Vec<&Value> = seen
        .iter()
        .filter(|p| p["tenant"] != json!(tenant))
        .collect();
    assert!(
        foreign.is_empty(),
        "tenant {tenant}'s worker had seen other tenants' jobs: {foreign:?}"
    );
    response["pid"].as_u64().expect("pid")
}

#[tokio::test]
async fn a_hostile_worker_never_receives_a_second_accounts_job() {
    let hostile = env!("CARGO_BIN_EXE_hostile-worker");
    let app = Arc::new(
        Appliance::start_with(&[
            ("APPLIANCE_ACTIONS__WORKERS", "4"),
            ("APPLIANCE_ACTIONS__WORKER_BINARY", hostile),
        ])
        .await,
    );
    let mut keys = Vec::new();
    for tenant in 0..ACCOUNTS {
        keys.push(app.new_account(&format!("tenant-{tenant}")).await.0);
    }
    let mut jobs: Vec<(usize, u64)> = Vec::new();

    // Three accounts taking turns on four workers, one job at a time. Before binding,
    // the pool handed each job the worker idle longest, whoever it had served: tenant
    // 1's second job ran on the worker of tenant 0's first, and so on round the pool.
    for n in 0..8 {
        for tenant in [0, 1, 2] {
            jobs.push((tenant, job(&app, &keys[tenant], tenant, n).await));
        }
    }

    // Every account at once, more jobs than workers, interleaved as they come.
    let mut tasks = tokio::task::JoinSet::new();
    for (tenant, key) in keys.iter().enumerate() {
        let (app, key) = (Arc::clone(&app), key.clone());
        tasks.spawn(async move {
            let mut pids = Vec::new();
            for n in 0..JOBS {
                pids.push((tenant, job(&app, &key, tenant, 100 + n).await));
            }
            pids
        });
    }
    while let Some(done) = tasks.join_next().await {
        jobs.extend(done.unwrap());
    }

    // What the workers themselves recorded: one line per job received, by pid.
    let mut received: BTreeMap<u64, Vec<Value>> = BTreeMap::new();
    let cwd = app.data_dir.join("worker-cwd");
    for entry in std::fs::read_dir(&cwd).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("hostile-worker-") {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let record: Value = serde_json::from_str(line).unwrap();
            received
                .entry(record["pid"].as_u64().unwrap())
                .or_default()
                .push(record);
        }
    }
    let recorded: usize = received.values().map(Vec::len).sum();
    assert_eq!(recorded, jobs.len(), "every job was received exactly once");
    let mut tenants_of: BTreeMap<u64, BTreeSet<usize>> = BTreeMap::new();
    for (pid, records) in &received {
        for record in records {
            let tenant = record["js_params"]["tenant"].as_u64().unwrap() as usize;
            assert_eq!(record["code"], json!(code_of(tenant)), "{record}");
            tenants_of.entry(*pid).or_default().insert(tenant);
        }
    }
    let shared: BTreeMap<_, _> = tenants_of.iter().filter(|(_, t)| t.len() > 1).collect();
    assert!(
        shared.is_empty(),
        "worker processes received jobs of two accounts: {shared:?}"
    );
    // The check has teeth: workers were reused (a worker ran several jobs), and the
    // pids the tenants were answered from are the ones that recorded their jobs.
    let most = received.values().map(Vec::len).max().unwrap_or(0);
    assert!(most >= 4, "workers were reused, up to {most} jobs each");
    for (tenant, pid) in &jobs {
        assert!(
            tenants_of[pid].contains(tenant),
            "tenant {tenant}, pid {pid}"
        );
    }
}
