//! The pool's idle workers, kept so that a worker never serves two accounts.
//!
//! A worker is *fresh* until it is handed its first job, and from then on *bound* to that
//! job's account for the rest of its life. An interpreter exploit that survives its job
//! inside the worker therefore only ever sees later jobs of the account that ran it.
//!
//! The invariant is held by the shape of [`IdleSet`], not by its callers: fresh workers
//! wait in one queue and bound workers in one queue per account, and the only way to take
//! a worker for a job, [`IdleSet::take_for`], looks at that account's queue and the fresh
//! queue and nothing else. The binding travels with the worker in [`Held`], whose account
//! only `take_for` sets (once, from fresh) and nothing can change, so parking a worker
//! back ([`IdleSet::park`]) files it under the account it already serves. A bound worker
//! otherwise leaves the set only to be retired: evicted, least recently used first, when
//! a job of another account needs room for a fresh worker ([`IdleSet::evict_lru`]), or
//! when it has been idle too long ([`IdleSet::expired`]).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use appliance_store::AccountId;

/// A worker the pool holds, with the account it is bound to (none while fresh).
#[derive(Debug)]
pub struct Held<W> {
    worker: W,
    /// Set by [`IdleSet::take_for`] on the worker's first job, never changed after.
    account: Option<AccountId>,
    /// When it was last parked (its place in the least-recently-used order).
    since: Instant,
}

impl<W> Held<W> {
    /// A worker that has never run a job.
    pub fn fresh(worker: W) -> Self {
        Self {
            worker,
            account: None,
            since: Instant::now(),
        }
    }

    /// The account it is bound to, `None` while fresh.
    pub fn account(&self) -> Option<AccountId> {
        self.account
    }

    pub fn worker(&self) -> &W {
        &self.worker
    }

    pub fn worker_mut(&mut self) -> &mut W {
        &mut self.worker
    }

    /// The worker itself, to retire it (it cannot come back as fresh: [`Held::fresh`] is
    /// for workers just started, and the pool only calls it in its start path).
    pub fn into_worker(self) -> W {
        self.worker
    }
}

/// Idle workers: fresh ones for any account's job, bound ones only for their account's.
#[derive(Debug)]
pub struct IdleSet<W> {
    /// Never used, least recently parked first.
    fresh: VecDeque<Held<W>>,
    /// Bound, per account, least recently parked first. No queue is left empty.
    bound: HashMap<AccountId, VecDeque<Held<W>>>,
    /// Most workers held (the pool's size).
    capacity: usize,
}

impl<W> IdleSet<W> {
    pub fn new(capacity: usize) -> Self {
        Self {
            fresh: VecDeque::new(),
            bound: HashMap::new(),
            capacity,
        }
    }

    /// Workers held in all.
    pub fn len(&self) -> usize {
        self.fresh.len() + self.bound_len()
    }

    pub fn is_empty(&self) -> bool {
        self.fresh.is_empty() && self.bound.is_empty()
    }

    /// Fresh workers held.
    pub fn fresh_len(&self) -> usize {
        self.fresh.len()
    }

    /// Bound workers held.
    pub fn bound_len(&self) -> usize {
        self.bound.values().map(VecDeque::len).sum()
    }

    /// Keeps `held` for a later job: a fresh worker for anyone, a bound one for its own
    /// account only. Gives it back when the set is full (the caller stops it).
    pub fn park(&mut self, mut held: Held<W>) -> Result<(), Held<W>> {
        if self.len() >= self.capacity {
            return Err(held);
        }
        held.since = Instant::now();
        match held.account {
            None => self.fresh.push_back(held),
            Some(account) => self.bound.entry(account).or_default().push_back(held),
        }
        Ok(())
    }

    /// A worker for a job of `account`: one bound to it or a fresh one (then bound to it
    /// from now on), whichever has been idle longer (a worker builds its next realm after
    /// answering, so the one idle longest has had the most time to finish). No other
    /// account's worker is ever a candidate.
    pub fn take_for(&mut self, account: AccountId) -> Option<Held<W>> {
        let own = self
            .bound
            .get(&account)
            .and_then(|q| q.front())
            .map(|h| h.since);
        let fresh = self.fresh.front().map(|h| h.since);
        let take_own = match (own, fresh) {
            (None, None) => return None,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(own), Some(fresh)) => own <= fresh,
        };
        if take_own {
            let queue = self.bound.get_mut(&account)?;
            let held = queue.pop_front();
            if queue.is_empty() {
                self.bound.remove(&account);
            }
            held
        } else {
            let mut held = self.fresh.pop_front()?;
            held.account = Some(account);
            Some(held)
        }
    }

    /// Takes out the bound worker idle longest, of whichever account, to be retired so a
    /// fresh one can start in its place.
    pub fn evict_lru(&mut self) -> Option<Held<W>> {
        let account = self
            .bound
            .iter()
            .filter_map(|(account, queue)| queue.front().map(|h| (h.since, *account)))
            .min_by_key(|(since, _)| *since)
            .map(|(_, account)| account)?;
        let queue = self.bound.get_mut(&account)?;
        let held = queue.pop_front();
        if queue.is_empty() {
            self.bound.remove(&account);
        }
        held
    }

    /// Takes out every bound worker idle for `max_idle` or longer by `now`, to be retired.
    pub fn expired(&mut self, now: Instant, max_idle: Duration) -> Vec<Held<W>> {
        let mut out = Vec::new();
        self.bound.retain(|_, queue| {
            // Each queue is oldest first: take from the front while expired.
            while queue
                .front()
                .is_some_and(|h| now.saturating_duration_since(h.since) >= max_idle)
            {
                if let Some(held) = queue.pop_front() {
                    out.push(held);
                }
            }
            !queue.is_empty()
        });
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const A: AccountId = AccountId(1);
    const B: AccountId = AccountId(2);
    const C: AccountId = AccountId(3);

    /// A set of `n` fresh workers numbered 0..n, parked in that order.
    fn with_fresh(n: u32, capacity: usize) -> IdleSet<u32> {
        let mut set = IdleSet::new(capacity);
        for w in 0..n {
            set.park(Held::fresh(w)).unwrap();
            // Distinct instants, so the order is the parking order on any clock.
            std::thread::sleep(Duration::from_millis(1));
        }
        set
    }

    /// Runs a "job" of `account`: takes a worker, parks it back, returns its number.
    fn job(set: &mut IdleSet<u32>, account: AccountId) -> Option<u32> {
        let held = set.take_for(account)?;
        assert_eq!(held.account(), Some(account));
        let w = *held.worker();
        set.park(held).unwrap();
        std::thread::sleep(Duration::from_millis(1));
        Some(w)
    }

    #[test]
    fn a_bound_worker_is_never_taken_for_another_account() {
        let mut set = with_fresh(2, 4);
        let a = job(&mut set, A).unwrap();
        let b = job(&mut set, B).unwrap();
        assert_ne!(a, b, "B got the remaining fresh worker, not A's");
        assert_eq!((set.fresh_len(), set.bound_len()), (0, 2));
        assert!(
            set.take_for(C).is_none(),
            "C finds no worker although two are idle"
        );
        for _ in 0..5 {
            assert_eq!(job(&mut set, A), Some(a));
            assert_eq!(job(&mut set, B), Some(b));
        }
    }

    #[test]
    fn the_idle_longest_of_own_and_fresh_is_taken() {
        // One account alone rotates through every worker, as before binding.
        let mut set = with_fresh(3, 3);
        let order: Vec<_> = (0..6).map(|_| job(&mut set, A).unwrap()).collect();
        assert_eq!(order, [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn eviction_takes_the_least_recently_used_bound_worker() {
        let mut set = with_fresh(3, 3);
        let a = job(&mut set, A).unwrap();
        let b = job(&mut set, B).unwrap();
        let c = job(&mut set, C).unwrap();
        assert_eq!(job(&mut set, A), Some(a), "A used again: B is now oldest");
        let evicted = set.evict_lru().unwrap();
        assert_eq!((evicted.account(), *evicted.worker()), (Some(B), b));
        let evicted = set.evict_lru().unwrap();
        assert_eq!((evicted.account(), *evicted.worker()), (Some(C), c));
        assert_eq!(set.len(), 1);
        assert!(set.take_for(B).is_none() && set.take_for(C).is_none());
        assert_eq!(job(&mut set, A), Some(a));
    }

    #[test]
    fn fresh_workers_are_neither_evicted_nor_expired() {
        let mut set = with_fresh(2, 2);
        assert!(set.evict_lru().is_none());
        assert!(set.expired(Instant::now(), Duration::ZERO).is_empty());
        assert_eq!(set.fresh_len(), 2);
    }

    #[test]
    fn bound_workers_idle_too_long_expire() {
        let mut set = with_fresh(2, 2);
        job(&mut set, A).unwrap();
        std::thread::sleep(Duration::from_millis(30));
        job(&mut set, B).unwrap();
        let expired = set.expired(Instant::now(), Duration::from_millis(20));
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].account(), Some(A));
        assert_eq!(set.bound_len(), 1);
        assert!(
            set.take_for(A).is_none(),
            "A's worker is gone, none fresh left"
        );
    }

    #[test]
    fn the_set_holds_at_most_its_capacity() {
        let mut set = with_fresh(2, 2);
        assert!(set.park(Held::fresh(9)).is_err());
        let held = set.take_for(A).unwrap();
        set.park(Held::fresh(9)).unwrap();
        let back = set.park(held).unwrap_err();
        assert_eq!(back.account(), Some(A), "given back with its binding");
    }
}
