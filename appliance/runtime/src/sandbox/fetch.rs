//! `fetch(input, init)`: a host call; the parent performs the request under its own
//! policies (URL rules, size and time limits) and sends back status, headers and body.
//!
//! The worker counts calls: beyond `max_fetches` the promise rejects with one shared
//! `Error`; if that error ends the action, its kind is `limit`. The `Response` is a plain
//! object: `status`, `statusText`, `ok`, `url`, `headers` (`get`, `has`, `forEach`,
//! `entries`, `keys`, `values`, iterable), `text()`, `json()`, `arrayBuffer()`.

use std::collections::BTreeMap;

use boa_engine::object::builtins::{JsArray, JsUint8Array};
use boa_engine::object::{JsObject, ObjectInitializer};
use boa_engine::property::{Attribute, PropertyKey};
use boa_engine::{
    Context, JsError, JsNativeError, JsResult, JsString, JsSymbol, JsValue, NativeFunction,
    js_string,
};

use super::args::{array_len, buffer_bytes};
use super::native::promise_of;
use super::state;
use crate::protocol::{FetchRequest, FetchResponse, HostRequest};

/// Defines the global `fetch`.
pub(crate) fn install(ctx: &mut Context) -> JsResult<()> {
    ctx.register_global_builtin_callable(
        js_string!("fetch"),
        2,
        NativeFunction::from_fn_ptr(fetch),
    )?;
    Ok(())
}

fn fetch(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    promise_of(ctx, |ctx| {
        let request = request(args, ctx)?;
        count_fetch(ctx)?;
        let reply = state::host_call_json(ctx, HostRequest::Fetch(request.clone()))?;
        let response: FetchResponse = serde_json::from_value(reply).map_err(|e| {
            JsNativeError::error()
                .with_message(format!("fetch: malformed reply from the host: {e}"))
        })?;
        Ok(response_object(&request.url, response, ctx)?.into())
    })
}

/// Counts one fetch, or fails with the job's shared limit error.
pub(super) fn count_fetch(ctx: &mut Context) -> JsResult<()> {
    let job = state::job(ctx)?;
    let mut job = job.borrow_mut();
    if job.fetches < job.limits.max_fetches {
        job.fetches += 1;
        return Ok(());
    }
    let max = job.limits.max_fetches;
    let error = match &job.fetch_limit_error {
        Some(e) => e.clone(),
        None => {
            let e = JsNativeError::error()
                .with_message(format!(
                    "fetch limit reached: at most {max} fetches per action"
                ))
                .into_opaque(ctx);
            job.fetch_limit_error = Some(e.clone());
            e
        }
    };
    Err(JsError::from_opaque(error.into()))
}

/// Reads `fetch(input, {method, headers, body})`.
fn request(args: &[JsValue], ctx: &mut Context) -> JsResult<FetchRequest> {
    let input = args.first().cloned().unwrap_or_default();
    // A Request-like object carries `url`; anything else (URL objects too) is stringified.
    let url_value = match input.as_object() {
        Some(obj) => {
            let url = obj.get(js_string!("url"), ctx)?;
            if url.is_string() { url } else { input.clone() }
        }
        None => input.clone(),
    };
    let url = url_value.to_string(ctx)?.to_std_string_escaped();

    let mut req = FetchRequest {
        url,
        method: "GET".to_owned(),
        headers: BTreeMap::new(),
        body: None,
    };
    let Some(init) = args.get(1).and_then(JsValue::as_object) else {
        return Ok(req);
    };
    let method = init.get(js_string!("method"), ctx)?;
    if !method.is_null_or_undefined() {
        req.method = method
            .to_string(ctx)?
            .to_std_string_escaped()
            .to_ascii_uppercase();
    }
    let headers = init.get(js_string!("headers"), ctx)?;
    if let Some(headers) = headers.as_object() {
        req.headers = header_map(&headers, ctx)?;
    }
    let body = init.get(js_string!("body"), ctx)?;
    if !body.is_null_or_undefined() {
        req.body = Some(match body.as_string() {
            Some(s) => s.to_std_string_escaped(),
            None => match buffer_bytes(&body, ctx)? {
                Some(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                None => body.to_string(ctx)?.to_std_string_escaped(),
            },
        });
    }
    Ok(req)
}

/// Headers from an array of `[name, value]` pairs or an object's own enumerable properties.
fn header_map(headers: &JsObject, ctx: &mut Context) -> JsResult<BTreeMap<String, String>> {
    let mut map = BTreeMap::new();
    if headers.is_array() {
        let len = array_len(headers, ctx)?;
        for i in 0..len {
            let pair = headers.get(i, ctx)?;
            let Some(pair) = pair.as_object() else {
                return Err(JsNativeError::typ()
                    .with_message("fetch: headers entries must be [name, value] pairs")
                    .into());
            };
            let name = pair.get(0, ctx)?.to_string(ctx)?.to_std_string_escaped();
            let value = pair.get(1, ctx)?.to_string(ctx)?.to_std_string_escaped();
            map.insert(name, value);
        }
        return Ok(map);
    }
    for key in headers.own_property_keys(ctx)? {
        let PropertyKey::String(name) = &key else {
            continue;
        };
        let enumerable = headers
            .borrow()
            .properties()
            .get(&key)
            .is_none_or(|d| d.enumerable().unwrap_or(false));
        if !enumerable {
            continue;
        }
        let value = headers.get(key.clone(), ctx)?.to_string(ctx)?;
        map.insert(name.to_std_string_escaped(), value.to_std_string_escaped());
    }
    Ok(map)
}

/// Builds the `Response`-like object.
fn response_object(url: &str, response: FetchResponse, ctx: &mut Context) -> JsResult<JsObject> {
    let body: JsString = js_string!(response.body.as_str());
    let headers = headers_object(&response.headers, ctx)?;
    let ok = (200..=299).contains(&response.status);
    let attrs = Attribute::READONLY | Attribute::ENUMERABLE;
    let text = NativeFunction::from_copy_closure_with_captures(
        |_, _, body: &JsString, ctx| promise_of(ctx, |_| Ok(body.clone().into())),
        body.clone(),
    );
    let json = NativeFunction::from_copy_closure_with_captures(
        |_, _, body: &JsString, ctx| {
            promise_of(ctx, |ctx| {
                let parse = state::pristine(ctx)?.json_parse;
                parse.call(&JsValue::undefined(), &[body.clone().into()], ctx)
            })
        },
        body.clone(),
    );
    let array_buffer = NativeFunction::from_copy_closure_with_captures(
        |_, _, body: &JsString, ctx| {
            promise_of(ctx, |ctx| {
                let bytes = body.to_std_string_lossy().into_bytes();
                JsUint8Array::from_iter(bytes, ctx)?.buffer(ctx)
            })
        },
        body,
    );
    let obj = ObjectInitializer::new(ctx)
        .property(js_string!("status"), response.status, attrs)
        .property(
            js_string!("statusText"),
            js_string!(response.status_text.as_str()),
            attrs,
        )
        .property(js_string!("ok"), ok, attrs)
        .property(js_string!("url"), js_string!(url), attrs)
        .property(js_string!("redirected"), false, attrs)
        .property(js_string!("headers"), headers, attrs)
        .function(text, js_string!("text"), 0)
        .function(json, js_string!("json"), 0)
        .function(array_buffer, js_string!("arrayBuffer"), 0)
        .build();
    Ok(obj)
}

/// A `Headers`-like object over lower-cased names.
fn headers_object(headers: &BTreeMap<String, String>, ctx: &mut Context) -> JsResult<JsObject> {
    let map = JsObject::with_null_proto();
    for (name, value) in headers {
        let key = js_string!(name.to_ascii_lowercase().as_str());
        map.create_data_property_or_throw(key, js_string!(value.as_str()), ctx)?;
    }
    let get = NativeFunction::from_copy_closure_with_captures(
        |_, args, map: &JsObject, ctx| {
            let name = header_name(args, ctx)?;
            let value = map.get(name, ctx)?;
            Ok(if value.is_undefined() {
                JsValue::null()
            } else {
                value
            })
        },
        map.clone(),
    );
    let has = NativeFunction::from_copy_closure_with_captures(
        |_, args, map: &JsObject, ctx| {
            let name = header_name(args, ctx)?;
            Ok(map.has_own_property(name, ctx)?.into())
        },
        map.clone(),
    );
    let for_each = NativeFunction::from_copy_closure_with_captures(
        |this, args, map: &JsObject, ctx| {
            let callback = args.first().and_then(JsValue::as_callable).ok_or_else(|| {
                JsNativeError::typ().with_message("Headers.forEach: callback is not a function")
            })?;
            for (name, value) in pairs(map, ctx)? {
                callback.call(&JsValue::undefined(), &[value, name, this.clone()], ctx)?;
            }
            Ok(JsValue::undefined())
        },
        map.clone(),
    );
    let entries = NativeFunction::from_copy_closure_with_captures(
        |_, _, map: &JsObject, ctx| {
            let list = pairs(map, ctx)?
                .into_iter()
                .map(|(k, v)| JsArray::from_iter([k, v], ctx).into())
                .collect::<Vec<JsValue>>();
            iterator_of(list, ctx)
        },
        map.clone(),
    );
    let keys = NativeFunction::from_copy_closure_with_captures(
        |_, _, map: &JsObject, ctx| {
            let list = pairs(map, ctx)?.into_iter().map(|(k, _)| k).collect();
            iterator_of(list, ctx)
        },
        map.clone(),
    );
    let values = NativeFunction::from_copy_closure_with_captures(
        |_, _, map: &JsObject, ctx| {
            let list = pairs(map, ctx)?.into_iter().map(|(_, v)| v).collect();
            iterator_of(list, ctx)
        },
        map,
    );
    let mut obj = ObjectInitializer::new(ctx);
    obj.function(get, js_string!("get"), 1)
        .function(has, js_string!("has"), 1)
        .function(for_each, js_string!("forEach"), 1)
        .function(entries.clone(), js_string!("entries"), 0)
        .function(keys, js_string!("keys"), 0)
        .function(values, js_string!("values"), 0)
        .function(entries, JsSymbol::iterator(), 0);
    Ok(obj.build())
}

fn header_name(args: &[JsValue], ctx: &mut Context) -> JsResult<JsString> {
    let name = args.first().cloned().unwrap_or_default().to_string(ctx)?;
    Ok(js_string!(
        name.to_std_string_escaped().to_ascii_lowercase().as_str()
    ))
}

/// `(name, value)` pairs of the header map, in name order.
fn pairs(map: &JsObject, ctx: &mut Context) -> JsResult<Vec<(JsValue, JsValue)>> {
    let mut out = Vec::new();
    for key in map.own_property_keys(ctx)? {
        let value = map.get(key.clone(), ctx)?;
        let name: JsValue = match key {
            PropertyKey::String(s) => s.into(),
            PropertyKey::Index(i) => i.get().into(),
            PropertyKey::Symbol(_) => continue,
        };
        out.push((name, value));
    }
    Ok(out)
}

/// An array iterator over `list`.
fn iterator_of(list: Vec<JsValue>, ctx: &mut Context) -> JsResult<JsValue> {
    JsArray::from_iter(list, ctx).values(ctx)
}
