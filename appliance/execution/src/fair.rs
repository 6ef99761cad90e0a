//! Fair admission to the worker pool: which waiting action gets the next free worker.
//!
//! The pool has `slots` workers. An account may have at most `per_account` actions
//! running at once; more wait in the account's own queue (FIFO, at most
//! `queued_per_account` of them), so an account at its limit never holds a place that
//! another account could use. When a worker frees up it goes to the next account in
//! turn that has a waiting action and is below its limit (round-robin between accounts):
//! an account with many waiting actions gets one worker, then every other waiting
//! account gets one, and so on. A wait is bounded (`wait`), and so is the number of
//! actions waiting in all (`queued_total`); past either the action is refused (429).
//! A waiter that goes away (its request was dropped) frees its place at once.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;

use appliance_store::AccountId;

/// The admission rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FairLimits {
    /// Actions running at once in all (the pool's size).
    pub slots: usize,
    /// Actions one account may run at once (at least 1).
    pub per_account: usize,
    /// Actions one account may have waiting.
    pub queued_per_account: usize,
    /// Actions waiting in all.
    pub queued_total: usize,
    /// Longest wait for a worker.
    pub wait: Duration,
}

/// Why an action was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "this account already has {0} action(s) waiting for a worker (besides those running); retry when some have finished"
    )]
    AccountQueueFull(usize),
    #[error("{0} actions are already waiting for a worker; retry shortly")]
    QueueFull(usize),
    #[error("every action worker is busy; retry shortly")]
    WaitedTooLong,
}

/// The scheduler. Shared (`Arc`) by the pool and the permits it hands out.
pub struct Scheduler {
    limits: FairLimits,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Permits held in all.
    running: usize,
    /// Waiters in all.
    queued: usize,
    /// Accounts running or waiting (an account with neither is removed).
    accounts: HashMap<AccountId, Account>,
    /// Accounts with a waiter, in the order they are served.
    turn: VecDeque<AccountId>,
    /// The next waiter's number.
    next: u64,
}

#[derive(Default)]
struct Account {
    running: usize,
    /// Waiters, oldest first: their number and how to tell them they are admitted.
    queue: VecDeque<(u64, oneshot::Sender<()>)>,
}

/// A place in the pool; given back when dropped.
pub struct Permit {
    scheduler: Arc<Scheduler>,
    account: AccountId,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut state = self.scheduler.lock();
        state.release(self.account);
        state.dispatch(&self.scheduler.limits);
    }
}

/// Takes a waiter out of its queue when its wait ends without a permit (dropped or timed
/// out); if it was admitted meanwhile, gives the place back.
struct Waiting<'a> {
    scheduler: &'a Scheduler,
    account: AccountId,
    id: u64,
    armed: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut state = self.scheduler.lock();
        if !state.unqueue(self.account, self.id) {
            // Admitted between the end of the wait and now: the place is ours to free.
            state.release(self.account);
        }
        state.dispatch(&self.scheduler.limits);
    }
}

impl Scheduler {
    pub fn new(limits: FairLimits) -> Arc<Self> {
        Arc::new(Self {
            limits: FairLimits {
                per_account: limits.per_account.max(1),
                ..limits
            },
            state: Mutex::new(State::default()),
        })
    }

    pub fn limits(&self) -> FairLimits {
        self.limits
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is consistent between statements; a panic elsewhere leaves it usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for a place for one action of `account`, in turn.
    pub async fn acquire(self: &Arc<Self>, account: AccountId) -> Result<Permit, Refusal> {
        let (id, admitted) = {
            let mut state = self.lock();
            let waiting = state.accounts.get(&account).map_or(0, |a| a.queue.len());
            if waiting >= self.limits.queued_per_account {
                return Err(Refusal::AccountQueueFull(waiting));
            }
            let id = state.next;
            state.next += 1;
            let (tell, admitted) = oneshot::channel();
            let entry = state.accounts.entry(account).or_default();
            entry.queue.push_back((id, tell));
            if entry.queue.len() == 1 {
                state.turn.push_back(account);
            }
            state.queued += 1;
            state.dispatch(&self.limits);
            // Not admitted at once and the queue is over its bound: refuse this one.
            if state.queued > self.limits.queued_total && state.unqueue(account, id) {
                return Err(Refusal::QueueFull(state.queued));
            }
            (id, admitted)
        };
        let mut waiting = Waiting {
            scheduler: self,
            account,
            id,
            armed: true,
        };
        match tokio::time::timeout(self.limits.wait, admitted).await {
            Ok(Ok(())) => {
                waiting.armed = false;
                Ok(Permit {
                    scheduler: Arc::clone(self),
                    account,
                })
            }
            // The sender is only dropped unsent with the scheduler; treat it as busy.
            Ok(Err(_)) | Err(_) => Err(Refusal::WaitedTooLong),
        }
    }

    /// Actions running and waiting, in all (for tests and metrics).
    pub fn load(&self) -> (usize, usize) {
        let state = self.lock();
        (state.running, state.queued)
    }
}

impl State {
    /// Gives back one place of `account`.
    fn release(&mut self, account: AccountId) {
        self.running = self.running.saturating_sub(1);
        if let Some(entry) = self.accounts.get_mut(&account) {
            entry.running = entry.running.saturating_sub(1);
            if entry.running == 0 && entry.queue.is_empty() {
                self.accounts.remove(&account);
            }
        }
    }

    /// Removes waiter `id` of `account`; false if it is no longer queued (admitted).
    fn unqueue(&mut self, account: AccountId, id: u64) -> bool {
        let Some(entry) = self.accounts.get_mut(&account) else {
            return false;
        };
        let Some(position) = entry.queue.iter().position(|(w, _)| *w == id) else {
            return false;
        };
        entry.queue.remove(position);
        self.queued -= 1;
        if entry.queue.is_empty() {
            self.turn.retain(|a| *a != account);
            if entry.running == 0 {
                self.accounts.remove(&account);
            }
        }
        true
    }

    /// Admits waiters while there are free places: each to the first account in turn
    /// below its own limit, which then goes to the back of the turn.
    fn dispatch(&mut self, limits: &FairLimits) {
        while self.running < limits.slots {
            let accounts = &self.accounts;
            let next = self.turn.iter().position(|account| {
                accounts
                    .get(account)
                    .is_some_and(|a| a.running < limits.per_account && !a.queue.is_empty())
            });
            let Some(account) = next.and_then(|position| self.turn.remove(position)) else {
                return;
            };
            let Some(entry) = self.accounts.get_mut(&account) else {
                continue;
            };
            let Some((_, tell)) = entry.queue.pop_front() else {
                continue;
            };
            entry.running += 1;
            let more = !entry.queue.is_empty();
            self.running += 1;
            self.queued -= 1;
            if more {
                self.turn.push_back(account);
            }
            // A waiter gone meanwhile gives its place back from its own drop guard.
            let _ = tell.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: AccountId = AccountId(1);
    const B: AccountId = AccountId(2);
    const C: AccountId = AccountId(3);

    fn scheduler(slots: usize, per_account: usize, queued_per_account: usize) -> Arc<Scheduler> {
        Scheduler::new(FairLimits {
            slots,
            per_account,
            queued_per_account,
            queued_total: 100,
            wait: Duration::from_secs(60),
        })
    }

    /// Starts a waiter for `account` that sends its permit (with `label`) on `tx` when
    /// admitted, and returns once it is queued.
    async fn queue(
        s: &Arc<Scheduler>,
        account: AccountId,
        label: &'static str,
        tx: &tokio::sync::mpsc::UnboundedSender<(&'static str, Permit)>,
    ) -> tokio::task::JoinHandle<()> {
        let before = s.load().1;
        let (s2, tx) = (Arc::clone(s), tx.clone());
        let task = tokio::spawn(async move {
            if let Ok(permit) = s2.acquire(account).await {
                let _ = tx.send((label, permit));
            }
        });
        for _ in 0..1000 {
            if s.load().1 > before {
                return task;
            }
            tokio::task::yield_now().await;
        }
        panic!("{label} was not queued");
    }

    #[tokio::test]
    async fn an_account_at_its_limit_waits_and_others_pass() {
        let s = scheduler(4, 2, 10);
        let a1 = s.acquire(A).await.unwrap();
        let _a2 = s.acquire(A).await.unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let _a3 = queue(&s, A, "a3", &tx).await;
        assert_eq!(
            s.load(),
            (2, 1),
            "A's third waits although two slots are free"
        );
        // B is served at once, twice: A's waiter holds no slot.
        let _b1 = s.acquire(B).await.unwrap();
        let _b2 = s.acquire(B).await.unwrap();
        assert_eq!(s.load(), (4, 1));
        drop(a1);
        let (label, _a3) = rx.recv().await.unwrap();
        assert_eq!(label, "a3");
        assert_eq!(s.load(), (4, 0));
    }

    #[tokio::test]
    async fn accounts_are_served_in_turn_and_each_in_order() {
        let s = scheduler(1, 1, 10);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let first = s.acquire(C).await.unwrap();
        let mut tasks = Vec::new();
        for (account, label) in [(A, "a1"), (A, "a2"), (A, "a3"), (B, "b1"), (C, "c1")] {
            tasks.push(queue(&s, account, label, &tx).await);
        }
        drop(first);
        let mut order = Vec::new();
        while order.len() < 5 {
            let (label, permit) = rx.recv().await.unwrap();
            order.push(label);
            drop(permit);
        }
        assert_eq!(order, ["a1", "b1", "c1", "a2", "a3"]);
        assert_eq!(s.load(), (0, 0));
    }

    #[tokio::test]
    async fn a_full_account_queue_refuses_only_that_account() {
        let s = scheduler(2, 1, 2);
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let _a1 = s.acquire(A).await.unwrap();
        let _w1 = queue(&s, A, "a2", &tx).await;
        let _w2 = queue(&s, A, "a3", &tx).await;
        assert!(matches!(
            s.acquire(A).await,
            Err(Refusal::AccountQueueFull(2))
        ));
        let _b = s.acquire(B).await.unwrap();
    }

    #[tokio::test]
    async fn the_total_queue_is_bounded_but_never_refuses_a_free_slot() {
        let s = Scheduler::new(FairLimits {
            slots: 2,
            per_account: 1,
            queued_per_account: 10,
            queued_total: 1,
            wait: Duration::from_secs(60),
        });
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let _a1 = s.acquire(A).await.unwrap();
        let _w = queue(&s, A, "a2", &tx).await;
        assert!(matches!(s.acquire(A).await, Err(Refusal::QueueFull(_))));
        // B can run now: admitted although the queue is at its bound.
        let _b = s.acquire(B).await.unwrap();
        assert_eq!(s.load(), (2, 1));
    }

    #[tokio::test]
    async fn a_cancelled_waiter_frees_its_place() {
        let s = scheduler(1, 1, 1);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let held = s.acquire(B).await.unwrap();
        let a1 = queue(&s, A, "a1", &tx).await;
        assert!(matches!(
            s.acquire(A).await,
            Err(Refusal::AccountQueueFull(1))
        ));
        let _c1 = queue(&s, C, "c1", &tx).await;
        a1.abort();
        let _ = a1.await;
        assert_eq!(s.load(), (1, 1), "a1 left the queue");
        let _a2 = queue(&s, A, "a2", &tx).await;
        drop(held);
        // a1 is gone: c1 (queued before a2) is next, then a2.
        let (label, permit) = rx.recv().await.unwrap();
        assert_eq!(label, "c1");
        drop(permit);
        let (label, permit) = rx.recv().await.unwrap();
        assert_eq!(label, "a2");
        drop(permit);
        assert_eq!(s.load(), (0, 0));
    }

    #[tokio::test]
    async fn a_wait_that_runs_out_is_refused_and_leaves_the_queue() {
        let s = Scheduler::new(FairLimits {
            slots: 1,
            per_account: 1,
            queued_per_account: 10,
            queued_total: 10,
            wait: Duration::from_millis(50),
        });
        let held = s.acquire(A).await.unwrap();
        assert!(matches!(s.acquire(B).await, Err(Refusal::WaitedTooLong)));
        assert_eq!(s.load(), (1, 0));
        drop(held);
        assert_eq!(s.load(), (0, 0));
        let _b = s.acquire(B).await.unwrap();
    }
}
