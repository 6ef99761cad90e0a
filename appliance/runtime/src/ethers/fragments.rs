//! `@ethersproject/abi` fragments: `ParamType`, `Fragment` and its subclasses
//! (`ConstructorFragment`, `FunctionFragment`, `EventFragment`, `ErrorFragment`) and
//! `FormatTypes`, built from human-readable signatures or JSON ABI objects.
//!
//! Objects have the shape ethers 5.7.2 gives them: frozen, with the same own enumerable
//! properties in the same order, and prototypes whose methods (and, for subclasses,
//! `constructor`) are enumerable as in ethers' ES5 build — so a `deepCopy` (which copies
//! inherited enumerable properties, see `LogDescription.eventFragment`) gives what ethers
//! gives. Every method reads the JS properties of `this` and of its arguments, as ethers
//! does, so copies and hand-built fragment objects work the same way.

use boa_engine::object::{FunctionObjectBuilder, JsObject};
use boa_engine::property::PropertyDescriptor;
use boa_engine::{Context, JsData, JsNativeError, JsResult, JsValue, NativeFunction, js_string};
use boa_gc::{Finalize, Trace};

use super::abi::{self, ParamType};
use super::bignumber;
use super::err::{self, P, UNSUPPORTED_OPERATION, V_ABI};
use super::js;

type Fn = fn(&JsValue, &[JsValue], &mut Context) -> JsResult<JsValue>;

/// The prototypes natively created fragments get.
#[derive(Clone, Trace, Finalize, JsData)]
pub(crate) struct FragmentRealm {
    param: JsObject,
    constructor: JsObject,
    function: JsObject,
    event: JsObject,
    error: JsObject,
}

fn realm(ctx: &Context) -> JsResult<FragmentRealm> {
    ctx.realm()
        .host_defined()
        .get::<FragmentRealm>()
        .cloned()
        .ok_or_else(|| {
            JsNativeError::typ()
                .with_message("ethers fragments are not installed in this realm")
                .into()
        })
}

// ---------------------------------------------------------------- small JS helpers

/// JS `\s`: WhiteSpace and LineTerminator.
pub(crate) fn js_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
    )
}

/// `String.prototype.trim`.
pub(crate) fn js_trim(s: &str) -> &str {
    s.trim_matches(js_space)
}

fn line_terminator(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}')
}

/// `value[key]` with JS semantics: `TypeError` on `null`/`undefined`, wrapper objects
/// for primitives.
pub(crate) fn prop(ctx: &mut Context, value: &JsValue, key: &str) -> JsResult<JsValue> {
    if value.is_null_or_undefined() {
        let what = if value.is_null() { "null" } else { "undefined" };
        return Err(err::type_error(&format!(
            "Cannot read properties of {what} (reading '{key}')"
        )));
    }
    let o = value.to_object(ctx)?;
    o.get(js::jstr(key), ctx)
}

/// `String(value)`.
pub(crate) fn to_str(ctx: &mut Context, value: &JsValue) -> JsResult<String> {
    Ok(value.to_string(ctx)?.to_std_string_lossy())
}

/// `a === b` for a JS value and a string.
pub(crate) fn is_str(value: &JsValue, s: &str) -> bool {
    value
        .as_string()
        .is_some_and(|v| v.to_std_string_lossy() == s)
}

/// `value.map(f)` over an array (a `TypeError` for anything else, as `.map` would be).
pub(crate) fn map_array(
    ctx: &mut Context,
    value: &JsValue,
    what: &str,
    mut f: impl FnMut(&mut Context, &JsValue) -> JsResult<JsValue>,
) -> JsResult<JsValue> {
    if !js::is_array(value) {
        return Err(err::type_error(&format!("{what}.map is not a function")));
    }
    let items = js::array_items(ctx, value)?;
    let mut out = Vec::with_capacity(items.len());
    for item in &items {
        out.push(f(ctx, item)?);
    }
    Ok(js::array(ctx, out))
}

/// A data property as an assignment would create it.
pub(crate) fn put(ctx: &mut Context, obj: &JsObject, key: &str, value: JsValue) -> JsResult<()> {
    obj.create_data_property_or_throw(js::jstr(key), value, ctx)?;
    Ok(())
}

/// `console.log(message)` with the global `console` of the moment (ethers' `logger.warn`
/// and its direct `console.log` calls); nothing when there is no console.
pub(crate) fn warn(ctx: &mut Context, message: &str) -> JsResult<()> {
    let console = ctx.global_object().get(js_string!("console"), ctx)?;
    let log = js::get(ctx, &console, "log")?;
    if let Some(f) = log.as_callable() {
        f.call(&console, &[js::s(message)], ctx)?;
    }
    Ok(())
}

/// A method defined as ethers' ES5 build defines it (`X.prototype.f = function`):
/// writable, enumerable, configurable.
pub(crate) fn enum_method(
    ctx: &mut Context,
    obj: &JsObject,
    name: &str,
    length: usize,
    f: NativeFunction,
) -> JsResult<()> {
    let func = FunctionObjectBuilder::new(ctx.realm(), f)
        .name(js::jstr(name))
        .length(length)
        .constructor(false)
        .build();
    obj.define_property_or_throw(
        js::jstr(name),
        PropertyDescriptor::builder()
            .value(func)
            .writable(true)
            .enumerable(true)
            .configurable(true),
        ctx,
    )?;
    Ok(())
}

/// A constructor and its prototype, shaped like ethers' ES5 classes: a subclass's
/// prototype inherits the parent's and has an enumerable `constructor`, and the
/// subclass constructor inherits the parent's statics.
pub(crate) fn class(
    ctx: &mut Context,
    name: &str,
    length: usize,
    ctor: Fn,
    parent: Option<&(JsObject, JsObject)>,
) -> JsResult<(JsObject, JsObject)> {
    let proto = match parent {
        Some((_, p)) => js::with_proto(p.clone()),
        None => js::new_object(ctx),
    };
    let f: JsObject = FunctionObjectBuilder::new(ctx.realm(), NativeFunction::from_fn_ptr(ctor))
        .name(js::jstr(name))
        .length(length)
        .constructor(true)
        .build()
        .into();
    if let Some((c, _)) = parent {
        f.set_prototype(Some(c.clone()));
    }
    f.define_property_or_throw(
        js_string!("prototype"),
        PropertyDescriptor::builder()
            .value(proto.clone())
            .writable(true)
            .enumerable(false)
            .configurable(false),
        ctx,
    )?;
    proto.define_property_or_throw(
        js_string!("constructor"),
        PropertyDescriptor::builder()
            .value(f.clone())
            .writable(true)
            .enumerable(parent.is_some())
            .configurable(true),
        ctx,
    )?;
    Ok((f, proto))
}

fn statics(ctx: &mut Context, ctor: &JsObject, fns: &[(&str, usize, Fn)]) -> JsResult<()> {
    for (name, len, f) in fns {
        enum_method(ctx, ctor, name, *len, NativeFunction::from_fn_ptr(*f))?;
    }
    Ok(())
}

fn frozen(
    ctx: &mut Context,
    proto: JsObject,
    props: Vec<(&str, JsValue)>,
    marker: &str,
) -> JsResult<JsObject> {
    let obj = js::with_proto(proto);
    for (k, v) in props {
        js::read_only(ctx, &obj, k, v)?;
    }
    js::read_only(ctx, &obj, marker, true.into())?;
    js::freeze(ctx, &obj)?;
    Ok(obj)
}

fn abi_arg(ctx: &mut Context, message: &str, name: &str, value: &JsValue) -> boa_engine::JsError {
    err::arg(ctx, V_ABI, message, name, P::Js(value.clone()))
}

// ---------------------------------------------------------------- FormatTypes

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fmt {
    Sighash,
    Minimal,
    Full,
    Json,
}

impl Fmt {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Fmt::Sighash => "sighash",
            Fmt::Minimal => "minimal",
            Fmt::Full => "full",
            Fmt::Json => "json",
        }
    }

    fn join(self) -> &'static str {
        if self == Fmt::Full { ", " } else { "," }
    }
}

/// `if (!format) { format = default } if (!FormatTypes[format]) throw …`.
pub(crate) fn fmt_arg(ctx: &mut Context, value: &JsValue, default: Fmt) -> JsResult<Fmt> {
    if !value.to_boolean() {
        return Ok(default);
    }
    let name = match value.as_string() {
        Some(s) => s.to_std_string_lossy(),
        None => String::new(),
    };
    match name.as_str() {
        "sighash" => Ok(Fmt::Sighash),
        "minimal" => Ok(Fmt::Minimal),
        "full" => Ok(Fmt::Full),
        "json" => Ok(Fmt::Json),
        _ => Err(abi_arg(ctx, "invalid format type", "format", value)),
    }
}

fn format_types(ctx: &mut Context) -> JsResult<JsObject> {
    let o = js::new_object(ctx);
    for f in [Fmt::Sighash, Fmt::Minimal, Fmt::Full, Fmt::Json] {
        put(ctx, &o, f.name(), js::s(f.name()))?;
    }
    js::freeze(ctx, &o)?;
    Ok(o)
}

/// `value.format(fmt)` (no argument for `None`, as ethers' `fragment.format()`).
pub(crate) fn call_format(
    ctx: &mut Context,
    value: &JsValue,
    fmt: Option<Fmt>,
) -> JsResult<String> {
    let args = match fmt {
        Some(f) => vec![js::s(f.name())],
        None => Vec::new(),
    };
    let f = prop(ctx, value, "format")?;
    let Some(f) = f.as_callable() else {
        return Err(err::type_error("format is not a function"));
    };
    let out = f.call(value, &args, ctx)?;
    to_str(ctx, &out)
}

/// `list.map((p) => p.format(fmt)).join(sep)`.
fn format_list(ctx: &mut Context, list: &JsValue, fmt: Fmt, sep: &str) -> JsResult<String> {
    if !js::is_array(list) {
        return Err(err::type_error("map is not a function"));
    }
    let mut parts = Vec::new();
    for item in js::array_items(ctx, list)? {
        parts.push(call_format(ctx, &item, Some(fmt))?);
    }
    Ok(parts.join(sep))
}

/// `list.map((p) => JSON.parse(p.format("json")))`.
fn json_list(ctx: &mut Context, list: &JsValue) -> JsResult<JsValue> {
    map_array(ctx, list, "inputs", |ctx, item| {
        let text = call_format(ctx, item, Some(Fmt::Json))?;
        js::json_parse(ctx, &text)
    })
}

fn stringify(ctx: &mut Context, obj: JsObject) -> JsResult<String> {
    Ok(js::json_stringify(ctx, &obj.into())?.unwrap_or_default())
}

// ---------------------------------------------------------------- ParamType

/// `/^(.*)\[([0-9]*)\]$/`: (child type, `parseInt(length || "-1")`).
fn array_match(ty: &str) -> Option<(&str, f64)> {
    if !ty.ends_with(']') || ty.chars().any(line_terminator) {
        return None;
    }
    let open = ty.rfind('[')?;
    let digits = &ty[open + 1..ty.len() - 1];
    if !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let len = if digits.is_empty() {
        -1.0
    } else {
        digits.parse::<f64>().unwrap_or(f64::INFINITY)
    };
    Some((&ty[..open], len))
}

/// The private `new ParamType(guard, {name, type, indexed, components})`.
fn make_param(
    ctx: &mut Context,
    name: JsValue,
    ty: &str,
    indexed: JsValue,
    components: JsValue,
) -> JsResult<JsObject> {
    let proto = realm(ctx)?.param.clone();
    let mut props = vec![
        ("name", name),
        ("type", js::s(ty)),
        ("indexed", indexed),
        ("components", components.clone()),
    ];
    match array_match(ty) {
        Some((child, len)) => {
            let comps = if components.to_boolean() {
                map_array(ctx, &components, "components", param_from_object)?
            } else {
                JsValue::null()
            };
            let child = make_param(
                ctx,
                JsValue::null(),
                &abi::verify_type(child),
                JsValue::null(),
                comps,
            )?;
            props.push(("arrayLength", JsValue::from(len)));
            props.push(("arrayChildren", child.into()));
            props.push(("baseType", js::s("array")));
        }
        None => {
            let base = if js::is_nullish(&components) {
                js::s(ty)
            } else {
                js::s("tuple")
            };
            props.push(("arrayLength", JsValue::null()));
            props.push(("arrayChildren", JsValue::null()));
            props.push(("baseType", base));
        }
    }
    frozen(ctx, proto, props, "_isParamType")
}

fn is_param_type(ctx: &mut Context, value: &JsValue) -> JsResult<bool> {
    if js::is_nullish(value) {
        return Ok(false);
    }
    Ok(prop(ctx, value, "_isParamType")?.to_boolean())
}

/// `ParamType.fromObject(value)`.
pub(crate) fn param_from_object(ctx: &mut Context, value: &JsValue) -> JsResult<JsValue> {
    if is_param_type(ctx, value)? {
        return Ok(value.clone());
    }
    let name = prop(ctx, value, "name")?;
    let name = if name.to_boolean() {
        name
    } else {
        JsValue::null()
    };
    let ty = prop(ctx, value, "type")?;
    let Some(ty) = js::as_str(&ty) else {
        return Err(err::type_error(
            "Cannot read properties of type (reading 'match')",
        ));
    };
    let ty = abi::verify_type(&ty);
    let indexed = prop(ctx, value, "indexed")?;
    let indexed = if js::is_nullish(&indexed) {
        JsValue::null()
    } else {
        indexed.to_boolean().into()
    };
    let comps = prop(ctx, value, "components")?;
    let comps = if comps.to_boolean() {
        map_array(ctx, &comps, "value.components", param_from_object)?
    } else {
        JsValue::null()
    };
    Ok(make_param(ctx, name, &ty, indexed, comps)?.into())
}

fn param_from_parsed(ctx: &mut Context, p: &ParamType) -> JsResult<JsValue> {
    let comps = match &p.components {
        Some(cs) => {
            let mut out = Vec::with_capacity(cs.len());
            for c in cs {
                out.push(param_from_parsed(ctx, c)?);
            }
            js::array(ctx, out)
        }
        None => JsValue::null(),
    };
    let name = p.name.as_deref().map_or(JsValue::null(), js::s);
    let indexed = p.indexed.map_or(JsValue::null(), JsValue::from);
    Ok(make_param(ctx, name, &p.ty, indexed, comps)?.into())
}

/// `ParamType.fromString(value, allowIndexed)`.
pub(crate) fn param_from_string(
    ctx: &mut Context,
    value: &JsValue,
    allow_indexed: bool,
) -> JsResult<JsValue> {
    let Some(s) = js::as_str(value) else {
        return Err(err::type_error("param.replace is not a function"));
    };
    let parsed = abi::parse_param_type(ctx, &s, allow_indexed)?;
    param_from_parsed(ctx, &parsed)
}

fn param_format(ctx: &mut Context, this: &JsValue, fmt: Fmt) -> JsResult<String> {
    let base = prop(ctx, this, "baseType")?;
    if fmt == Fmt::Json {
        let o = js::new_object(ctx);
        let ty = if is_str(&base, "tuple") {
            js::s("tuple")
        } else {
            prop(ctx, this, "type")?
        };
        put(ctx, &o, "type", ty)?;
        let name = prop(ctx, this, "name")?;
        let name = if name.to_boolean() {
            name
        } else {
            JsValue::undefined()
        };
        put(ctx, &o, "name", name)?;
        let indexed = prop(ctx, this, "indexed")?;
        if indexed.is_boolean() {
            put(ctx, &o, "indexed", indexed)?;
        }
        let comps = prop(ctx, this, "components")?;
        if comps.to_boolean() {
            let list = map_array(ctx, &comps, "this.components", |ctx, c| {
                let text = call_format(ctx, c, Some(fmt))?;
                js::json_parse(ctx, &text)
            })?;
            put(ctx, &o, "components", list)?;
        }
        return stringify(ctx, o);
    }
    let mut out = String::new();
    if is_str(&base, "array") {
        let child = prop(ctx, this, "arrayChildren")?;
        out.push_str(&call_format(ctx, &child, Some(fmt))?);
        let len = prop(ctx, this, "arrayLength")?;
        let n = len.to_number(ctx)?;
        out.push('[');
        // `arrayLength < 0 ? "" : String(arrayLength)` (NaN is not below 0).
        if n.partial_cmp(&0.0) != Some(std::cmp::Ordering::Less) {
            out.push_str(&to_str(ctx, &len)?);
        }
        out.push(']');
    } else if is_str(&base, "tuple") {
        if fmt != Fmt::Sighash {
            let ty = prop(ctx, this, "type")?;
            out.push_str(&to_str(ctx, &ty)?);
        }
        let comps = prop(ctx, this, "components")?;
        out.push('(');
        out.push_str(&format_list(ctx, &comps, fmt, fmt.join())?);
        out.push(')');
    } else {
        let ty = prop(ctx, this, "type")?;
        out.push_str(&to_str(ctx, &ty)?);
    }
    if fmt != Fmt::Sighash {
        let indexed = prop(ctx, this, "indexed")?;
        if indexed.as_boolean() == Some(true) {
            out.push_str(" indexed");
        }
        let name = prop(ctx, this, "name")?;
        if fmt == Fmt::Full && name.to_boolean() {
            out.push(' ');
            out.push_str(&to_str(ctx, &name)?);
        }
    }
    Ok(out)
}

fn p_format(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let fmt = fmt_arg(ctx, &js::arg(args, 0), Fmt::Sighash)?;
    Ok(js::s(&param_format(ctx, this, fmt)?))
}

fn p_ctor(_: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Err(err::make(
        ctx,
        V_ABI,
        "use fromString",
        UNSUPPORTED_OPERATION,
        vec![("operation", P::str("new ParamType()"))],
    ))
}

fn p_from(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let v = js::arg(args, 0);
    if v.is_string() {
        return param_from_string(ctx, &v, js::arg(args, 1).to_boolean());
    }
    param_from_object(ctx, &v)
}

fn p_from_object(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    param_from_object(ctx, &js::arg(args, 0))
}

fn p_from_string(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    param_from_string(ctx, &js::arg(args, 0), js::arg(args, 1).to_boolean())
}

fn p_is_param_type(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(is_param_type(ctx, &js::arg(args, 0))?.into())
}

// ---------------------------------------------------------------- parsing helpers

/// `/^([^)(]*)\((.*)\)([^)(]*)$/` → (before, inside, after).
fn paren_match(s: &str) -> Option<(&str, &str, &str)> {
    let open = s.find(['(', ')'])?;
    if s.as_bytes()[open] != b'(' {
        return None;
    }
    let close = s.rfind(['(', ')'])?;
    if s.as_bytes()[close] != b')' || close <= open {
        return None;
    }
    let inside = &s[open + 1..close];
    if inside.chars().any(line_terminator) {
        return None;
    }
    Some((&s[..open], inside, &s[close + 1..]))
}

/// `splitNesting(value)`: top-level comma split (a trailing empty part is dropped).
fn split_nesting(ctx: &mut Context, value: &str) -> JsResult<Vec<String>> {
    let value = js_trim(value);
    let mut out = Vec::new();
    let mut acc = String::new();
    let mut depth = 0i32;
    for c in value.chars() {
        if c == ',' && depth == 0 {
            out.push(std::mem::take(&mut acc));
            continue;
        }
        acc.push(c);
        if c == '(' {
            depth += 1;
        } else if c == ')' {
            depth -= 1;
            if depth == -1 {
                return Err(abi_arg(
                    ctx,
                    "unbalanced parenthesis",
                    "value",
                    &js::s(value),
                ));
            }
        }
    }
    if !acc.is_empty() {
        out.push(acc);
    }
    Ok(out)
}

/// `parseParams(value, allowIndexed)`: an array of ParamType objects.
fn parse_params(ctx: &mut Context, value: &str, allow_indexed: bool) -> JsResult<JsValue> {
    let mut out = Vec::new();
    for p in split_nesting(ctx, value)? {
        out.push(param_from_string(ctx, &js::s(&p), allow_indexed)?);
    }
    Ok(js::array(ctx, out))
}

/// `verifyIdentifier(value)`.
fn verify_identifier(ctx: &mut Context, value: &JsValue) -> JsResult<JsValue> {
    if !value.to_boolean() {
        let shown = to_str(ctx, value)?;
        return Err(abi_arg(
            ctx,
            &format!("invalid identifier \"{shown}\""),
            "value",
            value,
        ));
    }
    let Some(s) = js::as_str(value) else {
        return Err(err::type_error("value.match is not a function"));
    };
    let ok = s.chars().enumerate().all(|(i, c)| {
        c.is_ascii_alphabetic() || c == '$' || c == '_' || (i > 0 && c.is_ascii_digit())
    });
    if !ok {
        return Err(abi_arg(
            ctx,
            &format!("invalid identifier \"{s}\""),
            "value",
            value,
        ));
    }
    Ok(value.clone())
}

/// `parseGas(value, params)`: sets `params.gas`, returns the signature before `@`.
fn parse_gas(ctx: &mut Context, value: &str, params: &JsObject) -> JsResult<String> {
    put(ctx, params, "gas", JsValue::null())?;
    let comps: Vec<&str> = value.split('@').collect();
    if comps.len() == 1 {
        return Ok(value.to_owned());
    }
    if comps.len() > 2 {
        return Err(abi_arg(
            ctx,
            "invalid human-readable ABI signature",
            "value",
            &js::s(value),
        ));
    }
    if comps[1].is_empty() || !comps[1].bytes().all(|c| c.is_ascii_digit()) {
        return Err(abi_arg(
            ctx,
            "invalid human-readable ABI signature gas",
            "value",
            &js::s(value),
        ));
    }
    let gas = bignumber::s_from(&JsValue::undefined(), &[js::s(comps[1])], ctx)?;
    put(ctx, params, "gas", gas)?;
    Ok(comps[0].to_owned())
}

/// `parseModifiers(value, params)`.
fn parse_modifiers(ctx: &mut Context, value: &str, params: &JsObject) -> JsResult<()> {
    put(ctx, params, "constant", false.into())?;
    put(ctx, params, "payable", false.into())?;
    put(ctx, params, "stateMutability", js::s("nonpayable"))?;
    for modifier in value.split(' ') {
        match js_trim(modifier) {
            "constant" => put(ctx, params, "constant", true.into())?,
            "payable" => {
                put(ctx, params, "payable", true.into())?;
                put(ctx, params, "stateMutability", js::s("payable"))?;
            }
            "nonpayable" => {
                put(ctx, params, "payable", false.into())?;
                put(ctx, params, "stateMutability", js::s("nonpayable"))?;
            }
            "pure" => {
                put(ctx, params, "constant", true.into())?;
                put(ctx, params, "stateMutability", js::s("pure"))?;
            }
            "view" => {
                put(ctx, params, "constant", true.into())?;
                put(ctx, params, "stateMutability", js::s("view"))?;
            }
            "external" | "public" | "" => {}
            _ => warn(ctx, &format!("unknown modifier: {modifier}"))?,
        }
    }
    Ok(())
}

struct State {
    constant: bool,
    payable: bool,
    mutability: JsValue,
}

/// `verifyState(value)`.
fn verify_state(ctx: &mut Context, value: &JsValue) -> JsResult<State> {
    let sm = prop(ctx, value, "stateMutability")?;
    let constant = prop(ctx, value, "constant")?;
    let payable = prop(ctx, value, "payable")?;
    let ty = prop(ctx, value, "type")?;
    if !js::is_nullish(&sm) {
        let c = is_str(&sm, "view") || is_str(&sm, "pure");
        let shown = to_str(ctx, &sm)?;
        if !js::is_nullish(&constant) && constant.to_boolean() != c {
            return Err(abi_arg(
                ctx,
                &format!("cannot have constant function with mutability {shown}"),
                "value",
                value,
            ));
        }
        let p = is_str(&sm, "payable");
        if !js::is_nullish(&payable) && payable.to_boolean() != p {
            return Err(abi_arg(
                ctx,
                &format!("cannot have payable function with mutability {shown}"),
                "value",
                value,
            ));
        }
        return Ok(State {
            constant: c,
            payable: p,
            mutability: sm,
        });
    }
    if !js::is_nullish(&payable) {
        let p = payable.to_boolean();
        if js::is_nullish(&constant) && !p && !is_str(&ty, "constructor") {
            return Err(abi_arg(
                ctx,
                "unable to determine stateMutability",
                "value",
                value,
            ));
        }
        let c = constant.to_boolean();
        let m = if c {
            "view"
        } else if p {
            "payable"
        } else {
            "nonpayable"
        };
        if p && c {
            return Err(abi_arg(
                ctx,
                "cannot have constant payable function",
                "value",
                value,
            ));
        }
        return Ok(State {
            constant: c,
            payable: p,
            mutability: js::s(m),
        });
    }
    if !js::is_nullish(&constant) {
        let c = constant.to_boolean();
        return Ok(State {
            constant: c,
            payable: !c,
            mutability: js::s(if c { "view" } else { "payable" }),
        });
    }
    if !is_str(&ty, "constructor") {
        return Err(abi_arg(
            ctx,
            "unable to determine stateMutability",
            "value",
            value,
        ));
    }
    Ok(State {
        constant: false,
        payable: true,
        mutability: js::s("payable"),
    })
}

/// `value.inputs ? value.inputs.map(ParamType.fromObject) : []` (also for `outputs`).
fn params_of(ctx: &mut Context, value: &JsValue, key: &str) -> JsResult<JsValue> {
    let list = prop(ctx, value, key)?;
    if list.to_boolean() {
        map_array(ctx, &list, &format!("value.{key}"), param_from_object)
    } else {
        Ok(js::array(ctx, Vec::new()))
    }
}

fn gas_of(ctx: &mut Context, value: &JsValue) -> JsResult<JsValue> {
    let gas = prop(ctx, value, "gas")?;
    if gas.to_boolean() {
        bignumber::s_from(&JsValue::undefined(), &[gas], ctx)
    } else {
        Ok(JsValue::null())
    }
}

// ---------------------------------------------------------------- Fragment

fn is_fragment_of(ctx: &mut Context, value: &JsValue, ty: &str) -> JsResult<JsValue> {
    if !value.to_boolean() {
        return Ok(value.clone());
    }
    let f = prop(ctx, value, "_isFragment")?;
    if !f.to_boolean() {
        return Ok(f);
    }
    Ok(is_str(&prop(ctx, value, "type")?, ty).into())
}

fn is_fragment(ctx: &mut Context, value: &JsValue) -> JsResult<bool> {
    if !value.to_boolean() {
        return Ok(false);
    }
    Ok(prop(ctx, value, "_isFragment")?.to_boolean())
}

fn frag_ctor(_: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Err(err::make(
        ctx,
        V_ABI,
        "use a static from method",
        UNSUPPORTED_OPERATION,
        vec![("operation", P::str("new Fragment()"))],
    ))
}

/// `Fragment.from(value)`: a fragment, or `null` for `fallback`/`receive` JSON entries.
pub(crate) fn fragment_from(ctx: &mut Context, value: &JsValue) -> JsResult<JsValue> {
    if is_fragment(ctx, value)? {
        return Ok(value.clone());
    }
    if value.is_string() {
        return fragment_from_string(ctx, value);
    }
    fragment_from_object(ctx, value)
}

fn fragment_from_object(ctx: &mut Context, value: &JsValue) -> JsResult<JsValue> {
    if is_fragment(ctx, value)? {
        return Ok(value.clone());
    }
    let ty = prop(ctx, value, "type")?;
    match js::as_str(&ty).as_deref() {
        Some("function") => function_from_object(ctx, value),
        Some("event") => event_from_object(ctx, value),
        Some("constructor") => constructor_from_object(ctx, value),
        Some("error") => error_from_object(ctx, value),
        Some("fallback" | "receive") => Ok(JsValue::null()),
        _ => Err(abi_arg(ctx, "invalid fragment object", "value", value)),
    }
}

fn fragment_from_string(ctx: &mut Context, value: &JsValue) -> JsResult<JsValue> {
    let Some(s) = js::as_str(value) else {
        return Err(err::type_error("value.replace is not a function"));
    };
    // Whitespace to single spaces, a space before every "(" and after every ")".
    let mut spaced = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '(' => spaced.push_str(" ("),
            ')' => spaced.push_str(") "),
            c if js_space(c) => spaced.push(' '),
            c => spaced.push(c),
        }
    }
    let mut norm = String::with_capacity(spaced.len());
    for c in spaced.chars() {
        if c == ' ' && norm.ends_with(' ') {
            continue;
        }
        norm.push(c);
    }
    let v = js_trim(&norm);
    let first_word = v.split(' ').next().unwrap_or("");
    if first_word == "event" {
        return event_from_string(ctx, &js::s(js_trim(&v[5..])));
    }
    if first_word == "function" {
        return function_from_string(ctx, &js::s(js_trim(&v[8..])));
    }
    if js_trim(v.split('(').next().unwrap_or("")) == "constructor" {
        return constructor_from_string(ctx, &js::s(v));
    }
    if first_word == "error" {
        return error_from_string(ctx, &js::s(js_trim(&v[5..])));
    }
    Err(abi_arg(ctx, "unsupported fragment", "value", &js::s(v)))
}

fn string_arg(value: &JsValue, method: &str) -> JsResult<String> {
    js::as_str(value).ok_or_else(|| err::type_error(&format!("value.{method} is not a function")))
}

// ---- constructor

fn constructor_from_object(ctx: &mut Context, value: &JsValue) -> JsResult<JsValue> {
    if is_fragment_of(ctx, value, "constructor")?.to_boolean() {
        return Ok(value.clone());
    }
    let ty = prop(ctx, value, "type")?;
    if !is_str(&ty, "constructor") {
        return Err(abi_arg(ctx, "invalid constructor object", "value", value));
    }
    let state = verify_state(ctx, value)?;
    if state.constant {
        return Err(abi_arg(
            ctx,
            "constructor cannot be constant",
            "value",
            value,
        ));
    }
    let inputs = params_of(ctx, value, "inputs")?;
    let gas = gas_of(ctx, value)?;
    let proto = realm(ctx)?.constructor.clone();
    let props = vec![
        ("name", JsValue::null()),
        ("type", ty),
        ("inputs", inputs),
        ("payable", state.payable.into()),
        ("stateMutability", state.mutability),
        ("gas", gas),
    ];
    Ok(frozen(ctx, proto, props, "_isFragment")?.into())
}

fn constructor_from_string(ctx: &mut Context, value: &JsValue) -> JsResult<JsValue> {
    let s = string_arg(value, "split")?;
    let params = js::new_object(ctx);
    put(ctx, &params, "type", js::s("constructor"))?;
    let s = parse_gas(ctx, &s, &params)?;
    let Some((_, inside, after)) = paren_match(&s).filter(|m| js_trim(m.0) == "constructor") else {
        return Err(abi_arg(
            ctx,
            "invalid constructor string",
            "value",
            &js::s(&s),
        ));
    };
    let inputs = parse_params(ctx, js_trim(inside), false)?;
    put(ctx, &params, "inputs", inputs)?;
    parse_modifiers(ctx, js_trim(after), &params)?;
    constructor_from_object(ctx, &params.into())
}

/// `ConstructorFragment.from({payable: false, type: "constructor"})`: an Interface's
/// default `deploy`.
pub(crate) fn default_constructor(ctx: &mut Context) -> JsResult<JsValue> {
    let params = js::plain_object(
        ctx,
        vec![("payable", false.into()), ("type", js::s("constructor"))],
    );
    constructor_from_object(ctx, &params.into())
}

fn mutability_suffix(ctx: &mut Context, this: &JsValue) -> JsResult<Option<String>> {
    let sm = prop(ctx, this, "stateMutability")?;
    if sm.to_boolean() {
        if !is_str(&sm, "nonpayable") {
            return Ok(Some(to_str(ctx, &sm)?));
        }
        return Ok(None);
    }
    Ok(None)
}

fn gas_number(ctx: &mut Context, this: &JsValue) -> JsResult<JsValue> {
    let gas = prop(ctx, this, "gas")?;
    if gas.to_boolean() {
        js::call_method(ctx, &gas, "toNumber", &[])
    } else {
        Ok(JsValue::undefined())
    }
}

fn json_mutability(ctx: &mut Context, this: &JsValue) -> JsResult<JsValue> {
    let sm = prop(ctx, this, "stateMutability")?;
    Ok(if is_str(&sm, "nonpayable") {
        JsValue::undefined()
    } else {
        sm
    })
}

fn c_format(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let fmt = fmt_arg(ctx, &js::arg(args, 0), Fmt::Sighash)?;
    if fmt == Fmt::Json {
        let o = js::new_object(ctx);
        put(ctx, &o, "type", js::s("constructor"))?;
        let sm = json_mutability(ctx, this)?;
        put(ctx, &o, "stateMutability", sm)?;
        let payable = prop(ctx, this, "payable")?;
        put(ctx, &o, "payable", payable)?;
        let gas = gas_number(ctx, this)?;
        put(ctx, &o, "gas", gas)?;
        let inputs = prop(ctx, this, "inputs")?;
        let inputs = json_list(ctx, &inputs)?;
        put(ctx, &o, "inputs", inputs)?;
        return Ok(js::s(&stringify(ctx, o)?));
    }
    if fmt == Fmt::Sighash {
        return Err(err::make(
            ctx,
            V_ABI,
            "cannot format a constructor for sighash",
            UNSUPPORTED_OPERATION,
            vec![("operation", P::str("format(sighash)"))],
        ));
    }
    let inputs = prop(ctx, this, "inputs")?;
    let mut out = format!(
        "constructor({}) ",
        format_list(ctx, &inputs, fmt, fmt.join())?
    );
    if let Some(sm) = mutability_suffix(ctx, this)? {
        out.push_str(&sm);
        out.push(' ');
    }
    Ok(js::s(js_trim(&out)))
}

fn c_from(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let v = js::arg(args, 0);
    if v.is_string() {
        return constructor_from_string(ctx, &v);
    }
    constructor_from_object(ctx, &v)
}

fn c_from_object(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    constructor_from_object(ctx, &js::arg(args, 0))
}

fn c_from_string(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    constructor_from_string(ctx, &js::arg(args, 0))
}

fn c_is(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    is_fragment_of(ctx, &js::arg(args, 0), "constructor")
}

// ---- function

fn function_from_object(ctx: &mut Context, value: &JsValue) -> JsResult<JsValue> {
    if is_fragment_of(ctx, value, "function")?.to_boolean() {
        return Ok(value.clone());
    }
    let ty = prop(ctx, value, "type")?;
    if !is_str(&ty, "function") {
        return Err(abi_arg(ctx, "invalid function object", "value", value));
    }
    let state = verify_state(ctx, value)?;
    let name = prop(ctx, value, "name")?;
    let name = verify_identifier(ctx, &name)?;
    let inputs = params_of(ctx, value, "inputs")?;
    let outputs = params_of(ctx, value, "outputs")?;
    let gas = gas_of(ctx, value)?;
    let proto = realm(ctx)?.function.clone();
    let props = vec![
        ("type", ty),
        ("name", name),
        ("constant", state.constant.into()),
        ("inputs", inputs),
        ("outputs", outputs),
        ("payable", state.payable.into()),
        ("stateMutability", state.mutability),
        ("gas", gas),
    ];
    Ok(frozen(ctx, proto, props, "_isFragment")?.into())
}

/// `FunctionFragment.fromString(value)`.
pub(crate) fn function_from_string(ctx: &mut Context, value: &JsValue) -> JsResult<JsValue> {
    let s = string_arg(value, "split")?;
    let params = js::new_object(ctx);
    put(ctx, &params, "type", js::s("function"))?;
    let s = parse_gas(ctx, &s, &params)?;
    let comps: Vec<&str> = s.split(" returns ").collect();
    if comps.len() > 2 {
        return Err(abi_arg(ctx, "invalid function string", "value", &js::s(&s)));
    }
    let Some((name, inside, after)) = paren_match(comps[0]) else {
        return Err(abi_arg(
            ctx,
            "invalid function signature",
            "value",
            &js::s(&s),
        ));
    };
    let name = js::s(js_trim(name));
    put(ctx, &params, "name", name.clone())?;
    if name.to_boolean() {
        verify_identifier(ctx, &name)?;
    }
    let inputs = parse_params(ctx, inside, false)?;
    put(ctx, &params, "inputs", inputs)?;
    parse_modifiers(ctx, js_trim(after), &params)?;
    let outputs = if let Some(ret) = comps.get(1) {
        let Some((b, inside, a)) = paren_match(ret) else {
            return Err(err::type_error(
                "Cannot read properties of null (reading '1')",
            ));
        };
        if !js_trim(b).is_empty() || !js_trim(a).is_empty() {
            return Err(abi_arg(ctx, "unexpected tokens", "value", &js::s(&s)));
        }
        parse_params(ctx, inside, false)?
    } else {
        js::array(ctx, Vec::new())
    };
    put(ctx, &params, "outputs", outputs)?;
    function_from_object(ctx, &params.into())
}

fn f_format(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let fmt = fmt_arg(ctx, &js::arg(args, 0), Fmt::Sighash)?;
    if fmt == Fmt::Json {
        let o = js::new_object(ctx);
        put(ctx, &o, "type", js::s("function"))?;
        for key in ["name", "constant"] {
            let v = prop(ctx, this, key)?;
            put(ctx, &o, key, v)?;
        }
        let sm = json_mutability(ctx, this)?;
        put(ctx, &o, "stateMutability", sm)?;
        let payable = prop(ctx, this, "payable")?;
        put(ctx, &o, "payable", payable)?;
        let gas = gas_number(ctx, this)?;
        put(ctx, &o, "gas", gas)?;
        for key in ["inputs", "outputs"] {
            let list = prop(ctx, this, key)?;
            let list = json_list(ctx, &list)?;
            put(ctx, &o, key, list)?;
        }
        return Ok(js::s(&stringify(ctx, o)?));
    }
    let mut out = String::new();
    if fmt != Fmt::Sighash {
        out.push_str("function ");
    }
    let name = prop(ctx, this, "name")?;
    out.push_str(&to_str(ctx, &name)?);
    let inputs = prop(ctx, this, "inputs")?;
    out.push('(');
    out.push_str(&format_list(ctx, &inputs, fmt, fmt.join())?);
    out.push_str(") ");
    if fmt != Fmt::Sighash {
        let sm = prop(ctx, this, "stateMutability")?;
        if sm.to_boolean() {
            if !is_str(&sm, "nonpayable") {
                out.push_str(&to_str(ctx, &sm)?);
                out.push(' ');
            }
        } else if prop(ctx, this, "constant")?.to_boolean() {
            out.push_str("view ");
        }
        let outputs = prop(ctx, this, "outputs")?;
        if outputs.to_boolean() && prop(ctx, &outputs, "length")?.to_boolean() {
            out.push_str("returns (");
            out.push_str(&format_list(ctx, &outputs, fmt, ", ")?);
            out.push_str(") ");
        }
        let gas = prop(ctx, this, "gas")?;
        if !js::is_nullish(&gas) {
            let g = js::call_method(ctx, &gas, "toString", &[])?;
            out.push('@');
            out.push_str(&to_str(ctx, &g)?);
            out.push(' ');
        }
    }
    Ok(js::s(js_trim(&out)))
}

fn f_from(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let v = js::arg(args, 0);
    if v.is_string() {
        return function_from_string(ctx, &v);
    }
    function_from_object(ctx, &v)
}

fn f_from_object(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    function_from_object(ctx, &js::arg(args, 0))
}

fn f_from_string(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    function_from_string(ctx, &js::arg(args, 0))
}

fn f_is(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    is_fragment_of(ctx, &js::arg(args, 0), "function")
}

// ---- event

fn event_from_object(ctx: &mut Context, value: &JsValue) -> JsResult<JsValue> {
    if is_fragment_of(ctx, value, "event")?.to_boolean() {
        return Ok(value.clone());
    }
    let ty = prop(ctx, value, "type")?;
    if !is_str(&ty, "event") {
        return Err(abi_arg(ctx, "invalid event object", "value", value));
    }
    let name = prop(ctx, value, "name")?;
    let name = verify_identifier(ctx, &name)?;
    let anonymous = prop(ctx, value, "anonymous")?;
    let inputs = params_of(ctx, value, "inputs")?;
    let proto = realm(ctx)?.event.clone();
    let props = vec![
        ("name", name),
        ("anonymous", anonymous),
        ("inputs", inputs),
        ("type", js::s("event")),
    ];
    Ok(frozen(ctx, proto, props, "_isFragment")?.into())
}

/// `EventFragment.fromString(value)`.
pub(crate) fn event_from_string(ctx: &mut Context, value: &JsValue) -> JsResult<JsValue> {
    let s = string_arg(value, "match")?;
    let Some((name, inside, after)) = paren_match(&s) else {
        return Err(abi_arg(ctx, "invalid event string", "value", &js::s(&s)));
    };
    let mut anonymous = false;
    for modifier in after.split(' ') {
        match js_trim(modifier) {
            "anonymous" => anonymous = true,
            "" => {}
            _ => warn(ctx, &format!("unknown modifier: {modifier}"))?,
        }
    }
    let inputs = parse_params(ctx, inside, true)?;
    let params = js::plain_object(
        ctx,
        vec![
            ("name", js::s(js_trim(name))),
            ("anonymous", anonymous.into()),
            ("inputs", inputs),
            ("type", js::s("event")),
        ],
    );
    event_from_object(ctx, &params.into())
}

fn e_format(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let fmt = fmt_arg(ctx, &js::arg(args, 0), Fmt::Sighash)?;
    if fmt == Fmt::Json {
        let o = js::new_object(ctx);
        put(ctx, &o, "type", js::s("event"))?;
        for key in ["anonymous", "name"] {
            let v = prop(ctx, this, key)?;
            put(ctx, &o, key, v)?;
        }
        let inputs = prop(ctx, this, "inputs")?;
        let inputs = json_list(ctx, &inputs)?;
        put(ctx, &o, "inputs", inputs)?;
        return Ok(js::s(&stringify(ctx, o)?));
    }
    let mut out = String::new();
    if fmt != Fmt::Sighash {
        out.push_str("event ");
    }
    let name = prop(ctx, this, "name")?;
    out.push_str(&to_str(ctx, &name)?);
    let inputs = prop(ctx, this, "inputs")?;
    out.push('(');
    out.push_str(&format_list(ctx, &inputs, fmt, fmt.join())?);
    out.push_str(") ");
    if fmt != Fmt::Sighash && prop(ctx, this, "anonymous")?.to_boolean() {
        out.push_str("anonymous ");
    }
    Ok(js::s(js_trim(&out)))
}

fn e_from(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let v = js::arg(args, 0);
    if v.is_string() {
        return event_from_string(ctx, &v);
    }
    event_from_object(ctx, &v)
}

fn e_from_object(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    event_from_object(ctx, &js::arg(args, 0))
}

fn e_from_string(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    event_from_string(ctx, &js::arg(args, 0))
}

fn e_is(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    is_fragment_of(ctx, &js::arg(args, 0), "event")
}

// ---- error

fn check_forbidden(ctx: &mut Context, fragment: JsValue) -> JsResult<JsValue> {
    let sig = call_format(ctx, &fragment, None)?;
    if sig == "Error(string)" || sig == "Panic(uint256)" {
        return Err(abi_arg(
            ctx,
            &format!("cannot specify user defined {sig} error"),
            "fragment",
            &fragment,
        ));
    }
    Ok(fragment)
}

fn error_from_object(ctx: &mut Context, value: &JsValue) -> JsResult<JsValue> {
    if is_fragment_of(ctx, value, "error")?.to_boolean() {
        return Ok(value.clone());
    }
    let ty = prop(ctx, value, "type")?;
    if !is_str(&ty, "error") {
        return Err(abi_arg(ctx, "invalid error object", "value", value));
    }
    let name = prop(ctx, value, "name")?;
    let name = verify_identifier(ctx, &name)?;
    let inputs = params_of(ctx, value, "inputs")?;
    let proto = realm(ctx)?.error.clone();
    let props = vec![("type", ty), ("name", name), ("inputs", inputs)];
    let f = frozen(ctx, proto, props, "_isFragment")?;
    check_forbidden(ctx, f.into())
}

fn error_from_string(ctx: &mut Context, value: &JsValue) -> JsResult<JsValue> {
    let s = string_arg(value, "match")?;
    let params = js::new_object(ctx);
    put(ctx, &params, "type", js::s("error"))?;
    let Some((name, inside, _)) = paren_match(&s) else {
        return Err(abi_arg(ctx, "invalid error signature", "value", &js::s(&s)));
    };
    let name = js::s(js_trim(name));
    put(ctx, &params, "name", name.clone())?;
    if name.to_boolean() {
        verify_identifier(ctx, &name)?;
    }
    let inputs = parse_params(ctx, inside, false)?;
    put(ctx, &params, "inputs", inputs)?;
    let f = error_from_object(ctx, &params.into())?;
    check_forbidden(ctx, f)
}

fn r_format(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let fmt = fmt_arg(ctx, &js::arg(args, 0), Fmt::Sighash)?;
    if fmt == Fmt::Json {
        let o = js::new_object(ctx);
        put(ctx, &o, "type", js::s("error"))?;
        let name = prop(ctx, this, "name")?;
        put(ctx, &o, "name", name)?;
        let inputs = prop(ctx, this, "inputs")?;
        let inputs = json_list(ctx, &inputs)?;
        put(ctx, &o, "inputs", inputs)?;
        return Ok(js::s(&stringify(ctx, o)?));
    }
    let mut out = String::new();
    if fmt != Fmt::Sighash {
        out.push_str("error ");
    }
    let name = prop(ctx, this, "name")?;
    out.push_str(&to_str(ctx, &name)?);
    let inputs = prop(ctx, this, "inputs")?;
    out.push('(');
    out.push_str(&format_list(ctx, &inputs, fmt, fmt.join())?);
    out.push_str(") ");
    Ok(js::s(js_trim(&out)))
}

fn r_from(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let v = js::arg(args, 0);
    if v.is_string() {
        return error_from_string(ctx, &v);
    }
    error_from_object(ctx, &v)
}

fn r_from_object(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    error_from_object(ctx, &js::arg(args, 0))
}

fn r_from_string(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    error_from_string(ctx, &js::arg(args, 0))
}

fn r_is(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    is_fragment_of(ctx, &js::arg(args, 0), "error")
}

// ---- Fragment statics

fn g_from(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    fragment_from(ctx, &js::arg(args, 0))
}

fn g_from_object(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    fragment_from_object(ctx, &js::arg(args, 0))
}

fn g_from_string(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    fragment_from_string(ctx, &js::arg(args, 0))
}

fn g_is(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(is_fragment(ctx, &js::arg(args, 0))?.into())
}

// ---------------------------------------------------------------- build

/// Builds the fragment classes into `exports` (`ParamType`, `Fragment`,
/// `ConstructorFragment`, `FunctionFragment`, `EventFragment`, `ErrorFragment`,
/// `FormatTypes`) and registers their prototypes in the realm.
pub(crate) fn build(ctx: &mut Context, exports: &JsObject) -> JsResult<()> {
    let (param, param_proto) = class(ctx, "ParamType", 2, p_ctor, None)?;
    enum_method(
        ctx,
        &param_proto,
        "format",
        1,
        NativeFunction::from_fn_ptr(p_format),
    )?;
    statics(
        ctx,
        &param,
        &[
            ("from", 2, p_from),
            ("fromObject", 1, p_from_object),
            ("fromString", 2, p_from_string),
            ("isParamType", 1, p_is_param_type),
        ],
    )?;

    let fragment = class(ctx, "Fragment", 2, frag_ctor, None)?;
    statics(
        ctx,
        &fragment.0,
        &[
            ("from", 1, g_from),
            ("fromObject", 1, g_from_object),
            ("fromString", 1, g_from_string),
            ("isFragment", 1, g_is),
        ],
    )?;
    let event = class(ctx, "EventFragment", 2, frag_ctor, Some(&fragment))?;
    enum_method(
        ctx,
        &event.1,
        "format",
        1,
        NativeFunction::from_fn_ptr(e_format),
    )?;
    statics(
        ctx,
        &event.0,
        &[
            ("from", 1, e_from),
            ("fromObject", 1, e_from_object),
            ("fromString", 1, e_from_string),
            ("isEventFragment", 1, e_is),
        ],
    )?;
    let constructor = class(ctx, "ConstructorFragment", 2, frag_ctor, Some(&fragment))?;
    enum_method(
        ctx,
        &constructor.1,
        "format",
        1,
        NativeFunction::from_fn_ptr(c_format),
    )?;
    statics(
        ctx,
        &constructor.0,
        &[
            ("from", 1, c_from),
            ("fromObject", 1, c_from_object),
            ("fromString", 1, c_from_string),
            ("isConstructorFragment", 1, c_is),
        ],
    )?;
    let function = class(ctx, "FunctionFragment", 2, frag_ctor, Some(&constructor))?;
    enum_method(
        ctx,
        &function.1,
        "format",
        1,
        NativeFunction::from_fn_ptr(f_format),
    )?;
    statics(
        ctx,
        &function.0,
        &[
            ("from", 1, f_from),
            ("fromObject", 1, f_from_object),
            ("fromString", 1, f_from_string),
            ("isFunctionFragment", 1, f_is),
        ],
    )?;
    let error = class(ctx, "ErrorFragment", 2, frag_ctor, Some(&fragment))?;
    enum_method(
        ctx,
        &error.1,
        "format",
        1,
        NativeFunction::from_fn_ptr(r_format),
    )?;
    statics(
        ctx,
        &error.0,
        &[
            ("from", 1, r_from),
            ("fromObject", 1, r_from_object),
            ("fromString", 1, r_from_string),
            ("isErrorFragment", 1, r_is),
        ],
    )?;

    ctx.realm().host_defined_mut().insert(FragmentRealm {
        param: param_proto,
        constructor: constructor.1.clone(),
        function: function.1.clone(),
        event: event.1.clone(),
        error: error.1.clone(),
    });

    let format_types = format_types(ctx)?;
    let list: [(&str, JsValue); 7] = [
        ("ParamType", param.into()),
        ("Fragment", fragment.0.into()),
        ("ConstructorFragment", constructor.0.into()),
        ("FunctionFragment", function.0.into()),
        ("EventFragment", event.0.into()),
        ("ErrorFragment", error.0.into()),
        ("FormatTypes", format_types.into()),
    ];
    for (name, v) in list {
        put(ctx, exports, name, v)?;
    }
    Ok(())
}
