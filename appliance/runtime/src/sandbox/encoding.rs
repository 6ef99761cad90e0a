//! `TextEncoder` / `TextDecoder`, UTF-8 only (as in the WHATWG Encoding standard for the
//! encoder; the decoder refuses other labels with a `RangeError`).

use boa_engine::object::builtins::JsUint8Array;
use boa_engine::object::{ConstructorBuilder, JsObject, ObjectInitializer};
use boa_engine::property::{Attribute, PropertyDescriptor};
use boa_engine::{Context, JsNativeError, JsResult, JsValue, NativeFunction, js_string};

use super::args::buffer_bytes;

/// Defines the globals `TextEncoder` and `TextDecoder`.
pub(crate) fn install(ctx: &mut Context) -> JsResult<()> {
    let mut encoder = ConstructorBuilder::new(ctx, NativeFunction::from_fn_ptr(new_encoder));
    encoder
        .name("TextEncoder")
        .length(0)
        .method(NativeFunction::from_fn_ptr(encode), js_string!("encode"), 1)
        .method(
            NativeFunction::from_fn_ptr(encode_into),
            js_string!("encodeInto"),
            2,
        )
        .property(
            js_string!("encoding"),
            js_string!("utf-8"),
            Attribute::READONLY,
        );
    let encoder = encoder.build();

    let mut decoder = ConstructorBuilder::new(ctx, NativeFunction::from_fn_ptr(new_decoder));
    decoder.name("TextDecoder").length(0).method(
        NativeFunction::from_fn_ptr(decode),
        js_string!("decode"),
        1,
    );
    let decoder = decoder.build();

    let attrs = Attribute::WRITABLE | Attribute::CONFIGURABLE;
    ctx.register_global_property(js_string!("TextEncoder"), encoder.constructor(), attrs)?;
    ctx.register_global_property(js_string!("TextDecoder"), decoder.constructor(), attrs)?;
    Ok(())
}

/// A new ordinary object whose prototype is `new_target.prototype` (`this` of a native
/// constructor is its `new_target`).
fn instance(new_target: &JsValue, name: &str, ctx: &mut Context) -> JsResult<JsObject> {
    let Some(ctor) = new_target.as_constructor() else {
        return Err(JsNativeError::typ()
            .with_message(format!("{name} constructor requires 'new'"))
            .into());
    };
    let proto = ctor.get(js_string!("prototype"), ctx)?;
    let obj = JsObject::with_object_proto(ctx.intrinsics());
    if let Some(proto) = proto.as_object() {
        obj.set_prototype(Some(proto));
    }
    Ok(obj)
}

fn new_encoder(this: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(instance(this, "TextEncoder", ctx)?.into())
}

/// The UTF-8 bytes of `String(value)` (lone surrogates become U+FFFD); `undefined` → "".
fn utf8_of(value: Option<&JsValue>, ctx: &mut Context) -> JsResult<String> {
    match value {
        None => Ok(String::new()),
        Some(v) if v.is_undefined() => Ok(String::new()),
        Some(v) => Ok(v.to_string(ctx)?.to_std_string_lossy()),
    }
}

fn encode(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let text = utf8_of(args.first(), ctx)?;
    Ok(JsUint8Array::from_iter(text.into_bytes(), ctx)?.into())
}

/// `encodeInto(source, destination)` → `{ read, written }` (UTF-16 units read, bytes
/// written); only whole characters are written.
fn encode_into(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let text = utf8_of(args.first(), ctx)?;
    let dest = args
        .get(1)
        .and_then(JsValue::as_object)
        .and_then(|o| JsUint8Array::from_object(o).ok())
        .ok_or_else(|| {
            JsNativeError::typ().with_message("encodeInto: destination must be a Uint8Array")
        })?;
    let room = dest.length(ctx)?;
    let (mut read, mut written) = (0usize, 0usize);
    for c in text.chars() {
        let mut buf = [0u8; 4];
        let bytes = c.encode_utf8(&mut buf).as_bytes();
        if written + bytes.len() > room {
            break;
        }
        for b in bytes {
            dest.set(written, *b, true, ctx)?;
            written += 1;
        }
        read += c.len_utf16();
    }
    let result = ObjectInitializer::new(ctx)
        .property(js_string!("read"), read, Attribute::all())
        .property(js_string!("written"), written, Attribute::all())
        .build();
    Ok(result.into())
}

fn new_decoder(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    if let Some(label) = args.first().filter(|v| !v.is_undefined()) {
        let label = label.to_string(ctx)?.to_std_string_escaped();
        let label = label.trim().to_ascii_lowercase();
        if !matches!(label.as_str(), "utf-8" | "utf8" | "unicode-1-1-utf-8") {
            return Err(JsNativeError::range()
                .with_message(format!(
                    "TextDecoder: unsupported encoding '{label}' (only utf-8)"
                ))
                .into());
        }
    }
    let (fatal, ignore_bom) = match args.get(1).and_then(JsValue::as_object) {
        Some(opts) => (
            opts.get(js_string!("fatal"), ctx)?.to_boolean(),
            opts.get(js_string!("ignoreBOM"), ctx)?.to_boolean(),
        ),
        None => (false, false),
    };
    let obj = instance(this, "TextDecoder", ctx)?;
    let props: [(&str, JsValue); 3] = [
        ("encoding", js_string!("utf-8").into()),
        ("fatal", fatal.into()),
        ("ignoreBOM", ignore_bom.into()),
    ];
    for (key, value) in props {
        let desc = PropertyDescriptor::builder()
            .value(value)
            .writable(false)
            .enumerable(false)
            .configurable(false);
        obj.define_property_or_throw(js_string!(key), desc, ctx)?;
    }
    Ok(obj.into())
}

fn decode(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let (fatal, ignore_bom) = match this.as_object() {
        Some(obj) => (
            obj.get(js_string!("fatal"), ctx)?.to_boolean(),
            obj.get(js_string!("ignoreBOM"), ctx)?.to_boolean(),
        ),
        None => (false, false),
    };
    let bytes = match args.first() {
        None => Vec::new(),
        Some(v) if v.is_undefined() => Vec::new(),
        Some(v) => buffer_bytes(v, ctx)?.ok_or_else(|| {
            JsNativeError::typ()
                .with_message("TextDecoder.decode: expected an ArrayBuffer or a view")
        })?,
    };
    let body = if !ignore_bom && bytes.starts_with(&[0xef, 0xbb, 0xbf]) {
        &bytes[3..]
    } else {
        &bytes[..]
    };
    let text = if fatal {
        std::str::from_utf8(body)
            .map_err(|e| {
                JsNativeError::typ().with_message(format!("TextDecoder: invalid UTF-8: {e}"))
            })?
            .to_owned()
    } else {
        String::from_utf8_lossy(body).into_owned()
    };
    Ok(js_string!(text).into())
}
