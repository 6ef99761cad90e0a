//! `setTimeout`, `setInterval`, `clearTimeout`, `clearInterval`, and the job's event loop
//! that runs their callbacks.
//!
//! # Time
//! Timers use the real clock: the worker sleeps until the next timer is due (so
//! `Date.now()` and the chain an action polls move on as they would in node), and the
//! sleep counts against the action's run time like any other wait. A timer due after the
//! job's deadline (`JobLimits::timeout_ms`, the limit the parent kills at) ends the job
//! at once with a `timeout`, without sleeping until the kill.
//!
//! # Order
//! Callbacks run one at a time, only when the promise job queue is empty: in order of
//! due time, timers due at the same time in the order they were set. After each callback
//! the promise jobs it queued run before the next timer. An interval is set again for
//! `delay` after its callback started. The loop stops when `main`'s promise has settled
//! (timers still pending are dropped, as nothing can see their effect any more) or when
//! no timer is left; code without `main` runs until no timer is left.
//!
//! # API
//! `setTimeout(callback, delay, ...args)` and `setInterval(...)` return a positive
//! integer id; a delay that is not a finite non-negative number counts as 0 (an
//! interval's as 1 ms), and delays are capped at 2^31 - 1 ms as in browsers and node.
//! The callback must be a function (a string is not evaluated). `clearTimeout(id)` and
//! `clearInterval(id)` cancel either kind; unknown ids are ignored. At most
//! [`MAX_PENDING_TIMERS`] timers may be pending at once: one more throws a `RangeError`
//! (`setTimeout: too many pending timers (10000); clear some first`), so a flood of timers
//! is refused with a clear error rather than growing the worker's own memory until its
//! limit kills the job. A timer stops counting when it has run (an interval: when
//! cleared) or is cleared.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::{Duration, Instant};

use boa_engine::object::JsObject;
use boa_engine::{Context, JsNativeError, JsResult, JsValue, NativeFunction, js_string};

use super::native::NativeFn;
use super::state::{self, Abort};

/// The longest delay (2^31 - 1 ms), as browsers and node cap it.
const MAX_DELAY_MS: f64 = 2_147_483_647.0;

/// How many timers one job may have pending at once (the runtime's own waits included).
pub(crate) const MAX_PENDING_TIMERS: usize = 10_000;

/// One pending timer.
struct Timer {
    id: u32,
    callback: JsObject,
    args: Vec<JsValue>,
    /// `Some` for an interval: its period.
    interval: Option<Duration>,
}

/// The timers of one job (one context: contexts are never reused).
#[derive(Default)]
pub(crate) struct Timers {
    /// When the job started (set by [`start`]); the deadline counts from it.
    started: Option<Instant>,
    next_id: u32,
    seq: u64,
    /// Pending timers by (due, sequence): the order they run in.
    queue: BTreeMap<(Instant, u64), Timer>,
    /// Where each id is in `queue`.
    slots: HashMap<u32, (Instant, u64)>,
}

/// The handle stored in the context data.
#[derive(Clone, Default)]
struct TimersHandle(Rc<RefCell<Timers>>);

fn timers(ctx: &Context) -> JsResult<Rc<RefCell<Timers>>> {
    ctx.get_data::<TimersHandle>()
        .map(|h| Rc::clone(&h.0))
        .ok_or_else(|| {
            JsNativeError::error()
                .with_message("timers are not available")
                .into()
        })
}

impl Timers {
    fn insert(&mut self, due: Instant, timer: Timer) {
        self.seq += 1;
        let key = (due, self.seq);
        self.slots.insert(timer.id, key);
        self.queue.insert(key, timer);
    }

    /// Schedules `timer` `delay` from now; refused (`None`) when [`MAX_PENDING_TIMERS`]
    /// are pending.
    fn add(&mut self, delay: Duration, timer: impl FnOnce(u32) -> Timer) -> Option<u32> {
        if self.queue.len() >= MAX_PENDING_TIMERS {
            return None;
        }
        self.next_id = self.next_id.wrapping_add(1).max(1);
        let id = self.next_id;
        self.insert(Instant::now() + delay, timer(id));
        Some(id)
    }

    fn clear(&mut self, id: u32) {
        if let Some(key) = self.slots.remove(&id) {
            self.queue.remove(&key);
        }
    }

    /// Takes the timer due first; an interval stays scheduled, `period` after now.
    fn pop(&mut self) -> Option<(Instant, Timer)> {
        let ((due, _), timer) = self.queue.pop_first()?;
        self.slots.remove(&timer.id);
        Some((due, timer))
    }
}

/// Defines the four timer globals.
pub(crate) fn install(ctx: &mut Context) -> JsResult<()> {
    ctx.insert_data(TimersHandle::default());
    let fns: [(&str, NativeFn, usize); 4] = [
        ("setTimeout", set_timeout, 2),
        ("setInterval", set_interval, 2),
        ("clearTimeout", clear, 1),
        ("clearInterval", clear, 1),
    ];
    for (name, f, len) in fns {
        ctx.register_global_builtin_callable(
            js_string!(name),
            len,
            NativeFunction::from_fn_ptr(f),
        )?;
    }
    Ok(())
}

/// Marks the start of the job: its deadline counts from now.
pub(crate) fn start(ctx: &Context) {
    if let Ok(t) = timers(ctx) {
        t.borrow_mut().started = Some(Instant::now());
    }
}

/// The job's deadline, if the parent told the worker its time limit.
fn deadline(ctx: &Context) -> Option<(Instant, u64)> {
    let timeout_ms = state::job(ctx).ok()?.borrow().limits.timeout_ms?;
    let started = timers(ctx).ok()?.borrow().started?;
    Some((started + Duration::from_millis(timeout_ms), timeout_ms))
}

fn delay_of(value: &JsValue, ctx: &mut Context, min_ms: f64) -> JsResult<Duration> {
    let ms = if value.is_undefined() {
        0.0
    } else {
        value.to_number(ctx)?
    };
    let ms = if ms.is_finite() && ms > 0.0 {
        ms.min(MAX_DELAY_MS)
    } else {
        0.0
    };
    Ok(Duration::from_micros((ms.max(min_ms) * 1000.0) as u64))
}

fn schedule_js(args: &[JsValue], ctx: &mut Context, repeat: bool) -> JsResult<JsValue> {
    let name = if repeat { "setInterval" } else { "setTimeout" };
    let callback = args.first().and_then(JsValue::as_callable).ok_or_else(|| {
        JsNativeError::typ().with_message(format!("{name}: the callback must be a function"))
    })?;
    let delay = delay_of(
        &args.get(1).cloned().unwrap_or_default(),
        ctx,
        if repeat { 1.0 } else { 0.0 },
    )?;
    let extra = args.get(2..).unwrap_or(&[]).to_vec();
    let id = timers(ctx)?
        .borrow_mut()
        .add(delay, |id| Timer {
            id,
            callback,
            args: extra,
            interval: repeat.then_some(delay),
        })
        .ok_or_else(|| too_many(name))?;
    Ok(JsValue::from(id))
}

fn set_timeout(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    schedule_js(args, ctx, false)
}

fn set_interval(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    schedule_js(args, ctx, true)
}

fn clear(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let id = args.first().cloned().unwrap_or_default();
    if let Some(n) = id.as_number()
        && n.fract() == 0.0
        && (1.0..=f64::from(u32::MAX)).contains(&n)
    {
        timers(ctx)?.borrow_mut().clear(n as u32);
    }
    Ok(JsValue::undefined())
}

/// Schedules a native callback (called with no arguments) `delay` from now, for the
/// runtime's own waits (`TransactionResponse.wait()`); returns its id.
pub(crate) fn schedule(ctx: &Context, callback: JsObject, delay: Duration) -> JsResult<u32> {
    timers(ctx)?
        .borrow_mut()
        .add(delay, |id| Timer {
            id,
            callback,
            args: Vec::new(),
            interval: None,
        })
        .ok_or_else(|| too_many("wait"))
}

fn too_many(name: &str) -> boa_engine::JsError {
    JsNativeError::range()
        .with_message(format!(
            "{name}: too many pending timers ({MAX_PENDING_TIMERS}); clear some first"
        ))
        .into()
}

/// Runs the promise jobs, then timers in order (each followed by the jobs it queued),
/// until `settled()` holds or no timer is left. A timer due after the deadline ends the
/// job with a `timeout`; a callback that throws ends it with its error.
pub(crate) fn run_until(ctx: &mut Context, settled: &dyn Fn() -> bool) -> JsResult<()> {
    let handle = timers(ctx)?;
    loop {
        ctx.run_jobs()?;
        if settled() {
            return Ok(());
        }
        let Some((due, timer)) = handle.borrow_mut().pop() else {
            return Ok(());
        };
        if let Some((deadline, timeout_ms)) = deadline(ctx)
            && due > deadline
        {
            return Err(state::abort(
                ctx,
                Abort::Timeout(format!(
                    "the action did not finish within {timeout_ms} ms (a timer was due after its deadline)"
                )),
            ));
        }
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        if let Some(period) = timer.interval {
            handle.borrow_mut().insert(
                Instant::now() + period,
                Timer {
                    id: timer.id,
                    callback: timer.callback.clone(),
                    args: timer.args.clone(),
                    interval: Some(period),
                },
            );
        }
        timer
            .callback
            .call(&JsValue::undefined(), &timer.args, ctx)?;
    }
}
