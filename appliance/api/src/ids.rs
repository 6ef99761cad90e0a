//! The values requests name things by, each a newtype whose schema carries the pattern of
//! exactly what the server accepts: a [`HashedCid`], a [`Cid`], a wallet's
//! [`PkpIdOrAddress`], a usage key's [`UsageKeyRef`], a [`WalletAddress`], a Stripe
//! [`PaymentIntentId`], and an entry of a group's permitted actions
//! ([`PermittedCidHash`]); group ids are [`crate::WireU64`].
//!
//! On the wire each is the JSON string it holds (`#[serde(transparent)]`): deserializing
//! does not check the value, the server does (with the sentence naming the field that it
//! always had), so the types change what clients are told, not what the server answers.
//! Where the server trims surrounding whitespace before parsing, the pattern allows it
//! too. `appliance/src/api/wire_formats.rs` holds every pattern against the server's parser:
//! what a pattern allows, the parser accepts; what it refuses, the parser refuses.

use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Serialize};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};

use crate::pattern;

/// A string schema with `pattern`, a description and an example.
fn string_schema(pattern: String, description: &str, example: &str) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(pattern))
        .description(Some(description))
        .examples([serde_json::Value::from(example)])
        .into()
}

/// Declares a string newtype, its conversions and its schema.
macro_rules! wire_string {
    ($(#[$doc:meta])* $name:ident, $schema:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            pub fn new(value: impl Into<String>) -> Self {
                Self(value.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl From<String> for $name {
            fn from(value: String) -> Self {
                Self(value)
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                Self(value.to_owned())
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> Self {
                value.0
            }
        }

        impl Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                $schema
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}

wire_string!(
    /// A hashed CID: `0x` + 64 hex digits, keccak256 of the CID text (as `list_actions`
    /// returns it). The `0x` may be `0X` or absent; surrounding whitespace is ignored.
    HashedCid,
    string_schema(
        pattern::trimmed("(?:0[xX])?[0-9a-fA-F]{64}"),
        "keccak256 of the CID text: 0x + 64 hex digits (the 0x may be 0X or absent; surrounding whitespace is ignored).",
        "0xd81a3989ee7bd419c797813dfc27dd567737973eabdc6fd38b72442a7af0b5b5",
    )
);

wire_string!(
    /// The IPFS CID of action code, exactly as written (nothing is trimmed: the service
    /// hashes the text): a CIDv0 (`Qm…`, base58btc of a sha2-256 multihash) or a CIDv1 in
    /// lowercase base32 (`b…`). The pattern describes every CIDv0 and every CIDv1 with a
    /// sha2-256 multihash; the server also accepts a CIDv1 with another multihash (a
    /// 1-to-64-byte digest), which no pattern of reasonable size describes.
    Cid,
    string_schema(
        pattern::whole(&format!("{}|{}", pattern::cid_v0(), pattern::cid_v1_sha256())),
        "An IPFS CID, exactly as written: a CIDv0 (Qm…, base58btc of a sha2-256 multihash) or a CIDv1 in lowercase base32 (b…: raw, dag-pb, dag-cbor, libp2p-key or dag-json). The pattern covers every CIDv0 and every sha2-256 CIDv1; a CIDv1 with another multihash (1 to 64 digest bytes) is accepted too.",
        "QmZr5qtNmcxBdpXF7K7hSkLbxK2wUVhMhZn29PKzhynvcR",
    )
);

wire_string!(
    /// A wallet of the account: its `pkp_id` (`0x` + 64 hex) or its address (`0x` + 40
    /// hex). The `0x` may be `0X` or absent; surrounding whitespace is ignored.
    PkpIdOrAddress,
    string_schema(
        pattern::trimmed("(?:0[xX])?(?:[0-9a-fA-F]{64}|[0-9a-fA-F]{40})"),
        "A wallet: its pkp_id (0x + 64 hex digits) or its address (0x + 40 hex digits); the 0x may be 0X or absent, surrounding whitespace is ignored.",
        "0x8d6e3f5b1b52e1a1c1d9c4f9d6d6a1b3a0e7d2c4b5a69788f0e1d2c3b4a59687",
    )
);

wire_string!(
    /// A usage key named in an update or removal: its value (standard padded base64 of
    /// 32 bytes, 44 characters) or its hash (`0x` or `0X` + 64 hex). Surrounding
    /// whitespace is ignored.
    UsageKeyRef,
    string_schema(
        pattern::trimmed("[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=|0[xX][0-9a-fA-F]{64}"),
        "The usage key's value (standard padded base64 of 32 bytes, 44 characters) or its 0x + 64-hex hash; surrounding whitespace is ignored.",
        "0x288028dd4d3aab664b95651ac365cb83e98c08fde24ae08dbee9e82051776976",
    )
);

wire_string!(
    /// A wallet address that is not zero: `0x` (lowercase) + 40 hex digits, any case.
    /// Surrounding whitespace is ignored.
    WalletAddress,
    string_schema(
        pattern::trimmed(&pattern::nonzero_address()),
        "A non-zero address: 0x + 40 hex digits (any case; no EIP-55 check); surrounding whitespace is ignored.",
        "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
    )
);

wire_string!(
    /// A Stripe payment intent id: `pi_` and 1 to 252 ASCII letters and digits.
    /// Surrounding whitespace is ignored.
    PaymentIntentId,
    string_schema(
        pattern::trimmed("pi_[A-Za-z0-9]{1,252}"),
        "A Stripe payment intent id: pi_ and ASCII letters and digits, 255 characters at most; surrounding whitespace is ignored.",
        "pi_3MtwBwLkdIwHu7ix28a3tqPa",
    )
);

/// An entry of a group's `cid_hashes_permitted`: a [`HashedCid`], or `0` (the number or
/// the string) for all actions. On the wire the JSON value as it is; the server reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PermittedCidHash(pub serde_json::Value);

impl PermittedCidHash {
    /// `0`: every action of the account.
    pub fn all() -> Self {
        Self(serde_json::Value::from(0))
    }
}

impl From<HashedCid> for PermittedCidHash {
    fn from(hash: HashedCid) -> Self {
        Self(serde_json::Value::String(hash.0))
    }
}

impl From<String> for PermittedCidHash {
    fn from(text: String) -> Self {
        Self(serde_json::Value::String(text))
    }
}

impl From<&str> for PermittedCidHash {
    fn from(text: &str) -> Self {
        Self(serde_json::Value::from(text))
    }
}

impl utoipa::PartialSchema for PermittedCidHash {
    fn schema() -> RefOr<Schema> {
        OneOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .enum_values(Some([0])),
            )
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some(pattern::trimmed("0|(?:0[xX])?[0-9a-fA-F]{64}"))),
            )
            .description(Some(
                "A hashed CID (0x + 64 hex digits; the 0x may be 0X or absent, surrounding whitespace is ignored), or 0 (the number or the string) for all actions.",
            ))
            .into()
    }
}

impl utoipa::ToSchema for PermittedCidHash {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newtypes_are_their_strings_on_the_wire() {
        let hash = HashedCid::from("0xab");
        assert_eq!(serde_json::to_string(&hash).unwrap(), r#""0xab""#);
        let back: HashedCid = serde_json::from_str(r#""0xab""#).unwrap();
        assert_eq!(back, hash);
        // Not checked when read: the server checks, and names the field.
        let odd: Cid = serde_json::from_str(r#""not a cid""#).unwrap();
        assert_eq!(odd.as_str(), "not a cid");
        assert_eq!(&*UsageKeyRef::new("k"), "k");
        assert_eq!(String::from(WalletAddress::from("0x1")), "0x1");
    }

    #[test]
    fn a_permitted_cid_hash_is_any_json_value() {
        assert_eq!(
            serde_json::to_string(&PermittedCidHash::all()).unwrap(),
            "0"
        );
        let list: Vec<PermittedCidHash> = serde_json::from_str(r#"[0, "0", "0xab"]"#).unwrap();
        assert_eq!(list[2], PermittedCidHash::from(HashedCid::from("0xab")));
        assert_eq!(list[1], PermittedCidHash::from("0"));
    }

    #[test]
    fn every_schema_names_its_pattern() {
        for schema in [
            <HashedCid as utoipa::PartialSchema>::schema(),
            <Cid as utoipa::PartialSchema>::schema(),
            <PkpIdOrAddress as utoipa::PartialSchema>::schema(),
            <UsageKeyRef as utoipa::PartialSchema>::schema(),
            <WalletAddress as utoipa::PartialSchema>::schema(),
            <PaymentIntentId as utoipa::PartialSchema>::schema(),
        ] {
            let json = serde_json::to_value(&schema).unwrap();
            let pattern = json["pattern"].as_str().unwrap();
            assert!(
                pattern.starts_with('^') && pattern.ends_with('$'),
                "{pattern}"
            );
            assert_eq!(json["type"], "string");
        }
    }
}
