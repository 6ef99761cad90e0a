//! `@ethersproject/address`: EIP-55 checksums, ICAP, getAddress/isAddress.

use boa_engine::{Context, JsObject, JsResult, JsValue, NativeFunction};
use num_bigint::BigInt;

use super::bytes;
use super::err::{self, P, V_ADDRESS};
use super::js;
use super::strings::keccak;

/// EIP-55 checksum of 40 hex digits (any case, no prefix).
pub(crate) fn checksum_hex40(digits: &str) -> String {
    let lower = digits.to_ascii_lowercase();
    let hash = keccak(lower.as_bytes());
    let mut out = String::with_capacity(42);
    out.push_str("0x");
    for (i, c) in lower.chars().enumerate() {
        let nibble = if i % 2 == 0 {
            hash[i / 2] >> 4
        } else {
            hash[i / 2] & 0x0f
        };
        if nibble >= 8 {
            out.push(c.to_ascii_uppercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The checksummed address of 20 bytes.
pub(crate) fn checksum_bytes(b: &[u8]) -> String {
    checksum_hex40(&bytes::hex(b)[2..])
}

fn is_hex40(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|c| c.is_ascii_hexdigit())
}

fn mixed_case(s: &str) -> bool {
    // /([A-F].*[a-f])|([a-f].*[A-F])/
    let first_upper = s.bytes().position(|c| (b'A'..=b'F').contains(&c));
    let first_lower = s.bytes().position(|c| (b'a'..=b'f').contains(&c));
    let last_upper = s.bytes().rposition(|c| (b'A'..=b'F').contains(&c));
    let last_lower = s.bytes().rposition(|c| (b'a'..=b'f').contains(&c));
    matches!((first_upper, last_lower), (Some(u), Some(l)) if u < l)
        || matches!((first_lower, last_upper), (Some(l), Some(u)) if l < u)
}

fn iban_checksum(address: &str) -> String {
    let up = address.to_ascii_uppercase();
    let rearranged = format!("{}{}00", &up[4..], &up[..2]);
    let mut rem: u32 = 0;
    for c in rearranged.chars() {
        let digits = match c {
            '0'..='9' => c.to_string(),
            'A'..='Z' => (c as u32 - 'A' as u32 + 10).to_string(),
            _ => String::new(),
        };
        for d in digits.bytes() {
            rem = (rem * 10 + u32::from(d - b'0')) % 97;
        }
    }
    format!("{:02}", 98 - rem)
}

fn is_icap(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 34
        && b.len() <= 35
        && s.starts_with("XE")
        && b[2].is_ascii_digit()
        && b[3].is_ascii_digit()
        && b[4..].iter().all(u8::is_ascii_alphanumeric)
}

/// `getAddress(address)` for a JS value.
pub(crate) fn get_address(ctx: &mut Context, value: &JsValue) -> JsResult<String> {
    let invalid = |ctx: &mut Context| {
        err::arg(
            ctx,
            V_ADDRESS,
            "invalid address",
            "address",
            P::Js(value.clone()),
        )
    };
    let Some(address) = js::as_str(value) else {
        return Err(invalid(ctx));
    };
    let body = address.strip_prefix("0x").unwrap_or(&address);
    if is_hex40(body) {
        let full = format!("0x{body}");
        let result = checksum_hex40(body);
        if mixed_case(&full) && result != full {
            return Err(err::arg(
                ctx,
                V_ADDRESS,
                "bad address checksum",
                "address",
                P::str(&full),
            ));
        }
        return Ok(result);
    }
    if is_icap(&address) {
        if address[2..4] != iban_checksum(&address) {
            return Err(err::arg(
                ctx,
                V_ADDRESS,
                "bad icap checksum",
                "address",
                P::Js(value.clone()),
            ));
        }
        let v = BigInt::parse_bytes(address[4..].to_ascii_lowercase().as_bytes(), 36)
            .unwrap_or_default();
        let mut h = v.to_str_radix(16);
        while h.len() < 40 {
            h.insert(0, '0');
        }
        if h.len() != 40 {
            let full = format!("0x{h}");
            return Err(err::arg(
                ctx,
                V_ADDRESS,
                "invalid address",
                "address",
                P::str(&full),
            ));
        }
        return Ok(checksum_hex40(&h));
    }
    Err(invalid(ctx))
}

fn f_get_address(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(js::s(&get_address(ctx, &js::arg(args, 0))?))
}

fn f_is_address(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(get_address(ctx, &js::arg(args, 0)).is_ok().into())
}

fn f_get_icap_address(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let a = get_address(ctx, &js::arg(args, 0))?;
    let v = BigInt::parse_bytes(&a.as_bytes()[2..], 16).unwrap_or_default();
    let mut b36 = v.to_str_radix(36).to_ascii_uppercase();
    while b36.len() < 30 {
        b36.insert(0, '0');
    }
    let cs = iban_checksum(&format!("XE00{b36}"));
    Ok(js::s(&format!("XE{cs}{b36}")))
}

pub(crate) fn install(ctx: &mut Context, utils: &JsObject) -> JsResult<()> {
    js::method(
        ctx,
        utils,
        "getAddress",
        1,
        NativeFunction::from_fn_ptr(f_get_address),
    )?;
    js::method(
        ctx,
        utils,
        "isAddress",
        1,
        NativeFunction::from_fn_ptr(f_is_address),
    )?;
    js::method(
        ctx,
        utils,
        "getIcapAddress",
        1,
        NativeFunction::from_fn_ptr(f_get_icap_address),
    )?;
    Ok(())
}
