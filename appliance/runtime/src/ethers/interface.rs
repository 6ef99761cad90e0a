//! `@ethersproject/abi` `Interface` (with `LogDescription`, `TransactionDescription`,
//! `ErrorDescription` and `Indexed`) and `@ethersproject/properties` `deepCopy`.
//!
//! The Interface is built from fragments (`fragments.rs`); encoding and decoding go
//! through `defaultAbiCoder` (`abi.rs`) with the fragments' `ParamType` objects, as in
//! ethers. Like ethers, every method reads the Interface's own JS properties
//! (`functions`, `events`, `errors`, `fragments`, `deploy`) and the fragments' properties,
//! so it behaves the same after a caller mutates those plain objects.

use std::collections::HashSet;

use boa_engine::object::builtins::JsArray;
use boa_engine::object::{FunctionObjectBuilder, IntegrityLevel, JsObject};
use boa_engine::property::{PropertyDescriptor, PropertyKey};
use boa_engine::{
    Context, JsData, JsError, JsNativeError, JsResult, JsValue, NativeFunction, js_string,
};
use boa_gc::{Finalize, Trace};

use super::abi;
use super::address;
use super::bignumber;
use super::bytes;
use super::err::{self, INVALID_ARGUMENT, P, UNEXPECTED_ARGUMENT, V_ABI, V_PROPERTIES};
use super::fragments::{self, call_format, class, enum_method, is_str, prop, put, to_str};
use super::js;
use super::strings;

type Fn = fn(&JsValue, &[JsValue], &mut Context) -> JsResult<JsValue>;

#[derive(Clone, Trace, Finalize, JsData)]
struct InterfaceRealm {
    interface: JsObject,
    log: JsObject,
    tx: JsObject,
    error: JsObject,
    indexed: JsObject,
    coder: JsObject,
}

fn realm(ctx: &Context) -> JsResult<InterfaceRealm> {
    ctx.realm()
        .host_defined()
        .get::<InterfaceRealm>()
        .cloned()
        .ok_or_else(|| {
            JsNativeError::typ()
                .with_message("ethers Interface is not installed in this realm")
                .into()
        })
}

fn abi_arg(ctx: &mut Context, message: &str, name: &str, value: &JsValue) -> JsError {
    err::arg(ctx, V_ABI, message, name, P::Js(value.clone()))
}

// ---------------------------------------------------------------- deepCopy

/// The enumerable string keys a `for…in` loop visits (own first, then inherited).
pub(crate) fn for_in_keys(ctx: &mut Context, obj: &JsObject) -> JsResult<Vec<String>> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut out = Vec::new();
    let mut cur = Some(obj.clone());
    let mut depth = 0;
    while let Some(o) = cur {
        depth += 1;
        if depth > 10_000 {
            break;
        }
        for key in o.own_property_keys(ctx)? {
            let name = match &key {
                PropertyKey::String(s) => s.to_std_string_lossy(),
                PropertyKey::Index(i) => i.get().to_string(),
                PropertyKey::Symbol(_) => continue,
            };
            if !seen.insert(name.clone()) {
                continue;
            }
            let enumerable = o
                .borrow()
                .properties()
                .get(&key)
                .is_none_or(|d| d.enumerable().unwrap_or(false));
            if enumerable {
                out.push(name);
            }
        }
        cur = o.prototype();
    }
    Ok(out)
}

fn opaque(value: &JsValue) -> bool {
    value.is_undefined()
        || value.is_null()
        || value.is_boolean()
        || value.is_number()
        || value.is_string()
        || value.is_bigint()
        || value.as_object().is_some_and(|o| o.is_callable())
}

fn cannot_copy(ctx: &mut Context, value: &JsValue) -> JsError {
    let ty = value.type_of();
    err::arg(
        ctx,
        V_PROPERTIES,
        &format!("Cannot deepCopy {ty}"),
        "object",
        P::Js(value.clone()),
    )
}

fn deep_frozen(ctx: &mut Context, value: &JsValue) -> JsResult<bool> {
    if opaque(value) {
        return Ok(true);
    }
    let Some(obj) = value.as_object() else {
        return Err(cannot_copy(ctx, value));
    };
    if !obj.test_integrity_level(IntegrityLevel::Frozen, ctx)? {
        return Ok(false);
    }
    for key in js::object_keys(ctx, &obj)? {
        let Ok(v) = obj.get(js::jstr(&key), ctx) else {
            continue;
        };
        if !deep_frozen(ctx, &v)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `deepCopy(object)`: frozen (deeply) values as they are, arrays copied and frozen,
/// other objects copied into plain objects of read-only properties (inherited
/// enumerable ones included).
pub(crate) fn deep_copy(ctx: &mut Context, value: &JsValue) -> JsResult<JsValue> {
    if deep_frozen(ctx, value)? {
        return Ok(value.clone());
    }
    let Some(obj) = value.as_object() else {
        return Err(cannot_copy(ctx, value));
    };
    if obj.is_array() {
        let items = js::array_items(ctx, value)?;
        let mut out = Vec::with_capacity(items.len());
        for item in &items {
            out.push(deep_copy(ctx, item)?);
        }
        let arr = js::array(ctx, out);
        if let Some(a) = arr.as_object() {
            js::freeze(ctx, &a)?;
        }
        return Ok(arr);
    }
    let result = js::new_object(ctx);
    for key in for_in_keys(ctx, &obj)? {
        let v = obj.get(js::jstr(&key), ctx)?;
        if v.is_undefined() {
            continue;
        }
        let v = deep_copy(ctx, &v)?;
        js::read_only(ctx, &result, &key, v)?;
    }
    Ok(result.into())
}

// ---------------------------------------------------------------- Descriptions

/// `new XDescription(info)`: each (for…in) key of `info`, deep-copied, as an assignment.
fn description(ctx: &mut Context, proto: JsObject, info: &[(&str, JsValue)]) -> JsResult<JsValue> {
    let obj = js::with_proto(proto);
    for (k, v) in info {
        let v = deep_copy(ctx, v)?;
        put(ctx, &obj, k, v)?;
    }
    Ok(obj.into())
}

fn d_ctor(new_target: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let Some(nt) = new_target.as_object() else {
        return Err(err::type_error(
            "Class constructor cannot be invoked without 'new'",
        ));
    };
    let proto = match nt.get(js_string!("prototype"), ctx)?.as_object() {
        Some(p) => p,
        None => js::new_object(ctx),
    };
    let obj = js::with_proto(proto);
    let info = js::arg(args, 0);
    if let Some(info) = info.as_object() {
        for key in for_in_keys(ctx, &info)? {
            let v = info.get(js::jstr(&key), ctx)?;
            let v = deep_copy(ctx, &v)?;
            obj.set(js::jstr(&key), v, true, ctx)?;
        }
    }
    Ok(obj.into())
}

fn indexed_is(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let v = js::arg(args, 0);
    if !v.to_boolean() {
        return Ok(false.into());
    }
    Ok(prop(ctx, &v, "_isIndexed")?.to_boolean().into())
}

// ---------------------------------------------------------------- helpers

fn id_hex(ctx: &mut Context, value: &JsValue) -> JsResult<String> {
    let b = strings::to_utf8_bytes(ctx, value, &JsValue::undefined())?;
    Ok(bytes::hex(&strings::keccak(&b)))
}

/// `Interface.getSighash(fragment)`: the first 4 bytes of `id(fragment.format())`.
fn sighash(ctx: &mut Context, fragment: &JsValue) -> JsResult<String> {
    let sig = call_format(ctx, fragment, None)?;
    let h = id_hex(ctx, &js::s(&sig))?;
    Ok(h[..10].to_owned())
}

/// `Interface.getEventTopic(fragment)`: `id(fragment.format())`.
fn topic(ctx: &mut Context, fragment: &JsValue) -> JsResult<String> {
    let sig = call_format(ctx, fragment, None)?;
    id_hex(ctx, &js::s(&sig))
}

fn encode(ctx: &mut Context, types: &JsValue, values: &JsValue) -> JsResult<String> {
    let out = abi::f_encode(&JsValue::undefined(), &[types.clone(), values.clone()], ctx)?;
    to_str(ctx, &out)
}

fn decode(ctx: &mut Context, types: &JsValue, data: JsValue, loose: bool) -> JsResult<JsValue> {
    abi::f_decode(
        &JsValue::undefined(),
        &[types.clone(), data, loose.into()],
        ctx,
    )
}

/// `values || []`.
fn or_empty(ctx: &mut Context, values: &JsValue) -> JsValue {
    if values.to_boolean() {
        values.clone()
    } else {
        js::array(ctx, Vec::new())
    }
}

fn error_ctor(ctx: &Context) -> JsValue {
    ctx.intrinsics().constructors().error().constructor().into()
}

fn is_error(ctx: &mut Context, value: &JsValue) -> JsResult<bool> {
    if !value.is_object() {
        return Ok(false);
    }
    let e = error_ctor(ctx);
    value.instance_of(&e, ctx)
}

/// ethers' `wrapAccessError`, thrown by a getter on every access.
fn throwing_getter(ctx: &mut Context, property: String, error: JsValue) -> JsObject {
    FunctionObjectBuilder::new(
        ctx.realm(),
        NativeFunction::from_copy_closure_with_captures(
            |_, _, (property, error): &(JsValue, JsValue), ctx| {
                let p = to_str(ctx, property)?;
                let wrap = JsNativeError::error()
                    .with_message(format!(
                        "deferred error during ABI decoding triggered accessing {p}"
                    ))
                    .into_opaque(ctx);
                wrap.set(js_string!("error"), error.clone(), false, ctx)?;
                Err(JsError::from_opaque(wrap.into()))
            },
            (js::s(&property), error),
        ),
    )
    .build()
    .into()
}

fn define_getter(ctx: &mut Context, obj: &JsObject, key: PropertyKey, g: JsObject) -> JsResult<()> {
    obj.define_property_or_throw(
        key,
        PropertyDescriptor::builder()
            .get(g)
            .enumerable(true)
            .configurable(false),
        ctx,
    )?;
    Ok(())
}

// ---------------------------------------------------------------- lookups

#[derive(Clone, Copy, PartialEq, Eq)]
enum Bucket {
    Function,
    Event,
    Error,
}

impl Bucket {
    fn key(self) -> &'static str {
        match self {
            Bucket::Function => "functions",
            Bucket::Event => "events",
            Bucket::Error => "errors",
        }
    }
    fn noun(self) -> &'static str {
        match self {
            Bucket::Function => "function",
            Bucket::Event => "event",
            Bucket::Error => "error",
        }
    }
}

/// `getFunction` / `getEvent` / `getError` by sighash (topic), bare name or signature.
fn lookup(ctx: &mut Context, this: &JsValue, query: &JsValue, b: Bucket) -> JsResult<JsValue> {
    let bucket = prop(ctx, this, b.key())?;
    let Some(bucket_obj) = bucket.as_object() else {
        return Err(err::type_error("invalid Interface"));
    };
    let noun = b.noun();
    if bytes::is_hex_string(query, None) {
        let q = js::as_str(query).unwrap_or_default();
        let wanted = if b == Bucket::Event {
            q.to_lowercase()
        } else {
            q
        };
        for name in fragments_keys(ctx, &bucket_obj)? {
            let f = bucket_obj.get(js::jstr(&name), ctx)?;
            let h = if b == Bucket::Event {
                topic(ctx, &f)?
            } else {
                sighash(ctx, &f)?
            };
            if h == wanted {
                return Ok(f);
            }
        }
        let (arg, shown) = if b == Bucket::Event {
            ("topichash", js::s(&wanted))
        } else {
            ("sighash", query.clone())
        };
        return Err(abi_arg(ctx, &format!("no matching {noun}"), arg, &shown));
    }
    let Some(q) = js::as_str(query) else {
        return Err(err::type_error(
            "nameOrSignatureOrSighash.indexOf is not a function",
        ));
    };
    if !q.contains('(') {
        let name = fragments::js_trim(&q).to_owned();
        let matching: Vec<String> = js::object_keys(ctx, &bucket_obj)?
            .into_iter()
            .filter(|k| k.split('(').next() == Some(name.as_str()))
            .collect();
        if matching.is_empty() {
            return Err(abi_arg(
                ctx,
                &format!("no matching {noun}"),
                "name",
                &js::s(&name),
            ));
        }
        if matching.len() > 1 {
            return Err(abi_arg(
                ctx,
                &format!("multiple matching {noun}s"),
                "name",
                &js::s(&name),
            ));
        }
        return bucket_obj.get(js::jstr(&matching[0]), ctx);
    }
    let parsed = if b == Bucket::Event {
        fragments::event_from_string(ctx, query)?
    } else {
        fragments::function_from_string(ctx, query)?
    };
    let sig = call_format(ctx, &parsed, None)?;
    let result = bucket_obj.get(js::jstr(&sig), ctx)?;
    if !result.to_boolean() {
        return Err(abi_arg(
            ctx,
            &format!("no matching {noun}"),
            "signature",
            query,
        ));
    }
    Ok(result)
}

/// `for (const name in bucket)`.
fn fragments_keys(ctx: &mut Context, obj: &JsObject) -> JsResult<Vec<String>> {
    for_in_keys(ctx, obj)
}

fn function_arg(ctx: &mut Context, this: &JsValue, v: &JsValue) -> JsResult<JsValue> {
    if v.is_string() {
        lookup(ctx, this, v, Bucket::Function)
    } else {
        Ok(v.clone())
    }
}

fn event_arg(ctx: &mut Context, this: &JsValue, v: &JsValue) -> JsResult<JsValue> {
    if v.is_string() {
        lookup(ctx, this, v, Bucket::Event)
    } else {
        Ok(v.clone())
    }
}

fn error_arg(ctx: &mut Context, this: &JsValue, v: &JsValue) -> JsResult<JsValue> {
    if v.is_string() {
        lookup(ctx, this, v, Bucket::Error)
    } else {
        Ok(v.clone())
    }
}

/// `this.getSighash(fragmentOrString)`.
fn get_sighash(ctx: &mut Context, this: &JsValue, v: &JsValue) -> JsResult<String> {
    let fragment = if v.is_string() {
        match lookup(ctx, this, v, Bucket::Function) {
            Ok(f) => f,
            Err(first) => match lookup(ctx, this, v, Bucket::Error) {
                Ok(f) => f,
                Err(_) => return Err(first),
            },
        }
    } else {
        v.clone()
    };
    sighash(ctx, &fragment)
}

fn get_event_topic(ctx: &mut Context, this: &JsValue, v: &JsValue) -> JsResult<String> {
    let f = event_arg(ctx, this, v)?;
    topic(ctx, &f)
}

// ---------------------------------------------------------------- constructor

fn i_ctor(new_target: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let Some(nt) = new_target.as_object() else {
        return Err(err::type_error(
            "Class constructor Interface cannot be invoked without 'new'",
        ));
    };
    let r = realm(ctx)?;
    let proto = match nt.get(js_string!("prototype"), ctx)?.as_object() {
        Some(p) => p,
        None => r.interface.clone(),
    };
    let this = js::with_proto(proto);
    let arg = js::arg(args, 0);
    let abi = match js::as_str(&arg) {
        Some(text) => js::json_parse(ctx, &text)?,
        None => arg,
    };
    if !js::is_array(&abi) {
        return Err(err::type_error("abi.map is not a function"));
    }
    let mut list = Vec::new();
    for item in js::array_items(ctx, &abi)? {
        let f = fragments::fragment_from(ctx, &item)?;
        if !js::is_nullish(&f) {
            list.push(f);
        }
    }
    let fragments = js::array(ctx, list.clone());
    js::read_only(ctx, &this, "fragments", fragments)?;
    js::read_only(ctx, &this, "_abiCoder", r.coder.clone().into())?;
    let mut buckets = Vec::new();
    for key in ["functions", "errors", "events", "structs"] {
        let o = js::new_object(ctx);
        js::read_only(ctx, &this, key, o.clone().into())?;
        buckets.push(o);
    }
    let this_v: JsValue = this.clone().into();
    for f in &list {
        let ty = prop(ctx, f, "type")?;
        let bucket = match js::as_str(&ty).as_deref() {
            Some("constructor") => {
                if prop(ctx, &this_v, "deploy")?.to_boolean() {
                    fragments::warn(ctx, "duplicate definition - constructor")?;
                } else {
                    js::read_only(ctx, &this, "deploy", f.clone())?;
                }
                continue;
            }
            Some("function") => &buckets[0],
            Some("event") => &buckets[2],
            Some("error") => &buckets[1],
            _ => continue,
        };
        let sig = call_format(ctx, f, None)?;
        if bucket.get(js::jstr(&sig), ctx)?.to_boolean() {
            fragments::warn(ctx, &format!("duplicate definition - {sig}"))?;
            continue;
        }
        bucket.set(js::jstr(&sig), f.clone(), true, ctx)?;
    }
    if !prop(ctx, &this_v, "deploy")?.to_boolean() {
        let d = fragments::default_constructor(ctx)?;
        js::read_only(ctx, &this, "deploy", d)?;
    }
    js::read_only(ctx, &this, "_isInterface", true.into())?;
    Ok(this_v)
}

// ---------------------------------------------------------------- methods

fn m_format(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let given = js::arg(args, 0);
    let format = if given.to_boolean() {
        given
    } else {
        js::s("full")
    };
    if is_str(&format, "sighash") {
        return Err(abi_arg(
            ctx,
            "interface does not support formatting sighash",
            "format",
            &format,
        ));
    }
    let list = prop(ctx, this, "fragments")?;
    let mut out = Vec::new();
    for f in js::array_items(ctx, &list)? {
        let m = prop(ctx, &f, "format")?;
        let Some(m) = m.as_callable() else {
            return Err(err::type_error("fragment.format is not a function"));
        };
        out.push(m.call(&f, std::slice::from_ref(&format), ctx)?);
    }
    if is_str(&format, "json") {
        let mut parsed = Vec::with_capacity(out.len());
        for j in &out {
            let text = to_str(ctx, j)?;
            parsed.push(js::json_parse(ctx, &text)?);
        }
        let arr = js::array(ctx, parsed);
        return Ok(js::s(&js::json_stringify(ctx, &arr)?.unwrap_or_default()));
    }
    Ok(js::array(ctx, out))
}

fn m_get_function(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    lookup(ctx, this, &js::arg(args, 0), Bucket::Function)
}

fn m_get_event(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    lookup(ctx, this, &js::arg(args, 0), Bucket::Event)
}

fn m_get_error(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    lookup(ctx, this, &js::arg(args, 0), Bucket::Error)
}

fn m_get_sighash(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(js::s(&get_sighash(ctx, this, &js::arg(args, 0))?))
}

fn m_get_event_topic(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(js::s(&get_event_topic(ctx, this, &js::arg(args, 0))?))
}

fn m_decode_params(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    decode(ctx, &js::arg(args, 0), js::arg(args, 1), false)
}

fn m_encode_params(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(js::s(&encode(ctx, &js::arg(args, 0), &js::arg(args, 1))?))
}

fn m_encode_deploy(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let deploy = prop(ctx, this, "deploy")?;
    let inputs = prop(ctx, &deploy, "inputs")?;
    let values = or_empty(ctx, &js::arg(args, 0));
    Ok(js::s(&encode(ctx, &inputs, &values)?))
}

/// `hexlify(bytes.slice(from))` as a hex string.
fn tail_hex(b: &[u8], from: usize) -> JsValue {
    js::s(&bytes::hex(b.get(from..).unwrap_or(&[])))
}

fn head_hex(b: &[u8]) -> String {
    bytes::hex(&b[..b.len().min(4)])
}

/// The shared body of `decodeFunctionData` and `decodeErrorResult`.
fn decode_data(
    ctx: &mut Context,
    this: &JsValue,
    fragment: &JsValue,
    data: &JsValue,
    noun: &str,
) -> JsResult<JsValue> {
    let b = bytes::arrayify(ctx, data)?;
    let expected = get_sighash(ctx, this, fragment)?;
    if head_hex(&b) != expected {
        let name = prop(ctx, fragment, "name")?;
        let name = to_str(ctx, &name)?;
        return Err(abi_arg(
            ctx,
            &format!("data signature does not match {noun} {name}."),
            "data",
            &js::s(&bytes::hex(&b)),
        ));
    }
    let inputs = prop(ctx, fragment, "inputs")?;
    decode(ctx, &inputs, tail_hex(&b, 4), false)
}

/// The shared body of `encodeFunctionData` and `encodeErrorResult`.
fn encode_data(
    ctx: &mut Context,
    this: &JsValue,
    fragment: &JsValue,
    values: &JsValue,
) -> JsResult<JsValue> {
    let head = get_sighash(ctx, this, fragment)?;
    let inputs = prop(ctx, fragment, "inputs")?;
    let values = or_empty(ctx, values);
    let body = encode(ctx, &inputs, &values)?;
    Ok(js::s(&format!("{head}{}", &body[2..])))
}

fn m_decode_error_result(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let f = error_arg(ctx, this, &js::arg(args, 0))?;
    decode_data(ctx, this, &f, &js::arg(args, 1), "error")
}

fn m_encode_error_result(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let f = error_arg(ctx, this, &js::arg(args, 0))?;
    encode_data(ctx, this, &f, &js::arg(args, 1))
}

fn m_decode_function_data(
    this: &JsValue,
    args: &[JsValue],
    ctx: &mut Context,
) -> JsResult<JsValue> {
    let f = function_arg(ctx, this, &js::arg(args, 0))?;
    decode_data(ctx, this, &f, &js::arg(args, 1), "function")
}

fn m_encode_function_data(
    this: &JsValue,
    args: &[JsValue],
    ctx: &mut Context,
) -> JsResult<JsValue> {
    let f = function_arg(ctx, this, &js::arg(args, 0))?;
    encode_data(ctx, this, &f, &js::arg(args, 1))
}

fn m_decode_function_result(
    this: &JsValue,
    args: &[JsValue],
    ctx: &mut Context,
) -> JsResult<JsValue> {
    let f = function_arg(ctx, this, &js::arg(args, 0))?;
    let data = js::arg(args, 1);
    let b = bytes::arrayify(ctx, &data)?;
    let mut reason = JsValue::null();
    let mut message = String::new();
    let mut error_args = JsValue::null();
    let mut error_name = JsValue::null();
    let mut error_signature = JsValue::null();
    match b.len() % 32 {
        0 => {
            let outputs = prop(ctx, &f, "outputs")?;
            if let Ok(v) = decode(ctx, &outputs, js::s(&bytes::hex(&b)), false) {
                return Ok(v);
            }
        }
        4 => {
            let selector = head_hex(&b);
            let builtin = match selector.as_str() {
                "0x08c379a0" => Some(("Error", "Error(string)", "string")),
                "0x4e487b71" => Some(("Panic", "Panic(uint256)", "uint256")),
                _ => None,
            };
            if let Some((name, sig, ty)) = builtin {
                let types = js::array(ctx, vec![js::s(ty)]);
                let args_v = decode(ctx, &types, tail_hex(&b, 4), false)?;
                let first = prop(ctx, &args_v, "0")?;
                error_args = args_v;
                error_name = js::s(name);
                error_signature = js::s(sig);
                if name == "Error" {
                    reason = first.clone();
                    let quoted =
                        js::json_stringify(ctx, &first)?.unwrap_or_else(|| "undefined".to_owned());
                    message = format!(
                        "; VM Exception while processing transaction: reverted with reason string {quoted}"
                    );
                } else {
                    let code = to_str(ctx, &first)?;
                    message = format!(
                        "; VM Exception while processing transaction: reverted with panic code {code}"
                    );
                }
            } else if let Ok(e) = lookup(ctx, this, &js::s(&selector), Bucket::Error) {
                let decoded = prop(ctx, &e, "inputs")
                    .and_then(|inputs| decode(ctx, &inputs, tail_hex(&b, 4), false));
                if let Ok(v) = decoded {
                    error_args = v;
                    error_name = prop(ctx, &e, "name")?;
                    if let Ok(sig) = call_format(ctx, &e, None) {
                        error_signature = js::s(&sig);
                    }
                }
            }
        }
        _ => {}
    }
    let method = call_format(ctx, &f, None)?;
    let data_hex = bytes::hexlify(ctx, &data)?;
    Err(err::make(
        ctx,
        V_ABI,
        &format!("call revert exception{message}"),
        "CALL_EXCEPTION",
        vec![
            ("method", P::str(&method)),
            ("data", P::str(&data_hex)),
            ("errorArgs", P::Js(error_args)),
            ("errorName", P::Js(error_name)),
            ("errorSignature", P::Js(error_signature)),
            ("reason", P::Js(reason)),
        ],
    ))
}

fn m_encode_function_result(
    this: &JsValue,
    args: &[JsValue],
    ctx: &mut Context,
) -> JsResult<JsValue> {
    let f = function_arg(ctx, this, &js::arg(args, 0))?;
    let outputs = prop(ctx, &f, "outputs")?;
    let values = or_empty(ctx, &js::arg(args, 1));
    Ok(js::s(&encode(ctx, &outputs, &values)?))
}

/// `encodeTopic(param, value)` of `encodeFilterTopics`.
fn encode_topic(ctx: &mut Context, param: &JsValue, value: &JsValue) -> JsResult<JsValue> {
    let ty = prop(ctx, param, "type")?;
    let ty = to_str(ctx, &ty)?;
    if ty == "string" {
        return Ok(js::s(&id_hex(ctx, value)?));
    }
    if ty == "bytes" {
        let h = bytes::hexlify(ctx, value)?;
        let b = bytes::arrayify(ctx, &js::s(&h))?;
        return Ok(js::s(&bytes::hex(&strings::keccak(&b))));
    }
    let mut value = value.clone();
    if ty == "bool"
        && let Some(b) = value.as_boolean()
    {
        value = js::s(if b { "0x01" } else { "0x00" });
    }
    if ty.starts_with("int") || ty.starts_with("uint") {
        value = js::s(&bignumber::from_value_hex(ctx, &value)?);
    }
    if ty == "address" {
        let types = js::array(ctx, vec![js::s("address")]);
        let values = js::array(ctx, vec![value.clone()]);
        encode(ctx, &types, &values)?;
    }
    let h = bytes::hexlify(ctx, &value)?;
    Ok(js::s(&bytes::hex_zero_pad(ctx, &js::s(&h), 32)?))
}

fn m_encode_filter_topics(
    this: &JsValue,
    args: &[JsValue],
    ctx: &mut Context,
) -> JsResult<JsValue> {
    let f = event_arg(ctx, this, &js::arg(args, 0))?;
    let values = js::arg(args, 1);
    let inputs = prop(ctx, &f, "inputs")?;
    let n_values = prop(ctx, &values, "length")?.to_number(ctx)?;
    let n_inputs = prop(ctx, &inputs, "length")?.to_number(ctx)?;
    if n_values > n_inputs {
        let sig = call_format(ctx, &f, None)?;
        return Err(err::make(
            ctx,
            V_ABI,
            &format!("too many arguments for {sig}"),
            UNEXPECTED_ARGUMENT,
            vec![("argument", P::str("values")), ("value", P::Js(values))],
        ));
    }
    let mut topics: Vec<JsValue> = Vec::new();
    if !prop(ctx, &f, "anonymous")?.to_boolean() {
        topics.push(js::s(&get_event_topic(ctx, this, &f)?));
    }
    let params = js::array_items(ctx, &inputs)?;
    for (index, value) in js::array_items(ctx, &values)?.iter().enumerate() {
        let param = params.get(index).cloned().unwrap_or_default();
        let pname = prop(ctx, &param, "name")?;
        let label = format!("contract.{}", to_str(ctx, &pname)?);
        if !prop(ctx, &param, "indexed")?.to_boolean() {
            if !js::is_nullish(value) {
                return Err(abi_arg(
                    ctx,
                    "cannot filter non-indexed parameters; must be null",
                    &label,
                    value,
                ));
            }
            continue;
        }
        if js::is_nullish(value) {
            topics.push(JsValue::null());
            continue;
        }
        let base = prop(ctx, &param, "baseType")?;
        if is_str(&base, "array") || is_str(&base, "tuple") {
            return Err(abi_arg(
                ctx,
                "filtering with tuples or arrays not supported",
                &label,
                value,
            ));
        }
        if js::is_array(value) {
            let mut list = Vec::new();
            for v in js::array_items(ctx, value)? {
                list.push(encode_topic(ctx, &param, &v)?);
            }
            topics.push(js::array(ctx, list));
        } else {
            topics.push(encode_topic(ctx, &param, value)?);
        }
    }
    while topics.last().is_some_and(JsValue::is_null) {
        topics.pop();
    }
    Ok(js::array(ctx, topics))
}

fn m_encode_event_log(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let f = event_arg(ctx, this, &js::arg(args, 0))?;
    let values = js::arg(args, 1);
    let mut topics = Vec::new();
    let mut data_types = Vec::new();
    let mut data_values = Vec::new();
    if !prop(ctx, &f, "anonymous")?.to_boolean() {
        topics.push(js::s(&get_event_topic(ctx, this, &f)?));
    }
    let inputs = prop(ctx, &f, "inputs")?;
    let n_values = prop(ctx, &values, "length")?;
    let n_inputs = prop(ctx, &inputs, "length")?;
    if !JsValue::strict_equals(&n_values, &n_inputs) {
        return Err(abi_arg(
            ctx,
            "event arguments/values mismatch",
            "values",
            &values,
        ));
    }
    for (index, param) in js::array_items(ctx, &inputs)?.iter().enumerate() {
        let value = prop(ctx, &values, &index.to_string())?;
        if prop(ctx, param, "indexed")?.to_boolean() {
            let ty = prop(ctx, param, "type")?;
            let base = prop(ctx, param, "baseType")?;
            if is_str(&ty, "string") {
                topics.push(js::s(&id_hex(ctx, &value)?));
            } else if is_str(&ty, "bytes") {
                let b = bytes::arrayify(ctx, &value)?;
                topics.push(js::s(&bytes::hex(&strings::keccak(&b))));
            } else if is_str(&base, "tuple") || is_str(&base, "array") {
                return Err(err::plain("not implemented"));
            } else {
                let types = js::array(ctx, vec![ty]);
                let vals = js::array(ctx, vec![value]);
                topics.push(js::s(&encode(ctx, &types, &vals)?));
            }
        } else {
            data_types.push(param.clone());
            data_values.push(value);
        }
    }
    let types = js::array(ctx, data_types);
    let vals = js::array(ctx, data_values);
    let data = encode(ctx, &types, &vals)?;
    let topics = js::array(ctx, topics);
    Ok(js::plain_object(ctx, vec![("data", js::s(&data)), ("topics", topics)]).into())
}

/// `decodeEventLog(fragment, data, topics)` for a resolved fragment.
fn decode_event_log(
    ctx: &mut Context,
    this: &JsValue,
    f: &JsValue,
    data: &JsValue,
    topics: &JsValue,
) -> JsResult<JsValue> {
    let mut topics = topics.clone();
    if !js::is_nullish(&topics) && !prop(ctx, f, "anonymous")?.to_boolean() {
        let hash = get_event_topic(ctx, this, f)?;
        let t0 = prop(ctx, &topics, "0")?;
        let ok = bytes::is_hex_string(&t0, Some(32))
            && js::as_str(&t0).is_some_and(|s| s.to_lowercase() == hash);
        if !ok {
            return Err(err::make(
                ctx,
                V_ABI,
                "fragment/topic mismatch",
                INVALID_ARGUMENT,
                vec![
                    ("argument", P::str("topics[0]")),
                    ("expected", P::str(&hash)),
                    ("value", P::Js(t0)),
                ],
            ));
        }
        topics = js::call_method(ctx, &topics, "slice", &[JsValue::from(1)])?;
    }
    let inputs = prop(ctx, f, "inputs")?;
    let inputs = js::array_items(ctx, &inputs)?;
    let mut indexed = Vec::new();
    let mut non_indexed = Vec::new();
    let mut dynamic = Vec::new();
    for param in &inputs {
        if prop(ctx, param, "indexed")?.to_boolean() {
            let ty = prop(ctx, param, "type")?;
            let base = prop(ctx, param, "baseType")?;
            if is_str(&ty, "string")
                || is_str(&ty, "bytes")
                || is_str(&base, "tuple")
                || is_str(&base, "array")
            {
                let name = prop(ctx, param, "name")?;
                let o = js::plain_object(ctx, vec![("type", js::s("bytes32")), ("name", name)]);
                indexed.push(fragments::param_from_object(ctx, &o.into())?);
                dynamic.push(true);
            } else {
                indexed.push(param.clone());
                dynamic.push(false);
            }
        } else {
            non_indexed.push(param.clone());
            dynamic.push(false);
        }
    }
    let result_indexed = if js::is_nullish(&topics) {
        None
    } else {
        let mut all = Vec::new();
        for t in js::array_items(ctx, &topics)? {
            all.extend(bytes::arrayify(ctx, &t)?);
        }
        let types = js::array(ctx, indexed);
        Some(decode(ctx, &types, js::s(&bytes::hex(&all)), false)?)
    };
    let types = js::array(ctx, non_indexed);
    let result_non_indexed = decode(ctx, &types, data.clone(), true)?;

    let result = JsArray::new(ctx)?;
    let result_obj: JsObject = result.clone().into();
    let indexed_proto = realm(ctx)?.indexed.clone();
    let (mut ni, mut ii) = (0usize, 0usize);
    let mut errors: Vec<(usize, JsValue)> = Vec::new();
    for (index, param) in inputs.iter().enumerate() {
        let value = if prop(ctx, param, "indexed")?.to_boolean() {
            match &result_indexed {
                None => description(
                    ctx,
                    indexed_proto.clone(),
                    &[("_isIndexed", true.into()), ("hash", JsValue::null())],
                )?,
                Some(ri) if dynamic[index] => {
                    let h = ri
                        .as_object()
                        .map_or(Ok(JsValue::undefined()), |o| o.get(ii, ctx))?;
                    ii += 1;
                    description(
                        ctx,
                        indexed_proto.clone(),
                        &[("_isIndexed", true.into()), ("hash", h)],
                    )?
                }
                Some(ri) => {
                    let got = ri
                        .as_object()
                        .map_or(Ok(JsValue::undefined()), |o| o.get(ii, ctx));
                    ii += 1;
                    match got {
                        Ok(v) => v,
                        Err(e) => e.into_opaque(ctx)?,
                    }
                }
            }
        } else {
            let got = result_non_indexed
                .as_object()
                .map_or(Ok(JsValue::undefined()), |o| o.get(ni, ctx));
            ni += 1;
            match got {
                Ok(v) => v,
                Err(e) => e.into_opaque(ctx)?,
            }
        };
        result_obj.set(index, value.clone(), true, ctx)?;
        let value_is_error = is_error(ctx, &value)?;
        if value_is_error {
            errors.push((index, value.clone()));
        }
        let name = prop(ctx, param, "name")?;
        if name.to_boolean() {
            let key = name.to_property_key(ctx)?;
            if js::is_nullish(&result_obj.get(key.clone(), ctx)?) {
                if value_is_error {
                    let shown = js::json_stringify(ctx, &name)?.unwrap_or_default();
                    let g = throwing_getter(ctx, format!("property {shown}"), value);
                    define_getter(ctx, &result_obj, key, g)?;
                } else {
                    result_obj.set(key, value, true, ctx)?;
                }
            }
        }
    }
    for (i, e) in errors {
        let g = throwing_getter(ctx, format!("index {i}"), e);
        define_getter(ctx, &result_obj, PropertyKey::from(i), g)?;
    }
    js::freeze(ctx, &result_obj)?;
    Ok(result_obj.into())
}

fn m_decode_event_log(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let f = event_arg(ctx, this, &js::arg(args, 0))?;
    decode_event_log(ctx, this, &f, &js::arg(args, 1), &js::arg(args, 2))
}

/// `str.substring(from, to)` over characters (the strings here are hex).
fn substring(s: &str, from: usize, to: Option<usize>) -> String {
    let it = s.chars().skip(from);
    match to {
        Some(t) => it.take(t.saturating_sub(from)).collect(),
        None => it.collect(),
    }
}

fn m_parse_transaction(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let tx = js::arg(args, 0);
    let data = prop(ctx, &tx, "data")?;
    let Some(data) = js::as_str(&data) else {
        return Err(err::type_error("tx.data.substring is not a function"));
    };
    let selector = substring(&data, 0, Some(10)).to_lowercase();
    let f = lookup(ctx, this, &js::s(&selector), Bucket::Function)?;
    if !f.to_boolean() {
        return Ok(JsValue::null());
    }
    let inputs = prop(ctx, &f, "inputs")?;
    let args_v = decode(
        ctx,
        &inputs,
        js::s(&format!("0x{}", substring(&data, 10, None))),
        false,
    )?;
    let name = prop(ctx, &f, "name")?;
    let signature = call_format(ctx, &f, None)?;
    let sighash = get_sighash(ctx, this, &f)?;
    let value = prop(ctx, &tx, "value")?;
    let value = if value.to_boolean() {
        value
    } else {
        js::s("0")
    };
    let value = bignumber::s_from(&JsValue::undefined(), &[value], ctx)?;
    let proto = realm(ctx)?.tx.clone();
    description(
        ctx,
        proto,
        &[
            ("args", args_v),
            ("functionFragment", f),
            ("name", name),
            ("signature", js::s(&signature)),
            ("sighash", js::s(&sighash)),
            ("value", value),
        ],
    )
}

fn m_parse_log(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let log = js::arg(args, 0);
    let topics = prop(ctx, &log, "topics")?;
    let t0 = prop(ctx, &topics, "0")?;
    let f = lookup(ctx, this, &t0, Bucket::Event)?;
    if !f.to_boolean() || prop(ctx, &f, "anonymous")?.to_boolean() {
        return Ok(JsValue::null());
    }
    let name = prop(ctx, &f, "name")?;
    let signature = call_format(ctx, &f, None)?;
    let topic = get_event_topic(ctx, this, &f)?;
    let data = prop(ctx, &log, "data")?;
    let args_v = decode_event_log(ctx, this, &f, &data, &topics)?;
    let proto = realm(ctx)?.log.clone();
    description(
        ctx,
        proto,
        &[
            ("eventFragment", f),
            ("name", name),
            ("signature", js::s(&signature)),
            ("topic", js::s(&topic)),
            ("args", args_v),
        ],
    )
}

fn m_parse_error(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let hex = bytes::hexlify(ctx, &js::arg(args, 0))?;
    let selector = substring(&hex, 0, Some(10)).to_lowercase();
    let f = lookup(ctx, this, &js::s(&selector), Bucket::Error)?;
    if !f.to_boolean() {
        return Ok(JsValue::null());
    }
    let inputs = prop(ctx, &f, "inputs")?;
    let args_v = decode(
        ctx,
        &inputs,
        js::s(&format!("0x{}", substring(&hex, 10, None))),
        false,
    )?;
    let name = prop(ctx, &f, "name")?;
    let signature = call_format(ctx, &f, None)?;
    let sighash = get_sighash(ctx, this, &f)?;
    let proto = realm(ctx)?.error.clone();
    description(
        ctx,
        proto,
        &[
            ("args", args_v),
            ("errorFragment", f),
            ("name", name),
            ("signature", js::s(&signature)),
            ("sighash", js::s(&sighash)),
        ],
    )
}

// ---- statics

fn s_get_abi_coder(_: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(realm(ctx)?.coder.clone().into())
}

fn s_get_address(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(js::s(&address::get_address(ctx, &js::arg(args, 0))?))
}

fn s_get_sighash(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(js::s(&sighash(ctx, &js::arg(args, 0))?))
}

fn s_get_event_topic(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(js::s(&topic(ctx, &js::arg(args, 0))?))
}

fn s_is_interface(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let v = js::arg(args, 0);
    if !v.to_boolean() {
        return Ok(false.into());
    }
    Ok(prop(ctx, &v, "_isInterface")?.to_boolean().into())
}

// ---------------------------------------------------------------- build

/// Builds `Interface`, `Indexed`, `LogDescription`, `TransactionDescription` and
/// `ErrorDescription` into `exports` (after `fragments::build`); `coder` is the
/// `defaultAbiCoder` object an Interface exposes as `_abiCoder`.
pub(crate) fn build(ctx: &mut Context, exports: &JsObject, coder: JsObject) -> JsResult<()> {
    let (iface, iface_proto) = class(ctx, "Interface", 1, i_ctor, None)?;
    let methods: [(&str, usize, Fn); 21] = [
        ("format", 1, m_format),
        ("getFunction", 1, m_get_function),
        ("getEvent", 1, m_get_event),
        ("getError", 1, m_get_error),
        ("getSighash", 1, m_get_sighash),
        ("getEventTopic", 1, m_get_event_topic),
        ("_decodeParams", 2, m_decode_params),
        ("_encodeParams", 2, m_encode_params),
        ("encodeDeploy", 1, m_encode_deploy),
        ("decodeErrorResult", 2, m_decode_error_result),
        ("encodeErrorResult", 2, m_encode_error_result),
        ("decodeFunctionData", 2, m_decode_function_data),
        ("encodeFunctionData", 2, m_encode_function_data),
        ("decodeFunctionResult", 2, m_decode_function_result),
        ("encodeFunctionResult", 2, m_encode_function_result),
        ("encodeFilterTopics", 2, m_encode_filter_topics),
        ("encodeEventLog", 2, m_encode_event_log),
        ("decodeEventLog", 3, m_decode_event_log),
        ("parseTransaction", 1, m_parse_transaction),
        ("parseLog", 1, m_parse_log),
        ("parseError", 1, m_parse_error),
    ];
    for (name, len, f) in methods {
        enum_method(ctx, &iface_proto, name, len, NativeFunction::from_fn_ptr(f))?;
    }
    let statics: [(&str, usize, Fn); 5] = [
        ("getAbiCoder", 0, s_get_abi_coder),
        ("getAddress", 1, s_get_address),
        ("getSighash", 1, s_get_sighash),
        ("getEventTopic", 1, s_get_event_topic),
        ("isInterface", 1, s_is_interface),
    ];
    for (name, len, f) in statics {
        enum_method(ctx, &iface, name, len, NativeFunction::from_fn_ptr(f))?;
    }

    let description = class(ctx, "Description", 1, d_ctor, None)?;
    let log = class(ctx, "LogDescription", 1, d_ctor, Some(&description))?;
    let tx = class(ctx, "TransactionDescription", 1, d_ctor, Some(&description))?;
    let error = class(ctx, "ErrorDescription", 1, d_ctor, Some(&description))?;
    let indexed = class(ctx, "Indexed", 1, d_ctor, Some(&description))?;
    enum_method(
        ctx,
        &indexed.0,
        "isIndexed",
        1,
        NativeFunction::from_fn_ptr(indexed_is),
    )?;

    ctx.realm().host_defined_mut().insert(InterfaceRealm {
        interface: iface_proto,
        log: log.1,
        tx: tx.1,
        error: error.1,
        indexed: indexed.1,
        coder,
    });
    let list: [(&str, JsObject); 5] = [
        ("Interface", iface),
        ("Indexed", indexed.0),
        ("LogDescription", log.0),
        ("TransactionDescription", tx.0),
        ("ErrorDescription", error.0),
    ];
    for (name, v) in list {
        put(ctx, exports, name, v.into())?;
    }
    Ok(())
}
