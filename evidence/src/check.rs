//! The verifier's checks over a [`Bundle`]: the spec's six rules, DCAP quote verification,
//! the RTMR replay against the quote and the compose-hash event against `/info`.
//!
//! Every check yields one [`CheckResult`] (pass, fail, or skipped with the reason); a check
//! is skipped only when its input was not asked for (no RPC URL, no DNS, no TLS leaf in an
//! offline bundle) or the user skipped it by name. Missing or malformed evidence is a
//! failure, never a skip.
//!
//! A check that cannot apply to the deployment at all is **N/A**: today only `acme-caa`
//! on a development stack serving a self-signed certificate with no ACME account (there
//! is no CA account for a CAA record to name). N/A counts as a failure unless the
//! caller allowed simulated quotes *and* the quote is simulated, so a real deployment can
//! never pass with an N/A; on the development stack the report then says it is verified
//! for development only, and which checks did not apply and why.
//!
//! `freshness` establishes that the evidence quote was made for this verification: an
//! online fetch sends a random nonce (`quote.json?nonce=`), and the quote's report data
//! must end with it. A quote without it (a relay replaying an old one, or a deployment
//! that ignores the nonce) fails, unless the caller allowed stale quotes
//! ([`Options::allow_stale`]), which reports the check as skipped on request. Offline, a
//! saved bundle cannot show that its quote is fresh now: the check is skipped as not
//! applicable (and `report-data` accepts the nonce the bundle was saved with).

use std::net::SocketAddr;

use dcap_qvl::QuoteCollateralV3;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::bundle::{Bundle, cert_file_name, first_pem_cert, parse_sum_line};
use crate::collateral::CollateralSource;
use crate::event_log::EventLog;
use crate::quote::{TdxQuote, decode_quote_text};
use crate::verify::{Policy, VerifyError, verify_quote};

/// Stable names of the checks, in report order.
pub const CHECKS: [(&str, &str); 10] = [
    (
        "compose-hash",
        "rule 1: sha256(tcb_info.app_compose) = compose_hash",
    ),
    ("images-pinned", "rule 2: every image pinned by @sha256:"),
    (
        "report-data",
        "rule 3: report_data = sha256(sha256sum.txt), zero-padded",
    ),
    ("tls-certificate", "rule 4: TLS leaf = evidence certificate"),
    (
        "acme-caa",
        "rule 5: ACME account URI in the domain's CAA accounturi",
    ),
    (
        "governance",
        "rule 6: allowedComposeHashes(compose_hash) on 0x‖app_id",
    ),
    ("quote", "DCAP verification of the quotes"),
    ("rtmr-replay", "event log replays to the quote's RTMR0-3"),
    (
        "compose-hash-event",
        "compose-hash event (before system-ready) = /info",
    ),
    (
        "freshness",
        "evidence quote made for this verification: report_data ends with the nonce sent",
    ),
];

/// A check's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
    Skipped,
    /// The check cannot apply to this deployment (a self-signed development stack);
    /// only ever reported for a simulated quote with simulated quotes allowed, otherwise
    /// it is a [`Status::Fail`].
    #[serde(rename = "n/a")]
    NotApplicable,
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    pub id: &'static str,
    pub title: &'static str,
    pub status: Status,
    pub detail: String,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub ok: bool,
    pub checks: Vec<CheckResult>,
    /// TCB status of the attestation quote, when it was verified.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcb_status: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub advisory_ids: Vec<String>,
}

impl Report {
    /// The result of check `id`.
    pub fn get(&self, id: &str) -> Option<&CheckResult> {
        self.checks.iter().find(|c| c.id == id)
    }

    /// Names of the failed checks.
    pub fn failed(&self) -> Vec<&'static str> {
        self.checks
            .iter()
            .filter(|c| c.status == Status::Fail)
            .map(|c| c.id)
            .collect()
    }

    /// Human-readable, one line per check.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for c in &self.checks {
            let tag = match c.status {
                Status::Pass => "PASS",
                Status::Fail => "FAIL",
                Status::Skipped => "SKIP",
                Status::NotApplicable => "N/A ",
            };
            s.push_str(&format!("{tag}  {:<19} {}\n", c.id, c.detail));
        }
        let not_applicable = self.not_applicable();
        if !self.ok {
            s.push_str("NOT verified: failed checks: ");
            s.push_str(&self.failed().join(", "));
            s.push('\n');
        } else if not_applicable.is_empty() {
            s.push_str("verified: every required check passed\n");
        } else {
            s.push_str(&format!(
                "verified for DEVELOPMENT only (simulated quote, NOT confidential); checks that cannot apply here: {}\n",
                not_applicable.join(", ")
            ));
        }
        s
    }

    /// Names of the checks that could not apply (development stack only).
    pub fn not_applicable(&self) -> Vec<&'static str> {
        self.checks
            .iter()
            .filter(|c| c.status == Status::NotApplicable)
            .map(|c| c.id)
            .collect()
    }
}

/// How to verify.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub policy: Policy,
    /// Unix time the quotes and collateral are judged at.
    pub at: u64,
    /// Collateral (file or PCCS); falls back to the bundle's `collateral.json`.
    pub collateral: Option<CollateralSource>,
    /// JSON-RPC URL of the settlement chain (rule 6); skipped when absent.
    pub rpc_url: Option<String>,
    /// DNS server for CAA (rule 5); when absent, rule 5 uses the system resolver online and
    /// is skipped offline.
    pub dns_server: Option<SocketAddr>,
    /// Whether the bundle was just fetched (online): enables the system resolver for CAA.
    pub online: bool,
    /// Overrides the bundle's domain (rule 5).
    pub domain: Option<String>,
    /// Check names to skip.
    pub skip: Vec<String>,
    /// Treat skipped checks as failures.
    pub strict: bool,
    /// Accept an evidence quote that does not carry the nonce this verification sent
    /// (`freshness` is then skipped on request instead of failing): for deployments that
    /// do not answer `?nonce=`. A relay can replay such a quote for as long as it likes.
    pub allow_stale: bool,
}

type Outcome = Result<String, String>;

enum Ran {
    Done(Outcome),
    Skip(String),
    /// The check cannot apply to this deployment (see the module documentation).
    NotApplicable(String),
}

fn pass(s: impl Into<String>) -> Ran {
    Ran::Done(Ok(s.into()))
}
fn fail(s: impl Into<String>) -> Ran {
    Ran::Done(Err(s.into()))
}

/// Runs every check over `bundle`.
pub async fn run(bundle: &Bundle, opts: &Options) -> Report {
    let http = crate::bundle::http_client(None).ok();
    let mut ran_all = Vec::new();
    let mut tcb_status = None;
    let mut advisory_ids = Vec::new();
    for (id, title) in CHECKS {
        let ran = if opts.skip.iter().any(|s| s == id) {
            Ran::Skip("skipped on request".to_owned())
        } else {
            match id {
                "compose-hash" => check_compose_hash(bundle),
                "images-pinned" => check_images_pinned(bundle),
                "report-data" => check_report_data(bundle),
                "tls-certificate" => check_tls_certificate(bundle),
                "acme-caa" => check_acme_caa(bundle, opts).await,
                "governance" => check_governance(bundle, opts).await,
                "quote" => {
                    let (ran, status) = check_quote(bundle, opts, http.as_ref()).await;
                    if let Some((s, a)) = status {
                        tcb_status = Some(s);
                        advisory_ids = a;
                    }
                    ran
                }
                "rtmr-replay" => check_rtmr_replay(bundle),
                "freshness" => check_freshness(bundle, opts),
                _ => check_compose_hash_event(bundle),
            }
        };
        ran_all.push((id, title, ran));
    }
    // N/A is tolerated only for a simulated quote the caller allowed.
    let development = opts.policy.allow_simulated && tcb_status.as_deref() == Some("Simulated");
    let checks: Vec<CheckResult> = ran_all
        .into_iter()
        .map(|(id, title, ran)| {
            let (status, detail) = resolve(ran, development, opts.strict);
            CheckResult {
                id,
                title,
                status,
                detail,
            }
        })
        .collect();
    Report {
        ok: checks.iter().all(|c| c.status != Status::Fail),
        checks,
        tcb_status,
        advisory_ids,
    }
}

/// A check's status: `development` (a simulated quote the caller allowed) is the only
/// case where N/A stands; `strict` makes a skip a failure.
fn resolve(ran: Ran, development: bool, strict: bool) -> (Status, String) {
    match ran {
        Ran::Done(Ok(d)) => (Status::Pass, d),
        Ran::Done(Err(d)) => (Status::Fail, d),
        Ran::Skip(d) if strict => (Status::Fail, format!("{d} (strict)")),
        Ran::Skip(d) => (Status::Skipped, d),
        Ran::NotApplicable(d) if development => (Status::NotApplicable, d),
        Ran::NotApplicable(d) => (
            Status::Fail,
            format!(
                "{d} (a check that cannot apply is a failure unless the quote is simulated and simulated quotes are allowed)"
            ),
        ),
    }
}

/// Whether the deployment is a development stack serving a self-signed certificate with
/// no ACME account: no `acme-account.json`, and the published leaf is its own issuer.
fn self_signed_without_acme(b: &Bundle) -> bool {
    if b.evidence_files.contains_key("acme-account.json") {
        return false;
    }
    let Some(der) =
        cert_file_name(&b.evidence_files).and_then(|name| first_pem_cert(&b.evidence_files[name]))
    else {
        return false;
    };
    x509_parser::parse_x509_certificate(&der)
        .map(|(_, cert)| cert.issuer().as_raw() == cert.subject().as_raw())
        .unwrap_or(false)
}

/// Why the ACME checks cannot apply to a self-signed development stack.
const SELF_SIGNED_WHY: &str = "the served certificate is self-signed and the deployment publishes no ACME account (a development stack): there is no CA account for a CAA record to name; `scripts/dev --acme` runs the development stack with a local ACME CA, where this check runs";

fn strip0x(s: &str) -> &str {
    s.trim().trim_start_matches("0x")
}

fn info(b: &Bundle) -> Result<&serde_json::Value, String> {
    b.info
        .as_ref()
        .ok_or_else(|| "no /info response".to_owned())
}

fn info_compose_hash(b: &Bundle) -> Result<String, String> {
    info(b)?
        .get("compose_hash")
        .and_then(|v| v.as_str())
        .map(|s| strip0x(s).to_ascii_lowercase())
        .ok_or_else(|| "/info has no compose_hash".to_owned())
}

fn tcb_info(b: &Bundle) -> Result<serde_json::Value, String> {
    let t = info(b)?
        .get("tcb_info")
        .ok_or_else(|| "/info has no tcb_info".to_owned())?;
    match t {
        // dstack serves tcb_info as a string of JSON; accept both.
        serde_json::Value::String(s) => {
            serde_json::from_str(s).map_err(|e| format!("/info tcb_info: {e}"))
        }
        v => Ok(v.clone()),
    }
}

fn app_compose(b: &Bundle) -> Result<String, String> {
    tcb_info(b)?
        .get("app_compose")
        .and_then(|v| v.as_str())
        .map(str::to_owned)
        .ok_or_else(|| "/info has no tcb_info.app_compose".to_owned())
}

fn check_compose_hash(b: &Bundle) -> Ran {
    let run = || -> Outcome {
        let compose = app_compose(b)?;
        let claimed = info_compose_hash(b)?;
        let actual = hex::encode(Sha256::digest(compose.as_bytes()));
        if actual == claimed {
            Ok(format!("sha256(app_compose) = {actual}"))
        } else {
            Err(format!(
                "sha256(app_compose) = {actual}, but /info says compose_hash = {claimed}"
            ))
        }
    };
    Ran::Done(run())
}

/// Every `image:` of the docker-compose file, as written.
pub fn compose_images(docker_compose: &str) -> Vec<String> {
    docker_compose
        .lines()
        .filter_map(|l| {
            let t = l.trim_start().trim_start_matches("- ").trim_start();
            let v = t.strip_prefix("image:")?;
            let v = v.split(" #").next().unwrap_or(v).trim();
            Some(v.trim_matches(|c| c == '"' || c == '\'').to_owned())
        })
        .collect()
}

/// `name@sha256:<64 hex>`.
pub fn image_is_pinned(image: &str) -> bool {
    match image.rsplit_once("@sha256:") {
        Some((name, digest)) => {
            !name.is_empty()
                && digest.len() == 64
                && digest
                    .bytes()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        }
        None => false,
    }
}

fn check_images_pinned(b: &Bundle) -> Ran {
    let run = || -> Outcome {
        let compose = app_compose(b)?;
        let v: serde_json::Value =
            serde_json::from_str(&compose).map_err(|e| format!("app_compose is not JSON: {e}"))?;
        let dc = v
            .get("docker_compose_file")
            .and_then(|d| d.as_str())
            .ok_or_else(|| "app_compose has no docker_compose_file".to_owned())?;
        let images = compose_images(dc);
        if images.is_empty() {
            return Err("docker_compose_file names no image".to_owned());
        }
        let unpinned: Vec<&String> = images.iter().filter(|i| !image_is_pinned(i)).collect();
        if unpinned.is_empty() {
            Ok(format!("{} image(s), all pinned by digest", images.len()))
        } else {
            Err(format!(
                "not pinned by @sha256: {}",
                unpinned
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
    };
    Ran::Done(run())
}

fn evidence_quote(b: &Bundle) -> Result<(serde_json::Value, Vec<u8>), String> {
    let raw = b
        .evidence_files
        .get("quote.json")
        .ok_or_else(|| "no evidences/quote.json".to_owned())?;
    let v: serde_json::Value =
        serde_json::from_slice(raw).map_err(|e| format!("evidences/quote.json: {e}"))?;
    let q = v
        .get("quote")
        .and_then(|q| q.as_str())
        .ok_or_else(|| "evidences/quote.json has no quote".to_owned())?;
    let bytes = decode_quote_text(q)?;
    Ok((v, bytes))
}

fn check_report_data(b: &Bundle) -> Ran {
    let run = || -> Outcome {
        let sums = b
            .evidence_files
            .get("sha256sum.txt")
            .ok_or_else(|| "no evidences/sha256sum.txt".to_owned())?;
        let expected = hex::encode(Sha256::digest(sums));
        let (v, bytes) = evidence_quote(b)?;
        let claimed = v
            .get("report_data")
            .and_then(|r| r.as_str())
            .map(|s| strip0x(s).to_ascii_lowercase())
            .ok_or_else(|| "evidences/quote.json has no report_data".to_owned())?;
        if claimed.get(..64) != Some(expected.as_str()) {
            return Err(format!(
                "report_data starts {}, sha256(sha256sum.txt) = {expected}",
                claimed.get(..64).unwrap_or(&claimed)
            ));
        }
        // The second half is zeros (the specification's form) or the nonce this bundle
        // was fetched with (a fresh quote; `freshness` judges whether it is).
        let zeros = claimed.len() == 128 && claimed[64..].bytes().all(|c| c == b'0');
        let nonced = b
            .nonce
            .is_some_and(|n| claimed.len() == 128 && claimed[64..] == hex::encode(n));
        if !zeros && !nonced {
            return Err(
                "report_data is not the hash zero-padded to 64 bytes, nor followed by the nonce sent"
                    .to_owned(),
            );
        }
        let quote = TdxQuote::parse(&bytes).map_err(|e| format!("evidence quote: {e}"))?;
        if hex::encode(quote.report.report_data) != claimed {
            return Err("the evidence quote's own report_data differs from quote.json's".into());
        }
        // The checksums must cover the certificate and the ACME account, and match them.
        let mut covered = Vec::new();
        for line in String::from_utf8_lossy(sums).lines() {
            let Some((hash, name)) = parse_sum_line(line) else {
                continue;
            };
            if let Some(content) = b.evidence_files.get(name) {
                if hex::encode(Sha256::digest(content)) != hash.to_ascii_lowercase() {
                    return Err(format!("sha256sum.txt: {name} does not match its checksum"));
                }
                covered.push(name.to_owned());
            }
        }
        let account = (!self_signed_without_acme(b)).then_some("acme-account.json");
        for needed in [cert_file_name(&b.evidence_files), account]
            .into_iter()
            .flatten()
        {
            if !covered.iter().any(|c| c == needed) {
                return Err(format!("sha256sum.txt does not cover {needed}"));
            }
        }
        Ok(format!(
            "report_data = sha256(sha256sum.txt) = {expected}…; it covers {}",
            covered.join(", ")
        ))
    };
    Ran::Done(run())
}

/// Whether the evidence quote was made for this verification (see the module docs).
fn check_freshness(b: &Bundle, opts: &Options) -> Ran {
    let carried = evidence_quote(b).and_then(|(_, bytes)| {
        TdxQuote::parse(&bytes)
            .map(|q| q.report.report_data)
            .map_err(|e| format!("evidence quote: {e}"))
    });
    let Some(nonce) = b.nonce.filter(|_| opts.online) else {
        let saved = match (b.nonce, &carried) {
            (Some(n), Ok(rd)) if rd[32..] == n => format!(
                "; it was fetched with nonce {} and carries it",
                hex::encode(n)
            ),
            _ => String::new(),
        };
        return Ran::Skip(format!(
            "not applicable offline: a saved bundle cannot show that its quote is fresh now{saved}"
        ));
    };
    let report_data = match carried {
        Ok(rd) => rd,
        Err(e) => return fail(e),
    };
    if report_data[32..] == nonce {
        return pass(format!(
            "the evidence quote carries the nonce this verification sent ({})",
            hex::encode(nonce)
        ));
    }
    let why = if report_data[32..].iter().all(|&x| x == 0) {
        "the evidence quote carries no nonce (an old or replayed quote)".to_owned()
    } else {
        format!(
            "the evidence quote carries another nonce ({}), not the one sent ({}): a replayed quote",
            hex::encode(&report_data[32..]),
            hex::encode(nonce)
        )
    };
    if opts.allow_stale {
        Ran::Skip(format!(
            "stale quote accepted on request (--allow-stale): {why}"
        ))
    } else {
        fail(format!("{why}; pass --allow-stale to accept a stale quote"))
    }
}

fn check_tls_certificate(b: &Bundle) -> Ran {
    let Some(leaf) = &b.tls_leaf_der else {
        return Ran::Skip("no TLS leaf certificate (offline bundle without tls-leaf)".into());
    };
    let run = || -> Outcome {
        let name = cert_file_name(&b.evidence_files)
            .ok_or_else(|| "no evidences/cert-*.pem".to_owned())?;
        let der = first_pem_cert(&b.evidence_files[name])
            .ok_or_else(|| format!("{name} holds no PEM certificate"))?;
        let served = hex::encode(Sha256::digest(leaf));
        let published = hex::encode(Sha256::digest(&der));
        if served == published {
            Ok(format!("served leaf = {name}, sha256 {served}"))
        } else {
            Err(format!(
                "served leaf sha256 {served} != {name} sha256 {published}"
            ))
        }
    };
    Ran::Done(run())
}

async fn check_acme_caa(b: &Bundle, opts: &Options) -> Ran {
    if self_signed_without_acme(b) {
        return Ran::NotApplicable(SELF_SIGNED_WHY.to_owned());
    }
    let Some(domain) = opts.domain.clone().or_else(|| b.domain.clone()) else {
        return Ran::Skip("no domain (give --domain or verify online)".into());
    };
    if opts.dns_server.is_none() && !opts.online {
        return Ran::Skip("offline and no --dns server given".into());
    }
    let account = match b
        .evidence_files
        .get("acme-account.json")
        .ok_or_else(|| "no evidences/acme-account.json".to_owned())
        .and_then(|raw| {
            serde_json::from_slice::<serde_json::Value>(raw)
                .map_err(|e| format!("acme-account.json: {e}"))
        })
        .and_then(|v| {
            v.get("uri")
                .or_else(|| v.get("account_uri"))
                .and_then(|u| u.as_str())
                .map(str::to_owned)
                .ok_or_else(|| "acme-account.json has no uri / account_uri".to_owned())
        }) {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    match crate::caa::account_uris(&domain, opts.dns_server).await {
        Err(e) => fail(format!("CAA lookup for {domain}: {e}")),
        Ok((at, uris)) => {
            if uris.iter().any(|u| u == &account) {
                pass(format!("{account} is an accounturi of CAA at {at}"))
            } else if uris.is_empty() {
                fail(format!(
                    "no CAA accounturi governs {domain} (looked up to {at})"
                ))
            } else {
                fail(format!(
                    "{account} is not among CAA accounturi at {at}: {}",
                    uris.join(", ")
                ))
            }
        }
    }
}

async fn check_governance(b: &Bundle, opts: &Options) -> Ran {
    let Some(rpc) = &opts.rpc_url else {
        return Ran::Skip("no --rpc-url given".into());
    };
    let ids = (|| -> Result<(String, String), String> {
        let app_id = info(b)?
            .get("app_id")
            .and_then(|v| v.as_str())
            .map(|s| strip0x(s).to_owned())
            .ok_or_else(|| "/info has no app_id".to_owned())?;
        Ok((app_id, info_compose_hash(b)?))
    })();
    let (app_id, compose_hash) = match ids {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    match crate::governance::allowed(rpc, &app_id, &compose_hash).await {
        Ok(true) => pass(format!(
            "0x{app_id}.allowedComposeHashes(0x{compose_hash}) = true"
        )),
        Ok(false) => fail(format!(
            "0x{app_id}.allowedComposeHashes(0x{compose_hash}) = false"
        )),
        Err(e) => fail(e),
    }
}

fn attestation_quote(b: &Bundle) -> Result<Vec<u8>, String> {
    let a = b
        .attestation
        .as_ref()
        .ok_or_else(|| "no /attestation response".to_owned())?;
    let q = a
        .get("quote")
        .and_then(|q| q.as_str())
        .ok_or_else(|| "/attestation has no quote".to_owned())?;
    decode_quote_text(q)
}

type QuoteStatus = Option<(String, Vec<String>)>;

async fn check_quote(
    b: &Bundle,
    opts: &Options,
    http: Option<&reqwest::Client>,
) -> (Ran, QuoteStatus) {
    let quote = match attestation_quote(b) {
        Ok(q) => q,
        Err(e) => return (fail(e), None),
    };
    let simulated = TdxQuote::parse(&quote)
        .map(|q| q.is_simulated())
        .unwrap_or(false);
    let collateral: Option<QuoteCollateralV3> = if simulated {
        None
    } else {
        let got = match (&opts.collateral, &b.collateral_json, http) {
            (Some(src), _, Some(http)) => crate::collateral::obtain(src, &quote, http)
                .await
                .map_err(|e| e.to_string()),
            (Some(_), _, None) => Err("no HTTP client".to_owned()),
            (None, Some(json), _) => {
                crate::collateral::parse(json).map_err(|e| format!("collateral.json: {e}"))
            }
            (None, None, _) => Err(VerifyError::NoCollateral.to_string()),
        };
        match got {
            Ok(c) => Some(c),
            Err(e) => return (fail(e), None),
        }
    };
    let first = match verify_quote(&quote, collateral.as_ref(), opts.at, &opts.policy) {
        Ok(v) => v,
        Err(VerifyError::StatusRefused {
            status,
            accepted,
            advisories,
            verdict,
        }) => {
            let s = Some((verdict.status.clone(), verdict.advisory_ids.clone()));
            return (
                fail(format!(
                    "attestation quote: TCB status {status} not accepted (policy: {accepted}){advisories}"
                )),
                s,
            );
        }
        Err(e @ VerifyError::TcbBelowAllLevels(_)) => {
            return (
                fail(format!("attestation quote: {e}")),
                Some(("OutOfDate".to_owned(), Vec::new())),
            );
        }
        Err(e) => return (fail(format!("attestation quote: {e}")), None),
    };
    let status = Some((first.status.clone(), first.advisory_ids.clone()));
    let adv = if first.advisory_ids.is_empty() {
        String::new()
    } else {
        format!(", advisories {}", first.advisory_ids.join(", "))
    };
    let mut detail = format!(
        "attestation quote {}{adv} at {}{}",
        first.status,
        opts.at,
        if first.simulated {
            " (SIMULATED: NOT confidential)"
        } else {
            ""
        }
    );
    // The evidence quote binds sha256sum.txt; it must be just as genuine, from the same TD.
    if b.evidence_files.contains_key("quote.json") {
        let ev = evidence_quote(b).and_then(|(_, bytes)| {
            verify_quote(&bytes, collateral.as_ref(), opts.at, &opts.policy)
                .map_err(|e| format!("evidence quote: {e}"))
        });
        match ev {
            Err(e) => return (fail(e), status),
            Ok(v) => {
                if v.report.mr_td != first.report.mr_td
                    || v.report.mr_config_id != first.report.mr_config_id
                    || v.report.rtmr0 != first.report.rtmr0
                {
                    return (
                        fail(
                            "evidence quote comes from a different TD (mr_td/mr_config_id/rtmr0 differ)",
                        ),
                        status,
                    );
                }
                detail.push_str(&format!("; evidence quote {}, same TD", v.status));
            }
        }
    }
    (pass(detail), status)
}

fn event_log(b: &Bundle) -> Result<EventLog, String> {
    let from_attestation = b.attestation.as_ref().and_then(|a| a.get("event_log"));
    let value = match from_attestation {
        Some(v) => v.clone(),
        None => tcb_info(b)?
            .get("event_log")
            .cloned()
            .ok_or_else(|| "no event log in /attestation or /info".to_owned())?,
    };
    EventLog::from_value(&value).map_err(|e| format!("event log: {e}"))
}

fn check_rtmr_replay(b: &Bundle) -> Ran {
    let run = || -> Outcome {
        let quote = TdxQuote::parse(&attestation_quote(b)?).map_err(|e| e.to_string())?;
        let log = event_log(b)?;
        let replayed = log.replay();
        let mut bad = Vec::new();
        for (i, r) in replayed.iter().enumerate() {
            if quote.report.rtmr(i) != Some(r) {
                bad.push(format!("RTMR{i}"));
            }
        }
        if bad.is_empty() {
            Ok(format!(
                "{} events replay to RTMR0-3 of the quote",
                log.events.len()
            ))
        } else {
            Err(format!(
                "replay of the event log differs from the quote in {}",
                bad.join(", ")
            ))
        }
    };
    Ran::Done(run())
}

fn check_compose_hash_event(b: &Bundle) -> Ran {
    let run = || -> Outcome {
        let log = event_log(b)?;
        let id = log.identity().map_err(|e| e.to_string())?;
        let event = id
            .compose_hash
            .ok_or_else(|| "no compose-hash event before system-ready".to_owned())?;
        let claimed = info_compose_hash(b)?;
        if event != claimed {
            return Err(format!(
                "compose-hash event {event} != /info compose_hash {claimed}"
            ));
        }
        let mut notes = vec![format!("compose-hash event = /info = {event}")];
        if let (Some(ev_app), Some(info_app)) =
            (id.app_id, info(b)?.get("app_id").and_then(|v| v.as_str()))
        {
            if ev_app != strip0x(info_app).to_ascii_lowercase() {
                return Err(format!("app-id event {ev_app} != /info app_id {info_app}"));
            }
            notes.push("app-id matches".to_owned());
        }
        // dstack also puts the compose hash in mr_config_id (0x01 ‖ hash ‖ 0…).
        if let Ok(q) =
            attestation_quote(b).and_then(|q| TdxQuote::parse(&q).map_err(|e| e.to_string()))
            && q.report.mr_config_id[0] == 1
        {
            if hex::encode(&q.report.mr_config_id[1..33]) != claimed {
                return Err("quote's mr_config_id names another compose hash".to_owned());
            }
            notes.push("mr_config_id matches".to_owned());
        }
        if !id.system_ready {
            notes.push("(no system-ready event yet)".to_owned());
        }
        Ok(notes.join("; "))
    };
    Ran::Done(run())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A genuine quote (or simulated quotes not allowed): an N/A is a failure.
    #[test]
    fn not_applicable_stands_only_on_an_allowed_simulated_stack() {
        let na = || Ran::NotApplicable("why".to_owned());
        assert_eq!(resolve(na(), true, false).0, Status::NotApplicable);
        assert_eq!(resolve(na(), true, true).0, Status::NotApplicable);
        let (status, detail) = resolve(na(), false, false);
        assert_eq!(status, Status::Fail);
        assert!(
            detail.starts_with("why") && detail.contains("cannot apply"),
            "{detail}"
        );
        assert_eq!(resolve(Ran::Skip("s".into()), false, true).0, Status::Fail);
    }
}
