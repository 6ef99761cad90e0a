//! `ethers.BigNumber`: arbitrary-precision integers stored as ethers does, as a frozen
//! object with own `_hex` and `_isBigNumber` and the methods on `BigNumber.prototype`.

use boa_engine::object::JsObject;
use boa_engine::property::PropertyDescriptor;
use boa_engine::{Context, JsBigInt, JsResult, JsValue, NativeFunction, js_string};
use num_bigint::{BigInt, Sign};
use num_integer::Integer;
use num_traits::{One, Signed, ToPrimitive, Zero};

use super::bytes;
use super::err::{self, NUMERIC_FAULT, P, UNEXPECTED_ARGUMENT, UNSUPPORTED_OPERATION, V_BIGNUMBER};
use super::js;

const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

/// ethers' `toHex(value)` for a string: keeps the digits' case, even length, no leading
/// zero bytes, `-` for negatives, `0x00` for zero.
pub(crate) fn norm_hex(value: &str) -> String {
    if let Some(rest) = value.strip_prefix('-') {
        let v = norm_hex(rest);
        if v == "0x00" {
            return v;
        }
        return format!("-{v}");
    }
    let mut v = if value.starts_with("0x") {
        value.to_owned()
    } else {
        format!("0x{value}")
    };
    if v == "0x" {
        return "0x00".to_owned();
    }
    if v.len() % 2 == 1 {
        v.insert(2, '0');
    }
    while v.len() > 4 && v.starts_with("0x00") {
        v.replace_range(2..4, "");
    }
    v
}

/// ethers' `toHex(BN)`.
pub(crate) fn to_hex(v: &BigInt) -> String {
    let mag = v.magnitude().to_str_radix(16);
    let h = norm_hex(&mag);
    if v.sign() == Sign::Minus && h != "0x00" {
        format!("-{h}")
    } else {
        h
    }
}

/// Parses a normalised `_hex` (`0x…` or `-0x…`).
pub(crate) fn parse_hex(h: &str) -> BigInt {
    let (neg, body) = match h.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, h),
    };
    let digits = body.strip_prefix("0x").unwrap_or(body);
    let mag = BigInt::parse_bytes(digits.as_bytes(), 16).unwrap_or_default();
    if neg { -mag } else { mag }
}

fn is_hex_number_string(s: &str) -> bool {
    let body = s.strip_prefix('-').unwrap_or(s);
    body.len() > 2
        && body.starts_with("0x")
        && body.as_bytes()[2..].iter().all(u8::is_ascii_hexdigit)
}

fn is_decimal_string(s: &str) -> bool {
    let body = s.strip_prefix('-').unwrap_or(s);
    !body.is_empty() && body.bytes().all(|c| c.is_ascii_digit())
}

/// `throwFault(fault, operation, value)` of the bignumber module.
pub(crate) fn fault(
    ctx: &mut Context,
    fault: &str,
    operation: &str,
    value: Option<P>,
) -> boa_engine::JsError {
    let mut params = vec![("fault", P::str(fault)), ("operation", P::str(operation))];
    if let Some(v) = value {
        params.push(("value", v));
    }
    err::make(ctx, V_BIGNUMBER, fault, NUMERIC_FAULT, params)
}

fn is_bn_instance(ctx: &mut Context, value: &JsValue) -> JsResult<Option<JsObject>> {
    let Some(obj) = value.as_object() else {
        return Ok(None);
    };
    let proto = js::realm(ctx)?.bn_proto.clone();
    let mut p = obj.prototype();
    while let Some(o) = p {
        if JsObject::equals(&o, &proto) {
            return Ok(Some(obj));
        }
        p = o.prototype();
    }
    Ok(None)
}

fn from_string(ctx: &mut Context, s: &str, original: &JsValue) -> JsResult<String> {
    if is_hex_number_string(s) {
        return Ok(norm_hex(s));
    }
    if is_decimal_string(s) {
        let v = BigInt::parse_bytes(s.as_bytes(), 10).unwrap_or_default();
        return Ok(to_hex(&v));
    }
    Err(err::arg(
        ctx,
        V_BIGNUMBER,
        "invalid BigNumber string",
        "value",
        P::Js(original.clone()),
    ))
}

/// `BigNumber.from(value)`, as the normalised `_hex`.
pub(crate) fn from_value_hex(ctx: &mut Context, value: &JsValue) -> JsResult<String> {
    if let Some(obj) = is_bn_instance(ctx, value)? {
        let h = obj.get(js_string!("_hex"), ctx)?;
        return Ok(h.to_string(ctx)?.to_std_string_lossy());
    }
    if let Some(s) = js::as_str(value) {
        return from_string(ctx, &s, value);
    }
    if let Some(n) = value.as_number() {
        let frac = n % 1.0;
        if frac != 0.0 && !frac.is_nan() {
            return Err(fault(ctx, "underflow", "BigNumber.from", Some(P::num(n))));
        }
        if n >= MAX_SAFE || n <= -MAX_SAFE {
            return Err(fault(ctx, "overflow", "BigNumber.from", Some(P::num(n))));
        }
        if n.is_nan() {
            return from_string(ctx, "NaN", &js::s("NaN"));
        }
        let s = format!("{}", n as i64);
        return from_string(ctx, &s, &js::s(&s));
    }
    if let Some(b) = value.as_bigint() {
        let s = b.to_string_radix(10);
        return from_string(ctx, &s, &js::s(&s));
    }
    if let Some(b) = bytes::bytes_of(ctx, value)? {
        let h = bytes::hex(&b);
        return from_string(ctx, &h, &js::s(&h));
    }
    if value.to_boolean() {
        let to_hex_string = js::get(ctx, value, "toHexString")?;
        if to_hex_string.to_boolean() {
            let h = js::call_method(ctx, value, "toHexString", &[])?;
            if let Some(s) = js::as_str(&h) {
                return from_string(ctx, &s, &h);
            }
        } else {
            let mut h = js::get(ctx, value, "_hex")?;
            if js::is_nullish(&h)
                && js::as_str(&js::get(ctx, value, "type")?).as_deref() == Some("BigNumber")
            {
                h = js::get(ctx, value, "hex")?;
            }
            if let Some(s) = js::as_str(&h) {
                let body = s.strip_prefix('-').unwrap_or(&s);
                if bytes::is_hex_str(&s) || (s.starts_with('-') && bytes::is_hex_str(body)) {
                    return from_string(ctx, &s, &h);
                }
            }
        }
    }
    Err(err::arg(
        ctx,
        V_BIGNUMBER,
        "invalid BigNumber value",
        "value",
        P::Js(value.clone()),
    ))
}

/// `toBN(value)`: the integer value of a BigNumberish.
pub(crate) fn to_big(ctx: &mut Context, value: &JsValue) -> JsResult<BigInt> {
    Ok(parse_hex(&from_value_hex(ctx, value)?))
}

/// A new BigNumber object with the given normalised hex.
pub(crate) fn make_hex(ctx: &mut Context, hex: String) -> JsResult<JsValue> {
    let proto = js::realm(ctx)?.bn_proto.clone();
    let obj = js::with_proto(proto);
    let ro = |v: JsValue| {
        PropertyDescriptor::builder()
            .value(v)
            .writable(false)
            .enumerable(true)
            .configurable(false)
    };
    obj.define_property_or_throw(js_string!("_hex"), ro(js::s(&hex)), ctx)?;
    obj.define_property_or_throw(js_string!("_isBigNumber"), ro(true.into()), ctx)?;
    js::freeze(ctx, &obj)?;
    Ok(obj.into())
}

pub(crate) fn make(ctx: &mut Context, v: &BigInt) -> JsResult<JsValue> {
    make_hex(ctx, to_hex(v))
}

/// BN's `toTwos(width)`.
pub(crate) fn to_twos(v: &BigInt, width: u64) -> BigInt {
    if v.sign() == Sign::Minus {
        let mask = (BigInt::one() << width) - 1;
        (v.abs() ^ mask) + 1
    } else {
        v.clone()
    }
}

/// BN's `fromTwos(width)`.
pub(crate) fn from_twos(v: &BigInt, width: u64) -> BigInt {
    if width != 0 && v.magnitude().bit(width - 1) {
        let mask = (BigInt::one() << width) - 1;
        let t: BigInt = (v.abs() ^ mask) + BigInt::one();
        -t
    } else {
        v.clone()
    }
}

pub(crate) fn mask(v: &BigInt, bits: u64) -> BigInt {
    v & ((BigInt::one() << bits) - 1)
}

fn this_hex(ctx: &mut Context, this: &JsValue) -> JsResult<String> {
    let h = js::get(ctx, this, "_hex")?;
    Ok(h.to_string(ctx)?.to_std_string_lossy())
}

fn width_arg(ctx: &mut Context, v: &JsValue) -> JsResult<u64> {
    let n = v.to_number(ctx)?;
    Ok(if n.is_finite() && n > 0.0 {
        n as u64
    } else {
        0
    })
}

type NativeFn = fn(&JsValue, &[JsValue], &mut Context) -> JsResult<JsValue>;

fn m_from_twos(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let v = to_big(ctx, this)?;
    let w = width_arg(ctx, &js::arg(args, 0))?;
    make(ctx, &from_twos(&v, w))
}

fn m_to_twos(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let v = to_big(ctx, this)?;
    let w = width_arg(ctx, &js::arg(args, 0))?;
    make(ctx, &to_twos(&v, w))
}

fn m_abs(this: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let h = this_hex(ctx, this)?;
    if let Some(rest) = h.strip_prefix('-') {
        let h = from_string(ctx, rest, &js::s(rest))?;
        return make_hex(ctx, h);
    }
    Ok(this.clone())
}

fn binop(
    this: &JsValue,
    args: &[JsValue],
    ctx: &mut Context,
    f: fn(&BigInt, &BigInt) -> BigInt,
) -> JsResult<JsValue> {
    let a = to_big(ctx, this)?;
    let b = to_big(ctx, &js::arg(args, 0))?;
    make(ctx, &f(&a, &b))
}

fn m_add(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    binop(this, args, ctx, |a, b| a + b)
}

fn m_sub(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    binop(this, args, ctx, |a, b| a - b)
}

fn m_mul(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    binop(this, args, ctx, |a, b| a * b)
}

fn m_div(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let other = js::arg(args, 0);
    let o = to_big(ctx, &other)?;
    if o.is_zero() {
        return Err(fault(ctx, "division-by-zero", "div", None));
    }
    let a = to_big(ctx, this)?;
    make(ctx, &(a / o))
}

fn m_mod(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let o = to_big(ctx, &js::arg(args, 0))?;
    if o.is_negative() {
        return Err(fault(ctx, "division-by-zero", "mod", None));
    }
    let a = to_big(ctx, this)?;
    if o.is_zero() {
        return Err(err::plain("Assertion failed"));
    }
    make(ctx, &a.mod_floor(&o))
}

fn m_pow(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let e = to_big(ctx, &js::arg(args, 0))?;
    if e.is_negative() {
        return Err(fault(ctx, "negative-power", "pow", None));
    }
    let a = to_big(ctx, this)?;
    let Some(e) = e.to_u32() else {
        return Err(err::plain("Assertion failed"));
    };
    make(ctx, &num_traits::pow::Pow::pow(&a, e))
}

fn bitop(
    this: &JsValue,
    args: &[JsValue],
    ctx: &mut Context,
    name: &str,
    f: fn(&BigInt, &BigInt) -> BigInt,
) -> JsResult<JsValue> {
    let b = to_big(ctx, &js::arg(args, 0))?;
    let neg_this = this_hex(ctx, this)?.starts_with('-');
    if neg_this || b.is_negative() {
        return Err(fault(ctx, "unbound-bitwise-result", name, None));
    }
    let a = to_big(ctx, this)?;
    make(ctx, &f(&a, &b))
}

fn m_and(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    bitop(this, args, ctx, "and", |a, b| a & b)
}

fn m_or(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    bitop(this, args, ctx, "or", |a, b| a | b)
}

fn m_xor(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    bitop(this, args, ctx, "xor", |a, b| a ^ b)
}

fn shiftop(
    this: &JsValue,
    args: &[JsValue],
    ctx: &mut Context,
    name: &str,
    f: fn(&BigInt, u64) -> BigInt,
) -> JsResult<JsValue> {
    let n = js::arg(args, 0).to_number(ctx)?;
    let neg_this = this_hex(ctx, this)?.starts_with('-');
    if neg_this || n < 0.0 {
        return Err(fault(ctx, "negative-width", name, None));
    }
    let a = to_big(ctx, this)?;
    let w = if n.is_finite() { n as u64 } else { 0 };
    make(ctx, &f(&a, w))
}

fn m_mask(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    shiftop(this, args, ctx, "mask", mask)
}

fn m_shl(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    shiftop(this, args, ctx, "shl", |a, w| a << w)
}

fn m_shr(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    shiftop(this, args, ctx, "shr", |a, w| a >> w)
}

fn cmp(
    this: &JsValue,
    args: &[JsValue],
    ctx: &mut Context,
    f: fn(std::cmp::Ordering) -> bool,
) -> JsResult<JsValue> {
    let a = to_big(ctx, this)?;
    let b = to_big(ctx, &js::arg(args, 0))?;
    Ok(f(a.cmp(&b)).into())
}

fn m_eq(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    cmp(this, args, ctx, |o| o.is_eq())
}

fn m_lt(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    cmp(this, args, ctx, |o| o.is_lt())
}

fn m_lte(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    cmp(this, args, ctx, |o| o.is_le())
}

fn m_gt(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    cmp(this, args, ctx, |o| o.is_gt())
}

fn m_gte(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    cmp(this, args, ctx, |o| o.is_ge())
}

fn m_is_negative(this: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(this_hex(ctx, this)?.starts_with('-').into())
}

fn m_is_zero(this: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(to_big(ctx, this)?.is_zero().into())
}

/// BN's `toNumber()` limit: |v| < 2^53.
pub(crate) fn to_number_checked(v: &BigInt) -> Option<f64> {
    if v.magnitude().bits() > 53 {
        return None;
    }
    v.to_f64()
}

fn m_to_number(this: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let v = to_big(ctx, this)?;
    match to_number_checked(&v) {
        Some(n) => Ok(JsValue::from(n)),
        None => {
            let s = v.to_str_radix(10);
            Err(fault(ctx, "overflow", "toNumber", Some(P::str(&s))))
        }
    }
}

fn m_to_big_int(this: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let v = to_big(ctx, this)?;
    Ok(JsBigInt::new(v).into())
}

fn m_to_string(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    if let Some(first) = args.first() {
        if first.as_number() == Some(10.0) {
            // ethers only logs a one-time warning here.
        } else if first.as_number() == Some(16.0) {
            return Err(err::make(
                ctx,
                V_BIGNUMBER,
                "BigNumber.toString does not accept any parameters; use bigNumber.toHexString()",
                UNEXPECTED_ARGUMENT,
                vec![],
            ));
        } else {
            return Err(err::make(
                ctx,
                V_BIGNUMBER,
                "BigNumber.toString does not accept parameters",
                UNEXPECTED_ARGUMENT,
                vec![],
            ));
        }
    }
    let v = to_big(ctx, this)?;
    Ok(js::s(&v.to_str_radix(10)))
}

fn m_to_hex_string(this: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    js::get(ctx, this, "_hex")
}

fn m_to_json(this: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let h = js::call_method(ctx, this, "toHexString", &[])?;
    Ok(js::plain_object(ctx, vec![("type", js::s("BigNumber")), ("hex", h)]).into())
}

/// `BigNumber.from(value)`.
pub(crate) fn s_from(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let v = js::arg(args, 0);
    if is_bn_instance(ctx, &v)?.is_some() {
        return Ok(v);
    }
    let h = from_value_hex(ctx, &v)?;
    make_hex(ctx, h)
}

fn s_is_big_number(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let v = js::arg(args, 0);
    if !v.to_boolean() {
        return Ok(false.into());
    }
    Ok(js::get(ctx, &v, "_isBigNumber")?.to_boolean().into())
}

fn ctor(_: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Err(err::make(
        ctx,
        V_BIGNUMBER,
        "cannot call constructor directly; use BigNumber.from",
        UNSUPPORTED_OPERATION,
        vec![("operation", P::str("new (BigNumber)"))],
    ))
}

/// Builds `BigNumber` (constructor + prototype); returns (constructor, prototype).
pub(crate) fn build(ctx: &mut Context) -> JsResult<(JsObject, JsObject)> {
    let proto = js::new_object(ctx);
    let methods: [(&str, usize, NativeFn); 27] = [
        ("fromTwos", 1, m_from_twos),
        ("toTwos", 1, m_to_twos),
        ("abs", 0, m_abs),
        ("add", 1, m_add),
        ("sub", 1, m_sub),
        ("div", 1, m_div),
        ("mul", 1, m_mul),
        ("mod", 1, m_mod),
        ("pow", 1, m_pow),
        ("and", 1, m_and),
        ("or", 1, m_or),
        ("xor", 1, m_xor),
        ("mask", 1, m_mask),
        ("shl", 1, m_shl),
        ("shr", 1, m_shr),
        ("eq", 1, m_eq),
        ("lt", 1, m_lt),
        ("lte", 1, m_lte),
        ("gt", 1, m_gt),
        ("gte", 1, m_gte),
        ("isNegative", 0, m_is_negative),
        ("isZero", 0, m_is_zero),
        ("toNumber", 0, m_to_number),
        ("toBigInt", 0, m_to_big_int),
        ("toString", 0, m_to_string),
        ("toHexString", 0, m_to_hex_string),
        ("toJSON", 1, m_to_json),
    ];
    for (name, len, f) in methods {
        js::method(ctx, &proto, name, len, NativeFunction::from_fn_ptr(f))?;
    }
    let ctor_obj = js::constructor(
        ctx,
        "BigNumber",
        2,
        NativeFunction::from_fn_ptr(ctor),
        &proto,
    )?;
    js::method(
        ctx,
        &ctor_obj,
        "from",
        1,
        NativeFunction::from_fn_ptr(s_from),
    )?;
    js::method(
        ctx,
        &ctor_obj,
        "isBigNumber",
        1,
        NativeFunction::from_fn_ptr(s_is_big_number),
    )?;
    Ok((ctor_obj, proto))
}
