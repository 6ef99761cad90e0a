//! Row integrity for a database outside the TEE (PostgreSQL).
//!
//! Every row of the tables that decide who may do what, and of the ledger and the chain
//! mirror, carries `row_mac`: HMAC-SHA256 over the row's canonical encoding, under a key
//! keyservice derives from the root and never exports ([`RowAuthenticator`]; the
//! appliance only ever sees tags). A row whose MAC does not verify is refused (the
//! operation fails with [`StoreError::Tampered`]), logged, and counted for `/health`
//! ([`IntegrityReport`]); its content is never used.
//!
//! **Reads.** A query on a protected table selects, after its own columns, the table's
//! full row and its MAC ([`Table::select`]), and the row closure calls
//! [`Row::seal`](super::sql::Row::seal), which queues the check. When the read (or the
//! write job) ends, every queued row is checked with one keyservice round trip, before
//! its result leaves the store.
//!
//! **Writes.** Each write job runs with a fresh random 16-byte *mark*
//! (`appliance.row_mark`, transaction-local). Triggers on every protected table
//! (migration 10, PostgreSQL only) set `row_mac` of each inserted or updated row to the
//! mark, copy the previous image of each updated or deleted row (unless it carries the
//! mark: written earlier in this job) into `<table>_prior`, and note the table in
//! `row_dirty`. Before the job's savepoint is released, [`seal`] checks every prior
//! image's MAC (so an UPDATE or DELETE never launders a row that was tampered with),
//! checks the rows the job read, and computes the MACs of the rows that carry the mark.
//! A row carrying the current mark was written by this job's own statements: the job
//! may read it back without a check. A mark is a random value of one job, so nobody
//! outside the appliance's transaction can produce a row that passes as one of the job's
//! own.
//!
//! What this does not stop (`docs/threat-model.md`, "The database operator"): rows
//! withheld or deleted, an earlier version of a row put back with its earlier MAC, the
//! whole database rolled back, and a database server that lies inside the appliance's
//! own transactions.
//!
//! SQLite lives on the CVM's encrypted volume, inside the TEE's boundary: the column
//! exists there too (the SQL is shared), always NULL, never checked.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

pub(crate) use super::sql::Table;
use super::sql::{Conn, OwnedValue, Row, RowChecks, SqlResult, params};
use super::{Result, StoreError};

macro_rules! table {
    ($const:ident, $name:literal, key [$($k:literal),+], [$($c:literal),+ $(,)?]) => {
        pub(crate) const $const: Table = Table {
            name: $name,
            columns: &[$($c),+],
            key: &[$($k),+],
        };
    };
}

table!(
    ACCOUNTS,
    "accounts",
    key["id"],
    [
        "id",
        "api_key_hash",
        "name",
        "description",
        "email",
        "wallet_address",
        "managed",
        "admin_wallet_address",
        "created_at",
    ]
);
table!(
    USAGE_KEYS,
    "usage_keys",
    key["id"],
    [
        "id",
        "account_id",
        "key_hash",
        "name",
        "description",
        "can_create_groups",
        "can_delete_groups",
        "can_create_pkps",
        "manage_ipfs_ids_in_groups",
        "add_pkp_to_groups",
        "remove_pkp_from_groups",
        "execute_in_groups",
        "created_at",
        "updated_at",
        "expires_at",
    ]
);
table!(
    WALLETS,
    "wallets",
    key["id"],
    [
        "id",
        "account_id",
        "pkp_id",
        "address",
        "derivation_path",
        "name",
        "description",
        "created_at",
        "minted_by",
    ]
);
table!(
    GROUPS,
    "groups",
    key["id"],
    [
        "id",
        "account_id",
        "name",
        "description",
        "all_wallets",
        "all_actions",
        "created_at",
        "updated_at",
    ]
);
table!(
    ACTIONS,
    "actions",
    key["id"],
    [
        "id",
        "account_id",
        "cid_hash",
        "ipfs_cid",
        "name",
        "description",
        "created_at",
        "updated_at",
    ]
);
table!(GROUP_WALLETS, "group_wallets", key ["group_id", "wallet_id"], ["group_id", "wallet_id"]);
table!(GROUP_ACTIONS, "group_actions", key ["group_id", "action_id"], ["group_id", "action_id"]);
table!(
    CREDIT_LEDGER,
    "credit_ledger",
    key["id"],
    [
        "id",
        "account_id",
        "kind",
        "amount_cents",
        "balance_after",
        "payment_intent_id",
        "operation",
        "created_at",
    ]
);
table!(
    CREDIT_BALANCES,
    "credit_balances",
    key["account_id"],
    ["account_id", "balance_cents", "updated_at",]
);
table!(
    ACCEPTED_SIGNATURES,
    "accepted_signatures",
    key["digest"],
    ["digest", "flow", "signer", "expires_at", "accepted_at",]
);
table!(
    MINTED_USAGE_KEYS,
    "minted_usage_keys",
    key["key_hash"],
    ["key_hash", "minted_by", "minted_at",]
);
table!(
    CHAIN_OUTBOX,
    "chain_outbox",
    key["seq"],
    [
        "seq",
        "api_key_hash",
        "format",
        "op",
        "created_at",
        "state",
        "batch_id",
        "solo",
        "error",
    ]
);
table!(
    CHAIN_BATCHES,
    "chain_batches",
    key["id"],
    [
        "id",
        "first_seq",
        "last_seq",
        "payer",
        "nonce",
        "raw_tx",
        "tx_hashes",
        "state",
        "mined_hash",
        "block_number",
        "gas_used",
        "created_at",
        "mined_at",
    ]
);
table!(
    CHAIN_CURSORS,
    "chain_cursors",
    key["name"],
    ["name", "block"]
);
table!(ID_SEQUENCES, "id_sequences", key["name"], ["name", "next"]);

/// Every protected table.
pub(crate) const PROTECTED: [&Table; 15] = [
    &ACCOUNTS,
    &USAGE_KEYS,
    &WALLETS,
    &GROUPS,
    &ACTIONS,
    &GROUP_WALLETS,
    &GROUP_ACTIONS,
    &CREDIT_LEDGER,
    &CREDIT_BALANCES,
    &ACCEPTED_SIGNATURES,
    &MINTED_USAGE_KEYS,
    &CHAIN_OUTBOX,
    &CHAIN_BATCHES,
    &CHAIN_CURSORS,
    &ID_SEQUENCES,
];

fn protected(name: &str) -> Option<&'static Table> {
    PROTECTED.iter().copied().find(|t| t.name == name)
}

/// Computes row MACs. Blocking: called from the writer thread and from reads on the
/// blocking pool, never on an async task.
pub trait RowAuthenticator: Send + Sync {
    /// HMAC-SHA256 tags of `items`, in order.
    fn tags(&self, items: &[Vec<u8>]) -> std::result::Result<Vec<[u8; 32]>, String>;
}

/// The canonical encoding a MAC covers: a domain separator, the table, then each
/// column: `0x00` NULL, `0x01 ‖ i64 BE`, `0x02 ‖ u32 BE length ‖ UTF-8`,
/// `0x03 ‖ u32 BE length ‖ bytes`.
fn encode(table: &str, values: &[OwnedValue]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + values.len() * 16);
    out.extend_from_slice(b"appliance/store-row/v1\0");
    out.extend_from_slice(table.as_bytes());
    out.push(0);
    for value in values {
        match value {
            OwnedValue::Null | OwnedValue::Real(_) => out.push(0),
            OwnedValue::Int(i) => {
                out.push(1);
                out.extend_from_slice(&i.to_be_bytes());
            }
            OwnedValue::Text(t) => {
                out.push(2);
                out.extend_from_slice(&(t.len() as u32).to_be_bytes());
                out.extend_from_slice(t.as_bytes());
            }
            OwnedValue::Blob(b) => {
                out.push(3);
                out.extend_from_slice(&(b.len() as u32).to_be_bytes());
                out.extend_from_slice(b);
            }
        }
    }
    out
}

/// The key columns of a row, for messages (numbers and short text; bytes as hex).
fn describe_key(table: &Table, values: &[OwnedValue]) -> String {
    let mut parts = Vec::new();
    for k in table.key {
        let idx = table.columns.iter().position(|c| c == k).unwrap_or(0);
        let shown = match values.get(idx) {
            Some(OwnedValue::Int(i)) => i.to_string(),
            Some(OwnedValue::Text(t)) => t.chars().take(64).collect(),
            Some(OwnedValue::Blob(b)) => format!("0x{}", hex::encode(&b[..b.len().min(8)])),
            _ => "NULL".into(),
        };
        parts.push(format!("{k}={shown}"));
    }
    parts.join(", ")
}

/// Length of a job's mark (a MAC is 32 bytes, so the two never mix up).
pub(super) const MARK_LEN: usize = 16;

/// One row to check.
struct Check {
    table: &'static Table,
    /// The row's data columns (its key is described from them only if it is refused).
    values: Vec<OwnedValue>,
    /// What the MAC covers (taken when the tags are asked for).
    input: Vec<u8>,
    /// The stored MAC (`None`: NULL).
    mac: Option<Vec<u8>>,
}

impl Check {
    fn new(table: &'static Table, values: Vec<OwnedValue>, mac: Option<Vec<u8>>) -> Self {
        let input = encode(table.name, &values);
        Self {
            table,
            values,
            input,
            mac,
        }
    }
}

/// The rows one read or one write job has seen, to check before its result is used.
pub(crate) struct Checks {
    pending: RefCell<Vec<Check>>,
    /// The current write job's mark (`None` for a read).
    mark: Option<[u8; MARK_LEN]>,
}

impl Checks {
    pub(super) fn for_read() -> Self {
        Self {
            pending: RefCell::new(Vec::new()),
            mark: None,
        }
    }

    pub(super) fn for_write(mark: [u8; MARK_LEN]) -> Self {
        Self {
            pending: RefCell::new(Vec::new()),
            mark: Some(mark),
        }
    }

    fn take(&self) -> Vec<Check> {
        std::mem::take(&mut *self.pending.borrow_mut())
    }

    pub(super) fn is_empty(&self) -> bool {
        self.pending.borrow().is_empty()
    }
}

impl RowChecks for Checks {
    /// Queues the check of the row whose columns start at `offset` (the layout of
    /// [`Table::select`]).
    fn queue(&self, row: &Row<'_>, offset: usize, table: &'static Table) -> SqlResult<()> {
        let mut values = Vec::with_capacity(table.columns.len());
        for i in 0..table.columns.len() {
            values.push(row.value(offset + i)?);
        }
        let mac = match row.value(offset + table.columns.len())? {
            OwnedValue::Null => None,
            OwnedValue::Blob(b) => Some(b),
            _ => Some(Vec::new()),
        };
        if let (Some(mac), Some(mark)) = (&mac, &self.mark)
            && mac.as_slice() == mark.as_slice()
        {
            return Ok(()); // written by this very job
        }
        self.pending
            .borrow_mut()
            .push(Check::new(table, values, mac));
        Ok(())
    }
}

/// Refused rows, for `/health` and the log.
#[derive(Debug, Default)]
pub struct IntegrityReport {
    failures: AtomicU64,
    last: Mutex<Option<IntegrityFailure>>,
}

/// The last refused row.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IntegrityFailure {
    pub table: String,
    /// The row's key columns (ids; byte keys shortened to 8 bytes of hex).
    pub row: String,
    pub at_unix: i64,
}

impl IntegrityReport {
    /// Rows refused since start.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    pub fn last(&self) -> Option<IntegrityFailure> {
        self.last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn record(&self, table: &str, row: &str) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        tracing::error!(
            table,
            row,
            "store integrity: a row failed its MAC (changed outside the appliance); refused and not used"
        );
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(IntegrityFailure {
            table: table.to_owned(),
            row: row.to_owned(),
            at_unix: super::now_unix(),
        });
    }
}

/// The integrity state of a PostgreSQL store.
pub(crate) struct Integrity {
    authenticator: OnceLock<Arc<dyn RowAuthenticator>>,
    pub report: Arc<IntegrityReport>,
}

impl Integrity {
    pub(super) fn new() -> Self {
        Self {
            authenticator: OnceLock::new(),
            report: Arc::new(IntegrityReport::default()),
        }
    }

    /// Sets the key holder; once (a second call is ignored and answers `false`).
    pub(super) fn set_authenticator(&self, auth: Arc<dyn RowAuthenticator>) -> bool {
        self.authenticator.set(auth).is_ok()
    }

    fn authenticator(&self) -> Result<&Arc<dyn RowAuthenticator>> {
        self.authenticator.get().ok_or_else(|| {
            StoreError::Unavailable(
                "the store's row keys are not available yet (keyservice has no root)".into(),
            )
        })
    }

    /// Checks what a read saw.
    pub(super) fn verify(&self, checks: &Checks) -> Result<()> {
        let mut pending = checks.take();
        if pending.is_empty() {
            return Ok(());
        }
        let tags = self.tags(
            pending
                .iter_mut()
                .map(|c| std::mem::take(&mut c.input))
                .collect(),
        )?;
        for (check, tag) in pending.iter().zip(tags) {
            self.compare(check, &tag)?;
        }
        Ok(())
    }

    fn tags(&self, inputs: Vec<Vec<u8>>) -> Result<Vec<[u8; 32]>> {
        let tags = self
            .authenticator()?
            .tags(&inputs)
            .map_err(|e| StoreError::Unavailable(format!("row keys (keyservice): {e}")))?;
        if tags.len() != inputs.len() {
            return Err(StoreError::Task(
                "keyservice answered the wrong number of row MACs".into(),
            ));
        }
        Ok(tags)
    }

    fn compare(&self, check: &Check, tag: &[u8; 32]) -> Result<()> {
        use subtle::ConstantTimeEq as _;
        let ok = check
            .mac
            .as_deref()
            .is_some_and(|mac| mac.len() == 32 && bool::from(mac.ct_eq(tag)));
        if ok {
            return Ok(());
        }
        let key = describe_key(check.table, &check.values);
        self.report.record(check.table.name, &key);
        Err(StoreError::Tampered {
            table: check.table.name,
            row: key,
        })
    }

    /// The end of a write job (on the writer's connection, inside the job's savepoint):
    /// checks the prior images of changed rows and the rows the job read, then seals the
    /// rows the job wrote.
    pub(super) fn seal(&self, conn: Conn<'_>, checks: &Checks) -> Result<()> {
        let Some(mark) = checks.mark else {
            return Err(StoreError::Task("sealing outside a write job".into()));
        };
        let dirty: Vec<(String, bool)> = conn.query_map(
            "SELECT tbl, prior FROM row_dirty ORDER BY tbl",
            params![],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        if dirty.is_empty() && checks.is_empty() {
            return Ok(());
        }
        let mut verify = checks.take();
        let mut seal: Vec<(&'static Table, Vec<OwnedValue>, Vec<u8>)> = Vec::new();
        for (name, prior) in &dirty {
            let table = protected(name).ok_or_else(|| {
                StoreError::Task(format!(
                    "row_dirty names a table that is not protected: {name}"
                ))
            })?;
            let n = table.columns.len();
            if *prior {
                let sql = format!("SELECT {} FROM {}_prior", table.select(""), table.name);
                let rows = conn.query_map(&sql, params![], |r| read_row(r, n))?;
                for (values, mac) in rows {
                    verify.push(Check::new(table, values, mac));
                }
            }
            let sql = format!(
                "SELECT {} FROM {} WHERE octet_length(row_mac) = {MARK_LEN} AND row_mac = ?1",
                table.select(""),
                table.name
            );
            for (values, _) in conn.query_map(&sql, params![mark], |r| read_row(r, n))? {
                let input = encode(table.name, &values);
                seal.push((table, values, input));
            }
        }
        let mut inputs: Vec<Vec<u8>> = verify
            .iter_mut()
            .map(|c| std::mem::take(&mut c.input))
            .collect();
        inputs.extend(seal.iter_mut().map(|(_, _, input)| std::mem::take(input)));
        let tags = self.tags(inputs)?;
        let (checked, sealed) = tags.split_at(verify.len());
        for (check, tag) in verify.iter().zip(checked) {
            self.compare(check, tag)?;
        }
        for ((table, values, _), tag) in seal.iter().zip(sealed) {
            let mut sql = format!("UPDATE {} SET row_mac = ?1 WHERE ", table.name);
            let mut key_values: Vec<&OwnedValue> = Vec::new();
            for (i, k) in table.key.iter().enumerate() {
                if i > 0 {
                    sql.push_str(" AND ");
                }
                sql.push_str(&format!("{k} = ?{}", i + 2));
                let idx = table.columns.iter().position(|c| c == k).unwrap_or(0);
                key_values.push(&values[idx]);
            }
            let mut bound: Vec<&dyn super::sql::ToParam> = vec![tag];
            bound.extend(key_values.iter().map(|v| *v as &dyn super::sql::ToParam));
            if conn.execute(&sql, &bound)? != 1 {
                return Err(StoreError::Task(format!(
                    "sealing {}: the row {} was not found",
                    table.name,
                    describe_key(table, values)
                )));
            }
        }
        for (name, prior) in &dirty {
            if *prior {
                conn.execute(&format!("DELETE FROM {name}_prior"), params![])?;
            }
        }
        conn.execute("DELETE FROM row_dirty", params![])?;
        Ok(())
    }
}

fn read_row(r: &Row<'_>, n: usize) -> SqlResult<(Vec<OwnedValue>, Option<Vec<u8>>)> {
    let mut values = Vec::with_capacity(n);
    for i in 0..n {
        values.push(r.value(i)?);
    }
    let mac = match r.value(n)? {
        OwnedValue::Null => None,
        OwnedValue::Blob(b) => Some(b),
        _ => Some(Vec::new()),
    };
    Ok((values, mac))
}

/// A fresh mark for a write job.
pub(super) fn new_mark() -> Result<[u8; MARK_LEN]> {
    let mut mark = [0u8; MARK_LEN];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut mark)
        .map_err(|_| StoreError::Task("no randomness for a write mark".into()))?;
    Ok(mark)
}

/// The SQL that sets a job's mark (transaction-local, so it ends with the batch).
pub(super) fn set_mark(conn: Conn<'_>, mark: &[u8; MARK_LEN]) -> SqlResult<()> {
    conn.query_row(
        "SELECT set_config('appliance.row_mark', ?1, true)",
        params![hex::encode(mark)],
        |_| Ok(()),
    )
}

/// Migration 10 for PostgreSQL, as generated from [`PROTECTED`] when it was written
/// (`migrations.rs` holds the frozen text; a test keeps the two equal).
#[cfg(test)]
pub(super) fn migration_postgres() -> String {
    let mut sql = String::from(TRIGGER_FUNCTION);
    for table in PROTECTED {
        let t = table.name;
        sql.push_str(&format!(
            "
ALTER TABLE {t} ADD COLUMN row_mac BYTEA;
CREATE TABLE {t}_prior (LIKE {t});
CREATE INDEX {t}_marked ON {t} (row_mac) WHERE octet_length(row_mac) = {MARK_LEN};
CREATE TRIGGER {t}_row_changed BEFORE INSERT OR UPDATE OR DELETE ON {t}
    FOR EACH ROW EXECUTE FUNCTION appliance_row_changed();
"
        ));
    }
    sql
}

/// Migration 10 for SQLite: the same column, never filled.
#[cfg(test)]
pub(super) fn migration_sqlite() -> String {
    PROTECTED
        .iter()
        .map(|t| format!("ALTER TABLE {} ADD COLUMN row_mac BLOB;\n", t.name))
        .collect()
}

#[cfg(test)]
const TRIGGER_FUNCTION: &str = "
CREATE TABLE row_dirty (
    tbl   TEXT     PRIMARY KEY,
    prior SMALLINT NOT NULL CHECK (prior IN (0, 1))
);

CREATE FUNCTION appliance_row_changed() RETURNS trigger LANGUAGE plpgsql AS $body$
DECLARE
    mark bytea := decode(coalesce(current_setting('appliance.row_mark', true), ''), 'hex');
BEGIN
    -- Outside the appliance's write path there is no mark: the row keeps its old MAC,
    -- which no longer matches, and the appliance refuses it.
    IF mark IS NULL OR octet_length(mark) <> 16 THEN
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
    END IF;
    IF TG_OP <> 'INSERT' AND OLD.row_mac IS DISTINCT FROM mark THEN
        EXECUTE format('INSERT INTO %I SELECT ($1).*', TG_TABLE_NAME || '_prior') USING OLD;
        INSERT INTO row_dirty (tbl, prior) VALUES (TG_TABLE_NAME, 1)
            ON CONFLICT (tbl) DO UPDATE SET prior = 1;
    ELSE
        INSERT INTO row_dirty (tbl, prior) VALUES (TG_TABLE_NAME, 0)
            ON CONFLICT (tbl) DO NOTHING;
    END IF;
    IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
    IF TG_OP = 'INSERT' OR NEW.row_mac IS NOT DISTINCT FROM OLD.row_mac THEN
        NEW.row_mac := mark;
    END IF;
    RETURN NEW;
END
$body$;
";

#[cfg(test)]
mod tests {
    use super::*;

    /// The frozen text of migration 10 is what the table list generates: a protected
    /// table added later needs a migration of its own, and the list must keep
    /// describing the tables migration 10 created.
    #[test]
    fn migration_10_is_generated_from_the_protected_tables() {
        let m = super::super::migrations::migration(10);
        assert_eq!(m.postgres, migration_postgres());
        assert_eq!(m.sql, migration_sqlite());
    }

    #[test]
    fn the_encoding_separates_tables_columns_and_kinds() {
        let a = encode(
            "t",
            &[OwnedValue::Text("ab".into()), OwnedValue::Text("c".into())],
        );
        let b = encode(
            "t",
            &[OwnedValue::Text("a".into()), OwnedValue::Text("bc".into())],
        );
        assert_ne!(a, b);
        assert_ne!(
            encode("t", &[OwnedValue::Int(1)]),
            encode("u", &[OwnedValue::Int(1)])
        );
        assert_ne!(
            encode("t", &[OwnedValue::Null]),
            encode("t", &[OwnedValue::Int(0)])
        );
        assert_ne!(
            encode("t", &[OwnedValue::Text("x".into())]),
            encode("t", &[OwnedValue::Blob(b"x".to_vec())])
        );
    }

    use crate::api_keys::KeyHash;
    use crate::authz::{GroupSet, Permissions};
    use crate::store::testing::{TestDb, identity, new_account};
    use crate::store::{Charge, NewUsageKey, Page, ResolvedKey, Store};

    /// A PostgreSQL store with an account (seed 1) holding a usage key and a wallet.
    async fn populated() -> Option<(TestDb, Store, crate::store::AccountId)> {
        let db = TestDb::postgres()?;
        let store = db.open().await;
        let account = new_account(&store, 1).await;
        store
            .add_usage_key(
                account,
                NewUsageKey {
                    key_hash: KeyHash([9; 32]),
                    name: "k".into(),
                    description: String::new(),
                    permissions: Permissions {
                        execute_in_groups: GroupSet::new(vec![2]),
                        ..Permissions::default()
                    },
                },
                Charge::free(),
            )
            .await
            .unwrap();
        store
            .create_wallet(
                account,
                identity(7),
                "w".into(),
                String::new(),
                Charge::free(),
            )
            .await
            .unwrap();
        Some((db, store, account))
    }

    fn assert_tampered<T: std::fmt::Debug>(out: Result<T>, table: &str) {
        match out {
            Err(StoreError::Tampered { table: t, .. }) => assert_eq!(t, table),
            other => panic!("expected a refused {table} row, got {other:?}"),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_row_edited_in_the_database_is_refused_logged_and_reported() {
        let Some((db, store, account)) = populated().await else {
            return;
        };
        let report = store.integrity_report().unwrap();
        assert_eq!(report.failures(), 0);
        // A usage key given rights it never had, behind the appliance's back.
        db.behind_the_back("UPDATE usage_keys SET can_create_pkps = 1")
            .await;
        tokio::time::sleep(crate::store::key_cache::REPLICA_TTL).await;
        assert_tampered(store.resolve_key(KeyHash([9; 32])).await, "usage_keys");
        assert_tampered(
            store
                .list_usage_keys(
                    account,
                    Page {
                        number: 0,
                        size: 10,
                    },
                )
                .await,
            "usage_keys",
        );
        assert!(report.failures() >= 2);
        let last = report.last().unwrap();
        assert_eq!(last.table, "usage_keys");
        assert!(last.row.starts_with("id="), "{last:?}");
        // The rows nobody touched still serve.
        assert!(matches!(
            store.resolve_key(KeyHash([1; 32])).await.unwrap(),
            Some(ResolvedKey::Account(_))
        ));
        store
            .wallet(account, crate::store::WalletRef::Pkp(identity(7).pkp_id))
            .await
            .unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_row_moved_to_another_account_or_inserted_is_refused() {
        let Some((db, store, a)) = populated().await else {
            return;
        };
        let b = new_account(&store, 2).await;
        // Account b's wallet handed to account a (its derivation path is what signs).
        db.behind_the_back(&format!(
            "UPDATE wallets SET account_id = {} WHERE account_id = {}",
            a.0, b.0
        ))
        .await;
        assert_tampered(
            store
                .list_wallets(
                    a,
                    Page {
                        number: 0,
                        size: 10,
                    },
                )
                .await,
            "wallets",
        );
        // A membership row that no write of the appliance made.
        let db2 = TestDb::postgres().unwrap();
        let store2 = db2.open().await;
        let c = new_account(&store2, 3).await;
        let group = store2
            .add_group(
                c,
                crate::store::GroupSpec {
                    name: "g".into(),
                    description: String::new(),
                    wallets: crate::store::Permitted::Only(vec![]),
                    actions: crate::store::Permitted::All,
                },
                Charge::free(),
            )
            .await
            .unwrap();
        db2.behind_the_back(&format!(
            "INSERT INTO group_wallets (group_id, wallet_id) SELECT {}, id FROM wallets",
            group.0
        ))
        .await;
        assert_tampered(
            store2
                .list_groups(
                    c,
                    Page {
                        number: 0,
                        size: 10,
                    },
                )
                .await,
            "group_wallets",
        );
        assert_tampered(
            store2
                .execution_scope(c, vec![group], crate::store::CidHash([5; 32]))
                .await,
            "group_wallets",
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_never_launders_a_tampered_row() {
        let Some((db, store, account)) = populated().await else {
            return;
        };
        // Emptying the MAC does not make the row "new" either: an update of it is refused
        // and it is never sealed.
        db.behind_the_back("UPDATE usage_keys SET row_mac = NULL")
            .await;
        assert_tampered(
            store
                .remove_usage_key(account, KeyHash([9; 32]), Charge::free())
                .await,
            "usage_keys",
        );
        tokio::time::sleep(crate::store::key_cache::REPLICA_TTL).await;
        assert_tampered(store.resolve_key(KeyHash([9; 32])).await, "usage_keys");
        store
            .credit_payment(account, "pi_1".into(), 100)
            .await
            .unwrap();
        // A balance inflated behind the back: charging it must not seal the lie.
        db.behind_the_back("UPDATE credit_balances SET balance_cents = 1000000")
            .await;
        assert_tampered(store.charge(account, 5, "x").await, "credit_balances");
        assert_tampered(store.balance(account).await, "credit_balances");
        // A row deleted behind the back is simply gone (withholding is not detected:
        // docs/threat-model.md).
        db.behind_the_back("DELETE FROM usage_keys").await;
        tokio::time::sleep(crate::store::key_cache::REPLICA_TTL).await;
        assert_eq!(store.resolve_key(KeyHash([9; 32])).await.unwrap(), None);
        let _ = account;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_store_with_another_key_refuses_every_row() {
        let Some((db, _store, account)) = populated().await else {
            return;
        };
        let url = db.postgres_url().unwrap().to_owned();
        let other = Store::open_postgres(crate::store::PgOptions::new(url))
            .await
            .unwrap();
        other.set_row_authenticator(std::sync::Arc::new(
            crate::store::testing::LocalRowKey::new(b"another root"),
        ));
        assert_tampered(other.account(account).await, "accounts");
        // Without a key at all, protected rows are not served (503), never unchecked.
        let keyless = Store::open_postgres(crate::store::PgOptions::new(
            db.postgres_url().unwrap().to_owned(),
        ))
        .await
        .unwrap();
        assert!(matches!(
            keyless.account(account).await,
            Err(StoreError::Unavailable(_))
        ));
    }
}
