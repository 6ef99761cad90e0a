//! Awaiting inside native code: the async methods of providers and signers take values
//! that may be promises (ethers accepts a `Promise<string>` for an address, a
//! transaction whose fields are promises, a provider whose methods are replaced by
//! user code). Host calls are synchronous, so almost every such value is already
//! settled: then the continuation runs at once and the method returns a settled
//! promise; only a value that is really pending defers the continuation to its
//! settlement (`Promise.all(...).then(k)`).

use boa_engine::builtins::promise::PromiseState;
use boa_engine::object::FunctionObjectBuilder;
use boa_engine::object::builtins::JsPromise;
use boa_engine::{Context, JsError, JsResult, JsValue, NativeFunction};

use super::js;

/// A continuation: the awaited values, the captured values, the context.
pub(crate) type Then = fn(&[JsValue], &[JsValue], &mut Context) -> JsResult<JsValue>;

/// What awaiting `value` gives, if that is known now.
enum Now {
    Ready(JsValue),
    Failed(JsValue),
    Later(JsPromise),
}

fn now(ctx: &mut Context, value: &JsValue) -> JsResult<Now> {
    if let Some(p) = value.as_promise() {
        return Ok(match p.state() {
            PromiseState::Fulfilled(v) => Now::Ready(v),
            PromiseState::Rejected(r) => Now::Failed(r),
            PromiseState::Pending => Now::Later(p),
        });
    }
    if value.as_object().is_some() && js::get(ctx, value, "then")?.is_callable() {
        return Ok(Now::Later(JsPromise::resolve(value.clone(), ctx)?));
    }
    Ok(Now::Ready(value.clone()))
}

/// True when JS code could not catch `err` (limits, a broken host channel): it must
/// unwind the job rather than reject a promise.
fn uncatchable(err: &JsError) -> bool {
    err.as_engine().is_some()
}

/// `r` as a promise: resolved with (or adopting) its value, or rejected with its error.
pub(crate) fn settle(ctx: &mut Context, r: JsResult<JsValue>) -> JsResult<JsValue> {
    match r {
        Ok(v) => Ok(JsPromise::resolve(v, ctx)?.into()),
        Err(e) if uncatchable(&e) => Err(e),
        Err(e) => {
            let reason = e.into_opaque(ctx)?;
            Ok(JsPromise::reject(JsError::from_opaque(reason), ctx)?.into())
        }
    }
}

/// Awaits every value of `values`, then runs `k(resolved, caps)`; returns the promise of
/// its result. Runs `k` at once when every value is known now.
pub(crate) fn all_then(
    ctx: &mut Context,
    values: Vec<JsValue>,
    caps: Vec<JsValue>,
    k: Then,
) -> JsResult<JsValue> {
    await_all(ctx, values, caps, k)
}

fn await_all<F>(
    ctx: &mut Context,
    values: Vec<JsValue>,
    caps: Vec<JsValue>,
    k: F,
) -> JsResult<JsValue>
where
    F: Fn(&[JsValue], &[JsValue], &mut Context) -> JsResult<JsValue> + Copy + 'static,
{
    let mut states = Vec::with_capacity(values.len());
    for v in &values {
        match now(ctx, v)? {
            Now::Failed(reason) => {
                return Ok(JsPromise::reject(JsError::from_opaque(reason), ctx)?.into());
            }
            state => states.push(state),
        }
    }
    if states.iter().all(|s| matches!(s, Now::Ready(_))) {
        let ready: Vec<JsValue> = states
            .into_iter()
            .map(|s| match s {
                Now::Ready(v) => v,
                _ => JsValue::undefined(),
            })
            .collect();
        let r = k(&ready, &caps, ctx);
        return settle(ctx, r);
    }
    let mut promises = Vec::with_capacity(states.len());
    for s in states {
        promises.push(match s {
            Now::Ready(v) => JsPromise::resolve(v, ctx)?,
            Now::Later(p) => p,
            Now::Failed(r) => JsPromise::reject(JsError::from_opaque(r), ctx)?,
        });
    }
    let all = JsPromise::all(promises, ctx)?;
    let on_ok = FunctionObjectBuilder::new(
        ctx.realm(),
        NativeFunction::from_copy_closure_with_captures(
            move |_, args, caps: &Vec<JsValue>, ctx| {
                let values = js::array_items(ctx, &js::arg(args, 0))?;
                k(&values, caps, ctx)
            },
            caps,
        ),
    )
    .length(1)
    .build();
    Ok(all.then(Some(on_ok), None, ctx)?.into())
}

/// `resolveProperties(obj)`: awaits every own enumerable property of `obj`, then runs
/// `k([resolved], caps)` with a fresh plain object (same keys, same order).
pub(crate) fn resolve_properties(
    ctx: &mut Context,
    obj: &JsValue,
    caps: Vec<JsValue>,
    k: Then,
) -> JsResult<JsValue> {
    let Some(o) = obj.as_object() else {
        return all_then(ctx, vec![obj.clone()], caps, k);
    };
    let keys = js::object_keys(ctx, &o)?;
    let mut values = Vec::with_capacity(keys.len());
    for key in &keys {
        values.push(o.get(js::jstr(key), ctx)?);
    }
    let key_list = js::array(ctx, keys.iter().map(|k| js::s(k)).collect());
    let mut all_caps = Vec::with_capacity(caps.len() + 1);
    all_caps.push(key_list);
    all_caps.extend(caps);
    // `k` rides in the closure, the keys in the captures.
    let rebuild =
        move |values: &[JsValue], caps: &[JsValue], ctx: &mut Context| -> JsResult<JsValue> {
            let keys = js::array_items(ctx, &caps[0])?;
            let out = js::new_object(ctx);
            for (key, value) in keys.iter().zip(values) {
                out.create_data_property_or_throw(key.to_string(ctx)?, value.clone(), ctx)?;
            }
            k(&[out.into()], &caps[1..], ctx)
        };
    await_all(ctx, values, all_caps, rebuild)
}

/// Awaits one value, then runs `k`.
pub(crate) fn then(
    ctx: &mut Context,
    value: JsValue,
    caps: Vec<JsValue>,
    k: Then,
) -> JsResult<JsValue> {
    all_then(ctx, vec![value], caps, k)
}
