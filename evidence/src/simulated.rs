//! Simulated TDX evidence for development machines without TDX (NOT confidential).
//!
//! A simulated quote has the v4 layout with the TD report at the real offsets, so every
//! parser and check runs on it unchanged: RTMR3 is the replay of a simulated event log that
//! records the real compose hash, and mr_config_id is `0x01 ‖ compose_hash`. It is marked
//! twice so nobody can mistake it for hardware evidence: the header's `user_data` starts with
//! [`SIMULATED_MARKER`], and instead of Intel's ECDSA signature it carries an Ed25519
//! signature by a published dev key. The verifier refuses it unless simulated evidence is
//! explicitly allowed.

use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};
use sha2::{Digest, Sha256, Sha384};

use crate::event_log::{Event, EventLog};
use crate::quote::{SIMULATED_MARKER, TEE_TYPE_TDX, TdxQuote};

/// Seed label of the dev key; the key is public knowledge by design.
const DEV_KEY_LABEL: &[u8] = b"evidence/simulated-tdx-dev-key/v1";

fn dev_key() -> Option<Ed25519KeyPair> {
    let seed: [u8; 32] = Sha256::digest(DEV_KEY_LABEL).into();
    Ed25519KeyPair::from_seed_unchecked(&seed).ok()
}

/// The simulated event log: the dstack boot sequence on RTMR3, with the real compose hash.
pub fn event_log(app_id: &[u8; 20], compose_hash: &[u8; 32], instance_id: &[u8]) -> EventLog {
    EventLog {
        events: vec![
            Event::runtime("system-preparing", b""),
            Event::runtime("app-id", app_id),
            Event::runtime("compose-hash", compose_hash),
            Event::runtime("instance-id", instance_id),
            Event::runtime("boot-mr-done", b""),
            Event::runtime(
                "key-provider",
                br#"{"name":"simulated","id":"NOT-CONFIDENTIAL"}"#,
            ),
            Event::runtime("system-ready", b""),
        ],
    }
}

/// The simulated MRTD (a constant: there is no firmware to measure).
pub fn mr_td() -> [u8; 48] {
    Sha384::digest(b"evidence/simulated-tdx/mr_td").into()
}

/// Builds a simulated quote whose RTMRs are the replay of `log`.
pub fn quote(log: &EventLog, compose_hash: &[u8; 32], report_data: &[u8; 64]) -> Vec<u8> {
    let rtmrs = log.replay();
    let mut q = Vec::with_capacity(632 + 4 + 113);
    // header
    q.extend_from_slice(&4u16.to_le_bytes());
    q.extend_from_slice(&2u16.to_le_bytes());
    q.extend_from_slice(&TEE_TYPE_TDX.to_le_bytes());
    q.extend_from_slice(&0u16.to_le_bytes());
    q.extend_from_slice(&0u16.to_le_bytes());
    q.extend_from_slice(&[0u8; 16]);
    let mut user_data = [0u8; 20];
    user_data[..SIMULATED_MARKER.len()].copy_from_slice(SIMULATED_MARKER);
    q.extend_from_slice(&user_data);
    // TD report 1.0
    q.extend_from_slice(&[0u8; 16]); // tee_tcb_svn
    q.extend_from_slice(&[0u8; 48]); // mr_seam
    q.extend_from_slice(&[0u8; 48]); // mr_signer_seam
    q.extend_from_slice(&[0u8; 8]); // seam_attributes
    q.extend_from_slice(&[0u8; 8]); // td_attributes
    q.extend_from_slice(&[0u8; 8]); // xfam
    q.extend_from_slice(&mr_td());
    let mut mr_config_id = [0u8; 48];
    mr_config_id[0] = 1;
    mr_config_id[1..33].copy_from_slice(compose_hash);
    q.extend_from_slice(&mr_config_id);
    q.extend_from_slice(&[0u8; 48]); // mr_owner
    q.extend_from_slice(&[0u8; 48]); // mr_owner_config
    for r in &rtmrs {
        q.extend_from_slice(r);
    }
    q.extend_from_slice(report_data);
    debug_assert_eq!(q.len(), 632);
    let signature = dev_key().map(|k| k.sign(&q)).map(|s| s.as_ref().to_vec());
    let public = dev_key()
        .map(|k| k.public_key().as_ref().to_vec())
        .unwrap_or_default();
    let mut sig_data = Vec::with_capacity(SIMULATED_MARKER.len() + 96);
    sig_data.extend_from_slice(SIMULATED_MARKER);
    sig_data.extend_from_slice(&public);
    sig_data.extend_from_slice(&signature.unwrap_or_default());
    let len = u32::try_from(sig_data.len()).unwrap_or(0);
    q.extend_from_slice(&len.to_le_bytes());
    q.extend_from_slice(&sig_data);
    q
}

/// Checks the dev-key signature of a simulated quote over its signed region.
pub fn verify_signature(bytes: &[u8], parsed: &TdxQuote) -> bool {
    let sig = &parsed.signature_data;
    let m = SIMULATED_MARKER.len();
    if sig.len() != m + 32 + 64 || !sig.starts_with(SIMULATED_MARKER) {
        return false;
    }
    let Some(key) = dev_key() else {
        return false;
    };
    if &sig[m..m + 32] != key.public_key().as_ref() {
        return false;
    }
    let Some(signed) = bytes.get(..parsed.signed_len) else {
        return false;
    };
    UnparsedPublicKey::new(&ED25519, &sig[m..m + 32])
        .verify(signed, &sig[m + 32..])
        .is_ok()
}
