//! `Lit` / `LitActions`: the key operations of the action API.
//!
//! Every operation except `setResponse` and `showImportDetails` is async: it performs its host call synchronously
//! and returns an already settled promise (resolved with the parent's `ok` value, rejected
//! with an `Error` carrying the parent's `err` message, or rejected with a `TypeError` for
//! bad arguments, before anything is sent).

use boa_engine::object::{FunctionObjectBuilder, IntegrityLevel, JsObject};
use boa_engine::property::Attribute;
use boa_engine::{Context, JsResult, JsValue, NativeFunction, js_string};

use super::args::{byte_like, optional_string_prop, options, string_prop, to_hex};
use super::native::{NativeFn, promise_of};
use super::outcome;
use super::state::{self, Abort};
use crate::protocol::HostRequest;

/// Defines the globals `Lit` and `LitActions`: one frozen object holding the operations,
/// whose `Actions` property is the object itself. So `Lit === LitActions`, and
/// `Lit.Actions.f`, `LitActions.f` (the reference's alias) and `LitActions.Actions.f` are
/// all the same function.
pub(crate) fn install(ctx: &mut Context) -> JsResult<()> {
    const ACTIONS: [(&str, NativeFn, usize); 9] = [
        ("getPrivateKey", get_private_key, 1),
        ("getLitActionPrivateKey", get_lit_action_private_key, 0),
        ("getLitActionPublicKey", get_lit_action_public_key, 1),
        (
            "getLitActionWalletAddress",
            get_lit_action_wallet_address,
            1,
        ),
        ("Encrypt", encrypt, 1),
        ("Decrypt", decrypt, 1),
        ("signEcdsa", sign_ecdsa, 1),
        ("setResponse", set_response, 1),
        ("showImportDetails", show_import_details, 0),
    ];
    let lit = JsObject::with_object_proto(ctx.intrinsics());
    for (name, f, len) in ACTIONS {
        let function = FunctionObjectBuilder::new(ctx.realm(), NativeFunction::from_fn_ptr(f))
            .name(js_string!(name))
            .length(len)
            .build();
        lit.create_data_property_or_throw(js_string!(name), function, ctx)?;
    }
    lit.create_data_property_or_throw(js_string!("Actions"), lit.clone(), ctx)?;
    lit.set_integrity_level(IntegrityLevel::Frozen, ctx)?;

    for name in ["Lit", "LitActions"] {
        ctx.register_global_property(js_string!(name), lit.clone(), Attribute::empty())?;
    }
    Ok(())
}

fn get_private_key(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    promise_of(ctx, |ctx| {
        const WHAT: &str = "Lit.Actions.getPrivateKey";
        let opts = options(args, WHAT)?;
        let pkp_id = string_prop(&opts, "pkpId", WHAT, ctx)?;
        state::host_call(ctx, HostRequest::GetPrivateKey { pkp_id })
    })
}

/// `ipfsId` of an optional options object (`None`: the running action).
fn ipfs_id(args: &[JsValue], what: &str, ctx: &mut Context) -> JsResult<Option<String>> {
    match args.first() {
        None => Ok(None),
        Some(v) if v.is_null_or_undefined() => Ok(None),
        Some(_) => optional_string_prop(&options(args, what)?, "ipfsId", what, ctx),
    }
}

fn get_lit_action_private_key(
    _: &JsValue,
    args: &[JsValue],
    ctx: &mut Context,
) -> JsResult<JsValue> {
    promise_of(ctx, |ctx| {
        let ipfs_id = ipfs_id(args, "Lit.Actions.getLitActionPrivateKey", ctx)?;
        state::host_call(ctx, HostRequest::GetLitActionPrivateKey { ipfs_id })
    })
}

fn get_lit_action_public_key(
    _: &JsValue,
    args: &[JsValue],
    ctx: &mut Context,
) -> JsResult<JsValue> {
    promise_of(ctx, |ctx| {
        let ipfs_id = ipfs_id(args, "Lit.Actions.getLitActionPublicKey", ctx)?;
        state::host_call(ctx, HostRequest::GetLitActionPublicKey { ipfs_id })
    })
}

fn get_lit_action_wallet_address(
    _: &JsValue,
    args: &[JsValue],
    ctx: &mut Context,
) -> JsResult<JsValue> {
    promise_of(ctx, |ctx| {
        let ipfs_id = ipfs_id(args, "Lit.Actions.getLitActionWalletAddress", ctx)?;
        state::host_call(ctx, HostRequest::GetLitActionWalletAddress { ipfs_id })
    })
}

fn encrypt(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    promise_of(ctx, |ctx| {
        const WHAT: &str = "Lit.Actions.Encrypt";
        let opts = options(args, WHAT)?;
        let pkp_id = string_prop(&opts, "pkpId", WHAT, ctx)?;
        let message = string_prop(&opts, "message", WHAT, ctx)?;
        state::host_call(ctx, HostRequest::Encrypt { pkp_id, message })
    })
}

fn decrypt(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    promise_of(ctx, |ctx| {
        const WHAT: &str = "Lit.Actions.Decrypt";
        let opts = options(args, WHAT)?;
        let pkp_id = string_prop(&opts, "pkpId", WHAT, ctx)?;
        let ciphertext = string_prop(&opts, "ciphertext", WHAT, ctx)?;
        state::host_call(ctx, HostRequest::Decrypt { pkp_id, ciphertext })
    })
}

/// `toSign` may be a hex string or bytes (`Uint8Array`, array of numbers), which are sent
/// as `"0x"` + hex.
fn sign_ecdsa(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    promise_of(ctx, |ctx| {
        const WHAT: &str = "Lit.Actions.signEcdsa";
        let opts = options(args, WHAT)?;
        let pkp_id = string_prop(&opts, "pkpId", WHAT, ctx)?;
        let raw = opts.get(js_string!("toSign"), ctx)?;
        let to_sign = match raw.as_string() {
            Some(s) => s.to_std_string_escaped(),
            None => format!("0x{}", to_hex(&byte_like(&raw, WHAT, ctx)?)),
        };
        state::host_call(ctx, HostRequest::SignEcdsa { pkp_id, to_sign })
    })
}

/// `setResponse({response})`: stores the response as given (a string stays a string, any
/// other value as its JSON). The last call wins, and it wins over `main`'s return value.
fn set_response(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    const WHAT: &str = "Lit.Actions.setResponse";
    let opts = options(args, WHAT)?;
    let value = opts.get(js_string!("response"), ctx)?;
    let max = state::job(ctx)?.borrow().limits.max_response_bytes;
    let json = match outcome::response_json(&value, max, ctx) {
        Ok(json) => json,
        Err(outcome::ResponseError::TooLarge(msg)) => {
            return Err(state::abort(ctx, Abort::Limit(msg)));
        }
        Err(outcome::ResponseError::Js(e)) => return Err(e),
    };
    state::job(ctx)?.borrow_mut().response = Some(json);
    Ok(JsValue::undefined())
}

/// `Lit.Actions.showImportDetails()` → `[{url, hash}]` of the modules imported so far
/// (synchronous, as in the reference).
fn show_import_details(_: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    super::modules::import_details(ctx)
}
