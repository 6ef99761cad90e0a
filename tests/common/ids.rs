//! The identifiers the API speaks, made and checked on the client side: keccak hashes,
//! well-formed CIDs, EIP-55 addresses. Encodings come from their crates (bs58,
//! data-encoding, alloy); the wrappers name the exact variant the service uses.

/// keccak256 of `data` as `0x` + 64 lowercase hex (a `pkp_id` or a `hashed_cid`).
pub fn keccak_hex(data: &[u8]) -> String {
    use sha3::{Digest, Keccak256};
    format!("0x{}", hex::encode(Keccak256::digest(data)))
}

/// `0x` + `n` zero hex digits: the zero pkp_id (64) or the zero address (40).
pub fn zeros(n: usize) -> String {
    format!("0x{}", "0".repeat(n))
}

/// Bitcoin-alphabet base58 (as CIDv0 uses).
pub fn base58btc(bytes: &[u8]) -> String {
    bs58::encode(bytes).into_string()
}

/// RFC 4648 base32, lowercase, unpadded (as a multibase `b…` CIDv1 uses).
pub fn base32_lower(bytes: &[u8]) -> String {
    data_encoding::BASE32_NOPAD
        .encode(bytes)
        .to_ascii_lowercase()
}

/// A well-formed CIDv0 (`Qm…`, sha2-256 multihash) whose digest is derived from `seed`,
/// so each seed names a distinct action. (The digest is not the hash of any code; the
/// service only checks a CID's form.)
pub fn cid_v0(seed: &str) -> String {
    use sha3::{Digest, Keccak256};
    let mut multihash = vec![0x12, 0x20];
    multihash.extend_from_slice(&Keccak256::digest(seed.as_bytes()));
    base58btc(&multihash)
}

/// A well-formed CIDv1 in multibase base32 (`b…`): version 1, dag-pb, sha2-256.
pub fn cid_v1(seed: &str) -> String {
    use sha3::{Digest, Keccak256};
    let mut bytes = vec![0x01, 0x70, 0x12, 0x20];
    bytes.extend_from_slice(&Keccak256::digest(seed.as_bytes()));
    format!("b{}", base32_lower(&bytes))
}

/// EIP-55 checksum form of a 20-byte address given as hex (any case, `0x` optional).
pub fn eip55(address: &str) -> String {
    let digits = address
        .strip_prefix("0x")
        .or_else(|| address.strip_prefix("0X"))
        .unwrap_or(address);
    let address: alloy::primitives::Address = digits
        .parse()
        .unwrap_or_else(|err| panic!("{address:?} is not a 20-byte hex address: {err}"));
    address.to_checksum(None)
}

/// True if `s` is `0x` followed by exactly `n` lowercase hex digits.
pub fn is_lower_hex(s: &str, n: usize) -> bool {
    s.strip_prefix("0x").is_some_and(|h| {
        h.len() == n
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}
