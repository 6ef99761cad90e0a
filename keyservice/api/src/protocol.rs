//! The keyservice wire protocol: operations, their binary payloads and error codes.
//!
//! Every frame is `len:u32be ‖ header(11) ‖ payload` (see [`crate::codec`]); this module
//! defines what goes in the header's `op`/`status` bytes and the payload of each operation.
//! All integers are big-endian; fixed-size fields are raw bytes; there is no padding.
//!
//! | op | name | request payload | response payload |
//! |---|---|---|---|
//! | 0x01 | `Status` | — | `version:u8 ‖ platform:u8 ‖ compose_hash:32 ‖ api_payers:u32` |
//! | 0x02 | `CreateWallet` | — | `path:32 ‖ pubkey:65` |
//! | 0x03 | `WalletPublicKey` | `path:32` | `pubkey:65` |
//! | 0x04 | `WalletSign` | `path:32 ‖ digest:32` | `sig:65` |
//! | 0x05 | `WalletExportKey` | `path:32` | `secret:32` |
//! | 0x06 | `ActionPublicKey` | `cid_len:u16 ‖ cid` | `pubkey:65` |
//! | 0x07 | `ActionSign` | `cid_len:u16 ‖ cid ‖ digest:32` | `sig:65` |
//! | 0x08 | `ActionExportKey` | `cid_len:u16 ‖ cid` | `secret:32` |
//! | 0x09 | `Encrypt` | `path:32 ‖ plaintext…` | `nonce:12 ‖ ciphertext ‖ tag:16` |
//! | 0x0A | `Decrypt` | `path:32 ‖ nonce:12 ‖ ciphertext ‖ tag:16` | `plaintext…` |
//! | 0x0B | `Payers` | — | `n:u32 ‖ n × address:20 ‖ admin:20` |
//! | 0x0C | — | retired (`PayerSign` of a bare digest): answered `UnknownOperation` | |
//! | 0x0D | `RandomBytes` | `n:u8 (1..=64)` | `n bytes` |
//! | 0x0E | `PayerSignTransaction` | `kind:u8 (0 api, 1 admin) ‖ index:u32 ‖ unsigned_tx…` | `sig:65` |
//! | 0x0F | `ServiceSeal` | `purpose:u8 ‖ plaintext…` | `nonce:12 ‖ ciphertext ‖ tag:16` |
//! | 0x10 | `ServiceUnseal` | `purpose:u8 ‖ nonce:12 ‖ ciphertext ‖ tag:16` | `plaintext…` |
//! | 0x11 | `AttestationQuote` | — | `quote` (below), report data = 64 zero bytes |
//! | 0x12 | `EvidenceQuote` | `sha256sum.txt bytes (1..=8192)` | `quote`, report data = SHA-256(bytes) ‖ 32 zero bytes |
//! | 0x13 | `AttestationInfo` | — | `info` (below) |
//! | 0x14 | `RootStatus` | — | `state:u8 (0 awaiting, 1 ready) ‖ compose_hash:32 ‖ [root_id:32 when ready]` |
//! | 0x15 | `CreateSealedRoot` | — | `sealed:101 ‖ root_id:32` |
//! | 0x16 | `AdoptRoot` | `sealed:101` | `root_id:32` |
//! | 0x17 | `RowMac` | `n:u16 ‖ n × (len:u16 ‖ bytes)` | `n × tag:32` |
//! | 0x18 | `TlsPublicKey` | `index:u32` | `spki…` (SubjectPublicKeyInfo DER, P-256) |
//! | 0x19 | `TlsSign` | `index:u32 ‖ scheme:u16 ‖ message (1..=16384)` | `sig…` (DER ECDSA) |
//! | 0x1A | `TlsRegisterCertificate` | `index:u32 ‖ chain PEM (1..=32768)` | `sha256(chain):32` |
//! | 0x1C | `FreshEvidenceQuote` | `nonce:32 ‖ sha256sum.txt bytes (1..=8192)` | `quote`, report data = SHA-256(bytes) ‖ nonce |
//! | 0x1D | `AcmeAccountPublicKey` | — | `point:65` (uncompressed P-256 `0x04 ‖ x ‖ y` of the ACME account key) |
//! | 0x1E | `AcmeAccountSign` | `signing input (1..=16384)` | `sig:64` (ES256, fixed `r ‖ s`) |
//! | 0x1F | `OperatorReseal` | `target:32 ‖ sig:65 ‖ len:u16 ‖ request (1..=1024) ‖ [source:101]` | `sealed:101 ‖ root_id:32 ‖ len:u16 ‖ file name` |
//! | 0x20 | `StateFiles` | — | `n:u16 ‖ n × (len:u16 ‖ name ‖ len:u32 ‖ bytes)` |
//!
//! `OperatorReseal` rewraps the running root for the compose hash `target`, authorised by
//! an operator: `request` is the text of an `operator-auth` request (action `reseal`, the
//! same target, this app and compose hash, fresh, unused) and `sig` its EIP-191 signature
//! by an address of `[operator] addresses` in keyservice's own measured configuration; the
//! governance contract of that configuration must allow `target`. `source` is the shared
//! sealed root (shared-root mode: the front end's copy for the measured compose hash, which
//! must open here and be the running root); without it keyservice reseals its own root
//! file and writes `root.sealed.<first 16 hex of target>` beside it (the answer's file
//! name; empty in shared-root mode, where nothing is written). `StateFiles` returns the
//! state directory's files an operator backs up (`root.sealed*`, `payer-contracts.json`:
//! sealed or public, never a secret) for at most [`MAX_STATE_FILES`] files of at most
//! [`MAX_STATE_FILE_LEN`] bytes each.
//!
//! `RootStatus`, `CreateSealedRoot` and `AdoptRoot` serve shared-root mode (replicas of one
//! app sharing one sealed root, kept by the front end): `sealed` is the 101-byte sealed-root
//! format of the keyservice's root files, `root_id` a public fingerprint of the root. An
//! `AdoptRoot` payload is taken as it comes (any length): the keyservice alone judges it, and
//! one that does not open stops the keyservice. `RowMac` tags are HMAC-SHA256 under a key
//! derived from the root that never leaves the keyservice (1..=[`MAX_ROW_MAC_ITEMS`] items).
//!
//! `quote` = `source:u8 (0 dstack, 1 configfs-tsm, 2 simulated) ‖ str(quote bytes) ‖
//! str(event_log) ‖ str(vm_config)`; `info` = `str(app_id) ‖ str(instance_id) ‖
//! str(compose_hash) ‖ str(app_compose) ‖ has_key_provider:u8 ‖ [str(key_provider)] ‖
//! str(mrtd) ‖ str(rtmr0) ‖ … ‖ str(rtmr3) ‖ str(event_log)`, where `str(x)` =
//! `len:u32 ‖ x` (text as UTF-8). No quote operation takes report data, a key path or an
//! event from the caller: keyservice builds the report data itself.
//!
//! `AcmeAccountPublicKey` and `AcmeAccountSign` serve the ACME (RFC 8555) account key: one
//! P-256 key derived from the root, whose private half never leaves the keyservice. The
//! signing input is a JWS's `ASCII(BASE64URL(protected) ‖ '.' ‖ BASE64URL(payload))`
//! (RFC 7515 §5.1); the keyservice signs only inputs of that shape whose protected header
//! is a JSON object with `"alg": "ES256"` (anything else is `InvalidArgument`), and answers
//! the JWS signature value ES256 prescribes (RFC 7518 §3.4: `r ‖ s`, 32 bytes each).
//!
//! `unsigned_tx` is the transaction's signing preimage (EIP-1559: `0x02 ‖ rlp(fields)`;
//! legacy: the EIP-155 `rlp(fields ‖ chain_id ‖ 0 ‖ 0)`); the keyservice decodes it, checks
//! it against its payer policy and signs its keccak256. `purpose` is a [`ServicePurpose`].
//!
//! `pubkey` is uncompressed (`0x04 ‖ x ‖ y`); `sig` is `r ‖ s ‖ v` with low `s` and
//! `v ∈ {27, 28}`; `cid` is UTF-8 (1..=512 bytes). A response with `status ≠ 0` carries a
//! UTF-8 message instead of the payload; `status` is an [`ErrorCode`].

use std::fmt;

use zeroize::Zeroizing;

pub use crate::types::SEALED_ROOT_LEN;
use crate::types::{
    Address, ComposeHash, DeploymentInfo, DerivationPath, NewSealedRoot, Payer, PayerList,
    PlatformKind, PublicKey, QuoteBundle, QuoteSource, RootId, RootStatus, SecretBytes,
    SecretKey32, ServicePurpose, ServiceStatus, Signature,
};

/// Protocol version carried in every frame header.
pub const PROTOCOL_VERSION: u8 = 1;
/// Largest frame body (header + payload) either side accepts, in bytes.
pub const MAX_FRAME_LEN: usize = 64 * 1024;
/// Frame header: `version:u8 ‖ op:u8 ‖ status:u8 ‖ id:u64be`.
pub const HEADER_LEN: usize = 11;
/// AES-256-GCM nonce length.
pub const NONCE_LEN: usize = 12;
/// AES-256-GCM tag length.
pub const TAG_LEN: usize = 16;
/// Largest plaintext an `Encrypt` request can carry (the request frame is the bound).
pub const MAX_PLAINTEXT_LEN: usize = MAX_FRAME_LEN - HEADER_LEN - 32 - NONCE_LEN - TAG_LEN;
/// Largest plaintext a `ServiceSeal` request can carry.
pub const MAX_SERVICE_PLAINTEXT_LEN: usize = MAX_FRAME_LEN - HEADER_LEN - 1 - NONCE_LEN - TAG_LEN;
/// Largest unsigned transaction a `PayerSignTransaction` request can carry.
pub const MAX_UNSIGNED_TX_LEN: usize = MAX_FRAME_LEN - HEADER_LEN - 5;
/// Largest `RandomBytes` request.
pub const MAX_RANDOM_BYTES: usize = 64;
/// Largest action CID, in bytes.
pub const MAX_CID_LEN: usize = 512;
/// Largest `sha256sum.txt` an `EvidenceQuote` request can carry (a line per evidence file,
/// about 100 bytes each).
pub const MAX_EVIDENCE_SUMS_LEN: usize = 8192;
/// Most items one `RowMac` request may carry.
pub const MAX_ROW_MAC_ITEMS: usize = 1024;
/// Largest single `RowMac` item: alone in a request, `n:u16 ‖ len:u16 ‖ bytes` fills a frame.
pub const MAX_ROW_MAC_ITEM_LEN: usize = MAX_FRAME_LEN - HEADER_LEN - 2 - 2;
/// Length of one `RowMac` tag (HMAC-SHA256).
pub const ROW_MAC_LEN: usize = 32;
/// Largest message a `TlsSign` request may carry: a TLS handshake transcript part is a few
/// hundred bytes, a certificate or CSR to be signed (rcgen's TBS) a few kilobytes.
pub const MAX_TLS_SIGN_MESSAGE_LEN: usize = 16 * 1024;
/// Largest PEM chain a `TlsRegisterCertificate` request may carry.
pub const MAX_TLS_CHAIN_LEN: usize = 32 * 1024;
/// The one `TlsSign` scheme: `ecdsa_secp256r1_sha256` (TLS SignatureScheme 0x0403).
pub const TLS_SCHEME_ECDSA_P256_SHA256: u16 = 0x0403;
/// Largest JWS signing input an `AcmeAccountSign` request may carry: the largest ACME
/// request, a finalization carrying a CSR, is a few kilobytes once base64url-encoded.
pub const MAX_ACME_SIGNING_INPUT_LEN: usize = 16 * 1024;
/// Length of the ACME account public key: an uncompressed P-256 point (`0x04 ‖ x ‖ y`).
pub const ACME_PUBLIC_KEY_LEN: usize = 65;
/// Length of an ES256 JWS signature (`r ‖ s`).
pub const ACME_SIGNATURE_LEN: usize = 64;
/// Longest operator request text an `OperatorReseal` may carry.
pub const MAX_OPERATOR_REQUEST_LEN: usize = 1024;
/// Length of an operator's EIP-191 signature (`r ‖ s ‖ v`).
pub const OPERATOR_SIGNATURE_LEN: usize = 65;
/// Most files a `StateFiles` answer lists.
pub const MAX_STATE_FILES: usize = 64;
/// Largest file a `StateFiles` answer carries (a sealed root is 101 bytes, the
/// payer-contract record a few hundred bytes per contract); all of them together must also
/// fit one frame, or keyservice answers `InvalidArgument` rather than leave one out.
pub const MAX_STATE_FILE_LEN: usize = 16 * 1024;
/// Longest file name in a `StateFiles` or `OperatorReseal` answer.
pub const MAX_STATE_FILE_NAME_LEN: usize = 128;

/// Operation codes (the header's `op` byte).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[repr(u8)]
pub enum Op {
    Status = 0x01,
    CreateWallet = 0x02,
    WalletPublicKey = 0x03,
    WalletSign = 0x04,
    WalletExportKey = 0x05,
    ActionPublicKey = 0x06,
    ActionSign = 0x07,
    ActionExportKey = 0x08,
    Encrypt = 0x09,
    Decrypt = 0x0A,
    Payers = 0x0B,
    // 0x0C was `PayerSign` (a payer signing any digest); retired so that no request can
    // make a payer sign anything but a checked transaction. Never reuse the number.
    RandomBytes = 0x0D,
    PayerSignTransaction = 0x0E,
    ServiceSeal = 0x0F,
    ServiceUnseal = 0x10,
    AttestationQuote = 0x11,
    EvidenceQuote = 0x12,
    AttestationInfo = 0x13,
    RootStatus = 0x14,
    CreateSealedRoot = 0x15,
    AdoptRoot = 0x16,
    RowMac = 0x17,
    TlsPublicKey = 0x18,
    TlsSign = 0x19,
    TlsRegisterCertificate = 0x1A,
    FreshEvidenceQuote = 0x1C,
    AcmeAccountPublicKey = 0x1D,
    AcmeAccountSign = 0x1E,
    OperatorReseal = 0x1F,
    StateFiles = 0x20,
}

impl Op {
    /// The operation's name in snake case (`wallet_sign`), for logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Self::Status => "status",
            Self::CreateWallet => "create_wallet",
            Self::WalletPublicKey => "wallet_public_key",
            Self::WalletSign => "wallet_sign",
            Self::WalletExportKey => "wallet_export_key",
            Self::ActionPublicKey => "action_public_key",
            Self::ActionSign => "action_sign",
            Self::ActionExportKey => "action_export_key",
            Self::Encrypt => "encrypt",
            Self::Decrypt => "decrypt",
            Self::Payers => "payers",
            Self::RandomBytes => "random_bytes",
            Self::PayerSignTransaction => "payer_sign_transaction",
            Self::ServiceSeal => "service_seal",
            Self::ServiceUnseal => "service_unseal",
            Self::AttestationQuote => "attestation_quote",
            Self::EvidenceQuote => "evidence_quote",
            Self::AttestationInfo => "attestation_info",
            Self::RootStatus => "root_status",
            Self::CreateSealedRoot => "create_sealed_root",
            Self::AdoptRoot => "adopt_root",
            Self::RowMac => "row_mac",
            Self::TlsPublicKey => "tls_public_key",
            Self::TlsSign => "tls_sign",
            Self::TlsRegisterCertificate => "tls_register_certificate",
            Self::FreshEvidenceQuote => "fresh_evidence_quote",
            Self::AcmeAccountPublicKey => "acme_account_public_key",
            Self::AcmeAccountSign => "acme_account_sign",
            Self::OperatorReseal => "operator_reseal",
            Self::StateFiles => "state_files",
        }
    }

    pub fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            0x01 => Self::Status,
            0x02 => Self::CreateWallet,
            0x03 => Self::WalletPublicKey,
            0x04 => Self::WalletSign,
            0x05 => Self::WalletExportKey,
            0x06 => Self::ActionPublicKey,
            0x07 => Self::ActionSign,
            0x08 => Self::ActionExportKey,
            0x09 => Self::Encrypt,
            0x0A => Self::Decrypt,
            0x0B => Self::Payers,
            0x0D => Self::RandomBytes,
            0x0E => Self::PayerSignTransaction,
            0x0F => Self::ServiceSeal,
            0x10 => Self::ServiceUnseal,
            0x11 => Self::AttestationQuote,
            0x12 => Self::EvidenceQuote,
            0x13 => Self::AttestationInfo,
            0x14 => Self::RootStatus,
            0x15 => Self::CreateSealedRoot,
            0x16 => Self::AdoptRoot,
            0x17 => Self::RowMac,
            0x18 => Self::TlsPublicKey,
            0x19 => Self::TlsSign,
            0x1A => Self::TlsRegisterCertificate,
            0x1C => Self::FreshEvidenceQuote,
            0x1D => Self::AcmeAccountPublicKey,
            0x1E => Self::AcmeAccountSign,
            0x1F => Self::OperatorReseal,
            0x20 => Self::StateFiles,
            _ => return None,
        })
    }
}

/// The header's `status` byte in a response (always 0 in a request).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
#[repr(u8)]
pub enum ErrorCode {
    /// The payload does not parse for this operation.
    BadRequest = 1,
    /// The frame's version byte is not [`PROTOCOL_VERSION`].
    UnsupportedVersion = 2,
    /// Unknown `op` byte.
    UnknownOperation = 3,
    /// The length prefix exceeds [`MAX_FRAME_LEN`] or is shorter than a header; the
    /// server closes the connection after sending this (with request id 0).
    BadFrame = 4,
    /// AES-GCM authentication failed: wrong wallet, or the ciphertext was modified.
    DecryptFailed = 5,
    /// A well-formed argument out of range (payer index, random length, CID length).
    InvalidArgument = 6,
    /// The server is shutting down or over its limits; retry later.
    Busy = 7,
    /// A bug or an unexpected condition inside the keyservice.
    Internal = 8,
    /// Well-formed, but the keyservice's boundary forbids it: a service-owned path through
    /// a wallet operation, a payer transaction its policy does not allow.
    Refused = 9,
    /// The quote provider (guest agent, configfs-tsm) failed, or too many quotes are
    /// waiting; retry later.
    QuoteUnavailable = 10,
    /// Shared-root mode: the keyservice does not hold a root yet (the front end has not
    /// handed it the shared sealed root with `AdoptRoot`); only `Status`, `RootStatus`,
    /// `CreateSealedRoot` and `AdoptRoot` are answered until it does.
    NoRoot = 11,
    /// A status byte this client does not know.
    Unknown = 255,
}

impl ErrorCode {
    pub fn from_u8(b: u8) -> Self {
        match b {
            1 => Self::BadRequest,
            2 => Self::UnsupportedVersion,
            3 => Self::UnknownOperation,
            4 => Self::BadFrame,
            5 => Self::DecryptFailed,
            6 => Self::InvalidArgument,
            7 => Self::Busy,
            8 => Self::Internal,
            9 => Self::Refused,
            10 => Self::QuoteUnavailable,
            11 => Self::NoRoot,
            _ => Self::Unknown,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Self::BadRequest => "bad request",
            Self::UnsupportedVersion => "unsupported protocol version",
            Self::UnknownOperation => "unknown operation",
            Self::BadFrame => "bad frame",
            Self::DecryptFailed => "decryption failed",
            Self::InvalidArgument => "invalid argument",
            Self::Busy => "busy",
            Self::Internal => "internal error",
            Self::Refused => "refused by policy",
            Self::QuoteUnavailable => "quote provider unavailable",
            Self::NoRoot => "no root yet",
            Self::Unknown => "unknown error",
        };
        f.write_str(s)
    }
}

/// A payload that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed {op:?} payload: {reason}")]
pub struct DecodeError {
    pub op: Op,
    pub reason: &'static str,
}

/// A request, as the server sees it after decoding.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Request {
    Status,
    CreateWallet,
    WalletPublicKey {
        path: DerivationPath,
    },
    WalletSign {
        path: DerivationPath,
        digest: [u8; 32],
    },
    WalletExportKey {
        path: DerivationPath,
    },
    ActionPublicKey {
        cid: String,
    },
    ActionSign {
        cid: String,
        digest: [u8; 32],
    },
    ActionExportKey {
        cid: String,
    },
    Encrypt {
        path: DerivationPath,
        plaintext: Vec<u8>,
    },
    Decrypt {
        path: DerivationPath,
        ciphertext: Vec<u8>,
    },
    Payers,
    /// `tx` is the unsigned transaction's signing preimage (see the module docs).
    PayerSignTransaction {
        payer: Payer,
        tx: Vec<u8>,
    },
    RandomBytes {
        n: u8,
    },
    ServiceSeal {
        purpose: ServicePurpose,
        plaintext: Vec<u8>,
    },
    ServiceUnseal {
        purpose: ServicePurpose,
        ciphertext: Vec<u8>,
    },
    /// A quote over 64 zero bytes of report data (`/attestation`).
    AttestationQuote,
    /// A quote over SHA-256(`sums`) ‖ 32 zero bytes; `sums` is the exact `sha256sum.txt`
    /// of the evidence files (1..=[`MAX_EVIDENCE_SUMS_LEN`] bytes).
    EvidenceQuote {
        sums: Vec<u8>,
    },
    /// A quote over SHA-256(`sums`) ‖ `nonce`: the evidence quote made fresh for the
    /// verifier that chose `nonce` (`?nonce=` on `/evidences/quote.json`, `/attestation`).
    /// The nonce is a typed 32-byte field, so the caller still chooses no report data
    /// beyond it: the first half is always the hash of a checked checksum listing.
    FreshEvidenceQuote {
        nonce: [u8; 32],
        sums: Vec<u8>,
    },
    /// The deployment's identity (`/info`).
    AttestationInfo,
    /// Whether the keyservice holds its root yet, and which (shared-root mode).
    RootStatus,
    /// A fresh root sealed to the measured compose hash, returned and not kept (shared-root
    /// mode, before a root is adopted).
    CreateSealedRoot,
    /// Adopt the shared sealed root (shared-root mode, at most once per process). `sealed`
    /// should be [`SEALED_ROOT_LEN`] bytes; any other payload is decoded as is and judged
    /// (and refused) by the keyservice.
    AdoptRoot {
        sealed: Vec<u8>,
    },
    /// HMAC-SHA256 tags of `items` under the keyservice's store-row MAC key.
    RowMac {
        items: Vec<Vec<u8>>,
    },
    /// The SubjectPublicKeyInfo of TLS key `index` (P-256, derived from the root; the
    /// private key never leaves keyservice).
    TlsPublicKey {
        index: u32,
    },
    /// A signature by TLS key `index` over `message` with `scheme` (only
    /// [`TLS_SCHEME_ECDSA_P256_SHA256`]; 1..=[`MAX_TLS_SIGN_MESSAGE_LEN`] bytes).
    TlsSign {
        index: u32,
        scheme: u16,
        message: Vec<u8>,
    },
    /// Registers the certificate chain (PEM, leaf first) of TLS key `index`: accepted only
    /// if the leaf carries that key. Evidence quotes cover only listings whose
    /// `cert-*.pem` lines name a registered chain.
    TlsRegisterCertificate {
        index: u32,
        chain_pem: Vec<u8>,
    },
    /// The public key of the ACME account key (P-256, derived from the root; the private
    /// key never leaves keyservice).
    AcmeAccountPublicKey,
    /// An ES256 signature by the ACME account key over a JWS signing input
    /// (1..=[`MAX_ACME_SIGNING_INPUT_LEN`] bytes; see the module docs for its shape).
    AcmeAccountSign {
        signing_input: Vec<u8>,
    },
    /// Reseal the running root for `target`, as an operator's signed `request` asks (see
    /// the module docs); `source` is the shared sealed root in shared-root mode, `None`
    /// for the keyservice's own root file.
    OperatorReseal {
        target: ComposeHash,
        signature: [u8; OPERATOR_SIGNATURE_LEN],
        request: Vec<u8>,
        source: Option<[u8; SEALED_ROOT_LEN]>,
    },
    /// The state directory's files an operator backs up.
    StateFiles,
}

/// One file of keyservice's state directory (`StateFiles`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateFile {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// `OperatorReseal`'s answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resealed {
    /// The root sealed for the target compose hash.
    pub sealed: [u8; SEALED_ROOT_LEN],
    pub root_id: RootId,
    /// The file written in the state directory (`None` in shared-root mode).
    pub file: Option<String>,
}

/// A successful response payload.
#[non_exhaustive]
pub enum Response {
    Status(ServiceStatus),
    NewWallet {
        path: DerivationPath,
        public_key: PublicKey,
    },
    PublicKey(PublicKey),
    Signature(Signature),
    SecretKey(SecretKey32),
    Ciphertext(Vec<u8>),
    Plaintext(Vec<u8>),
    Payers(PayerList),
    Random(SecretBytes),
    Quote(QuoteBundle),
    Info(DeploymentInfo),
    RootStatus(RootStatus),
    SealedRoot(NewSealedRoot),
    RootId(RootId),
    /// One tag per item of the `RowMac` request, in order.
    RowMacs(Vec<[u8; ROW_MAC_LEN]>),
    /// `TlsPublicKey`: SubjectPublicKeyInfo DER.
    Spki(Vec<u8>),
    /// `TlsSign`: the DER ECDSA signature.
    TlsSignature(Vec<u8>),
    /// `TlsRegisterCertificate`: SHA-256 of the registered chain bytes.
    CertificateRegistered([u8; 32]),
    /// `AcmeAccountPublicKey`: the uncompressed P-256 point `0x04 ‖ x ‖ y`.
    AcmeAccountKey([u8; ACME_PUBLIC_KEY_LEN]),
    /// `AcmeAccountSign`: the ES256 signature `r ‖ s`.
    AcmeSignature([u8; ACME_SIGNATURE_LEN]),
    /// `OperatorReseal`.
    Resealed(Resealed),
    /// `StateFiles`.
    StateFiles(Vec<StateFile>),
}

impl fmt::Debug for Response {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Status(s) => f.debug_tuple("Status").field(s).finish(),
            Self::NewWallet { path, public_key } => f
                .debug_struct("NewWallet")
                .field("path", path)
                .field("public_key", public_key)
                .finish(),
            Self::PublicKey(p) => f.debug_tuple("PublicKey").field(p).finish(),
            Self::Signature(s) => f.debug_tuple("Signature").field(s).finish(),
            Self::SecretKey(k) => f.debug_tuple("SecretKey").field(k).finish(),
            Self::Ciphertext(c) => write!(f, "Ciphertext(<{} bytes>)", c.len()),
            Self::Plaintext(p) => write!(f, "Plaintext(<{} bytes>)", p.len()),
            Self::Payers(p) => f.debug_tuple("Payers").field(p).finish(),
            Self::Random(r) => f.debug_tuple("Random").field(r).finish(),
            Self::Quote(q) => write!(f, "Quote({}, <{} bytes>)", q.source, q.quote.len()),
            Self::Info(i) => write!(f, "Info(compose_hash {})", i.compose_hash),
            Self::RootStatus(s) => f.debug_tuple("RootStatus").field(s).finish(),
            Self::SealedRoot(s) => write!(f, "SealedRoot(root_id {})", s.root_id),
            Self::RootId(id) => f.debug_tuple("RootId").field(id).finish(),
            Self::RowMacs(tags) => write!(f, "RowMacs(<{} tags>)", tags.len()),
            Self::Spki(spki) => write!(f, "Spki(<{} bytes>)", spki.len()),
            Self::TlsSignature(sig) => write!(f, "TlsSignature(<{} bytes>)", sig.len()),
            Self::CertificateRegistered(hash) => {
                write!(f, "CertificateRegistered({})", hex_prefix(hash))
            }
            Self::AcmeAccountKey(point) => write!(f, "AcmeAccountKey({})", hex_prefix(point)),
            Self::AcmeSignature(_) => f.write_str("AcmeSignature(<64 bytes>)"),
            Self::Resealed(r) => f.debug_tuple("Resealed").field(r).finish(),
            Self::StateFiles(files) => {
                let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
                f.debug_tuple("StateFiles").field(&names).finish()
            }
        }
    }
}

/// A cursor over a payload that reports truncation as a [`DecodeError`].
struct Reader<'a> {
    op: Op,
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(op: Op, buf: &'a [u8]) -> Self {
        Self { op, buf }
    }

    fn err(&self, reason: &'static str) -> DecodeError {
        DecodeError {
            op: self.op,
            reason,
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() < n {
            return Err(self.err("truncated"));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    /// `len:u32 ‖ bytes`.
    fn bytes32(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    /// `len:u32 ‖ UTF-8`.
    fn string32(&mut self) -> Result<String, DecodeError> {
        let raw = self.bytes32()?;
        std::str::from_utf8(raw)
            .map(str::to_owned)
            .map_err(|_| self.err("text is not UTF-8"))
    }

    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.buf)
    }

    /// A file name: `len:u16 ‖ UTF-8`, at most [`MAX_STATE_FILE_NAME_LEN`] bytes.
    fn name(&mut self) -> Result<String, DecodeError> {
        let len = usize::from(self.u16()?);
        if len > MAX_STATE_FILE_NAME_LEN {
            return Err(self.err("a file name is at most 128 bytes"));
        }
        let raw = self.take(len)?;
        std::str::from_utf8(raw)
            .map(str::to_owned)
            .map_err(|_| self.err("a file name is not UTF-8"))
    }

    fn cid(&mut self) -> Result<String, DecodeError> {
        let len = usize::from(self.u16()?);
        if len == 0 || len > MAX_CID_LEN {
            return Err(self.err("CID length must be 1..=512 bytes"));
        }
        let raw = self.take(len)?;
        std::str::from_utf8(raw)
            .map(str::to_owned)
            .map_err(|_| self.err("CID is not UTF-8"))
    }

    fn purpose(&mut self) -> Result<ServicePurpose, DecodeError> {
        ServicePurpose::from_u8(self.u8()?).ok_or_else(|| self.err("unknown service purpose"))
    }

    fn public_key(&mut self) -> Result<PublicKey, DecodeError> {
        PublicKey::from_uncompressed(self.array()?)
            .map_err(|_| self.err("public key is not uncompressed"))
    }

    fn finish(self) -> Result<(), DecodeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(self.err("trailing bytes"))
        }
    }
}

/// `len:u32 ‖ bytes` (payloads are far below 4 GiB: a frame is at most 64 KiB).
fn put_bytes32(buf: &mut Vec<u8>, bytes: &[u8]) {
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(&bytes[..len as usize]);
}

fn hex_prefix(bytes: &[u8]) -> String {
    bytes.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// `len:u16 ‖ UTF-8`, at most [`MAX_STATE_FILE_NAME_LEN`] bytes (longer names are cut by
/// the sender, which only ever sends names it chose).
fn put_name(buf: &mut Vec<u8>, name: &str) {
    let bytes = name.as_bytes();
    let len = bytes.len().min(MAX_STATE_FILE_NAME_LEN);
    buf.extend_from_slice(&(len as u16).to_be_bytes());
    buf.extend_from_slice(&bytes[..len]);
}

fn put_cid(buf: &mut Vec<u8>, cid: &str) {
    // Length is checked by the client before encoding; clamp defensively so the prefix
    // and the bytes can never disagree.
    let bytes = cid.as_bytes();
    let len = bytes.len().min(usize::from(u16::MAX));
    buf.extend_from_slice(&(len as u16).to_be_bytes());
    buf.extend_from_slice(&bytes[..len]);
}

impl Request {
    pub fn op(&self) -> Op {
        match self {
            Self::Status => Op::Status,
            Self::CreateWallet => Op::CreateWallet,
            Self::WalletPublicKey { .. } => Op::WalletPublicKey,
            Self::WalletSign { .. } => Op::WalletSign,
            Self::WalletExportKey { .. } => Op::WalletExportKey,
            Self::ActionPublicKey { .. } => Op::ActionPublicKey,
            Self::ActionSign { .. } => Op::ActionSign,
            Self::ActionExportKey { .. } => Op::ActionExportKey,
            Self::Encrypt { .. } => Op::Encrypt,
            Self::Decrypt { .. } => Op::Decrypt,
            Self::Payers => Op::Payers,
            Self::PayerSignTransaction { .. } => Op::PayerSignTransaction,
            Self::RandomBytes { .. } => Op::RandomBytes,
            Self::ServiceSeal { .. } => Op::ServiceSeal,
            Self::ServiceUnseal { .. } => Op::ServiceUnseal,
            Self::AttestationQuote => Op::AttestationQuote,
            Self::EvidenceQuote { .. } => Op::EvidenceQuote,
            Self::FreshEvidenceQuote { .. } => Op::FreshEvidenceQuote,
            Self::AttestationInfo => Op::AttestationInfo,
            Self::RootStatus => Op::RootStatus,
            Self::CreateSealedRoot => Op::CreateSealedRoot,
            Self::AdoptRoot { .. } => Op::AdoptRoot,
            Self::RowMac { .. } => Op::RowMac,
            Self::TlsPublicKey { .. } => Op::TlsPublicKey,
            Self::TlsSign { .. } => Op::TlsSign,
            Self::TlsRegisterCertificate { .. } => Op::TlsRegisterCertificate,
            Self::AcmeAccountPublicKey => Op::AcmeAccountPublicKey,
            Self::AcmeAccountSign { .. } => Op::AcmeAccountSign,
            Self::OperatorReseal { .. } => Op::OperatorReseal,
            Self::StateFiles => Op::StateFiles,
        }
    }

    /// Appends the payload (not the header) to `buf`.
    pub fn encode_payload(&self, buf: &mut Vec<u8>) {
        match self {
            Self::Status
            | Self::CreateWallet
            | Self::Payers
            | Self::AttestationQuote
            | Self::AttestationInfo
            | Self::RootStatus
            | Self::CreateSealedRoot
            | Self::AcmeAccountPublicKey
            | Self::StateFiles => {}
            Self::AcmeAccountSign { signing_input } => buf.extend_from_slice(signing_input),
            Self::OperatorReseal {
                target,
                signature,
                request,
                source,
            } => {
                buf.extend_from_slice(&target.0);
                buf.extend_from_slice(signature);
                // Checked by the client before encoding; clamped so prefix and bytes agree.
                let len = request.len().min(MAX_OPERATOR_REQUEST_LEN);
                buf.extend_from_slice(&(len as u16).to_be_bytes());
                buf.extend_from_slice(&request[..len]);
                if let Some(sealed) = source {
                    buf.extend_from_slice(sealed);
                }
            }
            Self::EvidenceQuote { sums } => buf.extend_from_slice(sums),
            Self::FreshEvidenceQuote { nonce, sums } => {
                buf.extend_from_slice(nonce);
                buf.extend_from_slice(sums);
            }
            Self::AdoptRoot { sealed } => buf.extend_from_slice(sealed),
            Self::TlsPublicKey { index } => buf.extend_from_slice(&index.to_be_bytes()),
            Self::TlsSign {
                index,
                scheme,
                message,
            } => {
                buf.extend_from_slice(&index.to_be_bytes());
                buf.extend_from_slice(&scheme.to_be_bytes());
                buf.extend_from_slice(message);
            }
            Self::TlsRegisterCertificate { index, chain_pem } => {
                buf.extend_from_slice(&index.to_be_bytes());
                buf.extend_from_slice(chain_pem);
            }
            Self::RowMac { items } => {
                // Counts and lengths are checked by the client before encoding; clamp
                // defensively so a prefix and its bytes can never disagree.
                let n = items.len().min(usize::from(u16::MAX));
                buf.extend_from_slice(&(n as u16).to_be_bytes());
                for item in &items[..n] {
                    let len = item.len().min(usize::from(u16::MAX));
                    buf.extend_from_slice(&(len as u16).to_be_bytes());
                    buf.extend_from_slice(&item[..len]);
                }
            }
            Self::WalletPublicKey { path } | Self::WalletExportKey { path } => {
                buf.extend_from_slice(&path.0)
            }
            Self::WalletSign { path, digest } => {
                buf.extend_from_slice(&path.0);
                buf.extend_from_slice(digest);
            }
            Self::ActionPublicKey { cid } | Self::ActionExportKey { cid } => put_cid(buf, cid),
            Self::ActionSign { cid, digest } => {
                put_cid(buf, cid);
                buf.extend_from_slice(digest);
            }
            Self::Encrypt {
                path,
                plaintext: data,
            }
            | Self::Decrypt {
                path,
                ciphertext: data,
            } => {
                buf.extend_from_slice(&path.0);
                buf.extend_from_slice(data);
            }
            Self::PayerSignTransaction { payer, tx } => {
                let (kind, index) = match payer {
                    Payer::Api(i) => (0u8, *i),
                    Payer::Admin => (1u8, 0),
                };
                buf.push(kind);
                buf.extend_from_slice(&index.to_be_bytes());
                buf.extend_from_slice(tx);
            }
            Self::RandomBytes { n } => buf.push(*n),
            Self::ServiceSeal {
                purpose,
                plaintext: data,
            }
            | Self::ServiceUnseal {
                purpose,
                ciphertext: data,
            } => {
                buf.push(*purpose as u8);
                buf.extend_from_slice(data);
            }
        }
    }

    /// Decodes a request payload for `op`.
    pub fn decode(op: Op, payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(op, payload);
        let req = match op {
            Op::Status => Self::Status,
            Op::CreateWallet => Self::CreateWallet,
            Op::Payers => Self::Payers,
            Op::AttestationQuote => Self::AttestationQuote,
            Op::AttestationInfo => Self::AttestationInfo,
            Op::RootStatus => Self::RootStatus,
            Op::CreateSealedRoot => Self::CreateSealedRoot,
            Op::AcmeAccountPublicKey => Self::AcmeAccountPublicKey,
            Op::StateFiles => Self::StateFiles,
            Op::OperatorReseal => {
                let target = ComposeHash(r.array()?);
                let signature = r.array()?;
                let len = usize::from(r.u16()?);
                if len == 0 || len > MAX_OPERATOR_REQUEST_LEN {
                    return Err(r.err("an operator request must be 1..=1024 bytes"));
                }
                let request = r.take(len)?.to_vec();
                let source = match r.rest() {
                    [] => None,
                    rest => Some(
                        rest.try_into()
                            .map_err(|_| r.err("a sealed root is 101 bytes"))?,
                    ),
                };
                Self::OperatorReseal {
                    target,
                    signature,
                    request,
                    source,
                }
            }
            Op::AcmeAccountSign => {
                let input = r.rest();
                if input.is_empty() || input.len() > MAX_ACME_SIGNING_INPUT_LEN {
                    return Err(r.err("a JWS signing input must be 1..=16384 bytes"));
                }
                Self::AcmeAccountSign {
                    signing_input: input.to_vec(),
                }
            }
            Op::AdoptRoot => Self::AdoptRoot {
                sealed: r.rest().to_vec(),
            },
            Op::TlsPublicKey => Self::TlsPublicKey { index: r.u32()? },
            Op::TlsSign => {
                let index = r.u32()?;
                let scheme = r.u16()?;
                let message = r.rest();
                if message.is_empty() || message.len() > MAX_TLS_SIGN_MESSAGE_LEN {
                    return Err(r.err("a TLS signing message must be 1..=16384 bytes"));
                }
                Self::TlsSign {
                    index,
                    scheme,
                    message: message.to_vec(),
                }
            }
            Op::TlsRegisterCertificate => {
                let index = r.u32()?;
                let chain_pem = r.rest();
                if chain_pem.is_empty() || chain_pem.len() > MAX_TLS_CHAIN_LEN {
                    return Err(r.err("a certificate chain must be 1..=32768 bytes"));
                }
                Self::TlsRegisterCertificate {
                    index,
                    chain_pem: chain_pem.to_vec(),
                }
            }
            Op::RowMac => {
                // Well-formed counts out of range (0, or over MAX_ROW_MAC_ITEMS) decode: the
                // keyservice answers them InvalidArgument. Each item takes at least its
                // 2-byte length, so a frame bounds the count anyway.
                let n = usize::from(r.u16()?);
                let mut items = Vec::with_capacity(n.min(MAX_ROW_MAC_ITEMS));
                for _ in 0..n {
                    let len = usize::from(r.u16()?);
                    items.push(r.take(len)?.to_vec());
                }
                Self::RowMac { items }
            }
            Op::EvidenceQuote => {
                let sums = r.rest();
                if sums.is_empty() || sums.len() > MAX_EVIDENCE_SUMS_LEN {
                    return Err(r.err("sha256sum.txt must be 1..=8192 bytes"));
                }
                Self::EvidenceQuote {
                    sums: sums.to_vec(),
                }
            }
            Op::FreshEvidenceQuote => {
                let nonce = r.array()?;
                let sums = r.rest();
                if sums.is_empty() || sums.len() > MAX_EVIDENCE_SUMS_LEN {
                    return Err(r.err("sha256sum.txt must be 1..=8192 bytes"));
                }
                Self::FreshEvidenceQuote {
                    nonce,
                    sums: sums.to_vec(),
                }
            }
            Op::WalletPublicKey => Self::WalletPublicKey {
                path: DerivationPath(r.array()?),
            },
            Op::WalletExportKey => Self::WalletExportKey {
                path: DerivationPath(r.array()?),
            },
            Op::WalletSign => Self::WalletSign {
                path: DerivationPath(r.array()?),
                digest: r.array()?,
            },
            Op::ActionPublicKey => Self::ActionPublicKey { cid: r.cid()? },
            Op::ActionExportKey => Self::ActionExportKey { cid: r.cid()? },
            Op::ActionSign => Self::ActionSign {
                cid: r.cid()?,
                digest: r.array()?,
            },
            Op::Encrypt => Self::Encrypt {
                path: DerivationPath(r.array()?),
                plaintext: r.rest().to_vec(),
            },
            Op::Decrypt => {
                let path = DerivationPath(r.array()?);
                let ciphertext = r.rest().to_vec();
                if ciphertext.len() < NONCE_LEN + TAG_LEN {
                    return Err(DecodeError {
                        op,
                        reason: "ciphertext shorter than nonce and tag",
                    });
                }
                Self::Decrypt { path, ciphertext }
            }
            Op::PayerSignTransaction => {
                let kind = r.u8()?;
                let index = r.u32()?;
                let payer = match (kind, index) {
                    (0, i) => Payer::Api(i),
                    (1, 0) => Payer::Admin,
                    (1, _) => return Err(r.err("the admin payer has index 0")),
                    _ => return Err(r.err("payer kind must be 0 (api) or 1 (admin)")),
                };
                let tx = r.rest().to_vec();
                if tx.is_empty() {
                    return Err(r.err("empty transaction"));
                }
                Self::PayerSignTransaction { payer, tx }
            }
            Op::RandomBytes => Self::RandomBytes { n: r.u8()? },
            Op::ServiceSeal => Self::ServiceSeal {
                purpose: r.purpose()?,
                plaintext: r.rest().to_vec(),
            },
            Op::ServiceUnseal => {
                let purpose = r.purpose()?;
                let ciphertext = r.rest().to_vec();
                if ciphertext.len() < NONCE_LEN + TAG_LEN {
                    return Err(r.err("ciphertext shorter than nonce and tag"));
                }
                Self::ServiceUnseal {
                    purpose,
                    ciphertext,
                }
            }
        };
        r.finish()?;
        Ok(req)
    }
}

impl Response {
    /// Appends the payload (not the header) to `buf`.
    pub fn encode_payload(&self, buf: &mut Vec<u8>) {
        match self {
            Self::Status(s) => {
                buf.push(s.protocol_version);
                buf.push(match s.platform {
                    PlatformKind::Dev => 0,
                    PlatformKind::Dstack => 1,
                });
                buf.extend_from_slice(&s.compose_hash.0);
                buf.extend_from_slice(&s.api_payers.to_be_bytes());
            }
            Self::NewWallet { path, public_key } => {
                buf.extend_from_slice(&path.0);
                buf.extend_from_slice(public_key.uncompressed());
            }
            Self::PublicKey(p) => buf.extend_from_slice(p.uncompressed()),
            Self::Signature(s) => buf.extend_from_slice(&s.0),
            Self::SecretKey(k) => buf.extend_from_slice(k.expose_secret()),
            Self::Ciphertext(d) | Self::Plaintext(d) => buf.extend_from_slice(d),
            Self::Payers(p) => {
                let n = u32::try_from(p.api.len()).unwrap_or(u32::MAX);
                buf.extend_from_slice(&n.to_be_bytes());
                for a in p.api.iter().take(n as usize) {
                    buf.extend_from_slice(&a.0);
                }
                buf.extend_from_slice(&p.admin.0);
            }
            Self::Random(r) => buf.extend_from_slice(r.expose_secret()),
            Self::Quote(q) => {
                buf.push(q.source.to_u8());
                put_bytes32(buf, &q.quote);
                put_bytes32(buf, q.event_log.as_bytes());
                put_bytes32(buf, q.vm_config.as_bytes());
            }
            Self::Info(i) => {
                for text in [&i.app_id, &i.instance_id, &i.compose_hash, &i.app_compose] {
                    put_bytes32(buf, text.as_bytes());
                }
                match &i.key_provider {
                    Some(k) => {
                        buf.push(1);
                        put_bytes32(buf, k.as_bytes());
                    }
                    None => buf.push(0),
                }
                for text in [
                    &i.mrtd,
                    &i.rtmr0,
                    &i.rtmr1,
                    &i.rtmr2,
                    &i.rtmr3,
                    &i.event_log,
                ] {
                    put_bytes32(buf, text.as_bytes());
                }
            }
            Self::RootStatus(s) => match &s.root_id {
                None => {
                    buf.push(0);
                    buf.extend_from_slice(&s.compose_hash.0);
                }
                Some(id) => {
                    buf.push(1);
                    buf.extend_from_slice(&s.compose_hash.0);
                    buf.extend_from_slice(&id.0);
                }
            },
            Self::SealedRoot(s) => {
                buf.extend_from_slice(&s.sealed);
                buf.extend_from_slice(&s.root_id.0);
            }
            Self::RootId(id) => buf.extend_from_slice(&id.0),
            Self::RowMacs(tags) => {
                for tag in tags {
                    buf.extend_from_slice(tag);
                }
            }
            Self::Spki(d) | Self::TlsSignature(d) => buf.extend_from_slice(d),
            Self::CertificateRegistered(hash) => buf.extend_from_slice(hash),
            Self::AcmeAccountKey(point) => buf.extend_from_slice(point),
            Self::AcmeSignature(sig) => buf.extend_from_slice(sig),
            Self::Resealed(r) => {
                buf.extend_from_slice(&r.sealed);
                buf.extend_from_slice(&r.root_id.0);
                put_name(buf, r.file.as_deref().unwrap_or(""));
            }
            Self::StateFiles(files) => {
                let n = files.len().min(MAX_STATE_FILES);
                buf.extend_from_slice(&(n as u16).to_be_bytes());
                for file in &files[..n] {
                    put_name(buf, &file.name);
                    let len = file.bytes.len().min(MAX_STATE_FILE_LEN);
                    buf.extend_from_slice(&(len as u32).to_be_bytes());
                    buf.extend_from_slice(&file.bytes[..len]);
                }
            }
        }
    }

    /// Decodes a success payload for `op` (the operation of the request it answers).
    pub fn decode(op: Op, payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(op, payload);
        let resp = match op {
            Op::Status => {
                let protocol_version = r.u8()?;
                let platform = match r.u8()? {
                    0 => PlatformKind::Dev,
                    1 => PlatformKind::Dstack,
                    _ => return Err(r.err("unknown platform")),
                };
                Self::Status(ServiceStatus {
                    protocol_version,
                    platform,
                    compose_hash: ComposeHash(r.array()?),
                    api_payers: r.u32()?,
                })
            }
            Op::CreateWallet => Self::NewWallet {
                path: DerivationPath(r.array()?),
                public_key: r.public_key()?,
            },
            Op::WalletPublicKey | Op::ActionPublicKey => Self::PublicKey(r.public_key()?),
            Op::WalletSign | Op::ActionSign | Op::PayerSignTransaction => {
                let sig = Signature(r.array()?);
                if !matches!(sig.v(), 27 | 28) {
                    return Err(r.err("signature v must be 27 or 28"));
                }
                Self::Signature(sig)
            }
            Op::WalletExportKey | Op::ActionExportKey => {
                let mut bytes = Zeroizing::new([0u8; 32]);
                bytes.copy_from_slice(r.take(32)?);
                Self::SecretKey(SecretKey32::from_zeroizing(bytes))
            }
            Op::Encrypt | Op::ServiceSeal => {
                let d = r.rest();
                if d.len() < NONCE_LEN + TAG_LEN {
                    return Err(r.err("ciphertext shorter than nonce and tag"));
                }
                Self::Ciphertext(d.to_vec())
            }
            Op::Decrypt | Op::ServiceUnseal => Self::Plaintext(r.rest().to_vec()),
            Op::Payers => {
                let n = r.u32()? as usize;
                if n > MAX_FRAME_LEN / Address::LEN {
                    return Err(r.err("payer count too large"));
                }
                let mut api = Vec::with_capacity(n);
                for _ in 0..n {
                    api.push(Address(r.array()?));
                }
                Self::Payers(PayerList {
                    api,
                    admin: Address(r.array()?),
                })
            }
            Op::RandomBytes => Self::Random(SecretBytes::new(Zeroizing::new(r.rest().to_vec()))),
            Op::AttestationQuote | Op::EvidenceQuote | Op::FreshEvidenceQuote => {
                let source =
                    QuoteSource::from_u8(r.u8()?).ok_or_else(|| r.err("unknown quote source"))?;
                Self::Quote(QuoteBundle {
                    source,
                    quote: r.bytes32()?.to_vec(),
                    event_log: r.string32()?,
                    vm_config: r.string32()?,
                })
            }
            Op::AttestationInfo => {
                let app_id = r.string32()?;
                let instance_id = r.string32()?;
                let compose_hash = r.string32()?;
                let app_compose = r.string32()?;
                let key_provider = match r.u8()? {
                    0 => None,
                    1 => Some(r.string32()?),
                    _ => return Err(r.err("key_provider flag must be 0 or 1")),
                };
                Self::Info(DeploymentInfo {
                    app_id,
                    instance_id,
                    compose_hash,
                    app_compose,
                    key_provider,
                    mrtd: r.string32()?,
                    rtmr0: r.string32()?,
                    rtmr1: r.string32()?,
                    rtmr2: r.string32()?,
                    rtmr3: r.string32()?,
                    event_log: r.string32()?,
                })
            }
            Op::RootStatus => {
                let state = r.u8()?;
                let compose_hash = ComposeHash(r.array()?);
                let root_id = match state {
                    0 => None,
                    1 => Some(RootId(r.array()?)),
                    _ => return Err(r.err("root state must be 0 (awaiting) or 1 (ready)")),
                };
                Self::RootStatus(RootStatus {
                    compose_hash,
                    root_id,
                })
            }
            Op::CreateSealedRoot => Self::SealedRoot(NewSealedRoot {
                sealed: r.array()?,
                root_id: RootId(r.array()?),
            }),
            Op::AdoptRoot => Self::RootId(RootId(r.array()?)),
            Op::TlsPublicKey | Op::TlsSign => {
                let d = r.rest();
                // An SPKI of P-256 is 91 bytes, a DER ECDSA P-256 signature at most 72.
                if d.is_empty() || d.len() > 512 {
                    return Err(r.err("TLS key answer must be 1..=512 bytes"));
                }
                if op == Op::TlsPublicKey {
                    Self::Spki(d.to_vec())
                } else {
                    Self::TlsSignature(d.to_vec())
                }
            }
            Op::TlsRegisterCertificate => Self::CertificateRegistered(r.array()?),
            Op::AcmeAccountPublicKey => {
                let point: [u8; ACME_PUBLIC_KEY_LEN] = r.array()?;
                if point[0] != 0x04 {
                    return Err(r.err("the ACME account key is not an uncompressed point"));
                }
                Self::AcmeAccountKey(point)
            }
            Op::AcmeAccountSign => Self::AcmeSignature(r.array()?),
            Op::OperatorReseal => {
                let sealed = r.array()?;
                let root_id = RootId(r.array()?);
                let name = r.name()?;
                Self::Resealed(Resealed {
                    sealed,
                    root_id,
                    file: (!name.is_empty()).then_some(name),
                })
            }
            Op::StateFiles => {
                let n = usize::from(r.u16()?);
                if n > MAX_STATE_FILES {
                    return Err(r.err("too many state files"));
                }
                let mut files = Vec::with_capacity(n);
                for _ in 0..n {
                    let name = r.name()?;
                    let len = r.u32()? as usize;
                    if len > MAX_STATE_FILE_LEN {
                        return Err(r.err("a state file is at most 16384 bytes"));
                    }
                    files.push(StateFile {
                        name,
                        bytes: r.take(len)?.to_vec(),
                    });
                }
                Self::StateFiles(files)
            }
            Op::RowMac => {
                let d = r.rest();
                if d.is_empty() || !d.len().is_multiple_of(ROW_MAC_LEN) {
                    return Err(r.err("row MAC answer must be one or more 32-byte tags"));
                }
                Self::RowMacs(
                    d.chunks_exact(ROW_MAC_LEN)
                        .map(|c| {
                            let mut tag = [0u8; ROW_MAC_LEN];
                            tag.copy_from_slice(c);
                            tag
                        })
                        .collect(),
                )
            }
        };
        r.finish()?;
        Ok(resp)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn round_trip(req: Request) {
        let mut buf = Vec::new();
        req.encode_payload(&mut buf);
        assert_eq!(Request::decode(req.op(), &buf).unwrap(), req);
        // Any truncation is an error, never a panic.
        for cut in 0..buf.len() {
            let _ = Request::decode(req.op(), &buf[..cut]);
        }
        let open_ended = matches!(
            req,
            Request::EvidenceQuote { .. }
                | Request::FreshEvidenceQuote { .. }
                | Request::Encrypt { .. }
                | Request::Decrypt { .. }
                | Request::PayerSignTransaction { .. }
                | Request::ServiceSeal { .. }
                | Request::ServiceUnseal { .. }
                | Request::AdoptRoot { .. }
                | Request::TlsSign { .. }
                | Request::TlsRegisterCertificate { .. }
                | Request::AcmeAccountSign { .. }
        );
        buf.push(0);
        if !open_ended {
            assert!(
                Request::decode(req.op(), &buf).is_err(),
                "trailing byte accepted"
            );
        }
    }

    #[test]
    fn requests_round_trip() {
        let path = DerivationPath([3; 32]);
        round_trip(Request::Status);
        round_trip(Request::WalletSign {
            path,
            digest: [9; 32],
        });
        round_trip(Request::ActionSign {
            cid: "QmTest".into(),
            digest: [1; 32],
        });
        round_trip(Request::Decrypt {
            path,
            ciphertext: vec![0; 40],
        });
        round_trip(Request::PayerSignTransaction {
            payer: Payer::Api(7),
            tx: vec![2, 0xc0],
        });
        round_trip(Request::PayerSignTransaction {
            payer: Payer::Admin,
            tx: vec![0xc0],
        });
        round_trip(Request::RandomBytes { n: 32 });
        round_trip(Request::ServiceSeal {
            purpose: ServicePurpose::AcmeAccount,
            plaintext: vec![1, 2, 3],
        });
        round_trip(Request::ServiceUnseal {
            purpose: ServicePurpose::AcmeCertificate,
            ciphertext: vec![0; 28],
        });
        round_trip(Request::AttestationQuote);
        round_trip(Request::AttestationInfo);
        round_trip(Request::EvidenceQuote {
            sums: b"00  a\n".to_vec(),
        });
        round_trip(Request::FreshEvidenceQuote {
            nonce: [0xa5; 32],
            sums: b"00  a\n".to_vec(),
        });
        round_trip(Request::RootStatus);
        round_trip(Request::CreateSealedRoot);
        round_trip(Request::AdoptRoot {
            sealed: vec![0x5a; SEALED_ROOT_LEN],
        });
        round_trip(Request::RowMac {
            items: vec![b"row one".to_vec(), Vec::new(), vec![0xee; 300]],
        });
        round_trip(Request::RowMac { items: Vec::new() });
    }

    #[test]
    fn tls_key_requests_round_trip_and_are_bounded() {
        round_trip(Request::TlsPublicKey { index: 7 });
        round_trip(Request::TlsSign {
            index: 1,
            scheme: TLS_SCHEME_ECDSA_P256_SHA256,
            message: b"transcript".to_vec(),
        });
        round_trip(Request::TlsRegisterCertificate {
            index: 2,
            chain_pem: b"-----BEGIN CERTIFICATE-----".to_vec(),
        });
        let mut over = vec![0, 0, 0, 1, 0x04, 0x03];
        over.extend_from_slice(&vec![1; MAX_TLS_SIGN_MESSAGE_LEN + 1]);
        assert!(Request::decode(Op::TlsSign, &over).is_err());
        assert!(Request::decode(Op::TlsSign, &[0, 0, 0, 1, 0x04, 0x03]).is_err());
        let mut chain = vec![0, 0, 0, 1];
        chain.extend_from_slice(&vec![b'a'; MAX_TLS_CHAIN_LEN + 1]);
        assert!(Request::decode(Op::TlsRegisterCertificate, &chain).is_err());
        for op in [0x18, 0x19, 0x1A] {
            assert_eq!(Op::from_u8(op).map(|o| o as u8), Some(op));
        }
    }

    #[test]
    fn acme_account_key_requests_round_trip_and_are_bounded() {
        round_trip(Request::AcmeAccountPublicKey);
        round_trip(Request::AcmeAccountSign {
            signing_input: b"eyJhbGciOiJFUzI1NiJ9.e30".to_vec(),
        });
        assert!(Request::decode(Op::AcmeAccountSign, &[]).is_err());
        assert!(
            Request::decode(
                Op::AcmeAccountSign,
                &vec![b'a'; MAX_ACME_SIGNING_INPUT_LEN + 1]
            )
            .is_err()
        );
        assert!(
            Request::decode(Op::AcmeAccountSign, &vec![b'a'; MAX_ACME_SIGNING_INPUT_LEN]).is_ok()
        );
        assert!(Request::decode(Op::AcmeAccountPublicKey, &[0]).is_err());
        for op in [0x1D, 0x1E] {
            assert_eq!(Op::from_u8(op).map(|o| o as u8), Some(op));
        }
        // Answers: a 65-byte uncompressed point, a 64-byte r ‖ s; nothing else.
        let mut point = [7u8; ACME_PUBLIC_KEY_LEN];
        point[0] = 0x04;
        let mut buf = Vec::new();
        Response::AcmeAccountKey(point).encode_payload(&mut buf);
        assert!(matches!(
            Response::decode(Op::AcmeAccountPublicKey, &buf),
            Ok(Response::AcmeAccountKey(p)) if p == point
        ));
        assert!(Response::decode(Op::AcmeAccountPublicKey, &buf[..64]).is_err());
        buf[0] = 0x02;
        assert!(Response::decode(Op::AcmeAccountPublicKey, &buf).is_err());
        let mut sig = Vec::new();
        Response::AcmeSignature([9; ACME_SIGNATURE_LEN]).encode_payload(&mut sig);
        assert_eq!(sig.len(), 64);
        assert!(Response::decode(Op::AcmeAccountSign, &sig).is_ok());
        sig.push(0);
        assert!(Response::decode(Op::AcmeAccountSign, &sig).is_err());
    }

    #[test]
    fn operator_requests_round_trip_and_are_bounded() {
        let reseal = |request: Vec<u8>, source| Request::OperatorReseal {
            target: ComposeHash([3; 32]),
            signature: [4; OPERATOR_SIGNATURE_LEN],
            request,
            source,
        };
        round_trip(reseal(b"appliance operator request".to_vec(), None));
        round_trip(reseal(b"x".to_vec(), Some([5; SEALED_ROOT_LEN])));
        round_trip(Request::StateFiles);
        let mut buf = Vec::new();
        reseal(b"abc".to_vec(), Some([5; SEALED_ROOT_LEN])).encode_payload(&mut buf);
        assert_eq!(buf.len(), 32 + 65 + 2 + 3 + 101);
        // A source that is not a whole sealed root, an empty or oversized request.
        assert!(Request::decode(Op::OperatorReseal, &buf[..buf.len() - 1]).is_err());
        let mut empty = buf[..97].to_vec();
        empty.extend_from_slice(&0u16.to_be_bytes());
        assert!(Request::decode(Op::OperatorReseal, &empty).is_err());
        let mut long = buf[..97].to_vec();
        long.extend_from_slice(&1025u16.to_be_bytes());
        long.extend_from_slice(&[b'a'; 1025]);
        assert!(Request::decode(Op::OperatorReseal, &long).is_err());

        let resealed = Resealed {
            sealed: [6; SEALED_ROOT_LEN],
            root_id: RootId([7; 32]),
            file: Some("root.sealed.0303030303030303".into()),
        };
        for answer in [
            resealed.clone(),
            Resealed {
                file: None,
                ..resealed.clone()
            },
        ] {
            let mut buf = Vec::new();
            Response::Resealed(answer.clone()).encode_payload(&mut buf);
            match Response::decode(Op::OperatorReseal, &buf).unwrap() {
                Response::Resealed(got) => assert_eq!(got, answer),
                other => panic!("{other:?}"),
            }
        }
        let files = vec![
            StateFile {
                name: "root.sealed".into(),
                bytes: vec![1; SEALED_ROOT_LEN],
            },
            StateFile {
                name: "payer-contracts.json".into(),
                bytes: b"{}".to_vec(),
            },
        ];
        let mut buf = Vec::new();
        Response::StateFiles(files.clone()).encode_payload(&mut buf);
        match Response::decode(Op::StateFiles, &buf).unwrap() {
            Response::StateFiles(got) => assert_eq!(got, files),
            other => panic!("{other:?}"),
        }
        // The bounds hold on decoding too.
        let mut many = (MAX_STATE_FILES as u16 + 1).to_be_bytes().to_vec();
        many.extend_from_slice(&[0; 8]);
        assert!(Response::decode(Op::StateFiles, &many).is_err());
        let mut big = 1u16.to_be_bytes().to_vec();
        big.extend_from_slice(&0u16.to_be_bytes());
        big.extend_from_slice(&(MAX_STATE_FILE_LEN as u32 + 1).to_be_bytes());
        big.extend_from_slice(&vec![0; MAX_STATE_FILE_LEN + 1]);
        assert!(Response::decode(Op::StateFiles, &big).is_err());
    }

    #[test]
    fn root_and_row_mac_requests_have_their_exact_encodings() {
        let mut buf = Vec::new();
        Request::RowMac {
            items: vec![b"ab".to_vec(), Vec::new()],
        }
        .encode_payload(&mut buf);
        assert_eq!(buf, [0, 2, 0, 2, b'a', b'b', 0, 0]);
        // Every truncation of a well-formed RowMac is refused (no item is ever cut short).
        for cut in 0..buf.len() {
            assert!(
                Request::decode(Op::RowMac, &buf[..cut]).is_err(),
                "cut {cut}"
            );
        }
        // An item length running past the payload, a count with too few items.
        assert!(Request::decode(Op::RowMac, &[0, 1, 0, 3, b'a', b'b']).is_err());
        assert!(Request::decode(Op::RowMac, &[0, 3, 0, 0, 0, 0]).is_err());
        // Counts out of range still decode: the keyservice answers InvalidArgument.
        let mut over = ((MAX_ROW_MAC_ITEMS + 1) as u16).to_be_bytes().to_vec();
        over.extend(std::iter::repeat_n(0u8, 2 * (MAX_ROW_MAC_ITEMS + 1)));
        match Request::decode(Op::RowMac, &over).unwrap() {
            Request::RowMac { items } => assert_eq!(items.len(), MAX_ROW_MAC_ITEMS + 1),
            other => panic!("{other:?}"),
        }
        // AdoptRoot carries its bytes as they are, whatever their length: the keyservice
        // judges (and refuses) a bad blob itself.
        for len in [0usize, 1, SEALED_ROOT_LEN - 1, SEALED_ROOT_LEN + 1] {
            let blob = vec![7u8; len];
            assert_eq!(
                Request::decode(Op::AdoptRoot, &blob).unwrap(),
                Request::AdoptRoot { sealed: blob }
            );
        }
        for op in [Op::RootStatus, Op::CreateSealedRoot] {
            assert_eq!(Request::decode(op, &[]).unwrap().op(), op);
            assert!(Request::decode(op, &[0]).is_err());
        }
        // The largest single item fills a frame exactly.
        let item = vec![1u8; MAX_ROW_MAC_ITEM_LEN];
        let mut frame = Vec::new();
        let len = crate::codec::encode_frame(
            &mut frame,
            crate::codec::FrameHeader::new(Op::RowMac as u8, 0, 1),
            |b| Request::RowMac { items: vec![item] }.encode_payload(b),
        );
        assert_eq!(len, MAX_FRAME_LEN);
    }

    #[test]
    fn root_and_row_mac_answers_round_trip() {
        let hash = ComposeHash([0x11; 32]);
        let cases = [
            (
                Op::RootStatus,
                Response::RootStatus(RootStatus {
                    compose_hash: hash,
                    root_id: None,
                }),
                1 + 32,
            ),
            (
                Op::RootStatus,
                Response::RootStatus(RootStatus {
                    compose_hash: hash,
                    root_id: Some(RootId([0x22; 32])),
                }),
                1 + 32 + 32,
            ),
            (
                Op::CreateSealedRoot,
                Response::SealedRoot(NewSealedRoot {
                    sealed: [0x33; SEALED_ROOT_LEN],
                    root_id: RootId([0x44; 32]),
                }),
                SEALED_ROOT_LEN + 32,
            ),
            (Op::AdoptRoot, Response::RootId(RootId([0x55; 32])), 32),
            (
                Op::RowMac,
                Response::RowMacs(vec![[1; ROW_MAC_LEN], [2; ROW_MAC_LEN], [3; ROW_MAC_LEN]]),
                3 * 32,
            ),
        ];
        for (op, resp, len) in cases {
            let mut buf = Vec::new();
            resp.encode_payload(&mut buf);
            assert_eq!(buf.len(), len, "{op:?}");
            let back = Response::decode(op, &buf).unwrap();
            let mut again = Vec::new();
            back.encode_payload(&mut again);
            assert_eq!(buf, again, "{op:?}");
            for cut in 0..buf.len() {
                // Tags are self-delimiting: fewer whole tags decode (the client checks
                // their count against the request's); anything else is refused.
                if op == Op::RowMac && cut > 0 && cut.is_multiple_of(ROW_MAC_LEN) {
                    continue;
                }
                assert!(
                    Response::decode(op, &buf[..cut]).is_err(),
                    "{op:?} cut {cut}"
                );
            }
            buf.push(0);
            assert!(Response::decode(op, &buf).is_err(), "{op:?} trailing byte");
        }
        // Awaiting carries no root id; ready carries one.
        let mut awaiting = vec![0u8];
        awaiting.extend_from_slice(&hash.0);
        match Response::decode(Op::RootStatus, &awaiting).unwrap() {
            Response::RootStatus(s) => {
                assert_eq!(s.compose_hash, hash);
                assert!(!s.is_ready());
            }
            other => panic!("{other:?}"),
        }
        awaiting[0] = 2;
        assert!(Response::decode(Op::RootStatus, &awaiting).is_err());
        assert_eq!(ErrorCode::from_u8(11), ErrorCode::NoRoot);
        assert_eq!(ErrorCode::NoRoot as u8, 11);
    }

    #[test]
    fn evidence_quote_input_is_bounded() {
        assert!(Request::decode(Op::EvidenceQuote, &[]).is_err());
        let max = vec![b'a'; MAX_EVIDENCE_SUMS_LEN];
        assert!(Request::decode(Op::EvidenceQuote, &max).is_ok());
        let over = vec![b'a'; MAX_EVIDENCE_SUMS_LEN + 1];
        let err = Request::decode(Op::EvidenceQuote, &over).unwrap_err();
        assert_eq!(err.reason, "sha256sum.txt must be 1..=8192 bytes");
    }

    #[test]
    fn fresh_evidence_quote_is_nonce_then_listing() {
        let mut buf = Vec::new();
        Request::FreshEvidenceQuote {
            nonce: [0x11; 32],
            sums: b"ab".to_vec(),
        }
        .encode_payload(&mut buf);
        let mut expected = vec![0x11; 32];
        expected.extend_from_slice(b"ab");
        assert_eq!(buf, expected);
        assert_eq!(Op::from_u8(0x1C), Some(Op::FreshEvidenceQuote));
        // A nonce alone (no listing), or a short nonce, does not decode.
        assert!(Request::decode(Op::FreshEvidenceQuote, &[0x11; 32]).is_err());
        assert!(Request::decode(Op::FreshEvidenceQuote, &[0x11; 31]).is_err());
        let mut over = vec![0x11; 32];
        over.extend_from_slice(&vec![b'a'; MAX_EVIDENCE_SUMS_LEN + 1]);
        assert!(Request::decode(Op::FreshEvidenceQuote, &over).is_err());
    }

    #[test]
    fn quote_answers_round_trip() {
        let quote = Response::Quote(QuoteBundle {
            source: QuoteSource::Simulated,
            quote: vec![4, 0, 2, 0],
            event_log: "[]".into(),
            vm_config: "{}".into(),
        });
        let info = Response::Info(DeploymentInfo {
            app_id: "ab".into(),
            key_provider: Some("{\"name\":\"x\"}".into()),
            event_log: "[]".into(),
            ..DeploymentInfo::default()
        });
        for (op, resp) in [(Op::EvidenceQuote, quote), (Op::AttestationInfo, info)] {
            let mut buf = Vec::new();
            resp.encode_payload(&mut buf);
            let back = Response::decode(op, &buf).unwrap();
            let mut again = Vec::new();
            back.encode_payload(&mut again);
            assert_eq!(buf, again);
            for cut in 0..buf.len() {
                assert!(Response::decode(op, &buf[..cut]).is_err());
            }
        }
    }

    #[test]
    fn retired_and_unknown_values_do_not_decode() {
        // 0x0C was PayerSign (any digest): no request can name it any more.
        assert_eq!(Op::from_u8(0x0C), None);
        assert_eq!(Op::from_u8(0x17), Some(Op::RowMac));
        assert_eq!(Op::from_u8(0x18), Some(Op::TlsPublicKey));
        assert_eq!(Op::from_u8(0xFF), None);
        let mut bad_purpose = vec![0u8];
        bad_purpose.extend_from_slice(&[0; 28]);
        assert!(Request::decode(Op::ServiceSeal, &bad_purpose).is_err());
        assert!(Request::decode(Op::PayerSignTransaction, &[1, 0, 0, 0, 1, 0xc0]).is_err());
        assert!(Request::decode(Op::PayerSignTransaction, &[0, 0, 0, 0, 0]).is_err());
    }

    /// The fuzz target's seeds (`fuzz/seeds/keyservice_frames`, one frame body each):
    /// every request and success response decodes and re-encodes to its exact bytes.
    #[test]
    fn fuzz_seeds_decode() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/keyservice_frames");
        let mut ops = std::collections::HashSet::new();
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let is_request = name.starts_with("request_");
            if !is_request && !name.starts_with("response_") {
                continue;
            }
            let body = std::fs::read(&path).unwrap();
            let header = crate::codec::FrameHeader::parse(&body).unwrap();
            let payload = &body[HEADER_LEN..];
            seen += 1;
            if !is_request && header.status != 0 {
                // An error answer: a UTF-8 message (op 0 for connection-level errors).
                assert!(std::str::from_utf8(payload).is_ok(), "{name}");
                continue;
            }
            let op = Op::from_u8(header.op).unwrap();
            let mut again = Vec::new();
            if is_request {
                Request::decode(op, payload)
                    .unwrap()
                    .encode_payload(&mut again);
                ops.insert(op as u8);
            } else {
                Response::decode(op, payload)
                    .unwrap()
                    .encode_payload(&mut again);
            }
            assert_eq!(again, payload, "{name}");
        }
        assert!(seen > 30, "{seen} seeds");
        // A request seed for every operation.
        let every: std::collections::HashSet<u8> = (0..=u8::MAX)
            .filter(|&b| Op::from_u8(b).is_some())
            .collect();
        assert_eq!(ops, every);
    }

    #[test]
    fn every_op_survives_garbage() {
        for op in 0..=u8::MAX {
            let Some(op) = Op::from_u8(op) else { continue };
            for len in [0usize, 1, 5, 31, 33, 64, 100] {
                let junk: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
                let _ = Request::decode(op, &junk);
                let _ = Response::decode(op, &junk);
            }
        }
    }
}
