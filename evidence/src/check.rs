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
//!
//! `gateway-route` establishes that dstack-gateway sends the domain's connections to the
//! attested app: where the attested app_compose enables the gateway (`gateway_enabled`),
//! or the caller requires it ([`Options::gateway`]), the domain's app-address TXT record
//! (`_dstack-app-address.<domain>`, read as [`crate::gateway`] describes) must name the
//! attested app id (or instance id) and a port the attested compose publishes; a
//! deployment whose app_compose does not enable the gateway passes with nothing to check
//! (the gateway cannot route to it). It is looked up with the DNS options of `acme-caa`.
//!
//! `os-image` establishes which operating system produced the quote: its MRTD and RTMR0–2
//! (firmware, kernel, command line, initrd) are recomputed from an OS image
//! ([`Options::os_image`]) or looked up in a policy file of accepted measurements
//! ([`Options::os_policy`]). Registers neither source pins leave the OS *unpinned*: a
//! failure unless the caller accepts it ([`Options::allow_unpinned_os`]), then reported
//! N/A, and the summary says the OS was not verified. A simulated quote has no OS
//! measurement at all: there the check is N/A under the development rule above.
//!
//! From an OS image, RTMR0 is recomputed only in part ([`crate::rtmr0`]): the event log's
//! RTMR0 events must replay to the quote's and equal the firmware's (TD HOB for the
//! memory size, firmware volume, secure-boot variables, separator, boot order) — any
//! difference fails the check — but QEMU's three ACPI table events are taken on trust
//! from the log (reported in [`OsReport::rtmr0`]). The tables carry AML code the guest
//! kernel runs, so RTMR0 stays *unpinned* unless a policy entry pins it.

use std::net::SocketAddr;
use std::sync::Arc;

use dcap_qvl::QuoteCollateralV3;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::bundle::{Bundle, cert_file_name, first_pem_cert, parse_sum_line};
use crate::collateral::{CollateralError, CollateralSource};
use crate::event_log::{EventLog, EventLogError};
use crate::os_image::{KeyProvider, OsImage, OsImageError, OsPolicy, VmConfig, VmShape};
use crate::quote::{QuoteParseError, QuoteTextError, TdxQuote, decode_quote_text};
use crate::rtmr0::{AcpiDigests, ExpectedRtmr0, Rtmr0Error, Rtmr0Event, TdHobLayout};
use crate::verify::{Policy, VerifyError, verify_quote};

/// Stable names of the checks, in report order.
pub const CHECKS: [(&str, &str); 12] = [
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
        "os-image",
        "MRTD and RTMR0-2 (firmware, kernel, cmdline, initrd) = a pinned OS",
    ),
    (
        "compose-hash-event",
        "compose-hash event (before system-ready) = /info",
    ),
    (
        "freshness",
        "evidence quote made for this verification: report_data ends with the nonce sent",
    ),
    (
        "gateway-route",
        "dstack-gateway routes the domain (_dstack-app-address TXT) to this app, on a port its compose publishes",
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

/// The whole report. (`Default`: no check run, not ok.)
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub ok: bool,
    pub checks: Vec<CheckResult>,
    /// TCB status of the attestation quote, when it was verified.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcb_status: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub advisory_ids: Vec<String>,
    /// What the `os-image` check found out about the operating system.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub os: Option<OsReport>,
    /// The key provider the event log records before `system-ready` (`key-provider`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_provider: Option<KeyProvider>,
    /// The SBOM of the image's binaries the deployment lists in its evidence files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sbom: Option<SbomReport>,
}

/// The evidence file carrying the SBOM of the image's binaries (the appliance reads it
/// from its image, where `image-build` put it).
pub const SBOM_FILE: &str = "sbom.json";

/// The SBOM a deployment lists: `/evidences/sbom.json`, named with its checksum in
/// `sha256sum.txt`. The `report-data` check binds that listing to the quote, and the
/// image that carries the file is the one the measured compose pins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SbomReport {
    /// `sha256:<hex>` of the file.
    pub digest: String,
    /// The binaries it describes and how many crates in all (an appliance-sbom/1
    /// document; empty and 0 for another format).
    pub binaries: Vec<String>,
    pub packages: usize,
}

impl SbomReport {
    /// The SBOM of `bundle`, if `sha256sum.txt` lists one whose checksum matches the file.
    pub fn of(bundle: &Bundle) -> Option<Self> {
        let file = bundle.evidence_files.get(SBOM_FILE)?;
        let sums = bundle.evidence_files.get("sha256sum.txt")?;
        let hash = hex::encode(Sha256::digest(file));
        let listed = String::from_utf8_lossy(sums).lines().any(|line| {
            parse_sum_line(line)
                .is_some_and(|(h, name)| name == SBOM_FILE && h.eq_ignore_ascii_case(&hash))
        });
        if !listed {
            return None;
        }
        let doc: Option<serde_json::Value> = serde_json::from_slice(file).ok();
        let doc =
            doc.filter(|d| d.get("format").and_then(|f| f.as_str()) == Some("appliance-sbom/1"));
        let names = |key: &str, field: &str| -> Vec<String> {
            doc.as_ref()
                .and_then(|d| d.get(key))
                .and_then(|v| v.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|e| e.get(field).and_then(|n| n.as_str()).map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        Some(Self {
            digest: format!("sha256:{hash}"),
            binaries: names("binaries", "name"),
            packages: names("packages", "name").len(),
        })
    }

    fn to_text(&self) -> String {
        let what = if self.binaries.is_empty() {
            "not an appliance-sbom/1 document".to_owned()
        } else {
            format!("{} crates for {}", self.packages, self.binaries.join(", "))
        };
        format!(
            "SBOM: {} (evidences/{SBOM_FILE}, listed in the quoted sha256sum.txt; {what})\n",
            self.digest
        )
    }
}

/// The operating system behind the quote, as far as the `os-image` check established it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OsReport {
    /// The image's hash (hex): the one the deployment names (`vm_config`, or `/info`
    /// `tcb_info`), or the matched policy entry's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub os_image_hash: Option<String>,
    /// The dstack OS version and whether it is a development image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_dev: Option<bool>,
    /// Where version and dev flag come from: the image's `metadata.json` (covered by
    /// `os_image_hash`), the policy file, or the host's image name in `vm_config` (not
    /// verified).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version_source: Option<String>,
    /// The VM shape `vm_config` states (or the matched policy entry's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vm_shape: Option<VmShape>,
    /// Registers recomputed from the OS image (`--os-image`).
    pub recomputed: Vec<&'static str>,
    /// Registers taken on trust from the policy file (`--os-measurements`).
    pub from_policy: Vec<&'static str>,
    /// Registers nothing pinned.
    pub unpinned: Vec<&'static str>,
    /// With `--os-image`: RTMR0's events recomputed from the image's firmware and the
    /// memory size, and the ACPI table digests taken on trust from the event log (RTMR0
    /// stays listed as unpinned unless a policy entry pins it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtmr0: Option<Rtmr0Report>,
}

/// How far `--os-image` established RTMR0: every event but QEMU's three ACPI table
/// events recomputed; those three as the event log gives them (hex), on trust.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rtmr0Report {
    /// The events recomputed and equal to the event log's, in measurement order.
    pub recomputed_events: Vec<&'static str>,
    /// Digest of etc/table-loader, from the event log.
    pub acpi_table_loader: String,
    /// Digest of etc/acpi/rsdp, from the event log.
    pub acpi_rsdp: String,
    /// Digest of etc/acpi/tables, from the event log.
    pub acpi_tables: String,
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
        if let Some(os) = &self.os {
            s.push_str(&os.to_text());
        }
        if let Some(kp) = &self.key_provider {
            s.push_str(&format!("key provider: {} {}\n", kp.name, kp.id));
        }
        match &self.sbom {
            Some(sbom) => s.push_str(&sbom.to_text()),
            None => s.push_str("SBOM: none listed in the evidence files\n"),
        }
        if let Some(status) = &self.tcb_status {
            let adv = if self.advisory_ids.is_empty() {
                "none".to_owned()
            } else {
                self.advisory_ids.join(", ")
            };
            s.push_str(&format!("TCB status: {status}; advisories: {adv}\n"));
        }
        let not_applicable = self.not_applicable();
        let development = self.tcb_status.as_deref() == Some("Simulated");
        if !self.ok {
            s.push_str("NOT verified: failed checks: ");
            s.push_str(&self.failed().join(", "));
            s.push('\n');
        } else if not_applicable.is_empty() {
            s.push_str("verified: every required check passed\n");
        } else if !development {
            // On a genuine quote only an unpinned OS accepted on request stays N/A.
            s.push_str("verified EXCEPT the operating system: MRTD and RTMR0-2 were NOT all pinned (accepted with --allow-unpinned-os), so any firmware, kernel, command line or initrd may have produced this quote\n");
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
    /// Accepted OS measurements (`--os-measurements`).
    pub os_policy: Option<OsPolicy>,
    /// An OS image to recompute MRTD, RTMR1, RTMR2 and RTMR0's non-ACPI events from
    /// (`--os-image`).
    pub os_image: Option<Arc<OsImage>>,
    /// Accept a quote whose OS measurements are not all pinned (`os-image` then N/A
    /// instead of failed): the report is then not a verification of the OS.
    pub allow_unpinned_os: bool,
    /// The deployment must be behind dstack-gateway (`--gateway`): `gateway-route` fails
    /// unless the attested app_compose enables the gateway and the domain routes to this
    /// app. Without it the check runs only when the app_compose enables the gateway.
    pub gateway: bool,
}

/// What a check found, before [`resolve`] decides its status: the detail of its report
/// line.
enum Ran {
    /// It ran and passed: what it established.
    Pass(String),
    /// It ran and failed: why.
    Fail(String),
    Skip(String),
    /// The check cannot apply to this deployment (see the module documentation).
    NotApplicable(String),
    /// Not all OS measurements are pinned: N/A if the caller accepts that, else a failure.
    Unpinned(String),
}

fn pass(s: impl Into<String>) -> Ran {
    Ran::Pass(s.into())
}
fn fail(why: impl std::fmt::Display) -> Ran {
    Ran::Fail(why.to_string())
}

impl Ran {
    /// A check that ran to the end: passed with its detail, or failed with why.
    fn done<E: std::fmt::Display>(outcome: Result<String, E>) -> Self {
        match outcome {
            Ok(detail) => pass(detail),
            Err(why) => fail(why),
        }
    }
}

/// Missing or malformed evidence: the check that needs it fails with this (never skips).
#[derive(Debug, thiserror::Error)]
enum EvidenceError {
    #[error("no /info response")]
    NoInfo,
    /// `/info` lacks a field (`compose_hash`, `app_id`, `tcb_info`, `tcb_info.app_compose`).
    #[error("/info has no {0}")]
    InfoField(&'static str),
    #[error("/info tcb_info: {0}")]
    TcbInfo(#[source] serde_json::Error),
    /// An evidence file the check needs is not published (named under /evidences/).
    #[error("no evidences/{0}")]
    NoFile(&'static str),
    #[error("evidences/quote.json: {0}")]
    QuoteJson(#[source] serde_json::Error),
    /// /evidences/quote.json lacks a field (`quote`, `report_data`).
    #[error("evidences/quote.json has no {0}")]
    QuoteJsonField(&'static str),
    /// The text of a quote (in `quote.json` or `/attestation`) is neither hex nor bytes.
    #[error(transparent)]
    QuoteText(#[from] QuoteTextError),
    #[error("evidence quote: {0}")]
    EvidenceQuote(#[source] QuoteParseError),
    #[error("attestation quote: {0}")]
    AttestationQuote(#[source] QuoteParseError),
    #[error("no /attestation response")]
    NoAttestation,
    #[error("/attestation has no quote")]
    AttestationNoQuote,
    #[error("no event log in /attestation or /info")]
    NoEventLog,
    #[error("event log: {0}")]
    EventLog(#[source] EventLogError),
    #[error("acme-account.json: {0}")]
    AcmeAccountJson(#[source] serde_json::Error),
    #[error("acme-account.json has no uri / account_uri")]
    AcmeAccountNoUri,
}

/// Runs every check over `bundle`.
pub async fn run(bundle: &Bundle, opts: &Options) -> Report {
    let http = crate::bundle::http_client(None).ok();
    let mut ran_all = Vec::new();
    let mut tcb_status = None;
    let mut advisory_ids = Vec::new();
    let mut os = None;
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
                "os-image" => {
                    let (ran, report) = check_os_image(bundle, opts);
                    os = report;
                    ran
                }
                "freshness" => check_freshness(bundle, opts),
                "gateway-route" => check_gateway_route(bundle, opts).await,
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
            let (status, detail) = resolve(ran, development, opts);
            CheckResult {
                id,
                title,
                status,
                detail,
            }
        })
        .collect();
    let key_provider = event_log(bundle)
        .ok()
        .and_then(|l| l.identity().ok())
        .and_then(|i| i.key_provider)
        .and_then(|p| KeyProvider::decode(&p));
    Report {
        ok: checks.iter().all(|c| c.status != Status::Fail),
        checks,
        tcb_status,
        advisory_ids,
        os,
        key_provider,
        sbom: SbomReport::of(bundle),
    }
}

/// A check's status: `development` (a simulated quote the caller allowed) is the only
/// case where N/A stands, beside an unpinned OS the caller accepts
/// ([`Options::allow_unpinned_os`]); `strict` makes a skip a failure.
fn resolve(ran: Ran, development: bool, opts: &Options) -> (Status, String) {
    let strict = opts.strict;
    match ran {
        Ran::Unpinned(d) if opts.allow_unpinned_os => (
            Status::NotApplicable,
            format!("{d} (accepted unpinned: --allow-unpinned-os)"),
        ),
        Ran::Unpinned(d) => (
            Status::Fail,
            format!(
                "{d}; pin the OS with --os-measurements FILE or --os-image DIR, or accept it unpinned with --allow-unpinned-os"
            ),
        ),
        Ran::Pass(d) => (Status::Pass, d),
        Ran::Fail(d) => (Status::Fail, d),
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

/// The digits of a hex value (at most one lowercase `0x`, as everywhere in the verifier).
fn strip0x(s: &str) -> &str {
    crate::os_image::hex_digits(s)
}

fn info(b: &Bundle) -> Result<&serde_json::Value, EvidenceError> {
    b.info.as_ref().ok_or(EvidenceError::NoInfo)
}

fn info_compose_hash(b: &Bundle) -> Result<String, EvidenceError> {
    info(b)?
        .get("compose_hash")
        .and_then(|v| v.as_str())
        .map(|s| strip0x(s).to_ascii_lowercase())
        .ok_or(EvidenceError::InfoField("compose_hash"))
}

fn tcb_info(b: &Bundle) -> Result<serde_json::Value, EvidenceError> {
    let t = info(b)?
        .get("tcb_info")
        .ok_or(EvidenceError::InfoField("tcb_info"))?;
    match t {
        // dstack serves tcb_info as a string of JSON; accept both.
        serde_json::Value::String(s) => serde_json::from_str(s).map_err(EvidenceError::TcbInfo),
        v => Ok(v.clone()),
    }
}

fn app_compose(b: &Bundle) -> Result<String, EvidenceError> {
    tcb_info(b)?
        .get("app_compose")
        .and_then(|v| v.as_str())
        .map(str::to_owned)
        .ok_or(EvidenceError::InfoField("tcb_info.app_compose"))
}

/// Why `compose-hash` failed.
#[derive(Debug, thiserror::Error)]
enum ComposeHashFailure {
    #[error(transparent)]
    Evidence(#[from] EvidenceError),
    #[error("sha256(app_compose) = {actual}, but /info says compose_hash = {claimed}")]
    Differs { actual: String, claimed: String },
}

fn check_compose_hash(b: &Bundle) -> Ran {
    let run = || -> Result<String, ComposeHashFailure> {
        let compose = app_compose(b)?;
        let claimed = info_compose_hash(b)?;
        let actual = hex::encode(Sha256::digest(compose.as_bytes()));
        if actual == claimed {
            Ok(format!("sha256(app_compose) = {actual}"))
        } else {
            Err(ComposeHashFailure::Differs { actual, claimed })
        }
    };
    Ran::done(run())
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

/// Why `images-pinned` failed.
#[derive(Debug, thiserror::Error)]
enum ImagesFailure {
    #[error(transparent)]
    Evidence(#[from] EvidenceError),
    #[error("app_compose is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("app_compose has no docker_compose_file")]
    NoDockerCompose,
    #[error("docker_compose_file names no image")]
    NoImage,
    #[error("not pinned by @sha256: {}", .0.join(", "))]
    Unpinned(Vec<String>),
}

fn check_images_pinned(b: &Bundle) -> Ran {
    let run = || -> Result<String, ImagesFailure> {
        let compose = app_compose(b)?;
        let v: serde_json::Value =
            serde_json::from_str(&compose).map_err(ImagesFailure::NotJson)?;
        let dc = v
            .get("docker_compose_file")
            .and_then(|d| d.as_str())
            .ok_or(ImagesFailure::NoDockerCompose)?;
        let images = compose_images(dc);
        if images.is_empty() {
            return Err(ImagesFailure::NoImage);
        }
        let unpinned: Vec<String> = images
            .iter()
            .filter(|i| !image_is_pinned(i))
            .cloned()
            .collect();
        if unpinned.is_empty() {
            Ok(format!("{} image(s), all pinned by digest", images.len()))
        } else {
            Err(ImagesFailure::Unpinned(unpinned))
        }
    };
    Ran::done(run())
}

fn evidence_quote(b: &Bundle) -> Result<(serde_json::Value, Vec<u8>), EvidenceError> {
    let raw = b
        .evidence_files
        .get("quote.json")
        .ok_or(EvidenceError::NoFile("quote.json"))?;
    let v: serde_json::Value = serde_json::from_slice(raw).map_err(EvidenceError::QuoteJson)?;
    let q = v
        .get("quote")
        .and_then(|q| q.as_str())
        .ok_or(EvidenceError::QuoteJsonField("quote"))?;
    let bytes = decode_quote_text(q)?;
    Ok((v, bytes))
}

/// Why `report-data` failed.
#[derive(Debug, thiserror::Error)]
enum ReportDataFailure {
    #[error(transparent)]
    Evidence(#[from] EvidenceError),
    /// `starts`: the first 64 hex digits of quote.json's report_data (all, if fewer).
    #[error("report_data starts {starts}, sha256(sha256sum.txt) = {expected}")]
    OtherHash { starts: String, expected: String },
    #[error("report_data is not the hash zero-padded to 64 bytes, nor followed by the nonce sent")]
    SecondHalf,
    #[error("the evidence quote's own report_data differs from quote.json's")]
    QuoteDiffers,
    /// A listed file whose content does not match its line of `sha256sum.txt`.
    #[error("sha256sum.txt: {0} does not match its checksum")]
    Checksum(String),
    #[error("sha256sum.txt does not cover {0}")]
    NotCovered(String),
}

fn check_report_data(b: &Bundle) -> Ran {
    let run = || -> Result<String, ReportDataFailure> {
        let sums = b
            .evidence_files
            .get("sha256sum.txt")
            .ok_or(EvidenceError::NoFile("sha256sum.txt"))?;
        let expected = hex::encode(Sha256::digest(sums));
        let (v, bytes) = evidence_quote(b)?;
        let claimed = v
            .get("report_data")
            .and_then(|r| r.as_str())
            .map(|s| strip0x(s).to_ascii_lowercase())
            .ok_or(EvidenceError::QuoteJsonField("report_data"))?;
        if claimed.get(..64) != Some(expected.as_str()) {
            return Err(ReportDataFailure::OtherHash {
                starts: claimed.get(..64).unwrap_or(&claimed).to_owned(),
                expected,
            });
        }
        // The second half is zeros (the specification's form) or the nonce this bundle
        // was fetched with (a fresh quote; `freshness` judges whether it is).
        let zeros = claimed.len() == 128 && claimed[64..].bytes().all(|c| c == b'0');
        let nonced = b
            .nonce
            .is_some_and(|n| claimed.len() == 128 && claimed[64..] == hex::encode(n));
        if !zeros && !nonced {
            return Err(ReportDataFailure::SecondHalf);
        }
        let quote = TdxQuote::parse(&bytes).map_err(EvidenceError::EvidenceQuote)?;
        if hex::encode(quote.report.report_data) != claimed {
            return Err(ReportDataFailure::QuoteDiffers);
        }
        // The checksums must cover the certificate and the ACME account, and match them.
        let mut covered = Vec::new();
        for line in String::from_utf8_lossy(sums).lines() {
            let Some((hash, name)) = parse_sum_line(line) else {
                continue;
            };
            if let Some(content) = b.evidence_files.get(name) {
                if hex::encode(Sha256::digest(content)) != hash.to_ascii_lowercase() {
                    return Err(ReportDataFailure::Checksum(name.to_owned()));
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
                return Err(ReportDataFailure::NotCovered(needed.to_owned()));
            }
        }
        Ok(format!(
            "report_data = sha256(sha256sum.txt) = {expected}…; it covers {}",
            covered.join(", ")
        ))
    };
    Ran::done(run())
}

/// Whether the evidence quote was made for this verification (see the module docs).
fn check_freshness(b: &Bundle, opts: &Options) -> Ran {
    let carried = evidence_quote(b).and_then(|(_, bytes)| {
        TdxQuote::parse(&bytes)
            .map(|q| q.report.report_data)
            .map_err(EvidenceError::EvidenceQuote)
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
    let run = || -> Result<String, TlsFailure> {
        let name = cert_file_name(&b.evidence_files).ok_or(EvidenceError::NoFile("cert-*.pem"))?;
        let der = first_pem_cert(&b.evidence_files[name])
            .ok_or_else(|| TlsFailure::NoPem(name.to_owned()))?;
        let served = hex::encode(Sha256::digest(leaf));
        let published = hex::encode(Sha256::digest(&der));
        if served == published {
            Ok(format!("served leaf = {name}, sha256 {served}"))
        } else {
            Err(TlsFailure::Differs {
                served,
                name: name.to_owned(),
                published,
            })
        }
    };
    Ran::done(run())
}

/// Why `tls-certificate` failed.
#[derive(Debug, thiserror::Error)]
enum TlsFailure {
    #[error(transparent)]
    Evidence(#[from] EvidenceError),
    #[error("{0} holds no PEM certificate")]
    NoPem(String),
    #[error("served leaf sha256 {served} != {name} sha256 {published}")]
    Differs {
        served: String,
        name: String,
        published: String,
    },
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
        .ok_or(EvidenceError::NoFile("acme-account.json"))
        .and_then(|raw| {
            serde_json::from_slice::<serde_json::Value>(raw).map_err(EvidenceError::AcmeAccountJson)
        })
        .and_then(|v| {
            v.get("uri")
                .or_else(|| v.get("account_uri"))
                .and_then(|u| u.as_str())
                .map(str::to_owned)
                .ok_or(EvidenceError::AcmeAccountNoUri)
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
    let ids = (|| -> Result<(String, String), EvidenceError> {
        let app_id = info(b)?
            .get("app_id")
            .and_then(|v| v.as_str())
            .map(|s| strip0x(s).to_owned())
            .ok_or(EvidenceError::InfoField("app_id"))?;
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

/// Why `gateway-route` failed.
#[derive(Debug, thiserror::Error)]
enum GatewayFailure {
    #[error(transparent)]
    Evidence(#[from] EvidenceError),
    #[error(transparent)]
    Identity(#[from] EventLogError),
    #[error("app_compose is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error(
        "--gateway: the attested app_compose has gateway_enabled false, so dstack-gateway does not route to this CVM"
    )]
    NotEnabled,
    #[error("DNS lookup for {domain}: {source}")]
    Lookup {
        domain: String,
        #[source]
        source: Box<crate::gateway::LookupError>,
    },
    #[error(
        "no TXT record at {tried}: dstack-gateway cannot route {domain}; publish `{name}. TXT \"{want}\"`"
    )]
    NoRecord {
        domain: String,
        tried: String,
        name: String,
        want: String,
    },
    #[error("{name} TXT {reason}; the gateway reads `<app-id>:<port>`")]
    Malformed { name: String, reason: String },
    #[error(
        "{} TXT says {:?} (id {}, port {}), but the evidence attests app id {}{}: dstack-gateway routes {} to another app{}",
        .0.name, .0.record, .0.id, .0.port, .0.app_id, .0.instance, .0.domain, .0.hint
    )]
    OtherApp(Box<OtherAppRecord>),
    #[error(
        "{name} TXT {record:?} names port {port}, which the attested compose does not publish (it publishes {published})"
    )]
    OtherPort {
        name: String,
        record: String,
        port: u16,
        published: String,
    },
    #[error(
        "{name} has {count} TXT records, not all of them naming this app ({values}): the gateway routes by whichever its resolver returns first"
    )]
    Ambiguous {
        name: String,
        count: usize,
        values: String,
    },
    #[error(
        "{domain} is dstack-gateway's own name for {id} port {port} without the `s` suffix: the gateway terminates TLS there with its own certificate; use {id}-{port}s.{base}"
    )]
    Terminated {
        domain: String,
        id: String,
        port: u16,
        base: String,
    },
    #[error(
        "{domain} names port {port}, which the attested compose does not publish (it publishes {published})"
    )]
    OtherPortName {
        domain: String,
        port: u16,
        published: String,
    },
    #[error(
        "{domain} is dstack-gateway's own name for {id}, but the evidence attests app id {app_id}{instance}"
    )]
    OtherAppName {
        domain: String,
        id: String,
        app_id: String,
        instance: String,
    },
}

/// A route record naming another app: what it says, and what the evidence attests.
#[derive(Debug)]
struct OtherAppRecord {
    name: String,
    record: String,
    id: String,
    port: u16,
    app_id: String,
    instance: String,
    domain: String,
    hint: String,
}

/// What the evidence attests the gateway must route to.
struct GatewayTarget {
    app_id: String,
    /// Where the app id comes from (the app-id event, or `/info` when the log has none).
    app_id_source: &'static str,
    instance_id: Option<String>,
    /// The CVM ports the attested compose publishes.
    published: Vec<u16>,
}

impl GatewayTarget {
    /// `this app (app id …)` or `this instance (instance id …)` if `id` names it.
    fn names(&self, id: &str) -> Option<String> {
        if id == self.app_id {
            Some(format!("this app (app id {id}, {})", self.app_id_source))
        } else if self.instance_id.as_deref() == Some(id) {
            Some(format!(
                "this instance (instance id {id}, from the instance-id event)"
            ))
        } else {
            None
        }
    }

    fn instance_note(&self) -> String {
        self.instance_id
            .as_ref()
            .map(|i| format!(" (instance id {i})"))
            .unwrap_or_default()
    }

    /// Why `port` is acceptable (`Ok`: a note for the report).
    fn port_note(&self, port: u16) -> Result<String, String> {
        if self.published.contains(&port) {
            Ok(format!("port {port}, which the attested compose publishes"))
        } else if self.published.is_empty() {
            Ok(format!(
                "port {port} (not checked: the attested compose publishes no port)"
            ))
        } else {
            Err(self
                .published
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(", "))
        }
    }
}

/// Whether the attested app_compose enables dstack-gateway, and the CVM ports its
/// docker-compose file publishes.
fn gateway_compose(b: &Bundle) -> Result<(bool, Vec<u16>), GatewayFailure> {
    let compose: serde_json::Value =
        serde_json::from_str(&app_compose(b)?).map_err(GatewayFailure::NotJson)?;
    let flag = |k: &str| compose.get(k).and_then(|v| v.as_bool()).unwrap_or(false);
    // `tproxy_enabled`: the same switch under the gateway's former name.
    let enabled = flag("gateway_enabled") || flag("tproxy_enabled");
    let published = compose
        .get("docker_compose_file")
        .and_then(|d| d.as_str())
        .map(crate::gateway::published_ports)
        .unwrap_or_default();
    Ok((enabled, published))
}

/// The app id (and instance id) the evidence attests, and the published ports.
fn gateway_target(b: &Bundle, published: Vec<u16>) -> Result<GatewayTarget, GatewayFailure> {
    let identity = event_log(b)?.identity()?;
    let (app_id, app_id_source) = match identity.app_id {
        Some(id) => (id, "from the app-id event"),
        None => (
            info(b)?
                .get("app_id")
                .and_then(|v| v.as_str())
                .map(|s| strip0x(s).to_ascii_lowercase())
                .ok_or(EvidenceError::InfoField("app_id"))?,
            "from /info: the event log has no app-id event",
        ),
    };
    Ok(GatewayTarget {
        app_id,
        app_id_source,
        instance_id: identity.instance_id.filter(|i| !i.is_empty()),
        published,
    })
}

/// `gateway-route`: where dstack-gateway sends the domain's connections (see
/// [`crate::gateway`]) is this app (or this instance), on a port its compose publishes.
async fn check_gateway_route(b: &Bundle, opts: &Options) -> Ran {
    let (enabled, published) = match gateway_compose(b) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    if !enabled {
        return if opts.gateway {
            fail(GatewayFailure::NotEnabled)
        } else {
            pass(
                "not behind dstack-gateway: the attested app_compose has gateway_enabled false (no route to check; --gateway requires one)",
            )
        };
    }
    let target = match gateway_target(b, published) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let Some(domain) = b.domain.clone() else {
        return Ran::Skip("no domain (verify online, or give the bundle a domain.txt)".into());
    };
    if domain
        .trim_matches(|c| c == '[' || c == ']')
        .parse::<std::net::IpAddr>()
        .is_ok()
    {
        return Ran::Skip(format!(
            "{domain} is an IP address: dstack-gateway routes names (give the URL's host name, with --connect to reach it elsewhere)"
        ));
    }
    if let Some(name) = crate::gateway::gateway_name(&domain) {
        return Ran::done(gateway_own_name(&domain, &name, &target));
    }
    if opts.dns_server.is_none() && !opts.online {
        return Ran::Skip("offline and no --dns server given".into());
    }
    let found = crate::gateway::lookup(&domain, opts.dns_server).await;
    Ran::done(gateway_record(&domain, found, &target))
}

/// The gateway's own name `<id>-<port>s.<base>`: routed by the name itself.
fn gateway_own_name(
    domain: &str,
    name: &crate::gateway::GatewayName,
    target: &GatewayTarget,
) -> Result<String, GatewayFailure> {
    let Some(whom) = target.names(&name.id) else {
        return Err(GatewayFailure::OtherAppName {
            domain: domain.to_owned(),
            id: name.id.clone(),
            app_id: target.app_id.clone(),
            instance: target.instance_note(),
        });
    };
    if !name.passthrough {
        return Err(GatewayFailure::Terminated {
            domain: domain.to_owned(),
            id: name.id.clone(),
            port: name.port,
            base: name.base.clone(),
        });
    }
    let port = target
        .port_note(name.port)
        .map_err(|published| GatewayFailure::OtherPortName {
            domain: domain.to_owned(),
            port: name.port,
            published,
        })?;
    Ok(format!(
        "{domain} is dstack-gateway's own name for {whom}, {port}, TLS passed through"
    ))
}

/// A custom domain: its app-address TXT record.
fn gateway_record(
    domain: &str,
    found: Result<Option<crate::gateway::RouteRecords>, crate::gateway::LookupError>,
    target: &GatewayTarget,
) -> Result<String, GatewayFailure> {
    let names = crate::gateway::record_names(domain);
    let records = found
        .map_err(|source| GatewayFailure::Lookup {
            domain: domain.to_owned(),
            source: Box::new(source),
        })?
        .ok_or_else(|| GatewayFailure::NoRecord {
            domain: domain.to_owned(),
            tried: names.join(", "),
            name: names[0].clone(),
            want: format!(
                "{}:{}",
                target.app_id,
                target.published.first().copied().unwrap_or(443)
            ),
        })?;
    let name = records.name.clone();
    let mut passes = Vec::new();
    let mut first_failure = None;
    for value in &records.values {
        let checked = (|| -> Result<String, GatewayFailure> {
            let address = crate::gateway::AppAddress::parse(value).map_err(|e| {
                GatewayFailure::Malformed {
                    name: name.clone(),
                    reason: e.to_string(),
                }
            })?;
            let Some(whom) = target.names(&address.id) else {
                let hint = if target
                    .names(&strip0x(&address.id).to_ascii_lowercase())
                    .is_some()
                {
                    " (the gateway matches the id exactly: lowercase hex without 0x)".to_owned()
                } else {
                    String::new()
                };
                return Err(GatewayFailure::OtherApp(Box::new(OtherAppRecord {
                    name: name.clone(),
                    record: value.clone(),
                    id: address.id.clone(),
                    port: address.port,
                    app_id: target.app_id.clone(),
                    instance: target.instance_note(),
                    domain: domain.to_owned(),
                    hint,
                })));
            };
            let port =
                target
                    .port_note(address.port)
                    .map_err(|published| GatewayFailure::OtherPort {
                        name: name.clone(),
                        record: value.clone(),
                        port: address.port,
                        published,
                    })?;
            Ok(format!(
                "{name} TXT {value:?}: dstack-gateway routes {domain} to {whom}, {port}"
            ))
        })();
        match checked {
            Ok(detail) => passes.push(detail),
            Err(e) => {
                first_failure.get_or_insert(e);
            }
        }
    }
    match (first_failure, passes.first()) {
        (None, Some(detail)) => Ok(detail.clone()),
        (Some(e), _) if records.values.len() == 1 => Err(e),
        _ => Err(GatewayFailure::Ambiguous {
            count: records.values.len(),
            values: records
                .values
                .iter()
                .map(|v| format!("{v:?}"))
                .collect::<Vec<_>>()
                .join(", "),
            name,
        }),
    }
}

fn attestation_quote(b: &Bundle) -> Result<Vec<u8>, EvidenceError> {
    let a = b.attestation.as_ref().ok_or(EvidenceError::NoAttestation)?;
    let q = a
        .get("quote")
        .and_then(|q| q.as_str())
        .ok_or(EvidenceError::AttestationNoQuote)?;
    Ok(decode_quote_text(q)?)
}

/// Why the collateral to verify a quote with could not be had (`quote` then fails).
#[derive(Debug, thiserror::Error)]
enum CollateralFailure {
    #[error(transparent)]
    Obtain(#[from] CollateralError),
    #[error("no HTTP client")]
    NoHttpClient,
    /// The bundle's own `collateral.json` does not parse.
    #[error("collateral.json: {0}")]
    BundleFile(#[source] serde_json::Error),
    /// None given, and the bundle carries none ([`VerifyError::NoCollateral`]).
    #[error(transparent)]
    Missing(VerifyError),
}

/// Why the evidence quote did not verify (`quote` then fails).
#[derive(Debug, thiserror::Error)]
enum EvidenceQuoteFailure {
    #[error(transparent)]
    Evidence(#[from] EvidenceError),
    #[error("evidence quote: {0}")]
    Verify(#[source] VerifyError),
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
                .map_err(CollateralFailure::Obtain),
            (Some(_), _, None) => Err(CollateralFailure::NoHttpClient),
            (None, Some(json), _) => {
                crate::collateral::parse(json).map_err(CollateralFailure::BundleFile)
            }
            (None, None, _) => Err(CollateralFailure::Missing(VerifyError::NoCollateral)),
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
        let ev = evidence_quote(b)
            .map_err(EvidenceQuoteFailure::from)
            .and_then(|(_, bytes)| {
                verify_quote(&bytes, collateral.as_ref(), opts.at, &opts.policy)
                    .map_err(EvidenceQuoteFailure::Verify)
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

fn event_log(b: &Bundle) -> Result<EventLog, EvidenceError> {
    let from_attestation = b.attestation.as_ref().and_then(|a| a.get("event_log"));
    let value = match from_attestation {
        Some(v) => v.clone(),
        None => tcb_info(b)?
            .get("event_log")
            .cloned()
            .ok_or(EvidenceError::NoEventLog)?,
    };
    EventLog::from_value(&value).map_err(EvidenceError::EventLog)
}

/// Why `rtmr-replay` failed.
#[derive(Debug, thiserror::Error)]
enum ReplayFailure {
    #[error(transparent)]
    Evidence(#[from] EvidenceError),
    /// The attestation quote does not parse (shown as the parser says it).
    #[error(transparent)]
    Quote(#[from] QuoteParseError),
    /// The registers (`RTMR<i>`) the replay does not reach.
    #[error("replay of the event log differs from the quote in {}", .0.join(", "))]
    Differs(Vec<String>),
}

fn check_rtmr_replay(b: &Bundle) -> Ran {
    let run = || -> Result<String, ReplayFailure> {
        let quote = TdxQuote::parse(&attestation_quote(b)?)?;
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
            Err(ReplayFailure::Differs(bad))
        }
    };
    Ran::done(run())
}

/// Why the OS cannot be pinned on a simulated quote.
const SIMULATED_OS_WHY: &str = "simulated quote: no TDX module measured a firmware, kernel or command line, so there is no OS measurement to pin";

/// Names of the OS registers, in quote order.
const OS_REGISTERS: [&str; 4] = ["MRTD", "RTMR0", "RTMR1", "RTMR2"];

impl OsReport {
    /// The report's OS lines.
    fn to_text(&self) -> String {
        let mut s = String::from("os:");
        match (&self.version, self.is_dev) {
            (Some(v), Some(dev)) => s.push_str(&format!(
                " dstack {v} ({} image)",
                if dev { "DEVELOPMENT" } else { "production" }
            )),
            (Some(v), None) => s.push_str(&format!(" dstack {v}")),
            (None, Some(dev)) => s.push_str(if dev {
                " a DEVELOPMENT image"
            } else {
                " a production image"
            }),
            (None, None) => s.push_str(" version unknown"),
        }
        if let Some(src) = &self.version_source {
            s.push_str(&format!(" [{src}]"));
        }
        if let Some(h) = &self.os_image_hash {
            s.push_str(&format!("; os_image_hash {h}"));
        }
        if let Some(shape) = &self.vm_shape {
            s.push_str(&format!("; {}", shape_text(shape)));
        }
        s.push('\n');
        let list = |v: &[&str]| {
            if v.is_empty() {
                "none".to_owned()
            } else {
                v.join(", ")
            }
        };
        s.push_str(&format!(
            "os measurements: recomputed from the image: {}; taken on trust from the policy file: {}; not pinned: {}\n",
            list(&self.recomputed),
            list(&self.from_policy),
            list(&self.unpinned)
        ));
        if let Some(r) = &self.rtmr0 {
            s.push_str(&format!(
                "RTMR0: recomputed from the image: {}; taken on trust from the event log: ACPI etc/table-loader {}, etc/acpi/rsdp {}, etc/acpi/tables {}\n",
                r.recomputed_events.join(", "),
                r.acpi_table_loader,
                r.acpi_rsdp,
                r.acpi_tables
            ));
        }
        s
    }
}

fn shape_text(shape: &VmShape) -> String {
    let mut parts = Vec::new();
    if let Some(c) = shape.cpu_count {
        parts.push(format!("{c} CPUs"));
    }
    if let Some(m) = shape.memory_size {
        parts.push(if m % (1 << 30) == 0 {
            format!("{} GiB", m >> 30)
        } else {
            format!("{} MiB", m >> 20)
        });
    }
    for (k, v) in &shape.other {
        parts.push(format!("{k} {v}"));
    }
    if parts.is_empty() {
        "VM shape unknown".to_owned()
    } else {
        format!("VM {}", parts.join(", "))
    }
}

/// `vm_config` of `/attestation` (an absent or empty one: nothing known).
fn vm_config(b: &Bundle) -> Result<VmConfig, OsImageError> {
    let Some(v) = b.attestation.as_ref().and_then(|a| a.get("vm_config")) else {
        return Ok(VmConfig::default());
    };
    match v {
        serde_json::Value::Null => Ok(VmConfig::default()),
        serde_json::Value::String(s) => VmConfig::parse(s),
        other => VmConfig::parse(&other.to_string()),
    }
}

/// Why `os-image` failed.
#[derive(Debug, thiserror::Error)]
enum OsFailure {
    #[error(transparent)]
    Evidence(#[from] EvidenceError),
    #[error("/attestation {0}")]
    VmConfig(#[source] OsImageError),
    /// `/info` `tcb_info.os_image_hash`, as given.
    #[error("/info tcb_info.os_image_hash {0:?} is not 64 hex digits")]
    InfoImageHash(String),
    #[error(
        "vm_config names os_image_hash {}, /info tcb_info names {}",
        hex::encode(.vm_config),
        hex::encode(.info)
    )]
    ImageHashes { vm_config: [u8; 32], info: [u8; 32] },
    #[error(
        "the deployment runs os_image_hash {}, the --os-image directory is {}",
        hex::encode(.deployment),
        hex::encode(.image)
    )]
    OtherImage {
        deployment: [u8; 32],
        image: [u8; 32],
    },
    #[error(
        "the VM's memory size is unknown (vm_config states none, and no policy entry for this image does): RTMR1 depends on it"
    )]
    UnknownMemorySize,
    #[error("recomputing from the image: {0}")]
    Recompute(#[source] OsImageError),
    #[error("no memory size to recompute with")]
    NoMemorySize,
    #[error(
        "the quote was not produced by OS image {}: {}",
        hex::encode(.image),
        joined(.mismatches, "; ")
    )]
    NotThisImage {
        image: [u8; 32],
        mismatches: Vec<Mismatch>,
    },
    /// No policy entry for the image (`None`: any image).
    #[error("the policy file has no entry for os_image_hash {}", policy_target(.0))]
    NoPolicyEntry(Option<[u8; 32]>),
    #[error(
        "no policy entry for {} matches the quote: {}",
        policy_target(.image),
        joined(.entries, "; ")
    )]
    NoPolicyMatch {
        image: Option<[u8; 32]>,
        entries: Vec<EntryMismatch>,
    },
}

/// A register the OS image does not reproduce.
#[derive(Debug, thiserror::Error)]
enum Mismatch {
    #[error(
        "MRTD: quote {}, firmware gives {} (one pass) or {} (two passes)",
        hex::encode(.quote),
        hex::encode(.single_pass),
        hex::encode(.two_pass)
    )]
    Mrtd {
        quote: [u8; 48],
        single_pass: [u8; 48],
        two_pass: [u8; 48],
    },
    #[error(
        "RTMR1 (kernel): quote {}, image gives {}",
        hex::encode(.quote),
        hex::encode(.image)
    )]
    Rtmr1 { quote: [u8; 48], image: [u8; 48] },
    #[error(
        "RTMR2 (command line, initrd): quote {}, image gives {}",
        hex::encode(.quote),
        hex::encode(.image)
    )]
    Rtmr2 { quote: [u8; 48], image: [u8; 48] },
    #[error(transparent)]
    Rtmr0(Rtmr0Failure),
}

/// Why RTMR0's events do not hold against the image's firmware.
#[derive(Debug, thiserror::Error)]
enum Rtmr0Failure {
    #[error("RTMR0: {0}")]
    EventLog(#[source] EvidenceError),
    #[error("RTMR0: the event log's RTMR0 events do not replay to the quote's RTMR0")]
    Replay,
    #[error("RTMR0: firmware: {0}")]
    Firmware(#[source] OsImageError),
    #[error("RTMR0: firmware: {0}")]
    Layout(#[source] Rtmr0Error),
    /// An event that is missing, extra, of the wrong type or different: the error names
    /// it ("RTMR0 event 3 (SecureBoot variable, …").
    #[error(transparent)]
    Event(Rtmr0Error),
    #[error("RTMR0: {0}")]
    Other(#[source] Rtmr0Error),
    #[error("RTMR0: no memory size to recompute with")]
    NoMemorySize,
}

/// Why a policy entry does not match the quote.
#[derive(Debug, thiserror::Error)]
enum EntryMismatch {
    #[error("entry {0}: malformed")]
    Malformed(usize),
    /// `what`: the registers, and the `vm_config` fields, that differ.
    #[error("entry {index} differs in {}", .what.join(", "))]
    Differs { index: usize, what: Vec<String> },
}

/// The image a policy lookup was for.
fn policy_target(image: &Option<[u8; 32]>) -> String {
    image.map_or_else(
        || "any os_image_hash (the deployment names none)".to_owned(),
        hex::encode,
    )
}

/// `items`, displayed and joined with `sep`.
fn joined<T: std::fmt::Display>(items: &[T], sep: &str) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(sep)
}

/// The image hash the deployment names: `vm_config`'s, or `/info` `tcb_info`'s; they
/// must agree when both are given.
fn claimed_image_hash(b: &Bundle, vm: &VmConfig) -> Result<Option<[u8; 32]>, OsFailure> {
    let from_info = match tcb_info(b).ok().and_then(|t| {
        t.get("os_image_hash")
            .and_then(|h| h.as_str())
            .map(str::to_owned)
    }) {
        Some(h) if !strip0x(&h).is_empty() => {
            let mut out = [0u8; 32];
            hex::decode_to_slice(strip0x(&h), &mut out)
                .map_err(|_| OsFailure::InfoImageHash(h.clone()))?;
            Some(out)
        }
        _ => None,
    };
    match (vm.os_image_hash, from_info) {
        (Some(a), Some(i)) if a != i => Err(OsFailure::ImageHashes {
            vm_config: a,
            info: i,
        }),
        (a, i) => Ok(a.or(i)),
    }
}

/// Which OS produced the quote (see the module documentation).
fn check_os_image(b: &Bundle, opts: &Options) -> (Ran, Option<OsReport>) {
    let quote = match attestation_quote(b)
        .and_then(|q| TdxQuote::parse(&q).map_err(EvidenceError::AttestationQuote))
    {
        Ok(q) => q,
        Err(e) => return (fail(e), None),
    };
    if quote.is_simulated() {
        return (Ran::NotApplicable(SIMULATED_OS_WHY.to_owned()), None);
    }
    let vm = match vm_config(b) {
        Ok(v) => v,
        Err(e) => return (fail(OsFailure::VmConfig(e)), None),
    };
    let claimed = match claimed_image_hash(b, &vm) {
        Ok(c) => c,
        Err(e) => return (fail(e), None),
    };
    let mut os = OsReport {
        os_image_hash: claimed.map(hex::encode),
        vm_shape: (vm.shape != VmShape::default()).then(|| vm.shape.clone()),
        ..OsReport::default()
    };
    if let Some((version, dev)) = vm.image_name_info() {
        os.version = Some(version);
        os.is_dev = Some(dev);
        os.version_source = Some("the host's image name in vm_config, not verified".to_owned());
    }
    let report = &quote.report;
    let actual = [report.mr_td, report.rtmr0, report.rtmr1, report.rtmr2];
    if opts.os_policy.is_none() && opts.os_image.is_none() {
        os.unpinned = OS_REGISTERS.to_vec();
        return (
            Ran::Unpinned(
                "no --os-measurements or --os-image given: MRTD and RTMR0-2 (firmware, kernel, command line, initrd) are not compared with anything"
                    .to_owned(),
            ),
            Some(os),
        );
    }
    // Registers pinned so far, by source.
    let mut recomputed = [false; 4];
    let mut from_policy = [false; 4];
    let mut notes = Vec::new();
    if let Some(image) = &opts.os_image {
        match compare_with_image(image, claimed, &vm, opts.os_policy.as_ref(), &actual, b) {
            Ok((note, rtmr0)) => {
                recomputed = [true, false, true, true];
                notes.push(note);
                os.rtmr0 = Some(rtmr0);
            }
            Err(e) => return (fail(e), Some(os)),
        }
        os.os_image_hash = Some(hex::encode(image.os_image_hash));
        if !image.metadata.version.is_empty() {
            os.version = Some(image.metadata.version.clone());
        }
        os.is_dev = Some(image.metadata.is_dev);
        os.version_source = Some("the image's metadata.json".to_owned());
    }
    if let Some(policy) = &opts.os_policy {
        let hash = opts.os_image.as_ref().map(|i| i.os_image_hash).or(claimed);
        match match_policy(policy, hash, &vm.shape, &actual) {
            Ok((index, entry)) => {
                let pinned = entry.decode().map(|p| p.rtmr0.is_some()).unwrap_or(false);
                from_policy = [true, pinned, true, true];
                notes.push(format!("policy entry {index} matches"));
                if os.os_image_hash.is_none() {
                    os.os_image_hash = Some(entry.os_image_hash.to_ascii_lowercase());
                }
                if os.version_source.as_deref() != Some("the image's metadata.json")
                    && (entry.version.is_some() || entry.is_dev.is_some())
                {
                    os.version = entry.version.clone();
                    os.is_dev = entry.is_dev;
                    os.version_source = Some("the policy file".to_owned());
                }
                if os.vm_shape.is_none() && entry.vm_shape != VmShape::default() {
                    os.vm_shape = Some(entry.vm_shape.clone());
                }
            }
            Err(e) => return (fail(e), Some(os)),
        }
    }
    for (i, name) in OS_REGISTERS.iter().enumerate() {
        if recomputed[i] {
            os.recomputed.push(name);
        } else if from_policy[i] {
            os.from_policy.push(name);
        } else {
            os.unpinned.push(name);
        }
    }
    let mut detail = notes.join("; ");
    if !os.from_policy.is_empty() {
        detail.push_str(&format!(
            "; {} taken on trust from the policy file",
            os.from_policy.join(", ")
        ));
    }
    if os.unpinned.is_empty() {
        (pass(detail), Some(os))
    } else {
        let why = if os.rtmr0.is_some() {
            "RTMR0's three ACPI table events were taken on trust from the event log: the tables carry AML code the guest kernel runs, and stock QEMU cannot rebuild dstack's"
        } else {
            "RTMR0 covers the ACPI tables QEMU builds for the VM shape and is not recomputed here"
        };
        detail.push_str(&format!(
            "; NOT pinned: {} ({why}: give --os-measurements with an entry that has rtmr0 for this image and shape)",
            os.unpinned.join(", ")
        ));
        (Ran::Unpinned(detail), Some(os))
    }
}

/// MRTD, RTMR1 and RTMR2 recomputed from `image` against the quote's `actual` registers,
/// and RTMR0's events but the ACPI tables against the event log of `b`.
fn compare_with_image(
    image: &OsImage,
    claimed: Option<[u8; 32]>,
    vm: &VmConfig,
    policy: Option<&OsPolicy>,
    actual: &[[u8; 48]; 4],
    b: &Bundle,
) -> Result<(String, Rtmr0Report), OsFailure> {
    let hash = hex::encode(image.os_image_hash);
    if let Some(c) = claimed
        && c != image.os_image_hash
    {
        return Err(OsFailure::OtherImage {
            deployment: c,
            image: image.os_image_hash,
        });
    }
    // RTMR1 depends on the memory size (QEMU places the initrd below the top of low
    // memory): vm_config's, or else those of the policy's entries for this image.
    let memories: Vec<u64> = match vm.shape.memory_size {
        Some(m) => vec![m],
        None => policy
            .map(|p| {
                p.entries
                    .iter()
                    .filter(|e| strip0x(&e.os_image_hash).eq_ignore_ascii_case(&hash))
                    .filter_map(|e| e.vm_shape.memory_size)
                    .collect()
            })
            .unwrap_or_default(),
    };
    if memories.is_empty() {
        return Err(OsFailure::UnknownMemorySize);
    }
    let mut mismatches = Vec::new();
    let mut rtmr1_ok = false;
    let mut first = None;
    for m in &memories {
        let r = image.measure(*m).map_err(OsFailure::Recompute)?;
        rtmr1_ok |= r.rtmr1 == actual[2];
        first.get_or_insert(r);
    }
    let Some(r) = first else {
        return Err(OsFailure::NoMemorySize);
    };
    let order = if actual[0] == r.mrtd_single_pass {
        "pages added in one pass"
    } else if actual[0] == r.mrtd_two_pass {
        "pages added in two passes"
    } else {
        mismatches.push(Mismatch::Mrtd {
            quote: actual[0],
            single_pass: r.mrtd_single_pass,
            two_pass: r.mrtd_two_pass,
        });
        ""
    };
    if !rtmr1_ok {
        mismatches.push(Mismatch::Rtmr1 {
            quote: actual[2],
            image: r.rtmr1,
        });
    }
    if r.rtmr2 != actual[3] {
        mismatches.push(Mismatch::Rtmr2 {
            quote: actual[3],
            image: r.rtmr2,
        });
    }
    let rtmr0 = match rtmr0_from_image(image, &memories, b, &actual[1]) {
        Ok(r) => Some(r),
        Err(e) => {
            mismatches.push(Mismatch::Rtmr0(e));
            None
        }
    };
    let Some(rtmr0) = rtmr0.filter(|_| mismatches.is_empty()) else {
        return Err(OsFailure::NotThisImage {
            image: image.os_image_hash,
            mismatches,
        });
    };
    Ok((
        format!(
            "MRTD ({order}), RTMR1 and RTMR2 recomputed from OS image {hash} and equal to the quote's; RTMR0: TD HOB, firmware volume, secure-boot variables and boot order recomputed, its three ACPI table events taken on trust from the event log (stock QEMU cannot rebuild dstack's tables)"
        ),
        rtmr0,
    ))
}

/// RTMR0's events recomputed from the image's firmware for one of `memories` and held to
/// the event log's, whose RTMR0 events must replay to the quote's `rtmr0`.
fn rtmr0_from_image(
    image: &OsImage,
    memories: &[u64],
    b: &Bundle,
    rtmr0: &[u8; 48],
) -> Result<Rtmr0Report, Rtmr0Failure> {
    let log = event_log(b).map_err(Rtmr0Failure::EventLog)?;
    if &log.replay()[0] != rtmr0 {
        return Err(Rtmr0Failure::Replay);
    }
    let tdvf = image.tdvf().map_err(Rtmr0Failure::Firmware)?;
    let layout = TdHobLayout::from_tdvf(&tdvf).map_err(Rtmr0Failure::Layout)?;
    let mut first_err = None;
    for &m in memories {
        let checked = ExpectedRtmr0::new(&layout, m)
            .and_then(|expected| crate::rtmr0::check_event_log(&log, &expected));
        match checked {
            Ok(acpi) => return Ok(rtmr0_report(&acpi)),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    Err(match first_err {
        // These name the event ("RTMR0 event 3 (SecureBoot variable, …").
        Some(
            e @ (Rtmr0Error::Missing { .. }
            | Rtmr0Error::Extra { .. }
            | Rtmr0Error::WrongType { .. }
            | Rtmr0Error::Mismatch { .. }),
        ) => Rtmr0Failure::Event(e),
        Some(e) => Rtmr0Failure::Other(e),
        None => Rtmr0Failure::NoMemorySize,
    })
}

fn rtmr0_report(acpi: &AcpiDigests) -> Rtmr0Report {
    Rtmr0Report {
        recomputed_events: Rtmr0Event::ALL
            .iter()
            .filter(|e| !e.is_acpi())
            .map(|e| e.name())
            .collect(),
        acpi_table_loader: hex::encode(acpi.loader),
        acpi_rsdp: hex::encode(acpi.rsdp),
        acpi_tables: hex::encode(acpi.tables),
    }
}

/// The first policy entry (for image `hash`, if known) whose registers and shape match.
fn match_policy<'p>(
    policy: &'p OsPolicy,
    hash: Option<[u8; 32]>,
    shape: &VmShape,
    actual: &[[u8; 48]; 4],
) -> Result<(usize, &'p crate::os_image::OsEntry), OsFailure> {
    let mut why = Vec::new();
    for (i, entry) in policy.entries.iter().enumerate() {
        let Ok(pinned) = entry.decode() else {
            why.push(EntryMismatch::Malformed(i));
            continue;
        };
        if hash.is_some_and(|h| h != pinned.os_image_hash) {
            continue;
        }
        let mut differs: Vec<String> = Vec::new();
        if !pinned.mrtd.contains(&actual[0]) {
            differs.push("MRTD".to_owned());
        }
        if pinned.rtmr0.is_some_and(|r| r != actual[1]) {
            differs.push("RTMR0".to_owned());
        }
        if pinned.rtmr1 != actual[2] {
            differs.push("RTMR1".to_owned());
        }
        if pinned.rtmr2 != actual[3] {
            differs.push("RTMR2".to_owned());
        }
        differs.extend(
            shape
                .differences(&entry.vm_shape)
                .into_iter()
                .map(|d| format!("vm_config {d} (entry)")),
        );
        if differs.is_empty() {
            return Ok((i, entry));
        }
        why.push(EntryMismatch::Differs {
            index: i,
            what: differs,
        });
    }
    if why.is_empty() {
        Err(OsFailure::NoPolicyEntry(hash))
    } else {
        Err(OsFailure::NoPolicyMatch {
            image: hash,
            entries: why,
        })
    }
}

/// Why `compose-hash-event` failed.
#[derive(Debug, thiserror::Error)]
enum ComposeEventFailure {
    #[error(transparent)]
    Evidence(#[from] EvidenceError),
    /// The event log's identity events are malformed.
    #[error(transparent)]
    Identity(#[from] EventLogError),
    #[error("no compose-hash event before system-ready")]
    NoEvent,
    #[error("compose-hash event {event} != /info compose_hash {info}")]
    ComposeHash { event: String, info: String },
    #[error("app-id event {event} != /info app_id {info}")]
    AppId { event: String, info: String },
    #[error("quote's mr_config_id names another compose hash")]
    MrConfigId,
}

fn check_compose_hash_event(b: &Bundle) -> Ran {
    let run = || -> Result<String, ComposeEventFailure> {
        let log = event_log(b)?;
        let id = log.identity()?;
        let event = id.compose_hash.ok_or(ComposeEventFailure::NoEvent)?;
        let claimed = info_compose_hash(b)?;
        if event != claimed {
            return Err(ComposeEventFailure::ComposeHash {
                event,
                info: claimed,
            });
        }
        let mut notes = vec![format!("compose-hash event = /info = {event}")];
        if let (Some(ev_app), Some(info_app)) =
            (id.app_id, info(b)?.get("app_id").and_then(|v| v.as_str()))
        {
            if ev_app != strip0x(info_app).to_ascii_lowercase() {
                return Err(ComposeEventFailure::AppId {
                    event: ev_app,
                    info: info_app.to_owned(),
                });
            }
            notes.push("app-id matches".to_owned());
        }
        // dstack also puts the compose hash in mr_config_id (0x01 ‖ hash ‖ 0…).
        if let Some(q) = attestation_quote(b)
            .ok()
            .and_then(|q| TdxQuote::parse(&q).ok())
            && q.report.mr_config_id[0] == 1
        {
            if hex::encode(&q.report.mr_config_id[1..33]) != claimed {
                return Err(ComposeEventFailure::MrConfigId);
            }
            notes.push("mr_config_id matches".to_owned());
        }
        if !id.system_ready {
            notes.push("(no system-ready event yet)".to_owned());
        }
        Ok(notes.join("; "))
    };
    Ran::done(run())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle_listing(sbom: &[u8], listed: &[u8]) -> Bundle {
        let mut b = Bundle::default();
        let sums = format!(
            "{}  cert-a.pem\n{}  {SBOM_FILE}\n",
            "ab".repeat(32),
            hex::encode(Sha256::digest(listed))
        );
        b.evidence_files
            .insert("sha256sum.txt".into(), sums.into_bytes());
        b.evidence_files.insert(SBOM_FILE.into(), sbom.to_vec());
        b
    }

    /// The SBOM's digest is reported (and printed) only when the quoted listing names it
    /// with the file's own checksum.
    #[test]
    fn the_sbom_digest_is_reported_when_the_listing_covers_it() {
        let doc = br#"{"format":"appliance-sbom/1","binaries":[{"name":"appliance"},{"name":"keyservice"}],"packages":[{"name":"ring"},{"name":"rustls"},{"name":"sha2"}]}"#;
        let r = SbomReport::of(&bundle_listing(doc, doc)).unwrap();
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(doc)));
        assert_eq!(r.digest, digest);
        assert_eq!(r.binaries, ["appliance", "keyservice"]);
        assert_eq!(r.packages, 3);
        let report = Report {
            ok: true,
            sbom: Some(r),
            ..Report::default()
        };
        let text = report.to_text();
        assert!(text.contains(&format!("SBOM: {digest} ")), "{text}");
        assert!(
            text.contains("3 crates for appliance, keyservice"),
            "{text}"
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["sbom"]["digest"], digest);
        // A file the listing does not cover, or covers with another checksum: no SBOM.
        assert!(SbomReport::of(&bundle_listing(doc, b"other")).is_none());
        let mut unlisted = bundle_listing(doc, doc);
        unlisted
            .evidence_files
            .insert("sha256sum.txt".into(), b"".to_vec());
        assert!(SbomReport::of(&unlisted).is_none());
        let none = Report {
            sbom: None,
            ..report
        };
        assert!(none.to_text().contains("SBOM: none listed"));
        // Another format still has its digest reported.
        let other = SbomReport::of(&bundle_listing(b"[]", b"[]")).unwrap();
        assert!(other.to_text().contains("not an appliance-sbom/1 document"));
    }

    fn failed_detail(ran: Ran) -> String {
        match ran {
            Ran::Fail(detail) => detail,
            Ran::Pass(d) | Ran::Skip(d) | Ran::NotApplicable(d) | Ran::Unpinned(d) => {
                panic!("not a failure: {d}")
            }
        }
    }

    /// Missing or malformed evidence fails its check with a line naming what is missing.
    #[test]
    fn missing_evidence_is_named_in_the_failure() {
        let empty = Bundle::default();
        assert_eq!(
            failed_detail(check_compose_hash(&empty)),
            "no /info response"
        );
        assert_eq!(
            failed_detail(check_report_data(&empty)),
            "no evidences/sha256sum.txt"
        );
        assert_eq!(
            failed_detail(check_rtmr_replay(&empty)),
            "no /attestation response"
        );
        let mut b = Bundle {
            info: Some(serde_json::json!({ "tcb_info": "{not json" })),
            ..Bundle::default()
        };
        assert!(
            failed_detail(check_compose_hash(&b)).starts_with("/info tcb_info: "),
            "malformed tcb_info"
        );
        let compose = serde_json::json!({
            "docker_compose_file": format!(
                "services:\n  app:\n    image: appliance@sha256:{}\n  side:\n    image: busybox:1.36\n",
                "ab".repeat(32)
            )
        })
        .to_string();
        b.info = Some(serde_json::json!({ "tcb_info": { "app_compose": compose } }));
        assert_eq!(
            failed_detail(check_images_pinned(&b)),
            "not pinned by @sha256: busybox:1.36"
        );
        assert_eq!(
            failed_detail(check_compose_hash(&b)),
            "/info has no compose_hash"
        );
    }

    /// An OS image that does not give the quote's registers: every register that differs
    /// is named, with both values.
    #[test]
    fn os_image_mismatches_name_each_register() {
        let failure = OsFailure::NotThisImage {
            image: [0x11; 32],
            mismatches: vec![
                Mismatch::Rtmr1 {
                    quote: [0xaa; 48],
                    image: [0xbb; 48],
                },
                Mismatch::Rtmr0(Rtmr0Failure::Replay),
            ],
        };
        assert_eq!(
            failure.to_string(),
            format!(
                "the quote was not produced by OS image {}: RTMR1 (kernel): quote {}, image gives {}; RTMR0: the event log's RTMR0 events do not replay to the quote's RTMR0",
                "11".repeat(32),
                "aa".repeat(48),
                "bb".repeat(48)
            )
        );
        assert_eq!(
            OsFailure::NoPolicyEntry(Some([0x22; 32])).to_string(),
            format!(
                "the policy file has no entry for os_image_hash {}",
                "22".repeat(32)
            )
        );
    }

    /// A genuine quote (or simulated quotes not allowed): an N/A is a failure.
    #[test]
    fn not_applicable_stands_only_on_an_allowed_simulated_stack() {
        let na = || Ran::NotApplicable("why".to_owned());
        let plain = Options::default();
        let strict = Options {
            strict: true,
            ..Options::default()
        };
        assert_eq!(resolve(na(), true, &plain).0, Status::NotApplicable);
        assert_eq!(resolve(na(), true, &strict).0, Status::NotApplicable);
        let (status, detail) = resolve(na(), false, &plain);
        assert_eq!(status, Status::Fail);
        assert!(
            detail.starts_with("why") && detail.contains("cannot apply"),
            "{detail}"
        );
        assert_eq!(
            resolve(Ran::Skip("s".into()), false, &strict).0,
            Status::Fail
        );
    }

    /// An unpinned OS fails unless accepted, on a development stack too; accepted, it is
    /// N/A and says so.
    #[test]
    fn an_unpinned_os_fails_unless_accepted() {
        let unpinned = || Ran::Unpinned("nothing pinned".to_owned());
        let (status, detail) = resolve(unpinned(), false, &Options::default());
        assert_eq!(status, Status::Fail);
        assert!(detail.contains("--allow-unpinned-os"), "{detail}");
        assert_eq!(
            resolve(unpinned(), true, &Options::default()).0,
            Status::Fail
        );
        let allow = Options {
            allow_unpinned_os: true,
            ..Options::default()
        };
        let (status, detail) = resolve(unpinned(), false, &allow);
        assert_eq!(status, Status::NotApplicable);
        assert!(detail.contains("accepted unpinned"), "{detail}");
    }
}
