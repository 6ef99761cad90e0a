//! Small helpers over the boa API used by every part of the ethers subset.

use boa_engine::object::builtins::{JsArray, JsUint8Array};
use boa_engine::object::{FunctionObjectBuilder, IntegrityLevel, ObjectInitializer};
use boa_engine::property::{Attribute, PropertyDescriptor};
use boa_engine::{
    Context, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction, js_string,
};

use super::EthersRealm;

pub(crate) fn jstr(s: &str) -> JsString {
    JsString::from(s)
}

pub(crate) fn s(s: &str) -> JsValue {
    JsValue::from(JsString::from(s))
}

pub(crate) fn realm(ctx: &Context) -> JsResult<EthersRealm> {
    ctx.realm()
        .host_defined()
        .get::<EthersRealm>()
        .cloned()
        .ok_or_else(|| {
            JsNativeError::typ()
                .with_message("ethers is not installed in this realm")
                .into()
        })
}

pub(crate) fn u8array(ctx: &mut Context, bytes: &[u8]) -> JsResult<JsValue> {
    Ok(JsUint8Array::from_iter(bytes.iter().copied(), ctx)?.into())
}

pub(crate) fn array(ctx: &mut Context, items: Vec<JsValue>) -> JsValue {
    JsArray::from_iter(items, ctx).into()
}

/// An ordinary object with the given prototype.
pub(crate) fn with_proto(proto: JsObject) -> JsObject {
    let o = JsObject::with_null_proto();
    o.set_prototype(Some(proto));
    o
}

pub(crate) fn new_object(ctx: &mut Context) -> JsObject {
    JsObject::with_object_proto(ctx.intrinsics())
}

/// `JSON.stringify(value)` with the realm's original `JSON.stringify`; `None` for `undefined`.
pub(crate) fn json_stringify(ctx: &mut Context, value: &JsValue) -> JsResult<Option<String>> {
    let f = realm(ctx)?.stringify.clone();
    let out = f.call(&JsValue::undefined(), std::slice::from_ref(value), ctx)?;
    match out.as_string() {
        Some(t) => Ok(Some(t.to_std_string_lossy())),
        None => Ok(None),
    }
}

pub(crate) fn json_parse(ctx: &mut Context, text: &str) -> JsResult<JsValue> {
    let f = realm(ctx)?.parse.clone();
    f.call(&JsValue::undefined(), &[s(text)], ctx)
}

/// `JSON.stringify(string)`.
pub(crate) fn json_quote(ctx: &mut Context, text: &str) -> String {
    match json_stringify(ctx, &s(text)) {
        Ok(Some(t)) => t,
        _ => format!("\"{text}\""),
    }
}

/// Property `key` of `value` when it is an object, else `undefined`.
pub(crate) fn get(ctx: &mut Context, value: &JsValue, key: &str) -> JsResult<JsValue> {
    match value.as_object() {
        Some(o) => o.get(jstr(key), ctx),
        None => Ok(JsValue::undefined()),
    }
}

pub(crate) fn arg(args: &[JsValue], i: usize) -> JsValue {
    args.get(i).cloned().unwrap_or_default()
}

/// The Rust string of a JS string value.
pub(crate) fn as_str(value: &JsValue) -> Option<String> {
    value.as_string().map(|s| s.to_std_string_lossy())
}

/// `value == null` in JS.
pub(crate) fn is_nullish(value: &JsValue) -> bool {
    value.is_null_or_undefined()
}

/// `Object.keys(obj)` (own enumerable string keys, in order).
pub(crate) fn object_keys(ctx: &mut Context, obj: &JsObject) -> JsResult<Vec<String>> {
    let keys_fn = realm(ctx)?.object_keys.clone();
    let out = keys_fn.call(&JsValue::undefined(), &[obj.clone().into()], ctx)?;
    let arr = out
        .as_object()
        .ok_or_else(|| JsNativeError::typ().with_message("Object.keys failed"))?;
    let arr = JsArray::from_object(arr)?;
    let n = arr.length(ctx)?;
    let mut keys = Vec::with_capacity(n as usize);
    for i in 0..n {
        let k = arr.get(i, ctx)?;
        keys.push(k.to_string(ctx)?.to_std_string_lossy());
    }
    Ok(keys)
}

pub(crate) fn is_array(value: &JsValue) -> bool {
    value.as_object().is_some_and(|o| o.is_array())
}

/// The elements of a JS array (by `length` and index).
pub(crate) fn array_items(ctx: &mut Context, value: &JsValue) -> JsResult<Vec<JsValue>> {
    let Some(o) = value.as_object() else {
        return Ok(Vec::new());
    };
    let len = o.get(js_string!("length"), ctx)?.to_length(ctx)?;
    let mut out = Vec::with_capacity(len.min(4096) as usize);
    for i in 0..len {
        out.push(o.get(i, ctx)?);
    }
    Ok(out)
}

/// The items of array `value` as strings, each once, in the order JavaScript's default
/// `sort` gives (UTF-16 code units): the storage keys of an access-list entry as ethers
/// normalises them.
pub(crate) fn distinct_sorted_strings(ctx: &mut Context, value: &JsValue) -> JsResult<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for item in array_items(ctx, value)? {
        let s = item.to_string(ctx)?.to_std_string_lossy();
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
    Ok(out)
}

/// A method `name` with `length` defined non-enumerable on `obj`.
pub(crate) fn method(
    ctx: &mut Context,
    obj: &JsObject,
    name: &str,
    length: usize,
    f: NativeFunction,
) -> JsResult<()> {
    let func = FunctionObjectBuilder::new(ctx.realm(), f)
        .name(jstr(name))
        .length(length)
        .constructor(false)
        .build();
    obj.define_property_or_throw(
        jstr(name),
        PropertyDescriptor::builder()
            .value(func)
            .writable(true)
            .enumerable(false)
            .configurable(true),
        ctx,
    )?;
    Ok(())
}

/// A constructor `name` taking `length` arguments, as a transpiled class has it: its
/// `prototype` is `proto` (not writable), and `proto.constructor` is the constructor.
pub(crate) fn constructor(
    ctx: &mut Context,
    name: &str,
    length: usize,
    f: NativeFunction,
    proto: &JsObject,
) -> JsResult<JsObject> {
    let func: JsObject = FunctionObjectBuilder::new(ctx.realm(), f)
        .name(jstr(name))
        .length(length)
        .constructor(true)
        .build()
        .into();
    func.define_property_or_throw(
        js_string!("prototype"),
        PropertyDescriptor::builder()
            .value(proto.clone())
            .writable(false)
            .enumerable(false)
            .configurable(false),
        ctx,
    )?;
    proto.define_property_or_throw(
        js_string!("constructor"),
        PropertyDescriptor::builder()
            .value(func.clone())
            .writable(true)
            .enumerable(false)
            .configurable(true),
        ctx,
    )?;
    Ok(func)
}

/// A read-only, enumerable data property (ethers' `defineReadOnly`).
pub(crate) fn read_only(
    ctx: &mut Context,
    obj: &JsObject,
    name: &str,
    value: JsValue,
) -> JsResult<()> {
    obj.define_property_or_throw(
        jstr(name),
        PropertyDescriptor::builder()
            .value(value)
            .writable(false)
            .enumerable(true)
            .configurable(false),
        ctx,
    )?;
    Ok(())
}

/// A getter on a prototype (non-enumerable, configurable, like a transpiled class getter).
pub(crate) fn getter(
    ctx: &mut Context,
    obj: &JsObject,
    name: &str,
    f: NativeFunction,
) -> JsResult<()> {
    let func = FunctionObjectBuilder::new(ctx.realm(), f)
        .name(jstr(&format!("get {name}")))
        .length(0)
        .constructor(false)
        .build();
    obj.define_property_or_throw(
        jstr(name),
        PropertyDescriptor::builder()
            .get(func)
            .enumerable(false)
            .configurable(true),
        ctx,
    )?;
    Ok(())
}

pub(crate) fn freeze(ctx: &mut Context, obj: &JsObject) -> JsResult<()> {
    obj.set_integrity_level(IntegrityLevel::Frozen, ctx)?;
    Ok(())
}

/// A plain object with enumerable data properties in the given order.
pub(crate) fn plain_object(ctx: &mut Context, props: Vec<(&str, JsValue)>) -> JsObject {
    let mut init = ObjectInitializer::new(ctx);
    for (k, v) in props {
        init.property(jstr(k), v, Attribute::all());
    }
    init.build()
}

/// Calls `obj[name](...args)`.
pub(crate) fn call_method(
    ctx: &mut Context,
    obj: &JsValue,
    name: &str,
    args: &[JsValue],
) -> JsResult<JsValue> {
    let f = get(ctx, obj, name)?;
    match f.as_callable() {
        Some(f) => f.call(obj, args, ctx),
        None => Err(JsNativeError::typ()
            .with_message(format!("{name} is not a function"))
            .into()),
    }
}
