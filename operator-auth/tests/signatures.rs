//! The signature scheme against ethers 5.7.2 (`tests/data/ethers-v5.json`), and every way
//! the verifier refuses a request.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use k256::ecdsa::SigningKey;
use operator_auth::{
    Action, Binding, MAX_REMEMBERED, OperatorRequest, SignatureError, Verifier, VerifyError,
    WINDOW_SECS, address_of, eip191_digest, recover, sign,
};
use serde_json::Value;

fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s.trim_start_matches("0x")).unwrap()
}

fn vectors() -> Vec<Value> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/ethers-v5.json"
    ))
    .unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    doc["vectors"].as_array().unwrap().clone()
}

/// What a wallet's `signMessage` gives is what we sign and what we recover.
#[test]
fn eip191_matches_ethers_byte_for_byte() {
    let vectors = vectors();
    assert!(vectors.len() >= 5);
    for v in vectors {
        let message = v["message"].as_str().unwrap().as_bytes();
        let key = SigningKey::from_slice(&unhex(v["private_key"].as_str().unwrap())).unwrap();
        let address = unhex(v["address"].as_str().unwrap());
        let signature = unhex(v["signature"].as_str().unwrap());
        assert_eq!(
            eip191_digest(message).to_vec(),
            unhex(v["hash_message"].as_str().unwrap())
        );
        assert_eq!(address_of(key.verifying_key()).to_vec(), address);
        assert_eq!(sign(&key, message).unwrap().to_vec(), signature, "{v}");
        assert_eq!(recover(message, &signature).unwrap().to_vec(), address);
        // Another text, or a flipped bit, recovers someone else (or nothing).
        let mut other = message.to_vec();
        other.push(b'!');
        assert_ne!(
            recover(&other, &signature).map(|a| a.to_vec()).ok(),
            Some(address.clone())
        );
    }
}

#[test]
fn malformed_signatures_are_refused() {
    let key = SigningKey::from_slice(&[7; 32]).unwrap();
    let sig = sign(&key, b"x").unwrap();
    assert_eq!(recover(b"x", &sig[..64]), Err(SignatureError::Length(64)));
    let mut bad_v = sig;
    bad_v[64] = 29;
    assert_eq!(recover(b"x", &bad_v), Err(SignatureError::RecoveryId));
    // The same signature with s replaced by n - s (the malleable twin) is refused.
    let n =
        hex::decode("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141").unwrap();
    let s = &sig[32..64];
    let mut high = [0u8; 32];
    let mut borrow = 0i16;
    for i in (0..32).rev() {
        let d = n[i] as i16 - s[i] as i16 - borrow;
        borrow = i16::from(d < 0);
        high[i] = d.rem_euclid(256) as u8;
    }
    let mut twin = sig;
    twin[32..64].copy_from_slice(&high);
    twin[64] = if sig[64] == 27 { 28 } else { 27 };
    assert_eq!(recover(b"x", &twin), Err(SignatureError::HighS));
    // v given as 0/1 (some signers do) is the same signature.
    let mut raw_v = sig;
    raw_v[64] -= 27;
    assert_eq!(recover(b"x", &raw_v), recover(b"x", &sig));
}

const NOW: u64 = 1_764_300_000;

struct Setup {
    operator: SigningKey,
    stranger: SigningKey,
    binding: Binding,
    verifier: Verifier,
}

fn setup() -> Setup {
    let operator = SigningKey::from_slice(&[1; 32]).unwrap();
    let stranger = SigningKey::from_slice(&[2; 32]).unwrap();
    let binding = Binding {
        app: [0x11; 20],
        compose_hash: [0x22; 32],
    };
    let verifier = Verifier::new(vec![address_of(operator.verifying_key())]);
    Setup {
        operator,
        stranger,
        binding,
        verifier,
    }
}

fn request(s: &Setup, action: Action, issued_at: u64, nonce: u8) -> OperatorRequest {
    OperatorRequest {
        action,
        app: s.binding.app,
        compose_hash: s.binding.compose_hash,
        issued_at,
        nonce: [nonce; 16],
    }
}

fn signed(key: &SigningKey, r: &OperatorRequest) -> (String, [u8; 65]) {
    let text = r.render();
    let sig = sign(key, text.as_bytes()).unwrap();
    (text, sig)
}

#[test]
fn an_operator_request_passes_once() {
    let s = setup();
    let r = request(&s, Action::Reseal { target: [9; 32] }, NOW - 10, 1);
    let (text, sig) = signed(&s.operator, &r);
    let ok = s.verifier.verify(&text, &sig, &s.binding, NOW).unwrap();
    assert_eq!(ok.request, r);
    assert_eq!(ok.operator, address_of(s.operator.verifying_key()));
    assert_eq!(
        s.verifier.verify(&text, &sig, &s.binding, NOW + 1),
        Err(VerifyError::Replayed([1; 16]))
    );
    // The same nonce re-signed with another time is still a replay.
    let (text, sig) = signed(&s.operator, &request(&s, Action::Status, NOW, 1));
    assert_eq!(
        s.verifier.verify(&text, &sig, &s.binding, NOW),
        Err(VerifyError::Replayed([1; 16]))
    );
}

#[test]
fn every_refusal_names_its_reason() {
    let s = setup();
    let fresh = |nonce| request(&s, Action::Status, NOW, nonce);

    // Not an operator.
    let (text, sig) = signed(&s.stranger, &fresh(1));
    assert_eq!(
        s.verifier.verify(&text, &sig, &s.binding, NOW),
        Err(VerifyError::NotAnOperator(address_of(
            s.stranger.verifying_key()
        )))
    );
    // Another app, another compose hash.
    let other_app = OperatorRequest {
        app: [0x99; 20],
        ..fresh(2)
    };
    let (text, sig) = signed(&s.operator, &other_app);
    assert!(matches!(
        s.verifier.verify(&text, &sig, &s.binding, NOW),
        Err(VerifyError::WrongApp { .. })
    ));
    let other_code = OperatorRequest {
        compose_hash: [0x98; 32],
        ..fresh(3)
    };
    let (text, sig) = signed(&s.operator, &other_code);
    let err = s.verifier.verify(&text, &sig, &s.binding, NOW).unwrap_err();
    assert!(matches!(err, VerifyError::WrongComposeHash { .. }));
    assert!(err.to_string().contains(&"98".repeat(32)), "{err}");
    // Too old, too far ahead; the window's edges pass.
    for (i, (issued_at, ok)) in [
        (NOW - WINDOW_SECS - 1, false),
        (NOW + WINDOW_SECS + 1, false),
        (NOW - WINDOW_SECS, true),
        (NOW + WINDOW_SECS, true),
    ]
    .into_iter()
    .enumerate()
    {
        let r = request(&s, Action::Status, issued_at, 100 + i as u8);
        let (text, sig) = signed(&s.operator, &r);
        let got = s.verifier.verify(&text, &sig, &s.binding, NOW);
        assert_eq!(got.is_ok(), ok, "{issued_at}: {got:?}");
        if !ok {
            assert!(matches!(got, Err(VerifyError::Stale { .. })));
        }
    }
    // The text signed is the text checked: an edited text recovers someone else.
    let (text, sig) = signed(&s.operator, &fresh(4));
    let edited = text.replace("action: status", "action: export-root");
    assert!(matches!(
        s.verifier.verify(&edited, &sig, &s.binding, NOW),
        Err(VerifyError::NotAnOperator(_))
    ));
    // Garbage.
    assert!(matches!(
        s.verifier.verify("hello", &sig, &s.binding, NOW),
        Err(VerifyError::Parse(_))
    ));
    // A refused request does not use up its nonce.
    let (text, sig) = signed(&s.operator, &fresh(1));
    assert!(s.verifier.verify(&text, &sig, &s.binding, NOW).is_ok());
    // No operators configured: nothing passes.
    let off = Verifier::new(Vec::new());
    assert!(!off.enabled());
    let (text, sig) = signed(&s.operator, &fresh(5));
    assert_eq!(
        off.verify(&text, &sig, &s.binding, NOW),
        Err(VerifyError::NoOperators)
    );
}

/// The replay memory is bounded: past MAX_REMEMBERED fresh requests the next is refused,
/// and places come back as requests go stale.
#[test]
fn the_replay_memory_is_bounded() {
    let s = setup();
    for i in 0..MAX_REMEMBERED {
        let mut r = request(&s, Action::Status, NOW, 0);
        r.nonce[..8].copy_from_slice(&(i as u64).to_be_bytes());
        let (text, sig) = signed(&s.operator, &r);
        s.verifier.verify(&text, &sig, &s.binding, NOW).unwrap();
    }
    let mut r = request(&s, Action::Status, NOW, 0xff);
    let (text, sig) = signed(&s.operator, &r);
    assert_eq!(
        s.verifier.verify(&text, &sig, &s.binding, NOW),
        Err(VerifyError::Busy)
    );
    // Once the remembered ones are stale, there is room again.
    let later = NOW + WINDOW_SECS + 1;
    r.issued_at = later;
    let (text, sig) = signed(&s.operator, &r);
    assert!(s.verifier.verify(&text, &sig, &s.binding, later).is_ok());
}
