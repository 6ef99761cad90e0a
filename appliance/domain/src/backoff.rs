//! The one retry schedule of the appliance: a delay that doubles after each failure, from
//! an initial delay up to a cap, and starts again from the initial delay after a success.
//! The chain relayer and indexer, the ACME client, the evidence refresher, the store's
//! change feed and the development supervisor all wait with it.

use std::time::Duration;

/// A doubling retry delay, from `initial` up to `max`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// A schedule whose first delay is `initial` (at most `max`).
    pub fn new(initial: Duration, max: Duration) -> Self {
        let initial = initial.min(max);
        Self {
            initial,
            max,
            next: initial,
        }
    }

    /// The delay to wait now; the one after it is twice as long, up to the cap.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        delay
    }

    /// The delay [`Backoff::next_delay`] would give now, without advancing.
    pub fn peek(&self) -> Duration {
        self.next
    }

    /// Back to the initial delay (after a success).
    pub fn reset(&mut self) {
        self.next = self.initial;
    }

    /// The delay after `failures` consecutive failures (the first failure waits
    /// `initial`), for callers that count failures themselves.
    pub fn after_failures(initial: Duration, max: Duration, failures: u32) -> Duration {
        let shift = failures.saturating_sub(1).min(32);
        initial.saturating_mul(1u32 << shift.min(31)).min(max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn doubles_up_to_the_cap_and_starts_again_after_a_reset() {
        let mut b = Backoff::new(100 * MS, 1000 * MS);
        let delays: Vec<u64> = (0..6).map(|_| b.next_delay().as_millis() as u64).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(b.peek(), 1000 * MS);
        b.reset();
        assert_eq!(b.next_delay(), 100 * MS);
    }

    #[test]
    fn an_initial_delay_over_the_cap_is_the_cap() {
        let mut b = Backoff::new(Duration::from_secs(10), Duration::from_secs(5));
        assert_eq!(b.next_delay(), Duration::from_secs(5));
        assert_eq!(b.next_delay(), Duration::from_secs(5));
    }

    #[test]
    fn counted_failures_give_the_same_schedule() {
        let (initial, max) = (100 * MS, 1000 * MS);
        assert_eq!(Backoff::after_failures(initial, max, 0), 100 * MS);
        assert_eq!(Backoff::after_failures(initial, max, 1), 100 * MS);
        assert_eq!(Backoff::after_failures(initial, max, 2), 200 * MS);
        assert_eq!(Backoff::after_failures(initial, max, 4), 800 * MS);
        assert_eq!(Backoff::after_failures(initial, max, 5), 1000 * MS);
        assert_eq!(Backoff::after_failures(initial, max, u32::MAX), 1000 * MS);
        let mut b = Backoff::new(initial, max);
        for failures in 1..40 {
            assert_eq!(
                b.next_delay(),
                Backoff::after_failures(initial, max, failures)
            );
        }
    }
}
