//! Quote verification: dcap-qvl against collateral at an explicit time, then a policy on
//! the TCB status. Simulated quotes (from the `simulated` provider) never reach dcap-qvl:
//! they are refused unless the policy allows them, and then only if the dev-key signature
//! over the signed region holds.

use dcap_qvl::QuoteCollateralV3;
use serde::Serialize;

use crate::quote::{QuoteParseError, TdReport, TdxQuote};
use crate::simulated;

/// dcap-qvl's error when no TCB level of the TCB info is met by the platform.
const NO_MATCHING_TCB_LEVEL: &str = "No matching TCB level found";

/// Which verification outcomes pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// TCB statuses that pass (dcap-qvl spelling, e.g. `UpToDate`, `SWHardeningNeeded`).
    pub accepted_statuses: Vec<String>,
    /// Accept quotes from the `simulated` provider (development only: NOT confidential).
    pub allow_simulated: bool,
}

impl Default for Policy {
    /// Only `UpToDate`; simulated quotes refused.
    fn default() -> Self {
        Self {
            accepted_statuses: vec!["UpToDate".to_owned()],
            allow_simulated: false,
        }
    }
}

/// The outcome of a successful verification.
#[derive(Debug, Clone, Serialize)]
pub struct QuoteVerdict {
    /// TCB status (`UpToDate`, `OutOfDate`, …; `Simulated` for simulated quotes).
    pub status: String,
    /// Intel security advisories that apply (e.g. `INTEL-SA-00837`).
    pub advisory_ids: Vec<String>,
    pub simulated: bool,
    /// The TD report, from the verified bytes.
    pub report: TdReport,
}

/// Why a quote did not verify.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    #[error("quote does not parse: {0}")]
    Parse(#[from] QuoteParseError),
    #[error("simulated quote (NOT confidential) refused; pass --allow-simulated to accept it")]
    SimulatedRefused,
    #[error("simulated quote's dev-key signature does not verify")]
    SimulatedSignature,
    #[error("no collateral: give a collateral file or a PCCS URL")]
    NoCollateral,
    #[error("DCAP verification failed: {0}")]
    Dcap(String),
    /// The platform's TCB is below every level of Intel's TCB info: older than anything
    /// Intel still appraises, i.e. out of date (Intel's QVL calls it "TCB not supported").
    #[error(
        "TCB status OutOfDate: the platform's TCB is below every level in Intel's TCB info ({0})"
    )]
    TcbBelowAllLevels(String),
    #[error("TCB status {status} is not accepted by the policy (accepted: {accepted}){advisories}")]
    StatusRefused {
        status: String,
        accepted: String,
        advisories: String,
        verdict: Box<QuoteVerdict>,
    },
}

/// Verifies `quote` at Unix time `now` and applies `policy`.
pub fn verify_quote(
    quote: &[u8],
    collateral: Option<&QuoteCollateralV3>,
    now: u64,
    policy: &Policy,
) -> Result<QuoteVerdict, VerifyError> {
    let parsed = TdxQuote::parse(quote)?;
    if parsed.is_simulated() {
        if !policy.allow_simulated {
            return Err(VerifyError::SimulatedRefused);
        }
        if !simulated::verify_signature(quote, &parsed) {
            return Err(VerifyError::SimulatedSignature);
        }
        return Ok(QuoteVerdict {
            status: "Simulated".to_owned(),
            advisory_ids: Vec::new(),
            simulated: true,
            report: parsed.report,
        });
    }
    let collateral = collateral.ok_or(VerifyError::NoCollateral)?;
    let report = dcap_qvl::verify::ring::verify(quote, collateral, now).map_err(|e| {
        let msg = format!("{e:#}");
        if e.chain().any(|c| c.to_string() == NO_MATCHING_TCB_LEVEL) {
            VerifyError::TcbBelowAllLevels(msg)
        } else {
            VerifyError::Dcap(msg)
        }
    })?;
    let verdict = QuoteVerdict {
        status: report.status.clone(),
        advisory_ids: report.advisory_ids.clone(),
        simulated: false,
        report: parsed.report,
    };
    if !policy
        .accepted_statuses
        .iter()
        .any(|s| s.eq_ignore_ascii_case(&verdict.status))
    {
        let advisories = if verdict.advisory_ids.is_empty() {
            String::new()
        } else {
            format!("; advisories {}", verdict.advisory_ids.join(", "))
        };
        return Err(VerifyError::StatusRefused {
            status: verdict.status.clone(),
            accepted: policy.accepted_statuses.join(", "),
            advisories,
            verdict: Box::new(verdict),
        });
    }
    Ok(verdict)
}
