//! `crypto.getRandomValues` (and `crypto.randomUUID`) from the OS CSPRNG.

use boa_engine::builtins::typed_array::TypedArrayKind;
use boa_engine::object::ObjectInitializer;
use boa_engine::object::builtins::{JsArrayBuffer, JsTypedArray};
use boa_engine::property::Attribute;
use boa_engine::{Context, JsNativeError, JsResult, JsValue, NativeFunction, js_string};

use super::args::to_hex;

/// Largest request, as in the Web Crypto API.
const MAX_RANDOM_BYTES: usize = 65536;

/// Defines the global `crypto`.
pub(crate) fn install(ctx: &mut Context) -> JsResult<()> {
    let crypto = ObjectInitializer::new(ctx)
        .function(
            NativeFunction::from_fn_ptr(get_random_values),
            js_string!("getRandomValues"),
            1,
        )
        .function(
            NativeFunction::from_fn_ptr(random_uuid),
            js_string!("randomUUID"),
            0,
        )
        .build();
    ctx.register_global_property(
        js_string!("crypto"),
        crypto,
        Attribute::WRITABLE | Attribute::CONFIGURABLE,
    )?;
    Ok(())
}

fn os_random(buf: &mut [u8]) -> JsResult<()> {
    getrandom::fill(buf).map_err(|e| {
        JsNativeError::error()
            .with_message(format!("the OS random source failed: {e}"))
            .into()
    })
}

/// Fills an integer typed array in place and returns it.
fn get_random_values(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let target = args.first().cloned().unwrap_or_default();
    let typed = target
        .as_object()
        .and_then(|o| JsTypedArray::from_object(o).ok())
        .filter(|t| {
            !matches!(
                t.kind(),
                None | Some(TypedArrayKind::Float32 | TypedArrayKind::Float64)
            )
        })
        .ok_or_else(|| {
            JsNativeError::typ()
                .with_message("crypto.getRandomValues expects an integer typed array")
        })?;
    let len = typed.byte_length(ctx)?;
    if len > MAX_RANDOM_BYTES {
        return Err(JsNativeError::range()
            .with_message(format!(
                "crypto.getRandomValues: {len} bytes requested; the limit is {MAX_RANDOM_BYTES}"
            ))
            .into());
    }
    let offset = typed.byte_offset(ctx)?;
    let buffer = typed
        .buffer(ctx)?
        .as_object()
        .and_then(|b| JsArrayBuffer::from_object(b).ok())
        .ok_or_else(|| {
            JsNativeError::typ()
                .with_message("crypto.getRandomValues: shared buffers are not supported")
        })?;
    let mut random = vec![0u8; len];
    os_random(&mut random)?;
    let mut data = buffer.data_mut().ok_or_else(|| {
        JsNativeError::typ().with_message("crypto.getRandomValues: detached buffer")
    })?;
    let dest = data.get_mut(offset..offset + len).ok_or_else(|| {
        JsNativeError::range().with_message("crypto.getRandomValues: view out of bounds")
    })?;
    dest.copy_from_slice(&random);
    Ok(target)
}

/// A random (version 4) UUID string.
fn random_uuid(_: &JsValue, _: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    let mut b = [0u8; 16];
    os_random(&mut b)?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = to_hex(&b);
    let uuid = format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    );
    Ok(js_string!(uuid).into())
}
