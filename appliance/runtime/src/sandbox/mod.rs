//! The JavaScript sandbox: one fresh boa [`Context`] per action.
//!
//! # Life of a job
//! 1. A context with all globals is built ahead of time ([`Sandbox::prepare`], called by the
//!    worker after it has answered the previous job), so building it is off the hot path.
//!    Contexts are never reused: nothing one action does can be seen by the next.
//! 2. The code runs as a classic script, then the job queue is drained. Code that is not
//!    a valid script but is a valid module (`import`, `export`, top-level `await`) runs as
//!    a module instead, its imports loaded through the parent ([`modules`]).
//! 3. If `main` is a function (a `function` declaration or a top-level `const`/`let`; of a
//!    module, a top-level binding), it is called with `js_params` (or `null`). A returned
//!    promise is settled by draining the
//!    job queue and running due timers in order ([`timers`]: real time, bounded by the
//!    job's deadline); if it is still pending when the queue is empty and no timer is
//!    left, the action fails with "the action's promise never settled" (nothing could
//!    ever settle it: host calls are synchronous). Code without `main` runs until no
//!    timer is left.
//! 4. The response is the value of the last `Lit.Actions.setResponse({response})` call if
//!    there was one, otherwise `main`'s (awaited) return value, as its `JSON.stringify`
//!    image (`undefined` → `null`; a string stays a string).
//!
//! # Globals
//! `Lit` (=== `LitActions`, frozen; `Lit.Actions` is the object itself, so both the
//! documented `Lit.Actions.f` and the reference's `LitActions.f` work), `console`, `fetch`,
//! `TextEncoder`/`TextDecoder`, `crypto.getRandomValues`/`randomUUID`, `ethers`,
//! `setTimeout`/`setInterval`/`clearTimeout`/`clearInterval`, `Intl` (`DateTimeFormat`
//! only, [`crate::intl`]), plus the ECMAScript built-ins of boa (no `Temporal`).
//!
//! # Errors
//! * `exception`: the code threw / the promise rejected / it never settled; the message is
//!   `Name: message` plus the first stack frames, or `Uncaught <value>` for non-`Error`s.
//! * `limit`: logs or response over their limits, an uncaught fetch-limit or RPC-budget
//!   error, or the recursion limit (uncatchable in boa).
//! * `timeout`: a timer due after the job's deadline; otherwise `timeout` and `memory`
//!   are decided by the parent (deadline kill, worker death).
//!
//! On failure `response` is `null` and `logs` holds what was logged until then.

mod args;
mod console;
mod context;
mod crypto;
mod encoding;
mod fetch;
mod inspect;
mod lit;
mod modules;
mod native;
mod outcome;
mod rpc;
mod state;
mod timers;

use std::cell::RefCell;
use std::rc::Rc;

use boa_engine::builtins::promise::PromiseState;
use boa_engine::object::JsObject;
use boa_engine::{Context, JsError, JsValue, Module, Script, Source, js_string};

pub use self::context::SandboxLimits;
use self::modules::ACTION_PATH;
use self::outcome::Ending;
pub use self::state::HostChannel;
use self::state::{JobHandle, JobState};
use crate::protocol::{JobDone, ProtocolError, RunJob};

/// Failures of the sandbox itself (not of the action's code).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// Building a context failed (a bug, or out of memory).
    #[error("could not build the JavaScript context: {0}")]
    Setup(String),
    /// The host channel broke during a host call; the worker must exit.
    #[error("host channel failed: {0}")]
    Channel(#[from] ProtocolError),
}

/// A fresh context with every action global and no job attached (for tools and
/// benchmarks; [`Sandbox`] is the way to run actions).
pub fn new_context(limits: &SandboxLimits) -> Result<Context, SandboxError> {
    context::build(limits).map_err(|e| SandboxError::Setup(e.to_string()))
}

/// Runs actions one at a time, each in a fresh context.
pub struct Sandbox {
    limits: SandboxLimits,
    /// The context for the next job, built in advance.
    ready: Option<Context>,
    /// The last job's context, dropped in [`Sandbox::prepare`] rather than on the hot path.
    spent: Option<Context>,
}

impl Sandbox {
    /// A sandbox applying `limits` to every context.
    pub fn new(limits: SandboxLimits) -> Self {
        Self {
            limits,
            ready: None,
            spent: None,
        }
    }

    /// Drops the previous job's context, collects garbage and builds the next context.
    /// Call it while idle (after sending `done`); [`Sandbox::run`] builds one itself if
    /// none is ready.
    pub fn prepare(&mut self) -> Result<(), SandboxError> {
        if self.spent.take().is_some() {
            boa_engine::gc::force_collect();
        }
        if self.ready.is_none() {
            self.ready = Some(self.build()?);
        }
        Ok(())
    }

    fn build(&self) -> Result<Context, SandboxError> {
        new_context(&self.limits)
    }

    /// Runs one action to completion. Failures of the action are in the returned
    /// [`JobDone`]; `Err` only for failures of the sandbox or of the host channel.
    pub fn run(
        &mut self,
        job: &RunJob,
        host: Rc<RefCell<dyn HostChannel>>,
    ) -> Result<JobDone, SandboxError> {
        let mut ctx = match self.ready.take() {
            Some(ctx) => ctx,
            None => self.build()?,
        };
        let state = Rc::new(RefCell::new(JobState::new(host, job.limits)));
        ctx.insert_data(JobHandle(Rc::clone(&state)));
        timers::start(&ctx);

        let ending = execute(job, &mut ctx);
        let done = outcome::finish(ending, &state, &mut ctx);
        ctx.remove_data::<JobHandle>();
        self.spent = Some(ctx);
        Ok(done?)
    }
}

/// Runs the script, then `main`, then settles its promise.
fn execute(job: &RunJob, ctx: &mut Context) -> Ending {
    match try_execute(job, ctx) {
        Ok(Some(value)) => Ending::Value(value),
        Ok(None) => Ending::NeverSettled,
        Err(err) => Ending::Thrown(err),
    }
}

/// `Ok(None)`: `main`'s promise (or the module's evaluation) never settled.
fn try_execute(job: &RunJob, ctx: &mut Context) -> Result<Option<JsValue>, JsError> {
    let source =
        Source::from_bytes(job.code.as_bytes()).with_path(std::path::Path::new(ACTION_PATH));
    let main = match Script::parse(source, None, ctx) {
        Ok(script) => {
            script.evaluate(ctx)?;
            ctx.run_jobs()?;
            find_main(ctx)?
        }
        Err(script_error) => {
            let module = match as_module(job, ctx) {
                Ok(module) => module,
                Err(module_error) => return Err(worse_syntax_error(script_error, module_error)),
            };
            match run_module(&module, ctx)? {
                Some(main) => main,
                None => return Ok(None),
            }
        }
    };
    let Some(main) = main else {
        // No `main`: the code's own timers still run, until none is left.
        timers::run_until(ctx, &|| false)?;
        return Ok(Some(JsValue::undefined()));
    };
    let params = JsValue::from_json(&job.js_params, ctx)?;
    let returned = main.call(&JsValue::undefined(), &[params], ctx)?;
    let Some(promise) = returned.as_promise() else {
        ctx.run_jobs()?;
        return Ok(Some(returned));
    };
    timers::run_until(ctx, &|| !matches!(promise.state(), PromiseState::Pending))?;
    match promise.state() {
        PromiseState::Fulfilled(value) => Ok(Some(value)),
        PromiseState::Rejected(reason) => Err(JsError::from_opaque(reason)),
        PromiseState::Pending => Ok(None),
    }
}

/// The action's code as a module.
fn as_module(job: &RunJob, ctx: &mut Context) -> Result<Module, JsError> {
    let text = modules::module_text(&job.code);
    let source = Source::from_bytes(text.as_bytes()).with_path(std::path::Path::new(ACTION_PATH));
    Module::parse(source, None, ctx)
}

/// Which error to report for code that is neither a script nor a module: the script's,
/// unless the script parser stopped at module syntax (`import`, `export`, top-level
/// `await`), where the module's error is the one that names the real mistake.
fn worse_syntax_error(script: JsError, module: JsError) -> JsError {
    let text = script.to_string();
    if ["import", "export", "await"]
        .iter()
        .any(|w| text.contains(w))
    {
        module
    } else {
        script
    }
}

/// Loads, links and evaluates the action's module: `Ok(None)` if its evaluation never
/// settled, else `Some` of its `main` (if it has one).
fn run_module(module: &Module, ctx: &mut Context) -> Result<Option<Option<JsObject>>, JsError> {
    let promise = module.load_link_evaluate(ctx);
    timers::run_until(ctx, &|| !matches!(promise.state(), PromiseState::Pending))?;
    match promise.state() {
        PromiseState::Fulfilled(_) => {}
        PromiseState::Rejected(reason) => return Err(JsError::from_opaque(reason)),
        PromiseState::Pending => return Ok(None),
    }
    Ok(Some(modules::module_main(ctx)?))
}

/// The global `main` if it is a function: a global property (`function main`, `var`) or
/// a top-level lexical binding (`const main = …`), which only a script can see.
fn find_main(ctx: &mut Context) -> Result<Option<JsObject>, JsError> {
    let global = ctx.global_object();
    if let Some(main) = global.get(js_string!("main"), ctx)?.as_callable() {
        return Ok(Some(main));
    }
    let lookup = Source::from_bytes("typeof main === 'function' ? main : undefined");
    Ok(ctx.eval(lookup)?.as_callable())
}
