//! `Intl` for actions: `Intl.DateTimeFormat` with English (United States) formats, the
//! Gregorian calendar and IANA time zones, and `Intl.getCanonicalLocales`. The engine is
//! built without ICU (its data would double the worker), so code that formats dates in a
//! time zone (date-fns-tz, say) needs this instead.
//!
//! The formatting is `intl.js`, evaluated the first time an action reads `Intl` or calls
//! `Date.prototype.toLocaleString`, `toLocaleDateString` or `toLocaleTimeString`, which
//! format with it as ECMA-402 says (the global is an accessor, so actions that never use
//! either pay nothing; an action may assign it). Its time
//! zone questions are answered here from the tz database bundled into the worker by jiff:
//! no file is read (the worker's Landlock rules allow none), and every worker answers
//! alike whatever the host has installed. What `intl.js` formats is compared with node's
//! ICU case by case in `tests/intl_differential.rs`; `docs/compatibility.md` lists what it
//! does not do.

use std::sync::OnceLock;

use boa_engine::object::builtins::JsArray;
use boa_engine::object::{FunctionObjectBuilder, JsObject};
use boa_engine::property::PropertyDescriptor;
use boa_engine::{
    Context, JsData, JsNativeError, JsResult, JsValue, NativeFunction, Source, js_string,
};
use boa_gc::{Finalize, Trace};
use jiff::Timestamp;
use jiff::tz::TimeZoneDatabase;

const SCRIPT: &str = include_str!("intl.js");

/// The tz database compiled into the worker.
fn database() -> &'static TimeZoneDatabase {
    static DATABASE: OnceLock<TimeZoneDatabase> = OnceLock::new();
    DATABASE.get_or_init(TimeZoneDatabase::bundled)
}

/// What `intl.js` built in this realm: the `Intl` object and its `toLocale` helper.
#[derive(Clone, Trace, Finalize, JsData)]
struct Built {
    intl: JsValue,
    to_locale: JsObject,
}

/// Defines the global `Intl`, built on first read, and the `Date.prototype.toLocale*`
/// methods on it.
pub fn install(ctx: &mut Context) -> JsResult<()> {
    let get = FunctionObjectBuilder::new(ctx.realm(), NativeFunction::from_fn_ptr(first_read))
        .name(js_string!("get Intl"))
        .build();
    let set = FunctionObjectBuilder::new(ctx.realm(), NativeFunction::from_fn_ptr(assign))
        .name(js_string!("set Intl"))
        .length(1)
        .build();
    ctx.global_object().define_property_or_throw(
        js_string!("Intl"),
        PropertyDescriptor::builder()
            .get(get)
            .set(set)
            .enumerable(false)
            .configurable(true),
        ctx,
    )?;
    let date_proto = ctx.intrinsics().constructors().date().prototype();
    type Method = fn(&JsValue, &[JsValue], &mut Context) -> JsResult<JsValue>;
    let methods: [(&str, Method); 3] = [
        ("toLocaleString", to_locale_string),
        ("toLocaleDateString", to_locale_date_string),
        ("toLocaleTimeString", to_locale_time_string),
    ];
    for (name, f) in methods {
        let function = FunctionObjectBuilder::new(ctx.realm(), NativeFunction::from_fn_ptr(f))
            .name(js_string!(name))
            .length(0)
            .build();
        date_proto.define_property_or_throw(
            js_string!(name),
            PropertyDescriptor::builder()
                .value(function)
                .writable(true)
                .enumerable(false)
                .configurable(true),
            ctx,
        )?;
    }
    Ok(())
}

/// Evaluates `intl.js` once per realm.
fn built(ctx: &mut Context) -> JsResult<Built> {
    if let Some(built) = ctx.realm().host_defined().get::<Built>() {
        return Ok(built.clone());
    }
    let factory = ctx.eval(Source::from_bytes(SCRIPT))?;
    let factory = factory
        .as_callable()
        .ok_or_else(|| JsNativeError::typ().with_message("intl.js is not a function"))?;
    let zone = FunctionObjectBuilder::new(ctx.realm(), NativeFunction::from_fn_ptr(zone))
        .name(js_string!("zone"))
        .length(2)
        .build();
    let exports = factory.call(&JsValue::undefined(), &[zone.into()], ctx)?;
    let exports = exports
        .as_object()
        .ok_or_else(|| JsNativeError::typ().with_message("intl.js returned no exports"))?;
    let intl = exports.get(js_string!("Intl"), ctx)?;
    let to_locale = exports
        .get(js_string!("toLocale"), ctx)?
        .as_object()
        .filter(|f| f.is_callable())
        .ok_or_else(|| JsNativeError::typ().with_message("intl.js returned no toLocale"))?;
    let built = Built { intl, to_locale };
    ctx.realm().host_defined_mut().insert(built.clone());
    Ok(built)
}

/// What `globalThis.Intl` holds once an action assigned to it.
#[derive(Clone, Trace, Finalize, JsData)]
struct Assigned(JsValue);

// `Intl` stays an accessor: turning it into a data property from inside its own getter
// leaves boa 0.22's cached global lookups of the running function pointing at the old
// property (the next read from that function finds no `Intl`).
fn first_read(_: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    if let Some(Assigned(value)) = ctx.realm().host_defined().get::<Assigned>() {
        return Ok(value.clone());
    }
    Ok(built(ctx)?.intl.clone())
}

fn assign(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let value = args.first().cloned().unwrap_or_default();
    ctx.realm().host_defined_mut().insert(Assigned(value));
    Ok(JsValue::undefined())
}

fn to_locale(kind: &str, this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let to_locale = built(ctx)?.to_locale.clone();
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    to_locale.call(
        &JsValue::undefined(),
        &[js_string!(kind).into(), this.clone(), arg(0), arg(1)],
        ctx,
    )
}

fn to_locale_string(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    to_locale("any", this, args, ctx)
}

fn to_locale_date_string(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    to_locale("date", this, args, ctx)
}

fn to_locale_time_string(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    to_locale("time", this, args, ctx)
}

/// `zone(name)`: the zone's name as the database spells it, or a `RangeError`;
/// `zone(name, ms)`: `[offset in seconds, abbreviation]` at that instant.
fn zone(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let name = args
        .first()
        .cloned()
        .unwrap_or_default()
        .to_string(ctx)?
        .to_std_string_escaped();
    let tz = database().get(&name).map_err(|_| {
        JsNativeError::range().with_message(format!("Invalid time zone specified: {name}"))
    })?;
    let instant = args.get(1).filter(|v| !v.is_undefined());
    let Some(instant) = instant else {
        let canonical = tz.iana_name().unwrap_or(&name).to_owned();
        return Ok(js_string!(canonical.as_str()).into());
    };
    let ms = instant.to_number(ctx)?;
    let timestamp = Timestamp::from_millisecond(ms as i64).map_err(|_| {
        JsNativeError::range()
            .with_message("Invalid time value: outside the years the time zone database covers")
    })?;
    let info = tz.to_offset_info(timestamp);
    let answer = JsArray::from_iter(
        [
            JsValue::from(info.offset().seconds()),
            js_string!(info.abbreviation()).into(),
        ],
        ctx,
    );
    Ok(answer.into())
}
