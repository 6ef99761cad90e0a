//! `ethers.providers.JsonRpcProvider` and `StaticJsonRpcProvider` (ethers 5.7.2), over the
//! parent: every JSON-RPC request is an `rpc` host call (through `host`, which the sandbox
//! provides), counted as a fetch; the worker never opens a connection.
//!
//! Where the requests go: `new JsonRpcProvider(url)` sends to `url` (the appliance serves
//! it as an operator-configured chain if it is exactly one of the configured URLs,
//! otherwise as a fetch to a public address); `new JsonRpcProvider(undefined, chainId)`
//! and the URL `chain:<id>` name a configured chain by id; no URL and no network is
//! ethers' default, `http://localhost:8545`.
//!
//! Results are formatted as ethers formats them (`formatter`), errors are ethers' errors
//! (`SERVER_ERROR` "bad response" / "processing response error" / "missing response",
//! `TIMEOUT`, `NETWORK_ERROR`, and `checkError`'s `CALL_EXCEPTION`, `INSUFFICIENT_FUNDS`,
//! `NONCE_EXPIRED`, `REPLACEMENT_UNDERPRICED`, `UNPREDICTABLE_GAS_LIMIT`). Where this
//! runtime differs from ethers:
//! * the network is detected (`eth_chainId`) once per provider and then trusted (ethers'
//!   `JsonRpcProvider` asks again before every call, to notice a changed network);
//!   `detectNetwork()` itself always asks;
//! * `_defaultProvider` of a known network is `null`, ENS names are not resolved
//!   (`UNSUPPORTED_OPERATION`), there are no events (`on`, `once`, polling) and `wait()`
//!   does not detect replaced transactions;
//! * `wait()` and `waitForTransaction` poll `eth_getTransactionReceipt` at once, then
//!   after 50 ms, doubling the pause up to `pollingInterval` ms (4000 by default,
//!   settable), on the runtime's timers (ethers pauses `pollingInterval` every time: on a
//!   chain that mines at once, such as the dev stack's anvil, that made every send-and-wait
//!   take 4 s); a wait past the action's deadline ends it with a `timeout`; an error while
//!   polling rejects the wait (ethers retries);
//! * a "missing response" or "could not detect network" error carries why the request
//!   had no answer (`serverError`: the appliance's refusal or the connection error).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use boa_engine::object::builtins::JsPromise;
use boa_engine::object::{FunctionObjectBuilder, JsObject};
use boa_engine::property::PropertyDescriptor;
use boa_engine::{Context, JsData, JsError, JsResult, JsValue, NativeFunction, js_string};
use boa_gc::{Finalize, Trace};
use num_bigint::BigInt;
use serde_json::Value;

use super::address;
use super::bignumber;
use super::bytes;
use super::deferred::{self, settle};
use super::err::{self, P, UNSUPPORTED_OPERATION};
use super::formatter::{self, V_PROVIDERS};
use super::js;
use super::txparse;
use crate::protocol::{RpcReply, RpcRequest, RpcTarget};

pub(crate) const SERVER_ERROR: &str = "SERVER_ERROR";
const TIMEOUT: &str = "TIMEOUT";
const NETWORK_ERROR: &str = "NETWORK_ERROR";
const CALL_EXCEPTION: &str = "CALL_EXCEPTION";
const UNKNOWN_ERROR: &str = "UNKNOWN_ERROR";
const V_WEB: &str = "web/5.7.1";
const V_NETWORKS: &str = "networks/5.7.1";
const DEFAULT_URL: &str = "http://localhost:8545";
/// `100 + 2 * pollingInterval` with the default interval: how stale a block number may
/// be when it only counts confirmations.
fn confirmations_age(polling_ms: f64) -> f64 {
    100.0 + 2.0 * polling_ms
}

/// A network as ethers' `getNetwork` describes it.
#[derive(Clone, Debug, PartialEq)]
struct Network {
    chain_id: f64,
    name: String,
    ens: Option<String>,
    standard: bool,
}

const ENS: &str = "0x00000000000C2E074eC69A0dFb2997BA6C7d2e1e";

/// `@ethersproject/networks`' table, in its order: (name, chain id, ENS registry).
const NETWORKS: &[(&str, f64, Option<&str>)] = &[
    ("unspecified", 0.0, None),
    ("homestead", 1.0, Some(ENS)),
    ("mainnet", 1.0, Some(ENS)),
    ("morden", 2.0, None),
    ("ropsten", 3.0, Some(ENS)),
    ("testnet", 3.0, Some(ENS)),
    ("rinkeby", 4.0, Some(ENS)),
    ("kovan", 42.0, None),
    ("goerli", 5.0, Some(ENS)),
    ("kintsugi", 1_337_702.0, None),
    ("sepolia", 11_155_111.0, None),
    ("classic", 61.0, None),
    ("classicMorden", 62.0, None),
    ("classicMordor", 63.0, None),
    ("classicTestnet", 63.0, None),
    ("classicKotti", 6.0, None),
    ("xdai", 100.0, None),
    ("matic", 137.0, None),
    ("maticmum", 80001.0, None),
    ("optimism", 10.0, None),
    ("optimism-kovan", 69.0, None),
    ("optimism-goerli", 420.0, None),
    ("arbitrum", 42161.0, None),
    ("arbitrum-rinkeby", 421_611.0, None),
    ("arbitrum-goerli", 421_613.0, None),
    ("bnb", 56.0, None),
    ("bnbt", 97.0, None),
];

/// The canonical name of an aliased entry (`mainnet` is `homestead`, …).
fn canonical(name: &str) -> &str {
    match name {
        "mainnet" => "homestead",
        "testnet" => "ropsten",
        "classicTestnet" => "classicMordor",
        other => other,
    }
}

fn network_by_id(chain_id: f64) -> Network {
    match NETWORKS.iter().find(|(_, id, _)| *id == chain_id) {
        Some((name, id, ens)) => Network {
            chain_id: *id,
            name: canonical(name).to_owned(),
            ens: ens.map(str::to_owned),
            standard: true,
        },
        None => Network {
            chain_id,
            name: "unknown".to_owned(),
            ens: None,
            standard: false,
        },
    }
}

/// `getNetwork(networkish)`; `Ok(None)` for `null`/`undefined` or an unknown name.
fn network_of(ctx: &mut Context, value: &JsValue) -> JsResult<Option<Network>> {
    if js::is_nullish(value) {
        return Ok(None);
    }
    if let Some(n) = value.as_number() {
        return Ok(Some(network_by_id(n)));
    }
    if let Some(name) = js::as_str(value) {
        return Ok(NETWORKS
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(n, id, ens)| Network {
                chain_id: *id,
                name: canonical(n).to_owned(),
                ens: ens.map(str::to_owned),
                standard: true,
            }));
    }
    let name = js::get(ctx, value, "name")?;
    let chain_id = js::get(ctx, value, "chainId")?;
    let ens = js::as_str(&js::get(ctx, value, "ensAddress")?);
    let standard = js::as_str(&name).and_then(|n| NETWORKS.iter().find(|(m, _, _)| *m == n));
    match standard {
        None => match chain_id.as_number() {
            Some(id) => Ok(Some(Network {
                chain_id: id,
                name: js::as_str(&name).unwrap_or_default(),
                ens,
                standard: false,
            })),
            None => Err(err::arg(
                ctx,
                V_NETWORKS,
                "invalid network chainId",
                "network",
                P::Js(value.clone()),
            )),
        },
        Some((n, id, std_ens)) => {
            if chain_id.as_number() != Some(0.0) && chain_id.as_number() != Some(*id) {
                return Err(err::arg(
                    ctx,
                    V_NETWORKS,
                    "network chainId mismatch",
                    "network",
                    P::Js(value.clone()),
                ));
            }
            Ok(Some(Network {
                chain_id: *id,
                name: (*n).to_owned(),
                ens: ens.or_else(|| std_ens.map(str::to_owned)),
                standard: true,
            }))
        }
    }
}

fn network_js(ctx: &mut Context, n: &Network) -> JsValue {
    let obj = if n.standard {
        let ens = n.ens.as_deref().map_or(JsValue::null(), js::s);
        js::plain_object(
            ctx,
            vec![
                ("name", js::s(&n.name)),
                ("chainId", JsValue::from(n.chain_id)),
                ("ensAddress", ens),
                ("_defaultProvider", JsValue::null()),
            ],
        )
    } else {
        let mut props = vec![
            ("chainId", JsValue::from(n.chain_id)),
            ("name", js::s(&n.name)),
        ];
        if let Some(ens) = &n.ens {
            props.push(("ensAddress", js::s(ens)));
        }
        js::plain_object(ctx, props)
    };
    obj.into()
}

/// The state of one provider object.
#[derive(Trace, Finalize, JsData)]
pub(crate) struct ProviderData {
    #[unsafe_ignore_trace]
    state: State,
}

struct State {
    target: RpcTarget,
    /// `connection.url`: what errors show (never an operator's URL).
    url: String,
    is_static: bool,
    /// The network given or detected (`_network`).
    network: Option<Network>,
    /// The network was confirmed by `eth_chainId` (or is trusted: static with a given
    /// network).
    verified: bool,
    next_id: f64,
    internal_block: Option<(f64, Instant)>,
    max_internal_block: f64,
    polling_ms: f64,
}

fn provider_of(ctx: &mut Context, this: &JsValue) -> JsResult<JsObject> {
    match this.as_object() {
        Some(o) if o.is::<ProviderData>() => Ok(o),
        _ => {
            let _ = ctx;
            Err(err::type_error("not a JsonRpcProvider"))
        }
    }
}

fn with_state<T>(p: &JsObject, f: impl FnOnce(&mut State) -> T) -> JsResult<T> {
    let mut data = p
        .downcast_mut::<ProviderData>()
        .ok_or_else(|| err::type_error("not a JsonRpcProvider"))?;
    Ok(f(&mut data.state))
}

// ---- JSON-RPC transport ----

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// A plain `Error(message)` with extra own properties, as JS code would build it.
fn error_with(ctx: &mut Context, message: &str, props: Vec<(&str, JsValue)>) -> JsResult<JsValue> {
    let e = boa_engine::JsNativeError::error()
        .with_message(message.to_owned())
        .into_opaque(ctx);
    for (k, v) in props {
        e.set(js::jstr(k), v, false, ctx)?;
    }
    Ok(e.into())
}

/// `provider.send(method, params)`: one JSON-RPC request and its `result`, or ethers'
/// transport errors.
fn send_raw(ctx: &mut Context, p: &JsObject, method: &str, params: JsValue) -> JsResult<JsValue> {
    let (target, url, id) = with_state(p, |s| {
        let id = s.next_id;
        s.next_id += 1.0;
        (s.target.clone(), s.url.clone(), id)
    })?;
    let request = js::plain_object(
        ctx,
        vec![
            ("method", js::s(method)),
            ("params", params),
            ("id", JsValue::from(id)),
            ("jsonrpc", js::s("2.0")),
        ],
    );
    let body = js::json_stringify(ctx, &request.into())?.unwrap_or_default();
    let reply = super::host::rpc(
        ctx,
        RpcRequest {
            target,
            body: body.clone(),
        },
    )?;
    let request_params = |body: &str| {
        vec![
            ("requestBody", P::str(body)),
            ("requestMethod", P::str("POST")),
        ]
    };
    match reply {
        RpcReply::Response { status, body: text } => {
            if !(200..300).contains(&status) {
                let headers = js::new_object(ctx);
                let mut params = vec![
                    ("status", P::num(f64::from(status))),
                    ("headers", P::Js(headers.into())),
                    ("body", P::str(&text)),
                ];
                params.extend(request_params(&body));
                params.push(("url", P::str(&url)));
                return Err(err::make(ctx, V_WEB, "bad response", SERVER_ERROR, params));
            }
            let inner = match serde_json::from_str::<Value>(&text) {
                Err(e) => {
                    let cause = error_with(ctx, &format!("JSON.parse: {e}"), vec![])?;
                    let invalid = err::make(
                        ctx,
                        V_WEB,
                        "invalid JSON",
                        SERVER_ERROR,
                        vec![("body", P::str(&text)), ("error", P::Js(cause))],
                    );
                    invalid.into_opaque(ctx)?
                }
                Ok(payload) => match payload.get("error") {
                    Some(error) if truthy(error) => {
                        let message = error
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned();
                        let mut props = Vec::new();
                        if let Some(code) = error.get("code") {
                            props.push(("code", JsValue::from_json(code, ctx)?));
                        }
                        if let Some(data) = error.get("data") {
                            props.push(("data", JsValue::from_json(data, ctx)?));
                        }
                        error_with(ctx, &message, props)?
                    }
                    _ => {
                        return match payload.get("result") {
                            Some(result) => JsValue::from_json(result, ctx),
                            None => Ok(JsValue::undefined()),
                        };
                    }
                },
            };
            let mut params = vec![("body", P::str(&text)), ("error", P::Js(inner))];
            params.extend(request_params(&body));
            params.push(("url", P::str(&url)));
            Err(err::make(
                ctx,
                V_WEB,
                "processing response error",
                SERVER_ERROR,
                params,
            ))
        }
        RpcReply::Timeout { timeout_ms } => {
            let mut params = request_params(&body);
            params.push(("timeout", P::num(timeout_ms as f64)));
            params.push(("url", P::str(&url)));
            Err(err::make(ctx, V_WEB, "timeout", TIMEOUT, params))
        }
        RpcReply::Failed { message } | RpcReply::Limit { message } => {
            let mut params = request_params(&body);
            params.push(("serverError", P::str(&message)));
            params.push(("url", P::str(&url)));
            Err(err::make(
                ctx,
                V_WEB,
                "missing response",
                SERVER_ERROR,
                params,
            ))
        }
    }
}

/// The error of a failed call as a JS value, unless it must pass through untouched
/// (uncatchable, or one of the job's limit errors): then `Err`.
fn catchable(ctx: &mut Context, e: JsError) -> JsResult<JsValue> {
    if e.as_engine().is_some() {
        return Err(e);
    }
    let v = e.into_opaque(ctx)?;
    if super::host::is_limit_error(ctx, &v) {
        return Err(JsError::from_opaque(v));
    }
    Ok(v)
}

/// `spelunk(value, requireData)`: a nested `{message, data}` whose message mentions
/// "reverted" (in objects and in JSON text).
fn spelunk(
    ctx: &mut Context,
    value: &JsValue,
    require_data: bool,
    depth: usize,
) -> JsResult<Option<(JsValue, JsValue)>> {
    if js::is_nullish(value) || depth > 32 {
        return Ok(None);
    }
    if value.is_object() {
        let message = js::get(ctx, value, "message")?;
        if let Some(m) = js::as_str(&message)
            && m.contains("reverted")
        {
            let data = js::get(ctx, value, "data")?;
            let data = if bytes::is_hex_string(&data, None) {
                data
            } else {
                JsValue::null()
            };
            if !require_data || !data.is_null() {
                return Ok(Some((message, data)));
            }
        }
        if let Some(obj) = value.as_object() {
            for key in js::object_keys(ctx, &obj)? {
                let v = obj.get(js::jstr(&key), ctx)?;
                if let Some(found) = spelunk(ctx, &v, require_data, depth + 1)? {
                    return Ok(Some(found));
                }
            }
        }
        return Ok(None);
    }
    if let Some(s) = js::as_str(value)
        && let Ok(parsed) = js::json_parse(ctx, &s)
    {
        return spelunk(ctx, &parsed, require_data, depth + 1);
    }
    Ok(None)
}

/// `checkError(method, error, params)`: the revert data of a failed `call`, or ethers'
/// classified error.
fn check_error(
    ctx: &mut Context,
    method: &str,
    error: JsValue,
    params: &JsValue,
) -> JsResult<JsValue> {
    let mut transaction = js::get(ctx, params, "transaction")?;
    if !transaction.to_boolean() {
        transaction = js::get(ctx, params, "signedTransaction")?;
    }
    let throw = |ctx: &mut Context, message: &str, code: &str, extra: Vec<(&str, P)>| {
        Err(err::make(ctx, V_PROVIDERS, message, code, extra))
    };
    if method == "call" {
        if let Some((_, data)) = spelunk(ctx, &error, true, 0)? {
            return Ok(data);
        }
        return throw(
            ctx,
            "missing revert data in call exception; Transaction reverted without a reason string",
            CALL_EXCEPTION,
            vec![
                ("data", P::str("0x")),
                ("transaction", P::Js(transaction)),
                ("error", P::Js(error)),
            ],
        );
    }
    if method == "estimateGas" {
        let body = js::get(ctx, &error, "body")?;
        let mut found = spelunk(ctx, &body, false, 0)?;
        if found.is_none() {
            found = spelunk(ctx, &error, false, 0)?;
        }
        if let Some((message, _)) = found {
            return throw(
                ctx,
                "cannot estimate gas; transaction may fail or may require manual gas limit",
                "UNPREDICTABLE_GAS_LIMIT",
                vec![
                    ("reason", P::Js(message)),
                    ("method", P::str(method)),
                    ("transaction", P::Js(transaction)),
                    ("error", P::Js(error)),
                ],
            );
        }
    }
    let mut message = js::get(ctx, &error, "message")?;
    let code = js::get(ctx, &error, "code")?;
    let inner = js::get(ctx, &error, "error")?;
    let inner_message = js::get(ctx, &inner, "message")?;
    let body = js::get(ctx, &error, "body")?;
    let response_text = js::get(ctx, &error, "responseText")?;
    if js::as_str(&code).as_deref() == Some(SERVER_ERROR)
        && inner.to_boolean()
        && inner_message.is_string()
    {
        message = inner_message;
    } else if body.is_string() {
        message = body;
    } else if response_text.is_string() {
        message = response_text;
    }
    let message = if message.to_boolean() {
        message.to_string(ctx)?.to_std_string_lossy().to_lowercase()
    } else {
        String::new()
    };
    let classify = |ctx: &mut Context, reason: &str, code: &str| {
        Err(err::make(
            ctx,
            V_PROVIDERS,
            reason,
            code,
            vec![
                ("error", P::Js(error.clone())),
                ("method", P::str(method)),
                ("transaction", P::Js(transaction.clone())),
            ],
        ))
    };
    if message.contains("insufficient funds")
        || message.contains("base fee exceeds gas limit")
        || message.contains("insufficientfunds")
    {
        return classify(
            ctx,
            "insufficient funds for intrinsic transaction cost",
            "INSUFFICIENT_FUNDS",
        );
    }
    if message.contains("nonce too low") || message.contains("nonce is too low") {
        return classify(ctx, "nonce has already been used", "NONCE_EXPIRED");
    }
    if message.contains("replacement transaction underpriced") || gas_price_too_low(&message) {
        return classify(ctx, "replacement fee too low", "REPLACEMENT_UNDERPRICED");
    }
    if message.contains("only replay-protected") {
        return classify(
            ctx,
            "legacy pre-eip-155 transactions not supported",
            UNSUPPORTED_OPERATION,
        );
    }
    if (method == "call" || method == "estimateGas")
        && [
            "gas required exceeds allowance",
            "always failing transaction",
            "execution reverted",
            "revert",
        ]
        .iter()
        .any(|m| message.contains(m))
    {
        return classify(
            ctx,
            "cannot estimate gas; transaction may fail or may require manual gas limit",
            "UNPREDICTABLE_GAS_LIMIT",
        );
    }
    Err(JsError::from_opaque(error))
}

/// `/transaction gas price.*too low/`.
fn gas_price_too_low(message: &str) -> bool {
    message
        .find("transaction gas price")
        .is_some_and(|at| message[at..].contains("too low"))
}

/// `perform(method, params)`: the JSON-RPC request `rpc_method(rpc_params)`, its errors
/// through `checkError(method, …, params)`.
fn perform(
    ctx: &mut Context,
    p: &JsObject,
    method: &str,
    rpc_method: &str,
    rpc_params: Vec<JsValue>,
    params: &JsValue,
) -> JsResult<JsValue> {
    let rpc_params = js::array(ctx, rpc_params);
    match send_raw(ctx, p, rpc_method, rpc_params) {
        Ok(v) => Ok(v),
        Err(e) => {
            let error = catchable(ctx, e)?;
            check_error(ctx, method, error, params)
        }
    }
}

fn bad_result(
    ctx: &mut Context,
    method: &str,
    params: Option<&JsValue>,
    result: &JsValue,
    error: JsError,
) -> JsError {
    let error = match catchable(ctx, error) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let mut props = vec![("method", P::str(method))];
    if let Some(params) = params {
        props.push(("params", P::Js(params.clone())));
    }
    props.push(("result", P::Js(result.clone())));
    props.push(("error", P::Js(error)));
    err::make(
        ctx,
        V_PROVIDERS,
        "bad result from backend",
        SERVER_ERROR,
        props,
    )
}

// ---- network and block number ----

/// `detectNetwork()` by `eth_chainId` (then `net_version`).
fn detect_network(ctx: &mut Context, p: &JsObject) -> JsResult<Network> {
    let empty = js::array(ctx, Vec::new());
    let chain_id = match send_raw(ctx, p, "eth_chainId", empty.clone()) {
        Ok(v) => Ok(v),
        Err(e) => {
            let first = catchable(ctx, e)?;
            match send_raw(ctx, p, "net_version", empty) {
                Ok(v) => Ok(v),
                Err(e) => {
                    catchable(ctx, e)?;
                    Err(first)
                }
            }
        }
    };
    match chain_id {
        Ok(chain_id) if !js::is_nullish(&chain_id) => {
            let number = formatter::big_number(ctx, &chain_id)
                .and_then(|bn| js::call_method(ctx, &bn, "toNumber", &[]));
            match number {
                Ok(n) => Ok(network_by_id(n.as_number().unwrap_or(0.0))),
                Err(e) => {
                    let e = catchable(ctx, e)?;
                    Err(err::make(
                        ctx,
                        V_PROVIDERS,
                        "could not detect network",
                        NETWORK_ERROR,
                        vec![
                            ("chainId", P::Js(chain_id)),
                            ("event", P::str("invalidNetwork")),
                            ("serverError", P::Js(e)),
                        ],
                    ))
                }
            }
        }
        other => {
            let mut params = vec![("event", P::str("noNetwork"))];
            if let Err(cause) = other {
                params.push(("serverError", P::Js(cause)));
            }
            Err(err::make(
                ctx,
                V_PROVIDERS,
                "could not detect network",
                NETWORK_ERROR,
                params,
            ))
        }
    }
}

/// `getNetwork()`: the provider's network, detected (and checked against a given one)
/// the first time.
fn ensure_network(ctx: &mut Context, p: &JsObject) -> JsResult<Network> {
    let (known, verified, is_static) =
        with_state(p, |s| (s.network.clone(), s.verified, s.is_static))?;
    if let Some(n) = &known
        && (verified || is_static)
    {
        return Ok(n.clone());
    }
    let detected = detect_network(ctx, p)?;
    if let Some(n) = known
        && n.chain_id != detected.chain_id
    {
        let network = network_js(ctx, &n);
        let detected = network_js(ctx, &detected);
        return Err(err::make(
            ctx,
            V_PROVIDERS,
            "underlying network changed",
            NETWORK_ERROR,
            vec![
                ("event", P::str("changed")),
                ("network", P::Js(network)),
                ("detectedNetwork", P::Js(detected)),
            ],
        ));
    }
    with_state(p, |s| {
        if s.network.is_none() {
            s.network = Some(detected);
        }
        s.verified = true;
        s.network.clone().unwrap_or_else(|| network_by_id(0.0))
    })
}

/// `_getInternalBlockNumber(maxAge)`: the latest block number, reused if it was fetched
/// at most `max_age_ms` ago; never lower than one seen before.
fn internal_block_number(ctx: &mut Context, p: &JsObject, max_age_ms: f64) -> JsResult<f64> {
    ensure_network(ctx, p)?;
    if max_age_ms > 0.0
        && let Some((block, at)) = with_state(p, |s| s.internal_block)?
        && at.elapsed().as_secs_f64() * 1000.0 <= max_age_ms
    {
        return Ok(block);
    }
    let empty = js::new_object(ctx);
    let result = perform(
        ctx,
        p,
        "getBlockNumber",
        "eth_blockNumber",
        Vec::new(),
        &empty.into(),
    )?;
    let n = formatter::number(ctx, &result)?;
    let n = n.as_number().unwrap_or(0.0);
    with_state(p, |s| {
        let n = n.max(s.max_internal_block);
        s.max_internal_block = n;
        s.internal_block = Some((n, Instant::now()));
        n
    })
}

fn polling_ms(p: &JsObject) -> JsResult<f64> {
    with_state(p, |s| s.polling_ms)
}

/// Confirmations of something mined in `block` (at least 1).
fn confirmations(ctx: &mut Context, p: &JsObject, block: &JsValue) -> JsResult<JsValue> {
    let polling = polling_ms(p)?;
    let latest = internal_block_number(ctx, p, confirmations_age(polling))?;
    let mined = block.to_number(ctx)?;
    Ok(JsValue::from((latest - mined + 1.0).max(1.0)))
}

// ---- argument helpers ----

/// `_getAddress(addressOrName)` (after awaiting).
fn get_address(ctx: &mut Context, p: &JsObject, value: &JsValue) -> JsResult<String> {
    if !value.is_string() {
        return Err(err::arg(
            ctx,
            V_PROVIDERS,
            "invalid address or ENS name",
            "name",
            P::Js(value.clone()),
        ));
    }
    resolve_name(ctx, p, value)
}

/// `resolveName(name)`: an address is checksummed; names are not resolved here.
fn resolve_name(ctx: &mut Context, p: &JsObject, name: &JsValue) -> JsResult<String> {
    match address::get_address(ctx, name) {
        Ok(a) => return Ok(a),
        Err(e) if bytes::is_hex_string(name, None) => return Err(e),
        Err(e) => {
            catchable(ctx, e)?;
        }
    }
    if !name.is_string() {
        return Err(err::arg(
            ctx,
            V_PROVIDERS,
            "invalid ENS name",
            "name",
            P::Js(name.clone()),
        ));
    }
    let network = ensure_network(ctx, p)?;
    if network.ens.is_none() {
        return Err(err::make(
            ctx,
            V_PROVIDERS,
            "network does not support ENS",
            UNSUPPORTED_OPERATION,
            vec![
                ("operation", P::str("getResolver")),
                ("network", P::str(&network.name)),
            ],
        ));
    }
    Err(err::make(
        ctx,
        V_PROVIDERS,
        "ENS names are not resolved in actions; use an address",
        UNSUPPORTED_OPERATION,
        vec![("operation", P::str("resolveName"))],
    ))
}

/// `_getBlockTag(blockTag)` (after awaiting).
fn get_block_tag(ctx: &mut Context, p: &JsObject, tag: &JsValue) -> JsResult<JsValue> {
    if let Some(n) = tag.as_number()
        && n < 0.0
    {
        if n.fract() != 0.0 {
            return Err(err::arg(
                ctx,
                V_PROVIDERS,
                "invalid BlockTag",
                "blockTag",
                P::Js(tag.clone()),
            ));
        }
        let polling = polling_ms(p)?;
        let latest = internal_block_number(ctx, p, confirmations_age(polling))?;
        let block = (latest + n).max(0.0);
        return formatter::block_tag(ctx, &JsValue::from(block));
    }
    formatter::block_tag(ctx, tag)
}

fn lower(ctx: &mut Context, s: &str) -> JsValue {
    let _ = ctx;
    js::s(&s.to_lowercase())
}

// ---- the methods, after their arguments are awaited ----

fn get_balance_like(
    ctx: &mut Context,
    p: &JsObject,
    args: &[JsValue],
    method: &str,
    rpc: &str,
) -> JsResult<(JsValue, JsValue)> {
    ensure_network(ctx, p)?;
    let address = get_address(ctx, p, &js::arg(args, 0))?;
    let tag = get_block_tag(ctx, p, &js::arg(args, 1))?;
    let params = js::plain_object(
        ctx,
        vec![("address", js::s(&address)), ("blockTag", tag.clone())],
    )
    .into();
    let addr = lower(ctx, &address);
    let result = perform(ctx, p, method, rpc, vec![addr, tag], &params)?;
    Ok((result, params))
}

fn do_get_balance(ctx: &mut Context, p: &JsObject, args: &[JsValue]) -> JsResult<JsValue> {
    let (result, params) = get_balance_like(ctx, p, args, "getBalance", "eth_getBalance")?;
    formatter::big_number(ctx, &result)
        .map_err(|e| bad_result(ctx, "getBalance", Some(&params), &result, e))
}

fn do_get_transaction_count(
    ctx: &mut Context,
    p: &JsObject,
    args: &[JsValue],
) -> JsResult<JsValue> {
    let (result, params) = get_balance_like(
        ctx,
        p,
        args,
        "getTransactionCount",
        "eth_getTransactionCount",
    )?;
    formatter::big_number(ctx, &result)
        .and_then(|bn| js::call_method(ctx, &bn, "toNumber", &[]))
        .map_err(|e| bad_result(ctx, "getTransactionCount", Some(&params), &result, e))
}

fn do_get_code(ctx: &mut Context, p: &JsObject, args: &[JsValue]) -> JsResult<JsValue> {
    let (result, params) = get_balance_like(ctx, p, args, "getCode", "eth_getCode")?;
    bytes::hexlify(ctx, &result)
        .map(|h| js::s(&h))
        .map_err(|e| bad_result(ctx, "getCode", Some(&params), &result, e))
}

fn do_get_storage_at(ctx: &mut Context, p: &JsObject, args: &[JsValue]) -> JsResult<JsValue> {
    ensure_network(ctx, p)?;
    let address = get_address(ctx, p, &js::arg(args, 0))?;
    let tag = get_block_tag(ctx, p, &js::arg(args, 2))?;
    let position = formatter::hex_value(ctx, &js::arg(args, 1))?;
    let params = js::plain_object(
        ctx,
        vec![
            ("address", js::s(&address)),
            ("blockTag", tag.clone()),
            ("position", js::s(&position)),
        ],
    )
    .into();
    let padded = bytes::hex_zero_pad(ctx, &js::s(&position), 32)?;
    let addr = lower(ctx, &address);
    let result = perform(
        ctx,
        p,
        "getStorageAt",
        "eth_getStorageAt",
        vec![addr, js::s(&padded), tag],
        &params,
    )?;
    bytes::hexlify(ctx, &result)
        .map(|h| js::s(&h))
        .map_err(|e| bad_result(ctx, "getStorageAt", Some(&params), &result, e))
}

fn do_get_gas_price(ctx: &mut Context, p: &JsObject) -> JsResult<JsValue> {
    ensure_network(ctx, p)?;
    let empty = js::new_object(ctx).into();
    let result = perform(ctx, p, "getGasPrice", "eth_gasPrice", Vec::new(), &empty)?;
    formatter::big_number(ctx, &result)
        .map_err(|e| bad_result(ctx, "getGasPrice", None, &result, e))
}

fn do_get_block(
    ctx: &mut Context,
    p: &JsObject,
    which: &JsValue,
    with_txs: bool,
) -> JsResult<JsValue> {
    ensure_network(ctx, p)?;
    let include = JsValue::from(with_txs);
    let (rpc, first) = if bytes::is_hex_string(which, Some(32)) {
        ("eth_getBlockByHash", which.clone())
    } else {
        match get_block_tag(ctx, p, which) {
            Ok(tag) => ("eth_getBlockByNumber", tag),
            Err(e) => {
                catchable(ctx, e)?;
                return Err(err::arg(
                    ctx,
                    V_PROVIDERS,
                    "invalid block hash or block tag",
                    "blockHashOrBlockTag",
                    P::Js(which.clone()),
                ));
            }
        }
    };
    let key = if rpc == "eth_getBlockByHash" {
        "blockHash"
    } else {
        "blockTag"
    };
    let params = js::plain_object(
        ctx,
        vec![
            ("includeTransactions", include.clone()),
            (key, first.clone()),
        ],
    )
    .into();
    let block = perform(ctx, p, "getBlock", rpc, vec![first, include], &params)?;
    if js::is_nullish(&block) {
        return Ok(JsValue::null());
    }
    if !with_txs {
        return formatter::block(ctx, &block, false);
    }
    let txs = js::get(ctx, &block, "transactions")?;
    for tx in js::array_items(ctx, &txs)? {
        let mined = js::get(ctx, &tx, "blockNumber")?;
        if let Some(o) = tx.as_object() {
            if js::is_nullish(&mined) {
                o.set(js_string!("confirmations"), 0, false, ctx)?;
            } else if js::is_nullish(&js::get(ctx, &tx, "confirmations")?) {
                let c = confirmations(ctx, p, &mined)?;
                o.set(js_string!("confirmations"), c, false, ctx)?;
            }
        }
    }
    let formatted = formatter::block(ctx, &block, true)?;
    let txs = js::get(ctx, &formatted, "transactions")?;
    for tx in js::array_items(ctx, &txs)? {
        wrap_transaction(ctx, p, &tx, None, None)?;
    }
    Ok(formatted)
}

fn do_get_fee_data(ctx: &mut Context, p: &JsObject) -> JsResult<JsValue> {
    let block = do_get_block(ctx, p, &js::s("latest"), false)?;
    let gas_price = match do_get_gas_price(ctx, p) {
        Ok(v) => v,
        Err(e) => {
            catchable(ctx, e)?;
            JsValue::null()
        }
    };
    let base = js::get(ctx, &block, "baseFeePerGas")?;
    let (last, max_fee, priority) = if base.to_boolean() {
        let base_v = bignumber::to_big(ctx, &base)?;
        let priority = BigInt::from(1_500_000_000u64);
        let max_fee = &base_v * 2 + &priority;
        (
            base,
            bignumber::make(ctx, &max_fee)?,
            bignumber::make(ctx, &priority)?,
        )
    } else {
        (JsValue::null(), JsValue::null(), JsValue::null())
    };
    Ok(js::plain_object(
        ctx,
        vec![
            ("lastBaseFeePerGas", last),
            ("maxFeePerGas", max_fee),
            ("maxPriorityFeePerGas", priority),
            ("gasPrice", gas_price),
        ],
    )
    .into())
}

fn do_get_transaction(ctx: &mut Context, p: &JsObject, hash: &JsValue) -> JsResult<JsValue> {
    ensure_network(ctx, p)?;
    let h = formatter::hash(ctx, hash, true)?;
    let params = js::plain_object(ctx, vec![("transactionHash", js::s(&h))]).into();
    let result = perform(
        ctx,
        p,
        "getTransaction",
        "eth_getTransactionByHash",
        vec![js::s(&h)],
        &params,
    )?;
    if js::is_nullish(&result) {
        return Ok(JsValue::null());
    }
    let tx = formatter::transaction_response(ctx, &result)?;
    let mined = js::get(ctx, &tx, "blockNumber")?;
    if let Some(o) = tx.as_object() {
        if js::is_nullish(&mined) {
            o.set(js_string!("confirmations"), 0, false, ctx)?;
        } else if js::is_nullish(&js::get(ctx, &tx, "confirmations")?) {
            let c = confirmations(ctx, p, &mined)?;
            o.set(js_string!("confirmations"), c, false, ctx)?;
        }
    }
    wrap_transaction(ctx, p, &tx, None, None)?;
    Ok(tx)
}

fn do_get_receipt(ctx: &mut Context, p: &JsObject, hash: &JsValue) -> JsResult<JsValue> {
    ensure_network(ctx, p)?;
    let h = formatter::hash(ctx, hash, true)?;
    let params = js::plain_object(ctx, vec![("transactionHash", js::s(&h))]).into();
    let result = perform(
        ctx,
        p,
        "getTransactionReceipt",
        "eth_getTransactionReceipt",
        vec![js::s(&h)],
        &params,
    )?;
    if js::is_nullish(&result) || js::is_nullish(&js::get(ctx, &result, "blockHash")?) {
        return Ok(JsValue::null());
    }
    let receipt = formatter::receipt(ctx, &result)?;
    let mined = js::get(ctx, &receipt, "blockNumber")?;
    if let Some(o) = receipt.as_object() {
        if js::is_nullish(&mined) {
            o.set(js_string!("confirmations"), 0, false, ctx)?;
        } else if js::is_nullish(&js::get(ctx, &receipt, "confirmations")?) {
            let c = confirmations(ctx, p, &mined)?;
            o.set(js_string!("confirmations"), c, false, ctx)?;
        }
    }
    Ok(receipt)
}

/// `_getTransactionRequest(values)` once every field is awaited: `fields` are the awaited
/// values of [`REQUEST_FIELDS`] (in order).
fn transaction_request(
    ctx: &mut Context,
    p: &JsObject,
    values: &JsValue,
    fields: &[JsValue],
) -> JsResult<JsValue> {
    let mut props: Vec<(&str, JsValue)> = Vec::new();
    for (key, v) in REQUEST_FIELDS.iter().zip(fields) {
        if js::is_nullish(&js::get(ctx, values, key)?) {
            continue;
        }
        let out = match *key {
            "from" | "to" => {
                if v.to_boolean() {
                    js::s(&get_address(ctx, p, v)?)
                } else {
                    JsValue::null()
                }
            }
            "type" => {
                if js::is_nullish(v) {
                    JsValue::null()
                } else {
                    v.clone()
                }
            }
            "data" => {
                if v.to_boolean() {
                    js::s(&bytes::hexlify(ctx, v)?)
                } else {
                    JsValue::null()
                }
            }
            _ => {
                if v.to_boolean() {
                    formatter::big_number(ctx, v)?
                } else {
                    JsValue::null()
                }
            }
        };
        props.push((key, out));
    }
    let al = js::get(ctx, values, "accessList")?;
    if al.to_boolean() {
        props.push(("accessList", formatter::access_list(ctx, &al)?));
    }
    let tx = js::plain_object(ctx, props).into();
    formatter::check(ctx, formatter::TRANSACTION_REQUEST, &tx)
}

/// The fields `_getTransactionRequest` awaits, in order.
const REQUEST_FIELDS: [&str; 9] = [
    "from",
    "to",
    "gasLimit",
    "gasPrice",
    "maxFeePerGas",
    "maxPriorityFeePerGas",
    "value",
    "type",
    "data",
];

/// The values of [`REQUEST_FIELDS`] of `tx` (promises included).
fn request_field_values(ctx: &mut Context, tx: &JsValue) -> JsResult<Vec<JsValue>> {
    let mut out = Vec::with_capacity(REQUEST_FIELDS.len());
    for key in REQUEST_FIELDS {
        out.push(js::get(ctx, tx, key)?);
    }
    Ok(out)
}

/// The legacy-network adjustment of `perform` for `call`/`estimateGas`: a `type` of 0
/// without EIP-1559 fields is dropped when the chain has no base fee.
fn legacy_type_adjusted(ctx: &mut Context, p: &JsObject, tx: &JsValue) -> JsResult<JsValue> {
    let ty = js::get(ctx, tx, "type")?;
    if js::is_nullish(&ty) || !formatter::is_zero(ctx, &ty)? {
        return Ok(tx.clone());
    }
    if !js::is_nullish(&js::get(ctx, tx, "maxFeePerGas")?)
        || !js::is_nullish(&js::get(ctx, tx, "maxPriorityFeePerGas")?)
    {
        return Ok(tx.clone());
    }
    let fee = do_get_fee_data(ctx, p)?;
    if !js::is_nullish(&js::get(ctx, &fee, "maxFeePerGas")?)
        || !js::is_nullish(&js::get(ctx, &fee, "maxPriorityFeePerGas")?)
    {
        return Ok(tx.clone());
    }
    let Some(obj) = tx.as_object() else {
        return Ok(tx.clone());
    };
    let mut props = Vec::new();
    for key in js::object_keys(ctx, &obj)? {
        if key != "type" {
            let v = obj.get(js::jstr(&key), ctx)?;
            props.push((key, v));
        }
    }
    let copy = js::new_object(ctx);
    for (k, v) in props {
        copy.create_data_property_or_throw(js::jstr(&k), v, ctx)?;
    }
    Ok(copy.into())
}

fn do_call(ctx: &mut Context, p: &JsObject, tx: &JsValue, tag: &JsValue) -> JsResult<JsValue> {
    let tag = get_block_tag(ctx, p, tag)?;
    let params = js::plain_object(
        ctx,
        vec![("transaction", tx.clone()), ("blockTag", tag.clone())],
    )
    .into();
    let sent = legacy_type_adjusted(ctx, p, tx)?;
    let hex_tx = formatter::hexlify_transaction(ctx, &sent)?;
    let result = perform(ctx, p, "call", "eth_call", vec![hex_tx, tag], &params)?;
    bytes::hexlify(ctx, &result)
        .map(|h| js::s(&h))
        .map_err(|e| bad_result(ctx, "call", Some(&params), &result, e))
}

fn do_estimate_gas(ctx: &mut Context, p: &JsObject, tx: &JsValue) -> JsResult<JsValue> {
    let params = js::plain_object(ctx, vec![("transaction", tx.clone())]).into();
    let sent = legacy_type_adjusted(ctx, p, tx)?;
    let hex_tx = formatter::hexlify_transaction(ctx, &sent)?;
    let result = perform(
        ctx,
        p,
        "estimateGas",
        "eth_estimateGas",
        vec![hex_tx],
        &params,
    )?;
    formatter::big_number(ctx, &result)
        .map_err(|e| bad_result(ctx, "estimateGas", Some(&params), &result, e))
}

fn do_send_transaction(ctx: &mut Context, p: &JsObject, signed: &JsValue) -> JsResult<JsValue> {
    ensure_network(ctx, p)?;
    let hex_tx = bytes::hexlify(ctx, signed)?;
    let tx = txparse::parse(ctx, signed)?;
    if js::is_nullish(&js::get(ctx, &tx, "confirmations")?)
        && let Some(o) = tx.as_object()
    {
        o.set(js_string!("confirmations"), 0, false, ctx)?;
    }
    let polling = polling_ms(p)?;
    let block = internal_block_number(ctx, p, confirmations_age(polling))?;
    let params = js::plain_object(ctx, vec![("signedTransaction", js::s(&hex_tx))]).into();
    let sent = perform(
        ctx,
        p,
        "sendTransaction",
        "eth_sendRawTransaction",
        vec![js::s(&hex_tx)],
        &params,
    );
    match sent {
        Ok(hash) => {
            wrap_transaction(ctx, p, &tx, Some(&hash), Some(block))?;
            Ok(tx)
        }
        Err(e) => {
            let error = catchable(ctx, e)?;
            if let Some(o) = error.as_object() {
                let hash = js::get(ctx, &tx, "hash")?;
                o.set(js_string!("transaction"), tx, false, ctx)?;
                o.set(js_string!("transactionHash"), hash, false, ctx)?;
            }
            Err(JsError::from_opaque(error))
        }
    }
}

fn do_get_logs(ctx: &mut Context, p: &JsObject, filter: &JsValue) -> JsResult<JsValue> {
    ensure_network(ctx, p)?;
    let mut props: Vec<(&str, JsValue)> = Vec::new();
    let addr = js::get(ctx, filter, "address")?;
    if !js::is_nullish(&addr) {
        props.push(("address", js::s(&get_address(ctx, p, &addr)?)));
    }
    for key in ["blockHash", "topics"] {
        let v = js::get(ctx, filter, key)?;
        if !js::is_nullish(&v) {
            props.push((key, v));
        }
    }
    for key in ["fromBlock", "toBlock"] {
        let v = js::get(ctx, filter, key)?;
        if !js::is_nullish(&v) {
            props.push((key, get_block_tag(ctx, p, &v)?));
        }
    }
    let raw = js::plain_object(ctx, props).into();
    let formatted = formatter::check(ctx, formatter::FILTER, &raw)?;
    let addr = js::get(ctx, &formatted, "address")?;
    if let Some(a) = js::as_str(&addr)
        && let Some(o) = formatted.as_object()
    {
        o.set(js_string!("address"), lower(ctx, &a), false, ctx)?;
    }
    let params = js::plain_object(ctx, vec![("filter", formatted.clone())]).into();
    let logs = perform(ctx, p, "getLogs", "eth_getLogs", vec![formatted], &params)?;
    if !js::is_array(&logs) {
        return Err(err::type_error("logs.forEach is not a function"));
    }
    let mut out = Vec::new();
    for log in js::array_items(ctx, &logs)? {
        out.push(formatter::filter_log(ctx, &log)?);
    }
    Ok(js::array(ctx, out))
}

// ---- waiting for a transaction ----

fn epoch_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// A function object from a native closure over `caps`.
fn closure(
    ctx: &mut Context,
    caps: Vec<JsValue>,
    length: usize,
    f: fn(&JsValue, &[JsValue], &[JsValue], &mut Context) -> JsResult<JsValue>,
) -> JsObject {
    FunctionObjectBuilder::new(
        ctx.realm(),
        NativeFunction::from_copy_closure_with_captures(
            move |this, args, caps: &Vec<JsValue>, ctx| f(this, args, caps, ctx),
            caps,
        ),
    )
    .length(length)
    .build()
    .into()
}

/// The first pause between two receipt polls of a wait, in ms; each next pause doubles,
/// up to the provider's `pollingInterval`.
const FIRST_POLL_MS: f64 = 50.0;

/// `_waitForTransaction(hash, confirms, timeout)`: the receipt once it has `confirms`
/// confirmations, checked now and then after pauses growing from [`FIRST_POLL_MS`] to
/// `pollingInterval`, on the job's timers.
fn wait_for(
    ctx: &mut Context,
    p: &JsObject,
    hash: &JsValue,
    confirms: f64,
    timeout_ms: f64,
) -> JsResult<JsValue> {
    let receipt = do_get_receipt(ctx, p, hash)?;
    let have = if receipt.is_null() {
        0.0
    } else {
        js::get(ctx, &receipt, "confirmations")?.to_number(ctx)?
    };
    if have >= confirms {
        return Ok(JsPromise::resolve(receipt, ctx)?.into());
    }
    let (promise, resolvers) = JsPromise::new_pending(ctx);
    let deadline = if timeout_ms > 0.0 {
        epoch_ms() + timeout_ms
    } else {
        0.0
    };
    let caps = vec![
        p.clone().into(),
        hash.clone(),
        JsValue::from(confirms),
        JsValue::from(deadline),
        JsValue::from(timeout_ms),
        resolvers.resolve.into(),
        resolvers.reject.into(),
        // polls scheduled so far
        JsValue::from(0),
    ];
    schedule_poll(ctx, p, caps)?;
    Ok(promise.into())
}

fn schedule_poll(ctx: &mut Context, p: &JsObject, mut caps: Vec<JsValue>) -> JsResult<()> {
    let polls = caps[7].as_number().unwrap_or(0.0);
    caps[7] = JsValue::from(polls + 1.0);
    let mut delay = polling_ms(p)?.min(FIRST_POLL_MS * 2f64.powf(polls.min(20.0)));
    let deadline = caps[3].as_number().unwrap_or(0.0);
    if deadline > 0.0 {
        delay = delay.min((deadline - epoch_ms()).max(0.0));
    }
    let callback = closure(ctx, caps, 0, poll_receipt);
    super::host::schedule(
        ctx,
        callback,
        Duration::from_micros((delay * 1000.0) as u64),
    )?;
    Ok(())
}

fn poll_receipt(
    _: &JsValue,
    _: &[JsValue],
    caps: &[JsValue],
    ctx: &mut Context,
) -> JsResult<JsValue> {
    let p = provider_of(ctx, &caps[0])?;
    let confirms = caps[2].as_number().unwrap_or(1.0);
    let deadline = caps[3].as_number().unwrap_or(0.0);
    let resolve = caps[5].clone();
    let reject = caps[6].clone();
    let call = |ctx: &mut Context, f: &JsValue, v: JsValue| -> JsResult<()> {
        if let Some(f) = f.as_callable() {
            f.call(&JsValue::undefined(), &[v], ctx)?;
        }
        Ok(())
    };
    match do_get_receipt(ctx, &p, &caps[1]) {
        Ok(receipt) if !receipt.is_null() => {
            let have = js::get(ctx, &receipt, "confirmations")?.to_number(ctx)?;
            if have >= confirms {
                call(ctx, &resolve, receipt)?;
                return Ok(JsValue::undefined());
            }
        }
        Ok(_) => {}
        Err(e) => {
            if e.as_engine().is_some() {
                return Err(e);
            }
            let reason = e.into_opaque(ctx)?;
            call(ctx, &reject, reason)?;
            return Ok(JsValue::undefined());
        }
    }
    if deadline > 0.0 && epoch_ms() >= deadline {
        let e = err::make(
            ctx,
            V_PROVIDERS,
            "timeout exceeded",
            TIMEOUT,
            vec![("timeout", P::Js(caps[4].clone()))],
        );
        let reason = e.into_opaque(ctx)?;
        call(ctx, &reject, reason)?;
        return Ok(JsValue::undefined());
    }
    schedule_poll(ctx, &p, caps.to_vec())?;
    Ok(JsValue::undefined())
}

/// `_wrapTransaction(tx, hash, startBlock)`: checks the hash the node returned and adds
/// `wait(confirms = 1, timeout)`.
fn wrap_transaction(
    ctx: &mut Context,
    p: &JsObject,
    tx: &JsValue,
    hash: Option<&JsValue>,
    _start_block: Option<f64>,
) -> JsResult<()> {
    if let Some(hash) = hash {
        if bytes::hex_data_length(ctx, hash)? != Some(32) {
            return Err(err::plain("invalid response - sendTransaction"));
        }
        let own = js::get(ctx, tx, "hash")?;
        if js::as_str(&own) != js::as_str(hash) {
            return Err(err::make(
                ctx,
                V_PROVIDERS,
                "Transaction hash mismatch from Provider.sendTransaction.",
                UNKNOWN_ERROR,
                vec![
                    ("expectedHash", P::Js(own)),
                    ("returnedHash", P::Js(hash.clone())),
                ],
            ));
        }
    }
    let wait = closure(ctx, vec![p.clone().into(), tx.clone()], 2, tx_wait);
    if let Some(o) = tx.as_object() {
        o.set(js_string!("wait"), wait, false, ctx)?;
    }
    Ok(())
}

fn tx_wait(
    _: &JsValue,
    args: &[JsValue],
    caps: &[JsValue],
    ctx: &mut Context,
) -> JsResult<JsValue> {
    let r = (|| {
        let p = provider_of(ctx, &caps[0])?;
        let confirms = js::arg(args, 0);
        let confirms = if js::is_nullish(&confirms) {
            1.0
        } else {
            confirms.to_number(ctx)?
        };
        let timeout = js::arg(args, 1);
        let timeout = if js::is_nullish(&timeout) {
            0.0
        } else {
            timeout.to_number(ctx)?
        };
        let hash = js::get(ctx, &caps[1], "hash")?;
        let waiting = wait_for(ctx, &p, &hash, confirms, timeout)?;
        deferred::then(
            ctx,
            waiting,
            vec![caps[1].clone(), JsValue::from(confirms)],
            |v, caps, ctx| {
                let receipt = js::arg(v, 0);
                if receipt.is_null() && caps[1].as_number() == Some(0.0) {
                    return Ok(JsValue::null());
                }
                let status = js::get(ctx, &receipt, "status")?;
                if status.as_number() == Some(0.0) {
                    let hash = js::get(ctx, &caps[0], "hash")?;
                    return Err(err::make(
                        ctx,
                        V_PROVIDERS,
                        "transaction failed",
                        CALL_EXCEPTION,
                        vec![
                            ("transactionHash", P::Js(hash)),
                            ("transaction", P::Js(caps[0].clone())),
                            ("receipt", P::Js(receipt)),
                        ],
                    ));
                }
                Ok(receipt)
            },
        )
    })();
    settle(ctx, r)
}

// ---- JS entry points ----

type Method = fn(&JsValue, &[JsValue], &mut Context) -> JsResult<JsValue>;

/// `name(args…)` awaiting every argument, then `k(provider, args)`.
fn entry(
    ctx: &mut Context,
    this: &JsValue,
    args: &[JsValue],
    n: usize,
    k: deferred::Then,
) -> JsResult<JsValue> {
    let values: Vec<JsValue> = (0..n).map(|i| js::arg(args, i)).collect();
    deferred::all_then(ctx, values, vec![this.clone()], k)
}

fn provider_cap(ctx: &mut Context, caps: &[JsValue]) -> JsResult<JsObject> {
    provider_of(ctx, &caps[0])
}

fn m_get_network(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    entry(ctx, this, args, 0, |_, caps, ctx| {
        let p = provider_cap(ctx, caps)?;
        let n = ensure_network(ctx, &p)?;
        Ok(network_js(ctx, &n))
    })
}

fn m_detect_network(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    entry(ctx, this, args, 0, |_, caps, ctx| {
        let p = provider_cap(ctx, caps)?;
        let (is_static, known) = with_state(&p, |s| (s.is_static, s.network.clone()))?;
        let n = match known {
            Some(n) if is_static => n,
            _ => {
                let n = detect_network(ctx, &p)?;
                if is_static {
                    with_state(&p, |s| {
                        s.network = Some(n.clone());
                        s.verified = true;
                    })?;
                }
                n
            }
        };
        Ok(network_js(ctx, &n))
    })
}

fn m_get_block_number(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    entry(ctx, this, args, 0, |_, caps, ctx| {
        let p = provider_cap(ctx, caps)?;
        Ok(JsValue::from(internal_block_number(ctx, &p, 0.0)?))
    })
}

fn m_get_gas_price(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    entry(ctx, this, args, 0, |_, caps, ctx| {
        let p = provider_cap(ctx, caps)?;
        do_get_gas_price(ctx, &p)
    })
}

fn m_get_fee_data(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    entry(ctx, this, args, 0, |_, caps, ctx| {
        let p = provider_cap(ctx, caps)?;
        do_get_fee_data(ctx, &p)
    })
}

fn m_get_balance(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    entry(ctx, this, args, 2, |a, caps, ctx| {
        let p = provider_cap(ctx, caps)?;
        do_get_balance(ctx, &p, a)
    })
}

fn m_get_transaction_count(
    this: &JsValue,
    args: &[JsValue],
    ctx: &mut Context,
) -> JsResult<JsValue> {
    entry(ctx, this, args, 2, |a, caps, ctx| {
        let p = provider_cap(ctx, caps)?;
        do_get_transaction_count(ctx, &p, a)
    })
}

fn m_get_code(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    entry(ctx, this, args, 2, |a, caps, ctx| {
        let p = provider_cap(ctx, caps)?;
        do_get_code(ctx, &p, a)
    })
}

fn m_get_storage_at(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    entry(ctx, this, args, 3, |a, caps, ctx| {
        let p = provider_cap(ctx, caps)?;
        do_get_storage_at(ctx, &p, a)
    })
}

fn m_get_block(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    entry(ctx, this, args, 1, |a, caps, ctx| {
        let p = provider_cap(ctx, caps)?;
        do_get_block(ctx, &p, &js::arg(a, 0), false)
    })
}

fn m_get_block_with_transactions(
    this: &JsValue,
    args: &[JsValue],
    ctx: &mut Context,
) -> JsResult<JsValue> {
    entry(ctx, this, args, 1, |a, caps, ctx| {
        let p = provider_cap(ctx, caps)?;
        do_get_block(ctx, &p, &js::arg(a, 0), true)
    })
}

fn m_get_transaction(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    entry(ctx, this, args, 1, |a, caps, ctx| {
        let p = provider_cap(ctx, caps)?;
        do_get_transaction(ctx, &p, &js::arg(a, 0))
    })
}

fn m_get_transaction_receipt(
    this: &JsValue,
    args: &[JsValue],
    ctx: &mut Context,
) -> JsResult<JsValue> {
    entry(ctx, this, args, 1, |a, caps, ctx| {
        let p = provider_cap(ctx, caps)?;
        do_get_receipt(ctx, &p, &js::arg(a, 0))
    })
}

fn m_wait_for_transaction(
    this: &JsValue,
    args: &[JsValue],
    ctx: &mut Context,
) -> JsResult<JsValue> {
    entry(ctx, this, args, 3, |a, caps, ctx| {
        let p = provider_cap(ctx, caps)?;
        let confirms = js::arg(a, 1);
        let confirms = if js::is_nullish(&confirms) {
            1.0
        } else {
            confirms.to_number(ctx)?
        };
        let timeout = js::arg(a, 2);
        let timeout = if timeout.to_boolean() {
            timeout.to_number(ctx)?
        } else {
            0.0
        };
        wait_for(ctx, &p, &js::arg(a, 0), confirms, timeout)
    })
}

fn m_send_transaction(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    entry(ctx, this, args, 1, |a, caps, ctx| {
        let p = provider_cap(ctx, caps)?;
        do_send_transaction(ctx, &p, &js::arg(a, 0))
    })
}

/// `call`/`estimateGas`, once the transaction (and block tag) are awaited: awaits the
/// transaction's fields, then runs `k(request, blockTag)`.
fn with_request(
    ctx: &mut Context,
    a: &[JsValue],
    caps: &[JsValue],
    k: deferred::Then,
) -> JsResult<JsValue> {
    let p = provider_cap(ctx, caps)?;
    ensure_network(ctx, &p)?;
    let tx = js::arg(a, 0);
    let mut values = request_field_values(ctx, &tx)?;
    values.push(js::arg(a, 1));
    deferred::all_then(ctx, values, vec![caps[0].clone(), tx], k)
}

fn m_call(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    entry(ctx, this, args, 2, |a, caps, ctx| {
        with_request(ctx, a, caps, |v, caps, ctx| {
            let p = provider_of(ctx, &caps[0])?;
            let request = transaction_request(ctx, &p, &caps[1], &v[..REQUEST_FIELDS.len()])?;
            do_call(ctx, &p, &request, &js::arg(v, REQUEST_FIELDS.len()))
        })
    })
}

fn m_estimate_gas(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    entry(ctx, this, args, 1, |a, caps, ctx| {
        with_request(ctx, a, caps, |v, caps, ctx| {
            let p = provider_of(ctx, &caps[0])?;
            let request = transaction_request(ctx, &p, &caps[1], &v[..REQUEST_FIELDS.len()])?;
            do_estimate_gas(ctx, &p, &request)
        })
    })
}

fn m_get_logs(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    entry(ctx, this, args, 1, |a, caps, ctx| {
        let filter = js::arg(a, 0);
        let mut values = Vec::new();
        for key in ["address", "fromBlock", "toBlock"] {
            values.push(js::get(ctx, &filter, key)?);
        }
        deferred::all_then(
            ctx,
            values,
            vec![caps[0].clone(), filter],
            |v, caps, ctx| {
                let p = provider_of(ctx, &caps[0])?;
                let filter = &caps[1];
                let mut props: Vec<(&str, JsValue)> = Vec::new();
                for (key, value) in ["address", "fromBlock", "toBlock"].iter().zip(v) {
                    props.push((key, value.clone()));
                }
                for key in ["blockHash", "topics"] {
                    props.push((key, js::get(ctx, filter, key)?));
                }
                let resolved = js::plain_object(ctx, props).into();
                do_get_logs(ctx, &p, &resolved)
            },
        )
    })
}

fn m_send(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let r = (|| {
        let p = provider_of(ctx, this)?;
        let method = js::arg(args, 0).to_string(ctx)?.to_std_string_lossy();
        send_raw(ctx, &p, &method, js::arg(args, 1))
    })();
    settle(ctx, r)
}

fn m_resolve_name(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    entry(ctx, this, args, 1, |a, caps, ctx| {
        let p = provider_cap(ctx, caps)?;
        Ok(js::s(&resolve_name(ctx, &p, &js::arg(a, 0))?))
    })
}

fn m_lookup_address(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    entry(ctx, this, args, 1, |_, _, ctx| {
        Err(err::make(
            ctx,
            V_PROVIDERS,
            "ENS names are not resolved in actions",
            UNSUPPORTED_OPERATION,
            vec![("operation", P::str("lookupAddress"))],
        ))
    })
}

fn m_list_accounts(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    entry(ctx, this, args, 0, |_, caps, ctx| {
        let p = provider_cap(ctx, caps)?;
        let empty = js::array(ctx, Vec::new());
        let accounts = send_raw(ctx, &p, "eth_accounts", empty)?;
        let mut out = Vec::new();
        for a in js::array_items(ctx, &accounts)? {
            out.push(js::s(&address::get_address(ctx, &a)?));
        }
        Ok(js::array(ctx, out))
    })
}

fn g_network(this: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = provider_of(ctx, this)?;
    match with_state(&p, |s| s.network.clone())? {
        Some(n) => Ok(network_js(ctx, &n)),
        None => Ok(JsValue::undefined()),
    }
}

fn g_polling_interval(this: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = provider_of(ctx, this)?;
    Ok(JsValue::from(polling_ms(&p)?))
}

fn s_polling_interval(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = provider_of(ctx, this)?;
    let v = js::arg(args, 0);
    match v.as_number() {
        Some(n) if n > 0.0 && n.fract() == 0.0 => {
            with_state(&p, |s| s.polling_ms = n)?;
            Ok(JsValue::undefined())
        }
        _ => Err(err::plain("invalid polling interval")),
    }
}

fn f_is_provider(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let v = js::arg(args, 0);
    if !v.to_boolean() {
        return Ok(false.into());
    }
    Ok(js::get(ctx, &v, "_isProvider")?.to_boolean().into())
}

fn f_default_url(_: &JsValue, _: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    Ok(js::s(DEFAULT_URL))
}

fn f_hexlify_transaction(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    formatter::hexlify_transaction(ctx, &js::arg(args, 0))
}

fn f_get_network(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    match network_of(ctx, &js::arg(args, 0))? {
        Some(n) => Ok(network_js(ctx, &n)),
        None => Ok(JsValue::null()),
    }
}

/// `new JsonRpcProvider(url?, network?)`.
fn construct(
    new_target: &JsValue,
    args: &[JsValue],
    ctx: &mut Context,
    is_static: bool,
) -> JsResult<JsValue> {
    if new_target.is_undefined() {
        return Err(err::make(
            ctx,
            "abstract-provider/5.7.0",
            "missing new",
            "MISSING_NEW",
            vec![("name", P::str("Provider"))],
        ));
    }
    let url_arg = js::arg(args, 0);
    let url = match url_arg.as_object() {
        Some(_) if !url_arg.is_string() => js::as_str(&js::get(ctx, &url_arg, "url")?),
        _ if url_arg.to_boolean() => Some(url_arg.to_string(ctx)?.to_std_string_lossy()),
        _ => None,
    };
    let network_arg = js::arg(args, 1);
    let network = network_of(ctx, &network_arg)?;
    if !js::is_nullish(&network_arg) && network.is_none() {
        return Err(err::arg(
            ctx,
            V_PROVIDERS,
            "invalid network",
            "network",
            P::Js(network_arg),
        ));
    }
    let (target, url) = match url {
        Some(u) => match u.strip_prefix("chain:") {
            Some(id) => match id.parse::<u64>() {
                Ok(id) => (RpcTarget::Chain(id), u),
                Err(_) => {
                    return Err(err::arg(
                        ctx,
                        V_PROVIDERS,
                        "invalid chain URL (chain:<id>)",
                        "url",
                        P::str(&u),
                    ));
                }
            },
            None => (RpcTarget::Url(u.clone()), u),
        },
        None => match &network {
            Some(n) if n.chain_id >= 0.0 && n.chain_id.fract() == 0.0 => {
                let id = n.chain_id as u64;
                (RpcTarget::Chain(id), format!("chain:{id}"))
            }
            _ => (
                RpcTarget::Url(DEFAULT_URL.to_owned()),
                DEFAULT_URL.to_owned(),
            ),
        },
    };
    let proto = match js::get(ctx, new_target, "prototype")?.as_object() {
        Some(p) => p,
        None => {
            let realm = ctx
                .realm()
                .host_defined()
                .get::<ProviderRealm>()
                .cloned()
                .ok_or_else(|| err::type_error("ethers.providers is not installed"))?;
            if is_static {
                realm.static_proto.clone()
            } else {
                realm.proto.clone()
            }
        }
    };
    let obj = JsObject::from_proto_and_data(
        Some(proto),
        ProviderData {
            state: State {
                target,
                url: url.clone(),
                is_static,
                verified: false,
                network,
                next_id: 42.0,
                internal_block: None,
                max_internal_block: -1024.0,
                polling_ms: 4000.0,
            },
        },
    );
    js::read_only(ctx, &obj, "_isProvider", true.into())?;
    js::read_only(ctx, &obj, "anyNetwork", false.into())?;
    let connection = js::plain_object(ctx, vec![("url", js::s(&url))]);
    js::freeze(ctx, &connection)?;
    js::read_only(ctx, &obj, "connection", connection.into())?;
    Ok(obj.into())
}

fn json_rpc_ctor(new_target: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    construct(new_target, args, ctx, false)
}

fn static_ctor(new_target: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    construct(new_target, args, ctx, true)
}

fn class(ctx: &mut Context, name: &str, ctor: Method, proto: JsObject) -> JsResult<JsObject> {
    let f = js::constructor(ctx, name, 2, NativeFunction::from_fn_ptr(ctor), &proto)?;
    for (n, len, m) in [
        ("isProvider", 1, f_is_provider as Method),
        ("defaultUrl", 0, f_default_url),
        ("hexlifyTransaction", 2, f_hexlify_transaction),
        ("getNetwork", 1, f_get_network),
    ] {
        js::method(ctx, &f, n, len, NativeFunction::from_fn_ptr(m))?;
    }
    Ok(f)
}

/// The realm's provider prototypes (for `new` without a usable `new.target`).
#[derive(Clone, Trace, Finalize, JsData)]
struct ProviderRealm {
    proto: JsObject,
    static_proto: JsObject,
}

/// Defines `ethers.providers` as an accessor that builds the namespace on first read
/// (most actions never use a provider, and building the classes costs about as much as
/// the rest of `ethers`) and keeps it; an assignment replaces it. It stays an accessor
/// (see `install` in `mod.rs` for boa's inline cache).
pub(crate) fn install(ctx: &mut Context, ethers: &JsObject) -> JsResult<()> {
    let getter = FunctionObjectBuilder::new(ctx.realm(), NativeFunction::from_fn_ptr(lazy_get))
        .name(js_string!("get providers"))
        .build();
    let setter = FunctionObjectBuilder::new(ctx.realm(), NativeFunction::from_fn_ptr(lazy_set))
        .name(js_string!("set providers"))
        .length(1)
        .build();
    ethers.define_property_or_throw(
        js_string!("providers"),
        PropertyDescriptor::builder()
            .get(getter)
            .set(setter)
            .enumerable(true)
            .configurable(true),
        ctx,
    )?;
    Ok(())
}

/// The value of `ethers.providers` once read or assigned.
#[derive(Clone, Trace, Finalize, JsData)]
struct ProvidersValue(JsValue);

fn lazy_get(_: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    if let Some(ProvidersValue(v)) = ctx.realm().host_defined().get::<ProvidersValue>() {
        return Ok(v.clone());
    }
    let providers: JsValue = build(ctx)?.into();
    ctx.realm()
        .host_defined_mut()
        .insert(ProvidersValue(providers.clone()));
    Ok(providers)
}

fn lazy_set(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    ctx.realm()
        .host_defined_mut()
        .insert(ProvidersValue(js::arg(args, 0)));
    Ok(JsValue::undefined())
}

/// Builds `ethers.providers` (`JsonRpcProvider`, `StaticJsonRpcProvider`, `getNetwork`).
fn build(ctx: &mut Context) -> JsResult<JsObject> {
    let proto = js::new_object(ctx);
    let methods: [(&str, usize, Method); 22] = [
        ("getNetwork", 0, m_get_network),
        ("detectNetwork", 0, m_detect_network),
        ("getBlockNumber", 0, m_get_block_number),
        ("getGasPrice", 0, m_get_gas_price),
        ("getFeeData", 0, m_get_fee_data),
        ("getBalance", 2, m_get_balance),
        ("getTransactionCount", 2, m_get_transaction_count),
        ("getCode", 2, m_get_code),
        ("getStorageAt", 3, m_get_storage_at),
        ("call", 2, m_call),
        ("estimateGas", 1, m_estimate_gas),
        ("sendTransaction", 1, m_send_transaction),
        ("getBlock", 1, m_get_block),
        ("getBlockWithTransactions", 1, m_get_block_with_transactions),
        ("getTransaction", 1, m_get_transaction),
        ("getTransactionReceipt", 1, m_get_transaction_receipt),
        ("waitForTransaction", 3, m_wait_for_transaction),
        ("getLogs", 1, m_get_logs),
        ("send", 2, m_send),
        ("resolveName", 1, m_resolve_name),
        ("lookupAddress", 1, m_lookup_address),
        ("listAccounts", 0, m_list_accounts),
    ];
    for (name, len, f) in methods {
        js::method(ctx, &proto, name, len, NativeFunction::from_fn_ptr(f))?;
    }
    js::getter(
        ctx,
        &proto,
        "network",
        NativeFunction::from_fn_ptr(g_network),
    )?;
    let get =
        FunctionObjectBuilder::new(ctx.realm(), NativeFunction::from_fn_ptr(g_polling_interval))
            .name(js_string!("get pollingInterval"))
            .build();
    let set =
        FunctionObjectBuilder::new(ctx.realm(), NativeFunction::from_fn_ptr(s_polling_interval))
            .name(js_string!("set pollingInterval"))
            .length(1)
            .build();
    proto.define_property_or_throw(
        js_string!("pollingInterval"),
        PropertyDescriptor::builder()
            .get(get)
            .set(set)
            .enumerable(false)
            .configurable(true),
        ctx,
    )?;
    let json_rpc = class(ctx, "JsonRpcProvider", json_rpc_ctor, proto.clone())?;
    let static_proto = js::with_proto(proto.clone());
    let static_class = class(
        ctx,
        "StaticJsonRpcProvider",
        static_ctor,
        static_proto.clone(),
    )?;
    static_class.set_prototype(Some(json_rpc.clone()));

    let providers = js::new_object(ctx);
    providers.set(js_string!("JsonRpcProvider"), json_rpc, false, ctx)?;
    providers.set(
        js_string!("StaticJsonRpcProvider"),
        static_class,
        false,
        ctx,
    )?;
    js::method(
        ctx,
        &providers,
        "getNetwork",
        1,
        NativeFunction::from_fn_ptr(f_get_network),
    )?;
    ctx.realm().host_defined_mut().insert(ProviderRealm {
        proto,
        static_proto,
    });
    Ok(providers)
}
