//! `@ethersproject/strings` (UTF-8 as ethers does it), keccak256, id and hashMessage.

use boa_engine::{Context, JsObject, JsResult, JsString, JsValue, NativeFunction};
use sha3::{Digest, Keccak256};

use super::bytes;
use super::err::{self, P, V_STRINGS};
use super::js;

pub(crate) fn keccak(data: &[u8]) -> [u8; 32] {
    Keccak256::digest(data).into()
}

/// ethers' `toUtf8Bytes` over UTF-16 code units: a lone low surrogate is encoded as a
/// 3-byte sequence; a high surrogate without its pair throws `invalid utf-8 string`.
pub(crate) fn utf8_bytes_units(units: &[u16]) -> JsResult<Vec<u8>> {
    let mut out = Vec::with_capacity(units.len());
    let mut i = 0;
    while i < units.len() {
        let c = u32::from(units[i]);
        if c < 0x80 {
            out.push(c as u8);
        } else if c < 0x800 {
            out.push(((c >> 6) | 0xc0) as u8);
            out.push(((c & 0x3f) | 0x80) as u8);
        } else if (c & 0xfc00) == 0xd800 {
            i += 1;
            let c2 = units.get(i).map(|u| u32::from(*u));
            let Some(c2) = c2.filter(|c2| (c2 & 0xfc00) == 0xdc00) else {
                return Err(err::plain("invalid utf-8 string"));
            };
            let pair = 0x10000 + ((c & 0x03ff) << 10) + (c2 & 0x03ff);
            out.push(((pair >> 18) | 0xf0) as u8);
            out.push((((pair >> 12) & 0x3f) | 0x80) as u8);
            out.push((((pair >> 6) & 0x3f) | 0x80) as u8);
            out.push(((pair & 0x3f) | 0x80) as u8);
        } else {
            out.push(((c >> 12) | 0xe0) as u8);
            out.push((((c >> 6) & 0x3f) | 0x80) as u8);
            out.push(((c & 0x3f) | 0x80) as u8);
        }
        i += 1;
    }
    Ok(out)
}

/// `toUtf8Bytes(value, form)` for a JS value.
pub(crate) fn to_utf8_bytes(
    ctx: &mut Context,
    value: &JsValue,
    form: &JsValue,
) -> JsResult<Vec<u8>> {
    let mut value = value.clone();
    if let Some(f) = js::as_str(form)
        && !f.is_empty()
    {
        value = js::call_method(ctx, &value, "normalize", &[js::s(&f)])?;
    }
    match value.as_string() {
        Some(s) => utf8_bytes_units(&s.to_vec()),
        None => {
            if js::is_nullish(&value) {
                return Err(err::type_error(
                    "Cannot read properties of undefined (reading 'length')",
                ));
            }
            let len = js::get(ctx, &value, "length")?;
            if len.as_number().is_some_and(|n| n > 0.0) {
                return Err(err::type_error("str.charCodeAt is not a function"));
            }
            Ok(Vec::new())
        }
    }
}

/// ethers' strict UTF-8 decoder: the first bad sequence throws
/// `invalid codepoint at offset N; <reason>`.
pub(crate) fn to_utf8_string(ctx: &mut Context, data: &[u8]) -> JsResult<JsString> {
    let fail = |ctx: &mut Context, reason: &str, offset: usize| {
        err::arg(
            ctx,
            V_STRINGS,
            &format!("invalid codepoint at offset {offset}; {reason}"),
            "bytes",
            P::Bytes(data.to_vec()),
        )
    };
    let mut units: Vec<u16> = Vec::with_capacity(data.len());
    let mut i = 0usize;
    while i < data.len() {
        let c = data[i];
        i += 1;
        if c >> 7 == 0 {
            units.push(u16::from(c));
            continue;
        }
        let (extra, overlong): (usize, u32) = if (c & 0xe0) == 0xc0 {
            (1, 0x7f)
        } else if (c & 0xf0) == 0xe0 {
            (2, 0x7ff)
        } else if (c & 0xf8) == 0xf0 {
            (3, 0xffff)
        } else if (c & 0xc0) == 0x80 {
            return Err(fail(ctx, "unexpected continuation byte", i - 1));
        } else {
            return Err(fail(ctx, "bad codepoint prefix", i - 1));
        };
        if i - 1 + extra >= data.len() {
            return Err(fail(ctx, "string overrun", i - 1));
        }
        let mut res = u32::from(c) & ((1u32 << (8 - extra - 1)) - 1);
        for _ in 0..extra {
            let next = data[i];
            if (next & 0xc0) != 0x80 {
                return Err(fail(ctx, "missing continuation byte", i));
            }
            res = (res << 6) | u32::from(next & 0x3f);
            i += 1;
        }
        if res > 0x10ffff {
            return Err(fail(ctx, "out of UTF-8 range", i - 1 - extra));
        }
        if (0xd800..=0xdfff).contains(&res) {
            return Err(fail(ctx, "UTF-16 surrogate", i - 1 - extra));
        }
        if res <= overlong {
            return Err(fail(ctx, "overlong representation", i - 1 - extra));
        }
        if res <= 0xffff {
            units.push(res as u16);
        } else {
            let cp = res - 0x10000;
            units.push((((cp >> 10) & 0x3ff) + 0xd800) as u16);
            units.push(((cp & 0x3ff) + 0xdc00) as u16);
        }
    }
    Ok(JsString::from(units.as_slice()))
}

/// `hashMessage(message)`: EIP-191 personal message hash.
pub(crate) fn hash_message(ctx: &mut Context, message: &JsValue) -> JsResult<[u8; 32]> {
    let (len_str, body) = if let Some(s) = message.as_string() {
        let b = utf8_bytes_units(&s.to_vec())?;
        (b.len().to_string(), b)
    } else {
        let len = js::get(ctx, message, "length")?;
        let len_str = len.to_string(ctx)?.to_std_string_lossy();
        let b = bytes::arrayify(ctx, message)?;
        (len_str, b)
    };
    let mut data = b"\x19Ethereum Signed Message:\n".to_vec();
    data.extend_from_slice(len_str.as_bytes());
    data.extend_from_slice(&body);
    Ok(keccak(&data))
}

fn f_to_utf8_bytes(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let b = to_utf8_bytes(ctx, &js::arg(args, 0), &js::arg(args, 1))?;
    js::u8array(ctx, &b)
}

fn f_to_utf8_string(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let b = bytes::arrayify(ctx, &js::arg(args, 0))?;
    Ok(to_utf8_string(ctx, &b)?.into())
}

fn f_keccak256(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let b = bytes::arrayify(ctx, &js::arg(args, 0))?;
    Ok(js::s(&bytes::hex(&keccak(&b))))
}

fn f_id(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let b = to_utf8_bytes(ctx, &js::arg(args, 0), &JsValue::undefined())?;
    Ok(js::s(&bytes::hex(&keccak(&b))))
}

fn f_hash_message(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let h = hash_message(ctx, &js::arg(args, 0))?;
    Ok(js::s(&bytes::hex(&h)))
}

pub(crate) fn install(ctx: &mut Context, utils: &JsObject) -> JsResult<()> {
    type F = fn(&JsValue, &[JsValue], &mut Context) -> JsResult<JsValue>;
    let fns: [(&str, usize, F); 5] = [
        ("toUtf8Bytes", 2, f_to_utf8_bytes),
        ("toUtf8String", 2, f_to_utf8_string),
        ("keccak256", 1, f_keccak256),
        ("id", 1, f_id),
        ("hashMessage", 1, f_hash_message),
    ];
    for (name, len, f) in fns {
        js::method(ctx, utils, name, len, NativeFunction::from_fn_ptr(f))?;
    }
    Ok(())
}
