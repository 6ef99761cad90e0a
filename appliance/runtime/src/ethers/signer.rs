//! The provider half of `@ethersproject/abstract-signer`, on `Wallet.prototype`:
//! `getBalance`, `getTransactionCount`, `estimateGas`, `call`, `sendTransaction`,
//! `populateTransaction`, `checkTransaction`, `getChainId`, `getGasPrice`,
//! `getFeeData`, `resolveName`, `_checkProvider`, as ethers 5.7.2 runs them.
//!
//! Everything goes through the wallet's own methods and its provider's methods (as JS
//! calls, so a replaced method is honoured), awaiting each value with
//! `deferred`: with this runtime's providers every step is already settled, so a call
//! completes before it returns. `sendTransaction` fills `chainId`, `nonce` (pending
//! count), `gasLimit` (`estimateGas`) and fees (type 2 with `getFeeData`'s
//! `maxFeePerGas`/`maxPriorityFeePerGas` when the latest block has a base fee, else
//! type 0 with its `gasPrice`), signs with the wallet's key (`signTransaction`) and
//! sends the raw transaction.

use boa_engine::{Context, JsResult, JsValue, NativeFunction, js_string};

use super::deferred::{self, settle};
use super::err::{self, P, UNSUPPORTED_OPERATION};
use super::js;

const V_SIGNER: &str = "abstract-signer/5.7.0";

const ALLOWED_KEYS: [&str; 14] = [
    "accessList",
    "ccipReadEnabled",
    "chainId",
    "customData",
    "data",
    "from",
    "gasLimit",
    "gasPrice",
    "maxFeePerGas",
    "maxPriorityFeePerGas",
    "nonce",
    "to",
    "type",
    "value",
];

/// Errors `populateTransaction` passes on from `estimateGas` as they are.
const FORWARD_ERRORS: [&str; 3] = [
    "INSUFFICIENT_FUNDS",
    "NONCE_EXPIRED",
    "REPLACEMENT_UNDERPRICED",
];

type Method = fn(&JsValue, &[JsValue], &mut Context) -> JsResult<JsValue>;

/// `_checkProvider(operation)`: the wallet's provider, or `missing provider`.
fn provider(ctx: &mut Context, this: &JsValue, operation: &str) -> JsResult<JsValue> {
    let p = js::get(ctx, this, "provider")?;
    if !p.to_boolean() {
        return Err(err::make(
            ctx,
            V_SIGNER,
            "missing provider",
            UNSUPPORTED_OPERATION,
            vec![("operation", P::str(operation))],
        ));
    }
    Ok(p)
}

fn m_check_provider(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let op = js::arg(args, 0);
    let op = if js::is_nullish(&op) {
        String::new()
    } else {
        op.to_string(ctx)?.to_std_string_lossy()
    };
    provider(ctx, this, &op)?;
    Ok(JsValue::undefined())
}

/// `this.provider[name](...args)` after `_checkProvider(operation)`, as a promise.
fn forward(
    ctx: &mut Context,
    this: &JsValue,
    operation: &str,
    name: &str,
    args: &[JsValue],
) -> JsResult<JsValue> {
    let r = (|| {
        let p = provider(ctx, this, operation)?;
        js::call_method(ctx, &p, name, args)
    })();
    settle(ctx, r)
}

fn m_get_balance(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let r = (|| {
        provider(ctx, this, "getBalance")?;
        let address = js::call_method(ctx, this, "getAddress", &[])?;
        forward(
            ctx,
            this,
            "getBalance",
            "getBalance",
            &[address, js::arg(args, 0)],
        )
    })();
    settle(ctx, r)
}

fn m_get_transaction_count(
    this: &JsValue,
    args: &[JsValue],
    ctx: &mut Context,
) -> JsResult<JsValue> {
    let r = (|| {
        provider(ctx, this, "getTransactionCount")?;
        let address = js::call_method(ctx, this, "getAddress", &[])?;
        forward(
            ctx,
            this,
            "getTransactionCount",
            "getTransactionCount",
            &[address, js::arg(args, 0)],
        )
    })();
    settle(ctx, r)
}

fn m_get_chain_id(this: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let r = (|| {
        let network = forward(ctx, this, "getChainId", "getNetwork", &[])?;
        deferred::then(ctx, network, Vec::new(), |v, _, ctx| {
            js::get(ctx, &js::arg(v, 0), "chainId")
        })
    })();
    settle(ctx, r)
}

fn m_get_gas_price(this: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    forward(ctx, this, "getGasPrice", "getGasPrice", &[])
}

fn m_get_fee_data(this: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    forward(ctx, this, "getFeeData", "getFeeData", &[])
}

fn m_resolve_name(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    forward(ctx, this, "resolveName", "resolveName", &[js::arg(args, 0)])
}

/// `checkTransaction(transaction)`: refuses unknown keys; a copy with `from` set to
/// (or checked against) the wallet's address, possibly as a promise.
fn check_transaction(
    ctx: &mut Context,
    this: &JsValue,
    transaction: &JsValue,
) -> JsResult<JsValue> {
    let Some(obj) = transaction.as_object() else {
        return Err(err::type_error(
            "Cannot convert undefined or null to object",
        ));
    };
    let keys = js::object_keys(ctx, &obj)?;
    for key in &keys {
        if !ALLOWED_KEYS.contains(&key.as_str()) {
            return Err(err::arg(
                ctx,
                V_SIGNER,
                &format!("invalid transaction key: {key}"),
                "transaction",
                P::Js(transaction.clone()),
            ));
        }
    }
    let tx = js::new_object(ctx);
    for key in &keys {
        let v = obj.get(js::jstr(key), ctx)?;
        tx.create_data_property_or_throw(js::jstr(key), v, ctx)?;
    }
    let from = tx.get(js_string!("from"), ctx)?;
    let mine = js::call_method(ctx, this, "getAddress", &[])?;
    let from = if js::is_nullish(&from) {
        mine
    } else {
        deferred::all_then(
            ctx,
            vec![from, mine],
            vec![transaction.clone()],
            |v, caps, ctx| {
                let given = js::arg(v, 0);
                let mine = js::arg(v, 1);
                let lower = |ctx: &mut Context, v: &JsValue| -> JsResult<String> {
                    Ok(v.to_string(ctx)?.to_std_string_lossy().to_lowercase())
                };
                if lower(ctx, &given)? != lower(ctx, &mine)? {
                    return Err(err::arg(
                        ctx,
                        V_SIGNER,
                        "from address mismatch",
                        "transaction",
                        P::Js(caps[0].clone()),
                    ));
                }
                Ok(given)
            },
        )?
    };
    tx.set(js_string!("from"), from, true, ctx)?;
    Ok(tx.into())
}

fn m_check_transaction(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    check_transaction(ctx, this, &js::arg(args, 0))
}

use super::deferred::resolve_properties;

fn m_estimate_gas(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let r = (|| {
        provider(ctx, this, "estimateGas")?;
        let tx = check_transaction(ctx, this, &js::arg(args, 0))?;
        resolve_properties(ctx, &tx, vec![this.clone()], |v, caps, ctx| {
            let p = provider(ctx, &caps[0], "estimateGas")?;
            js::call_method(ctx, &p, "estimateGas", &[js::arg(v, 0)])
        })
    })();
    settle(ctx, r)
}

fn m_call(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let r = (|| {
        provider(ctx, this, "call")?;
        let tx = check_transaction(ctx, this, &js::arg(args, 0))?;
        resolve_properties(
            ctx,
            &tx,
            vec![this.clone(), js::arg(args, 1)],
            |v, caps, ctx| {
                let p = provider(ctx, &caps[0], "call")?;
                js::call_method(ctx, &p, "call", &[js::arg(v, 0), caps[1].clone()])
            },
        )
    })();
    settle(ctx, r)
}

fn get(ctx: &mut Context, o: &JsValue, key: &str) -> JsResult<JsValue> {
    js::get(ctx, o, key)
}

fn put(ctx: &mut Context, o: &JsValue, key: &str, v: JsValue) -> JsResult<()> {
    if let Some(o) = o.as_object() {
        o.set(js::jstr(key), v, true, ctx)?;
    }
    Ok(())
}

fn type_is(v: &JsValue, n: f64) -> bool {
    v.as_number() == Some(n)
}

/// `populateTransaction(transaction)`.
fn populate(ctx: &mut Context, this: &JsValue, transaction: &JsValue) -> JsResult<JsValue> {
    let checked = check_transaction(ctx, this, transaction)?;
    resolve_properties(
        ctx,
        &checked,
        vec![this.clone(), transaction.clone()],
        populate_resolved,
    )
}

/// The body of `populateTransaction` after `resolveProperties(checkTransaction(tx))`.
fn populate_resolved(v: &[JsValue], caps: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let tx = js::arg(v, 0);
    let this = caps[0].clone();
    let transaction = caps[1].clone();
    let to = get(ctx, &tx, "to")?;
    if !js::is_nullish(&to) {
        let resolved = js::call_method(ctx, &this, "resolveName", std::slice::from_ref(&to))?;
        let checked = deferred::then(ctx, resolved, vec![to], |v, caps, ctx| {
            let address = js::arg(v, 0);
            if js::is_nullish(&address) {
                return Err(err::arg(
                    ctx,
                    V_SIGNER,
                    "provided ENS name resolves to null",
                    "tx.to",
                    P::Js(caps[0].clone()),
                ));
            }
            Ok(address)
        })?;
        put(ctx, &tx, "to", checked)?;
    }
    let ty = get(ctx, &tx, "type")?;
    let max_fee = get(ctx, &tx, "maxFeePerGas")?;
    let max_priority = get(ctx, &tx, "maxPriorityFeePerGas")?;
    let gas_price = get(ctx, &tx, "gasPrice")?;
    let has_1559 = !js::is_nullish(&max_fee) || !js::is_nullish(&max_priority);
    if !js::is_nullish(&gas_price) && (type_is(&ty, 2.0) || has_1559) {
        return Err(err::arg(
            ctx,
            V_SIGNER,
            "eip-1559 transaction do not support gasPrice",
            "transaction",
            P::Js(transaction),
        ));
    } else if (type_is(&ty, 0.0) || type_is(&ty, 1.0)) && has_1559 {
        return Err(err::arg(
            ctx,
            V_SIGNER,
            "pre-eip-1559 transaction do not support maxFeePerGas/maxPriorityFeePerGas",
            "transaction",
            P::Js(transaction),
        ));
    }
    if (type_is(&ty, 2.0) || js::is_nullish(&ty))
        && !js::is_nullish(&max_fee)
        && !js::is_nullish(&max_priority)
    {
        put(ctx, &tx, "type", JsValue::from(2))?;
        return populate_rest(ctx, &this, &tx, &transaction);
    }
    if type_is(&ty, 0.0) || type_is(&ty, 1.0) {
        if js::is_nullish(&gas_price) {
            let price = js::call_method(ctx, &this, "getGasPrice", &[])?;
            put(ctx, &tx, "gasPrice", price)?;
        }
        return populate_rest(ctx, &this, &tx, &transaction);
    }
    let fee_data = js::call_method(ctx, &this, "getFeeData", &[])?;
    deferred::then(
        ctx,
        fee_data,
        vec![this, tx, transaction],
        |v, caps, ctx| {
            let fee = js::arg(v, 0);
            let (this, tx, transaction) = (&caps[0], &caps[1], &caps[2]);
            let ty = get(ctx, tx, "type")?;
            let fee_max = get(ctx, &fee, "maxFeePerGas")?;
            let fee_priority = get(ctx, &fee, "maxPriorityFeePerGas")?;
            let fill_1559 = |ctx: &mut Context| -> JsResult<()> {
                if js::is_nullish(&get(ctx, tx, "maxFeePerGas")?) {
                    put(ctx, tx, "maxFeePerGas", fee_max.clone())?;
                }
                if js::is_nullish(&get(ctx, tx, "maxPriorityFeePerGas")?) {
                    put(ctx, tx, "maxPriorityFeePerGas", fee_priority.clone())?;
                }
                Ok(())
            };
            if js::is_nullish(&ty) {
                if !js::is_nullish(&fee_max) && !js::is_nullish(&fee_priority) {
                    put(ctx, tx, "type", JsValue::from(2))?;
                    let price = get(ctx, tx, "gasPrice")?;
                    if !js::is_nullish(&price) {
                        if let Some(o) = tx.as_object() {
                            o.delete_property_or_throw(js_string!("gasPrice"), ctx)?;
                        }
                        put(ctx, tx, "maxFeePerGas", price.clone())?;
                        put(ctx, tx, "maxPriorityFeePerGas", price)?;
                    } else {
                        fill_1559(ctx)?;
                    }
                } else {
                    let fee_price = get(ctx, &fee, "gasPrice")?;
                    if !js::is_nullish(&fee_price) {
                        let has_1559 = !js::is_nullish(&get(ctx, tx, "maxFeePerGas")?)
                            || !js::is_nullish(&get(ctx, tx, "maxPriorityFeePerGas")?);
                        if has_1559 {
                            return Err(err::make(
                                ctx,
                                V_SIGNER,
                                "network does not support EIP-1559",
                                UNSUPPORTED_OPERATION,
                                vec![("operation", P::str("populateTransaction"))],
                            ));
                        }
                        if js::is_nullish(&get(ctx, tx, "gasPrice")?) {
                            put(ctx, tx, "gasPrice", fee_price)?;
                        }
                        put(ctx, tx, "type", JsValue::from(0))?;
                    } else {
                        return Err(err::make(
                            ctx,
                            V_SIGNER,
                            "failed to get consistent fee data",
                            UNSUPPORTED_OPERATION,
                            vec![("operation", P::str("signer.getFeeData"))],
                        ));
                    }
                }
            } else if type_is(&ty, 2.0) {
                fill_1559(ctx)?;
            }
            populate_rest(ctx, this, tx, transaction)
        },
    )
}

/// The end of `populateTransaction`: nonce, gas limit and chain id, then every property
/// awaited.
fn populate_rest(
    ctx: &mut Context,
    this: &JsValue,
    tx: &JsValue,
    transaction: &JsValue,
) -> JsResult<JsValue> {
    if js::is_nullish(&get(ctx, tx, "nonce")?) {
        let nonce = js::call_method(ctx, this, "getTransactionCount", &[js::s("pending")])?;
        put(ctx, tx, "nonce", nonce)?;
    }
    if js::is_nullish(&get(ctx, tx, "gasLimit")?) {
        let estimate = js::call_method(ctx, this, "estimateGas", std::slice::from_ref(tx))?;
        let limited = gas_limit(ctx, estimate, tx)?;
        put(ctx, tx, "gasLimit", limited)?;
    }
    let chain_id = get(ctx, tx, "chainId")?;
    let mine = js::call_method(ctx, this, "getChainId", &[])?;
    let chain_id = if js::is_nullish(&chain_id) {
        mine
    } else {
        deferred::all_then(
            ctx,
            vec![chain_id, mine],
            vec![transaction.clone()],
            |v, caps, ctx| {
                let given = js::arg(v, 0);
                let mine = js::arg(v, 1);
                if mine.as_number() != Some(0.0) && !given.strict_equals(&mine) {
                    return Err(err::arg(
                        ctx,
                        V_SIGNER,
                        "chainId address mismatch",
                        "transaction",
                        P::Js(caps[0].clone()),
                    ));
                }
                Ok(given)
            },
        )?
    };
    put(ctx, tx, "chainId", chain_id)?;
    resolve_properties(ctx, tx, Vec::new(), |v, _, _| Ok(js::arg(v, 0)))
}

/// `estimateGas(tx).catch(...)`: the estimate, or `UNPREDICTABLE_GAS_LIMIT` wrapping any
/// error but insufficient funds and nonce errors.
fn gas_limit(ctx: &mut Context, estimate: JsValue, tx: &JsValue) -> JsResult<JsValue> {
    let Some(promise) = estimate.as_promise() else {
        return Ok(estimate);
    };
    let tx = tx.clone();
    let on_err = boa_engine::object::FunctionObjectBuilder::new(
        ctx.realm(),
        NativeFunction::from_copy_closure_with_captures(
            |_, args, tx: &JsValue, ctx| {
                let error = js::arg(args, 0);
                let code = js::get(ctx, &error, "code")?;
                if let Some(code) = js::as_str(&code)
                    && FORWARD_ERRORS.contains(&code.as_str())
                {
                    return Err(boa_engine::JsError::from_opaque(error));
                }
                if super::host::is_limit_error(ctx, &error) {
                    return Err(boa_engine::JsError::from_opaque(error));
                }
                Err(err::make(
                    ctx,
                    V_SIGNER,
                    "cannot estimate gas; transaction may fail or may require manual gas limit",
                    "UNPREDICTABLE_GAS_LIMIT",
                    vec![("error", P::Js(error)), ("tx", P::Js(tx.clone()))],
                ))
            },
            tx,
        ),
    )
    .length(1)
    .build();
    Ok(promise.catch(on_err, ctx)?.into())
}

fn m_populate_transaction(
    this: &JsValue,
    args: &[JsValue],
    ctx: &mut Context,
) -> JsResult<JsValue> {
    let r = populate(ctx, this, &js::arg(args, 0));
    settle(ctx, r)
}

fn m_send_transaction(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let r = (|| {
        provider(ctx, this, "sendTransaction")?;
        let populated = populate(ctx, this, &js::arg(args, 0))?;
        deferred::then(ctx, populated, vec![this.clone()], |v, caps, ctx| {
            let signed = js::call_method(ctx, &caps[0], "signTransaction", &[js::arg(v, 0)])?;
            deferred::then(ctx, signed, caps.to_vec(), |v, caps, ctx| {
                let p = provider(ctx, &caps[0], "sendTransaction")?;
                js::call_method(ctx, &p, "sendTransaction", &[js::arg(v, 0)])
            })
        })
    })();
    settle(ctx, r)
}

/// Adds the provider methods of `Signer` to `Wallet.prototype`.
pub(crate) fn install(ctx: &mut Context, wallet_proto: &boa_engine::JsObject) -> JsResult<()> {
    let methods: [(&str, usize, Method); 12] = [
        ("getBalance", 1, m_get_balance),
        ("getTransactionCount", 1, m_get_transaction_count),
        ("estimateGas", 1, m_estimate_gas),
        ("call", 2, m_call),
        ("sendTransaction", 1, m_send_transaction),
        ("populateTransaction", 1, m_populate_transaction),
        ("checkTransaction", 1, m_check_transaction),
        ("getChainId", 0, m_get_chain_id),
        ("getGasPrice", 0, m_get_gas_price),
        ("getFeeData", 0, m_get_fee_data),
        ("resolveName", 1, m_resolve_name),
        ("_checkProvider", 1, m_check_provider),
    ];
    for (name, len, f) in methods {
        js::method(ctx, wallet_proto, name, len, NativeFunction::from_fn_ptr(f))?;
    }
    Ok(())
}
