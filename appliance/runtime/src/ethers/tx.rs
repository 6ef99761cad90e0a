//! `@ethersproject/transactions` `serialize` (legacy/EIP-155, EIP-2930, EIP-1559) and RLP.
//!
//! The RLP bytes are `alloy-rlp`'s (byte strings and lists, which is all ethers 5.7's
//! `RLP.encode` takes); what stays here is turning JS values into the item tree, with
//! ethers' checks and error messages.

use alloy_rlp::{BufMut, Encodable};
use boa_engine::{Context, JsObject, JsResult, JsValue, js_string};

use super::address;
use super::bignumber;
use super::bytes;
use super::err::{self, P, UNSUPPORTED_OPERATION, V_PROPERTIES, V_TRANSACTIONS};
use super::js;

/// An RLP item as ethers' `RLP.encode` takes it: bytes, or a list of items.
pub(crate) enum Rlp {
    B(Vec<u8>),
    L(Vec<Rlp>),
}

impl Encodable for Rlp {
    fn encode(&self, out: &mut dyn BufMut) {
        match self {
            Rlp::B(b) => b.as_slice().encode(out),
            Rlp::L(items) => items.encode(out),
        }
    }

    fn length(&self) -> usize {
        match self {
            Rlp::B(b) => b.as_slice().length(),
            Rlp::L(items) => items.length(),
        }
    }
}

/// An RLP item from a JS value as `RLP.encode` takes it (arrays are lists).
fn rlp_item(ctx: &mut Context, v: &JsValue) -> JsResult<Rlp> {
    if js::is_array(v) {
        let items = js::array_items(ctx, v)?;
        let mut out = Vec::with_capacity(items.len());
        for i in items {
            out.push(rlp_item(ctx, &i)?);
        }
        return Ok(Rlp::L(out));
    }
    if !bytes::is_bytes_like(ctx, v)? {
        return Err(err::arg(
            ctx,
            "rlp/5.7.0",
            "RLP object must be BytesLike",
            "object",
            P::Js(v.clone()),
        ));
    }
    Ok(Rlp::B(bytes::arrayify(ctx, v)?))
}

fn get(ctx: &mut Context, tx: &JsObject, key: &str) -> JsResult<JsValue> {
    tx.get(js::jstr(key), ctx)
}

/// `x || 0`.
fn or_zero(v: JsValue) -> JsValue {
    if v.to_boolean() { v } else { JsValue::from(0) }
}

/// `formatNumber(value, name)`.
fn format_number(ctx: &mut Context, value: &JsValue, name: &str) -> JsResult<Vec<u8>> {
    let h = bignumber::from_value_hex(ctx, value)?;
    let b = bytes::strip_zeros(&bytes::arrayify(ctx, &js::s(&h))?);
    if b.len() > 32 {
        return Err(err::arg(
            ctx,
            V_TRANSACTIONS,
            &format!("invalid length for {name}"),
            &format!("transaction:{name}"),
            P::Js(value.clone()),
        ));
    }
    Ok(b)
}

fn access_set(ctx: &mut Context, addr: &JsValue, keys: &JsValue) -> JsResult<Rlp> {
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
                V_TRANSACTIONS,
                "invalid access list storageKey",
                &format!("accessList[{addr_str}:{i}]"),
                P::Js(k.clone()),
            ));
        }
        let lower = match js::as_str(k) {
            Some(s) => s.to_ascii_lowercase(),
            None => return Err(err::type_error("storageKey.toLowerCase is not a function")),
        };
        out.push(Rlp::B(bytes::decode_hex_digits(&lower[2..])));
    }
    Ok(Rlp::L(vec![
        Rlp::B(bytes::decode_hex_digits(&a[2..])),
        Rlp::L(out),
    ]))
}

/// `formatAccessList(accessListify(value))`.
fn access_list(ctx: &mut Context, value: &JsValue) -> JsResult<Rlp> {
    if js::is_array(value) {
        let sets = js::array_items(ctx, value)?;
        let mut out = Vec::with_capacity(sets.len());
        for (index, set) in sets.iter().enumerate() {
            if js::is_array(set) {
                let items = js::array_items(ctx, set)?;
                if items.len() > 2 {
                    return Err(err::arg(
                        ctx,
                        V_TRANSACTIONS,
                        "access list expected to be [ address, storageKeys[] ]",
                        &format!("value[{index}]"),
                        P::Js(set.clone()),
                    ));
                }
                let a = items.first().cloned().unwrap_or_default();
                let k = items.get(1).cloned().unwrap_or_default();
                out.push(access_set(ctx, &a, &k)?);
            } else {
                let a = js::get(ctx, set, "address")?;
                let k = js::get(ctx, set, "storageKeys")?;
                out.push(access_set(ctx, &a, &k)?);
            }
        }
        return Ok(Rlp::L(out));
    }
    let Some(obj) = value.as_object() else {
        return Err(err::type_error(
            "Cannot convert undefined or null to object",
        ));
    };
    let mut sets: Vec<(String, Rlp)> = Vec::new();
    for addr in js::object_keys(ctx, &obj)? {
        let keys = obj.get(js::jstr(&addr), ctx)?;
        let ks = js::distinct_sorted_strings(ctx, &keys)?;
        let ks_js = js::array(ctx, ks.iter().map(|s| js::s(s)).collect());
        let set = access_set(ctx, &js::s(&addr), &ks_js)?;
        let checksummed = address::get_address(ctx, &js::s(&addr))?;
        sets.push((checksummed.to_ascii_lowercase(), set));
    }
    sets.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Rlp::L(sets.into_iter().map(|(_, s)| s).collect()))
}

fn to_field(ctx: &mut Context, tx: &JsObject) -> JsResult<Rlp> {
    let to = get(ctx, tx, "to")?;
    if js::is_nullish(&to) {
        return Ok(Rlp::B(Vec::new()));
    }
    let a = address::get_address(ctx, &to)?;
    Ok(Rlp::B(bytes::decode_hex_digits(&a[2..])))
}

fn data_field(ctx: &mut Context, tx: &JsObject) -> JsResult<Rlp> {
    let data = get(ctx, tx, "data")?;
    let data = if data.to_boolean() { data } else { js::s("0x") };
    rlp_item(ctx, &data)
}

fn typed(
    ctx: &mut Context,
    tx: &JsObject,
    signature: Option<&JsValue>,
    eip1559: bool,
) -> JsResult<String> {
    let mut fields = Vec::with_capacity(12);
    let chain_id = or_zero(get(ctx, tx, "chainId")?);
    fields.push(Rlp::B(format_number(ctx, &chain_id, "chainId")?));
    let nonce = or_zero(get(ctx, tx, "nonce")?);
    fields.push(Rlp::B(format_number(ctx, &nonce, "nonce")?));
    if eip1559 {
        let gas_price = get(ctx, tx, "gasPrice")?;
        if !js::is_nullish(&gas_price) {
            let gp = bignumber::to_big(ctx, &gas_price)?;
            let mf_v = or_zero(get(ctx, tx, "maxFeePerGas")?);
            let mf = bignumber::to_big(ctx, &mf_v)?;
            if gp != mf {
                let gp_js = bignumber::make(ctx, &gp)?;
                let mf_js = bignumber::make(ctx, &mf)?;
                let v = js::plain_object(ctx, vec![("gasPrice", gp_js), ("maxFeePerGas", mf_js)]);
                return Err(err::arg(
                    ctx,
                    V_TRANSACTIONS,
                    "mismatch EIP-1559 gasPrice != maxFeePerGas",
                    "tx",
                    P::Js(v.into()),
                ));
            }
        }
        let v = or_zero(get(ctx, tx, "maxPriorityFeePerGas")?);
        fields.push(Rlp::B(format_number(ctx, &v, "maxPriorityFeePerGas")?));
        let v = or_zero(get(ctx, tx, "maxFeePerGas")?);
        fields.push(Rlp::B(format_number(ctx, &v, "maxFeePerGas")?));
    } else {
        let v = or_zero(get(ctx, tx, "gasPrice")?);
        fields.push(Rlp::B(format_number(ctx, &v, "gasPrice")?));
    }
    let v = or_zero(get(ctx, tx, "gasLimit")?);
    fields.push(Rlp::B(format_number(ctx, &v, "gasLimit")?));
    fields.push(to_field(ctx, tx)?);
    let v = or_zero(get(ctx, tx, "value")?);
    fields.push(Rlp::B(format_number(ctx, &v, "value")?));
    fields.push(data_field(ctx, tx)?);
    let al = get(ctx, tx, "accessList")?;
    let al = if al.to_boolean() {
        al
    } else {
        js::array(ctx, Vec::new())
    };
    fields.push(access_list(ctx, &al)?);
    if let Some(signature) = signature {
        let sig = bytes::split_signature(ctx, signature)?;
        fields.push(Rlp::B(format_number(
            ctx,
            &sig.recovery_param,
            "recoveryParam",
        )?));
        let r = bytes::arrayify(ctx, &js::s(&sig.r))?;
        fields.push(Rlp::B(bytes::strip_zeros(&r)));
        let s = bytes::arrayify(ctx, &js::s(&sig.s))?;
        fields.push(Rlp::B(bytes::strip_zeros(&s)));
    }
    let mut out = vec![if eip1559 { 2 } else { 1 }];
    Rlp::L(fields).encode(&mut out);
    Ok(bytes::hex(&out))
}

const ALLOWED: [&str; 8] = [
    "chainId", "data", "gasLimit", "gasPrice", "nonce", "to", "type", "value",
];

fn legacy(ctx: &mut Context, tx: &JsObject, signature: Option<&JsValue>) -> JsResult<String> {
    for key in js::object_keys(ctx, tx)? {
        if !ALLOWED.contains(&key.as_str()) {
            return Err(err::arg(
                ctx,
                V_PROPERTIES,
                &format!("invalid object key - {key}"),
                &format!("transaction:{key}"),
                P::Js(tx.clone().into()),
            ));
        }
    }
    let mut raw: Vec<Vec<u8>> = Vec::with_capacity(9);
    let fields: [(&str, bool, Option<usize>, Option<usize>); 6] = [
        ("nonce", true, None, Some(32)),
        ("gasPrice", true, None, Some(32)),
        ("gasLimit", true, None, Some(32)),
        ("to", false, Some(20), None),
        ("value", true, None, Some(32)),
        ("data", false, None, None),
    ];
    for (name, numeric, length, max_length) in fields {
        let v = get(ctx, tx, name)?;
        let v = if v.to_boolean() {
            v
        } else {
            js::array(ctx, Vec::new())
        };
        let opts = if numeric {
            bytes::Opts::LEFT
        } else {
            bytes::Opts::NONE
        };
        let h = bytes::hexlify_opts(ctx, &v, opts)?;
        let mut b = bytes::arrayify(ctx, &js::s(&h))?;
        if let Some(l) = length
            && b.len() != l
            && !b.is_empty()
        {
            return Err(err::arg(
                ctx,
                V_TRANSACTIONS,
                &format!("invalid length for {name}"),
                &format!("transaction:{name}"),
                P::Bytes(b),
            ));
        }
        if let Some(m) = max_length {
            b = bytes::strip_zeros(&b);
            if b.len() > m {
                return Err(err::arg(
                    ctx,
                    V_TRANSACTIONS,
                    &format!("invalid length for {name}"),
                    &format!("transaction:{name}"),
                    P::Bytes(b),
                ));
            }
        }
        raw.push(b);
    }
    let mut chain_id = 0.0f64;
    let cid = get(ctx, tx, "chainId")?;
    if !js::is_nullish(&cid) {
        match cid.as_number() {
            Some(n) => chain_id = n,
            None => {
                return Err(err::arg(
                    ctx,
                    V_TRANSACTIONS,
                    "invalid transaction.chainId",
                    "transaction",
                    P::Js(tx.clone().into()),
                ));
            }
        }
    } else if let Some(sig) = signature
        && !bytes::is_bytes_like(ctx, sig)?
    {
        let v = js::get(ctx, sig, "v")?.to_number(ctx)?;
        if v > 28.0 {
            chain_id = ((v - 35.0) / 2.0).floor();
        }
    }
    if chain_id != 0.0 {
        let h = bytes::hexlify(ctx, &JsValue::from(chain_id))?;
        raw.push(bytes::decode_hex_digits(&h[2..]));
        raw.push(Vec::new());
        raw.push(Vec::new());
    }
    let Some(signature) = signature else {
        let out = alloy_rlp::encode(Rlp::L(raw.into_iter().map(Rlp::B).collect()));
        return Ok(bytes::hex(&out));
    };
    let sig = bytes::split_signature(ctx, signature)?;
    let rp = sig.recovery_param.to_number(ctx)?;
    let mut v = 27.0 + rp;
    let sig_v = sig.v.to_number(ctx)?;
    let mismatch = |ctx: &mut Context| {
        err::arg(
            ctx,
            V_TRANSACTIONS,
            "transaction.chainId/signature.v mismatch",
            "signature",
            P::Js(signature.clone()),
        )
    };
    if chain_id != 0.0 {
        raw.truncate(raw.len() - 3);
        v += chain_id * 2.0 + 8.0;
        if sig_v > 28.0 && sig_v != v {
            return Err(mismatch(ctx));
        }
    } else if sig_v != v {
        return Err(mismatch(ctx));
    }
    let h = bytes::hexlify(ctx, &JsValue::from(v))?;
    raw.push(bytes::decode_hex_digits(&h[2..]));
    raw.push(bytes::strip_zeros(&bytes::arrayify(ctx, &js::s(&sig.r))?));
    raw.push(bytes::strip_zeros(&bytes::arrayify(ctx, &js::s(&sig.s))?));
    let out = alloy_rlp::encode(Rlp::L(raw.into_iter().map(Rlp::B).collect()));
    Ok(bytes::hex(&out))
}

/// `serialize(transaction, signature)`.
pub(crate) fn serialize(
    ctx: &mut Context,
    tx: &JsObject,
    signature: Option<&JsValue>,
) -> JsResult<String> {
    let ty = tx.get(js_string!("type"), ctx)?;
    if js::is_nullish(&ty) || ty.as_number() == Some(0.0) {
        if !js::is_nullish(&get(ctx, tx, "accessList")?) {
            return Err(err::arg(
                ctx,
                V_TRANSACTIONS,
                "untyped transactions do not support accessList; include type: 1",
                "transaction",
                P::Js(tx.clone().into()),
            ));
        }
        return legacy(ctx, tx, signature);
    }
    match ty.as_number() {
        Some(1.0) => typed(ctx, tx, signature, false),
        Some(2.0) => typed(ctx, tx, signature, true),
        _ => {
            let s = ty.to_string(ctx)?.to_std_string_lossy();
            Err(err::make(
                ctx,
                V_TRANSACTIONS,
                &format!("unsupported transaction type: {s}"),
                UNSUPPORTED_OPERATION,
                vec![
                    ("operation", P::str("serializeTransaction")),
                    ("transactionType", P::Js(ty)),
                ],
            ))
        }
    }
}

fn f_serialize(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let tx = js::arg(args, 0);
    let Some(obj) = tx.as_object() else {
        return Err(err::type_error(
            "Cannot read properties of undefined (reading 'type')",
        ));
    };
    let sig = js::arg(args, 1);
    let sig = if sig.to_boolean() { Some(&sig) } else { None };
    Ok(js::s(&serialize(ctx, &obj, sig)?))
}

fn f_rlp_encode(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let item = rlp_item(ctx, &js::arg(args, 0))?;
    Ok(js::s(&bytes::hex(&alloy_rlp::encode(&item))))
}

pub(crate) fn install(ctx: &mut Context, utils: &JsObject) -> JsResult<()> {
    use boa_engine::NativeFunction;
    js::method(
        ctx,
        utils,
        "serializeTransaction",
        2,
        NativeFunction::from_fn_ptr(f_serialize),
    )?;
    let rlp = js::new_object(ctx);
    js::method(
        ctx,
        &rlp,
        "encode",
        1,
        NativeFunction::from_fn_ptr(f_rlp_encode),
    )?;
    utils.set(js_string!("RLP"), rlp, false, ctx)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Rlp;

    fn rep(byte: u8, n: usize) -> Vec<u8> {
        vec![byte; n]
    }

    /// Lengths of 56 and more (one- and two-byte length fields) and nesting, which the
    /// ethers vectors reach only partly. Expected bytes: ethers 5.7.2 `RLP.encode` of the
    /// same items (checked with node).
    #[test]
    fn rlp_long_forms_match_ethers() {
        let cases: Vec<(Rlp, Vec<u8>)> = vec![
            // [0xab × 56]: a one-byte long string length inside a short-enough list.
            (
                Rlp::L(vec![Rlp::B(rep(0xab, 56))]),
                [vec![0xf8, 0x3a, 0xb8, 0x38], rep(0xab, 56)].concat(),
            ),
            // 0xcd × 300: a two-byte string length.
            (
                Rlp::B(rep(0xcd, 300)),
                [vec![0xb9, 0x01, 0x2c], rep(0xcd, 300)].concat(),
            ),
            // [0x01 × 255]: a two-byte list length (258) around a one-byte string length.
            (
                Rlp::L(vec![Rlp::B(rep(0x01, 255))]),
                [vec![0xf9, 0x01, 0x01, 0xb8, 0xff], rep(0x01, 255)].concat(),
            ),
            // [[0x02 × 60], 0x00, [[]]]: nested long lists, a single byte, an empty list.
            (
                Rlp::L(vec![
                    Rlp::L(vec![Rlp::B(rep(0x02, 60))]),
                    Rlp::B(vec![0x00]),
                    Rlp::L(vec![Rlp::L(vec![])]),
                ]),
                [
                    vec![0xf8, 0x43, 0xf8, 0x3e, 0xb8, 0x3c],
                    rep(0x02, 60),
                    vec![0x00, 0xc1, 0xc0],
                ]
                .concat(),
            ),
        ];
        for (item, expected) in cases {
            let out = alloy_rlp::encode(&item);
            assert_eq!(out, expected);
            assert_eq!(alloy_rlp::Encodable::length(&item), expected.len());
        }
    }
}
