//! Domain types shared by the keyservice and its clients: identifiers (newtypes so a
//! derivation path cannot be passed where a pkp id is expected), public key material,
//! signatures, and the two secret containers (`SecretKey32`, `SecretBytes`) that zeroize
//! on drop and never print their value.

use std::fmt;
use std::str::FromStr;

use sha3::{Digest, Keccak256};
use zeroize::{Zeroize, Zeroizing};

/// Size of a sealed root (`CreateSealedRoot`, `AdoptRoot`): the keyservice's root-file format.
pub const SEALED_ROOT_LEN: usize = 101;

/// Failure to parse one of the hex identifiers below.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    #[error("expected {expected} bytes of hex, got {found} bytes")]
    Length { expected: usize, found: usize },
    #[error("invalid hex: {0}")]
    Hex(String),
    #[error("an uncompressed secp256k1 public key starts with 0x04")]
    NotUncompressed,
}

fn strip_0x(s: &str) -> &str {
    s.strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s)
}

/// Parses `0x`-prefixed or bare hex into exactly `N` bytes.
pub fn parse_hex_array<const N: usize>(s: &str) -> Result<[u8; N], ParseError> {
    let raw = strip_0x(s.trim());
    if raw.len() != 2 * N {
        return Err(ParseError::Length {
            expected: N,
            found: raw.len() / 2,
        });
    }
    let mut out = [0u8; N];
    hex::decode_to_slice(raw, &mut out).map_err(|e| ParseError::Hex(e.to_string()))?;
    Ok(out)
}

/// keccak256 of `data`.
pub fn keccak256(data: &[u8]) -> [u8; 32] {
    Keccak256::digest(data).into()
}

macro_rules! hex_newtype {
    ($(#[$doc:meta])* $name:ident, $len:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub [u8; $len]);

        impl $name {
            /// Byte length on the wire.
            pub const LEN: usize = $len;

            pub const fn from_bytes(bytes: [u8; $len]) -> Self {
                Self(bytes)
            }

            pub const fn as_bytes(&self) -> &[u8; $len] {
                &self.0
            }

            /// `0x` + lowercase hex.
            pub fn to_hex(&self) -> String {
                format!("0x{}", hex::encode(self.0))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "0x{}", hex::encode(self.0))
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self)
            }
        }

        impl FromStr for $name {
            type Err = ParseError;
            fn from_str(s: &str) -> Result<Self, ParseError> {
                parse_hex_array::<$len>(s).map(Self)
            }
        }

        impl From<[u8; $len]> for $name {
            fn from(bytes: [u8; $len]) -> Self {
                Self(bytes)
            }
        }
    };
}

hex_newtype!(
    /// A wallet's derivation path: 32 bytes chosen at random by `create_wallet`, shown as
    /// `0x` + 64 hex (a uint256 on chain). Knowing it is harmless without the sealed root.
    DerivationPath,
    32
);

/// Wallet-namespace paths the appliance once used for its own ACME sealing keys (before
/// `ServiceSeal` existed): each path is keccak256 of its domain. Ciphertexts under them may
/// still exist on disk, so keyservice refuses them in every wallet operation, and the
/// appliance's chain indexer refuses an on-chain registration naming one.
pub const RESERVED_WALLET_DOMAINS: [&str; 2] = [
    "appliance/acme/account-key/v1",
    "appliance/acme/cert-key/v1",
];

/// keccak256 of each of [`RESERVED_WALLET_DOMAINS`], computed once (every wallet
/// operation checks against them).
static RESERVED_WALLET_PATHS: std::sync::LazyLock<[[u8; 32]; 2]> =
    std::sync::LazyLock::new(|| RESERVED_WALLET_DOMAINS.map(|d| keccak256(d.as_bytes())));

impl DerivationPath {
    /// The path of a reserved domain (one of [`RESERVED_WALLET_DOMAINS`]).
    pub fn of_reserved_domain(domain: &str) -> Self {
        Self(keccak256(domain.as_bytes()))
    }

    /// Whether this path is in the wallet namespace: every 32-byte path except those of
    /// [`RESERVED_WALLET_DOMAINS`].
    pub fn is_wallet_path(&self) -> bool {
        !RESERVED_WALLET_PATHS.contains(&self.0)
    }
}

hex_newtype!(
    /// `pkp_id` = keccak256 of the 64-byte uncompressed public key without its 0x04 prefix.
    PkpId,
    32
);

hex_newtype!(
    /// The measured compose hash (SHA-256 of the dstack `app-compose.json`) the root is sealed to.
    ComposeHash,
    32
);

hex_newtype!(
    /// A public fingerprint of a keyservice root: `okm("keyservice/v1/root-id", empty, 0)`
    /// of the root's HKDF key. Equal on every replica holding the same root; reveals nothing
    /// about the root.
    RootId,
    32
);

impl ComposeHash {
    /// First 16 hex characters, used in file names (`root.sealed.<prefix>`).
    pub fn short_hex(&self) -> String {
        hex::encode(&self.0[..8])
    }
}

/// A 20-byte Ethereum address. `Display` is the EIP-55 checksummed form.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Address(pub [u8; 20]);

impl Address {
    pub const LEN: usize = 20;

    pub const fn as_bytes(&self) -> &[u8; 20] {
        &self.0
    }

    /// EIP-55 mixed-case checksum encoding, `0x`-prefixed.
    pub fn to_checksum(&self) -> String {
        let lower = hex::encode(self.0);
        let hash = keccak256(lower.as_bytes());
        let mut out = String::with_capacity(42);
        out.push_str("0x");
        for (i, c) in lower.chars().enumerate() {
            let nibble = (hash[i / 2] >> (if i % 2 == 0 { 4 } else { 0 })) & 0x0f;
            if c.is_ascii_alphabetic() && nibble >= 8 {
                out.push(c.to_ascii_uppercase());
            } else {
                out.push(c);
            }
        }
        out
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_checksum())
    }
}

impl fmt::Debug for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Address({})", self.to_checksum())
    }
}

impl FromStr for Address {
    type Err = ParseError;
    /// Accepts any case; the checksum is not enforced on input.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        parse_hex_array::<20>(s).map(Self)
    }
}

/// An uncompressed secp256k1 public key: `0x04 ‖ x(32) ‖ y(32)`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicKey([u8; 65]);

impl PublicKey {
    pub const LEN: usize = 65;

    /// Rejects anything that does not start with 0x04 (the curve check is the server's job).
    pub fn from_uncompressed(bytes: [u8; 65]) -> Result<Self, ParseError> {
        if bytes[0] != 0x04 {
            return Err(ParseError::NotUncompressed);
        }
        Ok(Self(bytes))
    }

    pub const fn uncompressed(&self) -> &[u8; 65] {
        &self.0
    }

    /// SEC1 compressed form (33 bytes): 0x02/0x03 by the parity of y, then x.
    pub fn compressed(&self) -> [u8; 33] {
        let mut out = [0u8; 33];
        out[0] = if self.0[64] & 1 == 0 { 0x02 } else { 0x03 };
        out[1..].copy_from_slice(&self.0[1..33]);
        out
    }

    /// keccak256 of the 64 bytes after the 0x04 prefix.
    pub fn pkp_id(&self) -> PkpId {
        PkpId(keccak256(&self.0[1..]))
    }

    /// Last 20 bytes of [`Self::pkp_id`].
    pub fn address(&self) -> Address {
        let h = keccak256(&self.0[1..]);
        let mut a = [0u8; 20];
        a.copy_from_slice(&h[12..]);
        Address(a)
    }

    /// `0x04…` (130 hex digits), as ethers' `publicKey`.
    pub fn to_hex(&self) -> String {
        format!("0x{}", hex::encode(self.0))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({})", self.to_hex())
    }
}

/// A 65-byte recoverable ECDSA signature `r(32) ‖ s(32) ‖ v(1)` with low `s` and
/// `v` = 27 + recovery id, byte-identical to ethers v5 `joinSignature(signDigest(d))`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Signature(pub [u8; 65]);

impl Signature {
    pub const LEN: usize = 65;

    pub const fn as_bytes(&self) -> &[u8; 65] {
        &self.0
    }

    pub fn r(&self) -> [u8; 32] {
        let mut r = [0u8; 32];
        r.copy_from_slice(&self.0[..32]);
        r
    }

    pub fn s(&self) -> [u8; 32] {
        let mut s = [0u8; 32];
        s.copy_from_slice(&self.0[32..64]);
        s
    }

    /// 27 or 28.
    pub const fn v(&self) -> u8 {
        self.0[64]
    }

    /// 0 or 1.
    pub const fn recovery_id(&self) -> u8 {
        self.0[64].wrapping_sub(27)
    }

    /// `0x` + 130 hex digits.
    pub fn to_hex(&self) -> String {
        format!("0x{}", hex::encode(self.0))
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Signature({})", self.to_hex())
    }
}

/// A 32-byte private key handed out by the export operations. Zeroized on drop; its
/// `Debug` never shows the value and there is no `Display`.
pub struct SecretKey32(Zeroizing<[u8; 32]>);

impl SecretKey32 {
    pub fn new(bytes: [u8; 32]) -> Self {
        let mut b = bytes;
        let out = Self(Zeroizing::new(b));
        b.zeroize();
        out
    }

    /// Takes an already-zeroizing buffer (no stray copy of the key is left behind).
    pub fn from_zeroizing(bytes: Zeroizing<[u8; 32]>) -> Self {
        Self(bytes)
    }

    pub fn expose_secret(&self) -> &[u8; 32] {
        &self.0
    }

    /// `0x` + 64 hex, the form `Lit.Actions.getPrivateKey` returns.
    pub fn to_hex(&self) -> Zeroizing<String> {
        let mut s = Zeroizing::new(String::with_capacity(66));
        s.push_str("0x");
        let mut buf = Zeroizing::new([0u8; 64]);
        // Cannot fail: the buffer is exactly twice the input length.
        if hex::encode_to_slice(*self.0, &mut *buf).is_ok() {
            for &c in buf.iter() {
                s.push(char::from(c));
            }
        }
        s
    }
}

impl fmt::Debug for SecretKey32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey32(<redacted>)")
    }
}

/// Random secret bytes (at most 64) from the keyservice CSPRNG. Zeroized on drop.
pub struct SecretBytes(Zeroizing<Vec<u8>>);

impl SecretBytes {
    pub fn new(bytes: Zeroizing<Vec<u8>>) -> Self {
        Self(bytes)
    }

    pub fn expose_secret(&self) -> &[u8] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for SecretBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretBytes(<{} bytes redacted>)", self.0.len())
    }
}

/// The public identity of a key: its public key, `pkp_id` and address.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct WalletInfo {
    pub public_key: PublicKey,
    pub pkp_id: PkpId,
    pub address: Address,
}

impl WalletInfo {
    pub fn from_public_key(public_key: PublicKey) -> Self {
        Self {
            pkp_id: public_key.pkp_id(),
            address: public_key.address(),
            public_key,
        }
    }
}

/// A freshly created wallet: its random derivation path and its public identity.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct NewWallet {
    pub derivation_path: DerivationPath,
    pub pkp_id: PkpId,
    pub address: Address,
    pub public_key: PublicKey,
}

/// Which gas-paying wallet: an API payer by index (0..N) or the admin payer.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Payer {
    Api(u32),
    Admin,
}

/// What a service-owned sealing key is for. A closed set: each purpose has its own key,
/// derived apart from every wallet, action and payer key, and reachable only through
/// `ServiceSeal` / `ServiceUnseal` (never through a wallet operation or an export).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[repr(u8)]
pub enum ServicePurpose {
    /// The ACME account credentials older appliances sealed (`account.json` version 2,
    /// in `<data_dir>/acme/`); the appliance now opens them only once, to roll that account
    /// over to keyservice's own ACME account key (`AcmeAccountSign`).
    AcmeAccount = 1,
    /// The TLS certificate's private key older appliances sealed (`certificate.json`
    /// version 2); no longer read.
    AcmeCertificate = 2,
}

impl ServicePurpose {
    pub const fn from_u8(b: u8) -> Option<Self> {
        match b {
            1 => Some(Self::AcmeAccount),
            2 => Some(Self::AcmeCertificate),
            _ => None,
        }
    }

    /// The name in the key derivation (`"keyservice/v1/service-seal"`, data = this).
    pub const fn label(&self) -> &'static str {
        match self {
            Self::AcmeAccount => "acme-account",
            Self::AcmeCertificate => "acme-certificate",
        }
    }
}

/// Addresses of all payer wallets.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct PayerList {
    /// API payers, index 0..N.
    pub api: Vec<Address>,
    pub admin: Address,
}

/// Where the sealing key comes from.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum PlatformKind {
    /// Local dev secret: NOT confidential.
    Dev,
    /// dstack guest agent (`GetKey` bound to the compose hash).
    Dstack,
}

impl PlatformKind {
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::Dev => "dev",
            Self::Dstack => "dstack",
        }
    }
}

impl fmt::Display for PlatformKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What `status` reports: enough for a health check and for evidence pages.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ServiceStatus {
    pub protocol_version: u8,
    pub platform: PlatformKind,
    /// The compose hash the running root is sealed to.
    pub compose_hash: ComposeHash,
    pub api_payers: u32,
}

/// What `RootStatus` reports: the measured compose hash, and the root in use once there
/// is one.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RootStatus {
    /// The compose hash this instance is measured as running (its sealed roots are bound
    /// to it).
    pub compose_hash: ComposeHash,
    /// `None` while a shared-root keyservice awaits its root (`AdoptRoot`); the root's
    /// fingerprint once it holds one (always, outside shared-root mode).
    pub root_id: Option<RootId>,
}

impl RootStatus {
    /// Whether the keyservice holds a root (every operation works).
    pub const fn is_ready(&self) -> bool {
        self.root_id.is_some()
    }
}

/// A fresh root sealed by `CreateSealedRoot`, not adopted by the keyservice that made it:
/// the 101-byte sealed-root format (the same as a `root.sealed` file; not secret) and the
/// fingerprint the root will have once adopted.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct NewSealedRoot {
    pub sealed: [u8; SEALED_ROOT_LEN],
    pub root_id: RootId,
}

impl fmt::Debug for NewSealedRoot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewSealedRoot")
            .field("sealed", &format_args!("<{} bytes>", self.sealed.len()))
            .field("root_id", &self.root_id)
            .finish()
    }
}

/// Which quote provider keyservice uses (the appliance never talks to one itself).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum QuoteSource {
    /// The dstack guest agent (`GetQuote`, `Info`).
    Dstack,
    /// Linux configfs-tsm on a plain TDX host.
    ConfigfsTsm,
    /// Simulated, dev-signed quotes: NOT confidential.
    Simulated,
}

impl QuoteSource {
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::Dstack => "dstack",
            Self::ConfigfsTsm => "configfs-tsm",
            Self::Simulated => "simulated",
        }
    }

    /// The wire byte.
    pub const fn to_u8(self) -> u8 {
        match self {
            Self::Dstack => 0,
            Self::ConfigfsTsm => 1,
            Self::Simulated => 2,
        }
    }

    pub const fn from_u8(b: u8) -> Option<Self> {
        match b {
            0 => Some(Self::Dstack),
            1 => Some(Self::ConfigfsTsm),
            2 => Some(Self::Simulated),
            _ => None,
        }
    }
}

impl fmt::Display for QuoteSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A quote keyservice produced over report data it built itself
/// (`AttestationQuote`, `EvidenceQuote`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct QuoteBundle {
    pub source: QuoteSource,
    /// The raw quote bytes.
    pub quote: Vec<u8>,
    /// JSON array text of the event log explaining the RTMRs (`"[]"` where none).
    pub event_log: String,
    /// dstack's `vm_config` string; empty where unknown.
    pub vm_config: String,
}

/// The deployment's identity (`AttestationInfo`): what `/info` serves. Hex strings have
/// no `0x`.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct DeploymentInfo {
    pub app_id: String,
    pub instance_id: String,
    pub compose_hash: String,
    /// The exact app-compose.json text whose SHA-256 is `compose_hash`.
    pub app_compose: String,
    pub key_provider: Option<String>,
    pub mrtd: String,
    pub rtmr0: String,
    pub rtmr1: String,
    pub rtmr2: String,
    pub rtmr3: String,
    /// JSON array text of the event log.
    pub event_log: String,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn eip55_reference_vectors() {
        // From the EIP-55 text.
        for s in [
            "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
            "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
            "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
            "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
        ] {
            let a: Address = s.parse().unwrap();
            assert_eq!(a.to_checksum(), s);
        }
    }

    #[test]
    fn secret_debug_is_redacted() {
        let k = SecretKey32::new([7u8; 32]);
        assert_eq!(format!("{k:?}"), "SecretKey32(<redacted>)");
        assert_eq!(&*k.to_hex(), &format!("0x{}", "07".repeat(32)));
    }

    #[test]
    fn hex_parsing() {
        let p: DerivationPath = format!("0x{}", "ab".repeat(32)).parse().unwrap();
        assert_eq!(p.0, [0xab; 32]);
        assert!("0x1234".parse::<DerivationPath>().is_err());
        assert!(format!("0x{}", "zz".repeat(32)).parse::<PkpId>().is_err());
    }

    #[test]
    fn the_reserved_sealing_paths_are_not_wallet_paths_and_do_not_move() {
        // Format 1 ACME files were sealed under exactly these paths.
        let account = DerivationPath::of_reserved_domain("appliance/acme/account-key/v1");
        let cert = DerivationPath::of_reserved_domain("appliance/acme/cert-key/v1");
        assert_eq!(account.0, keccak256(b"appliance/acme/account-key/v1"));
        assert_ne!(account, cert);
        for domain in RESERVED_WALLET_DOMAINS {
            assert!(
                !DerivationPath::of_reserved_domain(domain).is_wallet_path(),
                "{domain}"
            );
        }
        assert!(!account.is_wallet_path() && !cert.is_wallet_path());
        assert!(DerivationPath([7; 32]).is_wallet_path());
    }
}
