//! The host side of `ethers.providers`: one JSON-RPC request as an `rpc` host call,
//! counted against the action's fetches (the same budget as `fetch`: beyond
//! `max_fetches` the same shared limit error is thrown).
//!
//! A `limit` reply (the parent's per-action RPC budget of bytes or time is spent) is
//! thrown as a plain `Error` registered as a limit error: if it ends the action, the
//! kind is `limit`.

use boa_engine::{Context, JsError, JsNativeError, JsResult};

use super::fetch::count_fetch;
use super::state;
use crate::protocol::{HostRequest, RpcReply, RpcRequest};

/// Sends one JSON-RPC request body to `request.target` through the parent.
///
/// `Ok` is the parent's answer (a response, a timeout or a failure, which the provider
/// turns into ethers' errors); `Err` is the fetch-count or RPC-budget limit error, or a
/// broken reply.
pub(crate) fn call(ctx: &mut Context, request: RpcRequest) -> JsResult<RpcReply> {
    count_fetch(ctx)?;
    let reply = state::host_call_json(ctx, HostRequest::Rpc(request))?;
    let reply: RpcReply = serde_json::from_value(reply).map_err(|e| {
        JsNativeError::error().with_message(format!("rpc: malformed reply from the host: {e}"))
    })?;
    if let RpcReply::Limit { message } = reply {
        let error = JsNativeError::error()
            .with_message(message)
            .into_opaque(ctx);
        state::job(ctx)?
            .borrow_mut()
            .limit_errors
            .push(error.clone());
        return Err(JsError::from_opaque(error.into()));
    }
    Ok(reply)
}

/// True when `error` is one of the running job's limit errors (the fetch-count error or
/// an RPC-budget error): callers pass these through untouched, so the action ends with
/// `limit` if it does not catch them.
pub(crate) fn is_limit_error(ctx: &Context, error: &boa_engine::JsValue) -> bool {
    let (Some(obj), Ok(job)) = (error.as_object(), state::job(ctx)) else {
        return false;
    };
    let job = job.borrow();
    job.fetch_limit_error
        .iter()
        .chain(job.limit_errors.iter())
        .any(|e| boa_engine::JsObject::equals(e, &obj))
}
