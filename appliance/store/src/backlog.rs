//! What the metrics endpoint reads of the store when scraped (the appliance's `metrics_listener`):
//! read-only aggregates over indexed ranges, never a scan of the whole history.

use super::Store;
use super::StoreError;
use super::sql::params;

/// The chain outbox entries not (yet) on chain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboxBacklog {
    pub pending: u64,
    pub sent: u64,
    pub failed: u64,
    /// When the oldest entry that is pending or sent was queued (Unix seconds).
    pub oldest_unmined_at: Option<i64>,
}

impl Store {
    /// Counts the outbox entries by state, mined ones excepted (the `(state, seq)` index
    /// serves it), and the queueing time of the oldest one not yet mined.
    pub async fn outbox_backlog(&self) -> Result<OutboxBacklog, StoreError> {
        self.read(|conn| {
            let rows = conn.query_map(
                "SELECT state, count(*), min(created_at) FROM chain_outbox \
                 WHERE state IN ('pending', 'sent', 'failed') GROUP BY state",
                params![],
                |r| {
                    Ok((
                        r.get::<String>(0)?,
                        r.get::<i64>(1)?,
                        r.get::<Option<i64>>(2)?,
                    ))
                },
            )?;
            let mut backlog = OutboxBacklog::default();
            for (state, count, oldest) in rows {
                let count = u64::try_from(count).unwrap_or(0);
                match state.as_str() {
                    "pending" => backlog.pending = count,
                    "sent" => backlog.sent = count,
                    _ => {
                        backlog.failed = count;
                        continue;
                    }
                }
                backlog.oldest_unmined_at = match (backlog.oldest_unmined_at, oldest) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            Ok(backlog)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::InitialCredit;
    use crate::testing::{new_account_spec, store_test};

    store_test! {
    // An API-mode sign-up queues its mirror writes: the backlog counts them as pending
    // since about now, until the relayer moves them on.
    async fn the_backlog_counts_what_is_not_yet_on_chain(db) {
        let store = db.open().await;
        assert_eq!(store.outbox_backlog().await.unwrap(), OutboxBacklog::default());
        let before = crate::now_unix();
        store
            .create_account(new_account_spec(7), InitialCredit::NONE)
            .await
            .unwrap();
        let backlog = store.outbox_backlog().await.unwrap();
        assert!(backlog.pending >= 1, "{backlog:?}");
        assert_eq!((backlog.sent, backlog.failed), (0, 0), "{backlog:?}");
        let oldest = backlog.oldest_unmined_at.unwrap();
        assert!(oldest >= before && oldest <= crate::now_unix(), "{backlog:?}");
    }
    }
}
