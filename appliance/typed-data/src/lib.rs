//! Wallet signatures over the spec's EIP-712 envelope (`docs/compatibility.md`, "Typed-data (EIP-712)
//! envelope"): parsing, every rejection rule, the EIP-712 digest and signer recovery.
//!
//! The envelope has exactly one shape per flow:
//!
//! ```text
//! types:       EIP712Domain = [name: string, version: string, chainId: uint256]
//!              <Primary>    = [address: address, issuedAt: uint256]
//! primaryType: CreateWallet | ConvertAccount | AddUsageApiKey | BillingAuth (one per flow)
//! domain:      {name: "Service ChainSecured", version: "1", chainId: the node's}
//! message:     {address, issuedAt}   (chainId and issuedAt: JSON numbers or decimal strings)
//! ```
//!
//! Anything else is refused with its own [`TypedDataError`]. Because the types are fixed,
//! the digest is computed directly from the two canonical type strings.
//!
//! Replay: [`Verified::digest`] identifies what was signed (not the signature bytes, which
//! an attacker could re-encode), and [`Verified::remember_until`] says how long the
//! service must remember it; the store keeps accepted digests (see
//! `appliance_store::signature_replay`).
//!
//! May depend on: no workspace crate (k256 and alloy's primitives for the digest and the
//! signer); never on `appliance` or `appliance-store`: it is a crate of its own so that its
//! fuzz target compiles only it.

use alloy_primitives::{Address, B256, U256, keccak256};
use k256::ecdsa::{RecoveryId, Signature, VerifyingKey};
use serde_json::{Map, Value};

/// Largest accepted `typed_data`, serialised (compact JSON), in bytes.
pub const MAX_TYPED_DATA_BYTES: usize = 4096;
/// Largest accepted distance between `issuedAt` and the server's clock, in seconds.
pub const ISSUED_AT_WINDOW_SECS: u64 = 300;
/// The EIP-712 domain name (the spec's neutral "Service" in place of the brand).
pub const DOMAIN_NAME: &str = "Service ChainSecured";
pub const DOMAIN_VERSION: &str = "1";

const DOMAIN_TYPE: &str = "EIP712Domain(string name,string version,uint256 chainId)";
const DOMAIN_FIELDS: [(&str, &str); 3] = [
    ("name", "string"),
    ("version", "string"),
    ("chainId", "uint256"),
];
const MESSAGE_FIELDS: [(&str, &str); 2] = [("address", "address"), ("issuedAt", "uint256")];
const TOP_LEVEL: [&str; 4] = ["types", "primaryType", "domain", "message"];

/// The flows a wallet signature authorizes; each has its own `primaryType`, so a signature
/// made for one is never valid for another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flow {
    /// `POST /create_wallet_with_signature`.
    CreateWallet,
    /// `POST /convert_to_chain_secured_account`.
    ConvertAccount,
    /// `POST /add_usage_api_key_with_signature`.
    AddUsageApiKey,
    /// The `X-Wallet-Auth` billing header.
    BillingAuth,
}

impl Flow {
    pub const ALL: [Flow; 4] = [
        Self::CreateWallet,
        Self::ConvertAccount,
        Self::AddUsageApiKey,
        Self::BillingAuth,
    ];

    /// The `primaryType` (and struct name) of this flow.
    pub fn primary_type(self) -> &'static str {
        match self {
            Self::CreateWallet => "CreateWallet",
            Self::ConvertAccount => "ConvertAccount",
            Self::AddUsageApiKey => "AddUsageApiKey",
            Self::BillingAuth => "BillingAuth",
        }
    }

    /// `keccak256("<Primary>(address address,uint256 issuedAt)")`.
    fn type_hash(self) -> B256 {
        keccak256(format!(
            "{}(address address,uint256 issuedAt)",
            self.primary_type()
        ))
    }
}

/// Why a signed envelope was refused. Each rule has its own variant and sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TypedDataError {
    #[error(
        "typed_data is {size} bytes when serialised; at most {MAX_TYPED_DATA_BYTES} are accepted"
    )]
    TooLarge { size: usize },
    #[error("typed_data is malformed: {0}")]
    Malformed(String),
    #[error("typed_data.types differ from the canonical EIP-712 types: {0}")]
    TypesMismatch(String),
    #[error(
        "typed_data.primaryType is `{found}`, but this endpoint accepts only `{expected}` signatures"
    )]
    WrongPrimaryType {
        expected: &'static str,
        found: String,
    },
    #[error("typed_data.domain.name must be `{DOMAIN_NAME}`")]
    WrongDomainName,
    #[error("typed_data.domain.version must be `{DOMAIN_VERSION}`")]
    WrongDomainVersion,
    #[error("typed_data.domain.chainId is {found}, but this node's chain id is {expected}")]
    WrongChainId { expected: u64, found: String },
    #[error(
        "typed_data.message.issuedAt ({issued_at}) is more than {ISSUED_AT_WINDOW_SECS} seconds away from the server's time ({now}); sign a fresh message"
    )]
    IssuedAtOutOfWindow { issued_at: String, now: i64 },
    #[error(
        "signature must be 0x followed by 65 bytes (130 hex digits), as eth_signTypedData_v4 returns"
    )]
    SignatureFormat,
    #[error("signature is not a valid secp256k1 signature ({0})")]
    SignatureInvalid(&'static str),
    #[error("the signature recovers to {recovered}, not to typed_data.message.address {stated}")]
    WrongSigner { recovered: Address, stated: Address },
    #[error("the typed data is signed by {signer}, not by new_admin_wallet_address {expected}")]
    NotNewAdmin { signer: Address, expected: Address },
    #[error(
        "this signature was already accepted once; a signature is never accepted twice, sign a new message"
    )]
    Replayed,
}

/// A signature that passed every rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    pub flow: Flow,
    /// The wallet that signed (= `message.address`).
    pub signer: Address,
    pub issued_at: u64,
    /// The EIP-712 digest that was signed: the replay-protection key.
    pub digest: B256,
}

impl Verified {
    /// Until when (Unix seconds) the digest must be remembered: after that, the window
    /// check alone refuses it.
    pub fn remember_until(&self) -> i64 {
        let until = self.issued_at.saturating_add(ISSUED_AT_WINDOW_SECS + 1);
        i64::try_from(until).unwrap_or(i64::MAX)
    }
}

/// The checked fields of an envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Envelope {
    chain_id: u64,
    issued_at: u64,
    address: Address,
}

/// Checks `typed_data` and `signature` for `flow` on chain `chain_id` at time `now` (Unix
/// seconds), and returns the signer. Replay is the caller's concern (the store).
pub fn verify(
    typed_data: &Value,
    signature: &str,
    flow: Flow,
    chain_id: u64,
    now: i64,
) -> Result<Verified, TypedDataError> {
    let size = serde_json::to_vec(typed_data)
        .map(|v| v.len())
        .map_err(|e| TypedDataError::Malformed(e.to_string()))?;
    if size > MAX_TYPED_DATA_BYTES {
        return Err(TypedDataError::TooLarge { size });
    }
    let envelope = parse(typed_data, flow, chain_id, now)?;
    let digest = digest(flow, &envelope);
    let recovered = recover(&digest, signature)?;
    if recovered != envelope.address {
        return Err(TypedDataError::WrongSigner {
            recovered,
            stated: envelope.address,
        });
    }
    Ok(Verified {
        flow,
        signer: recovered,
        issued_at: envelope.issued_at,
        digest,
    })
}

fn malformed(msg: impl Into<String>) -> TypedDataError {
    TypedDataError::Malformed(msg.into())
}

fn object<'a>(value: &'a Value, what: &str) -> Result<&'a Map<String, Value>, TypedDataError> {
    value
        .as_object()
        .ok_or_else(|| malformed(format!("{what} must be a JSON object")))
}

fn field<'a>(
    map: &'a Map<String, Value>,
    key: &str,
    what: &str,
) -> Result<&'a Value, TypedDataError> {
    map.get(key)
        .ok_or_else(|| malformed(format!("{what}.{key} is missing")))
}

/// Refuses keys of `map` outside `allowed`.
fn only_keys(map: &Map<String, Value>, allowed: &[&str], what: &str) -> Result<(), TypedDataError> {
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(extra) => Err(malformed(format!(
            "{what} has an unexpected field `{extra}`"
        ))),
        None => Ok(()),
    }
}

/// A `uint256` given as a JSON number or a decimal string; `Ok(None)` when it is a valid
/// number that does not fit in 64 bits.
fn uint(value: &Value, what: &str) -> Result<(Option<u64>, String), TypedDataError> {
    let bad = || {
        malformed(format!(
            "{what} must be a non-negative integer (JSON number or decimal string)"
        ))
    };
    match value {
        Value::Number(n) => match n.as_u64() {
            Some(v) => Ok((Some(v), v.to_string())),
            None => Err(bad()),
        },
        Value::String(s) => {
            if s.is_empty() || s.len() > 78 || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            if U256::from_str_radix(s, 10).is_err() {
                return Err(bad());
            }
            Ok((s.parse::<u64>().ok(), s.clone()))
        }
        _ => Err(bad()),
    }
}

fn check_type_list(
    types: &Map<String, Value>,
    name: &str,
    canonical: &[(&str, &str)],
) -> Result<(), TypedDataError> {
    let mismatch = |msg: String| TypedDataError::TypesMismatch(msg);
    let list = types
        .get(name)
        .ok_or_else(|| mismatch(format!("type `{name}` is missing")))?
        .as_array()
        .ok_or_else(|| mismatch(format!("`{name}` must be a list of fields")))?;
    let expected = canonical
        .iter()
        .map(|(n, t)| format!("{t} {n}"))
        .collect::<Vec<_>>()
        .join(",");
    let wrong = || {
        mismatch(format!(
            "`{name}` must be exactly ({expected}), in this order"
        ))
    };
    if list.len() != canonical.len() {
        return Err(wrong());
    }
    for (entry, (want_name, want_type)) in list.iter().zip(canonical) {
        let entry = entry.as_object().ok_or_else(wrong)?;
        if entry.len() != 2
            || entry.get("name").and_then(Value::as_str) != Some(want_name)
            || entry.get("type").and_then(Value::as_str) != Some(want_type)
        {
            return Err(wrong());
        }
    }
    Ok(())
}

fn parse(
    typed_data: &Value,
    flow: Flow,
    node_chain_id: u64,
    now: i64,
) -> Result<Envelope, TypedDataError> {
    let top = object(typed_data, "typed_data")?;
    only_keys(top, &TOP_LEVEL, "typed_data")?;

    let primary = field(top, "primaryType", "typed_data")?
        .as_str()
        .ok_or_else(|| malformed("typed_data.primaryType must be a string"))?;
    if primary != flow.primary_type() {
        return Err(TypedDataError::WrongPrimaryType {
            expected: flow.primary_type(),
            found: primary.chars().take(64).collect(),
        });
    }

    let types = field(top, "types", "typed_data")?
        .as_object()
        .ok_or_else(|| TypedDataError::TypesMismatch("types must be a JSON object".into()))?;
    if let Some(extra) = types
        .keys()
        .find(|k| k.as_str() != "EIP712Domain" && k.as_str() != primary)
    {
        return Err(TypedDataError::TypesMismatch(format!(
            "unexpected type `{}`; only EIP712Domain and {primary} are allowed",
            extra.chars().take(64).collect::<String>()
        )));
    }
    check_type_list(types, "EIP712Domain", &DOMAIN_FIELDS)?;
    check_type_list(types, primary, &MESSAGE_FIELDS)?;

    let domain = object(field(top, "domain", "typed_data")?, "typed_data.domain")?;
    only_keys(domain, &["name", "version", "chainId"], "typed_data.domain")?;
    if field(domain, "name", "typed_data.domain")?.as_str() != Some(DOMAIN_NAME) {
        return Err(TypedDataError::WrongDomainName);
    }
    if field(domain, "version", "typed_data.domain")?.as_str() != Some(DOMAIN_VERSION) {
        return Err(TypedDataError::WrongDomainVersion);
    }
    let (chain_id, chain_text) = uint(
        field(domain, "chainId", "typed_data.domain")?,
        "typed_data.domain.chainId",
    )?;
    if chain_id != Some(node_chain_id) {
        return Err(TypedDataError::WrongChainId {
            expected: node_chain_id,
            found: chain_text,
        });
    }

    let message = object(field(top, "message", "typed_data")?, "typed_data.message")?;
    only_keys(message, &["address", "issuedAt"], "typed_data.message")?;
    let address_text = field(message, "address", "typed_data.message")?
        .as_str()
        .ok_or_else(|| malformed("typed_data.message.address must be a string"))?;
    let address = parse_address(address_text).ok_or_else(|| {
        malformed("typed_data.message.address must be 0x followed by 40 hex digits")
    })?;
    let (issued_at, issued_text) = uint(
        field(message, "issuedAt", "typed_data.message")?,
        "typed_data.message.issuedAt",
    )?;
    let in_window = issued_at
        .is_some_and(|t| i64::try_from(t).is_ok_and(|t| t.abs_diff(now) <= ISSUED_AT_WINDOW_SECS));
    let Some(issued_at) = issued_at.filter(|_| in_window) else {
        return Err(TypedDataError::IssuedAtOutOfWindow {
            issued_at: issued_text,
            now,
        });
    };
    Ok(Envelope {
        chain_id: node_chain_id,
        issued_at,
        address,
    })
}

/// `0x` + 40 hex digits, any case.
pub fn parse_address(text: &str) -> Option<Address> {
    let hex_digits = text.strip_prefix("0x")?;
    if hex_digits.len() != 40 {
        return None;
    }
    let bytes = hex::decode(hex_digits).ok()?;
    Some(Address::from_slice(&bytes))
}

fn word(v: u64) -> [u8; 32] {
    U256::from(v).to_be_bytes::<32>()
}

/// The EIP-712 digest: `keccak256(0x1901 ‖ domainSeparator ‖ hashStruct(message))`.
fn digest(flow: Flow, envelope: &Envelope) -> B256 {
    let mut domain = Vec::with_capacity(4 * 32);
    domain.extend_from_slice(keccak256(DOMAIN_TYPE).as_slice());
    domain.extend_from_slice(keccak256(DOMAIN_NAME).as_slice());
    domain.extend_from_slice(keccak256(DOMAIN_VERSION).as_slice());
    domain.extend_from_slice(&word(envelope.chain_id));
    let domain_separator = keccak256(&domain);

    let mut message = Vec::with_capacity(3 * 32);
    message.extend_from_slice(flow.type_hash().as_slice());
    message.extend_from_slice(&[0u8; 12]);
    message.extend_from_slice(envelope.address.as_slice());
    message.extend_from_slice(&word(envelope.issued_at));
    let struct_hash = keccak256(&message);

    let mut payload = Vec::with_capacity(2 + 64);
    payload.extend_from_slice(&[0x19, 0x01]);
    payload.extend_from_slice(domain_separator.as_slice());
    payload.extend_from_slice(struct_hash.as_slice());
    keccak256(&payload)
}

/// Recovers the address that made `signature` (`r ‖ s ‖ v`, v = 27/28 or 0/1) over
/// `digest`. High-s signatures are refused (they are the malleated twin of a low-s one).
fn recover(digest: &B256, signature: &str) -> Result<Address, TypedDataError> {
    let hex_digits = signature
        .strip_prefix("0x")
        .filter(|h| h.len() == 130)
        .ok_or(TypedDataError::SignatureFormat)?;
    let bytes = hex::decode(hex_digits).map_err(|_| TypedDataError::SignatureFormat)?;
    let v = match bytes[64] {
        0 | 27 => 0,
        1 | 28 => 1,
        _ => return Err(TypedDataError::SignatureInvalid("v must be 27 or 28")),
    };
    let sig = Signature::from_slice(&bytes[..64])
        .map_err(|_| TypedDataError::SignatureInvalid("r or s is out of range"))?;
    if sig.normalize_s().is_some() {
        return Err(TypedDataError::SignatureInvalid(
            "s is not in the lower half",
        ));
    }
    let recovery_id =
        RecoveryId::from_byte(v).ok_or(TypedDataError::SignatureInvalid("bad recovery id"))?;
    let key = VerifyingKey::recover_from_prehash(digest.as_slice(), &sig, recovery_id)
        .map_err(|_| TypedDataError::SignatureInvalid("no public key recovers from it"))?;
    let point = key.to_encoded_point(false);
    let hash = keccak256(&point.as_bytes()[1..]);
    Ok(Address::from_slice(&hash[12..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k256::ecdsa::SigningKey;
    use serde_json::json;

    /// Signed with viem 2.57.20 `signTypedData` (provenance in `tests/vectors/README.md`).
    const VECTORS: &str = include_str!("../../../tests/vectors/eip712.json");
    const NOW: i64 = 1_700_000_000;
    const KEY_A: &str = "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
    const KEY_B: &str = "5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a";

    fn vectors() -> Vec<Value> {
        let doc: Value = serde_json::from_str(VECTORS).unwrap();
        doc["vectors"].as_array().unwrap().clone()
    }

    fn flow_named(name: &str) -> Flow {
        Flow::ALL
            .into_iter()
            .find(|f| f.primary_type() == name)
            .unwrap()
    }

    fn key(hex_key: &str) -> SigningKey {
        SigningKey::from_slice(&hex::decode(hex_key).unwrap()).unwrap()
    }

    fn address_of(key: &SigningKey) -> Address {
        let point = key.verifying_key().to_encoded_point(false);
        Address::from_slice(&keccak256(&point.as_bytes()[1..])[12..])
    }

    fn envelope(flow: Flow, chain_id: Value, address: Address, issued_at: Value) -> Value {
        json!({
            "types": {
                "EIP712Domain": [
                    {"name": "name", "type": "string"},
                    {"name": "version", "type": "string"},
                    {"name": "chainId", "type": "uint256"}
                ],
                flow.primary_type(): [
                    {"name": "address", "type": "address"},
                    {"name": "issuedAt", "type": "uint256"}
                ]
            },
            "primaryType": flow.primary_type(),
            "domain": {"name": DOMAIN_NAME, "version": "1", "chainId": chain_id},
            "message": {"address": address.to_checksum(None), "issuedAt": issued_at}
        })
    }

    /// Signs the digest of a canonical envelope, as a wallet would.
    fn sign(
        key: &SigningKey,
        flow: Flow,
        chain_id: u64,
        address: Address,
        issued_at: u64,
    ) -> String {
        let digest = digest(
            flow,
            &Envelope {
                chain_id,
                issued_at,
                address,
            },
        );
        let (sig, recid) = key.sign_prehash_recoverable(digest.as_slice()).unwrap();
        let mut bytes = sig.to_bytes().to_vec();
        bytes.push(27 + recid.to_byte());
        format!("0x{}", hex::encode(bytes))
    }

    /// A valid CreateWallet envelope and signature by key A at NOW.
    fn valid() -> (Value, String, Address) {
        let k = key(KEY_A);
        let a = address_of(&k);
        let td = envelope(Flow::CreateWallet, json!(31337), a, json!(NOW));
        let sig = sign(&k, Flow::CreateWallet, 31337, a, NOW as u64);
        (td, sig, a)
    }

    fn check(td: &Value, sig: &str) -> Result<Verified, TypedDataError> {
        verify(td, sig, Flow::CreateWallet, 31337, NOW)
    }

    #[test]
    fn every_shared_vector_verifies_with_its_digest_and_signer() {
        let vectors = vectors();
        assert_eq!(vectors.len(), 16);
        for v in vectors {
            let td = &v["typed_data"];
            let flow = flow_named(td["primaryType"].as_str().unwrap());
            let chain_id: u64 = td["domain"]["chainId"].as_str().unwrap().parse().unwrap();
            let issued: i64 = td["message"]["issuedAt"].as_str().unwrap().parse().unwrap();
            let got = verify(td, v["signature"].as_str().unwrap(), flow, chain_id, issued)
                .unwrap_or_else(|e| panic!("{v}: {e}"));
            assert_eq!(got.digest.to_string(), v["digest"].as_str().unwrap());
            let stated = parse_address(v["address"].as_str().unwrap()).unwrap();
            assert_eq!(got.signer, stated);
            assert_eq!(
                address_of(&key(&v["private_key"].as_str().unwrap()[2..])),
                stated
            );
            // The same signature is refused by every other flow.
            for other in Flow::ALL.into_iter().filter(|f| *f != flow) {
                assert!(matches!(
                    verify(
                        td,
                        v["signature"].as_str().unwrap(),
                        other,
                        chain_id,
                        issued
                    ),
                    Err(TypedDataError::WrongPrimaryType { .. })
                ));
            }
        }
    }

    #[test]
    fn a_fresh_signature_verifies_and_numbers_or_strings_are_equivalent() {
        let (td, sig, a) = valid();
        let ok = check(&td, &sig).unwrap();
        assert_eq!(ok.signer, a);
        assert_eq!(ok.remember_until(), NOW + 301);
        let mut as_strings = td.clone();
        as_strings["domain"]["chainId"] = json!("31337");
        as_strings["message"]["issuedAt"] = json!(NOW.to_string());
        assert_eq!(check(&as_strings, &sig).unwrap(), ok);
        // Lower-case address and v = 0/1 are the same signature.
        let mut lower = td.clone();
        lower["message"]["address"] = json!(format!("{a:#x}"));
        let mut raw = hex::decode(&sig[2..]).unwrap();
        raw[64] -= 27;
        assert_eq!(
            check(&lower, &format!("0x{}", hex::encode(raw))).unwrap(),
            ok
        );
    }

    #[test]
    fn one_changed_message_field_breaks_the_signature() {
        let (mut td, sig, _) = valid();
        td["message"]["issuedAt"] = json!(NOW + 1);
        assert!(matches!(
            check(&td, &sig),
            Err(TypedDataError::WrongSigner { .. })
        ));
    }

    #[test]
    fn reordered_fields_are_refused() {
        let (mut td, sig, _) = valid();
        td["types"]["CreateWallet"] = json!([
            {"name": "issuedAt", "type": "uint256"},
            {"name": "address", "type": "address"}
        ]);
        let err = check(&td, &sig).unwrap_err();
        assert!(matches!(err, TypedDataError::TypesMismatch(_)), "{err}");
        let (mut td, sig, _) = valid();
        td["types"]["EIP712Domain"] = json!([
            {"name": "version", "type": "string"},
            {"name": "name", "type": "string"},
            {"name": "chainId", "type": "uint256"}
        ]);
        assert!(matches!(
            check(&td, &sig),
            Err(TypedDataError::TypesMismatch(_))
        ));
    }

    #[test]
    fn an_extra_or_missing_type_or_field_is_refused() {
        let (mut td, sig, _) = valid();
        td["types"]["Extra"] = json!([{"name": "x", "type": "uint256"}]);
        let err = check(&td, &sig).unwrap_err();
        assert!(err.to_string().contains("unexpected type `Extra`"), "{err}");
        let (mut td, sig, _) = valid();
        td["types"]["CreateWallet"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "nonce", "type": "uint256"}));
        assert!(matches!(
            check(&td, &sig),
            Err(TypedDataError::TypesMismatch(_))
        ));
        let (mut td, sig, _) = valid();
        td["types"]["CreateWallet"][1]["type"] = json!("uint64");
        assert!(matches!(
            check(&td, &sig),
            Err(TypedDataError::TypesMismatch(_))
        ));
        let (mut td, sig, _) = valid();
        td["types"].as_object_mut().unwrap().remove("EIP712Domain");
        assert!(matches!(
            check(&td, &sig),
            Err(TypedDataError::TypesMismatch(_))
        ));
        let (mut td, sig, _) = valid();
        td["domain"]["verifyingContract"] = json!(format!("0x{}", "1".repeat(40)));
        assert!(matches!(
            check(&td, &sig),
            Err(TypedDataError::Malformed(_))
        ));
        let (mut td, sig, _) = valid();
        td["message"]["nonce"] = json!(1);
        assert!(matches!(
            check(&td, &sig),
            Err(TypedDataError::Malformed(_))
        ));
    }

    #[test]
    fn the_primary_type_must_be_the_endpoints() {
        let k = key(KEY_A);
        let a = address_of(&k);
        let td = envelope(Flow::ConvertAccount, json!(31337), a, json!(NOW));
        let sig = sign(&k, Flow::ConvertAccount, 31337, a, NOW as u64);
        assert!(verify(&td, &sig, Flow::ConvertAccount, 31337, NOW).is_ok());
        let err = check(&td, &sig).unwrap_err();
        assert_eq!(
            err,
            TypedDataError::WrongPrimaryType {
                expected: "CreateWallet",
                found: "ConvertAccount".into()
            }
        );
    }

    #[test]
    fn domain_name_version_and_chain_id_are_checked() {
        let (mut td, sig, _) = valid();
        td["domain"]["name"] = json!("Other");
        assert_eq!(check(&td, &sig), Err(TypedDataError::WrongDomainName));
        let (mut td, sig, _) = valid();
        td["domain"]["version"] = json!("2");
        assert_eq!(check(&td, &sig), Err(TypedDataError::WrongDomainVersion));
        // Properly signed for another chain: refused on the chain id, not the signature.
        let k = key(KEY_A);
        let a = address_of(&k);
        let td = envelope(Flow::CreateWallet, json!("8453"), a, json!(NOW));
        let sig = sign(&k, Flow::CreateWallet, 8453, a, NOW as u64);
        assert!(verify(&td, &sig, Flow::CreateWallet, 8453, NOW).is_ok());
        assert_eq!(
            check(&td, &sig),
            Err(TypedDataError::WrongChainId {
                expected: 31337,
                found: "8453".into()
            })
        );
    }

    #[test]
    fn issued_at_must_be_within_300_seconds() {
        let k = key(KEY_A);
        let a = address_of(&k);
        for (offset, ok) in [(-301i64, false), (301, false), (-300, true), (300, true)] {
            let t = (NOW + offset) as u64;
            let td = envelope(Flow::CreateWallet, json!(31337), a, json!(t));
            let sig = sign(&k, Flow::CreateWallet, 31337, a, t);
            let got = check(&td, &sig);
            assert_eq!(got.is_ok(), ok, "{offset}: {got:?}");
            if !ok {
                assert!(matches!(
                    got,
                    Err(TypedDataError::IssuedAtOutOfWindow { .. })
                ));
            }
        }
    }

    #[test]
    fn a_signature_by_another_wallet_is_refused() {
        let signer = key(KEY_B);
        let stated = address_of(&key(KEY_A));
        let td = envelope(Flow::CreateWallet, json!(31337), stated, json!(NOW));
        let sig = sign(&signer, Flow::CreateWallet, 31337, stated, NOW as u64);
        assert_eq!(
            check(&td, &sig),
            Err(TypedDataError::WrongSigner {
                recovered: address_of(&signer),
                stated
            })
        );
    }

    #[test]
    fn signature_encoding_is_checked() {
        let (td, sig, _) = valid();
        for bad in [&sig[2..], &sig[..sig.len() - 2], "0x", "0xzz"] {
            assert_eq!(
                check(&td, bad),
                Err(TypedDataError::SignatureFormat),
                "{bad}"
            );
        }
        let mut raw = hex::decode(&sig[2..]).unwrap();
        raw[64] = 29;
        assert!(matches!(
            check(&td, &format!("0x{}", hex::encode(&raw))),
            Err(TypedDataError::SignatureInvalid(_))
        ));
        // The malleated twin (s' = n - s, v flipped) is refused.
        let sig_obj = Signature::from_slice(&hex::decode(&sig[2..]).unwrap()[..64]).unwrap();
        let (r, s) = sig_obj.split_scalars();
        let twin = Signature::from_scalars(r, -*s).unwrap();
        let mut raw = twin.to_bytes().to_vec();
        raw.push(if hex::decode(&sig[2..]).unwrap()[64] == 27 {
            28
        } else {
            27
        });
        assert_eq!(
            check(&td, &format!("0x{}", hex::encode(raw))),
            Err(TypedDataError::SignatureInvalid(
                "s is not in the lower half"
            ))
        );
    }

    #[test]
    fn the_size_limit_is_4_kib_serialised() {
        let (td, sig, _) = valid();
        let base = serde_json::to_vec(&td).unwrap().len();
        let padded = |total: usize| {
            let mut td = td.clone();
            // `,"padding":""` adds 13 bytes plus the padding itself.
            td["padding"] = json!("x".repeat(total - base - 13));
            assert_eq!(serde_json::to_vec(&td).unwrap().len(), total);
            td
        };
        assert_eq!(
            check(&padded(MAX_TYPED_DATA_BYTES + 1), &sig),
            Err(TypedDataError::TooLarge { size: 4097 })
        );
        // Exactly 4096 bytes passes the size rule (and is then refused for the extra field).
        assert!(matches!(
            check(&padded(MAX_TYPED_DATA_BYTES), &sig),
            Err(TypedDataError::Malformed(_))
        ));
    }

    #[test]
    fn malformed_values_are_named() {
        let (td, sig, _) = valid();
        for (path, value) in [
            ("issuedAt", json!(-1)),
            ("issuedAt", json!(1.5)),
            ("issuedAt", json!("0x10")),
            ("issuedAt", json!(null)),
            ("address", json!("0x1234")),
        ] {
            let mut bad = td.clone();
            bad["message"][path] = value;
            let err = check(&bad, &sig).unwrap_err();
            assert!(err.to_string().contains(path), "{err}");
        }
        assert!(matches!(
            check(&json!([]), &sig),
            Err(TypedDataError::Malformed(_))
        ));
        // A uint256 beyond 64 bits is a number, but outside the window.
        let mut far = td.clone();
        far["message"]["issuedAt"] = json!("1".repeat(40));
        assert!(matches!(
            check(&far, &sig),
            Err(TypedDataError::IssuedAtOutOfWindow { .. })
        ));
    }
}
