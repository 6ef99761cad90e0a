//! Errors shaped exactly like ethers v5's `Logger.makeError`: the message carries the
//! reason, an optional `[ See: … ]` link, and `(key=JSON, …, code=…, version=…)`; the
//! error object gets `reason`, `code` and one property per parameter.

use boa_engine::{Context, JsError, JsNativeError, JsResult, JsValue, js_string};

use super::js;

pub(crate) const V_BYTES: &str = "bytes/5.7.0";
pub(crate) const V_BIGNUMBER: &str = "bignumber/5.7.0";
pub(crate) const V_ADDRESS: &str = "address/5.7.0";
pub(crate) const V_STRINGS: &str = "strings/5.7.0";
pub(crate) const V_SIGNING_KEY: &str = "signing-key/5.7.0";
pub(crate) const V_TRANSACTIONS: &str = "transactions/5.7.0";
pub(crate) const V_PROPERTIES: &str = "properties/5.7.0";
pub(crate) const V_WALLET: &str = "wallet/5.7.0";
pub(crate) const V_UNITS: &str = "units/5.7.0";
pub(crate) const V_SOLIDITY: &str = "solidity/5.7.0";
pub(crate) const V_ABI: &str = "abi/5.7.0";

pub(crate) const INVALID_ARGUMENT: &str = "INVALID_ARGUMENT";
pub(crate) const NUMERIC_FAULT: &str = "NUMERIC_FAULT";
pub(crate) const UNSUPPORTED_OPERATION: &str = "UNSUPPORTED_OPERATION";
pub(crate) const UNEXPECTED_ARGUMENT: &str = "UNEXPECTED_ARGUMENT";
pub(crate) const MISSING_ARGUMENT: &str = "MISSING_ARGUMENT";
pub(crate) const BUFFER_OVERRUN: &str = "BUFFER_OVERRUN";

/// One parameter of an ethers error.
pub(crate) enum P {
    /// A JS value, rendered with `JSON.stringify` (and stored on the error as is).
    Js(JsValue),
    /// Bytes, rendered as `Uint8Array(0x…)` (stored on the error as a Uint8Array).
    Bytes(Vec<u8>),
    /// A value already rendered as JSON text (stored on the error via `JSON.parse`).
    Json(String),
}

impl P {
    pub(crate) fn str(s: &str) -> P {
        P::Js(js::s(s))
    }
    pub(crate) fn num(n: f64) -> P {
        P::Js(JsValue::from(n))
    }
}

/// `Logger.makeError(message, code, params)` + throw.
pub(crate) fn make(
    ctx: &mut Context,
    version: &str,
    message: &str,
    code: &str,
    params: Vec<(&str, P)>,
) -> JsError {
    match make_inner(ctx, version, message, code, params) {
        Ok(e) => e,
        Err(e) => e,
    }
}

fn make_inner(
    ctx: &mut Context,
    version: &str,
    message: &str,
    code: &str,
    params: Vec<(&str, P)>,
) -> JsResult<JsError> {
    let mut details = Vec::with_capacity(params.len() + 2);
    let mut stored = Vec::with_capacity(params.len());
    for (key, value) in params {
        match value {
            P::Bytes(b) => {
                details.push(format!("{key}=Uint8Array(0x{})", hex::encode(&b)));
                stored.push((key, js::u8array(ctx, &b)?));
            }
            P::Json(text) => {
                let v = js::json_parse(ctx, &text)?;
                details.push(format!("{key}={text}"));
                stored.push((key, v));
            }
            P::Js(v) => {
                let text = match js::json_stringify(ctx, &v) {
                    Ok(Some(t)) => t,
                    Ok(None) => "undefined".to_owned(),
                    Err(_) => {
                        let s = v.to_string(ctx)?.to_std_string_lossy();
                        js::json_quote(ctx, &s)
                    }
                };
                details.push(format!("{key}={text}"));
                stored.push((key, v));
            }
        }
    }
    details.push(format!("code={code}"));
    details.push(format!("version={version}"));
    let mut url = String::new();
    if matches!(
        code,
        "CALL_EXCEPTION"
            | "INSUFFICIENT_FUNDS"
            | "MISSING_NEW"
            | "NONCE_EXPIRED"
            | "REPLACEMENT_UNDERPRICED"
            | "TRANSACTION_REPLACED"
            | "UNPREDICTABLE_GAS_LIMIT"
    ) {
        url.push_str(code);
    }
    if code == NUMERIC_FAULT {
        url.push_str("NUMERIC_FAULT");
        match message {
            "overflow" | "underflow" | "division-by-zero" => {
                url.push('-');
                url.push_str(message);
            }
            "negative-power" | "negative-width" => url.push_str("-unsupported"),
            "unbound-bitwise-result" => url.push_str("-unbound-result"),
            _ => {}
        }
    }
    let mut full = message.to_owned();
    if !url.is_empty() {
        full.push_str(" [ See: https://links.ethers.org/v5-errors-");
        full.push_str(&url);
        full.push_str(" ]");
    }
    full.push_str(" (");
    full.push_str(&details.join(", "));
    full.push(')');
    let obj = JsNativeError::error().with_message(full).into_opaque(ctx);
    obj.set(js_string!("reason"), js::s(message), false, ctx)?;
    obj.set(js_string!("code"), js::s(code), false, ctx)?;
    for (key, v) in stored {
        obj.set(js::jstr(key), v, false, ctx)?;
    }
    Ok(JsError::from_opaque(obj.into()))
}

/// `logger.throwArgumentError(message, name, value)`.
pub(crate) fn arg(
    ctx: &mut Context,
    version: &str,
    message: &str,
    name: &str,
    value: P,
) -> JsError {
    make(
        ctx,
        version,
        message,
        INVALID_ARGUMENT,
        vec![("argument", P::str(name)), ("value", value)],
    )
}

/// `logger.checkSafeUint53(value, message)` for a JS number.
pub(crate) fn check_safe_uint53(
    ctx: &mut Context,
    version: &str,
    value: f64,
    message: &str,
) -> JsResult<()> {
    if !value.is_nan() && !(0.0..9_007_199_254_740_991.0).contains(&value) {
        return Err(make(
            ctx,
            version,
            message,
            NUMERIC_FAULT,
            vec![
                ("operation", P::str("checkSafeInteger")),
                ("fault", P::str("out-of-safe-range")),
                ("value", P::num(value)),
            ],
        ));
    }
    let frac = value % 1.0;
    if frac != 0.0 && !frac.is_nan() {
        return Err(make(
            ctx,
            version,
            message,
            NUMERIC_FAULT,
            vec![
                ("operation", P::str("checkSafeInteger")),
                ("fault", P::str("non-integer")),
                ("value", P::num(value)),
            ],
        ));
    }
    Ok(())
}

/// A plain `new Error(message)` (what ethers' dependencies throw without the logger).
pub(crate) fn plain(message: &str) -> JsError {
    JsNativeError::error()
        .with_message(message.to_owned())
        .into()
}

/// A `TypeError` for argument shapes that would make ethers itself fail with a TypeError.
pub(crate) fn type_error(message: &str) -> JsError {
    JsNativeError::typ().with_message(message.to_owned()).into()
}
