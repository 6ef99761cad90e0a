//! IPFS content identifiers of action code: [`cid_v0`] computes the CID that
//! `ipfs add --only-hash` (and npm `ipfs-only-hash@4.0.0`) gives with its defaults,
//! [`hashed_cid`] the on-chain form, and [`parse_cid`] checks a CID a client sends.
//!
//! What [`cid_v0`] builds (UnixFS v1 file, dag-pb leaves, balanced layout):
//! * The bytes are cut into fixed chunks of 262 144 bytes; the empty input is one empty chunk.
//! * Leaf block: `PBNode { Data = UnixFS { Type = File, Data = chunk (absent when empty),
//!   filesize = chunk length } }`, no links. A single chunk is its own root.
//! * Otherwise the nodes are grouped, in order, in batches of at most 174 and every batch,
//!   even one holding a single node, becomes a parent `PBNode { Links, Data = UnixFS {
//!   Type = File, filesize = sum, blocksizes = each child's file bytes } }`; this repeats on the
//!   parents until one node, the root, is left.
//! * A link is `PBLink { Hash = child's multihash, Name = "" (written, empty), Tsize = child's
//!   block length + its own links' Tsize }`; dag-pb writes every link (field 2) before the
//!   data (field 1); UnixFS `blocksizes` are unpacked.
//! * The CID is base58btc of the multihash `0x12 0x20 ‖ sha2-256(root block)`.
//!
//! The multibase encodings are the crates': base58btc is `bs58`, base32 (RFC 4648,
//! lowercase, unpadded) is `data-encoding`, with the characters checked here first (see
//! `base32_decode`: the refusals and their order stay what they were). What remains
//! hand-written is the dag-pb / UnixFS protobuf of the blocks and the multiformats varint:
//! a few fixed fields whose byte order (links before data, the empty `Name` written,
//! unpacked `blocksizes`) is what fixes the CID, and a leaf's chunk is hashed in place
//! rather than copied into a message.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest as _, Sha256};
use sha3::Keccak256;

/// UnixFS chunk size of the importer's default fixed chunker.
const CHUNK_SIZE: usize = 262_144;
/// The balanced builder's maximum number of links per node.
const MAX_LINKS: usize = 174;
/// Multihash code and digest length of sha2-256.
const SHA2_256: u64 = 0x12;
const SHA2_256_LEN: usize = 32;
/// UnixFS `Data.DataType.File`.
const UNIXFS_FILE: u64 = 2;
/// Longest CID text [`parse_cid`] looks at (a sha2-512 CIDv1 in base32 is 110 characters).
const MAX_CID_LEN: usize = 256;
/// Length of a CIDv0 text: base58btc of a 34-byte sha2-256 multihash.
const CID_V0_LEN: usize = 46;
/// Longest multihash digest accepted in a CIDv1.
const MAX_DIGEST_LEN: usize = 64;

const BASE32_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// The CIDv0 (`Qm…`) of `data` as a UnixFS file, exactly as `ipfs add --only-hash` and
/// `ipfs-only-hash@4.0.0` compute it with their defaults (see the module documentation).
pub fn cid_v0(data: &[u8]) -> String {
    let leaves: Vec<Node> = data.chunks(CHUNK_SIZE).map(leaf).collect();
    let root = balanced_root(leaves);
    let mut multihash = Vec::with_capacity(2 + SHA2_256_LEN);
    multihash.extend_from_slice(&[SHA2_256 as u8, SHA2_256_LEN as u8]);
    multihash.extend_from_slice(&root.digest);
    base58_encode(&multihash)
}

/// keccak256 of the UTF-8 bytes of the CID text, as the contracts store it.
pub fn hashed_cid(cid: &str) -> [u8; 32] {
    Keccak256::digest(cid.as_bytes()).into()
}

/// A syntactically valid CID as a client wrote it (the text is kept unchanged, since
/// [`hashed_cid`] hashes the text).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cid {
    text: String,
    version: u8,
}

impl Cid {
    /// The CID as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// 0 for `Qm…`, 1 for `b…`.
    pub fn version(&self) -> u8 {
        self.version
    }

    /// [`hashed_cid`] of this CID's text.
    pub fn hashed(&self) -> [u8; 32] {
        hashed_cid(&self.text)
    }

    /// The text, giving up the rest.
    pub fn into_string(self) -> String {
        self.text
    }
}

impl fmt::Display for Cid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl AsRef<str> for Cid {
    fn as_ref(&self) -> &str {
        &self.text
    }
}

impl FromStr for Cid {
    type Err = CidError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        parse_cid(text)
    }
}

/// Why a CID text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CidError {
    #[error("the CID is empty")]
    Empty,
    #[error("the CID is {len} characters long, more than the {max} allowed")]
    TooLong { len: usize, max: usize },
    #[error(
        "unsupported CID form: expected a CIDv0 (\"Qm\" + 44 base58btc characters) or a CIDv1 in lowercase base32 (\"b…\")"
    )]
    UnsupportedForm,
    #[error("a CIDv0 is {expected} characters long, this one is {len}")]
    V0Length { len: usize, expected: usize },
    #[error("invalid {alphabet} character {ch:?} at position {position}")]
    InvalidCharacter {
        alphabet: &'static str,
        ch: char,
        position: usize,
    },
    #[error("a CIDv0 must decode to a 34-byte sha2-256 multihash (0x12 0x20 + 32 bytes)")]
    V0NotSha256,
    #[error("the base32 text has an impossible length or non-zero trailing bits")]
    NonCanonicalBase32,
    #[error("malformed varint in the CID ({0})")]
    Varint(&'static str),
    #[error("unsupported CID version {0} (expected 1 for a base32 CID)")]
    Version(u64),
    #[error("unknown CID codec 0x{0:x}")]
    UnknownCodec(u64),
    #[error("malformed multihash: {0}")]
    Multihash(&'static str),
}

/// Checks a CID sent by a client: a CIDv0 (`Qm` + 44 base58btc characters decoding to a
/// sha2-256 multihash) or a CIDv1 in multibase base32 lowercase (`b…`: version 1, a known
/// codec, a well-formed multihash with a 1–64-byte digest, 32 bytes for sha2-256).
/// Nothing is trimmed or normalised: the text must be exactly the CID.
pub fn parse_cid(text: &str) -> Result<Cid, CidError> {
    if text.is_empty() {
        return Err(CidError::Empty);
    }
    if text.len() > MAX_CID_LEN {
        return Err(CidError::TooLong {
            len: text.len(),
            max: MAX_CID_LEN,
        });
    }
    let version = if let Some(body) = text.strip_prefix('b') {
        parse_v1(body)?;
        1
    } else if text.starts_with("Qm") {
        parse_v0(text)?;
        0
    } else {
        return Err(CidError::UnsupportedForm);
    };
    Ok(Cid {
        text: text.to_owned(),
        version,
    })
}

fn parse_v0(text: &str) -> Result<(), CidError> {
    // Characters, not bytes: a non-ASCII text must not pass the length check by accident.
    let len = text.chars().count();
    if len != CID_V0_LEN || text.len() != CID_V0_LEN {
        return Err(CidError::V0Length {
            len,
            expected: CID_V0_LEN,
        });
    }
    let bytes = base58_decode(text)?;
    match bytes.as_slice() {
        [0x12, 0x20, digest @ ..] if digest.len() == SHA2_256_LEN => Ok(()),
        _ => Err(CidError::V0NotSha256),
    }
}

fn parse_v1(base32: &str) -> Result<(), CidError> {
    // The position in errors counts the multibase prefix.
    let bytes = base32_decode(base32).map_err(|err| match err {
        CidError::InvalidCharacter {
            alphabet,
            ch,
            position,
        } => CidError::InvalidCharacter {
            alphabet,
            ch,
            position: position + 1,
        },
        other => other,
    })?;
    let (version, rest) = read_varint(&bytes)?;
    if version != 1 {
        return Err(CidError::Version(version));
    }
    let (codec, rest) = read_varint(rest)?;
    if !is_known_codec(codec) {
        return Err(CidError::UnknownCodec(codec));
    }
    let (hash_code, rest) = read_varint(rest)?;
    let (digest_len, digest) = read_varint(rest)?;
    if digest_len == 0 || digest_len > MAX_DIGEST_LEN as u64 {
        return Err(CidError::Multihash(
            "the digest length must be 1 to 64 bytes",
        ));
    }
    if digest.len() as u64 != digest_len {
        return Err(CidError::Multihash(
            "the digest is not as long as its length says",
        ));
    }
    if hash_code == SHA2_256 && digest.len() != SHA2_256_LEN {
        return Err(CidError::Multihash("a sha2-256 digest is 32 bytes"));
    }
    Ok(())
}

/// Multicodec codes a CIDv1 may carry here: raw, dag-pb, dag-cbor, libp2p-key, dag-json.
fn is_known_codec(codec: u64) -> bool {
    matches!(codec, 0x55 | 0x70 | 0x71 | 0x72 | 0x0129)
}

/// One node of the DAG as its parent sees it.
#[derive(Clone, Copy)]
struct Node {
    /// sha2-256 of the node's block.
    digest: [u8; 32],
    /// The block's length plus the `Tsize` of all its links (cumulative DAG size).
    tsize: u64,
    /// File bytes under this node (UnixFS `filesize`).
    filesize: u64,
}

/// Reduces the leaves to the root the way the balanced builder does: batches of at most
/// `MAX_LINKS` become parents (a batch of one too), level by level, until one node is left.
fn balanced_root(mut level: Vec<Node>) -> Node {
    loop {
        match level.as_slice() {
            // No chunk at all: the empty file is one leaf holding no data.
            [] => return leaf(&[]),
            [root] => return *root,
            nodes => level = nodes.chunks(MAX_LINKS).map(parent).collect(),
        }
    }
}

/// A leaf: `PBNode { Data = UnixFS { Type = File, Data = chunk, filesize } }`, hashed
/// without copying the chunk.
fn leaf(chunk: &[u8]) -> Node {
    let len = chunk.len() as u64;
    // UnixFS Data: Type (field 1), Data (field 2, absent when empty), filesize (field 3).
    let mut unixfs_head = Vec::with_capacity(16);
    put_key(&mut unixfs_head, 1, WIRE_VARINT);
    put_varint(&mut unixfs_head, UNIXFS_FILE);
    if !chunk.is_empty() {
        put_key(&mut unixfs_head, 2, WIRE_LEN);
        put_varint(&mut unixfs_head, len);
    }
    let mut unixfs_tail = Vec::with_capacity(11);
    put_key(&mut unixfs_tail, 3, WIRE_VARINT);
    put_varint(&mut unixfs_tail, len);
    let unixfs_len = (unixfs_head.len() + chunk.len() + unixfs_tail.len()) as u64;

    // PBNode: Data (field 1) only.
    let mut node_head = Vec::with_capacity(8);
    put_key(&mut node_head, 1, WIRE_LEN);
    put_varint(&mut node_head, unixfs_len);

    let mut hasher = Sha256::new();
    hasher.update(&node_head);
    hasher.update(&unixfs_head);
    hasher.update(chunk);
    hasher.update(&unixfs_tail);
    Node {
        digest: hasher.finalize().into(),
        tsize: node_head.len() as u64 + unixfs_len,
        filesize: len,
    }
}

/// A parent: `PBNode { Links = children, Data = UnixFS { Type = File, filesize, blocksizes } }`,
/// links written first.
fn parent(children: &[Node]) -> Node {
    let mut block = Vec::with_capacity(children.len() * 56 + 16 + children.len() * 4);
    for child in children {
        // PBLink: Hash (1), Name (2, the empty string, still written), Tsize (3).
        let mut link = Vec::with_capacity(48);
        put_key(&mut link, 1, WIRE_LEN);
        put_varint(&mut link, 2 + SHA2_256_LEN as u64);
        link.extend_from_slice(&[SHA2_256 as u8, SHA2_256_LEN as u8]);
        link.extend_from_slice(&child.digest);
        put_key(&mut link, 2, WIRE_LEN);
        put_varint(&mut link, 0);
        put_key(&mut link, 3, WIRE_VARINT);
        put_varint(&mut link, child.tsize);
        // PBNode field 2: Links.
        put_key(&mut block, 2, WIRE_LEN);
        put_varint(&mut block, link.len() as u64);
        block.extend_from_slice(&link);
    }
    let filesize: u64 = children.iter().map(|child| child.filesize).sum();
    let mut unixfs = Vec::with_capacity(8 + children.len() * 4);
    put_key(&mut unixfs, 1, WIRE_VARINT);
    put_varint(&mut unixfs, UNIXFS_FILE);
    put_key(&mut unixfs, 3, WIRE_VARINT);
    put_varint(&mut unixfs, filesize);
    for child in children {
        // blocksizes (field 4), one unpacked varint each.
        put_key(&mut unixfs, 4, WIRE_VARINT);
        put_varint(&mut unixfs, child.filesize);
    }
    // PBNode field 1: Data.
    put_key(&mut block, 1, WIRE_LEN);
    put_varint(&mut block, unixfs.len() as u64);
    block.extend_from_slice(&unixfs);

    let links_tsize: u64 = children.iter().map(|child| child.tsize).sum();
    Node {
        digest: Sha256::digest(&block).into(),
        tsize: block.len() as u64 + links_tsize,
        filesize,
    }
}

const WIRE_VARINT: u8 = 0;
const WIRE_LEN: u8 = 2;

/// A protobuf field key (all field numbers here are below 16: one byte).
fn put_key(out: &mut Vec<u8>, field: u8, wire_type: u8) {
    out.push((field << 3) | wire_type);
}

/// A protobuf / multiformats unsigned varint.
fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Reads a multiformats unsigned varint: at most 9 bytes, minimally encoded.
fn read_varint(bytes: &[u8]) -> Result<(u64, &[u8]), CidError> {
    let mut value: u64 = 0;
    for (i, &byte) in bytes.iter().enumerate().take(9) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            if byte == 0 && i > 0 {
                return Err(CidError::Varint("not minimally encoded"));
            }
            return Ok((value, &bytes[i + 1..]));
        }
    }
    if bytes.len() >= 9 {
        Err(CidError::Varint("longer than 9 bytes"))
    } else {
        Err(CidError::Varint("truncated"))
    }
}

/// base58btc (Bitcoin alphabet, `bs58`); leading zero bytes become leading `1`s.
fn base58_encode(bytes: &[u8]) -> String {
    bs58::encode(bytes).into_string()
}

/// The inverse of [`base58_encode`] (`bs58`); the first character outside the alphabet is
/// reported with its byte position.
fn base58_decode(text: &str) -> Result<Vec<u8>, CidError> {
    let invalid = |position: usize| CidError::InvalidCharacter {
        alphabet: "base58btc",
        // bs58 stops at the first byte it cannot take; everything before it is ASCII, so
        // the position is a character boundary.
        ch: text
            .get(position..)
            .and_then(|rest| rest.chars().next())
            .unwrap_or(char::REPLACEMENT_CHARACTER),
        position,
    };
    bs58::decode(text).into_vec().map_err(|err| match err {
        bs58::decode::Error::InvalidCharacter { index, .. }
        | bs58::decode::Error::NonAsciiCharacter { index } => invalid(index),
        // A full buffer or a checksum: neither can happen when decoding into a vector
        // without a checksum check; refused all the same.
        _ => CidError::V0NotSha256,
    })
}

/// RFC 4648 base32, lowercase, no padding; the text must be canonical (a possible length,
/// zero trailing bits). `data-encoding` decodes; the characters are checked here first, so
/// that the first one outside the lowercase alphabet is the error (with its position) even
/// when the length is impossible too, and so that uppercase is refused (data-encoding's
/// unpadded base32 is uppercase, its case-insensitive variant takes both).
fn base32_decode(text: &str) -> Result<Vec<u8>, CidError> {
    if let Some((position, ch)) = text
        .char_indices()
        .find(|&(_, ch)| !u8::try_from(ch).is_ok_and(|b| BASE32_ALPHABET.contains(&b)))
    {
        return Err(CidError::InvalidCharacter {
            alphabet: "base32",
            ch,
            position,
        });
    }
    // Only `a`–`z` and `2`–`7` are left: BASE32_NOPAD_NOCASE reads them as lowercase
    // RFC 4648 base32 and, like every data-encoding base32, refuses an impossible length
    // (`Length`) and non-zero trailing bits (`Trailing`).
    data_encoding::BASE32_NOPAD_NOCASE
        .decode(text.as_bytes())
        .map_err(|_| CidError::NonCanonicalBase32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Vectors {
        vectors: Vec<Vector>,
    }

    #[derive(serde::Deserialize)]
    struct Vector {
        bytes: usize,
        cid: String,
        hashed_cid: String,
        code: Option<String>,
        repeat: Option<Repeat>,
    }

    #[derive(serde::Deserialize)]
    struct Repeat {
        text: String,
        count: usize,
    }

    fn vectors() -> Vec<Vector> {
        let parsed: Vectors =
            serde_json::from_str(include_str!("../tests/data/cids.json")).unwrap();
        assert!(!parsed.vectors.is_empty());
        parsed.vectors
    }

    fn input(vector: &Vector) -> Vec<u8> {
        match (&vector.code, &vector.repeat) {
            (Some(code), None) => code.as_bytes().to_vec(),
            (None, Some(repeat)) => repeat.text.repeat(repeat.count).into_bytes(),
            _ => panic!(
                "vector {} has neither or both of code and repeat",
                vector.cid
            ),
        }
    }

    /// A valid CIDv1 (dag-pb, sha2-256) in base32: the `cid_v0` of "hello world" as v1.
    const HELLO_V1: &str = "bafybeihykld7uyxzogax6vgyvag42y7464eywpf55gxi5qpoisibh3c5wa";

    fn base32_encode(bytes: &[u8]) -> String {
        let mut out = String::new();
        let mut buffer: u32 = 0;
        let mut bits = 0;
        for &byte in bytes {
            buffer = (buffer << 8) | u32::from(byte);
            bits += 8;
            while bits >= 5 {
                bits -= 5;
                out.push(char::from(
                    BASE32_ALPHABET[((buffer >> bits) & 31) as usize],
                ));
            }
            buffer &= (1 << bits) - 1;
        }
        if bits > 0 {
            out.push(char::from(
                BASE32_ALPHABET[((buffer << (5 - bits)) & 31) as usize],
            ));
        }
        out
    }

    fn v1(bytes: &[u8]) -> String {
        format!("b{}", base32_encode(bytes))
    }

    fn sha256_multihash(digest: &[u8; 32]) -> Vec<u8> {
        let mut mh = vec![0x12, 0x20];
        mh.extend_from_slice(digest);
        mh
    }

    #[test]
    fn cid_vectors_match() {
        for vector in vectors() {
            let data = input(&vector);
            assert_eq!(data.len(), vector.bytes, "length of {}", vector.cid);
            assert_eq!(
                cid_v0(&data),
                vector.cid,
                "cid of a {}-byte input",
                data.len()
            );
        }
    }

    #[test]
    fn cid_hashed_vectors_match() {
        for vector in vectors() {
            let hashed = format!("0x{}", hex::encode(hashed_cid(&vector.cid)));
            assert_eq!(hashed, vector.hashed_cid, "hashed_cid of {}", vector.cid);
            let parsed = parse_cid(&vector.cid).unwrap();
            assert_eq!(parsed.hashed(), hashed_cid(&vector.cid));
        }
    }

    #[test]
    fn cid_empty_leaf_block_is_the_known_one() {
        // PBNode { Data = UnixFS { Type = File, filesize = 0 } }: 0a 04 08 02 18 00.
        let digest: [u8; 32] = Sha256::digest([0x0a, 0x04, 0x08, 0x02, 0x18, 0x00]).into();
        assert_eq!(leaf(&[]).digest, digest);
        assert_eq!(leaf(&[]).tsize, 6);
        assert_eq!(
            cid_v0(b""),
            base58_encode(&sha256_multihash(&digest)),
            "the empty input is one empty leaf"
        );
    }

    #[test]
    fn cid_parent_of_one_node_wraps_it() {
        // 175 chunks: batches of 174 and 1; the lone chunk still gets its own parent.
        let leaves: Vec<Node> = (0..175).map(|i| leaf(&[i as u8])).collect();
        let wrapped = parent(&leaves[174..]);
        let expected = parent(&[parent(&leaves[..174]), wrapped]);
        let root = balanced_root(leaves.clone());
        assert_eq!(root.digest, expected.digest);
        assert_eq!(root.filesize, 175);
        assert_ne!(wrapped.digest, leaves[174].digest);
        // The wrapping block, byte by byte: one link `12 2a { 0a 22 <multihash> 12 00 18 09 }`
        // (Name written though empty; Tsize 9 = the leaf block `0a 07 08 02 12 01 ae 18 01`),
        // then Data `0a 06 { 08 02 18 01 20 01 }` (Type, filesize, one blocksize).
        assert_eq!(leaves[174].tsize, 9);
        let mut block = vec![0x12, 0x28, 0x0a, 0x22, 0x12, 0x20];
        block.extend_from_slice(&leaves[174].digest);
        block.extend_from_slice(&[0x12, 0x00, 0x18, 0x09]);
        block.extend_from_slice(&[0x0a, 0x06, 0x08, 0x02, 0x18, 0x01, 0x20, 0x01]);
        let digest: [u8; 32] = Sha256::digest(&block).into();
        assert_eq!(wrapped.digest, digest);
        // Tsize is cumulative: the block itself plus the Tsize of its link.
        assert_eq!(wrapped.tsize, block.len() as u64 + 9);
    }

    #[test]
    fn cid_parse_accepts_v0() {
        for vector in vectors() {
            let cid = parse_cid(&vector.cid).unwrap();
            assert_eq!(cid.as_str(), vector.cid);
            assert_eq!(cid.version(), 0);
            assert_eq!(cid.to_string(), vector.cid);
        }
        let cid: Cid = "QmbFMke1KXqnYyBBWxB74N4c5SBnJMVAiMNRcGu6x1AwQH"
            .parse()
            .unwrap();
        assert_eq!(
            cid.into_string(),
            "QmbFMke1KXqnYyBBWxB74N4c5SBnJMVAiMNRcGu6x1AwQH"
        );
    }

    #[test]
    fn cid_parse_accepts_v1() {
        // The same multihash as the "hello world" CIDv0, as a dag-pb CIDv1.
        let v0 = base58_decode("Qmf412jQZiuVUtdgnB36FXFX7xg5V6KEbSJ4dpQuhkLyfD").unwrap();
        let mut bytes = vec![0x01, 0x70];
        bytes.extend_from_slice(&v0);
        assert_eq!(v1(&bytes), HELLO_V1);
        let cid = parse_cid(HELLO_V1).unwrap();
        assert_eq!(cid.as_str(), HELLO_V1);
        assert_eq!(cid.version(), 1);
        // raw leaves, and a two-byte codec varint (dag-json 0x0129), and sha2-512.
        let mut raw = vec![0x01, 0x55];
        raw.extend_from_slice(&sha256_multihash(&[7; 32]));
        assert_eq!(parse_cid(&v1(&raw)).unwrap().version(), 1);
        let mut json = vec![0x01, 0xa9, 0x02, 0x13, 0x40];
        json.extend_from_slice(&[9; 64]);
        assert_eq!(parse_cid(&v1(&json)).unwrap().version(), 1);
    }

    #[test]
    fn cid_parse_rejects_garbage() {
        assert_eq!(parse_cid(""), Err(CidError::Empty));
        assert_eq!(parse_cid("hello"), Err(CidError::UnsupportedForm));
        assert_eq!(parse_cid("zdj7W…"), Err(CidError::UnsupportedForm));
        assert_eq!(
            parse_cid(" Qmf412jQZiuVUtdgnB36FXFX7xg5V6KEbSJ4dpQuhkLyfD"),
            Err(CidError::UnsupportedForm)
        );
        // 0, O, I and l are not base58btc.
        assert_eq!(
            parse_cid("Qmf412jQZiuVUtdgnB36FXFX7xg5V6KEbSJ4dpQuhkLyf0"),
            Err(CidError::InvalidCharacter {
                alphabet: "base58btc",
                ch: '0',
                position: 45
            })
        );
        let mut bad = HELLO_V1.to_owned();
        bad.replace_range(57..58, "1");
        assert_eq!(
            parse_cid(&bad),
            Err(CidError::InvalidCharacter {
                alphabet: "base32",
                ch: '1',
                position: 57
            })
        );
        // Uppercase is another multibase (B), not lowercase base32.
        assert!(matches!(
            parse_cid(&HELLO_V1.to_uppercase()),
            Err(CidError::UnsupportedForm)
        ));
        bad.replace_range(57..58, "B");
        assert!(matches!(
            parse_cid(&bad),
            Err(CidError::InvalidCharacter { ch: 'B', .. })
        ));
        let long = format!("Qm{}", "a".repeat(MAX_CID_LEN));
        assert_eq!(
            parse_cid(&long),
            Err(CidError::TooLong {
                len: MAX_CID_LEN + 2,
                max: MAX_CID_LEN
            })
        );
    }

    #[test]
    fn cid_parse_rejects_wrong_lengths() {
        let good = "Qmf412jQZiuVUtdgnB36FXFX7xg5V6KEbSJ4dpQuhkLyfD";
        assert_eq!(
            parse_cid(&good[..45]),
            Err(CidError::V0Length {
                len: 45,
                expected: 46
            })
        );
        assert_eq!(
            parse_cid(&format!("{good}D")),
            Err(CidError::V0Length {
                len: 47,
                expected: 46
            })
        );
        // Non-ASCII characters never pass as the right length.
        assert!(matches!(
            parse_cid("Qmf412jQZiuVUtdgnB36FXFX7xg5V6KEbSJ4dpQuhkLyé"),
            Err(CidError::V0Length { .. })
        ));
        // CIDv1: a digest shorter or longer than its length says, a truncated varint.
        let mut short = vec![0x01, 0x70, 0x12, 0x20];
        short.extend_from_slice(&[1; 31]);
        assert!(matches!(
            parse_cid(&v1(&short)),
            Err(CidError::Multihash(_))
        ));
        let mut long = vec![0x01, 0x70, 0x12, 0x20];
        long.extend_from_slice(&[1; 33]);
        assert!(matches!(parse_cid(&v1(&long)), Err(CidError::Multihash(_))));
        let mut odd_sha256 = vec![0x01, 0x55, 0x12, 0x10];
        odd_sha256.extend_from_slice(&[1; 16]);
        assert!(matches!(
            parse_cid(&v1(&odd_sha256)),
            Err(CidError::Multihash(_))
        ));
        assert_eq!(
            parse_cid(&v1(&[0x01, 0x70, 0x12])),
            Err(CidError::Varint("truncated"))
        );
        assert_eq!(
            parse_cid(&v1(&[0x01, 0x70, 0x12, 0x00])),
            Err(CidError::Multihash(
                "the digest length must be 1 to 64 bytes"
            ))
        );
        // A base32 length no encoder produces (one character too many).
        assert_eq!(
            parse_cid(&format!("{HELLO_V1}a")),
            Err(CidError::NonCanonicalBase32)
        );
        // Non-zero trailing bits: 36 bytes fill 58 characters but 2 bits of the last one,
        // which is 'a' (00000); 'b' (00001) sets one of them.
        assert_eq!(
            parse_cid(&format!("{}b", &HELLO_V1[..HELLO_V1.len() - 1])),
            Err(CidError::NonCanonicalBase32)
        );
    }

    #[test]
    fn cid_parse_rejects_wrong_prefixes() {
        // A CIDv0 in another base, a base58 v1, a v1 with version or codec wrong.
        assert_eq!(
            parse_cid("zb2rhe5P4gXftAwvA4eXQ5HJwsER2owDyS9sKaQRRVQPn93bA"),
            Err(CidError::UnsupportedForm)
        );
        assert_eq!(
            parse_cid("Pmf412jQZiuVUtdgnB36FXFX7xg5V6KEbSJ4dpQuhkLyfD"),
            Err(CidError::UnsupportedForm)
        );
        assert_eq!(
            parse_cid("QMf412jQZiuVUtdgnB36FXFX7xg5V6KEbSJ4dpQuhkLyfD"),
            Err(CidError::UnsupportedForm)
        );
        let v0 = base58_decode("Qmf412jQZiuVUtdgnB36FXFX7xg5V6KEbSJ4dpQuhkLyfD").unwrap();
        // A multihash alone in base32 reads as version 0x12.
        assert_eq!(parse_cid(&v1(&v0)), Err(CidError::Version(0x12)));
        let mut v2 = vec![0x02, 0x70];
        v2.extend_from_slice(&v0);
        assert_eq!(parse_cid(&v1(&v2)), Err(CidError::Version(2)));
        let mut unknown = vec![0x01, 0x7f];
        unknown.extend_from_slice(&v0);
        assert_eq!(parse_cid(&v1(&unknown)), Err(CidError::UnknownCodec(0x7f)));
        // 0x70 written in two bytes is not minimal.
        let mut padded = vec![0x01, 0xf0, 0x00];
        padded.extend_from_slice(&v0);
        assert_eq!(
            parse_cid(&v1(&padded)),
            Err(CidError::Varint("not minimally encoded"))
        );
    }

    #[test]
    fn cid_parse_rejects_non_sha256_v0() {
        // "Qm" + 44 characters spans a little more than the 0x12 0x20 prefix: both ends of
        // the range decode to 34 bytes of another multihash.
        for text in [
            format!("Qm{}", "1".repeat(44)),
            format!("Qm{}", "z".repeat(44)),
        ] {
            let bytes = base58_decode(&text).unwrap();
            assert_eq!(bytes.len(), 34, "{text}");
            assert_ne!(&bytes[..2], &[0x12, 0x20], "{text}");
            assert_eq!(parse_cid(&text), Err(CidError::V0NotSha256), "{text}");
        }
        // sha2-256's code with a 33-byte length: 0x12 0x21 + 32 bytes (a non-sha2-256 code
        // never encodes to "Qm…": 0x13 0x20 + 32 bytes gives "S5…").
        let mut wrong_len = vec![0x12, 0x21];
        wrong_len.extend_from_slice(&[0xab; 32]);
        let text = base58_encode(&wrong_len);
        assert_eq!(text, "Qms86d5RNrh3192CyNrTftc5VxW8ULZj3178wPX5VXUcUA");
        assert_eq!(parse_cid(&text), Err(CidError::V0NotSha256));
        let mut sha512_code = vec![0x13, 0x20];
        sha512_code.extend_from_slice(&[0xab; 32]);
        assert_eq!(
            parse_cid(&base58_encode(&sha512_code)),
            Err(CidError::UnsupportedForm)
        );
    }

    #[test]
    fn cid_base58_round_trips() {
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut cases: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            vec![0, 0, 0],
            vec![0, 0, 1, 2, 255],
            vec![255; 40],
            vec![57],
            vec![58],
        ];
        for len in 1..70 {
            let bytes = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            cases.push(bytes);
        }
        for bytes in cases {
            let text = base58_encode(&bytes);
            assert_eq!(base58_decode(&text).unwrap(), bytes, "{text}");
        }
        // Known values: "hello world" in base58btc, and the Bitcoin-style zero prefix.
        assert_eq!(base58_encode(b"hello world"), "StV1DL6CwTryKyV");
        assert_eq!(base58_encode(&[0, 0, 1]), "112");
        assert_eq!(base58_encode(&[]), "");
    }

    #[test]
    fn cid_decoders_report_the_first_bad_character() {
        // A bad character wins over an impossible length (59 characters after the 'b').
        let mut bad = format!("{HELLO_V1}a");
        bad.replace_range(3..4, "8");
        assert_eq!(
            parse_cid(&bad),
            Err(CidError::InvalidCharacter {
                alphabet: "base32",
                ch: '8',
                position: 3
            })
        );
        // Non-ASCII: the character itself, at its byte position.
        assert_eq!(
            parse_cid("bafé"),
            Err(CidError::InvalidCharacter {
                alphabet: "base32",
                ch: 'é',
                position: 3
            })
        );
        assert_eq!(
            base58_decode("11é2"),
            Err(CidError::InvalidCharacter {
                alphabet: "base58btc",
                ch: 'é',
                position: 2
            })
        );
        assert_eq!(base58_decode("11").unwrap(), vec![0, 0]);
        // Padding is no part of this base32.
        assert!(matches!(
            parse_cid(&format!("{}=", &HELLO_V1[..HELLO_V1.len() - 1])),
            Err(CidError::InvalidCharacter { ch: '=', .. })
        ));
        // An empty body decodes to nothing, which holds no version varint.
        assert_eq!(parse_cid("b"), Err(CidError::Varint("truncated")));
    }

    #[test]
    fn cid_base32_round_trips() {
        for len in 0..40u8 {
            let bytes: Vec<u8> = (0..len).map(|i| i.wrapping_mul(37) ^ len).collect();
            assert_eq!(base32_decode(&base32_encode(&bytes)).unwrap(), bytes);
        }
    }

    #[test]
    fn cid_varints() {
        for value in [
            0u64,
            1,
            127,
            128,
            255,
            300,
            16_384,
            u64::from(u32::MAX),
            (1 << 63) - 1,
        ] {
            let mut buf = Vec::new();
            put_varint(&mut buf, value);
            buf.push(0xee);
            assert_eq!(read_varint(&buf).unwrap(), (value, &[0xee][..]));
        }
        assert!(read_varint(&[0xff; 10]).is_err());
        assert!(read_varint(&[]).is_err());
    }

    #[test]
    fn cid_large_input_is_linear() {
        // Three top-level children at 2 * 174 + 1 chunks; cheap enough for a unit test.
        let data = vec![0x5a; 2 * MAX_LINKS * CHUNK_SIZE + 3];
        let cid = cid_v0(&data);
        assert!(parse_cid(&cid).is_ok());
        assert_ne!(cid, cid_v0(&data[..data.len() - 1]));
    }
}
