//! Ethereum account primitives: addresses of secp256k1 keys, EIP-55 text form.

use k256::ecdsa::VerifyingKey;
use sha3::{Digest, Keccak256};

/// A 20-byte Ethereum address.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Address(pub [u8; 20]);

impl Address {
    /// The address of a public key: the last 20 bytes of keccak256 of the 64-byte
    /// uncompressed point (without the 0x04 prefix).
    pub fn from_verifying_key(key: &VerifyingKey) -> Self {
        let point = key.to_encoded_point(false);
        let hash = Keccak256::digest(&point.as_bytes()[1..]);
        let mut out = [0u8; 20];
        out.copy_from_slice(&hash[12..]);
        Self(out)
    }

    /// Parses `0x` + 40 hex digits (any case; the checksum is not enforced on input).
    pub fn parse(text: &str) -> Option<Self> {
        let digits = text
            .strip_prefix("0x")
            .or_else(|| text.strip_prefix("0X"))?;
        if digits.len() != 40 {
            return None;
        }
        let mut out = [0u8; 20];
        hex::decode_to_slice(digits, &mut out).ok()?;
        Some(Self(out))
    }

    /// The EIP-55 mixed-case checksum form.
    pub fn to_checksum(&self) -> String {
        let lower = hex::encode(self.0);
        let hash = Keccak256::digest(lower.as_bytes());
        let mut out = String::with_capacity(42);
        out.push_str("0x");
        for (i, c) in lower.chars().enumerate() {
            let nibble = (hash[i / 2] >> if i % 2 == 0 { 4 } else { 0 }) & 0x0f;
            if c.is_ascii_alphabetic() && nibble >= 8 {
                out.push(c.to_ascii_uppercase());
            } else {
                out.push(c);
            }
        }
        out
    }
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_checksum())
    }
}

impl std::fmt::Debug for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Address({})", self.to_checksum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k256::ecdsa::SigningKey;

    #[derive(serde::Deserialize)]
    struct Vectors {
        vectors: Vec<Vector>,
    }
    #[derive(serde::Deserialize)]
    struct Vector {
        private_key: String,
        address: String,
        public_key: String,
    }

    /// ethers 5.7.2: private key → public key and checksummed address.
    #[test]
    fn matches_ethers_v5_vectors() {
        let text = include_str!("../tests/data/ethers-v5.json");
        let vectors: Vectors = serde_json::from_str(text).unwrap();
        assert!(!vectors.vectors.is_empty());
        for v in vectors.vectors {
            let sk = hex::decode(v.private_key.trim_start_matches("0x")).unwrap();
            let key = SigningKey::from_slice(&sk).unwrap();
            let vk = key.verifying_key();
            let public = format!("0x{}", hex::encode(vk.to_encoded_point(false).as_bytes()));
            assert_eq!(public, v.public_key);
            assert_eq!(Address::from_verifying_key(vk).to_checksum(), v.address);
            assert_eq!(
                Address::parse(&v.address).unwrap(),
                Address::from_verifying_key(vk)
            );
        }
    }

    #[test]
    fn parse_rejects_malformed() {
        for bad in [
            "",
            "0x",
            "0x1234",
            "70997970C51812dc3A010C7d01b50e0d17dc79C8",
            "0xZZ997970C51812dc3A010C7d01b50e0d17dc79C8",
        ] {
            assert!(Address::parse(bad).is_none(), "{bad}");
        }
    }
}
