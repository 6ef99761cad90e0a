//! Argument helpers shared by the native functions: option objects, strings, byte sources.

use boa_engine::object::JsObject;
use boa_engine::object::builtins::{JsArrayBuffer, JsDataView, JsTypedArray};
use boa_engine::{Context, JsNativeError, JsResult, JsString, JsValue};

/// The first argument as an options object, or a `TypeError` naming `what`.
pub(crate) fn options(args: &[JsValue], what: &str) -> JsResult<JsObject> {
    args.first().and_then(JsValue::as_object).ok_or_else(|| {
        JsNativeError::typ()
            .with_message(format!("{what} expects an options object"))
            .into()
    })
}

/// A required string property of `obj`.
pub(crate) fn string_prop(
    obj: &JsObject,
    key: &str,
    what: &str,
    ctx: &mut Context,
) -> JsResult<String> {
    optional_string_prop(obj, key, what, ctx)?.ok_or_else(|| {
        JsNativeError::typ()
            .with_message(format!("{what}: `{key}` is required"))
            .into()
    })
}

/// A string property of `obj` that may be `undefined` or `null`.
pub(crate) fn optional_string_prop(
    obj: &JsObject,
    key: &str,
    what: &str,
    ctx: &mut Context,
) -> JsResult<Option<String>> {
    let value = obj.get(JsString::from(key), ctx)?;
    if value.is_null_or_undefined() {
        return Ok(None);
    }
    match value.as_string() {
        Some(s) => Ok(Some(s.to_std_string_escaped())),
        None => Err(JsNativeError::typ()
            .with_message(format!("{what}: `{key}` must be a string"))
            .into()),
    }
}

/// The bytes of a `BufferSource` (typed array, `DataView` or `ArrayBuffer`), or `None` when
/// `value` is none of those.
pub(crate) fn buffer_bytes(value: &JsValue, ctx: &mut Context) -> JsResult<Option<Vec<u8>>> {
    let Some(obj) = value.as_object() else {
        return Ok(None);
    };
    let (buffer, offset, len) = if let Ok(typed) = JsTypedArray::from_object(obj.clone()) {
        let buffer = typed.buffer(ctx)?;
        (buffer, typed.byte_offset(ctx)?, typed.byte_length(ctx)?)
    } else if let Ok(view) = JsDataView::from_object(obj.clone()) {
        let buffer = view.buffer(ctx)?;
        (
            buffer,
            view.byte_offset(ctx)? as usize,
            view.byte_length(ctx)? as usize,
        )
    } else if let Ok(buffer) = JsArrayBuffer::from_object(obj.clone()) {
        let len = buffer.byte_length();
        (obj.clone().into(), 0, len)
    } else {
        return Ok(None);
    };
    let data = buffer
        .as_object()
        .and_then(|b| JsArrayBuffer::from_object(b).ok())
        .and_then(|b| {
            b.data()
                .map(|d| d.get(offset..offset + len).map(<[u8]>::to_vec))
        })
        .flatten();
    match data {
        Some(bytes) => Ok(Some(bytes)),
        None => Err(JsNativeError::typ()
            .with_message("the buffer is detached or shared")
            .into()),
    }
}

/// Bytes from a `BufferSource` or a plain array of numbers 0..=255.
pub(crate) fn byte_like(value: &JsValue, what: &str, ctx: &mut Context) -> JsResult<Vec<u8>> {
    if let Some(bytes) = buffer_bytes(value, ctx)? {
        return Ok(bytes);
    }
    if let Some(obj) = value.as_object()
        && obj.is_array()
    {
        let len = array_len(&obj, ctx)?;
        let mut out = Vec::with_capacity(len.min(1 << 16) as usize);
        for i in 0..len {
            let v = obj.get(i, ctx)?.to_number(ctx)?;
            if !(0.0..=255.0).contains(&v) || v.fract() != 0.0 {
                return Err(JsNativeError::typ()
                    .with_message(format!("{what}: byte {i} is not an integer 0..255"))
                    .into());
            }
            out.push(v as u8);
        }
        return Ok(out);
    }
    Err(JsNativeError::typ()
        .with_message(format!("{what}: expected a string or bytes"))
        .into())
}

/// Lowercase hex, no prefix.
pub(crate) fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

/// `ToLength(obj.length)`.
pub(crate) fn array_len(obj: &JsObject, ctx: &mut Context) -> JsResult<u64> {
    obj.get(boa_engine::js_string!("length"), ctx)?
        .to_length(ctx)
}
