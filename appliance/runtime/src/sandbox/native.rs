//! Shared plumbing of the native functions.

use boa_engine::object::builtins::JsPromise;
use boa_engine::{Context, JsResult, JsValue};

use super::state;

/// The signature of a native function pointer.
pub(crate) type NativeFn = fn(&JsValue, &[JsValue], &mut Context) -> JsResult<JsValue>;

/// Runs `f` and wraps its result in a settled promise. Uncatchable errors (limits, a broken
/// host channel) propagate instead, so they unwind the whole job.
pub(crate) fn promise_of(
    ctx: &mut Context,
    f: impl FnOnce(&mut Context) -> JsResult<JsValue>,
) -> JsResult<JsValue> {
    match f(ctx) {
        Ok(value) => Ok(JsPromise::resolve(value, ctx)?.into()),
        Err(e) if state::is_uncatchable(&e) => Err(e),
        Err(e) => Ok(JsPromise::reject(e, ctx)?.into()),
    }
}
