//! `@ethersproject/providers` `Formatter`: JSON-RPC results (blocks, transactions,
//! receipts, logs) turned into what ethers 5.7.2 returns, and requests turned into
//! JSON-RPC parameters (`hexlifyTransaction`, block tags, filters).
//!
//! Every format is a list of `(key, rule)` in ethers' order: the result has the keys in
//! that order, without those whose rule gives `undefined` (`Formatter.check`).

use boa_engine::{Context, JsResult, JsValue, js_string};
use num_bigint::BigInt;
use num_traits::{Signed, Zero};

use super::address;
use super::bignumber;
use super::bytes;
use super::err::{self, P};
use super::js;
use super::strings::keccak;
use super::tx::Rlp;

pub(crate) const V_PROVIDERS: &str = "providers/5.7.2";

/// One rule of a format.
#[derive(Clone, Copy)]
pub(crate) enum R {
    Hash,
    Number,
    BigNumber,
    Address,
    Data,
    Hex,
    Type,
    Difficulty,
    Boolean,
    AccessList,
    Uint256,
    StrictData,
    BlockTag,
    Topics,
    /// `arrayOf(hash)`.
    Hashes,
    /// `arrayOf(receiptLog)`.
    ReceiptLogs,
    /// `arrayOf(transactionResponse)`.
    Transactions,
}

/// How a rule treats `null`/`undefined`.
#[derive(Clone, Copy)]
pub(crate) enum N {
    /// Applied to the value whatever it is.
    Strict,
    /// `allowNull(rule)`: nullish gives `undefined` (the key is left out).
    Undef,
    /// `allowNull(rule, null)`: nullish gives `null`.
    Null,
    /// `allowFalsish(rule, "0x")`.
    FalsishHex,
}

type Format = &'static [(&'static str, R, N)];

pub(crate) const TRANSACTION: Format = &[
    ("hash", R::Hash, N::Strict),
    ("type", R::Type, N::Strict),
    ("accessList", R::AccessList, N::Null),
    ("blockHash", R::Hash, N::Null),
    ("blockNumber", R::Number, N::Null),
    ("transactionIndex", R::Number, N::Null),
    ("confirmations", R::Number, N::Null),
    ("from", R::Address, N::Strict),
    ("gasPrice", R::BigNumber, N::Undef),
    ("maxPriorityFeePerGas", R::BigNumber, N::Undef),
    ("maxFeePerGas", R::BigNumber, N::Undef),
    ("gasLimit", R::BigNumber, N::Strict),
    ("to", R::Address, N::Null),
    ("value", R::BigNumber, N::Strict),
    ("nonce", R::Number, N::Strict),
    ("data", R::Data, N::Strict),
    ("r", R::Uint256, N::Undef),
    ("s", R::Uint256, N::Undef),
    ("v", R::Number, N::Undef),
    ("creates", R::Address, N::Null),
    ("raw", R::Data, N::Undef),
];

pub(crate) const TRANSACTION_REQUEST: Format = &[
    ("from", R::Address, N::Undef),
    ("nonce", R::Number, N::Undef),
    ("gasLimit", R::BigNumber, N::Undef),
    ("gasPrice", R::BigNumber, N::Undef),
    ("maxPriorityFeePerGas", R::BigNumber, N::Undef),
    ("maxFeePerGas", R::BigNumber, N::Undef),
    ("to", R::Address, N::Undef),
    ("value", R::BigNumber, N::Undef),
    ("data", R::StrictData, N::Undef),
    ("type", R::Number, N::Undef),
    ("accessList", R::AccessList, N::Null),
];

const RECEIPT_LOG: Format = &[
    ("transactionIndex", R::Number, N::Strict),
    ("blockNumber", R::Number, N::Strict),
    ("transactionHash", R::Hash, N::Strict),
    ("address", R::Address, N::Strict),
    ("topics", R::Hashes, N::Strict),
    ("data", R::Data, N::Strict),
    ("logIndex", R::Number, N::Strict),
    ("blockHash", R::Hash, N::Strict),
];

const RECEIPT: Format = &[
    ("to", R::Address, N::Null),
    ("from", R::Address, N::Null),
    ("contractAddress", R::Address, N::Null),
    ("transactionIndex", R::Number, N::Strict),
    ("root", R::Hex, N::Undef),
    ("gasUsed", R::BigNumber, N::Strict),
    ("logsBloom", R::Data, N::Undef),
    ("blockHash", R::Hash, N::Strict),
    ("transactionHash", R::Hash, N::Strict),
    ("logs", R::ReceiptLogs, N::Strict),
    ("blockNumber", R::Number, N::Strict),
    ("confirmations", R::Number, N::Null),
    ("cumulativeGasUsed", R::BigNumber, N::Strict),
    ("effectiveGasPrice", R::BigNumber, N::Undef),
    ("status", R::Number, N::Undef),
    ("type", R::Type, N::Strict),
];

/// A block's fields; `transactions` holds hashes or whole transactions.
const fn block_format(transactions: R) -> [(&'static str, R, N); 12] {
    [
        ("hash", R::Hash, N::Undef),
        ("parentHash", R::Hash, N::Strict),
        ("number", R::Number, N::Strict),
        ("timestamp", R::Number, N::Strict),
        ("nonce", R::Hex, N::Undef),
        ("difficulty", R::Difficulty, N::Strict),
        ("gasLimit", R::BigNumber, N::Strict),
        ("gasUsed", R::BigNumber, N::Strict),
        ("miner", R::Address, N::Undef),
        ("extraData", R::Data, N::Strict),
        ("transactions", transactions, N::Undef),
        ("baseFeePerGas", R::BigNumber, N::Undef),
    ]
}

const BLOCK: Format = &block_format(R::Hashes);

const BLOCK_WITH_TRANSACTIONS: Format = &block_format(R::Transactions);

pub(crate) const FILTER: Format = &[
    ("fromBlock", R::BlockTag, N::Undef),
    ("toBlock", R::BlockTag, N::Undef),
    ("blockHash", R::Hash, N::Undef),
    ("address", R::Address, N::Undef),
    ("topics", R::Topics, N::Undef),
];

const FILTER_LOG: Format = &[
    ("blockNumber", R::Number, N::Undef),
    ("blockHash", R::Hash, N::Undef),
    ("transactionIndex", R::Number, N::Strict),
    ("removed", R::Boolean, N::Undef),
    ("address", R::Address, N::Strict),
    ("data", R::Data, N::FalsishHex),
    ("topics", R::Hashes, N::Strict),
    ("transactionHash", R::Hash, N::Strict),
    ("logIndex", R::Number, N::Strict),
];

fn invalid_hash(ctx: &mut Context, value: &JsValue) -> boa_engine::JsError {
    err::arg(
        ctx,
        V_PROVIDERS,
        "invalid hash",
        "value",
        P::Js(value.clone()),
    )
}

/// `BigNumber.from(value)`.
pub(crate) fn big_number(ctx: &mut Context, value: &JsValue) -> JsResult<JsValue> {
    let h = bignumber::from_value_hex(ctx, value)?;
    bignumber::make_hex(ctx, h)
}

/// `BigNumber.from(value).toNumber()`, with BigNumber's own errors.
pub(crate) fn number(ctx: &mut Context, value: &JsValue) -> JsResult<JsValue> {
    if js::as_str(value).as_deref() == Some("0x") {
        return Ok(JsValue::from(0));
    }
    let bn = big_number(ctx, value)?;
    js::call_method(ctx, &bn, "toNumber", &[])
}

/// `Formatter.hex(value, strict)`.
pub(crate) fn hex(ctx: &mut Context, value: &JsValue, strict: bool) -> JsResult<String> {
    if let Some(s) = js::as_str(value) {
        let s = if !strict && !s.starts_with("0x") {
            format!("0x{s}")
        } else {
            s
        };
        if bytes::is_hex_str(&s) {
            return Ok(s.to_ascii_lowercase());
        }
    }
    Err(invalid_hash(ctx, value))
}

/// `Formatter.data(value, strict)`.
pub(crate) fn data(ctx: &mut Context, value: &JsValue, strict: bool) -> JsResult<String> {
    let h = hex(ctx, value, strict)?;
    if h.len() % 2 != 0 {
        let shown = value.to_string(ctx)?.to_std_string_lossy();
        return Err(err::plain(&format!("invalid data; odd-length - {shown}")));
    }
    Ok(h)
}

/// `Formatter.hash(value, strict)`.
pub(crate) fn hash(ctx: &mut Context, value: &JsValue, strict: bool) -> JsResult<String> {
    let h = hex(ctx, value, strict)?;
    if h.len() != 66 {
        return Err(invalid_hash(ctx, value));
    }
    Ok(h)
}

/// `hexValue(value)` of a BigNumberish: the shortest `0x` quantity.
pub(crate) fn hex_value(ctx: &mut Context, value: &JsValue) -> JsResult<String> {
    let v = bignumber::to_big(ctx, value)?;
    if v.is_negative() {
        return Err(err::arg(
            ctx,
            err::V_BYTES,
            "invalid hexlify value",
            "value",
            P::Js(value.clone()),
        ));
    }
    Ok(format!("0x{}", v.magnitude().to_str_radix(16)))
}

/// `Formatter.blockTag(tag)`.
pub(crate) fn block_tag(ctx: &mut Context, tag: &JsValue) -> JsResult<JsValue> {
    if js::is_nullish(tag) {
        return Ok(js::s("latest"));
    }
    if let Some(s) = js::as_str(tag) {
        match s.as_str() {
            "earliest" => return Ok(js::s("0x0")),
            "latest" | "pending" | "safe" | "finalized" => return Ok(tag.clone()),
            _ => {}
        }
        if bytes::is_hex_str(&s) {
            // hexValue of a hex string (padded on the left, so odd lengths are fine):
            // leading zeros stripped, `0x0` for zero.
            let digits = s[2..].trim_start_matches('0');
            let digits = if digits.is_empty() { "0" } else { digits };
            return Ok(js::s(&format!("0x{}", digits.to_ascii_lowercase())));
        }
    }
    if let Some(n) = tag.as_number() {
        return Ok(js::s(&hex_value(ctx, &JsValue::from(n))?));
    }
    Err(err::plain("invalid blockTag"))
}

/// `accessListify(value || [])`: `[{address, storageKeys}]`.
pub(crate) fn access_list(ctx: &mut Context, value: &JsValue) -> JsResult<JsValue> {
    let set = |ctx: &mut Context, addr: &JsValue, keys: &JsValue| -> JsResult<JsValue> {
        let a = address::get_address(ctx, addr)?;
        let addr_str = addr.to_string(ctx)?.to_std_string_lossy();
        let keys = if keys.to_boolean() {
            js::array_items(ctx, keys)?
        } else {
            Vec::new()
        };
        let mut out = Vec::with_capacity(keys.len());
        for (i, k) in keys.iter().enumerate() {
            if bytes::hex_data_length(ctx, k)? != Some(32) {
                return Err(err::arg(
                    ctx,
                    err::V_TRANSACTIONS,
                    "invalid access list storageKey",
                    &format!("accessList[{addr_str}:{i}]"),
                    P::Js(k.clone()),
                ));
            }
            let lower = js::as_str(k).unwrap_or_default().to_ascii_lowercase();
            out.push(js::s(&lower));
        }
        let keys = js::array(ctx, out);
        Ok(js::plain_object(ctx, vec![("address", js::s(&a)), ("storageKeys", keys)]).into())
    };
    if !value.to_boolean() {
        return Ok(js::array(ctx, Vec::new()));
    }
    if js::is_array(value) {
        let mut out = Vec::new();
        for (index, item) in js::array_items(ctx, value)?.iter().enumerate() {
            if js::is_array(item) {
                let parts = js::array_items(ctx, item)?;
                if parts.len() > 2 {
                    return Err(err::arg(
                        ctx,
                        err::V_TRANSACTIONS,
                        "access list expected to be [ address, storageKeys[] ]",
                        &format!("value[{index}]"),
                        P::Js(item.clone()),
                    ));
                }
                let a = parts.first().cloned().unwrap_or_default();
                let k = parts.get(1).cloned().unwrap_or_default();
                out.push(set(ctx, &a, &k)?);
            } else {
                let a = js::get(ctx, item, "address")?;
                let k = js::get(ctx, item, "storageKeys")?;
                out.push(set(ctx, &a, &k)?);
            }
        }
        return Ok(js::array(ctx, out));
    }
    let Some(obj) = value.as_object() else {
        return Ok(js::array(ctx, Vec::new()));
    };
    let mut sets: Vec<(String, JsValue)> = Vec::new();
    for addr in js::object_keys(ctx, &obj)? {
        let keys = obj.get(js::jstr(&addr), ctx)?;
        let ks = js::distinct_sorted_strings(ctx, &keys)?;
        let ks = js::array(ctx, ks.iter().map(|s| js::s(s)).collect());
        let entry = set(ctx, &js::s(&addr), &ks)?;
        let a = js::get(ctx, &entry, "address")?;
        sets.push((
            js::as_str(&a).unwrap_or_default().to_ascii_lowercase(),
            entry,
        ));
    }
    sets.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(js::array(ctx, sets.into_iter().map(|(_, e)| e).collect()))
}

/// `Formatter.topics(value)`.
fn topics(ctx: &mut Context, value: &JsValue) -> JsResult<JsValue> {
    if js::is_array(value) {
        let mut out = Vec::new();
        for v in js::array_items(ctx, value)? {
            out.push(topics(ctx, &v)?);
        }
        return Ok(js::array(ctx, out));
    }
    if !js::is_nullish(value) {
        return Ok(js::s(&hash(ctx, value, true)?));
    }
    Ok(JsValue::null())
}

fn array_of(
    ctx: &mut Context,
    value: &JsValue,
    f: fn(&mut Context, &JsValue) -> JsResult<JsValue>,
) -> JsResult<JsValue> {
    if !js::is_array(value) {
        return Err(err::plain("not an array"));
    }
    let mut out = Vec::new();
    for v in js::array_items(ctx, value)? {
        out.push(f(ctx, &v)?);
    }
    Ok(js::array(ctx, out))
}

fn apply(ctx: &mut Context, rule: R, value: &JsValue) -> JsResult<JsValue> {
    Ok(match rule {
        R::Hash => js::s(&hash(ctx, value, false)?),
        R::Number => number(ctx, value)?,
        R::BigNumber => big_number(ctx, value)?,
        R::Address => js::s(&address::get_address(ctx, value)?),
        R::Data => js::s(&data(ctx, value, false)?),
        R::StrictData => js::s(&data(ctx, value, true)?),
        R::Hex => js::s(&hex(ctx, value, false)?),
        R::Type => {
            if js::is_nullish(value) || js::as_str(value).as_deref() == Some("0x") {
                JsValue::from(0)
            } else {
                number(ctx, value)?
            }
        }
        R::Difficulty => {
            if js::is_nullish(value) {
                JsValue::null()
            } else {
                let bn = big_number(ctx, value)?;
                js::call_method(ctx, &bn, "toNumber", &[]).unwrap_or(JsValue::null())
            }
        }
        R::Boolean => {
            if let Some(b) = value.as_boolean() {
                JsValue::from(b)
            } else {
                match js::as_str(value).map(|s| s.to_lowercase()).as_deref() {
                    Some("true") => JsValue::from(true),
                    Some("false") => JsValue::from(false),
                    _ => {
                        let shown = value.to_string(ctx)?.to_std_string_lossy();
                        return Err(err::plain(&format!("invalid boolean - {shown}")));
                    }
                }
            }
        }
        R::AccessList => access_list(ctx, value)?,
        R::Uint256 => {
            if !bytes::is_hex_string(value, None) {
                return Err(err::plain("invalid uint256"));
            }
            js::s(&bytes::hex_zero_pad(ctx, value, 32)?)
        }
        R::BlockTag => block_tag(ctx, value)?,
        R::Topics => topics(ctx, value)?,
        R::Hashes => array_of(ctx, value, |ctx, v| Ok(js::s(&hash(ctx, v, false)?)))?,
        R::ReceiptLogs => array_of(ctx, value, |ctx, v| check(ctx, RECEIPT_LOG, v))?,
        R::Transactions => array_of(ctx, value, transaction_response)?,
    })
}

/// `Formatter.check(format, object)`: a new plain object.
pub(crate) fn check(ctx: &mut Context, format: Format, object: &JsValue) -> JsResult<JsValue> {
    let mut props: Vec<(&str, JsValue)> = Vec::with_capacity(format.len());
    for &(key, rule, nulls) in format {
        let value = js::get(ctx, object, key)?;
        let out = match nulls {
            N::Strict => Some(apply(ctx, rule, &value)?),
            N::Undef if js::is_nullish(&value) => None,
            N::Null if js::is_nullish(&value) => Some(JsValue::null()),
            N::FalsishHex if !value.to_boolean() => Some(js::s("0x")),
            _ => Some(apply(ctx, rule, &value)?),
        };
        if let Some(v) = out
            && !v.is_undefined()
        {
            props.push((key, v));
        }
    }
    Ok(js::plain_object(ctx, props).into())
}

fn set(ctx: &mut Context, obj: &JsValue, key: &str, value: JsValue) -> JsResult<()> {
    if let Some(o) = obj.as_object() {
        o.set(js::jstr(key), value, true, ctx)?;
    }
    Ok(())
}

/// `getContractAddress({from, nonce})`.
pub(crate) fn contract_address(ctx: &mut Context, tx: &JsValue) -> JsResult<String> {
    let from_v = js::get(ctx, tx, "from")?;
    let from = address::get_address(ctx, &from_v)?;
    let nonce_v = js::get(ctx, tx, "nonce")?;
    let nonce = bignumber::to_big(ctx, &nonce_v)?;
    let nonce_bytes = if nonce.is_zero() {
        Vec::new()
    } else {
        nonce.magnitude().to_bytes_be()
    };
    let encoded = alloy_rlp::encode(Rlp::L(vec![
        Rlp::B(bytes::decode_hex_digits(&from[2..])),
        Rlp::B(nonce_bytes),
    ]));
    let h = keccak(&encoded);
    Ok(address::checksum_bytes(&h[12..]))
}

/// `Formatter.transactionResponse(tx)` (the object is adjusted in place first, as ethers
/// does).
pub(crate) fn transaction_response(ctx: &mut Context, tx: &JsValue) -> JsResult<JsValue> {
    let gas = js::get(ctx, tx, "gas")?;
    if !js::is_nullish(&gas) && js::is_nullish(&js::get(ctx, tx, "gasLimit")?) {
        set(ctx, tx, "gasLimit", gas)?;
    }
    let to = js::get(ctx, tx, "to")?;
    if to.to_boolean() && bignumber::to_big(ctx, &to)?.is_zero() {
        set(
            ctx,
            tx,
            "to",
            js::s("0x0000000000000000000000000000000000000000"),
        )?;
    }
    let input = js::get(ctx, tx, "input")?;
    if !js::is_nullish(&input) && js::is_nullish(&js::get(ctx, tx, "data")?) {
        set(ctx, tx, "data", input)?;
    }
    if js::is_nullish(&js::get(ctx, tx, "to")?) && js::is_nullish(&js::get(ctx, tx, "creates")?) {
        let created = contract_address(ctx, tx)?;
        set(ctx, tx, "creates", js::s(&created))?;
    }
    let ty = js::get(ctx, tx, "type")?;
    if matches!(ty.as_number(), Some(1.0 | 2.0)) && js::is_nullish(&js::get(ctx, tx, "accessList")?)
    {
        let empty = js::array(ctx, Vec::new());
        set(ctx, tx, "accessList", empty)?;
    }
    let result = check(ctx, TRANSACTION, tx)?;
    let chain_id = js::get(ctx, tx, "chainId")?;
    let chain_id = if !js::is_nullish(&chain_id) {
        if bytes::is_hex_string(&chain_id, None) {
            number(ctx, &chain_id)?
        } else {
            chain_id
        }
    } else {
        let v = js::get(ctx, &result, "v")?;
        let mut id = js::get(ctx, tx, "networkId")?;
        if js::is_nullish(&id) && js::is_nullish(&v) {
            id = js::get(ctx, tx, "chainId")?;
        }
        if bytes::is_hex_string(&id, None) {
            id = number(ctx, &id)?;
        }
        if id.as_number().is_none()
            && let Some(v) = v.as_number()
        {
            let c = ((v - 35.0) / 2.0).max(0.0);
            id = JsValue::from(c.trunc());
        }
        if id.as_number().is_none() {
            id = JsValue::from(0);
        }
        id
    };
    set(ctx, &result, "chainId", chain_id)?;
    let block_hash = js::get(ctx, &result, "blockHash")?;
    if let Some(h) = js::as_str(&block_hash)
        && h.replace('0', "") == "x"
    {
        set(ctx, &result, "blockHash", JsValue::null())?;
    }
    Ok(result)
}

/// `Formatter.block(value)` / `blockWithTransactions(value)`.
pub(crate) fn block(
    ctx: &mut Context,
    value: &JsValue,
    with_transactions: bool,
) -> JsResult<JsValue> {
    let author = js::get(ctx, value, "author")?;
    if !js::is_nullish(&author) && js::is_nullish(&js::get(ctx, value, "miner")?) {
        set(ctx, value, "miner", author)?;
    }
    let own = js::get(ctx, value, "_difficulty")?;
    let difficulty = if js::is_nullish(&own) {
        js::get(ctx, value, "difficulty")?
    } else {
        own
    };
    let format = if with_transactions {
        BLOCK_WITH_TRANSACTIONS
    } else {
        BLOCK
    };
    let result = check(ctx, format, value)?;
    let d = if js::is_nullish(&difficulty) {
        JsValue::null()
    } else {
        big_number(ctx, &difficulty)?
    };
    set(ctx, &result, "_difficulty", d)?;
    Ok(result)
}

/// `Formatter.receipt(value)`.
pub(crate) fn receipt(ctx: &mut Context, value: &JsValue) -> JsResult<JsValue> {
    let result = check(ctx, RECEIPT, value)?;
    let root = js::get(ctx, &result, "root")?;
    if let Some(root_s) = js::as_str(&root) {
        if root_s.len() <= 4 {
            let n = number(ctx, &root)?;
            let status = js::get(ctx, &result, "status")?;
            if n.as_number() == Some(0.0) || n.as_number() == Some(1.0) {
                if !js::is_nullish(&status) && status.as_number() != n.as_number() {
                    let shown =
                        js::plain_object(ctx, vec![("root", root.clone()), ("status", status)]);
                    return Err(err::arg(
                        ctx,
                        V_PROVIDERS,
                        "alt-root-status/status mismatch",
                        "value",
                        P::Js(shown.into()),
                    ));
                }
                set(ctx, &result, "status", n)?;
                if let Some(o) = result.as_object() {
                    o.delete_property_or_throw(js_string!("root"), ctx)?;
                }
            } else {
                return Err(err::arg(
                    ctx,
                    V_PROVIDERS,
                    "invalid alt-root-status",
                    "value.root",
                    P::Js(root),
                ));
            }
        } else if root_s.len() != 66 {
            return Err(err::arg(
                ctx,
                V_PROVIDERS,
                "invalid root hash",
                "value.root",
                P::Js(root),
            ));
        }
    }
    if !js::is_nullish(&js::get(ctx, &result, "status")?) {
        set(ctx, &result, "byzantium", JsValue::from(true))?;
    }
    Ok(result)
}

/// `Formatter.filterLog(value)` (after `removed` defaults to `false`).
pub(crate) fn filter_log(ctx: &mut Context, value: &JsValue) -> JsResult<JsValue> {
    if js::is_nullish(&js::get(ctx, value, "removed")?) {
        set(ctx, value, "removed", JsValue::from(false))?;
    }
    check(ctx, FILTER_LOG, value)
}

/// `JsonRpcProvider.hexlifyTransaction(tx, {from: true})`: numbers as quantities
/// (`gasLimit` as `gas`), `from`/`to`/`data` hexlified, the access list if any.
pub(crate) fn hexlify_transaction(ctx: &mut Context, tx: &JsValue) -> JsResult<JsValue> {
    let mut props: Vec<(&str, JsValue)> = Vec::new();
    for key in [
        "chainId",
        "gasLimit",
        "gasPrice",
        "type",
        "maxFeePerGas",
        "maxPriorityFeePerGas",
        "nonce",
        "value",
    ] {
        let v = js::get(ctx, tx, key)?;
        if js::is_nullish(&v) {
            continue;
        }
        let bn = big_number(ctx, &v)?;
        let h = hex_value(ctx, &bn)?;
        props.push((if key == "gasLimit" { "gas" } else { key }, js::s(&h)));
    }
    for key in ["from", "to", "data"] {
        let v = js::get(ctx, tx, key)?;
        if js::is_nullish(&v) {
            continue;
        }
        props.push((key, js::s(&bytes::hexlify(ctx, &v)?)));
    }
    let al = js::get(ctx, tx, "accessList")?;
    if al.to_boolean() {
        props.push(("accessList", access_list(ctx, &al)?));
    }
    Ok(js::plain_object(ctx, props).into())
}

/// Whether a BigNumberish is zero (for `type`).
pub(crate) fn is_zero(ctx: &mut Context, value: &JsValue) -> JsResult<bool> {
    Ok(bignumber::to_big(ctx, value)? == BigInt::zero())
}
