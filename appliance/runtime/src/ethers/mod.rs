//! The `ethers` v5 subset (ethers.js 5.7.2 compatible), implemented natively.
//!
//! `install` defines the global `ethers` with `utils`, `BigNumber`, `Wallet`, `constants`
//! and `version`; `utils.Interface` (with the ABI fragments) and `Contract` are built on
//! first use (`contract.rs`). Every function follows the JavaScript of ethers 5.7.2: the same value
//! coercions, output formats (hex strings, `Uint8Array`s, BigNumber objects, frozen ABI
//! results) and the same error messages (`reason (key=value, …, code=…, version=…)`).
//! Everything is computation except `providers` (`provider.rs`: JSON-RPC as `rpc` host
//! calls) and the provider methods of `Wallet` (`signer.rs`).

mod abi;
mod address;
mod bignumber;
mod bytes;
mod contract;
mod deferred;
mod err;
mod formatter;
mod fragments;
mod host;
mod interface;
mod js;
mod provider;
mod signer;
mod signing;
mod solidity;
mod strings;
mod tx;
mod txparse;
mod units;

use boa_engine::object::{FunctionObjectBuilder, JsObject};
use boa_engine::property::PropertyDescriptor;
use boa_engine::{Context, JsData, JsResult, JsValue, NativeFunction, js_string};
use boa_gc::{Finalize, Trace};

pub(crate) use self::host::{RuntimeHost, set_host};

/// Per-realm state: prototypes that natively created objects get, and the realm's
/// original `JSON` functions (so user code replacing them cannot change error texts).
#[derive(Clone, Trace, Finalize, JsData)]
pub(crate) struct EthersRealm {
    bn_proto: JsObject,
    sk_proto: JsObject,
    wallet_ctor: JsObject,
    wallet_proto: JsObject,
    stringify: JsObject,
    parse: JsObject,
    object_keys: JsObject,
}

#[derive(Clone, Trace, Finalize, JsData)]
struct Pristine {
    stringify: JsObject,
    parse: JsObject,
    object_keys: JsObject,
}

fn pristine(ctx: &mut Context) -> JsResult<Pristine> {
    Ok(Pristine {
        stringify: global_fn(ctx, "JSON", "stringify")?,
        parse: global_fn(ctx, "JSON", "parse")?,
        object_keys: global_fn(ctx, "Object", "keys")?,
    })
}

fn global_fn(ctx: &mut Context, object: &str, name: &str) -> JsResult<JsObject> {
    let o = ctx.global_object().get(js::jstr(object), ctx)?;
    let f = js::get(ctx, &o, name)?;
    f.as_object().ok_or_else(|| {
        boa_engine::JsNativeError::typ()
            .with_message(format!("{object}.{name} missing"))
            .into()
    })
}

/// Defines the global `ethers` in the context's current realm.
///
/// Context creation is on the hot path and most actions never touch `ethers`, so the
/// global is an accessor: the first read builds the whole object and keeps it (in the
/// realm's [`EthersGlobal`]); later reads return it, and an assignment replaces it, so
/// it reads and assigns like a plain global. It stays an accessor for good: replacing it
/// with a data property from inside its own getter leaves boa 0.22's inline cache pairing
/// the new shape with the old accessor slot, so the next read at the same site (a loop,
/// a function called twice) would fail with "not a callable function".
pub fn install(ctx: &mut Context) -> JsResult<()> {
    // Capture the original JSON/Object functions now, before user code can replace them.
    let pristine = pristine(ctx)?;
    ctx.realm().host_defined_mut().insert(pristine);
    let getter = FunctionObjectBuilder::new(ctx.realm(), NativeFunction::from_fn_ptr(lazy_get))
        .name(js_string!("get ethers"))
        .build();
    let setter = FunctionObjectBuilder::new(ctx.realm(), NativeFunction::from_fn_ptr(lazy_set))
        .name(js_string!("set ethers"))
        .length(1)
        .build();
    ctx.global_object().define_property_or_throw(
        js_string!("ethers"),
        PropertyDescriptor::builder()
            .get(getter)
            .set(setter)
            .enumerable(false)
            .configurable(true),
        ctx,
    )?;
    Ok(())
}

/// The value of the global `ethers` once read or assigned.
#[derive(Clone, Trace, Finalize, JsData)]
struct EthersGlobal(JsValue);

fn lazy_get(_: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    if let Some(EthersGlobal(v)) = ctx.realm().host_defined().get::<EthersGlobal>() {
        return Ok(v.clone());
    }
    let ethers: JsValue = build(ctx)?.into();
    ctx.realm()
        .host_defined_mut()
        .insert(EthersGlobal(ethers.clone()));
    Ok(ethers)
}

fn lazy_set(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    ctx.realm()
        .host_defined_mut()
        .insert(EthersGlobal(js::arg(args, 0)));
    Ok(JsValue::undefined())
}

/// Builds the `ethers` object (and registers the realm state it needs).
pub fn build(ctx: &mut Context) -> JsResult<JsObject> {
    let saved = ctx.realm().host_defined().get::<Pristine>().cloned();
    let p = match saved {
        Some(p) => p,
        None => pristine(ctx)?,
    };
    let (stringify, parse, object_keys) =
        (p.stringify.clone(), p.parse.clone(), p.object_keys.clone());
    let (bn_ctor, bn_proto) = bignumber::build(ctx)?;
    let (sk_ctor, sk_proto, wallet_ctor, wallet_proto) = signing::build(ctx)?;
    signer::install(ctx, &wallet_proto)?;
    ctx.realm().host_defined_mut().insert(EthersRealm {
        bn_proto,
        sk_proto,
        wallet_ctor: wallet_ctor.clone(),
        wallet_proto,
        stringify,
        parse,
        object_keys,
    });

    let utils = js::new_object(ctx);
    bytes::install(ctx, &utils)?;
    strings::install(ctx, &utils)?;
    address::install(ctx, &utils)?;
    signing::install(ctx, &utils)?;
    units::install(ctx, &utils)?;
    solidity::install(ctx, &utils)?;
    tx::install(ctx, &utils)?;
    abi::install(ctx, &utils)?;
    txparse::install(ctx, &utils)?;
    utils.set(js_string!("SigningKey"), sk_ctor, false, ctx)?;

    let constants = constants(ctx)?;
    let ethers = js::new_object(ctx);
    ethers.set(js_string!("utils"), utils.clone(), false, ctx)?;
    ethers.set(js_string!("BigNumber"), bn_ctor, false, ctx)?;
    ethers.set(js_string!("Wallet"), wallet_ctor, false, ctx)?;
    ethers.set(js_string!("constants"), constants, false, ctx)?;
    ethers.set(js_string!("version"), js::s("ethers/5.7.2"), false, ctx)?;
    provider::install(ctx, &ethers)?;
    contract::install(ctx, &ethers, &utils)?;
    Ok(ethers)
}

fn constants(ctx: &mut Context) -> JsResult<JsObject> {
    use num_bigint::BigInt;
    let c = js::new_object(ctx);
    c.set(
        js_string!("AddressZero"),
        js::s("0x0000000000000000000000000000000000000000"),
        false,
        ctx,
    )?;
    let one = BigInt::from(1);
    let max_u256: BigInt = (one.clone() << 256) - 1;
    let max_i256: BigInt = (one.clone() << 255) - 1;
    let min_i256: BigInt = -(BigInt::from(1) << 255u32);
    let bns: [(&str, BigInt); 7] = [
        ("NegativeOne", BigInt::from(-1)),
        ("Zero", BigInt::from(0)),
        ("One", one),
        ("Two", BigInt::from(2)),
        ("WeiPerEther", BigInt::from(10u64).pow(18)),
        ("MaxUint256", max_u256),
        ("MinInt256", min_i256),
    ];
    for (name, v) in bns {
        let bn = bignumber::make(ctx, &v)?;
        c.set(js::jstr(name), bn, false, ctx)?;
    }
    let bn = bignumber::make(ctx, &max_i256)?;
    c.set(js_string!("MaxInt256"), bn, false, ctx)?;
    let strs: [(&str, &str); 2] = [
        (
            "HashZero",
            "0x0000000000000000000000000000000000000000000000000000000000000000",
        ),
        ("EtherSymbol", "\u{039e}"),
    ];
    for (name, v) in strs {
        c.set(js::jstr(name), js::s(v), false, ctx)?;
    }
    Ok(c)
}
