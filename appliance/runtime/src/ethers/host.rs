//! What `providers` and the provider methods of `Wallet` need from the runtime around
//! them: the `rpc` host call, the job's timers and its limit errors. The sandbox hands
//! these in when it builds a context ([`set_host`]), so this module never names the
//! sandbox (which installs `ethers`). Without them (a bare context) every request fails
//! with a plain `Error`.

use std::time::Duration;

use boa_engine::object::JsObject;
use boa_engine::{Context, JsNativeError, JsResult, JsValue};

use crate::protocol::{RpcReply, RpcRequest};

/// The runtime's services, as plain functions.
#[derive(Clone, Copy)]
pub(crate) struct RuntimeHost {
    /// Sends one JSON-RPC request through the parent (counted as a fetch); `Err` is a
    /// limit error or a broken channel, passed on as is.
    pub rpc: fn(&mut Context, RpcRequest) -> JsResult<RpcReply>,
    /// Calls a function (with no arguments) after a delay, on the job's timers.
    pub schedule: fn(&Context, JsObject, Duration) -> JsResult<u32>,
    /// Whether a thrown value is one of the job's limit errors (passed on untouched).
    pub is_limit_error: fn(&Context, &JsValue) -> bool,
}

/// Makes the runtime's services available to `ethers` in this context.
pub(crate) fn set_host(ctx: &mut Context, host: RuntimeHost) {
    ctx.insert_data(host);
}

fn host(ctx: &Context) -> JsResult<RuntimeHost> {
    ctx.get_data::<RuntimeHost>().copied().ok_or_else(|| {
        JsNativeError::error()
            .with_message("ethers.providers need the action runtime")
            .into()
    })
}

pub(crate) fn rpc(ctx: &mut Context, request: RpcRequest) -> JsResult<RpcReply> {
    (host(ctx)?.rpc)(ctx, request)
}

pub(crate) fn schedule(ctx: &Context, callback: JsObject, delay: Duration) -> JsResult<u32> {
    (host(ctx)?.schedule)(ctx, callback, delay)
}

pub(crate) fn is_limit_error(ctx: &Context, error: &JsValue) -> bool {
    host(ctx).is_ok_and(|h| (h.is_limit_error)(ctx, error))
}
