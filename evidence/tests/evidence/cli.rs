//! The `evidence` binary on offline bundles: exit codes, the named failing check, --json.

use std::process::Command;

use crate::fixtures::*;

fn evidence(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_evidence"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn offline_simulated_bundle_exit_codes_and_named_failures() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    simulated_bundle().await.save(dir.path()).unwrap();

    // Refused by default: exit 1, the quote check named.
    let (code, out, _) = evidence(&["verify", "--bundle", path]);
    assert_eq!(code, 1, "{out}");
    assert!(out.lines().any(|l| l.starts_with("FAIL  quote")), "{out}");
    assert!(out.contains("NOT verified: failed checks: quote"), "{out}");

    // Accepted with --allow-simulated: exit 0, one line per check.
    let (code, out, err) = evidence(&["verify", "--bundle", path, "--allow-simulated"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("PASS")).count(),
        8,
        "{out}"
    );
    // Its app_compose does not enable dstack-gateway: no route to check.
    assert!(
        out.contains("PASS  gateway-route       not behind dstack-gateway"),
        "{out}"
    );
    assert!(out.contains("SKIP  governance"), "{out}");
    assert!(out.contains("SKIP  acme-caa"), "{out}");
    // Offline, freshness cannot be established: said so, and not a failure.
    assert!(
        out.contains("SKIP  freshness           not applicable offline"),
        "{out}"
    );

    // --json carries the same verdict.
    let (code, out, _) = evidence(&["verify", "--bundle", path, "--allow-simulated", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["tcb_status"], "Simulated");
    assert_eq!(v["checks"].as_array().unwrap().len(), 12);
    // A simulated quote has no OS measurement: N/A under the development rule.
    let os = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "os-image")
        .unwrap();
    assert_eq!(os["status"], "n/a", "{os}");

    // Tamper with the saved app_compose: compose-hash fails, exit 1.
    let info_path = dir.path().join("info.json");
    let mut info: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&info_path).unwrap()).unwrap();
    let compose = info["tcb_info"]["app_compose"]
        .as_str()
        .unwrap()
        .replace("appliance", "appliancf");
    info["tcb_info"]["app_compose"] = serde_json::json!(compose);
    std::fs::write(&info_path, info.to_string()).unwrap();
    let (code, out, _) = evidence(&["verify", "--bundle", path, "--allow-simulated", "--json"]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let failed: Vec<&str> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(failed, vec!["compose-hash"]);
}

#[test]
fn offline_near_mpc_bundle_with_collateral_and_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let mut b = near_bundle();
    b.collateral_json = None;
    b.save(dir.path()).unwrap();
    let collateral = data("dstack-near-mpc/collateral.json");
    let collateral = collateral.to_str().unwrap();
    let at = NEAR_MPC_AT.to_string();
    let policy_dir = tempfile::tempdir().unwrap();
    let policy = write_near_os_policy(policy_dir.path());
    let policy = policy.to_str().unwrap();
    let base = [
        "verify",
        "--bundle",
        path,
        "--collateral",
        collateral,
        "--skip",
        "report-data",
        "--os-measurements",
        policy,
    ];

    let (code, out, err) = evidence(&[&base[..], &["--at", &at]].concat());
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("PASS  quote               attestation quote UpToDate"),
        "{out}"
    );
    assert!(out.contains("SKIP  report-data"), "{out}");
    assert!(out.contains("PASS  os-image"), "{out}");
    assert!(
        out.contains("taken on trust from the policy file: MRTD, RTMR0, RTMR1, RTMR2"),
        "{out}"
    );
    assert!(out.contains("TCB status: UpToDate; advisories:"), "{out}");
    assert!(
        out.contains("verified: every required check passed"),
        "{out}"
    );

    // Without a pinned OS a genuine quote is not verified; accepted on request, the
    // summary says the OS was not verified.
    let unpinned = &base[..base.len() - 2];
    let (code, out, _) = evidence(&[unpinned, &["--at", &at]].concat());
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAIL  os-image"), "{out}");
    assert!(
        out.contains("NOT verified: failed checks: os-image"),
        "{out}"
    );
    let (code, out, _) = evidence(&[unpinned, &["--at", &at, "--allow-unpinned-os"]].concat());
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("N/A   os-image"), "{out}");
    assert!(
        out.contains("verified EXCEPT the operating system"),
        "{out}"
    );

    let expired = NEAR_MPC_EXPIRED.to_string();
    let (code, out, _) = evidence(&[&base[..], &["--at", &expired]].concat());
    assert_eq!(code, 1);
    assert!(out.contains("FAIL  quote"), "{out}");

    // Without collateral the quote cannot be verified: a failure, not a skip.
    let (code, out, _) = evidence(&[
        "verify",
        "--bundle",
        path,
        "--skip",
        "report-data",
        "--at",
        &at,
    ]);
    assert_eq!(code, 1);
    assert!(
        out.contains("FAIL  quote") && out.contains("no collateral"),
        "{out}"
    );
}

#[test]
fn usage_errors_exit_2() {
    let (code, _, err) = evidence(&["verify", "--bundle", "/nonexistent/bundle"]);
    assert_eq!(code, 2, "{err}");
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = evidence(&[
        "verify",
        "--bundle",
        dir.path().to_str().unwrap(),
        "--skip",
        "no-such-check",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown check"), "{err}");
}

#[test]
fn quote_and_replay_subcommands_read_the_vectors() {
    let (code, out, err) = evidence(&[
        "quote",
        data("dstack-near-mpc/quote.json").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["header"]["version"], 4);
    assert_eq!(v["report"]["rtmr3"], near_tcb_info()["rtmr3"]);

    let (code, out, err) = evidence(&[
        "replay",
        data("dstack-near-mpc/tcb_info.json").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["rtmr3"], near_tcb_info()["rtmr3"]);
    assert_eq!(v["identity"]["compose_hash"], NEAR_MPC_COMPOSE_HASH);
}
