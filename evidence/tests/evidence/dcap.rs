//! DCAP quote verification with dcap-qvl at explicit times, the status policy, and the
//! simulated provider's quotes.

use crate::fixtures::*;
use evidence::quote::TdxQuote;
use evidence::verify::{Policy, VerifyError, verify_quote};

/// The dcap-qvl sample's quote is UpToDate at this time.
const SAMPLE_AT: u64 = 1_750_329_148;
/// 2026-02-19: inside the outdated sample collateral's validity (2026-02-18..03-20).
const OUTDATED_AT: u64 = 1_771_500_000;

#[test]
fn near_mpc_quote_verifies_up_to_date_at_1786622400() {
    let v = verify_quote(
        &near_quote(),
        Some(&near_collateral()),
        NEAR_MPC_AT,
        &Policy::default(),
    )
    .unwrap();
    assert_eq!(v.status, "UpToDate");
    assert!(!v.simulated);
    assert_eq!(
        v.report,
        TdxQuote::parse(&near_quote()).unwrap().report,
        "the verdict carries the verified report"
    );
}

#[test]
fn near_mpc_quote_fails_after_the_collateral_expires() {
    let err = verify_quote(
        &near_quote(),
        Some(&near_collateral()),
        NEAR_MPC_EXPIRED,
        &Policy::default(),
    )
    .unwrap_err();
    assert!(matches!(err, VerifyError::Dcap(_)), "{err}");
}

#[test]
fn one_flipped_byte_of_the_quote_fails_verification() {
    // header, TD report (mr_td, rtmr3, report_data), signature
    for i in [10, 200, 530, 600, 700] {
        let mut q = near_quote();
        q[i] ^= 0x01;
        let r = verify_quote(
            &q,
            Some(&near_collateral()),
            NEAR_MPC_AT,
            &Policy::default(),
        );
        assert!(r.is_err(), "byte {i} flipped, still verified");
    }
}

#[test]
fn dcap_qvl_sample_quote_verifies_up_to_date() {
    let collateral =
        evidence::collateral::parse(&read("dcap-qvl-sample/tdx_quote_collateral.json")).unwrap();
    let v = verify_quote(
        &read("dcap-qvl-sample/tdx_quote"),
        Some(&collateral),
        SAMPLE_AT,
        &Policy::default(),
    )
    .unwrap();
    assert_eq!(v.status, "UpToDate");
}

#[test]
fn dcap_qvl_sample_outdated_quote_is_reported_out_of_date() {
    let collateral =
        evidence::collateral::parse(&read("dcap-qvl-sample/tdx_quote_outdated_collateral.json"))
            .unwrap();
    let quote = read("dcap-qvl-sample/tdx_quote_outdated");
    // Its TCB is below every level Intel's TCB info lists (the collateral itself is valid
    // at this time: the certificates, CRLs and signatures check out).
    let err = verify_quote(&quote, Some(&collateral), OUTDATED_AT, &Policy::default()).unwrap_err();
    assert!(matches!(err, VerifyError::TcbBelowAllLevels(_)), "{err}");
    assert!(err.to_string().contains("OutOfDate"), "{err}");
    // No policy turns it into a pass: there is no TCB level to report.
    let lenient = Policy {
        accepted_statuses: vec!["UpToDate".into(), "OutOfDate".into()],
        ..Policy::default()
    };
    assert!(verify_quote(&quote, Some(&collateral), OUTDATED_AT, &lenient).is_err());
}

#[test]
fn an_accepted_status_list_is_what_decides() {
    // The near-mpc quote is UpToDate; a policy that accepts only other statuses refuses it
    // and still reports the status it found.
    let only_sw = Policy {
        accepted_statuses: vec!["SWHardeningNeeded".into()],
        ..Policy::default()
    };
    match verify_quote(
        &near_quote(),
        Some(&near_collateral()),
        NEAR_MPC_AT,
        &only_sw,
    ) {
        Err(VerifyError::StatusRefused { status, .. }) => assert_eq!(status, "UpToDate"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn no_collateral_is_an_error() {
    assert!(matches!(
        verify_quote(&near_quote(), None, NEAR_MPC_AT, &Policy::default()),
        Err(VerifyError::NoCollateral)
    ));
}

#[tokio::test]
async fn simulated_quote_is_refused_by_default_and_accepted_with_allow_simulated() {
    let compose = simulated_app_compose();
    let provider: evidence::QuoteProvider =
        evidence::SimulatedProvider::new(compose.clone().into_bytes()).into();
    assert!(provider.is_simulated());
    let q = provider.quote([7u8; 64]).await.unwrap();
    let parsed = TdxQuote::parse(&q.bytes).unwrap();
    assert!(parsed.is_simulated());
    assert_eq!(parsed.report.report_data, [7u8; 64]);
    // RTMR3 is the replay of the simulated log, which records the real compose hash.
    let log = evidence::event_log::EventLog::parse(&q.event_log_json).unwrap();
    assert_eq!(&log.replay()[3], &parsed.report.rtmr3);
    assert_eq!(
        log.identity().unwrap().compose_hash.unwrap(),
        evidence::compose_hash(compose.as_bytes())
    );

    // Refused by default, even with collateral at hand.
    assert!(matches!(
        verify_quote(
            &q.bytes,
            Some(&near_collateral()),
            NEAR_MPC_AT,
            &Policy::default()
        ),
        Err(VerifyError::SimulatedRefused)
    ));
    let allow = Policy {
        allow_simulated: true,
        ..Policy::default()
    };
    let v = verify_quote(&q.bytes, None, NEAR_MPC_AT, &allow).unwrap();
    assert_eq!(v.status, "Simulated");
    assert!(v.simulated);

    // Even when allowed, the dev signature must cover the report.
    let mut tampered = q.bytes.clone();
    tampered[520] ^= 1;
    assert!(matches!(
        verify_quote(&tampered, None, NEAR_MPC_AT, &allow),
        Err(VerifyError::SimulatedSignature)
    ));
}
