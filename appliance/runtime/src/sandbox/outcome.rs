//! Turning the end of a job into a [`JobDone`]: the response as JSON, and failures as
//! [`ActionError`]s with a kind and a readable message.

use std::cell::RefCell;

use boa_engine::builtins::error::Error as ErrorData;
use boa_engine::error::RuntimeLimitError;
use boa_engine::object::JsObject;
use boa_engine::{Context, JsError, JsValue, js_string};
use serde_json::Value;

use super::inspect;
use super::state::{self, Abort, JobState};
use crate::protocol::{ActionError, ErrorKind, JobDone};

/// Most stack frames kept in an error message.
const MAX_STACK_LINES: usize = 8;
/// Longest rendering of a thrown non-`Error` value.
const MAX_THROWN_LEN: usize = 4096;

/// How the job's code ended.
pub(crate) enum Ending {
    /// `main` returned (or its promise resolved with) this value; `undefined` when there
    /// was no `main`.
    Value(JsValue),
    /// The code threw, or the promise rejected.
    Thrown(JsError),
    /// The job queue ran dry with `main`'s promise still pending.
    NeverSettled,
}

/// Why a value cannot be the response.
pub(crate) enum ResponseError {
    /// Its JSON is larger than the limit (message for a `limit` error).
    TooLarge(String),
    /// `JSON.stringify` threw (BigInt, a cycle, a throwing `toJSON`…).
    Js(JsError),
}

/// The response value as JSON, refusing encodings longer than `max` bytes.
pub(crate) fn response_json(
    value: &JsValue,
    max: usize,
    ctx: &mut Context,
) -> Result<Value, ResponseError> {
    let Some(text) = state::json_stringify(value, ctx).map_err(ResponseError::Js)? else {
        return Ok(Value::Null);
    };
    if text.len() > max {
        return Err(ResponseError::TooLarge(format!(
            "the response is {} bytes of JSON; the limit is {max}",
            text.len()
        )));
    }
    // JSON.stringify output is valid JSON except for lone surrogates, which it escapes as
    // `\udXXX` and serde rejects.
    serde_json::from_str(&text).map_err(|e| {
        ResponseError::Js(
            boa_engine::JsNativeError::typ()
                .with_message(format!("the response is not valid JSON: {e}"))
                .into(),
        )
    })
}

/// Builds the `done` message from how the code ended and the job state.
///
/// Converting the result can run user code (`toJSON`, getters of a thrown error), which
/// may log, call the host or hit a limit, so no borrow of the state is held meanwhile and
/// the logs and abort reason are read last. `Err` carries a broken host channel: the
/// worker must exit.
pub(crate) fn finish(
    ending: Ending,
    job: &RefCell<JobState>,
    ctx: &mut Context,
) -> Result<JobDone, crate::protocol::ProtocolError> {
    let result = conclude(ending, job, ctx);
    let mut state = job.borrow_mut();
    let logs = std::mem::take(&mut state.logs);
    let result = match state.abort.take() {
        Some(Abort::Channel(e)) => return Err(e),
        Some(Abort::Limit(message)) => Err(ActionError {
            kind: ErrorKind::Limit,
            message,
        }),
        Some(Abort::Timeout(message)) => Err(ActionError {
            kind: ErrorKind::Timeout,
            message,
        }),
        None => result,
    };
    Ok(match result {
        Ok(response) => JobDone {
            response,
            logs,
            error: None,
            heap_bytes: None,
        },
        Err(error) => JobDone {
            response: Value::Null,
            logs,
            error: Some(error),
            heap_bytes: None,
        },
    })
}

/// The response, or the action's error (an abort recorded in the state overrides both).
fn conclude(
    ending: Ending,
    job: &RefCell<JobState>,
    ctx: &mut Context,
) -> Result<Value, ActionError> {
    let fail = |kind, message| Err(ActionError { kind, message });
    if job.borrow().abort.is_some() {
        return Ok(Value::Null);
    }
    let value = match ending {
        Ending::NeverSettled => {
            return fail(
                ErrorKind::Exception,
                "the action's promise never settled".to_owned(),
            );
        }
        Ending::Thrown(err) => {
            let limit_errors: Vec<JsObject> = {
                let job = job.borrow();
                job.fetch_limit_error
                    .iter()
                    .chain(job.limit_errors.iter())
                    .cloned()
                    .collect()
            };
            let (kind, message) = describe(err, &limit_errors, ctx);
            return fail(kind, message);
        }
        Ending::Value(value) => value,
    };
    let explicit = job.borrow_mut().response.take();
    if let Some(explicit) = explicit {
        return Ok(explicit);
    }
    let max = job.borrow().limits.max_response_bytes;
    match response_json(&value, max, ctx) {
        Ok(json) => Ok(json),
        Err(ResponseError::TooLarge(message)) => fail(ErrorKind::Limit, message),
        Err(ResponseError::Js(e)) => {
            let (_, message) = describe(e, &[], ctx);
            fail(
                ErrorKind::Exception,
                format!("the return value is not JSON-serialisable: {message}"),
            )
        }
    }
}

/// Kind and message of an error that escaped the user's code.
fn describe(err: JsError, limit_errors: &[JsObject], ctx: &mut Context) -> (ErrorKind, String) {
    if let Some(engine) = err.as_engine() {
        let message = match runtime_limit(&err) {
            Some(RuntimeLimitError::Recursion) => {
                "RangeError: Maximum call stack size exceeded".to_owned()
            }
            Some(RuntimeLimitError::StackSize) => {
                "RangeError: Maximum stack size exceeded".to_owned()
            }
            Some(other) => format!("RangeError: {other}"),
            None => {
                return (
                    ErrorKind::Exception,
                    format!("internal engine error: {engine}"),
                );
            }
        };
        return (ErrorKind::Limit, message);
    }
    let value = match err.into_opaque(ctx) {
        Ok(v) => v,
        Err(e) => return (ErrorKind::Exception, e.to_string()),
    };
    if let Some(obj) = value.as_object()
        && limit_errors
            .iter()
            .any(|limit| JsObject::equals(&obj, limit))
    {
        return (ErrorKind::Limit, error_text(&obj, ctx));
    }
    let message = match value.as_object() {
        Some(obj) if obj.is::<ErrorData>() => error_text(&obj, ctx),
        _ => {
            let text = inspect::inspect(&value, MAX_THROWN_LEN, ctx)
                .unwrap_or_else(|_| "a value that cannot be displayed".to_owned());
            format!("Uncaught {text}")
        }
    };
    (ErrorKind::Exception, message)
}

/// The runtime limit behind an engine error. Some built-ins wrap the limit error of a
/// nested call in a panic error ("cannot fail per spec"), so the source chain is searched.
fn runtime_limit(err: &JsError) -> Option<RuntimeLimitError> {
    use boa_engine::error::EngineError;
    use std::error::Error as _;
    let engine_limit = |e: &JsError| match e.as_engine() {
        Some(EngineError::RuntimeLimit(limit)) => Some(*limit),
        _ => None,
    };
    if let Some(limit) = engine_limit(err) {
        return Some(limit);
    }
    let mut cause = err.source();
    while let Some(e) = cause {
        let found = e
            .downcast_ref::<RuntimeLimitError>()
            .copied()
            .or_else(|| e.downcast_ref::<JsError>().and_then(engine_limit))
            .or_else(|| {
                e.downcast_ref::<Box<JsError>>()
                    .and_then(|b| engine_limit(b))
            })
            .or_else(|| match e.downcast_ref::<EngineError>() {
                Some(EngineError::RuntimeLimit(limit)) => Some(*limit),
                _ => None,
            });
        if found.is_some() {
            return found;
        }
        cause = e.source();
    }
    None
}

/// `Name: message` followed by the first stack frames.
fn error_text(obj: &JsObject, ctx: &mut Context) -> String {
    let mut text = inspect::inspect(&obj.clone().into(), MAX_THROWN_LEN, ctx)
        .unwrap_or_else(|_| "Error".to_owned());
    if let Ok(stack) = obj.get(js_string!("stack"), ctx)
        && let Some(stack) = stack.as_string()
    {
        let stack = stack.to_std_string_escaped();
        for line in stack
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(MAX_STACK_LINES)
        {
            text.push('\n');
            text.push_str(line);
        }
    }
    text
}
