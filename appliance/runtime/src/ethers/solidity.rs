//! `@ethersproject/solidity`: non-standard packed encoding (solidityPack/solidityKeccak256).

use boa_engine::{Context, JsObject, JsResult, JsValue, NativeFunction};

use super::bignumber;
use super::bytes;
use super::err::{self, P, V_SOLIDITY};
use super::js;
use super::strings;

const ZEROS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

fn digits_ok(d: &str) -> bool {
    !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit())
}

/// `parseInt(d)` then `String(size) === d`: canonical decimal without leading zeros.
fn canonical_size(d: &str) -> Option<u64> {
    let n: u64 = d.parse().ok()?;
    (n.to_string() == d).then_some(n)
}

fn pack_one(ctx: &mut Context, ty: &str, value: &JsValue, is_array: bool) -> JsResult<Vec<u8>> {
    match ty {
        "address" => {
            return if is_array {
                bytes::zero_pad(ctx, value, 32)
            } else {
                bytes::arrayify(ctx, value)
            };
        }
        "string" => return strings::to_utf8_bytes(ctx, value, &JsValue::undefined()),
        "bytes" => return bytes::arrayify(ctx, value),
        "bool" => {
            let v = js::s(if value.to_boolean() { "0x01" } else { "0x00" });
            return if is_array {
                bytes::zero_pad(ctx, &v, 32)
            } else {
                bytes::arrayify(ctx, &v)
            };
        }
        _ => {}
    }
    let num = ty.strip_prefix("uint").or_else(|| ty.strip_prefix("int"));
    if let Some(d) = num
        && (d.is_empty() || digits_ok(d))
    {
        let size = if d.is_empty() {
            Some(256)
        } else {
            canonical_size(d)
        };
        let size = match size {
            Some(s) if s % 8 == 0 && s != 0 && s <= 256 => s,
            _ => {
                return Err(err::arg(
                    ctx,
                    V_SOLIDITY,
                    "invalid number type",
                    "type",
                    P::str(ty),
                ));
            }
        };
        let size = if is_array { 256 } else { size };
        let v = bignumber::to_big(ctx, value)?;
        let v = bignumber::to_twos(&v, size);
        let bn = bignumber::make(ctx, &v)?;
        return bytes::zero_pad(ctx, &bn, (size / 8) as usize);
    }
    if let Some(d) = ty.strip_prefix("bytes")
        && digits_ok(d)
    {
        let size = match canonical_size(d) {
            Some(s) if s != 0 && s <= 32 => s as usize,
            _ => {
                return Err(err::arg(
                    ctx,
                    V_SOLIDITY,
                    "invalid bytes type",
                    "type",
                    P::str(ty),
                ));
            }
        };
        let b = bytes::arrayify(ctx, value)?;
        if b.len() != size {
            return Err(err::arg(
                ctx,
                V_SOLIDITY,
                &format!("invalid value for {ty}"),
                "value",
                P::Js(value.clone()),
            ));
        }
        if is_array {
            let s = value.to_string(ctx)?.to_std_string_lossy();
            let padded: String = format!("{s}{ZEROS}").chars().take(66).collect();
            return bytes::arrayify(ctx, &js::s(&padded));
        }
        return Ok(b);
    }
    if ty.ends_with(']')
        && let Some(open) = ty.rfind('[')
        && js::is_array(value)
    {
        let count_str = &ty[open + 1..ty.len() - 1];
        if count_str.is_empty() || count_str.bytes().all(|c| c.is_ascii_digit()) {
            let base = &ty[..open];
            let items = js::array_items(ctx, value)?;
            let count = if count_str.is_empty() {
                items.len()
            } else {
                count_str.parse::<usize>().unwrap_or(usize::MAX)
            };
            if count != items.len() {
                return Err(err::arg(
                    ctx,
                    V_SOLIDITY,
                    &format!("invalid array length for {ty}"),
                    "value",
                    P::Js(value.clone()),
                ));
            }
            let mut out = Vec::new();
            for item in items {
                out.extend(pack_one(ctx, base, &item, true)?);
            }
            return Ok(out);
        }
    }
    Err(err::arg(
        ctx,
        V_SOLIDITY,
        "invalid type",
        "type",
        P::str(ty),
    ))
}

/// `pack(types, values)` → bytes.
pub(crate) fn pack(ctx: &mut Context, types: &JsValue, values: &JsValue) -> JsResult<Vec<u8>> {
    let tys = js::array_items(ctx, types)?;
    let vals = js::array_items(ctx, values)?;
    let tlen = js::get(ctx, types, "length")?;
    let vlen = js::get(ctx, values, "length")?;
    if tlen.to_number(ctx)? != vlen.to_number(ctx)? {
        return Err(err::arg(
            ctx,
            V_SOLIDITY,
            "wrong number of values; expected ${ types.length }",
            "values",
            P::Js(values.clone()),
        ));
    }
    let mut out = Vec::new();
    for (t, v) in tys.iter().zip(vals.iter()) {
        let Some(t) = js::as_str(t) else {
            return Err(err::type_error("type.match is not a function"));
        };
        out.extend(pack_one(ctx, &t, v, false)?);
    }
    Ok(out)
}

fn f_pack(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let b = pack(ctx, &js::arg(args, 0), &js::arg(args, 1))?;
    Ok(js::s(&bytes::hex(&b)))
}

fn f_keccak(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let b = pack(ctx, &js::arg(args, 0), &js::arg(args, 1))?;
    Ok(js::s(&bytes::hex(&strings::keccak(&b))))
}

pub(crate) fn install(ctx: &mut Context, utils: &JsObject) -> JsResult<()> {
    js::method(
        ctx,
        utils,
        "solidityPack",
        2,
        NativeFunction::from_fn_ptr(f_pack),
    )?;
    js::method(
        ctx,
        utils,
        "solidityKeccak256",
        2,
        NativeFunction::from_fn_ptr(f_keccak),
    )?;
    Ok(())
}
