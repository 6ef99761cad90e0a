//! Singletons across replicas: the chain relayer and the chain indexer must each run on
//! one replica at a time.
//!
//! On PostgreSQL a replica leads `name` while a session of its own holds the session
//! advisory lock of that name (`pg_try_advisory_lock`). The lock goes when the session
//! goes: a replica that exits or is killed closes its connection and the server frees
//! the lock at once; one that freezes or loses the network stops answering, and the
//! server ends its idle session after [`IDLE_SESSION_TIMEOUT`] (`idle_session_timeout`),
//! which frees the lock too. Every other replica tries to take it every [`POLL`], so a
//! dead leader is replaced within about `POLL` (killed) or `IDLE_SESSION_TIMEOUT + POLL`
//! (frozen). The leader checks its session every `POLL` and steps down as soon as the
//! session fails.
//!
//! Leadership is what keeps the work on one replica, not what keeps it correct: a leader
//! that lost its lock while in the middle of a step (or a partitioned one that has not
//! noticed yet) finishes that step, and the store refuses any of its writes that would
//! apply something twice. The relayer records a batch only over entries still pending
//! and settles a batch only while it is still sent; the indexer applies events only from
//! the cursor it read (`Store::apply_chain_events`).
//!
//! On SQLite there is one process: it always leads.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::postgres::PgPool;

/// How often a replica tries to take (or checks it still holds) a lock.
pub(super) const POLL: Duration = Duration::from_millis(500);
/// After this long without a word from the holder, the server ends its session and so
/// frees its locks.
pub(super) const IDLE_SESSION_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether this replica leads one singleton; changes as locks are won and lost.
#[derive(Clone)]
pub struct Leadership {
    name: &'static str,
    leads: watch::Receiver<bool>,
}

impl Leadership {
    /// A singleton that is always led here (one process: SQLite).
    pub(super) fn always(name: &'static str) -> Self {
        let (_tx, leads) = watch::channel(true);
        Self { name, leads }
    }

    /// Contends for `name` on PostgreSQL from a thread of its own, until every
    /// `Leadership` of it is dropped.
    pub(super) fn contend(pool: Arc<PgPool>, name: &'static str) -> std::io::Result<Self> {
        let (tx, leads) = watch::channel(false);
        std::thread::Builder::new()
            .name(format!("lead-{name}"))
            .spawn(move || contend(&pool, name, &tx))?;
        Ok(Self { name, leads })
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether this replica leads now.
    pub fn leads(&self) -> bool {
        *self.leads.borrow()
    }

    /// Waits until this replica leads.
    pub async fn wait_to_lead(&mut self) {
        let _ = self.leads.wait_for(|leads| *leads).await;
    }

    /// Waits until this replica no longer leads (never, for one that always leads).
    pub async fn lost(&mut self) {
        let _ = self.leads.wait_for(|leads| !*leads).await;
        // A sender that is gone (SQLite's) resolves at once: never treat that as lost.
        if self.leads() {
            std::future::pending::<()>().await;
        }
    }
}

/// The advisory lock key of a singleton (stable: the FNV-1a hash of its name).
fn lock_key(name: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in format!("appliance/singleton/{name}").bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash as i64
}

fn contend(pool: &PgPool, name: &'static str, tx: &watch::Sender<bool>) {
    let key = lock_key(name);
    while !tx.is_closed() {
        let session = match pool.connect().and_then(|s| {
            s.batch(&format!(
                "SET idle_session_timeout = {}",
                IDLE_SESSION_TIMEOUT.as_millis()
            ))?;
            Ok(s)
        }) {
            Ok(s) => s,
            Err(err) => {
                tracing::warn!(singleton = name, error = %err, "cannot reach the database to contend for leadership");
                std::thread::sleep(POLL * 4);
                continue;
            }
        };
        let conn = super::sql::Conn::postgres(&session);
        loop {
            if tx.is_closed() {
                return;
            }
            let held = if *tx.borrow() {
                conn.query_row("SELECT 1", super::sql::params![], |_| Ok(true))
            } else {
                conn.query_row(
                    "SELECT pg_try_advisory_lock(?1)",
                    super::sql::params![key],
                    |r| r.get::<bool>(0),
                )
            };
            match held {
                Ok(now) => {
                    if now != *tx.borrow() {
                        tracing::info!(singleton = name, leads = now, "leadership changed");
                        let _ = tx.send(now);
                    }
                }
                Err(err) => {
                    if *tx.borrow() {
                        tracing::warn!(singleton = name, error = %err, "lost the database session; stepping down");
                        let _ = tx.send(false);
                    }
                    break; // a new session
                }
            }
            std::thread::sleep(POLL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_and_distinct() {
        assert_eq!(lock_key("relayer"), lock_key("relayer"));
        assert_ne!(lock_key("relayer"), lock_key("indexer"));
    }
}
