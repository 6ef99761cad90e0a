//! `ethers.utils.Interface` and friends, and `ethers.Contract`, installed lazily.
//!
//! # What is where
//! * `fragments.rs`: `ParamType`, `Fragment` and its subclasses, `FormatTypes` (native).
//! * `interface.rs`: `Interface`, `LogDescription`, `TransactionDescription`,
//!   `ErrorDescription`, `Indexed` (native), over `defaultAbiCoder`.
//! * `contract.js`: `Contract` and `BaseContract`, in JavaScript over the native parts.
//!
//! The Contract is JavaScript because it is glue over promises: every method resolves
//! its arguments, overrides and the signer's address (each possibly a promise), calls the
//! provider or signer the caller supplied (any object following ethers' `Provider` /
//! `Signer` interface: `call`, `estimateGas`, `getLogs`, `sendTransaction`, `getAddress`,
//! `provider`, `_isProvider` / `_isSigner`), then encodes or decodes natively. Written
//! natively that would be a chain of promise callbacks; in JavaScript it is `async`
//! functions with ethers' own structure, and it costs nothing until used: the script is
//! compiled and run once per realm, on the first read of `ethers.Contract` or
//! `ethers.BaseContract`.
//!
//! # Laziness
//! `install` only defines accessors (`ethers.utils.Interface`, `Fragment`,
//! `FunctionFragment`, `EventFragment`, `ConstructorFragment`, `ErrorFragment`,
//! `ParamType`, `FormatTypes`, `Indexed`, `LogDescription`, `TransactionDescription`,
//! `ErrorDescription`; `ethers.Contract`, `ethers.BaseContract`). The first read of any of
//! the `utils` names builds the native classes; the first read of a Contract name builds
//! them and evaluates `contract.js`. The members stay accessors (enumerable, configurable,
//! with a setter, so they read and assign like data properties; see `lazy` for why they
//! are not turned into data properties).
//!
//! # Not supported (deliberately)
//! * ENS: there is no ENS on the appliance. A Contract with a provider whose address is a
//!   name (not `0x` hex) throws `UNSUPPORTED_OPERATION` (operation `resolveName`) when
//!   constructed; an `address` argument or a `from` override that is a name rejects the
//!   call with the same error. (ethers would ask the provider to resolve the name.)
//! * Event subscriptions (`on`, `once`, `off`, `emit`, `listeners`, `listenerCount`,
//!   `removeListener`, `removeAllListeners`) throw `UNSUPPORTED_OPERATION`: an action has
//!   no long-lived event loop. `queryFilter` is supported.
//! * `contract.connect(address)` (a `VoidSigner` in ethers) throws `UNSUPPORTED_OPERATION`.
//! * `ContractFactory`, `Contract.getContractAddress` and deployment (`deployTransaction`).
//! * The `accessList` override is normalised as ethers' `accessListify` does, except that
//!   an object-form list is sorted by lower-case address rather than `localeCompare`
//!   (the same order for hex addresses).

use boa_engine::object::JsObject;
use boa_engine::object::builtins::JsUint8Array;
use boa_engine::property::PropertyDescriptor;
use boa_engine::{Context, JsData, JsNativeError, JsResult, JsValue, NativeFunction, Source};
use boa_gc::{Finalize, Trace};

use super::err::{self, P};
use super::fragments;
use super::interface;
use super::js;

const PRELUDE: &str = include_str!("contract.js");

/// The `ethers.utils` members built on first use.
const UTILS_NAMES: [&str; 12] = [
    "Interface",
    "Fragment",
    "ConstructorFragment",
    "FunctionFragment",
    "EventFragment",
    "ErrorFragment",
    "ParamType",
    "FormatTypes",
    "Indexed",
    "LogDescription",
    "TransactionDescription",
    "ErrorDescription",
];

/// The `ethers` members built on first use (with `contract.js`).
const ETHERS_NAMES: [&str; 2] = ["Contract", "BaseContract"];

/// What has been built in this realm.
#[derive(Clone, Trace, Finalize, JsData)]
struct Built {
    abi: JsObject,
    contract: Option<JsObject>,
}

/// One lazy member: where it lives, its name, what building needs, and `holder`, whose
/// own property `value` is the member's value once read or assigned.
#[derive(Clone, Trace, Finalize)]
struct Site {
    target: JsObject,
    name: JsValue,
    ethers: JsObject,
    coder: JsObject,
    holder: JsObject,
}

/// Defines the lazy members on `ethers` and its `utils` (which must already hold
/// `defaultAbiCoder`).
pub(crate) fn install(ctx: &mut Context, ethers: &JsObject, utils: &JsObject) -> JsResult<()> {
    let coder = utils
        .get(js::jstr("defaultAbiCoder"), ctx)?
        .as_object()
        .ok_or_else(|| JsNativeError::typ().with_message("defaultAbiCoder missing"))?;
    for (target, names) in [(utils, &UTILS_NAMES[..]), (ethers, &ETHERS_NAMES[..])] {
        for name in names {
            let site = Site {
                target: target.clone(),
                name: js::s(name),
                ethers: ethers.clone(),
                coder: coder.clone(),
                holder: JsObject::with_null_proto(),
            };
            lazy(ctx, site)?;
        }
    }
    Ok(())
}

fn store(ctx: &mut Context, site: &Site, value: JsValue) -> JsResult<()> {
    site.holder
        .create_data_property_or_throw(js::jstr("value"), value, ctx)?;
    Ok(())
}

/// The member stays an accessor for good: turning it into a data property from inside its
/// own getter leaves boa 0.22's inline cache pairing the new shape with the old accessor
/// slot, so the next read at the same site would call the value as a getter.
fn lazy(ctx: &mut Context, site: Site) -> JsResult<()> {
    let name = js::as_str(&site.name).unwrap_or_default();
    let getter = boa_engine::object::FunctionObjectBuilder::new(
        ctx.realm(),
        NativeFunction::from_copy_closure_with_captures(
            |_, _, site: &Site, ctx| {
                if site.holder.has_own_property(js::jstr("value"), ctx)? {
                    return site.holder.get(js::jstr("value"), ctx);
                }
                let name = js::as_str(&site.name).unwrap_or_default();
                let from = if ETHERS_NAMES.contains(&name.as_str()) {
                    contract_exports(ctx, site)?
                } else {
                    abi_exports(ctx, site)?
                };
                let value = from.get(js::jstr(&name), ctx)?;
                store(ctx, site, value.clone())?;
                Ok(value)
            },
            site.clone(),
        ),
    )
    .name(js::jstr(&format!("get {name}")))
    .build();
    let setter = boa_engine::object::FunctionObjectBuilder::new(
        ctx.realm(),
        NativeFunction::from_copy_closure_with_captures(
            |_, args, site: &Site, ctx| {
                store(ctx, site, js::arg(args, 0))?;
                Ok(JsValue::undefined())
            },
            site.clone(),
        ),
    )
    .name(js::jstr(&format!("set {name}")))
    .length(1)
    .build();
    site.target.define_property_or_throw(
        js::jstr(&name),
        PropertyDescriptor::builder()
            .get(getter)
            .set(setter)
            .enumerable(true)
            .configurable(true),
        ctx,
    )?;
    Ok(())
}

fn built(ctx: &Context) -> Option<Built> {
    ctx.realm().host_defined().get::<Built>().cloned()
}

/// The native classes (built on first call).
fn abi_exports(ctx: &mut Context, site: &Site) -> JsResult<JsObject> {
    if let Some(b) = built(ctx) {
        return Ok(b.abi.clone());
    }
    let exports = js::new_object(ctx);
    fragments::build(ctx, &exports)?;
    interface::build(ctx, &exports, site.coder.clone())?;
    ctx.realm().host_defined_mut().insert(Built {
        abi: exports.clone(),
        contract: None,
    });
    Ok(exports)
}

/// `{BaseContract, Contract}` from `contract.js` (evaluated on first call).
fn contract_exports(ctx: &mut Context, site: &Site) -> JsResult<JsObject> {
    let abi = abi_exports(ctx, site)?;
    if let Some(c) = built(ctx).and_then(|b| b.contract.clone()) {
        return Ok(c);
    }
    let lib = js::new_object(ctx);
    for name in ["Interface", "Indexed"] {
        let v = abi.get(js::jstr(name), ctx)?;
        fragments::put(ctx, &lib, name, v)?;
    }
    type F = fn(&JsValue, &[JsValue], &mut Context) -> JsResult<JsValue>;
    let helpers: [(&str, usize, F); 3] = [
        ("makeError", 4, h_make_error),
        ("deepCopy", 1, h_deep_copy),
        ("warn", 1, h_warn),
    ];
    for (name, len, f) in helpers {
        js::method(ctx, &lib, name, len, NativeFunction::from_fn_ptr(f))?;
    }
    let factory = ctx.eval(Source::from_bytes(PRELUDE))?;
    let Some(factory) = factory.as_callable() else {
        return Err(err::type_error(
            "contract.js did not evaluate to a function",
        ));
    };
    let intrinsics = ctx.intrinsics();
    let args: [JsValue; 6] = [
        site.ethers.clone().into(),
        lib.into(),
        intrinsics.constructors().object().constructor().into(),
        intrinsics.constructors().array().constructor().into(),
        intrinsics.constructors().promise().constructor().into(),
        intrinsics.objects().json().into(),
    ];
    let out = factory.call(&JsValue::undefined(), &args, ctx)?;
    let out = out
        .as_object()
        .ok_or_else(|| err::type_error("contract.js returned no exports"))?;
    ctx.realm().host_defined_mut().insert(Built {
        abi,
        contract: Some(out.clone()),
    });
    Ok(out)
}

/// `lib.makeError(message, code, params, version)`: ethers' `Logger.makeError` (the
/// error is returned, not thrown).
fn h_make_error(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let message = fragments::to_str(ctx, &js::arg(args, 0))?;
    let code = fragments::to_str(ctx, &js::arg(args, 1))?;
    let version = fragments::to_str(ctx, &js::arg(args, 3))?;
    let mut keys: Vec<String> = Vec::new();
    let mut values: Vec<P> = Vec::new();
    if let Some(params) = js::arg(args, 2).as_object() {
        for key in js::object_keys(ctx, &params)? {
            let v = params.get(js::jstr(&key), ctx)?;
            let p = match v.as_object().map(|o| JsUint8Array::from_object(o.clone())) {
                Some(Ok(u8a)) => P::Bytes(u8a.to_vec(ctx)?),
                _ => P::Js(v),
            };
            keys.push(key);
            values.push(p);
        }
    }
    let params: Vec<(&str, P)> = keys.iter().map(String::as_str).zip(values).collect();
    let e = err::make(ctx, &version, &message, &code, params);
    e.into_opaque(ctx)
}

fn h_deep_copy(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    interface::deep_copy(ctx, &js::arg(args, 0))
}

fn h_warn(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let message = fragments::to_str(ctx, &js::arg(args, 0))?;
    fragments::warn(ctx, &message)?;
    Ok(JsValue::undefined())
}
