//! `console.log`, `info`, `warn`, `error`, `debug`: each call appends one formatted line + `\n` to the
//! job's logs (see [`super::inspect`] for the format). All five write to the same log; the
//! level is not recorded, as in the reference.

use boa_engine::object::ObjectInitializer;
use boa_engine::property::Attribute;
use boa_engine::{Context, JsResult, JsValue, NativeFunction, js_string};

use super::{inspect, state};

/// Defines the global `console`.
pub(crate) fn install(ctx: &mut Context) -> JsResult<()> {
    let mut console = ObjectInitializer::new(ctx);
    for name in ["log", "info", "warn", "error", "debug"] {
        console.function(NativeFunction::from_fn_ptr(log), js_string!(name), 0);
    }
    let console = console.build();
    ctx.register_global_property(
        js_string!("console"),
        console,
        Attribute::WRITABLE | Attribute::CONFIGURABLE,
    )?;
    Ok(())
}

fn log(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let budget = {
        let job = state::job(ctx)?;
        let job = job.borrow();
        job.limits.max_log_bytes.saturating_sub(job.logs.len())
    };
    let line = inspect::format_args(args, budget, ctx)?;
    state::append_log(ctx, &line)?;
    Ok(JsValue::undefined())
}
