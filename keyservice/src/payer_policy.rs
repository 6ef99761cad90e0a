//! The payer policy: the only transactions keyservice signs with its gas-paying wallets.
//! A payer never signs a bare digest; it signs an unsigned transaction that this module
//! decodes (strict RLP, EIP-1559 or EIP-155 legacy) and checks first.
//!
//! Rules, all of which must hold (README "Payer policy" is the reference):
//! * the chain id is the one keyservice was configured with (none configured: refused);
//! * the value is zero (no front-end flow moves ether), the access list is empty, and
//!   `gas_limit × max fee per gas` stays under the configured cap;
//! * a contract creation comes from the admin payer and its init code is exactly the
//!   committed `AccountConfig` or `AppGovernance` artifact; the address it will create
//!   (`CREATE(admin, nonce)`) is recorded, with its kind, in an authenticated state file;
//! * a call goes to an `AccountConfig` keyservice was configured with or created
//!   (any payer, any calldata: that is the relayer's job), or is the admin payer handing
//!   on a governance contract it created (`transferOwnership`, within its deploy
//!   sequence). `addComposeHash`/`removeComposeHash` are never signed: the compose
//!   allow-list decides which builds may open the root.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use alloy::sol_types::SolCall;
use chain_contracts::IAppGovernance;
use keyservice_api::{Address, Payer, keccak256};
use ring::hmac;
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

/// Default cap on `gas_limit × max fee per gas` of one payer transaction: 0.1 ether.
pub const DEFAULT_MAX_FEE_WEI: u128 = 100_000_000_000_000_000;
/// The state file of the contracts the admin payer created.
pub const STATE_FILE: &str = "payer-contracts.json";
/// How many admin transactions after creating a governance contract may still hand it on
/// (two creations, one `setApiPayer` per API payer, two ownership transfers).
const GOVERNANCE_HANDOVER_SLACK: u64 = 3;

/// Why a payer transaction is not signed. Fixed messages, safe to send to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub &'static str);

/// A storage problem with the policy's own state (the request is not signed).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyStateError {
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What the policy may refuse or fail with.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error(transparent)]
    State(#[from] PolicyStateError),
}

/// The kind of contract at an allowed address.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ContractKind {
    AccountConfig,
    AppGovernance,
}

/// How keyservice was configured (command line / measured configuration; never the
/// socket).
#[derive(Clone, Debug, Default)]
pub struct PayerPolicyConfig {
    /// The only chain payers sign for. `None`: payers sign nothing.
    pub chain_id: Option<u64>,
    /// `AccountConfig` contracts deployed by someone else that the payers may call.
    pub account_configs: Vec<Address>,
    /// Cap on `gas_limit × max fee per gas` (wei). `None`: [`DEFAULT_MAX_FEE_WEI`].
    pub max_fee_wei: Option<u128>,
    /// Where the created contracts are recorded (`STATE_DIR/payer-contracts.json`).
    /// `None`: in memory only (tests).
    pub state_file: Option<PathBuf>,
}

/// What `--chain-config` takes from the appliance's configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainSettings {
    pub chain_id: u64,
    pub account_config: Option<Address>,
}

/// The appliance's default `chain.chain_id` (a local anvil), used when the file names none.
pub const APPLIANCE_DEFAULT_CHAIN_ID: u64 = 31337;

/// Reads `[chain] chain_id` and `account_config_address` from the appliance's TOML
/// configuration (the measured one in the compose); every other key is ignored.
pub fn chain_settings_from_toml(text: &str) -> Result<ChainSettings, String> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| e.to_string())?;
    let chain = match table.get("chain") {
        None => None,
        Some(toml::Value::Table(t)) => Some(t),
        Some(_) => return Err("`chain` is not a table".into()),
    };
    let chain_id = match chain.and_then(|c| c.get("chain_id")) {
        None => APPLIANCE_DEFAULT_CHAIN_ID,
        Some(toml::Value::Integer(n)) => {
            u64::try_from(*n).map_err(|_| "chain.chain_id is negative".to_owned())?
        }
        Some(_) => return Err("chain.chain_id is not an integer".into()),
    };
    let account_config = match chain.and_then(|c| c.get("account_config_address")) {
        None => None,
        Some(toml::Value::String(s)) => Some(
            s.parse::<Address>()
                .map_err(|e| format!("chain.account_config_address: {e}"))?,
        ),
        Some(_) => return Err("chain.account_config_address is not a string".into()),
    };
    Ok(ChainSettings {
        chain_id,
        account_config,
    })
}

/// A contract the admin payer created (recorded when keyservice signed the creation).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
struct Created {
    chain_id: u64,
    kind: ContractKind,
    /// The admin nonce of the creation.
    nonce: u64,
}

#[derive(Default, Serialize, Deserialize)]
struct Registry {
    /// `0x` hex address → record.
    created: BTreeMap<String, Created>,
}

#[derive(Serialize, Deserialize)]
struct StateFile {
    version: u32,
    registry: Registry,
    /// HMAC-SHA256 (key derived from the root) of the JSON of `registry`.
    mac: String,
}

/// The decision procedure plus its small persistent state.
pub struct PayerPolicy {
    chain_id: Option<u64>,
    max_fee_wei: u128,
    configured: BTreeSet<[u8; 20]>,
    api_payers: u32,
    state_file: Option<PathBuf>,
    mac_key: hmac::Key,
    registry: Mutex<Registry>,
}

impl std::fmt::Debug for PayerPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PayerPolicy")
            .field("chain_id", &self.chain_id)
            .field("max_fee_wei", &self.max_fee_wei)
            .finish_non_exhaustive()
    }
}

impl PayerPolicy {
    /// Loads the recorded contracts from `config.state_file` if it exists and its MAC
    /// (under `mac_key`) holds; a file that fails is ignored with an error in the log, so
    /// nothing it names is allowed (fail closed).
    pub fn new(config: PayerPolicyConfig, mac_key: &Zeroizing<[u8; 32]>, api_payers: u32) -> Self {
        let mac_key = hmac::Key::new(hmac::HMAC_SHA256, &mac_key[..]);
        let registry = config
            .state_file
            .as_deref()
            .and_then(|path| load_registry(path, &mac_key))
            .unwrap_or_default();
        Self {
            chain_id: config.chain_id,
            max_fee_wei: config.max_fee_wei.unwrap_or(DEFAULT_MAX_FEE_WEI),
            configured: config.account_configs.iter().map(|a| a.0).collect(),
            api_payers,
            state_file: config.state_file,
            mac_key,
            registry: Mutex::new(registry),
        }
    }

    pub fn chain_id(&self) -> Option<u64> {
        self.chain_id
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Checks `preimage` (the unsigned transaction `payer`, whose address is `sender`,
    /// is asked to sign) and returns the digest to sign: keccak256 of the preimage.
    pub fn check(
        &self,
        payer: Payer,
        sender: &Address,
        preimage: &[u8],
    ) -> Result<[u8; 32], PolicyError> {
        let tx = UnsignedTx::decode(preimage)?;
        let Some(chain_id) = self.chain_id else {
            return Err(
                Refusal("payer signing is off: keyservice was started without a chain id").into(),
            );
        };
        if tx.chain_id != chain_id {
            return Err(Refusal("the transaction is for another chain than keyservice's").into());
        }
        if !tx.value_is_zero {
            return Err(Refusal("payers never transfer value").into());
        }
        let fee = u128::from(tx.gas_limit)
            .checked_mul(tx.max_fee_per_gas)
            .ok_or(Refusal("the transaction's fee exceeds the payer fee cap"))?;
        if fee > self.max_fee_wei {
            return Err(Refusal("the transaction's fee exceeds the payer fee cap").into());
        }
        match tx.to {
            None => self.check_creation(payer, sender, chain_id, &tx)?,
            Some(to) => self.check_call(payer, chain_id, &to, &tx)?,
        }
        Ok(keccak256(preimage))
    }

    fn check_creation(
        &self,
        payer: Payer,
        sender: &Address,
        chain_id: u64,
        tx: &UnsignedTx<'_>,
    ) -> Result<(), PolicyError> {
        if payer != Payer::Admin {
            return Err(Refusal("only the admin payer creates contracts").into());
        }
        let kind = if tx.input == &chain_contracts::artifacts::account_config_bytecode()[..] {
            ContractKind::AccountConfig
        } else if tx.input == &chain_contracts::artifacts::app_governance_bytecode()[..] {
            ContractKind::AppGovernance
        } else {
            return Err(Refusal(
                "the admin payer creates only the committed AccountConfig and AppGovernance",
            )
            .into());
        };
        let address = hex_address(&create_address(sender, tx.nonce));
        let record = Created {
            chain_id,
            kind,
            nonce: tx.nonce,
        };
        let mut registry = self.lock();
        match registry.created.get(&address) {
            Some(existing) if *existing == record => return Ok(()),
            // Another kind (or chain) signed for the same address: whichever is mined,
            // keep the first record so an address never changes kind.
            Some(_) => {
                return Err(
                    Refusal("another contract creation was already signed for this nonce").into(),
                );
            }
            None => {}
        }
        registry.created.insert(address.clone(), record);
        if let Err(e) = self.persist(&registry) {
            registry.created.remove(&address);
            return Err(e.into());
        }
        Ok(())
    }

    fn check_call(
        &self,
        payer: Payer,
        chain_id: u64,
        to: &[u8; 20],
        tx: &UnsignedTx<'_>,
    ) -> Result<(), PolicyError> {
        if self.configured.contains(to) {
            return Ok(());
        }
        let record = self
            .lock()
            .created
            .get(&hex_address(to))
            .copied()
            .filter(|r| r.chain_id == chain_id);
        match record.map(|r| (r.kind, r.nonce)) {
            Some((ContractKind::AccountConfig, _)) => Ok(()),
            Some((ContractKind::AppGovernance, created_at)) => {
                let handover = payer == Payer::Admin
                    && tx.input.len() == 36
                    && tx.input[..4] == IAppGovernance::transferOwnershipCall::SELECTOR
                    && tx.nonce
                        <= created_at
                            .saturating_add(u64::from(self.api_payers))
                            .saturating_add(GOVERNANCE_HANDOVER_SLACK);
                if handover {
                    Ok(())
                } else {
                    Err(Refusal(
                        "a governance contract is only handed on by its deployer, right after deploying it",
                    )
                    .into())
                }
            }
            None => Err(Refusal("the destination is not a contract the payers may call").into()),
        }
    }

    fn persist(&self, registry: &Registry) -> Result<(), PolicyStateError> {
        let Some(path) = &self.state_file else {
            return Ok(());
        };
        let body = serde_json::to_vec(registry).unwrap_or_default();
        let file = StateFile {
            version: 1,
            registry: Registry {
                created: registry.created.clone(),
            },
            mac: hex::encode(hmac::sign(&self.mac_key, &body).as_ref()),
        };
        let text = serde_json::to_vec_pretty(&file).unwrap_or_default();
        write_atomically(path, &text).map_err(|source| PolicyStateError::Write {
            path: path.clone(),
            source,
        })
    }
}

fn load_registry(path: &Path, key: &hmac::Key) -> Option<Registry> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::error!(path = %path.display(), error = %e, "cannot read the payer state; no created contract is allowed");
            return None;
        }
    };
    let verified = serde_json::from_slice::<StateFile>(&bytes)
        .ok()
        .filter(|f| f.version == 1)
        .filter(|f| {
            let body = serde_json::to_vec(&f.registry).unwrap_or_default();
            hex::decode(&f.mac)
                .map(|mac| hmac::verify(key, &body, &mac).is_ok())
                .unwrap_or(false)
        });
    if verified.is_none() {
        tracing::error!(path = %path.display(), "the payer state file is damaged or was not written by this root; ignoring it (no created contract is allowed)");
    }
    verified.map(|f| f.registry)
}

/// temp file → fsync → rename → fsync the directory.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    ));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn hex_address(a: &[u8; 20]) -> String {
    format!("0x{}", hex::encode(a))
}

/// `CREATE` address: the last 20 bytes of keccak256(rlp([sender, nonce])).
pub fn create_address(sender: &Address, nonce: u64) -> [u8; 20] {
    let mut item = Vec::with_capacity(32);
    item.push(0x80 + 20);
    item.extend_from_slice(&sender.0);
    put_uint(&mut item, u128::from(nonce));
    let mut rlp = Vec::with_capacity(item.len() + 1);
    // At most 21 + 9 bytes: always a short list.
    rlp.push(0xc0 + item.len() as u8);
    rlp.extend_from_slice(&item);
    let h = keccak256(&rlp);
    let mut out = [0u8; 20];
    out.copy_from_slice(&h[12..]);
    out
}

fn put_uint(buf: &mut Vec<u8>, v: u128) {
    if v == 0 {
        buf.push(0x80);
    } else if v < 0x80 {
        buf.push(v as u8);
    } else {
        let bytes = v.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        buf.push(0x80 + (16 - skip) as u8);
        buf.extend_from_slice(&bytes[skip..]);
    }
}

/// The fields of an unsigned transaction the policy looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsignedTx<'a> {
    pub chain_id: u64,
    pub nonce: u64,
    pub gas_limit: u64,
    /// EIP-1559 `max_fee_per_gas`, or the legacy `gas_price`.
    pub max_fee_per_gas: u128,
    /// `None`: contract creation.
    pub to: Option<[u8; 20]>,
    pub value_is_zero: bool,
    pub input: &'a [u8],
}

impl<'a> UnsignedTx<'a> {
    /// Decodes a signing preimage: `0x02 ‖ rlp([chain_id, nonce, max_priority_fee,
    /// max_fee, gas, to, value, data, access_list])` (EIP-1559), or
    /// `rlp([nonce, gas_price, gas, to, value, data, chain_id, 0, 0])` (EIP-155 legacy).
    /// Anything else, non-canonical RLP, trailing bytes or a non-empty access list is
    /// refused.
    pub fn decode(preimage: &'a [u8]) -> Result<Self, Refusal> {
        const BAD: Refusal = Refusal(
            "not an unsigned EIP-1559 or EIP-155 transaction in canonical RLP with no access list",
        );
        match preimage.first() {
            Some(0x02) => {
                let mut outer = &preimage[1..];
                let mut f = expect_list(&mut outer).ok_or(BAD)?;
                if !outer.is_empty() {
                    return Err(BAD);
                }
                let chain_id = uint::<8>(&mut f).ok_or(BAD)? as u64;
                let nonce = uint::<8>(&mut f).ok_or(BAD)? as u64;
                let _priority = uint::<16>(&mut f).ok_or(BAD)?;
                let max_fee_per_gas = uint::<16>(&mut f).ok_or(BAD)?;
                let gas_limit = uint::<8>(&mut f).ok_or(BAD)? as u64;
                let to = destination(&mut f).ok_or(BAD)?;
                let value_is_zero = value_is_zero(&mut f).ok_or(BAD)?;
                let input = expect_bytes(&mut f).ok_or(BAD)?;
                let access_list = expect_list(&mut f).ok_or(BAD)?;
                if !access_list.is_empty() || !f.is_empty() {
                    return Err(BAD);
                }
                Ok(Self {
                    chain_id,
                    nonce,
                    gas_limit,
                    max_fee_per_gas,
                    to,
                    value_is_zero,
                    input,
                })
            }
            Some(b) if *b >= 0xc0 => {
                let mut outer = preimage;
                let mut f = expect_list(&mut outer).ok_or(BAD)?;
                if !outer.is_empty() {
                    return Err(BAD);
                }
                let nonce = uint::<8>(&mut f).ok_or(BAD)? as u64;
                let max_fee_per_gas = uint::<16>(&mut f).ok_or(BAD)?;
                let gas_limit = uint::<8>(&mut f).ok_or(BAD)? as u64;
                let to = destination(&mut f).ok_or(BAD)?;
                let value_is_zero = value_is_zero(&mut f).ok_or(BAD)?;
                let input = expect_bytes(&mut f).ok_or(BAD)?;
                let chain_id = uint::<8>(&mut f).ok_or(BAD)? as u64;
                let r = uint::<1>(&mut f).ok_or(BAD)?;
                let s = uint::<1>(&mut f).ok_or(BAD)?;
                if chain_id == 0 || r != 0 || s != 0 || !f.is_empty() {
                    // Pre-EIP-155 transactions replay on every chain.
                    return Err(BAD);
                }
                Ok(Self {
                    chain_id,
                    nonce,
                    gas_limit,
                    max_fee_per_gas,
                    to,
                    value_is_zero,
                    input,
                })
            }
            _ => Err(BAD),
        }
    }
}

/// One RLP item: (is_list, payload). Canonical encodings only.
fn item<'a>(buf: &mut &'a [u8]) -> Option<(bool, &'a [u8])> {
    let (&b, rest) = buf.split_first()?;
    let (is_list, len, header) = match b {
        0x00..=0x7f => {
            let (one, tail) = buf.split_at(1);
            *buf = tail;
            return Some((false, one));
        }
        0x80..=0xb7 => (false, usize::from(b - 0x80), 0),
        0xb8..=0xbf => (
            false,
            long_len(rest, usize::from(b - 0xb7))?,
            usize::from(b - 0xb7),
        ),
        0xc0..=0xf7 => (true, usize::from(b - 0xc0), 0),
        0xf8..=0xff => (
            true,
            long_len(rest, usize::from(b - 0xf7))?,
            usize::from(b - 0xf7),
        ),
    };
    let body = rest.get(header..)?;
    if body.len() < len {
        return None;
    }
    let (payload, tail) = body.split_at(len);
    // A single byte below 0x80 must be encoded as itself.
    if !is_list && len == 1 && payload[0] < 0x80 {
        return None;
    }
    *buf = tail;
    Some((is_list, payload))
}

/// A long-form length: big-endian, no leading zero, and over 55 (else it had to be short).
fn long_len(rest: &[u8], n: usize) -> Option<usize> {
    let bytes = rest.get(..n)?;
    if bytes.first() == Some(&0) || n > std::mem::size_of::<usize>() {
        return None;
    }
    let len = bytes
        .iter()
        .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
    (len > 55).then_some(len)
}

fn expect_list<'a>(buf: &mut &'a [u8]) -> Option<&'a [u8]> {
    match item(buf)? {
        (true, p) => Some(p),
        (false, _) => None,
    }
}

fn expect_bytes<'a>(buf: &mut &'a [u8]) -> Option<&'a [u8]> {
    match item(buf)? {
        (false, p) => Some(p),
        (true, _) => None,
    }
}

/// An unsigned integer of at most `N` bytes (N ≤ 16), without leading zeros.
fn uint<const N: usize>(buf: &mut &[u8]) -> Option<u128> {
    let p = expect_bytes(buf)?;
    if p.len() > N || p.first() == Some(&0) {
        return None;
    }
    Some(p.iter().fold(0u128, |acc, b| (acc << 8) | u128::from(*b)))
}

fn destination(buf: &mut &[u8]) -> Option<Option<[u8; 20]>> {
    let p = expect_bytes(buf)?;
    match p.len() {
        0 => Some(None),
        20 => {
            let mut a = [0u8; 20];
            a.copy_from_slice(p);
            Some(Some(a))
        }
        _ => None,
    }
}

/// A uint256 (≤ 32 bytes, canonical); only whether it is zero matters.
fn value_is_zero(buf: &mut &[u8]) -> Option<bool> {
    let p = expect_bytes(buf)?;
    if p.len() > 32 || p.first() == Some(&0) {
        return None;
    }
    Some(p.is_empty())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use alloy::consensus::{SignableTransaction, TxEip1559, TxLegacy};
    use alloy::primitives::{Bytes, TxKind, U256};

    fn eip1559(to: TxKind, value: u64, input: Vec<u8>) -> TxEip1559 {
        TxEip1559 {
            chain_id: 31337,
            nonce: 7,
            gas_limit: 100_000,
            max_fee_per_gas: 2_000_000_000,
            max_priority_fee_per_gas: 1_000_000_000,
            to,
            value: U256::from(value),
            access_list: Default::default(),
            input: Bytes::from(input),
        }
    }

    fn preimage(tx: &impl SignableTransaction<alloy::primitives::Signature>) -> Vec<u8> {
        let mut buf = Vec::new();
        tx.encode_for_signing(&mut buf);
        buf
    }

    #[test]
    fn decodes_what_alloy_encodes() {
        let to = alloy::primitives::Address::repeat_byte(0x11);
        let tx = eip1559(TxKind::Call(to), 0, vec![1, 2, 3]);
        let bytes = preimage(&tx);
        let d = UnsignedTx::decode(&bytes).unwrap();
        assert_eq!(d.chain_id, 31337);
        assert_eq!(d.nonce, 7);
        assert_eq!(d.gas_limit, 100_000);
        assert_eq!(d.max_fee_per_gas, 2_000_000_000);
        assert_eq!(d.to, Some([0x11; 20]));
        assert!(d.value_is_zero);
        assert_eq!(d.input, &[1, 2, 3]);
        assert_eq!(keccak256(&bytes), tx.signature_hash().0);

        let create = eip1559(TxKind::Create, 5, vec![0xfe; 100]);
        let bytes = preimage(&create);
        let d = UnsignedTx::decode(&bytes).unwrap();
        assert_eq!(d.to, None);
        assert!(!d.value_is_zero);
        assert_eq!(d.input.len(), 100);

        let legacy = TxLegacy {
            chain_id: Some(8453),
            nonce: 0,
            gas_price: 1,
            gas_limit: 21_000,
            to: TxKind::Call(to),
            value: U256::ZERO,
            input: Bytes::new(),
        };
        let bytes = preimage(&legacy);
        let d = UnsignedTx::decode(&bytes).unwrap();
        assert_eq!((d.chain_id, d.nonce, d.max_fee_per_gas), (8453, 0, 1));
        let pre155 = TxLegacy {
            chain_id: None,
            ..legacy
        };
        assert!(UnsignedTx::decode(&preimage(&pre155)).is_err());
    }

    #[test]
    fn refuses_malformed_input() {
        let tx = eip1559(
            TxKind::Call(alloy::primitives::Address::ZERO),
            0,
            vec![9; 70],
        );
        let good = preimage(&tx);
        for cut in 0..good.len() {
            assert!(UnsignedTx::decode(&good[..cut]).is_err(), "cut {cut}");
        }
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(UnsignedTx::decode(&trailing).is_err());
        assert!(UnsignedTx::decode(&[0x01, 0xc0]).is_err(), "EIP-2930");
        assert!(UnsignedTx::decode(&[0x03, 0xc0]).is_err(), "EIP-4844");
        // A non-empty access list.
        let mut with_list = tx.clone();
        with_list.access_list =
            alloy::eips::eip2930::AccessList(vec![alloy::eips::eip2930::AccessListItem {
                address: alloy::primitives::Address::ZERO,
                storage_keys: vec![],
            }]);
        assert!(UnsignedTx::decode(&preimage(&with_list)).is_err());
        // A non-canonical integer (chain id 1 written as 0x81 0x01).
        assert!(UnsignedTx::decode(&[0x02, 0xc3, 0x81, 0x01, 0x80]).is_err());
    }

    #[test]
    fn reads_the_appliance_chain_settings() {
        let s = chain_settings_from_toml(
            "listen = \"x\"\n[chain]\nchain_id = 8453\naccount_config_address = \"0x1111111111111111111111111111111111111111\"\nrpc_url = \"http://x\"\n",
        )
        .unwrap();
        assert_eq!(s.chain_id, 8453);
        assert_eq!(s.account_config, Some(Address([0x11; 20])));
        let none = chain_settings_from_toml("listen = \"x\"\n").unwrap();
        assert_eq!(none.chain_id, APPLIANCE_DEFAULT_CHAIN_ID);
        assert_eq!(none.account_config, None);
        assert!(chain_settings_from_toml("[chain]\nchain_id = \"1\"\n").is_err());
    }

    #[test]
    fn create_address_matches_alloy() {
        let sender = alloy::primitives::Address::repeat_byte(0x42);
        for nonce in [0u64, 1, 0x7f, 0x80, 0xffff, u64::MAX] {
            assert_eq!(
                create_address(&Address(sender.0.0), nonce),
                sender.create(nonce).0.0
            );
        }
    }
}
