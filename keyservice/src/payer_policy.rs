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
//!
//! RLP is `alloy-rlp`'s, both ways (the decoding of the preimage and the `CREATE` address's
//! `rlp([sender, nonce])`). Its decoders accept canonical RLP only, which the policy relies
//! on (one transaction has one encoding, and what is checked is what is hashed): integers
//! with a leading zero byte (a single `0x00` included), a single byte below `0x80` written
//! as a one-byte string, a long-form length below 56 or with a leading zero, and an integer
//! longer than its type are all errors there, as is a list where a string is expected or
//! the reverse. What it does not check is kept here: it reads one item and leaves whatever
//! follows it, so bytes after the outer list and fields after the last one are refused
//! explicitly (`whole_list`, `no_more_fields`), as are a destination neither empty nor 20
//! bytes, a non-empty access list and legacy `r`/`s` other than the empty string.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use alloy::primitives::U256;
use alloy::sol_types::SolCall;
use alloy_rlp::{self as rlp, Decodable as _, Encodable as _, Header};
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

/// Why [`chain_settings_from_toml`] refused the configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChainSettingsError {
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    #[error("`chain` is not a table")]
    ChainNotATable,
    #[error("chain.chain_id is negative")]
    NegativeChainId,
    #[error("chain.chain_id is not an integer")]
    ChainIdNotAnInteger,
    #[error("chain.account_config_address: {0}")]
    AccountConfig(#[source] keyservice_api::ParseError),
    #[error("chain.account_config_address is not a string")]
    AccountConfigNotAString,
}

/// Reads `[chain] chain_id` and `account_config_address` from the appliance's TOML
/// configuration (the measured one in the compose); every other key is ignored.
pub fn chain_settings_from_toml(text: &str) -> Result<ChainSettings, ChainSettingsError> {
    let table: toml::Table = text.parse()?;
    let chain = match table.get("chain") {
        None => None,
        Some(toml::Value::Table(t)) => Some(t),
        Some(_) => return Err(ChainSettingsError::ChainNotATable),
    };
    let chain_id = match chain.and_then(|c| c.get("chain_id")) {
        None => APPLIANCE_DEFAULT_CHAIN_ID,
        Some(toml::Value::Integer(n)) => {
            u64::try_from(*n).map_err(|_| ChainSettingsError::NegativeChainId)?
        }
        Some(_) => return Err(ChainSettingsError::ChainIdNotAnInteger),
    };
    let account_config = match chain.and_then(|c| c.get("account_config_address")) {
        None => None,
        Some(toml::Value::String(s)) => Some(
            s.parse::<Address>()
                .map_err(ChainSettingsError::AccountConfig)?,
        ),
        Some(_) => return Err(ChainSettingsError::AccountConfigNotAString),
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
    let header = Header {
        list: true,
        payload_length: sender.0.length() + nonce.length(),
    };
    let mut rlp = Vec::with_capacity(header.length_with_payload());
    header.encode(&mut rlp);
    sender.0.encode(&mut rlp);
    nonce.encode(&mut rlp);
    let h = keccak256(&rlp);
    let mut out = [0u8; 20];
    out.copy_from_slice(&h[12..]);
    out
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
            Some(0x02) => Self::eip1559(&preimage[1..]),
            Some(b) if *b >= 0xc0 => Self::legacy(preimage),
            _ => Err(rlp::Error::Custom("not a transaction type signed here")),
        }
        .map_err(|_| BAD)
    }

    /// `rlp([chain_id, nonce, max_priority_fee, max_fee, gas, to, value, data, access_list])`.
    fn eip1559(buf: &'a [u8]) -> rlp::Result<Self> {
        let mut f = whole_list(buf)?;
        let chain_id = u64::decode(&mut f)?;
        let nonce = u64::decode(&mut f)?;
        let _priority = u128::decode(&mut f)?;
        let max_fee_per_gas = u128::decode(&mut f)?;
        let gas_limit = u64::decode(&mut f)?;
        let to = destination(&mut f)?;
        let value_is_zero = U256::decode(&mut f)?.is_zero();
        let input = Header::decode_bytes(&mut f, false)?;
        let access_list = Header::decode_bytes(&mut f, true)?;
        if !access_list.is_empty() {
            return Err(rlp::Error::Custom("an access list"));
        }
        no_more_fields(f)?;
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

    /// `rlp([nonce, gas_price, gas, to, value, data, chain_id, 0, 0])`.
    fn legacy(buf: &'a [u8]) -> rlp::Result<Self> {
        let mut f = whole_list(buf)?;
        let nonce = u64::decode(&mut f)?;
        let max_fee_per_gas = u128::decode(&mut f)?;
        let gas_limit = u64::decode(&mut f)?;
        let to = destination(&mut f)?;
        let value_is_zero = U256::decode(&mut f)?.is_zero();
        let input = Header::decode_bytes(&mut f, false)?;
        let chain_id = u64::decode(&mut f)?;
        let r = u8::decode(&mut f)?;
        let s = u8::decode(&mut f)?;
        if chain_id == 0 || r != 0 || s != 0 {
            // Pre-EIP-155 transactions replay on every chain.
            return Err(rlp::Error::Custom("not an EIP-155 signing preimage"));
        }
        no_more_fields(f)?;
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
}

/// The payload of the list that is the whole of `buf`: alloy-rlp reads one item and leaves
/// what follows it, so bytes after the list are refused here.
fn whole_list(mut buf: &[u8]) -> rlp::Result<&[u8]> {
    let fields = Header::decode_bytes(&mut buf, true)?;
    if buf.is_empty() {
        Ok(fields)
    } else {
        Err(rlp::Error::Custom("bytes after the transaction"))
    }
}

/// Nothing may follow the last field inside the list.
fn no_more_fields(rest: &[u8]) -> rlp::Result<()> {
    if rest.is_empty() {
        Ok(())
    } else {
        Err(rlp::Error::Custom(
            "more fields than the transaction type has",
        ))
    }
}

/// `to`: the empty string (contract creation) or a 20-byte address.
fn destination(buf: &mut &[u8]) -> rlp::Result<Option<[u8; 20]>> {
    let p = Header::decode_bytes(buf, false)?;
    match <[u8; 20]>::try_from(p) {
        Ok(address) => Ok(Some(address)),
        Err(_) if p.is_empty() => Ok(None),
        Err(_) => Err(rlp::Error::UnexpectedLength),
    }
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

    /// `0x02 ‖ rlp([fields…])` with each field given already encoded (the list header is
    /// written canonically around whatever the fields are).
    fn typed2(fields: &[&[u8]]) -> Vec<u8> {
        let payload: Vec<u8> = fields.concat();
        let mut out = vec![0x02];
        Header {
            list: true,
            payload_length: payload.len(),
        }
        .encode(&mut out);
        out.extend_from_slice(&payload);
        out
    }

    /// An EIP-1559 preimage to `0x11…11` whose field `index` is replaced by `field`.
    fn eip1559_with(index: usize, field: &[u8]) -> Vec<u8> {
        let to: Vec<u8> = [&[0x94][..], &[0x11; 20]].concat();
        // chain id 31337, nonce 7, fees 0, gas 0x5208, to, value 0, no data, no access list
        let mut fields: Vec<&[u8]> = vec![
            &[0x82, 0x7a, 0x69],
            &[0x07],
            &[0x80],
            &[0x80],
            &[0x82, 0x52, 0x08],
            &to,
            &[0x80],
            &[0x80],
            &[0xc0],
        ];
        fields[index] = field;
        typed2(&fields)
    }

    #[test]
    fn refuses_non_canonical_rlp() {
        // The unchanged preimage is accepted, so each refusal below is the one change's.
        let good = eip1559_with(1, &[0x07]);
        let d = UnsignedTx::decode(&good).unwrap();
        assert_eq!((d.chain_id, d.nonce, d.gas_limit), (31337, 7, 0x5208));
        assert_eq!(d.to, Some([0x11; 20]));
        let refused = |bytes: Vec<u8>, what: &str| {
            assert_eq!(
                UnsignedTx::decode(&bytes).map(|_| ()),
                Err(Refusal(
                    "not an unsigned EIP-1559 or EIP-155 transaction in canonical RLP with no access list"
                )),
                "{what}"
            );
        };
        // Integers: a leading zero byte, zero written as 0x00, a single byte below 0x80
        // written as a one-byte string, more bytes than the field holds.
        refused(eip1559_with(1, &[0x82, 0x00, 0x07]), "leading zero");
        refused(eip1559_with(1, &[0x00]), "zero as 0x00");
        refused(eip1559_with(1, &[0x81, 0x07]), "single byte as a string");
        refused(
            eip1559_with(0, &[0x89, 1, 0, 0, 0, 0, 0, 0, 0, 0]),
            "a chain id over 64 bits",
        );
        refused(
            eip1559_with(3, &[[0x91, 1].as_slice(), &[0; 16]].concat()),
            "a fee over 128 bits",
        );
        refused(eip1559_with(6, &[0x81, 0x00]), "value 0 as 0x81 0x00");
        refused(
            eip1559_with(6, &[0x82, 0x00, 0x01]),
            "value with a leading zero",
        );
        refused(
            eip1559_with(6, &[[0xa1, 1].as_slice(), &[0; 32]].concat()),
            "a value over 256 bits",
        );
        refused(eip1559_with(1, &[0xc0]), "a list for an integer");
        // Lengths: the long form for fewer than 56 bytes, a long-form length with a
        // leading zero, a length beyond the input.
        refused(eip1559_with(7, &[0xb8, 0x01, 0xaa]), "long form for 1 byte");
        let data = [[0xb9, 0x00, 0x40].as_slice(), &[0xaa; 64]].concat();
        refused(
            eip1559_with(7, &data),
            "long-form length with a leading zero",
        );
        refused(eip1559_with(7, &[0x85, 0xaa]), "data longer than the list");
        let mut long_header = vec![0x02, 0xf8, good.len() as u8 - 2];
        long_header.extend_from_slice(&good[2..]);
        assert!(long_header[2] < 56);
        refused(
            long_header,
            "the outer list in long form for fewer than 56 bytes",
        );
        // Shapes: a destination of 19 bytes, a string for the access list, a list for the
        // data, a tenth field, a byte after the list.
        let short_to = [[0x93].as_slice(), &[0x11; 19]].concat();
        refused(eip1559_with(5, &short_to), "19-byte destination");
        refused(eip1559_with(8, &[0x80]), "access list as a string");
        refused(eip1559_with(7, &[0xc0]), "data as a list");
        let mut extra = eip1559_with(1, &[0x07]);
        extra[1] += 1;
        extra.push(0x80);
        refused(extra, "a tenth field");
        let mut trailing = eip1559_with(1, &[0x07]);
        trailing.push(0x80);
        refused(trailing, "a byte after the list");
        // Legacy: r and s are the empty string only.
        let legacy = |r: &[u8]| {
            let payload = [
                [0x80, 0x01, 0x82, 0x52, 0x08, 0x94].as_slice(),
                &[0x11; 20],
                &[0x80, 0x80, 0x01],
                r,
                &[0x80],
            ]
            .concat();
            let mut out = Vec::new();
            Header {
                list: true,
                payload_length: payload.len(),
            }
            .encode(&mut out);
            out.extend_from_slice(&payload);
            out
        };
        assert_eq!(UnsignedTx::decode(&legacy(&[0x80])).unwrap().chain_id, 1);
        refused(legacy(&[0x00]), "r as 0x00");
        refused(legacy(&[0x01]), "r = 1");
        refused(legacy(&[0x81, 0x80]), "r = 0x80");
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
        assert!(matches!(
            chain_settings_from_toml("[chain]\nchain_id = \"1\"\n"),
            Err(ChainSettingsError::ChainIdNotAnInteger)
        ));
        assert!(matches!(
            chain_settings_from_toml("[chain]\nchain_id = -1\n"),
            Err(ChainSettingsError::NegativeChainId)
        ));
        assert!(matches!(
            chain_settings_from_toml("chain = 1\n"),
            Err(ChainSettingsError::ChainNotATable)
        ));
        let bad = chain_settings_from_toml("[chain]\naccount_config_address = \"0x11\"\n");
        assert!(
            matches!(&bad, Err(ChainSettingsError::AccountConfig(_))),
            "{bad:?}"
        );
        assert!(
            bad.unwrap_err()
                .to_string()
                .starts_with("chain.account_config_address: ")
        );
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
