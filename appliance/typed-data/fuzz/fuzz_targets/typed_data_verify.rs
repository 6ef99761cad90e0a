#![no_main]
//! The EIP-712 envelope check on arbitrary request bodies: `{"typed_data": …, "signature":
//! …}` as the signature endpoints receive them. The node's chain id and clock are taken
//! from the document itself (when it has them), so that mutations of a real signed
//! envelope reach the digest and signer recovery. Never a panic; the size limit holds; an
//! accepted envelope names the flow's primary type, is signed by its own
//! `message.address`, lies inside the time window and verifies the same way twice.

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use typed_data::{
    Flow, ISSUED_AT_WINDOW_SECS, MAX_TYPED_DATA_BYTES, TypedDataError, parse_address, verify,
};

fn number(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str()?.parse().ok())
}

fuzz_target!(|data: &[u8]| {
    let Ok(body) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let typed_data = body.get("typed_data").unwrap_or(&body);
    let signature = body
        .get("signature")
        .and_then(Value::as_str)
        .unwrap_or("0x");
    let chain_id = number(&typed_data["domain"]["chainId"]).unwrap_or(31337);
    let issued_at = number(&typed_data["message"]["issuedAt"]).unwrap_or(1_700_000_000);
    let size = serde_json::to_vec(typed_data).map_or(0, |v| v.len());
    // The clock at the issue time and just outside the window on either side.
    let nows = [
        i64::try_from(issued_at).unwrap_or(i64::MAX),
        i64::try_from(issued_at.saturating_add(ISSUED_AT_WINDOW_SECS + 1)).unwrap_or(i64::MAX),
        i64::try_from(issued_at)
            .unwrap_or(i64::MAX)
            .saturating_sub(ISSUED_AT_WINDOW_SECS as i64 + 1),
    ];
    for flow in Flow::ALL {
        for now in nows {
            let result = verify(typed_data, signature, flow, chain_id, now);
            if size > MAX_TYPED_DATA_BYTES {
                assert!(matches!(result, Err(TypedDataError::TooLarge { .. })));
                continue;
            }
            let Ok(verified) = result else { continue };
            assert_eq!(verified.flow, flow);
            assert_eq!(
                typed_data["primaryType"].as_str(),
                Some(flow.primary_type())
            );
            let stated = typed_data["message"]["address"]
                .as_str()
                .and_then(parse_address);
            assert_eq!(stated, Some(verified.signer));
            assert!(
                (i128::from(verified.issued_at) - i128::from(now)).abs()
                    <= i128::from(ISSUED_AT_WINDOW_SECS)
            );
            assert!(verified.remember_until() > now);
            assert_eq!(
                verify(typed_data, signature, flow, chain_id, now),
                Ok(verified),
                "verification is deterministic"
            );
        }
    }
    // Addresses: what parses prints back as the same 40 hex digits.
    if let Some(text) = body.get("address").and_then(Value::as_str)
        && let Some(address) = parse_address(text)
    {
        let printed: String = address
            .as_slice()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(format!("0x{printed}"), text.to_ascii_lowercase());
    }
});
