//! `@ethersproject/bytes`: arrayify, hexlify and friends, split/join signatures.

use boa_engine::object::builtins::JsUint8Array;
use boa_engine::{Context, JsObject, JsResult, JsValue, NativeFunction};

use super::err::{self, P, V_BYTES};
use super::js;

#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Pad {
    #[default]
    None,
    Left,
    Right,
}

#[derive(Clone, Copy, Default)]
pub(crate) struct Opts {
    pub allow_missing_prefix: bool,
    pub hex_pad: Pad,
}

impl Opts {
    pub(crate) const NONE: Opts = Opts {
        allow_missing_prefix: false,
        hex_pad: Pad::None,
    };
    pub(crate) const LEFT: Opts = Opts {
        allow_missing_prefix: false,
        hex_pad: Pad::Left,
    };

    fn from_js(ctx: &mut Context, v: &JsValue) -> JsResult<Opts> {
        if !v.to_boolean() {
            return Ok(Opts::NONE);
        }
        let amp = js::get(ctx, v, "allowMissingPrefix")?.to_boolean();
        let pad = js::get(ctx, v, "hexPad")?;
        let hex_pad = match js::as_str(&pad).as_deref() {
            Some("left") => Pad::Left,
            Some("right") => Pad::Right,
            _ => Pad::None,
        };
        Ok(Opts {
            allow_missing_prefix: amp,
            hex_pad,
        })
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// `0x` + lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(2 + bytes.len() * 2);
    out.push_str("0x");
    for b in bytes {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
    out
}

/// `/^0x[0-9A-Fa-f]*$/`.
pub(crate) fn is_hex_str(s: &str) -> bool {
    s.len() >= 2 && s.starts_with("0x") && s.as_bytes()[2..].iter().all(u8::is_ascii_hexdigit)
}

/// `isHexString(value, length)`.
pub(crate) fn is_hex_string(value: &JsValue, length: Option<usize>) -> bool {
    match js::as_str(value) {
        Some(s) => is_hex_str(&s) && length.is_none_or(|l| s.len() == 2 + 2 * l),
        None => false,
    }
}

/// Decodes an even-length hex string without prefix (already validated).
pub(crate) fn decode_hex_digits(digits: &str) -> Vec<u8> {
    let b = digits.as_bytes();
    let val = |c: u8| -> u8 {
        match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => 0,
        }
    };
    b.chunks(2)
        .map(|p| (val(p[0]) << 4) | val(*p.get(1).unwrap_or(&b'0')))
        .collect()
}

fn is_integer(v: &JsValue) -> Option<f64> {
    let n = v.as_number()?;
    if n.is_finite() && n % 1.0 == 0.0 {
        Some(n)
    } else {
        None
    }
}

/// `isBytes(value)`, returning the bytes when it is.
pub(crate) fn bytes_of(ctx: &mut Context, value: &JsValue) -> JsResult<Option<Vec<u8>>> {
    let Some(obj) = value.as_object() else {
        return Ok(None);
    };
    if let Ok(u8a) = JsUint8Array::from_object(obj.clone()) {
        return Ok(Some(u8a.to_vec(ctx)?));
    }
    let len = obj.get(js::jstr("length"), ctx)?;
    let Some(len) = is_integer(&len) else {
        return Ok(None);
    };
    if len < 0.0 {
        return Ok(None);
    }
    let mut out = Vec::with_capacity((len as usize).min(1 << 16));
    let mut i = 0u64;
    while (i as f64) < len {
        let v = obj.get(i, ctx)?;
        match is_integer(&v) {
            Some(n) if (0.0..256.0).contains(&n) => out.push(n as u8),
            _ => return Ok(None),
        }
        i += 1;
    }
    Ok(Some(out))
}

pub(crate) fn is_bytes(ctx: &mut Context, value: &JsValue) -> JsResult<bool> {
    Ok(bytes_of(ctx, value)?.is_some())
}

/// `isBytesLike(value)`.
pub(crate) fn is_bytes_like(ctx: &mut Context, value: &JsValue) -> JsResult<bool> {
    if let Some(s) = js::as_str(value) {
        return Ok(is_hex_str(&s) && s.len() % 2 == 0);
    }
    is_bytes(ctx, value)
}

/// `isHexable(value)`: has a truthy `toHexString` (`null`/`undefined` throw a TypeError
/// there in ethers, as reading a property of them does).
pub(crate) fn hexable(ctx: &mut Context, value: &JsValue) -> JsResult<bool> {
    if js::is_nullish(value) {
        return Err(err::type_error(
            "Cannot read properties of null (reading 'toHexString')",
        ));
    }
    if value.as_object().is_none() {
        return Ok(false);
    }
    Ok(js::get(ctx, value, "toHexString")?.to_boolean())
}

pub(crate) fn arrayify(ctx: &mut Context, value: &JsValue) -> JsResult<Vec<u8>> {
    arrayify_opts(ctx, value, Opts::NONE)
}

pub(crate) fn arrayify_opts(ctx: &mut Context, value: &JsValue, opts: Opts) -> JsResult<Vec<u8>> {
    if let Some(n) = value.as_number() {
        err::check_safe_uint53(ctx, V_BYTES, n, "invalid arrayify value")?;
        let mut n = if n.is_nan() { 0u64 } else { n as u64 };
        let mut out = Vec::new();
        while n != 0 {
            out.push((n & 0xff) as u8);
            n /= 256;
        }
        if out.is_empty() {
            out.push(0);
        }
        out.reverse();
        return Ok(out);
    }
    let mut value = value.clone();
    if opts.allow_missing_prefix
        && let Some(s) = js::as_str(&value)
        && !s.starts_with("0x")
    {
        value = js::s(&format!("0x{s}"));
    }
    if hexable(ctx, &value)? {
        value = js::call_method(ctx, &value, "toHexString", &[])?;
    }
    if let Some(s) = js::as_str(&value)
        && is_hex_str(&s)
    {
        let mut digits = s[2..].to_owned();
        if digits.len() % 2 == 1 {
            match opts.hex_pad {
                Pad::Left => digits.insert(0, '0'),
                Pad::Right => digits.push('0'),
                Pad::None => {
                    return Err(err::arg(
                        ctx,
                        V_BYTES,
                        "hex data is odd-length",
                        "value",
                        P::Js(value),
                    ));
                }
            }
        }
        return Ok(decode_hex_digits(&digits));
    }
    if let Some(b) = bytes_of(ctx, &value)? {
        return Ok(b);
    }
    Err(err::arg(
        ctx,
        V_BYTES,
        "invalid arrayify value",
        "value",
        P::Js(value),
    ))
}

pub(crate) fn hexlify(ctx: &mut Context, value: &JsValue) -> JsResult<String> {
    hexlify_opts(ctx, value, Opts::NONE)
}

pub(crate) fn hexlify_opts(ctx: &mut Context, value: &JsValue, opts: Opts) -> JsResult<String> {
    if let Some(n) = value.as_number() {
        err::check_safe_uint53(ctx, V_BYTES, n, "invalid hexlify value")?;
        let n = if n.is_nan() { 0u64 } else { n as u64 };
        if n == 0 {
            return Ok("0x00".to_owned());
        }
        let mut h = format!("{n:x}");
        if h.len() % 2 == 1 {
            h.insert(0, '0');
        }
        return Ok(format!("0x{h}"));
    }
    if let Some(b) = value.as_bigint() {
        let h = b.to_string_radix(16);
        return Ok(if h.len() % 2 == 1 {
            format!("0x0{h}")
        } else {
            format!("0x{h}")
        });
    }
    let mut value = value.clone();
    if opts.allow_missing_prefix
        && let Some(s) = js::as_str(&value)
        && !s.starts_with("0x")
    {
        value = js::s(&format!("0x{s}"));
    }
    if hexable(ctx, &value)? {
        let h = js::call_method(ctx, &value, "toHexString", &[])?;
        return Ok(h.to_string(ctx)?.to_std_string_lossy());
    }
    if let Some(s) = js::as_str(&value)
        && is_hex_str(&s)
    {
        let mut s = s;
        if s.len() % 2 == 1 {
            match opts.hex_pad {
                Pad::Left => s.insert(2, '0'),
                Pad::Right => s.push('0'),
                Pad::None => {
                    return Err(err::arg(
                        ctx,
                        V_BYTES,
                        "hex data is odd-length",
                        "value",
                        P::Js(value),
                    ));
                }
            }
        }
        return Ok(s.to_ascii_lowercase());
    }
    if let Some(b) = bytes_of(ctx, &value)? {
        return Ok(hex(&b));
    }
    Err(err::arg(
        ctx,
        V_BYTES,
        "invalid hexlify value",
        "value",
        P::Js(value),
    ))
}

/// `hexZeroPad(value, length)`.
pub(crate) fn hex_zero_pad(ctx: &mut Context, value: &JsValue, length: usize) -> JsResult<String> {
    let mut s = match js::as_str(value) {
        Some(s) => {
            if !is_hex_str(&s) {
                return Err(err::arg(
                    ctx,
                    V_BYTES,
                    "invalid hex string",
                    "value",
                    P::Js(value.clone()),
                ));
            }
            s
        }
        None => hexlify(ctx, value)?,
    };
    if s.len() > 2 * length + 2 {
        return Err(err::arg(
            ctx,
            V_BYTES,
            "value out of range",
            "value",
            P::num(length as f64),
        ));
    }
    while s.len() < 2 * length + 2 {
        s.insert(2, '0');
    }
    Ok(s)
}

/// `zeroPad(value, length)`.
pub(crate) fn zero_pad(ctx: &mut Context, value: &JsValue, length: usize) -> JsResult<Vec<u8>> {
    let b = arrayify(ctx, value)?;
    zero_pad_bytes(ctx, b, length, value)
}

pub(crate) fn zero_pad_bytes(
    ctx: &mut Context,
    b: Vec<u8>,
    length: usize,
    original: &JsValue,
) -> JsResult<Vec<u8>> {
    if b.len() > length {
        return Err(err::arg(
            ctx,
            V_BYTES,
            "value out of range",
            "value",
            P::Js(original.clone()),
        ));
    }
    let mut out = vec![0u8; length - b.len()];
    out.extend_from_slice(&b);
    Ok(out)
}

pub(crate) fn strip_zeros(b: &[u8]) -> Vec<u8> {
    let start = b.iter().position(|x| *x != 0).unwrap_or(b.len());
    b[start..].to_vec()
}

/// `hexDataLength(data)`: `None` for a string that is not even-length hex.
pub(crate) fn hex_data_length(ctx: &mut Context, data: &JsValue) -> JsResult<Option<usize>> {
    match js::as_str(data) {
        Some(s) => {
            if !is_hex_str(&s) || s.len() % 2 == 1 {
                Ok(None)
            } else {
                Ok(Some((s.len() - 2) / 2))
            }
        }
        None => Ok(Some((hexlify(ctx, data)?.len() - 2) / 2)),
    }
}

// ---- signatures ----

/// The result of `splitSignature`.
pub(crate) struct Sig {
    pub r: String,
    pub s: String,
    pub vs: String,
    pub recovery_param: JsValue,
    pub v: JsValue,
}

impl Sig {
    /// The recovery parameter as 0/1 (JS truthiness, like ethers' uses of it).
    pub(crate) fn recid(&self) -> u8 {
        u8::from(self.recovery_param.to_boolean())
    }

    pub(crate) fn to_js(&self, ctx: &mut Context) -> JsValue {
        let compact = format!("{}{}", self.r, &self.vs[2.min(self.vs.len())..]);
        js::plain_object(
            ctx,
            vec![
                ("r", js::s(&self.r)),
                ("s", js::s(&self.s)),
                ("_vs", js::s(&self.vs)),
                ("recoveryParam", self.recovery_param.clone()),
                ("v", self.v.clone()),
                ("yParityAndS", js::s(&self.vs)),
                ("compact", js::s(&compact)),
            ],
        )
        .into()
    }

    /// A signature from raw r, s (32 bytes each) and the recovery id (as `signDigest` makes).
    pub(crate) fn from_parts(r: &[u8], s: &[u8], recid: u8) -> Sig {
        let mut vs = s.to_vec();
        if recid == 1 {
            vs[0] |= 0x80;
        }
        Sig {
            r: hex(r),
            s: hex(s),
            vs: hex(&vs),
            recovery_param: JsValue::from(i32::from(recid)),
            v: JsValue::from(27 + i32::from(recid)),
        }
    }
}

fn strict_num(v: &JsValue) -> Option<f64> {
    v.as_number()
}

/// `1 - (v % 2)` or `v` for 0/1, as ethers computes a recovery id from `v`.
fn recid_from_v(ctx: &mut Context, v: &JsValue) -> JsResult<f64> {
    if let Some(n) = strict_num(v)
        && (n == 0.0 || n == 1.0)
    {
        return Ok(n);
    }
    let n = v.to_number(ctx)?;
    Ok(1.0 - (n % 2.0))
}

fn same_number(a: &JsValue, b: f64) -> bool {
    strict_num(a) == Some(b)
}

pub(crate) fn split_signature(ctx: &mut Context, signature: &JsValue) -> JsResult<Sig> {
    let bad = |ctx: &mut Context, msg: &str| {
        err::arg(ctx, V_BYTES, msg, "signature", P::Js(signature.clone()))
    };
    if is_bytes_like(ctx, signature)? {
        let mut bytes = arrayify(ctx, signature)?;
        let (r, s, mut v);
        if bytes.len() == 64 {
            v = 27 + u32::from(bytes[32] >> 7);
            bytes[32] &= 0x7f;
            r = hex(&bytes[..32]);
            s = hex(&bytes[32..64]);
        } else if bytes.len() == 65 {
            r = hex(&bytes[..32]);
            s = hex(&bytes[32..64]);
            v = u32::from(bytes[64]);
        } else {
            return Err(bad(ctx, "invalid signature string"));
        }
        if v < 27 {
            if v == 0 || v == 1 {
                v += 27;
            } else {
                return Err(bad(ctx, "signature invalid v byte"));
            }
        }
        let recid = 1 - (v % 2);
        if recid == 1 {
            bytes[32] |= 0x80;
        }
        let vs = hex(&bytes[32..64]);
        return Ok(Sig {
            r,
            s,
            vs,
            recovery_param: JsValue::from(recid),
            v: JsValue::from(v),
        });
    }
    let r_in = js::get(ctx, signature, "r")?;
    let s_in = js::get(ctx, signature, "s")?;
    let mut v = js::get(ctx, signature, "v")?;
    let mut rp = js::get(ctx, signature, "recoveryParam")?;
    let mut vs_in = js::get(ctx, signature, "_vs")?;
    let mut s_val = s_in.clone();
    if !js::is_nullish(&vs_in) {
        let raw = arrayify(ctx, &vs_in)?;
        let raw_js = js::u8array(ctx, &raw)?;
        let mut vsb = zero_pad_bytes(ctx, raw, 32, &raw_js)?;
        vs_in = js::s(&hex(&vsb));
        let recid = if vsb[0] >= 128 { 1.0 } else { 0.0 };
        if js::is_nullish(&rp) {
            rp = JsValue::from(recid);
        } else if !same_number(&rp, recid) {
            return Err(bad(ctx, "signature recoveryParam mismatch _vs"));
        }
        vsb[0] &= 0x7f;
        let s2 = hex(&vsb);
        if js::is_nullish(&s_val) {
            s_val = js::s(&s2);
        } else if js::as_str(&s_val).as_deref() != Some(s2.as_str()) {
            return Err(bad(ctx, "signature v mismatch _vs"));
        }
    }
    if js::is_nullish(&rp) {
        if js::is_nullish(&v) {
            return Err(bad(ctx, "signature missing v and recoveryParam"));
        }
        rp = JsValue::from(recid_from_v(ctx, &v)?);
    } else if js::is_nullish(&v) {
        let n = rp.to_number(ctx)?;
        v = JsValue::from(27.0 + n);
    } else {
        let rec = recid_from_v(ctx, &v)?;
        if !same_number(&rp, rec) {
            return Err(bad(ctx, "signature recoveryParam mismatch v"));
        }
    }
    let r = if is_hex_string(&r_in, None) {
        hex_zero_pad(ctx, &r_in, 32)?
    } else {
        return Err(bad(ctx, "signature missing or invalid r"));
    };
    let s = if is_hex_string(&s_val, None) {
        hex_zero_pad(ctx, &s_val, 32)?
    } else {
        return Err(bad(ctx, "signature missing or invalid s"));
    };
    let mut sb = arrayify(ctx, &js::s(&s))?;
    if sb[0] >= 128 {
        return Err(bad(ctx, "signature s out of range"));
    }
    if rp.to_boolean() {
        sb[0] |= 0x80;
    }
    let computed_vs = hex(&sb);
    let vs = if vs_in.to_boolean() {
        if !is_hex_string(&vs_in, None) {
            return Err(bad(ctx, "signature invalid _vs"));
        }
        let padded = hex_zero_pad(ctx, &vs_in, 32)?;
        if padded != computed_vs {
            return Err(bad(ctx, "signature _vs mismatch v and s"));
        }
        padded
    } else if js::is_nullish(&vs_in) {
        computed_vs
    } else if js::as_str(&vs_in).as_deref() != Some(computed_vs.as_str()) {
        return Err(bad(ctx, "signature _vs mismatch v and s"));
    } else {
        computed_vs
    };
    Ok(Sig {
        r,
        s,
        vs,
        recovery_param: rp,
        v,
    })
}

pub(crate) fn join_signature(ctx: &mut Context, signature: &JsValue) -> JsResult<String> {
    let sig = split_signature(ctx, signature)?;
    let mut out = arrayify(ctx, &js::s(&sig.r))?;
    out.extend(arrayify(ctx, &js::s(&sig.s))?);
    out.push(if sig.recovery_param.to_boolean() {
        0x1c
    } else {
        0x1b
    });
    Ok(hex(&out))
}

// ---- JS bindings ----

fn f_arrayify(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let opts = Opts::from_js(ctx, &js::arg(args, 1))?;
    let b = arrayify_opts(ctx, &js::arg(args, 0), opts)?;
    js::u8array(ctx, &b)
}

fn f_hexlify(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let opts = Opts::from_js(ctx, &js::arg(args, 1))?;
    Ok(js::s(&hexlify_opts(ctx, &js::arg(args, 0), opts)?))
}

fn f_is_bytes(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let v = js::arg(args, 0);
    if js::is_nullish(&v) {
        return Ok(false.into());
    }
    Ok(is_bytes(ctx, &v)?.into())
}

fn f_is_bytes_like(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(is_bytes_like(ctx, &js::arg(args, 0))?.into())
}

fn f_is_hex_string(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let len = js::arg(args, 1);
    let len = if len.to_boolean() {
        Some(len.to_number(ctx)? as usize)
    } else {
        None
    };
    Ok(is_hex_string(&js::arg(args, 0), len).into())
}

fn items(ctx: &mut Context, v: &JsValue) -> JsResult<Vec<JsValue>> {
    if v.as_object().is_none() {
        return Err(err::type_error("items.map is not a function"));
    }
    js::array_items(ctx, v)
}

fn f_concat(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let mut out = Vec::new();
    for item in items(ctx, &js::arg(args, 0))? {
        out.extend(arrayify(ctx, &item)?);
    }
    js::u8array(ctx, &out)
}

fn f_hex_concat(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let mut out = String::from("0x");
    for item in items(ctx, &js::arg(args, 0))? {
        out.push_str(&hexlify(ctx, &item)?[2..]);
    }
    Ok(js::s(&out))
}

fn f_strip_zeros(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let b = arrayify(ctx, &js::arg(args, 0))?;
    js::u8array(ctx, &strip_zeros(&b))
}

fn length_arg(ctx: &mut Context, v: &JsValue) -> JsResult<usize> {
    let n = v.to_number(ctx)?;
    Ok(if n.is_finite() && n > 0.0 {
        n as usize
    } else {
        0
    })
}

fn f_zero_pad(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let len = length_arg(ctx, &js::arg(args, 1))?;
    let b = zero_pad(ctx, &js::arg(args, 0), len)?;
    js::u8array(ctx, &b)
}

fn f_hex_zero_pad(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let len = length_arg(ctx, &js::arg(args, 1))?;
    Ok(js::s(&hex_zero_pad(ctx, &js::arg(args, 0), len)?))
}

fn f_hex_data_length(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(match hex_data_length(ctx, &js::arg(args, 0))? {
        Some(n) => JsValue::from(n as f64),
        None => JsValue::null(),
    })
}

fn f_hex_data_slice(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let data = js::arg(args, 0);
    let s = match js::as_str(&data) {
        Some(s) => {
            if !is_hex_str(&s) || s.len() % 2 == 1 {
                return Err(err::arg(
                    ctx,
                    V_BYTES,
                    "invalid hexData",
                    "value",
                    P::Js(data),
                ));
            }
            s
        }
        None => hexlify(ctx, &data)?,
    };
    let off = 2 + 2 * length_arg(ctx, &js::arg(args, 1))?;
    let end = js::arg(args, 2);
    let body = if js::is_nullish(&end) {
        s.get(off..).unwrap_or("")
    } else {
        let e = 2 + 2 * length_arg(ctx, &end)?;
        let e = e.min(s.len());
        if off >= e { "" } else { &s[off..e] }
    };
    Ok(js::s(&format!("0x{body}")))
}

pub(crate) fn hex_strip_zeros(ctx: &mut Context, value: &JsValue) -> JsResult<String> {
    let s = match js::as_str(value) {
        Some(s) => s,
        None => hexlify(ctx, value)?,
    };
    if !is_hex_str(&s) {
        return Err(err::arg(
            ctx,
            V_BYTES,
            "invalid hex string",
            "value",
            P::str(&s),
        ));
    }
    let body = s[2..].trim_start_matches('0');
    Ok(format!("0x{body}"))
}

fn f_hex_strip_zeros(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(js::s(&hex_strip_zeros(ctx, &js::arg(args, 0))?))
}

fn f_hex_value(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let h = hexlify_opts(ctx, &js::arg(args, 0), Opts::LEFT)?;
    let t = hex_strip_zeros(ctx, &js::s(&h))?;
    Ok(js::s(if t == "0x" { "0x0" } else { &t }))
}

fn f_split_signature(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(split_signature(ctx, &js::arg(args, 0))?.to_js(ctx))
}

fn f_join_signature(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(js::s(&join_signature(ctx, &js::arg(args, 0))?))
}

pub(crate) fn install(ctx: &mut Context, utils: &JsObject) -> JsResult<()> {
    type F = fn(&JsValue, &[JsValue], &mut Context) -> JsResult<JsValue>;
    let fns: [(&str, usize, F); 16] = [
        ("arrayify", 2, f_arrayify),
        ("hexlify", 2, f_hexlify),
        ("isBytes", 1, f_is_bytes),
        ("isBytesLike", 1, f_is_bytes_like),
        ("isHexString", 2, f_is_hex_string),
        ("concat", 1, f_concat),
        ("hexConcat", 1, f_hex_concat),
        ("stripZeros", 1, f_strip_zeros),
        ("zeroPad", 2, f_zero_pad),
        ("hexZeroPad", 2, f_hex_zero_pad),
        ("hexDataLength", 1, f_hex_data_length),
        ("hexDataSlice", 3, f_hex_data_slice),
        ("hexStripZeros", 1, f_hex_strip_zeros),
        ("hexValue", 1, f_hex_value),
        ("splitSignature", 1, f_split_signature),
        ("joinSignature", 1, f_join_signature),
    ];
    for (name, len, f) in fns {
        js::method(ctx, utils, name, len, NativeFunction::from_fn_ptr(f))?;
    }
    Ok(())
}
