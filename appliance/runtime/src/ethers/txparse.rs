//! `@ethersproject/transactions` `parse(rawTransaction)` (legacy/EIP-155, EIP-2930,
//! EIP-1559), exposed as `ethers.utils.parseTransaction` and used by
//! `provider.sendTransaction` to describe the transaction it sends: the fields in
//! ethers' order, the sender recovered from the signature, the hash.

use boa_engine::{Context, JsResult, JsValue, NativeFunction};
use num_bigint::BigInt;
use num_traits::Zero;

use super::address;
use super::bignumber;
use super::bytes;
use super::err::{self, P, UNSUPPORTED_OPERATION, V_TRANSACTIONS};
use super::formatter;
use super::js;
use super::signing;
use super::strings::keccak;
use super::tx::Rlp;

/// A decoded RLP item.
enum Item {
    B(Vec<u8>),
    L(Vec<Item>),
}

fn rlp_error(ctx: &mut Context, message: &str) -> boa_engine::JsError {
    err::make(ctx, "rlp/5.7.0", message, err::BUFFER_OVERRUN, vec![])
}

/// Decodes one item at `data[at..]`: the item and the offset after it.
fn decode_at(ctx: &mut Context, data: &[u8], at: usize, depth: usize) -> JsResult<(Item, usize)> {
    if depth > 64 {
        return Err(rlp_error(ctx, "data too deeply nested"));
    }
    let Some(&first) = data.get(at) else {
        return Err(rlp_error(ctx, "data too short"));
    };
    let len_of = |ctx: &mut Context, start: usize, n: usize| -> JsResult<usize> {
        let Some(bytes) = data.get(start..start + n) else {
            return Err(rlp_error(ctx, "data short segment too short"));
        };
        let mut v: usize = 0;
        for b in bytes {
            v = v
                .checked_mul(256)
                .and_then(|v| v.checked_add(usize::from(*b)))
                .ok_or_else(|| rlp_error(ctx, "data too long"))?;
        }
        Ok(v)
    };
    let slice = |ctx: &mut Context, start: usize, len: usize| -> JsResult<&[u8]> {
        start
            .checked_add(len)
            .and_then(|end| data.get(start..end))
            .ok_or_else(|| rlp_error(ctx, "data short segment too short"))
    };
    match first {
        0x00..=0x7f => Ok((Item::B(vec![first]), at + 1)),
        0x80..=0xb7 => {
            let len = usize::from(first - 0x80);
            let b = slice(ctx, at + 1, len)?.to_vec();
            Ok((Item::B(b), at + 1 + len))
        }
        0xb8..=0xbf => {
            let n = usize::from(first - 0xb7);
            let len = len_of(ctx, at + 1, n)?;
            let b = slice(ctx, at + 1 + n, len)?.to_vec();
            Ok((Item::B(b), at + 1 + n + len))
        }
        0xc0..=0xf7 => {
            let len = usize::from(first - 0xc0);
            let end = at + 1 + len;
            slice(ctx, at + 1, len)?;
            let items = decode_list(ctx, data, at + 1, end, depth)?;
            Ok((Item::L(items), end))
        }
        0xf8..=0xff => {
            let n = usize::from(first - 0xf7);
            let len = len_of(ctx, at + 1, n)?;
            let start = at + 1 + n;
            slice(ctx, start, len)?;
            let items = decode_list(ctx, data, start, start + len, depth)?;
            Ok((Item::L(items), start + len))
        }
    }
}

fn decode_list(
    ctx: &mut Context,
    data: &[u8],
    mut at: usize,
    end: usize,
    depth: usize,
) -> JsResult<Vec<Item>> {
    let mut out = Vec::new();
    while at < end {
        let (item, next) = decode_at(ctx, &data[..end], at, depth + 1)?;
        out.push(item);
        at = next;
    }
    Ok(out)
}

/// `RLP.decode(data)`: the whole input must be one item.
fn decode(ctx: &mut Context, data: &[u8]) -> JsResult<Item> {
    let (item, end) = decode_at(ctx, data, 0, 0)?;
    if end != data.len() {
        return Err(err::arg(
            ctx,
            "rlp/5.7.0",
            "invalid rlp data",
            "data",
            P::Bytes(data.to_vec()),
        ));
    }
    Ok(item)
}

fn bytes_of(item: &Item) -> Vec<u8> {
    match item {
        Item::B(b) => b.clone(),
        Item::L(_) => Vec::new(),
    }
}

fn to_rlp(item: &Item) -> Rlp {
    match item {
        Item::B(b) => Rlp::B(b.clone()),
        Item::L(l) => Rlp::L(l.iter().map(to_rlp).collect()),
    }
}

/// The item as ethers' decoder gives it: a hex string, or an array of them.
fn item_js(ctx: &mut Context, item: &Item) -> JsValue {
    match item {
        Item::B(b) => js::s(&bytes::hex(b)),
        Item::L(l) => {
            let items = l.iter().map(|i| item_js(ctx, i)).collect();
            js::array(ctx, items)
        }
    }
}

/// `handleNumber`: `0x` is zero.
fn number_of(ctx: &mut Context, item: &Item) -> JsResult<JsValue> {
    let b = bytes_of(item);
    bignumber::make(ctx, &BigInt::from_bytes_be(num_bigint::Sign::Plus, &b))
}

fn to_number(ctx: &mut Context, item: &Item) -> JsResult<JsValue> {
    let bn = number_of(ctx, item)?;
    js::call_method(ctx, &bn, "toNumber", &[])
}

/// `handleAddress`: `0x` is `null`.
fn address_of(ctx: &mut Context, item: &Item) -> JsResult<JsValue> {
    let b = bytes_of(item);
    if b.is_empty() {
        return Ok(JsValue::null());
    }
    Ok(js::s(&address::get_address(ctx, &js::s(&bytes::hex(&b)))?))
}

fn pad32(ctx: &mut Context, item: &Item) -> JsResult<String> {
    bytes::hex_zero_pad(ctx, &js::s(&bytes::hex(&bytes_of(item))), 32)
}

/// The sender of `digest` signed with `r`, `s`, `recovery`; `None` if it cannot be
/// recovered (ethers leaves `from` out then).
fn recover(
    ctx: &mut Context,
    digest: &[u8; 32],
    r: &str,
    s: &str,
    recovery: f64,
) -> Option<String> {
    let sig = js::plain_object(
        ctx,
        vec![
            ("r", js::s(r)),
            ("s", js::s(s)),
            ("recoveryParam", JsValue::from(recovery)),
        ],
    );
    signing::recover_address(ctx, &js::s(&bytes::hex(digest)), &sig.into()).ok()
}

fn typed(ctx: &mut Context, payload: &[u8], eip1559: bool) -> JsResult<JsValue> {
    let (ty, unsigned_len) = if eip1559 { (2, 9) } else { (1, 8) };
    let Item::L(f) = decode(ctx, &payload[1..])? else {
        return Err(count_error(ctx, payload, ty));
    };
    if f.len() != unsigned_len && f.len() != unsigned_len + 3 {
        return Err(count_error(ctx, payload, ty));
    }
    let mut props: Vec<(&str, JsValue)> = vec![("type", JsValue::from(ty))];
    props.push(("chainId", to_number(ctx, &f[0])?));
    props.push(("nonce", to_number(ctx, &f[1])?));
    let rest = if eip1559 {
        props.push(("maxPriorityFeePerGas", number_of(ctx, &f[2])?));
        props.push(("maxFeePerGas", number_of(ctx, &f[3])?));
        props.push(("gasPrice", JsValue::null()));
        4
    } else {
        props.push(("gasPrice", number_of(ctx, &f[2])?));
        3
    };
    props.push(("gasLimit", number_of(ctx, &f[rest])?));
    props.push(("to", address_of(ctx, &f[rest + 1])?));
    props.push(("value", number_of(ctx, &f[rest + 2])?));
    props.push(("data", js::s(&bytes::hex(&bytes_of(&f[rest + 3])))));
    let al = item_js(ctx, &f[rest + 4]);
    props.push(("accessList", formatter::access_list(ctx, &al)?));
    if f.len() == unsigned_len {
        return Ok(js::plain_object(ctx, props).into());
    }
    props.push(("hash", js::s(&bytes::hex(&keccak(payload)))));
    let sig = &f[unsigned_len..];
    let recid = BigInt::from_bytes_be(num_bigint::Sign::Plus, &bytes_of(&sig[0]));
    let recid = if recid == BigInt::from(0) {
        0.0
    } else if recid == BigInt::from(1) {
        1.0
    } else {
        let shown = js::s(&bytes::hex(&bytes_of(&sig[0])));
        return Err(err::arg(
            ctx,
            V_TRANSACTIONS,
            "invalid v for transaction type: 1",
            "v",
            P::Js(shown),
        ));
    };
    props.push(("v", JsValue::from(recid)));
    let r = pad32(ctx, &sig[1])?;
    let s = pad32(ctx, &sig[2])?;
    props.push(("r", js::s(&r)));
    props.push(("s", js::s(&s)));
    let mut unsigned = vec![ty];
    unsigned.extend(alloy_rlp::encode(Rlp::L(
        f[..unsigned_len].iter().map(to_rlp).collect(),
    )));
    if let Some(from) = recover(ctx, &keccak(&unsigned), &r, &s, recid) {
        props.push(("from", js::s(&from)));
    }
    Ok(js::plain_object(ctx, props).into())
}

fn count_error(ctx: &mut Context, payload: &[u8], ty: u8) -> boa_engine::JsError {
    err::arg(
        ctx,
        V_TRANSACTIONS,
        &format!("invalid component count for transaction type: {ty}"),
        "payload",
        P::Js(js::s(&bytes::hex(payload))),
    )
}

fn legacy(ctx: &mut Context, payload: &[u8]) -> JsResult<JsValue> {
    let invalid = |ctx: &mut Context| {
        err::arg(
            ctx,
            V_TRANSACTIONS,
            "invalid raw transaction",
            "rawTransaction",
            P::Bytes(payload.to_vec()),
        )
    };
    let Item::L(f) = decode(ctx, payload)? else {
        return Err(invalid(ctx));
    };
    if f.len() != 9 && f.len() != 6 {
        return Err(invalid(ctx));
    }
    let mut props: Vec<(&str, JsValue)> = vec![
        ("nonce", to_number(ctx, &f[0])?),
        ("gasPrice", number_of(ctx, &f[1])?),
        ("gasLimit", number_of(ctx, &f[2])?),
        ("to", address_of(ctx, &f[3])?),
        ("value", number_of(ctx, &f[4])?),
        ("data", js::s(&bytes::hex(&bytes_of(&f[5])))),
        ("chainId", JsValue::from(0)),
    ];
    if f.len() == 6 {
        return Ok(js::plain_object(ctx, props).into());
    }
    let v_big = BigInt::from_bytes_be(num_bigint::Sign::Plus, &bytes_of(&f[6]));
    let Some(v) = bignumber::to_number_checked(&v_big) else {
        return Ok(js::plain_object(ctx, props).into());
    };
    let r = pad32(ctx, &f[7])?;
    let s = pad32(ctx, &f[8])?;
    let r_zero = BigInt::from_bytes_be(num_bigint::Sign::Plus, &bytes_of(&f[7])).is_zero();
    let s_zero = BigInt::from_bytes_be(num_bigint::Sign::Plus, &bytes_of(&f[8])).is_zero();
    if r_zero && s_zero {
        // EIP-155 unsigned: v holds the chain id.
        props[6].1 = JsValue::from(v);
        props.push(("v", JsValue::from(0)));
        props.push(("r", js::s(&r)));
        props.push(("s", js::s(&s)));
    } else {
        let chain_id = ((v - 35.0) / 2.0).floor().max(0.0);
        props[6].1 = JsValue::from(chain_id);
        props.push(("v", JsValue::from(v)));
        props.push(("r", js::s(&r)));
        props.push(("s", js::s(&s)));
        let mut recovery = v - 27.0;
        let mut raw: Vec<Rlp> = f[..6].iter().map(to_rlp).collect();
        if chain_id != 0.0 {
            let c = BigInt::from(chain_id as u64);
            let cb = if c.is_zero() {
                Vec::new()
            } else {
                c.magnitude().to_bytes_be()
            };
            raw.push(Rlp::B(cb));
            raw.push(Rlp::B(Vec::new()));
            raw.push(Rlp::B(Vec::new()));
            recovery -= chain_id * 2.0 + 8.0;
        }
        let digest = keccak(&alloy_rlp::encode(Rlp::L(raw)));
        if let Some(from) = recover(ctx, &digest, &r, &s, recovery) {
            props.push(("from", js::s(&from)));
        }
        props.push(("hash", js::s(&bytes::hex(&keccak(payload)))));
    }
    props.push(("type", JsValue::null()));
    Ok(js::plain_object(ctx, props).into())
}

/// `parse(rawTransaction)`.
pub(crate) fn parse(ctx: &mut Context, raw: &JsValue) -> JsResult<JsValue> {
    let payload = bytes::arrayify(ctx, raw)?;
    let Some(&first) = payload.first() else {
        return Err(rlp_error(ctx, "data too short"));
    };
    if first > 0x7f {
        return legacy(ctx, &payload);
    }
    match first {
        1 => typed(ctx, &payload, false),
        2 => typed(ctx, &payload, true),
        other => Err(err::make(
            ctx,
            V_TRANSACTIONS,
            &format!("unsupported transaction type: {other}"),
            UNSUPPORTED_OPERATION,
            vec![
                ("operation", P::str("parseTransaction")),
                ("transactionType", P::num(f64::from(other))),
            ],
        )),
    }
}

fn f_parse(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    parse(ctx, &js::arg(args, 0))
}

/// Adds `utils.parseTransaction`.
pub(crate) fn install(ctx: &mut Context, utils: &boa_engine::JsObject) -> JsResult<()> {
    js::method(
        ctx,
        utils,
        "parseTransaction",
        1,
        NativeFunction::from_fn_ptr(f_parse),
    )
}
