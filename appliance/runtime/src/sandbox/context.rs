//! Building a fresh context: limits and every global of the action API.

use std::rc::Rc;

use boa_engine::vm::RuntimeLimits;
use boa_engine::{Context, JsNativeError, JsResult, js_string};

use super::modules::ParentModules;
use super::state::Pristine;
use super::{console, crypto, encoding, fetch, lit, rpc, timers};

/// Engine limits applied to every context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxLimits {
    /// Deepest JS call nesting; deeper calls fail with a `limit` error
    /// ("RangeError: Maximum call stack size exceeded").
    pub recursion_limit: usize,
    /// Largest VM value stack, in values.
    pub stack_size_limit: usize,
}

impl SandboxLimits {
    /// Default recursion limit: deep enough for ordinary code (and ethers), shallow
    /// enough that native re-entry (callbacks, getters) cannot exhaust the thread stack.
    pub const DEFAULT_RECURSION_LIMIT: usize = 1000;
}

impl Default for SandboxLimits {
    fn default() -> Self {
        Self {
            recursion_limit: Self::DEFAULT_RECURSION_LIMIT,
            stack_size_limit: 1024 * 1024,
        }
    }
}

/// A new context with the action globals. No job state is attached yet.
pub(crate) fn build(limits: &SandboxLimits) -> JsResult<Context> {
    // Every module comes from the parent (boa's default loader would read files).
    let mut ctx = Context::builder()
        .module_loader(Rc::new(ParentModules))
        .build()?;
    let mut runtime = RuntimeLimits::default();
    // The loop limit must never fire: an infinite loop ends by the parent's deadline.
    runtime.disable_loop_iteration_limit();
    runtime.set_recursion_limit(limits.recursion_limit);
    runtime.set_stack_size_limit(limits.stack_size_limit);
    ctx.set_runtime_limits(runtime);

    let json = ctx.intrinsics().objects().json();
    let pick = |name: &str, ctx: &mut Context| -> JsResult<_> {
        json.get(js_string!(name), ctx)?.as_object().ok_or_else(|| {
            JsNativeError::typ()
                .with_message("JSON built-ins missing")
                .into()
        })
    };
    let pristine = Pristine {
        json_stringify: pick("stringify", &mut ctx)?,
        json_parse: pick("parse", &mut ctx)?,
    };
    ctx.insert_data(pristine);

    console::install(&mut ctx)?;
    lit::install(&mut ctx)?;
    fetch::install(&mut ctx)?;
    timers::install(&mut ctx)?;
    encoding::install(&mut ctx)?;
    crypto::install(&mut ctx)?;
    crate::ethers::install(&mut ctx)?;
    crate::intl::install(&mut ctx)?;
    crate::ethers::set_host(
        &mut ctx,
        crate::ethers::RuntimeHost {
            rpc: rpc::call,
            schedule: timers::schedule,
            is_limit_error: rpc::is_limit_error,
        },
    );
    Ok(ctx)
}
