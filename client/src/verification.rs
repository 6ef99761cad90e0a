//! One verification of a deployment, exactly as `evidence verify --url` does it, under a
//! [`Policy`], and what it attests: the leaf certificate(s) the client may then talk to.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use evidence::bundle::{Bundle, ConnectTo, cert_file_name, first_pem_cert};
use evidence::check::{self, Options, Report, Status};
use serde::Serialize;

use crate::error::ClientError;
use crate::pinning::{KeyHash, LeafHash, leaf_hash};
use crate::policy::Policy;

/// A successful verification: the report, and what it pinned.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    /// The deployment's base URL.
    pub url: String,
    /// Every check, as `evidence verify --json` prints it.
    pub report: Report,
    /// When it was verified (Unix seconds).
    pub verified_at: u64,
    /// The attested compose hash (hex).
    pub compose_hash: String,
    /// The app id (hex), the governance contract's address.
    pub app_id: Option<String>,
    /// SHA-256 of the attested leaf certificate(s): the only ones the client talks to.
    pub pinned_leaves: Vec<String>,
    /// Whether the quote was simulated (development stack: NOT confidential).
    pub simulated: bool,
    /// SHA-256 of the SubjectPublicKeyInfo of the key the deployment's next certificate
    /// will use, as its evidence announced (`next-tls-key.json`), if it did.
    pub announced_next_key: Option<String>,
    #[serde(skip)]
    pub(crate) pins: BTreeSet<LeafHash>,
    #[serde(skip)]
    pub(crate) next_keys: BTreeSet<KeyHash>,
}

/// Fetches the deployment's evidence from `base` (trusting the web PKI plus `ca_file`)
/// and verifies it under `policy`. The request carries no credential.
pub async fn verify_deployment(
    base: &str,
    ca_file: Option<&Path>,
    policy: &Policy,
) -> Result<Verification, ClientError> {
    verify_deployment_via(base, ca_file, None, policy).await
}

/// [`verify_deployment`], connecting as `connect` says (curl's `--connect-to`: the URL's
/// host name stays the TLS server name) when given.
pub async fn verify_deployment_via(
    base: &str,
    ca_file: Option<&Path>,
    connect: Option<&ConnectTo>,
    policy: &Policy,
) -> Result<Verification, ClientError> {
    let bundle = Bundle::fetch_via(base, ca_file, connect).await?;
    verify_bundle(base, &bundle, policy, unix_now()).await
}

/// Verifies a fetched bundle under `policy` at Unix time `at`.
pub async fn verify_bundle(
    base: &str,
    bundle: &Bundle,
    policy: &Policy,
    at: u64,
) -> Result<Verification, ClientError> {
    let options = Options {
        policy: evidence::verify::Policy {
            accepted_statuses: policy.accepted_statuses.clone(),
            allow_simulated: policy.allow_simulated,
        },
        at,
        collateral: policy.collateral.clone(),
        rpc_url: policy.rpc_url.clone(),
        dns_server: policy.dns_server,
        online: true,
        domain: policy.caa_domain.clone(),
        skip: policy.skip.clone(),
        strict: false,
        allow_stale: policy.allow_stale,
        os_policy: policy.os_measurements.clone(),
        os_image: None,
        allow_unpinned_os: policy.allow_unpinned_os,
        gateway: false,
    };
    let mut report = check::run(bundle, &options).await;
    // A stale quote the policy accepts is reported as `freshness` skipped on request.
    let mut allowed_skips = policy.skip.clone();
    if policy.allow_stale {
        allowed_skips.push("freshness".to_owned());
    }
    require_every_check(&mut report, &allowed_skips);
    if !report.ok {
        return Err(ClientError::NotVerified {
            report: Box::new(report),
        });
    }
    let info = bundle.info.as_ref();
    let field = |name: &str| {
        info.and_then(|i| i.get(name))
            .and_then(|v| v.as_str())
            .map(|s| s.trim_start_matches("0x").to_ascii_lowercase())
    };
    let compose_hash = field("compose_hash").unwrap_or_default();
    if !policy.expects(&compose_hash) {
        return Err(ClientError::UnexpectedComposeHash {
            actual: compose_hash,
            expected: policy.compose_hashes.clone(),
        });
    }
    // The attested leaf: the certificate file that sha256sum.txt covers (the report-data
    // check passed) and that the server presented (tls-certificate passed).
    let pins: BTreeSet<LeafHash> = cert_file_name(&bundle.evidence_files)
        .and_then(|name| first_pem_cert(&bundle.evidence_files[name]))
        .map(|der| leaf_hash(&der))
        .into_iter()
        .collect();
    if pins.is_empty() {
        return Err(ClientError::NotVerified {
            report: Box::new(report),
        });
    }
    let simulated = report.tcb_status.as_deref() == Some("Simulated");
    let next_keys: BTreeSet<KeyHash> = bundle.announced_next_key().into_iter().collect();
    Ok(Verification {
        announced_next_key: next_keys.first().map(hex::encode),
        next_keys,
        url: base.to_owned(),
        verified_at: at,
        compose_hash,
        app_id: field("app_id"),
        pinned_leaves: pins.iter().map(hex::encode).collect(),
        simulated,
        report,
        pins,
    })
}

/// A check that was skipped without the caller asking for it is a failure: the client
/// never takes "could not check" for "checked".
fn require_every_check(report: &mut Report, allowed_skips: &[String]) {
    for c in &mut report.checks {
        if c.status == Status::Skipped && !allowed_skips.iter().any(|s| s == c.id) {
            c.status = Status::Fail;
            c.detail = format!(
                "{} (the policy requires this check: give its input, or skip it by name)",
                c.detail
            );
        }
    }
    report.ok = report.checks.iter().all(|c| c.status != Status::Fail);
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use evidence::check::CheckResult;

    fn report(statuses: &[(&'static str, Status)]) -> Report {
        Report {
            ok: true,
            checks: statuses
                .iter()
                .map(|(id, status)| CheckResult {
                    id,
                    title: "",
                    status: *status,
                    detail: "why".to_owned(),
                })
                .collect(),
            tcb_status: None,
            advisory_ids: Vec::new(),
            os: None,
            key_provider: None,
            sbom: None,
        }
    }

    #[test]
    fn an_unrequested_skip_fails_the_verification() {
        let mut r = report(&[("quote", Status::Pass), ("governance", Status::Skipped)]);
        require_every_check(&mut r, &[]);
        assert!(!r.ok);
        assert_eq!(r.failed(), vec!["governance"]);

        let mut r = report(&[("quote", Status::Pass), ("governance", Status::Skipped)]);
        require_every_check(&mut r, &["governance".to_owned()]);
        assert!(r.ok);
    }
}
