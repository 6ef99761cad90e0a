//! Per-job state shared by the native functions of one context.
//!
//! The state lives in the context's host-defined data (not on the JS heap), so native
//! functions are plain function pointers that look it up. It holds the host channel, the
//! log buffer, the explicit response, the fetch counter, the modules imported and the
//! reason of an abort.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use boa_engine::error::PanicError;
use boa_engine::object::JsObject;
use boa_engine::{Context, JsError, JsNativeError, JsResult, JsValue, Module};
use serde_json::Value;

use crate::protocol::{HostRequest, JobLimits, ProtocolError, ReplyOutcome};

/// The parent end of the host-call channel, as seen by the sandbox.
pub trait HostChannel {
    /// Sends `request` and blocks until the parent's answer.
    ///
    /// An `Err` means the channel itself failed (parent gone, protocol violated): the job is
    /// aborted and the worker must exit.
    fn call(&mut self, request: HostRequest) -> Result<ReplyOutcome, ProtocolError>;
}

/// Why a job was aborted by the runtime rather than by the user's code.
#[derive(Debug)]
pub(crate) enum Abort {
    /// A limit of [`JobLimits`] was exceeded (reported as kind `limit`).
    Limit(String),
    /// The host channel failed; the worker must exit.
    Channel(ProtocolError),
    /// The job would outlast its deadline (a timer due after it): reported as kind
    /// `timeout`, as the parent reports a job it kills at the deadline.
    Timeout(String),
}

/// Mutable state of the running job.
pub(crate) struct JobState {
    pub host: Rc<RefCell<dyn HostChannel>>,
    pub limits: JobLimits,
    pub logs: String,
    /// The value given to `Lit.Actions.setResponse`, already converted to JSON.
    pub response: Option<Value>,
    pub fetches: u32,
    /// The error object thrown by the fetch that went over the limit: if the action dies
    /// of exactly this error, the failure is a `limit`, not an `exception`.
    pub fetch_limit_error: Option<JsObject>,
    /// Errors thrown for other per-action bounds (the parent's RPC byte and time budget):
    /// as with `fetch_limit_error`, dying of one of these is a `limit`.
    pub limit_errors: Vec<JsObject>,
    /// The modules this job imported, by URL.
    pub modules: BTreeMap<String, Loaded>,
    /// The `import.meta` of the action's own module (where it hands over `main`).
    pub action_meta: Option<JsObject>,
    pub abort: Option<Abort>,
}

/// A module this job imported (`super::modules`), under its URL in [`JobState::modules`].
#[derive(Debug, Clone)]
pub(crate) struct Loaded {
    pub module: Module,
    /// `sha384-<base64>`, as the parent verified it.
    pub integrity: String,
}

/// Handle stored in the context data.
#[derive(Clone)]
pub(crate) struct JobHandle(pub Rc<RefCell<JobState>>);

/// Built-ins captured before user code runs, so user code cannot swap them out.
#[derive(Clone)]
pub(crate) struct Pristine {
    pub json_stringify: JsObject,
    pub json_parse: JsObject,
}

impl JobState {
    pub fn new(host: Rc<RefCell<dyn HostChannel>>, limits: JobLimits) -> Self {
        Self {
            host,
            limits,
            logs: String::new(),
            response: None,
            fetches: 0,
            fetch_limit_error: None,
            limit_errors: Vec::new(),
            modules: BTreeMap::new(),
            action_meta: None,
            abort: None,
        }
    }
}

/// The running job's state.
pub(crate) fn job(ctx: &Context) -> JsResult<Rc<RefCell<JobState>>> {
    ctx.get_data::<JobHandle>()
        .map(|h| Rc::clone(&h.0))
        .ok_or_else(|| {
            JsNativeError::error()
                .with_message("no action is running")
                .into()
        })
}

/// The pristine built-ins of this context.
pub(crate) fn pristine(ctx: &Context) -> JsResult<Pristine> {
    ctx.get_data::<Pristine>().cloned().ok_or_else(|| {
        JsNativeError::error()
            .with_message("runtime not initialised")
            .into()
    })
}

/// Records `abort` and returns an error that JS code cannot catch, so the job unwinds.
pub(crate) fn abort(ctx: &Context, reason: Abort) -> JsError {
    if let Ok(state) = job(ctx) {
        let mut state = state.borrow_mut();
        // Keep the first reason: later ones are consequences.
        if state.abort.is_none() {
            state.abort = Some(reason);
        }
    }
    PanicError::new("action aborted by the runtime").into()
}

/// Sends a host call for the running job and returns the parent's `ok` value; an `err`
/// answer becomes a thrown `Error` with the parent's message.
pub(crate) fn host_call_json(ctx: &mut Context, request: HostRequest) -> JsResult<Value> {
    let host = Rc::clone(&job(ctx)?.borrow().host);
    let outcome = host.borrow_mut().call(request);
    match outcome {
        Ok(ReplyOutcome::Ok(value)) => Ok(value),
        Ok(ReplyOutcome::Err(message)) => Err(JsNativeError::error().with_message(message).into()),
        Err(e) => Err(abort(ctx, Abort::Channel(e))),
    }
}

/// [`host_call_json`] with the answer converted to a JS value.
pub(crate) fn host_call(ctx: &mut Context, request: HostRequest) -> JsResult<JsValue> {
    let value = host_call_json(ctx, request)?;
    JsValue::from_json(&value, ctx)
}

/// Appends one log line (`line` + `\n`), aborting the job with a `limit` when the total
/// would exceed the log limit (the logs keep what fits).
pub(crate) fn append_log(ctx: &Context, line: &str) -> JsResult<()> {
    let state = job(ctx)?;
    let over = {
        let mut state = state.borrow_mut();
        let max = state.limits.max_log_bytes;
        let needed = state.logs.len() + line.len() + 1;
        if needed <= max {
            state.logs.push_str(line);
            state.logs.push('\n');
            None
        } else {
            let room = max.saturating_sub(state.logs.len());
            let cut = floor_char_boundary(line, room);
            state.logs.push_str(&line[..cut]);
            Some(max)
        }
    };
    match over {
        None => Ok(()),
        Some(max) => Err(abort(
            ctx,
            Abort::Limit(format!("logs exceed the limit of {max} bytes")),
        )),
    }
}

/// The largest index `<= at` that is a char boundary of `s`.
pub(crate) fn floor_char_boundary(s: &str, at: usize) -> usize {
    if at >= s.len() {
        return s.len();
    }
    let mut i = at;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// True when `err` is an engine error (uncatchable by JS: limits and runtime aborts).
pub(crate) fn is_uncatchable(err: &JsError) -> bool {
    err.as_engine().is_some()
}

/// `JSON.stringify(value)` with the built-in captured before user code ran; `None` when the
/// result is `undefined` (functions, symbols, `undefined`).
pub(crate) fn json_stringify(value: &JsValue, ctx: &mut Context) -> JsResult<Option<String>> {
    let stringify = pristine(ctx)?.json_stringify;
    let text = stringify.call(&JsValue::undefined(), std::slice::from_ref(value), ctx)?;
    Ok(text.as_string().map(|s| s.to_std_string_escaped()))
}
