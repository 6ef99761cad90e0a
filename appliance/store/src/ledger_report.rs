//! The operator's report of the credit ledger (`appliance billing report`): every
//! account's rows within a time range, read from the SQLite file without a `Store`.

use super::base::AccountId;
use super::ledger::{ENTRY_COLUMNS, LedgerEntry, LedgerKind, LedgerRange};
use super::{Result, StoreError};

/// A ledger row with its account, as the operator's report reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountLedgerEntry {
    pub account: AccountId,
    /// The account's name (`new_account`'s `account_name`).
    pub account_name: String,
    pub entry: LedgerEntry,
}

/// Reads the ledger rows of the SQLite database at `db` written within `range` (only
/// `account`'s when given), by account and then oldest first, and hands each to `each`,
/// one at a time (a long ledger is never held in memory). The file is opened read-only,
/// outside any `Store`: the appliance may keep serving from it (WAL), and nothing is
/// migrated or written. The rows are read in one snapshot.
///
/// The database must be at schema version 15 or later (the first to record request ids);
/// an older one is refused (start this build's appliance on it once to migrate it).
pub fn read_ledger<E: From<StoreError>>(
    db: &std::path::Path,
    range: LedgerRange,
    account: Option<AccountId>,
    mut each: impl FnMut(AccountLedgerEntry) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    use rusqlite::{Connection, OpenFlags};
    let open_err = |source: rusqlite::Error| StoreError::Open {
        path: db.display().to_string(),
        source: source.into(),
    };
    if !db.is_file() {
        return Err(
            StoreError::NotFound(format!("there is no database at {}", db.display())).into(),
        );
    }
    let mut conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(open_err)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(open_err)?;
    // One read transaction: every row from the same snapshot, whatever the appliance
    // commits meanwhile.
    let tx = conn.transaction().map_err(StoreError::from)?;
    let version: i64 = tx
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(StoreError::from)?;
    let known = super::migrations::latest_version();
    if version > known {
        return Err(StoreError::SchemaTooNew {
            found: version,
            known,
        }
        .into());
    }
    if version < REQUEST_IDS_SINCE {
        return Err(StoreError::Unavailable(format!(
            "the database is at schema version {version}; the ledger records request ids from version {REQUEST_IDS_SINCE} on: start this build's appliance on it once (it migrates at start), then report"
        ))
        .into());
    }
    let (from, to) = range.bounds();
    let mut stmt = tx
        .prepare(&format!(
            "SELECT l.account_id, a.name, {}
             FROM credit_ledger l JOIN accounts a ON a.id = l.account_id
             WHERE l.created_at >= ?1 AND l.created_at < ?2
               AND (?3 IS NULL OR l.account_id = ?3)
             ORDER BY l.account_id, l.id",
            ENTRY_COLUMNS
                .split(", ")
                .map(|c| format!("l.{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .map_err(StoreError::from)?;
    let mut rows = stmt
        .query(rusqlite::params![from, to, account.map(|a| a.0)])
        .map_err(StoreError::from)?;
    while let Some(row) = rows.next().map_err(StoreError::from)? {
        let read = || -> Result<AccountLedgerEntry> {
            let id: i64 = row.get(2)?;
            let kind: String = row.get(3)?;
            let kind = LedgerKind::parse(&kind)
                .ok_or_else(|| StoreError::Corrupt(format!("ledger row {id} has kind {kind}")))?;
            Ok(AccountLedgerEntry {
                account: AccountId(row.get(0)?),
                account_name: row.get(1)?,
                entry: LedgerEntry {
                    id,
                    kind,
                    amount_cents: row.get(4)?,
                    balance_after: u64::try_from(row.get::<_, i64>(5)?).unwrap_or(0),
                    payment_intent_id: row.get(6)?,
                    operation: row.get(7)?,
                    created_at: row.get(8)?,
                    request_id: row.get(9)?,
                    action_cid: row.get(10)?,
                },
            })
        };
        each(read()?)?;
    }
    Ok(())
}

/// The schema version from which ledger rows record their request and action.
const REQUEST_IDS_SINCE: i64 = 15;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{new_account, store_with_account};
    use crate::{Charge, now_unix};

    /// The operator's report reads every account's rows from the file, by account and
    /// oldest first, within the range, and refuses a file that is not there.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_report_reads_every_account_from_the_file() {
        let db = crate::testing::TestDb::sqlite();
        let (store, a) = store_with_account(&db, 1).await;
        let b = new_account(&store, 2).await;
        store
            .credit_payment(b, "pi_b".into(), 700, Some("req-b".into()))
            .await
            .unwrap();
        store
            .credit_payment(a, "pi_a".into(), 500, Some("req-a".into()))
            .await
            .unwrap();
        store
            .charge_at_most(
                a,
                Charge::new(2, "lit_action")
                    .for_request(Some("req-run".into()))
                    .for_action("QmRun"),
            )
            .await
            .unwrap();
        let path = db.sqlite_path().unwrap();
        let read = |range: LedgerRange, account: Option<AccountId>| {
            let mut rows = Vec::new();
            read_ledger::<StoreError>(&path, range, account, |row| {
                rows.push((
                    row.account,
                    row.account_name,
                    row.entry.kind,
                    row.entry.amount_cents,
                    row.entry.request_id,
                    row.entry.action_cid,
                ));
                Ok(())
            })
            .map(|()| rows)
        };
        let all = read(LedgerRange::default(), None).unwrap();
        assert_eq!(
            all,
            vec![
                (
                    a,
                    "a1".into(),
                    LedgerKind::TopUp,
                    500,
                    Some("req-a".into()),
                    None
                ),
                (
                    a,
                    "a1".into(),
                    LedgerKind::Charge,
                    -2,
                    Some("req-run".into()),
                    Some("QmRun".into())
                ),
                (
                    b,
                    "a2".into(),
                    LedgerKind::TopUp,
                    700,
                    Some("req-b".into()),
                    None
                ),
            ]
        );
        assert_eq!(
            read(LedgerRange::default(), Some(b)).unwrap(),
            all[2..].to_vec()
        );
        let future = LedgerRange {
            from: Some(now_unix() + 3600),
            to: None,
        };
        assert!(read(future, None).unwrap().is_empty());
        let missing = path.with_file_name("nothing-here.db");
        let err = read_ledger::<StoreError>(&missing, LedgerRange::default(), None, |_| Ok(()))
            .unwrap_err();
        assert!(err.to_string().contains("nothing-here.db"), "{err}");
    }
}
