//! Where log lines go: standard error, written by one thread in batches.
//!
//! A request used to write its access line to stderr itself: one `write` system call
//! per request on the runtime's threads, under stderr's lock, and a stalled log consumer
//! (a full pipe to a log collector) stalled every request. Here the formatting layer only
//! appends each line to a shared buffer, and one thread writes the buffer out:
//!
//! * no request thread ever writes to the log's file descriptor;
//! * lines keep their order (the buffer is taken and written under one lock);
//! * a line reaches stderr promptly: an idle writer thread is woken by the first line,
//!   and a busy one takes everything that arrived while it wrote, after pausing
//!   [`COALESCE`] so that a stream of lines costs one write per pause, not one per line;
//! * [`LogGuard::flush`] writes everything logged before it (the appliance calls it
//!   before printing its URL, so the start-up lines are in the log by then), dropping
//!   the guard (the end of `main`) does too, and so does a panic, before its message;
//! * memory is bounded: past [`MAX_BUFFERED`] bytes waiting (the consumer is not reading),
//!   further lines are dropped and counted, and a line saying how many is written when
//!   output resumes.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;

/// How long the writer thread pauses after a write, gathering the next batch.
pub const COALESCE: Duration = Duration::from_millis(1);
/// Bytes of log lines held while the consumer does not read; beyond it lines are dropped.
pub const MAX_BUFFERED: usize = 4 << 20;

type Out = Box<dyn Write + Send>;

struct Shared {
    pending: Mutex<Pending>,
    /// Held while a batch is taken and written: the order of batches is the order of
    /// lines.
    out: Mutex<Out>,
    /// Wakes the idle writer thread.
    wake: Condvar,
    stop: AtomicBool,
    dropped: AtomicU64,
    max_buffered: usize,
}

#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    /// The writer thread is waiting for a line.
    idle: bool,
}

fn relock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves at worst a partial line; keep logging.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// Takes what is pending and writes it (and any count of dropped lines) to `out`.
    fn write_pending(&self, out: &mut Out, spare: &mut Vec<u8>) {
        std::mem::swap(&mut relock(&self.pending).bytes, spare);
        if !spare.is_empty() {
            let _ = out.write_all(spare);
        }
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            let _ = writeln!(
                out,
                "log-output: {dropped} log line(s) dropped: the log consumer did not keep up (more than {} bytes were waiting)",
                self.max_buffered
            );
        }
        let _ = out.flush();
        spare.clear();
        // Do not keep a burst's buffer for ever.
        spare.shrink_to(64 * 1024);
    }
}

/// The `MakeWriter` for `tracing_subscriber::fmt`: each event's line goes into the
/// shared buffer.
#[derive(Clone)]
pub struct BatchedLog {
    shared: Arc<Shared>,
}

/// Keeps the writer thread; dropping it writes out everything pending and stops it.
pub struct LogGuard {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// Dropped first, while the log still takes lines (the trace exporter's guard).
    kept: Vec<Box<dyn Send>>,
}

impl LogGuard {
    /// Writes out every line logged before this call, and returns once they are written.
    pub fn flush(&self) {
        let mut out = relock(&self.shared.out);
        self.shared.write_pending(&mut out, &mut Vec::new());
    }

    /// Keeps `item` alive until the log closes, and drops it just before.
    pub fn keep_until_closed(&mut self, item: Box<dyn Send>) {
        self.kept.push(item);
    }
}

/// Starts the writer thread on standard error, and installs a panic hook that writes
/// pending lines before the panic message.
pub fn to_stderr() -> std::io::Result<(BatchedLog, LogGuard)> {
    let (log, guard) = start(std::io::stderr(), MAX_BUFFERED)?;
    let shared = Arc::clone(&log.shared);
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // `try_lock`: never wait on a writer that may be the one panicking.
        if let Ok(mut out) = shared.out.try_lock() {
            shared.write_pending(&mut out, &mut Vec::new());
        }
        previous(info);
    }));
    Ok((log, guard))
}

/// Starts the writer thread on `out`, holding at most `max_buffered` bytes.
pub fn start<W: Write + Send + 'static>(
    out: W,
    max_buffered: usize,
) -> std::io::Result<(BatchedLog, LogGuard)> {
    let shared = Arc::new(Shared {
        pending: Mutex::new(Pending::default()),
        out: Mutex::new(Box::new(out)),
        wake: Condvar::new(),
        stop: AtomicBool::new(false),
        dropped: AtomicU64::new(0),
        max_buffered,
    });
    let thread = {
        let shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("log-output".into())
            .spawn(move || write_loop(&shared))?
    };
    Ok((
        BatchedLog {
            shared: Arc::clone(&shared),
        },
        LogGuard {
            shared,
            thread: Some(thread),
            kept: Vec::new(),
        },
    ))
}

fn write_loop(shared: &Shared) {
    let mut spare = Vec::new();
    loop {
        {
            let mut pending = relock(&shared.pending);
            while pending.bytes.is_empty() && !shared.stop.load(Ordering::Acquire) {
                pending.idle = true;
                pending = shared
                    .wake
                    .wait(pending)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            pending.idle = false;
            if pending.bytes.is_empty() && shared.stop.load(Ordering::Acquire) {
                break;
            }
        }
        shared.write_pending(&mut relock(&shared.out), &mut spare);
        if !shared.stop.load(Ordering::Acquire) {
            std::thread::sleep(COALESCE);
        }
    }
    // Lines dropped just before the end still get their notice.
    shared.write_pending(&mut relock(&shared.out), &mut spare);
}

impl Drop for LogGuard {
    fn drop(&mut self) {
        self.kept.clear();
        {
            let _pending = relock(&self.shared.pending);
            self.shared.stop.store(true, Ordering::Release);
        }
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One event's writer: appends what it is given.
pub struct LineWriter<'a> {
    shared: &'a Shared,
    /// The line did not fit: the rest of it is discarded too.
    refused: bool,
}

impl Write for LineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.refused {
            return Ok(buf.len());
        }
        let mut pending = relock(&self.shared.pending);
        if pending.bytes.len() + buf.len() > self.shared.max_buffered {
            drop(pending);
            self.refused = true;
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            return Ok(buf.len());
        }
        pending.bytes.extend_from_slice(buf);
        if pending.idle {
            pending.idle = false;
            drop(pending);
            self.shared.wake.notify_one();
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for BatchedLog {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter {
            shared: &self.shared,
            refused: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;
    use std::time::Instant;
    use tracing::Level;

    /// A sink the test can read: it counts its writes, may take `delay` over each, and
    /// may block on its first write until the test releases it.
    #[derive(Clone, Default)]
    struct Sink {
        bytes: Arc<Mutex<Vec<u8>>>,
        writes: Arc<AtomicU64>,
        delay: Duration,
        gate: Option<Arc<Barrier>>,
    }

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if let Some(gate) = self.gate.take() {
                gate.wait();
            }
            std::thread::sleep(self.delay);
            self.writes.fetch_add(1, Ordering::Relaxed);
            self.bytes.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Sink {
        fn text(&self) -> String {
            String::from_utf8(self.bytes.lock().unwrap().clone()).unwrap()
        }

        /// Waits (up to 10 s) until the sink holds `needle`.
        fn wait_for(&self, needle: &str) -> bool {
            let until = Instant::now() + Duration::from_secs(10);
            while Instant::now() < until {
                if self.text().contains(needle) {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            false
        }
    }

    fn subscriber(log: BatchedLog) -> impl tracing::Subscriber + Send + Sync {
        tracing_subscriber::fmt()
            .with_writer(log)
            .with_ansi(false)
            .with_max_level(Level::INFO)
            .finish()
    }

    #[test]
    fn a_line_reaches_the_output_without_any_flush() {
        let sink = Sink::default();
        let (log, guard) = start(sink.clone(), MAX_BUFFERED).unwrap();
        tracing::subscriber::with_default(subscriber(log), || tracing::info!("alone"));
        assert!(sink.wait_for("alone"));
        drop(guard);
    }

    #[test]
    fn flush_writes_everything_logged_before_it_in_order() {
        // A slow consumer, so that lines are still pending when `flush` is called.
        let sink = Sink {
            delay: Duration::from_millis(5),
            ..Sink::default()
        };
        let (log, guard) = start(sink.clone(), MAX_BUFFERED).unwrap();
        tracing::subscriber::with_default(subscriber(log), || {
            for i in 0..500 {
                tracing::info!(i, "line");
            }
        });
        guard.flush();
        let text = sink.text();
        assert_eq!(text.lines().count(), 500);
        let order: Vec<u32> = text
            .lines()
            .filter_map(|l| l.split("i=").nth(1)?.split(' ').next()?.parse().ok())
            .collect();
        assert_eq!(order, (0..500).collect::<Vec<_>>());
        drop(guard);
    }

    #[test]
    fn a_stream_of_lines_is_written_in_batches() {
        let sink = Sink {
            delay: Duration::from_millis(2),
            ..Sink::default()
        };
        let (log, guard) = start(sink.clone(), MAX_BUFFERED).unwrap();
        tracing::subscriber::with_default(subscriber(log), || {
            for i in 0..2000 {
                tracing::info!(i, "line");
            }
        });
        drop(guard);
        assert_eq!(sink.text().lines().count(), 2000);
        let writes = sink.writes.load(Ordering::Relaxed);
        assert!(writes < 200, "{writes} writes for 2000 lines");
    }

    #[test]
    fn a_stalled_consumer_costs_bounded_memory_and_the_loss_is_reported() {
        let gate = Arc::new(Barrier::new(2));
        let sink = Sink {
            gate: Some(Arc::clone(&gate)),
            ..Sink::default()
        };
        let max = 64 * 1024;
        let (log, guard) = start(sink.clone(), max).unwrap();
        let shared = Arc::clone(&log.shared);
        tracing::subscriber::with_default(subscriber(log), || {
            tracing::info!("before the stall");
            // The writer thread is now blocked inside the sink's first write; logging
            // goes on without waiting for it.
            std::thread::sleep(Duration::from_millis(50));
            for i in 0..20_000 {
                tracing::info!(i, "while stalled");
                assert!(relock(&shared.pending).bytes.len() <= max);
            }
        });
        assert!(shared.dropped.load(Ordering::Relaxed) > 0);
        gate.wait();
        drop(guard);
        let text = sink.text();
        assert!(text.contains("before the stall"));
        assert!(text.contains("log line(s) dropped"));
        // What was kept arrives whole and in order.
        let kept: Vec<u64> = text
            .lines()
            .filter_map(|l| l.split("i=").nth(1)?.split(' ').next()?.parse().ok())
            .collect();
        assert!(!kept.is_empty());
        assert!(kept.windows(2).all(|w| w[0] < w[1]));
    }
}
