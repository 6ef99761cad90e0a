//! `@ethersproject/units` (formatUnits/parseUnits/…) over ethers' fixed-point helpers.

use boa_engine::{Context, JsObject, JsResult, JsValue, NativeFunction};
use num_bigint::BigInt;
use num_integer::Integer;
use num_traits::{Signed, Zero};

use super::bignumber;
use super::err::{self, NUMERIC_FAULT, P, V_BIGNUMBER, V_UNITS};
use super::js;

const NAMES: [&str; 7] = ["wei", "kwei", "mwei", "gwei", "szabo", "finney", "ether"];

/// The unit argument: a unit name becomes its decimals; `undefined`/`null` becomes 18.
fn unit_arg(unit: &JsValue) -> JsValue {
    if let Some(s) = js::as_str(unit)
        && let Some(i) = NAMES.iter().position(|n| *n == s)
    {
        return JsValue::from((3 * i) as i32);
    }
    if js::is_nullish(unit) {
        JsValue::from(18)
    } else {
        unit.clone()
    }
}

/// `getMultiplier(decimals)`: the number of decimals (0..=256).
fn decimals(ctx: &mut Context, d: &JsValue) -> JsResult<usize> {
    let mut d = d.clone();
    if d.as_number().is_none()
        && let Ok(v) = bignumber::to_big(ctx, &d)
        && let Some(n) = bignumber::to_number_checked(&v)
    {
        d = JsValue::from(n);
    }
    if let Some(n) = d.as_number()
        && (0.0..=256.0).contains(&n)
        && n % 1.0 == 0.0
    {
        return Ok(n as usize);
    }
    Err(err::arg(
        ctx,
        V_BIGNUMBER,
        "invalid decimal size",
        "decimals",
        P::Js(d),
    ))
}

pub(crate) fn format_fixed(ctx: &mut Context, value: &JsValue, d: &JsValue) -> JsResult<String> {
    let d = decimals(ctx, d)?;
    let v = bignumber::to_big(ctx, value)?;
    let negative = v.is_negative();
    let v = v.abs();
    let mult = num_traits::pow::Pow::pow(BigInt::from(10u32), d);
    let (whole, frac) = v.div_mod_floor(&mult);
    let mut fraction = frac.to_str_radix(10);
    while fraction.len() < d {
        fraction.insert(0, '0');
    }
    let trimmed = fraction.trim_end_matches('0');
    let fraction = if trimmed.is_empty() { "0" } else { trimmed };
    let mut out = whole.to_str_radix(10);
    if d > 0 {
        out.push('.');
        out.push_str(fraction);
    }
    if negative {
        out.insert(0, '-');
    }
    Ok(out)
}

pub(crate) fn parse_fixed(ctx: &mut Context, value: &JsValue, d: &JsValue) -> JsResult<BigInt> {
    let d = decimals(ctx, d)?;
    let s = match js::as_str(value) {
        Some(s) => {
            let body = s.strip_prefix('-').unwrap_or(&s);
            if body.is_empty() || !body.bytes().all(|c| c.is_ascii_digit() || c == b'.') {
                return Err(err::arg(
                    ctx,
                    V_BIGNUMBER,
                    "invalid decimal value",
                    "value",
                    P::Js(value.clone()),
                ));
            }
            s
        }
        None => {
            return Err(err::arg(
                ctx,
                V_BIGNUMBER,
                "invalid decimal value",
                "value",
                P::Js(value.clone()),
            ));
        }
    };
    let negative = s.starts_with('-');
    let body = if negative { &s[1..] } else { &s[..] };
    if body == "." {
        return Err(err::arg(
            ctx,
            V_BIGNUMBER,
            "missing value",
            "value",
            P::str(body),
        ));
    }
    let comps: Vec<&str> = body.split('.').collect();
    if comps.len() > 2 {
        return Err(err::arg(
            ctx,
            V_BIGNUMBER,
            "too many decimal points",
            "value",
            P::str(body),
        ));
    }
    let whole = if comps[0].is_empty() { "0" } else { comps[0] };
    let fraction = comps
        .get(1)
        .copied()
        .filter(|f| !f.is_empty())
        .unwrap_or("0");
    let fraction = fraction.trim_end_matches('0');
    if fraction.len() > d {
        return Err(err::make(
            ctx,
            V_BIGNUMBER,
            "fractional component exceeds decimals",
            NUMERIC_FAULT,
            vec![
                ("fault", P::str("underflow")),
                ("operation", P::str("parseFixed")),
            ],
        ));
    }
    let mut fraction = if fraction.is_empty() {
        "0".to_owned()
    } else {
        fraction.to_owned()
    };
    while fraction.len() < d {
        fraction.push('0');
    }
    let w = BigInt::parse_bytes(whole.as_bytes(), 10).unwrap_or_default();
    let f = BigInt::parse_bytes(fraction.as_bytes(), 10).unwrap_or_default();
    let mult = num_traits::pow::Pow::pow(BigInt::from(10u32), d);
    let wei = w * mult + f;
    Ok(if negative && !wei.is_zero() {
        -wei
    } else {
        wei
    })
}

fn f_format_units(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let d = unit_arg(&js::arg(args, 1));
    Ok(js::s(&format_fixed(ctx, &js::arg(args, 0), &d)?))
}

fn f_parse_units(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let value = js::arg(args, 0);
    if value.as_string().is_none() {
        return Err(err::arg(
            ctx,
            V_UNITS,
            "value must be a string",
            "value",
            P::Js(value),
        ));
    }
    let d = unit_arg(&js::arg(args, 1));
    let v = parse_fixed(ctx, &value, &d)?;
    bignumber::make(ctx, &v)
}

fn f_format_ether(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(js::s(&format_fixed(
        ctx,
        &js::arg(args, 0),
        &JsValue::from(18),
    )?))
}

fn f_parse_ether(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    f_parse_units(
        &JsValue::undefined(),
        &[js::arg(args, 0), JsValue::from(18)],
        ctx,
    )
}

fn f_commify(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let value = js::arg(args, 0);
    let s = value.to_string(ctx)?.to_std_string_lossy();
    let comps: Vec<&str> = s.split('.').collect();
    let int_ok = {
        let b = comps[0].strip_prefix('-').unwrap_or(comps[0]);
        b.bytes().all(|c| c.is_ascii_digit())
    };
    let frac_ok = comps
        .get(1)
        .is_none_or(|f| f.bytes().all(|c| c.is_ascii_digit()));
    let is_dot = matches!(js::as_str(&value).as_deref(), Some(".") | Some("-."));
    if comps.len() > 2 || !int_ok || !frac_ok || is_dot {
        return Err(err::arg(
            ctx,
            V_UNITS,
            "invalid value",
            "value",
            P::Js(value),
        ));
    }
    let mut whole = comps[0];
    let mut negative = "";
    if let Some(rest) = whole.strip_prefix('-') {
        negative = "-";
        whole = rest;
    }
    let whole = whole.trim_start_matches('0');
    let whole = if whole.is_empty() { "0" } else { whole };
    let mut suffix = String::new();
    if comps.len() == 2 {
        suffix = format!(".{}", if comps[1].is_empty() { "0" } else { comps[1] });
    }
    while suffix.len() > 2 && suffix.ends_with('0') {
        suffix.pop();
    }
    let mut groups = Vec::new();
    let mut w = whole;
    while !w.is_empty() {
        if w.len() <= 3 {
            groups.insert(0, w);
            break;
        }
        let idx = w.len() - 3;
        groups.insert(0, &w[idx..]);
        w = &w[..idx];
    }
    Ok(js::s(&format!("{negative}{}{suffix}", groups.join(","))))
}

pub(crate) fn install(ctx: &mut Context, utils: &JsObject) -> JsResult<()> {
    type F = fn(&JsValue, &[JsValue], &mut Context) -> JsResult<JsValue>;
    let fns: [(&str, usize, F); 5] = [
        ("formatUnits", 2, f_format_units),
        ("parseUnits", 2, f_parse_units),
        ("formatEther", 1, f_format_ether),
        ("parseEther", 1, f_parse_ether),
        ("commify", 1, f_commify),
    ];
    for (name, len, f) in fns {
        js::method(ctx, utils, name, len, NativeFunction::from_fn_ptr(f))?;
    }
    Ok(())
}
