//! Differential test: the cases of `tests/data/intl-differential.js` (about 6,000: every
//! option combination `Intl.DateTimeFormat` supports here, at edge instants, in 30 time
//! zones) run once in node with its ICU and once in boa with the runtime's `Intl`; every
//! result (the formatted string, `formatToParts`, `resolvedOptions`, or the error) must be
//! identical. Also: what the runtime refuses, it refuses with a `RangeError` that says so,
//! and an action that never reads `Intl` never builds it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod differential;

use boa_engine::{Context, Source};

const CASES_FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/intl-differential.js"
);

#[test]
fn date_time_format_matches_node() {
    differential::assert_same_as_node(CASES_FILE, 5000);
}

fn eval(ctx: &mut Context, code: &str) -> Result<String, String> {
    match ctx.eval(Source::from_bytes(code)) {
        Ok(v) => Ok(v.to_string(ctx).unwrap().to_std_string_escaped()),
        Err(e) => Err(e.to_string()),
    }
}

fn context() -> Context {
    let mut ctx = Context::default();
    action_runtime::intl::install(&mut ctx).unwrap();
    ctx
}

#[test]
fn what_is_not_supported_is_refused_by_name() {
    let mut ctx = context();
    for (options, says) in [
        (
            r#"{ timeZone: "America/New_York", timeZoneName: "long" }"#,
            "timeZoneName \"long\"",
        ),
        (
            r#"{ timeZone: "Asia/Tokyo", timeStyle: "full" }"#,
            "timeZoneName \"long\"",
        ),
        (r#"{ timeZoneName: "shortGeneric" }"#, "shortGeneric"),
        (r#"{ era: "short" }"#, "eras"),
        (r#"{ dayPeriod: "short" }"#, "dayPeriod"),
        (r#"{ calendar: "japanese" }"#, "the calendar japanese"),
        (
            r#"{ numberingSystem: "arab" }"#,
            "the numbering system arab",
        ),
        (
            r#"{ year: "numeric", day: "numeric" }"#,
            "a year and a day without a month",
        ),
        (
            r#"{ hour: "numeric", second: "numeric" }"#,
            "an hour and a second without a minute",
        ),
        (
            r#"{ weekday: "long", year: "numeric" }"#,
            "a weekday with a year or month alone",
        ),
    ] {
        let err = eval(
            &mut ctx,
            &format!("new Intl.DateTimeFormat('en-US', {options})"),
        )
        .expect_err(options);
        assert!(err.starts_with("RangeError"), "{options}: {err}");
        assert!(err.contains(says), "{options}: {err}");
    }
    // UTC has a long name, and a time style that shows it
    assert_eq!(
        eval(
            &mut ctx,
            r#"new Intl.DateTimeFormat("en-US", { timeZone: "UTC", timeStyle: "full" }).format(0)"#
        )
        .unwrap(),
        "12:00:00 AM Coordinated Universal Time"
    );
}

#[test]
fn intl_is_built_on_first_read_and_can_be_replaced() {
    let mut ctx = context();
    // an accessor: nothing is evaluated for actions that never read it
    assert_eq!(
        eval(&mut ctx, "var d = Object.getOwnPropertyDescriptor(globalThis, 'Intl'); [typeof d.get, typeof d.set, d.enumerable, d.configurable].join()").unwrap(),
        "function,function,false,true"
    );
    // first read inside a function that runs again (boa caches the global lookups of a
    // running function: the property must keep its shape)
    assert_eq!(
        eval(
            &mut ctx,
            "function f(n) { return new Intl.DateTimeFormat('en-US', { timeZone: 'UTC' }).format(n); } [f(0), f(86400000), f(0)].join()"
        )
        .unwrap(),
        "1/1/1970,1/2/1970,1/1/1970"
    );
    assert_eq!(eval(&mut ctx, "Intl === Intl").unwrap(), "true");
    // the Date methods use it without reading the global, before and after
    let mut ctx = context();
    assert_eq!(
        eval(&mut ctx, "function g() { return new Date(0).toLocaleString('en-US', { timeZone: 'UTC' }); } [g(), typeof Intl, g()].join()").unwrap(),
        "1/1/1970, 12:00:00 AM,object,1/1/1970, 12:00:00 AM"
    );
    // an action may replace it (a polyfill of its own), and the Date methods do not care
    assert_eq!(
        eval(&mut ctx, "Intl = { mine: 1 }; [Intl.mine, new Date(0).toLocaleDateString('en-US', { timeZone: 'UTC' })].join()").unwrap(),
        "1,1/1/1970"
    );
}

#[test]
fn time_zones_come_from_the_bundled_database() {
    let mut ctx = context();
    // a zone created in the 2020s, and one whose rules changed then: the bundled data is
    // recent whatever the host has
    assert_eq!(
        eval(
            &mut ctx,
            r#"new Intl.DateTimeFormat("en-US", { timeZone: "America/Ciudad_Juarez", timeZoneName: "shortOffset", hour: "numeric" }).format(Date.UTC(2023, 6, 1, 12))"#
        )
        .unwrap(),
        "6 AM GMT-6"
    );
    // the database's own names, as V8 gives them since it follows Temporal (node 20's ICU
    // still says Asia/Calcutta and Asia/Katmandu)
    for zone in ["Asia/Kolkata", "Asia/Kathmandu", "Europe/Kyiv"] {
        assert_eq!(
            eval(
                &mut ctx,
                &format!(
                    r#"new Intl.DateTimeFormat("en-US", {{ timeZone: "{}" }}).resolvedOptions().timeZone"#,
                    zone.to_lowercase()
                )
            )
            .unwrap(),
            zone
        );
    }
    let err = eval(
        &mut ctx,
        r#"new Intl.DateTimeFormat("en-US", { timeZone: "Mars/Olympus_Mons" })"#,
    )
    .unwrap_err();
    assert!(
        err.starts_with("RangeError: Invalid time zone specified: Mars/Olympus_Mons"),
        "{err}"
    );
}
