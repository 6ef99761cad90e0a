//! Row integrity for a database outside the TEE (PostgreSQL).
//!
//! **Invariant: every row MAC the appliance ever computes covers values the appliance
//! itself decided to write, and nothing on this path depends on code running inside the
//! database.** A row the appliance did not intend to write never gets a MAC, whatever
//! triggers, rules or functions the database runs.
//!
//! Every row of the tables that decide who may do what, and of the ledger and the chain
//! mirror, carries `row_mac`: HMAC-SHA256 over the row's canonical encoding (columns a
//! table gained later are encoded only when one is set: [`mac_input`]), under a key
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
//! **Writes.** Domain code never writes a protected table with free SQL: it goes through
//! the typed calls of this module, which take the row's full new image from Rust.
//! [`insert`] binds every column; [`update`] reads the current row (queued for its
//! check), lets Rust compute the new image from it, and writes that image with a
//! `WHERE` on the key *and* the old MAC, so a row changed underneath fails instead of
//! being overwritten; [`delete`] checks what it removed. Each image a job writes is kept
//! in the job's [`Checks`]; when the job ends, [`Integrity::seal`] asks keyservice for
//! the MACs of those images and of the rows the job read in one round trip, refuses the
//! job if a read row fails, and writes each MAC by the row's key. What the database
//! stores is irrelevant to the MAC: if a trigger changed a row (or moved another one),
//! the stored values no longer match the MAC of the image the appliance chose, and
//! every later read refuses the row. A row the job reads back after writing it must
//! equal the image it wrote (the job's own rows have no MAC until the job ends).
//!
//! **Ids.** Row ids are allocated in the appliance from `id_sequences` (itself MACed)
//! and bound like any other column, never taken from the database (PostgreSQL; SQLite,
//! inside the TEE, keeps its `AUTOINCREMENT` ids).
//!
//! **Rollback.** Every committed write batch advances `write_epoch`, a one-row table
//! whose MAC covers the epoch and the previous MAC (a chain). Each replica keeps the
//! highest epoch it has seen (its own commits, the reads that check rows, the periodic
//! check) and refuses the database (503, logged, counted) while it shows a lower one.
//!
//! **Drift.** At start and periodically, [`foreign_objects`] lists the triggers, rules,
//! functions and event triggers of the database; the migrations create none, so any is
//! reported on `/health` and in metrics. Defence in depth only: nothing above relies on
//! it.
//!
//! What this does not stop (`docs/threat-model.md` §7): rows withheld or deleted, an
//! earlier version of a row put back with its earlier MAC, the whole database rolled
//! back while no replica runs, and a database server that lies inside the appliance's
//! own transactions.
//!
//! SQLite lives on the CVM's encrypted volume, inside the TEE's boundary: the column
//! exists there too (the SQL is shared), always NULL, never checked.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

pub(crate) use super::sql::Table;
use super::sql::{
    Conn, Engine, FromSql, OwnedValue, Param, Row, RowChecks, SqlResult, ToParam, ValueRef, params,
};
use super::{Result, StoreError};

macro_rules! table {
    ($const:ident, $name:literal, key [$($k:literal),+], [$($c:literal),+ $(,)?]) => {
        table!($const, $name, key [$($k),+], [$($c),+], added later []);
    };
    (
        $const:ident, $name:literal, key [$($k:literal),+], [$($c:literal),+ $(,)?],
        added later [$($l:literal),* $(,)?]
    ) => {
        pub(crate) const $const: Table = Table {
            name: $name,
            columns: &[$($c,)+ $($l),*],
            key: &[$($k),+],
            added_later: <[&str]>::len(&[$($l),*]),
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
    ],
    // Migration 15: the request that caused the row and the action a charge paid for.
    added later ["request_id", "action_cid"]
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
// Migration 16: which body each imported module URL must have (`module_locks`).
table!(
    MODULE_LOCKS,
    "module_locks",
    key["url"],
    ["url", "sha384", "bytes", "first_seen"]
);

table!(
    WRITE_EPOCH,
    "write_epoch",
    key["id"],
    ["id", "epoch", "prev_mac"]
);

/// Every protected table of migration 10 (`write_epoch`, migration 14, is MACed too).
#[cfg(test)]
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

/// What a row's MAC covers: [`encode`] of its columns, where the columns `table` gained
/// after its rows were first MACed ([`Table::added_later`]) are left out while all of them
/// are NULL. A row written before they existed (all NULL once the migration added them)
/// keeps the MAC it was written with, and a row that holds any of them is encoded with all
/// of them. Each value's encoding says where it ends, so the two forms never collide:
/// emptying the added columns of a row that had them changes what its MAC must cover.
fn mac_input(table: &Table, values: &[OwnedValue]) -> Vec<u8> {
    let base = values.len().saturating_sub(table.added_later);
    let covered = if values[base..].iter().all(|v| matches!(v, OwnedValue::Null)) {
        &values[..base]
    } else {
        values
    };
    encode(table.name, covered)
}

fn column_index(table: &Table, column: &str) -> Option<usize> {
    table.columns.iter().position(|c| *c == column)
}

/// The key columns of a row, for messages (numbers and short text; bytes as hex).
fn describe_key(table: &Table, values: &[OwnedValue]) -> String {
    let mut parts = Vec::new();
    for k in table.key {
        let idx = column_index(table, k).unwrap_or(0);
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

/// The key columns of a row, encoded (what identifies a row a job wrote).
fn key_of(table: &Table, values: &[OwnedValue]) -> Vec<u8> {
    let key: Vec<OwnedValue> = table
        .key
        .iter()
        .map(|k| {
            column_index(table, k)
                .and_then(|i| values.get(i).cloned())
                .unwrap_or(OwnedValue::Null)
        })
        .collect();
    encode(table.name, &key)
}

fn owned(param: Param<'_>) -> OwnedValue {
    match param {
        Param::Null => OwnedValue::Null,
        Param::Int(i) => OwnedValue::Int(i),
        Param::Text(t) => OwnedValue::Text(t.to_owned()),
        Param::Blob(b) => OwnedValue::Blob(b.to_vec()),
    }
}

fn value_ref(value: &OwnedValue) -> ValueRef<'_> {
    match value {
        OwnedValue::Null => ValueRef::Null,
        OwnedValue::Int(i) => ValueRef::Int(*i),
        OwnedValue::Real(r) => ValueRef::Real(*r),
        OwnedValue::Text(t) => ValueRef::Text(t),
        OwnedValue::Blob(b) => ValueRef::Blob(b),
    }
}

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
        let input = mac_input(table, &values);
        Self {
            table,
            values,
            input,
            mac,
        }
    }
}

/// The rows one read or one write job has seen, to check before its result is used,
/// and the row images a write job wrote, to seal when it ends.
pub(crate) struct Checks {
    pending: RefCell<Vec<Check>>,
    /// The images this job wrote, by key (`key_of`), in the order first written.
    written: RefCell<HashMap<Vec<u8>, Written>>,
}

/// A row image a write job wrote: when it was first written (its place in the job), its
/// table and its values.
type Written = (usize, &'static Table, Vec<OwnedValue>);

impl Checks {
    pub(super) fn for_read() -> Self {
        Self {
            pending: RefCell::new(Vec::new()),
            written: RefCell::new(HashMap::new()),
        }
    }

    pub(super) fn for_write() -> Self {
        Self::for_read()
    }

    fn take(&self) -> Vec<Check> {
        std::mem::take(&mut *self.pending.borrow_mut())
    }

    fn take_written(&self) -> Vec<(&'static Table, Vec<OwnedValue>)> {
        let mut rows: Vec<_> = std::mem::take(&mut *self.written.borrow_mut())
            .into_values()
            .collect();
        rows.sort_by_key(|(order, _, _)| *order);
        rows.into_iter().map(|(_, t, v)| (t, v)).collect()
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
        let own = self
            .written
            .borrow()
            .get(&key_of(table, &values))
            .map(|(_, _, image)| *image == values);
        match own {
            // Written by this very job, exactly as it chose: no MAC yet, nothing to check.
            Some(true) => {}
            // Written by this job but not what it wrote: refused (a NULL MAC never passes).
            Some(false) => self
                .pending
                .borrow_mut()
                .push(Check::new(table, values, None)),
            None => self
                .pending
                .borrow_mut()
                .push(Check::new(table, values, mac)),
        }
        Ok(())
    }

    fn wrote(&self, table: &'static Table, values: Vec<OwnedValue>) {
        let mut written = self.written.borrow_mut();
        let order = written.len();
        let key = key_of(table, &values);
        match written.get_mut(&key) {
            Some(entry) => entry.2 = values,
            None => {
                written.insert(key, (order, table, values));
            }
        }
    }

    fn forget(&self, table: &'static Table, values: &[OwnedValue]) {
        self.written.borrow_mut().remove(&key_of(table, values));
    }

    fn removed(&self, table: &'static Table, values: Vec<OwnedValue>, mac: Option<Vec<u8>>) {
        let key = key_of(table, &values);
        if self.written.borrow_mut().remove(&key).is_none() {
            // A delete never launders a row: what it removed must have been genuine.
            self.pending
                .borrow_mut()
                .push(Check::new(table, values, mac));
        }
    }
}

/// A protected row's columns by name, as a write gives them.
pub(crate) type Columns<'a> = &'a [(&'static str, &'a dyn ToParam)];

/// `columns![("a", x), ("b", y)]` as [`Columns`].
macro_rules! columns {
    ($(($c:literal, $v:expr)),+ $(,)?) => {
        &[$(($c, &$v as &dyn $crate::sql::ToParam)),+]
            as &[(&'static str, &dyn $crate::sql::ToParam)]
    };
}
pub(crate) use columns;

fn bug(what: String) -> StoreError {
    StoreError::Task(what)
}

/// The full image of a new row: every column given, in the table's order (the id column
/// left NULL when `allocated`).
fn image(table: &'static Table, columns: Columns<'_>, allocated: bool) -> Result<Vec<OwnedValue>> {
    for (name, _) in columns {
        if column_index(table, name).is_none() {
            return Err(bug(format!("{} has no column {name}", table.name)));
        }
    }
    table
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| match columns.iter().find(|(name, _)| name == c) {
            Some((_, v)) => Ok(owned(v.to_param())),
            None if allocated && i == 0 => Ok(OwnedValue::Null),
            None => Err(bug(format!(
                "a write of {} gives no value for {c}",
                table.name
            ))),
        })
        .collect()
}

fn numbered(from: usize, count: usize) -> String {
    (from..from + count)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn insert_image(
    tx: Conn<'_>,
    table: &'static Table,
    values: Vec<OwnedValue>,
    or_ignore: bool,
) -> Result<bool> {
    let sql = format!(
        "INSERT INTO {} ({}) VALUES ({}){}",
        table.name,
        table.columns.join(", "),
        numbered(1, values.len()),
        if or_ignore {
            " ON CONFLICT DO NOTHING"
        } else {
            ""
        }
    );
    let bound: Vec<&dyn ToParam> = values.iter().map(|v| v as &dyn ToParam).collect();
    let inserted = tx.execute(&sql, &bound)? == 1;
    if inserted && let Some(checks) = tx.checks() {
        checks.wrote(table, values);
    }
    Ok(inserted)
}

/// Inserts a row: every column given by name (`NULL`s too).
pub(crate) fn insert(tx: Conn<'_>, table: &'static Table, columns: Columns<'_>) -> Result<()> {
    let values = image(table, columns, false)?;
    insert_image(tx, table, values, false).map(|_| ())
}

/// Inserts a row unless one with its key exists (`ON CONFLICT DO NOTHING`); whether it
/// did.
pub(crate) fn insert_or_ignore(
    tx: Conn<'_>,
    table: &'static Table,
    columns: Columns<'_>,
) -> Result<bool> {
    let values = image(table, columns, false)?;
    insert_image(tx, table, values, true)
}

/// Inserts a row whose first column is its id, and returns that id: allocated by the
/// appliance from `id_sequences` (PostgreSQL), or SQLite's `AUTOINCREMENT`.
pub(crate) fn insert_new(tx: Conn<'_>, table: &'static Table, columns: Columns<'_>) -> Result<i64> {
    insert_new_row(tx, table, columns, false)?
        .ok_or_else(|| bug(format!("an insert into {} kept no row", table.name)))
}

/// As [`insert_new`], unless a row with one of its unique values exists (`None`).
pub(crate) fn insert_new_or_ignore(
    tx: Conn<'_>,
    table: &'static Table,
    columns: Columns<'_>,
) -> Result<Option<i64>> {
    insert_new_row(tx, table, columns, true)
}

fn insert_new_row(
    tx: Conn<'_>,
    table: &'static Table,
    columns: Columns<'_>,
    or_ignore: bool,
) -> Result<Option<i64>> {
    let mut values = image(table, columns, true)?;
    match tx.engine() {
        Engine::Sqlite => {
            let sql = format!(
                "INSERT INTO {} ({}) VALUES ({}){} RETURNING {}",
                table.name,
                table.columns[1..].join(", "),
                numbered(1, values.len() - 1),
                if or_ignore {
                    " ON CONFLICT DO NOTHING"
                } else {
                    ""
                },
                table.columns[0]
            );
            let bound: Vec<&dyn ToParam> = values[1..].iter().map(|v| v as &dyn ToParam).collect();
            Ok(tx.query_opt(&sql, &bound, |r| r.get(0))?)
        }
        Engine::Postgres => {
            let id = next_id(tx, table.name, |tx| {
                // The first id after the upgrade to appliance-allocated ids: past every
                // id the database's identity column handed out.
                let sql = format!(
                    "SELECT GREATEST(COALESCE((SELECT MAX({c}) FROM {t}), 0) + 1,
                                     nextval(pg_get_serial_sequence('{t}', '{c}')))",
                    t = table.name,
                    c = table.columns[0]
                );
                Ok(tx.query_row(&sql, params![], |r| r.get(0))?)
            })?;
            values[0] = OwnedValue::Int(id);
            Ok(insert_image(tx, table, values, or_ignore)?.then_some(id))
        }
    }
}

/// The next value of the named sequence (`id_sequences`, MACed), `first` when it has
/// none yet.
pub(crate) fn next_id(
    tx: Conn<'_>,
    name: &str,
    first: impl FnOnce(Conn<'_>) -> Result<i64>,
) -> Result<i64> {
    let mut id = None;
    update(tx, &ID_SEQUENCES, "name = ?1", params![name], |row| {
        if !row.is("name", &name) {
            return Ok(false);
        }
        let next: i64 = row.get("next")?;
        row.set("next", &(next + 1))?;
        id = Some(next);
        Ok(true)
    })?;
    if let Some(id) = id {
        return Ok(id);
    }
    let id = first(tx)?;
    insert(
        tx,
        &ID_SEQUENCES,
        columns![("name", name), ("next", id + 1)],
    )?;
    Ok(id)
}

/// A protected row as an update reads it and changes it.
pub(crate) struct RowImage {
    table: &'static Table,
    values: Vec<OwnedValue>,
}

impl RowImage {
    fn index(&self, column: &str) -> Result<usize> {
        column_index(self.table, column)
            .ok_or_else(|| bug(format!("{} has no column {column}", self.table.name)))
    }

    pub(crate) fn get<T: FromSql>(&self, column: &str) -> Result<T> {
        let i = self.index(column)?;
        T::from_sql(value_ref(&self.values[i])).map_err(|reason| {
            StoreError::Corrupt(format!("{}.{column}: {reason}", self.table.name))
        })
    }

    pub(crate) fn set(&mut self, column: &str, value: &dyn ToParam) -> Result<()> {
        let i = self.index(column)?;
        if self.table.key.contains(&column) {
            return Err(bug(format!(
                "an update of {} changes its key {column}",
                self.table.name
            )));
        }
        self.values[i] = owned(value.to_param());
        Ok(())
    }

    /// Whether `column` holds `value` (an update re-checks its filter in Rust: the
    /// database chose which rows it returned).
    pub(crate) fn is(&self, column: &str, value: &dyn ToParam) -> bool {
        self.index(column)
            .is_ok_and(|i| self.values[i] == owned(value.to_param()))
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

/// Updates the rows of `table` that `filter` (SQL on the table's own columns, with
/// `params`) selects: each is read (and queued for its check), `change` computes its new
/// image in Rust (`false`: leave it), and the image is written with a `WHERE` on the
/// key and the MAC read. The number of rows changed.
pub(crate) fn update(
    tx: Conn<'_>,
    table: &'static Table,
    filter: &str,
    params: &[&dyn ToParam],
    mut change: impl FnMut(&mut RowImage) -> Result<bool>,
) -> Result<usize> {
    let n = table.columns.len();
    let sql = format!(
        "SELECT {} FROM {} WHERE {filter}",
        table.select(""),
        table.name
    );
    let rows = tx.query_map(&sql, params, |r| {
        r.seal(0, table)?;
        read_row(r, n)
    })?;
    let mut changed = 0;
    for (old, mac) in rows {
        let mut row = RowImage {
            table,
            values: old.clone(),
        };
        if !change(&mut row)? {
            continue;
        }
        write_update(tx, table, &old, mac.as_deref(), row.values)?;
        changed += 1;
    }
    Ok(changed)
}

/// As [`update`], for the rows whose columns equal the values given (checked again in
/// Rust on each row the database returns).
pub(crate) fn update_eq(
    tx: Conn<'_>,
    table: &'static Table,
    filter: Columns<'_>,
    mut change: impl FnMut(&mut RowImage) -> Result<bool>,
) -> Result<usize> {
    let sql: Vec<String> = filter
        .iter()
        .enumerate()
        .map(|(i, (c, _))| format!("{c} = ?{}", i + 1))
        .collect();
    let params: Vec<&dyn ToParam> = filter.iter().map(|(_, v)| *v).collect();
    update(tx, table, &sql.join(" AND "), &params, |row| {
        if !filter.iter().all(|(c, v)| row.is(c, *v)) {
            return Ok(false);
        }
        change(row)
    })
}

fn write_update(
    tx: Conn<'_>,
    table: &'static Table,
    old: &[OwnedValue],
    old_mac: Option<&[u8]>,
    new: Vec<OwnedValue>,
) -> Result<()> {
    let n = table.columns.len();
    let mut sql = format!("UPDATE {} SET ", table.name);
    for (i, c) in table.columns.iter().enumerate() {
        sql.push_str(&format!("{c} = ?{}, ", i + 1));
    }
    sql.push_str("row_mac = NULL WHERE ");
    let mut bound: Vec<&dyn ToParam> = new.iter().map(|v| v as &dyn ToParam).collect();
    for k in table.key {
        let i = column_index(table, k).unwrap_or(0);
        bound.push(&old[i]);
        sql.push_str(&format!("{k} = ?{} AND ", bound.len()));
    }
    bound.push(&old_mac);
    sql.push_str(&format!("row_mac IS NOT DISTINCT FROM ?{}", bound.len()));
    debug_assert_eq!(bound.len(), n + table.key.len() + 1);
    if tx.execute(&sql, &bound)? != 1 {
        return Err(StoreError::Conflict(format!(
            "a row of {} ({}) changed while this write used it; nothing was written",
            table.name,
            describe_key(table, old)
        )));
    }
    if let Some(checks) = tx.checks() {
        checks.wrote(table, new);
    }
    Ok(())
}

/// Deletes the rows of `table` that `filter` selects; each row removed is checked (a
/// delete never launders a tampered row). The number deleted.
pub(crate) fn delete(
    tx: Conn<'_>,
    table: &'static Table,
    filter: &str,
    params: &[&dyn ToParam],
) -> Result<usize> {
    let rows = delete_returning(tx, table, filter, params)?;
    let count = rows.len();
    if let Some(checks) = tx.checks() {
        for (values, mac) in rows {
            checks.removed(table, values, mac);
        }
    }
    Ok(count)
}

/// A row's data columns and its stored MAC (`None`: NULL).
type StoredRow = (Vec<OwnedValue>, Option<Vec<u8>>);

/// Deletes the rows of `table` that `filter` selects, and answers them with their MACs.
fn delete_returning(
    tx: Conn<'_>,
    table: &'static Table,
    filter: &str,
    params: &[&dyn ToParam],
) -> Result<Vec<StoredRow>> {
    let n = table.columns.len();
    let sql = format!(
        "DELETE FROM {} WHERE {filter} RETURNING {}",
        table.name,
        table.select("")
    );
    Ok(tx.query_map(&sql, params, |r| read_row(r, n))?)
}

/// Deletes the rows of `table` that `filter` selects without checking them: rows the
/// appliance has no use for any more whatever they hold (expired ones), so that one
/// tampered row cannot block every later write that prunes. The number deleted.
pub(crate) fn prune(
    tx: Conn<'_>,
    table: &'static Table,
    filter: &str,
    params: &[&dyn ToParam],
) -> Result<usize> {
    let rows = delete_returning(tx, table, filter, params)?;
    let count = rows.len();
    if let Some(checks) = tx.checks() {
        for (values, _) in rows {
            checks.forget(table, &values);
        }
    }
    Ok(count)
}

/// Whether a write failed on a `UNIQUE` or primary key constraint.
pub(crate) fn is_unique_violation(err: &StoreError) -> bool {
    matches!(err, StoreError::Database(e) if e.is_unique_violation())
}

/// Refused rows, rollbacks and foreign database objects, for `/health`, metrics and the
/// log.
#[derive(Debug, Default)]
pub struct IntegrityReport {
    failures: AtomicU64,
    last: Mutex<Option<IntegrityFailure>>,
    rollbacks: AtomicU64,
    last_rollback: Mutex<Option<Rollback>>,
    foreign: Mutex<Option<Vec<String>>>,
    epoch: AtomicU64,
}

/// The last refused row.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IntegrityFailure {
    pub table: String,
    /// The row's key columns (ids; byte keys shortened to 8 bytes of hex).
    pub row: String,
    pub at_unix: i64,
}

/// The last time the database showed an older write epoch than this replica had seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Rollback {
    /// The epoch the database showed.
    pub found: u64,
    /// The highest this replica had seen.
    pub highest: u64,
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

    /// Reads and write batches refused because the database went back in time.
    pub fn rollbacks(&self) -> u64 {
        self.rollbacks.load(Ordering::Relaxed)
    }

    pub fn last_rollback(&self) -> Option<Rollback> {
        *self
            .last_rollback
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The highest write epoch this replica has seen.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// Triggers, rules, functions and event triggers in the database that no migration
    /// created (`None`: not checked yet, or the last check could not run).
    pub fn foreign_objects(&self) -> Option<Vec<String>> {
        self.foreign
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

    fn record_rollback(&self, found: u64, highest: u64) {
        self.rollbacks.fetch_add(1, Ordering::Relaxed);
        tracing::error!(
            found,
            highest,
            "store integrity: the database shows an older write epoch than this replica has seen (rolled back); refused"
        );
        *self
            .last_rollback
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Rollback {
            found,
            highest,
            at_unix: super::now_unix(),
        });
    }

    fn record_foreign(&self, objects: Option<Vec<String>>) {
        if let Some(list) = &objects
            && !list.is_empty()
        {
            tracing::error!(
                objects = %list.join(", "),
                "store integrity: the database holds triggers, rules or functions the migrations did not create"
            );
        }
        *self.foreign.lock().unwrap_or_else(PoisonError::into_inner) = objects;
    }
}

/// The epoch step a write batch will commit: checked when the batch begins, written
/// before it commits.
pub(super) struct EpochStep {
    old: u64,
    old_mac: Option<Vec<u8>>,
    new: u64,
    tag: [u8; 32],
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

    /// Checks what a read saw, together with the database's write epoch (on `conn`,
    /// outside the read's own snapshot, so a commit this replica saw is visible to it).
    pub(super) fn verify(&self, conn: Conn<'_>, checks: &Checks) -> Result<()> {
        let mut pending = checks.take();
        if pending.is_empty() {
            return Ok(());
        }
        let highest = self.report.epoch();
        let epoch = read_epoch(conn)?;
        let mut inputs: Vec<Vec<u8>> = pending
            .iter_mut()
            .map(|c| std::mem::take(&mut c.input))
            .collect();
        let mut epoch_check = epoch.check();
        if let Some(check) = &mut epoch_check {
            inputs.push(std::mem::take(&mut check.input));
        }
        let tags = self.tags(inputs)?;
        for (check, tag) in pending.iter().zip(&tags) {
            self.compare(check, tag)?;
        }
        if let Some(check) = &epoch_check {
            self.compare(check, &tags[pending.len()])?;
        }
        self.accept_epoch(epoch.epoch, highest)?;
        Ok(())
    }

    /// Refuses an epoch below `highest` (read before the epoch was); else remembers it.
    fn accept_epoch(&self, found: u64, highest: u64) -> Result<()> {
        if found < highest {
            self.report.record_rollback(found, highest);
            return Err(StoreError::Unavailable(format!(
                "the database was rolled back (write epoch {found}, this replica has seen {highest}); refusing it"
            )));
        }
        self.report.epoch.fetch_max(found, Ordering::Relaxed);
        Ok(())
    }

    /// The periodic check of the database's write epoch (nothing before the row keys are
    /// available).
    pub(super) fn check_epoch(&self, conn: Conn<'_>) -> Result<u64> {
        if self.authenticator.get().is_none() {
            return Ok(self.report.epoch());
        }
        let highest = self.report.epoch();
        let epoch = read_epoch(conn)?;
        if let Some(mut check) = epoch.check() {
            let tags = self.tags(vec![std::mem::take(&mut check.input)])?;
            self.compare(&check, &tags[0])?;
        }
        self.accept_epoch(epoch.epoch, highest)?;
        Ok(epoch.epoch)
    }

    /// The start of a write batch (under the replicas' write lock): the database's epoch
    /// must not be below what this replica has seen; the next epoch's MAC is computed in
    /// the same keyservice round trip.
    ///
    /// `None` before the row keys are available: such a batch cannot touch a protected
    /// row (every job that does is refused when it is sealed), only the tables the root's
    /// hand-over uses, so it leaves the epoch alone.
    pub(super) fn begin_batch(&self, conn: Conn<'_>) -> Result<Option<EpochStep>> {
        if self.authenticator.get().is_none() {
            return Ok(None);
        }
        let highest = self.report.epoch();
        let epoch = read_epoch(conn)?;
        let new = epoch.epoch + 1;
        let next = vec![
            OwnedValue::Int(1),
            OwnedValue::Int(to_i64(new)?),
            epoch.mac.clone().map_or(OwnedValue::Null, OwnedValue::Blob),
        ];
        let mut inputs = vec![encode(WRITE_EPOCH.name, &next)];
        let mut epoch_check = epoch.check();
        if let Some(check) = &mut epoch_check {
            inputs.push(std::mem::take(&mut check.input));
        }
        let tags = self.tags(inputs)?;
        if let Some(check) = &epoch_check {
            self.compare(check, &tags[1])?;
        }
        self.accept_epoch(epoch.epoch, highest)?;
        Ok(Some(EpochStep {
            old: epoch.epoch,
            old_mac: epoch.mac,
            new,
            tag: tags[0],
        }))
    }

    /// Writes the batch's epoch step (just before the commit).
    pub(super) fn finish_batch(&self, conn: Conn<'_>, step: &EpochStep) -> Result<()> {
        let changed = conn.execute(
            "UPDATE write_epoch SET epoch = ?1, prev_mac = ?2, row_mac = ?3
             WHERE id = 1 AND epoch = ?4 AND row_mac IS NOT DISTINCT FROM ?2",
            params![to_i64(step.new)?, step.old_mac, step.tag, to_i64(step.old)?],
        )?;
        if changed != 1 {
            return Err(StoreError::Unavailable(
                "the write epoch changed during a write batch; nothing was kept".into(),
            ));
        }
        Ok(())
    }

    /// The batch committed: its epoch is the highest this replica has seen.
    pub(super) fn committed(&self, step: &EpochStep) {
        self.report.epoch.fetch_max(step.new, Ordering::Relaxed);
    }

    /// The end of a write job (on the writer's connection, inside the job's savepoint):
    /// checks the rows the job read and removed, then writes the MACs of the images the
    /// job chose, by key. One keyservice round trip.
    pub(super) fn seal(&self, conn: Conn<'_>, checks: &Checks) -> Result<()> {
        let mut verify = checks.take();
        let mut written = checks.take_written();
        if verify.is_empty() && written.is_empty() {
            return Ok(());
        }
        let mut inputs: Vec<Vec<u8>> = verify
            .iter_mut()
            .map(|c| std::mem::take(&mut c.input))
            .collect();
        inputs.extend(written.iter_mut().map(|(t, v)| mac_input(t, v)));
        let tags = self.tags(inputs)?;
        let (checked, sealed) = tags.split_at(verify.len());
        for (check, tag) in verify.iter().zip(checked) {
            self.compare(check, tag)?;
        }
        for ((table, values), tag) in written.iter().zip(sealed) {
            let mut sql = format!(
                "UPDATE {} SET row_mac = ?1 WHERE row_mac IS NULL",
                table.name
            );
            let mut bound: Vec<&dyn ToParam> = vec![tag];
            for k in table.key {
                let idx = column_index(table, k).unwrap_or(0);
                bound.push(&values[idx]);
                sql.push_str(&format!(" AND {k} = ?{}", bound.len()));
            }
            if conn.execute(&sql, &bound)? != 1 {
                return Err(StoreError::Unavailable(format!(
                    "sealing {}: the row {} this write made is gone; nothing was kept",
                    table.name,
                    describe_key(table, values)
                )));
            }
        }
        Ok(())
    }
}

fn to_i64(n: u64) -> Result<i64> {
    i64::try_from(n).map_err(|_| StoreError::Corrupt("write epoch out of range".into()))
}

/// The `write_epoch` row as the database shows it.
struct Epoch {
    epoch: u64,
    prev: Option<Vec<u8>>,
    mac: Option<Vec<u8>>,
}

impl Epoch {
    /// Its check; none for the row migration 14 created (epoch 0, no MAC yet: a
    /// database reset to it shows epoch 0, below anything a replica has seen).
    fn check(&self) -> Option<Check> {
        if self.epoch == 0 && self.mac.is_none() && self.prev.is_none() {
            return None;
        }
        let values = vec![
            OwnedValue::Int(1),
            OwnedValue::Int(i64::try_from(self.epoch).unwrap_or(i64::MAX)),
            self.prev.clone().map_or(OwnedValue::Null, OwnedValue::Blob),
        ];
        Some(Check::new(&WRITE_EPOCH, values, self.mac.clone()))
    }
}

fn read_epoch(conn: Conn<'_>) -> Result<Epoch> {
    let row = conn.query_opt(
        "SELECT epoch, prev_mac, row_mac FROM write_epoch WHERE id = 1",
        params![],
        |r| Ok((r.get::<u64>(0)?, r.get(1)?, r.get(2)?)),
    )?;
    match row {
        Some((epoch, prev, mac)) => Ok(Epoch { epoch, prev, mac }),
        None => Err(StoreError::Tampered {
            table: WRITE_EPOCH.name,
            row: "id=1 (missing)".into(),
        }),
    }
}

/// The triggers, rules, functions and event triggers of the database (outside the
/// system schemas and extensions), by kind and name. Migration 14 removed the only ones
/// the migrations ever created; the change feed is a `NOTIFY` in the writer's commit, not
/// a trigger. So every one listed is foreign.
pub(super) fn foreign_objects(conn: Conn<'_>) -> Result<Vec<String>> {
    // The database decides how many there are: list at most MAX_FOREIGN_LISTED, and say
    // when there were more, so a hostile catalogue cannot grow every replica's memory
    // and `/health` body.
    let mut listed: Vec<String> = conn.query_map(
        "SELECT 'trigger ' || n.nspname || '.' || c.relname || '.' || t.tgname
           FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE NOT t.tgisinternal
         UNION ALL
         SELECT 'rule ' || n.nspname || '.' || c.relname || '.' || r.rulename
           FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class
           JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE r.rulename <> '_RETURN'
            AND n.nspname NOT IN ('pg_catalog', 'information_schema')
         UNION ALL
         SELECT 'function ' || n.nspname || '.' || p.proname
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
          WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
            AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'
            AND NOT EXISTS (SELECT 1 FROM pg_depend d
                             WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                               AND d.deptype = 'e')
         UNION ALL
         SELECT 'event trigger ' || e.evtname FROM pg_event_trigger e
         ORDER BY 1
         LIMIT ?1 + 0",
        params![MAX_FOREIGN_LISTED as i64 + 1],
        |r| r.get(0),
    )?;
    if listed.len() > MAX_FOREIGN_LISTED {
        listed.truncate(MAX_FOREIGN_LISTED);
        listed.push("… and more (not listed)".to_owned());
    }
    Ok(listed)
}

/// How many foreign objects the drift check names at most.
pub(super) const MAX_FOREIGN_LISTED: usize = 64;

impl Integrity {
    /// One drift check: lists foreign objects (reported) and checks the write epoch.
    pub(super) fn watch(&self, conn: Conn<'_>) {
        match foreign_objects(conn) {
            Ok(list) => self.report.record_foreign(Some(list)),
            Err(err) => {
                tracing::warn!(error = %err, "store integrity: cannot list the database's triggers and functions");
                self.report.record_foreign(None);
            }
        }
        if let Err(err) = self.check_epoch(conn) {
            tracing::warn!(error = %err, "store integrity: the periodic write-epoch check failed");
        }
    }
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
CREATE INDEX {t}_marked ON {t} (row_mac) WHERE octet_length(row_mac) = 16;
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
        let m = crate::migrations::migration(10);
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

    /// A ledger row written before migration 15 (no request id, no action CID) is
    /// encoded as it was then, so its MAC still verifies; a row with either is encoded
    /// with both, and clearing them (or moving one into the other) changes the encoding.
    #[test]
    fn columns_added_later_keep_the_macs_of_older_rows() {
        let base = vec![
            OwnedValue::Int(7),
            OwnedValue::Int(1),
            OwnedValue::Text("charge".into()),
            OwnedValue::Int(-1),
            OwnedValue::Int(99),
            OwnedValue::Null,
            OwnedValue::Text("add_group".into()),
            OwnedValue::Int(1_700_000_000),
        ];
        assert_eq!(CREDIT_LEDGER.added_later, 2);
        assert_eq!(CREDIT_LEDGER.columns.len(), base.len() + 2);
        let with = |request: OwnedValue, cid: OwnedValue| {
            let mut row = base.clone();
            row.extend([request, cid]);
            mac_input(&CREDIT_LEDGER, &row)
        };
        let before_15 = encode("credit_ledger", &base);
        assert_eq!(with(OwnedValue::Null, OwnedValue::Null), before_15);
        let request = with(OwnedValue::Text("r-1".into()), OwnedValue::Null);
        let cid = with(OwnedValue::Null, OwnedValue::Text("r-1".into()));
        let both = with(
            OwnedValue::Text("r-1".into()),
            OwnedValue::Text("Qm".into()),
        );
        for (i, a) in [&before_15, &request, &cid, &both].iter().enumerate() {
            for b in [&before_15, &request, &cid, &both].iter().skip(i + 1) {
                assert_ne!(a, b);
            }
        }
        assert!(request.starts_with(&before_15[..before_15.len()]));
        // Tables without added columns encode every column, NULL or not.
        let mut row = vec![OwnedValue::Int(1), OwnedValue::Null];
        assert_eq!(
            mac_input(&GROUP_WALLETS, &row),
            encode("group_wallets", &row)
        );
        row[1] = OwnedValue::Int(2);
        assert_eq!(
            mac_input(&GROUP_WALLETS, &row),
            encode("group_wallets", &row)
        );
    }

    use crate::testing::{TestDb, identity, new_account};
    use crate::{Charge, NewUsageKey, Page, ResolvedKey, Store};
    use appliance_domain::api_keys::KeyHash;
    use appliance_domain::authz::{GroupSet, Permissions};

    /// A PostgreSQL store with an account (seed 1) holding a usage key and a wallet.
    async fn populated() -> Option<(TestDb, Store, crate::AccountId)> {
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
        tokio::time::sleep(crate::key_cache::REPLICA_TTL).await;
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
            .wallet(account, crate::WalletRef::Pkp(identity(7).pkp_id))
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
                crate::GroupSpec {
                    name: "g".into(),
                    description: String::new(),
                    wallets: crate::Permitted::Only(vec![]),
                    actions: crate::Permitted::All,
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
                .execution_scope(c, vec![group], crate::CidHash([5; 32]))
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
        tokio::time::sleep(crate::key_cache::REPLICA_TTL).await;
        assert_tampered(store.resolve_key(KeyHash([9; 32])).await, "usage_keys");
        store
            .credit_payment(account, "pi_1".into(), 100, None)
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
        tokio::time::sleep(crate::key_cache::REPLICA_TTL).await;
        assert_eq!(store.resolve_key(KeyHash([9; 32])).await.unwrap(), None);
        let _ = account;
    }

    /// The attack: a trigger the database's operator adds moves the victim's
    /// wallet to the attacker's account whenever the appliance writes an accepted
    /// signature (a write anyone can cause). The appliance never MACs the moved row:
    /// the attacker's reads and uses of it are refused and counted, and the drift check
    /// names the trigger.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_foreign_trigger_cannot_hand_a_wallet_to_another_account() {
        let Some((db, store, victim)) = populated().await else {
            return;
        };
        let attacker = new_account(&store, 2).await;
        assert_eq!(store.check_database().await.unwrap(), Some(vec![]));
        db.behind_the_back(&format!(
            "CREATE FUNCTION steal() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 UPDATE wallets SET account_id = {attacker} WHERE account_id = {victim};
                 RETURN NEW;
             END $$;
             CREATE TRIGGER steal AFTER INSERT ON accepted_signatures
                 FOR EACH ROW EXECUTE FUNCTION steal();",
            attacker = attacker.0,
            victim = victim.0
        ))
        .await;
        let report = store.integrity_report().unwrap();
        let before = report.failures();
        // Any write of an accepted signature fires it (here the one `X-Wallet-Auth` and
        // `create_wallet_with_signature` make).
        assert!(
            store
                .accept_signature(crate::testing::signature(1, crate::testing::now()))
                .await
                .unwrap()
        );
        let moved = crate::WalletRef::Pkp(identity(7).pkp_id);
        assert_tampered(store.wallet(attacker, moved).await, "wallets");
        assert_tampered(
            store
                .list_wallets(
                    attacker,
                    Page {
                        number: 0,
                        size: 10,
                    },
                )
                .await,
            "wallets",
        );
        // Nor can a later write of the attacker's seal it for him.
        assert!(
            store
                .create_wallet(
                    attacker,
                    identity(8),
                    "w2".into(),
                    String::new(),
                    Charge::free()
                )
                .await
                .is_ok()
        );
        assert_tampered(store.wallet(attacker, moved).await, "wallets");
        assert!(report.failures() >= before + 3, "{}", report.failures());
        assert_eq!(report.last().unwrap().table, "wallets");
        let foreign = store.check_database().await.unwrap().unwrap();
        assert!(
            foreign.contains(&"trigger public.accepted_signatures.steal".to_owned())
                && foreign.contains(&"function public.steal".to_owned()),
            "{foreign:?}"
        );
        assert_eq!(report.foreign_objects(), Some(foreign));
    }

    /// The drift list is bounded whatever the database holds: past the bound it ends
    /// with a line saying there are more.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_drift_list_is_bounded() {
        let Some((db, store, _)) = populated().await else {
            return;
        };
        let many: String = (0..MAX_FOREIGN_LISTED + 5)
            .map(|i| format!("CREATE FUNCTION f{i:03}() RETURNS int LANGUAGE sql AS 'SELECT 1';"))
            .collect();
        db.behind_the_back(&many).await;
        let foreign = store.check_database().await.unwrap().unwrap();
        assert_eq!(foreign.len(), MAX_FOREIGN_LISTED + 1, "{foreign:?}");
        assert_eq!(foreign[0], "function public.f000");
        assert_eq!(foreign[MAX_FOREIGN_LISTED], "… and more (not listed)");
    }

    /// The second path: database code that runs when the appliance writes (a
    /// replaced appliance function was one; the appliance has none left to replace, so
    /// here it is a function and a trigger of the operator's) inflates a balance as it is
    /// written. The inflated balance never gets a MAC, is never charged against, and the
    /// refusal is counted.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn database_code_cannot_inflate_a_balance() {
        let Some((db, store, account)) = populated().await else {
            return;
        };
        // Nothing of the appliance's runs in the database.
        assert_eq!(store.check_database().await.unwrap(), Some(vec![]));
        store
            .credit_payment(account, "pi_1".into(), 100, None)
            .await
            .unwrap();
        db.behind_the_back(
            "CREATE FUNCTION inflate_balance() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 NEW.balance_cents := 1000000;
                 RETURN NEW;
             END $$;
             CREATE TRIGGER inflate BEFORE INSERT OR UPDATE ON credit_balances
                 FOR EACH ROW EXECUTE FUNCTION inflate_balance();",
        )
        .await;
        let report = store.integrity_report().unwrap();
        let before = report.failures();
        // The appliance decides 95; the database stores a million under a MAC of 95.
        assert_eq!(store.charge(account, 5, "x").await.unwrap(), 95);
        assert_tampered(store.balance(account).await, "credit_balances");
        assert_tampered(store.charge(account, 5000, "x").await, "credit_balances");
        assert!(report.failures() >= before + 2);
        let foreign = store.check_database().await.unwrap().unwrap();
        assert!(
            foreign.contains(&"trigger public.credit_balances.inflate".to_owned())
                && foreign.contains(&"function public.inflate_balance".to_owned()),
            "{foreign:?}"
        );
    }

    /// A PostgreSQL database at version 14 whose ledger row was MACed then (over the
    /// columns it had) moves to version 15 and the row still verifies; a row written
    /// since, with its request and action, is refused once either is changed or cleared
    /// behind the back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ledger_rows_keep_their_macs_across_migration_15() {
        use crate::{LedgerRange, RowAuthenticator as _};
        let Some(db) = TestDb::postgres() else {
            return;
        };
        let mut schema = String::from(
            "CREATE TABLE schema_version (
                 one     SMALLINT PRIMARY KEY DEFAULT 1 CHECK (one = 1),
                 version BIGINT   NOT NULL
             );
             INSERT INTO schema_version (one, version) VALUES (1, 14);",
        );
        for version in 1..=14 {
            schema.push_str(crate::migrations::migration(version).postgres);
        }
        db.behind_the_back(&schema).await;
        // The row as version 14's appliance wrote it: its MAC over the columns it had.
        let old = vec![
            OwnedValue::Int(1),
            OwnedValue::Int(1),
            OwnedValue::Text("top_up".into()),
            OwnedValue::Int(500),
            OwnedValue::Int(500),
            OwnedValue::Text("pi_old".into()),
            OwnedValue::Text("card payment".into()),
            OwnedValue::Int(100),
        ];
        let tag = crate::testing::LocalRowKey::new(b"test")
            .tags(&[encode("credit_ledger", &old)])
            .unwrap()[0];
        db.behind_the_back(&format!(
            "INSERT INTO accounts (id, api_key_hash, name, wallet_address, created_at)
                 VALUES (1, '\\x{}', 'old', '0x', 1);
             INSERT INTO credit_ledger (id, account_id, kind, amount_cents, balance_after,
                 payment_intent_id, operation, created_at, row_mac)
                 VALUES (1, 1, 'top_up', 500, 500, 'pi_old', 'card payment', 100, '\\x{}');",
            hex::encode([1u8; 32]),
            hex::encode(tag)
        ))
        .await;
        let store = db.open().await;
        let account = crate::AccountId(1);
        let page = Page {
            number: 0,
            size: 10,
        };
        let usage =
            |store: Store| async move { store.usage(account, LedgerRange::default(), page).await };
        let rows = usage(store.clone()).await.unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].payment_intent_id.as_deref(), Some("pi_old"));
        assert_eq!(
            (rows[0].request_id.as_ref(), rows[0].action_cid.as_ref()),
            (None, None)
        );

        // A row with a request and an action is MACed over them.
        db.behind_the_back("DELETE FROM credit_ledger").await;
        let b = new_account(&store, 2).await;
        store
            .credit_payment(b, "pi_b".into(), 100, Some("req-pay".into()))
            .await
            .unwrap();
        store
            .charge_at_most(
                b,
                Charge::new(2, "lit_action")
                    .for_request(Some("req-run".into()))
                    .for_action("QmRun"),
            )
            .await
            .unwrap();
        let rows = store.usage(b, LedgerRange::default(), page).await.unwrap();
        assert_eq!(rows[0].request_id.as_deref(), Some("req-run"));
        for edit in [
            "UPDATE credit_ledger SET request_id = NULL, action_cid = NULL WHERE kind = 'charge'",
            "UPDATE credit_ledger SET action_cid = 'QmOther' WHERE kind = 'charge'",
            "UPDATE credit_ledger SET request_id = 'req-forged' WHERE kind = 'top_up'",
        ] {
            let db2 = TestDb::postgres().unwrap();
            let store2 = db2.open().await;
            let c = new_account(&store2, 3).await;
            store2
                .credit_payment(c, "pi_c".into(), 100, Some("req-pay".into()))
                .await
                .unwrap();
            store2
                .charge_at_most(
                    c,
                    Charge::new(2, "lit_action")
                        .for_request(Some("req-run".into()))
                        .for_action("QmRun"),
                )
                .await
                .unwrap();
            assert_eq!(
                store2
                    .usage(c, LedgerRange::default(), page)
                    .await
                    .unwrap()
                    .len(),
                2
            );
            db2.behind_the_back(edit).await;
            assert_tampered(
                store2.usage(c, LedgerRange::default(), page).await,
                "credit_ledger",
            );
        }
    }

    /// The tables a rollback test snapshots and restores (every table a write below
    /// touches, and the epoch).
    const ROLLED_BACK: [&str; 8] = [
        "usage_keys",
        "credit_ledger",
        "credit_balances",
        "chain_outbox",
        "accepted_signatures",
        "id_sequences",
        "wallets",
        "write_epoch",
    ];

    /// A database put back to an older, correctly MACed copy under a running replica:
    /// the revoked key does not come back and the spent credit cannot be spent again;
    /// every read and write is refused (503), logged and counted.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_database_rolled_back_under_a_running_replica_is_refused() {
        let Some((db, store, account)) = populated().await else {
            return;
        };
        store
            .credit_payment(account, "pi_1".into(), 100, None)
            .await
            .unwrap();
        let mut snapshot = String::from("CREATE SCHEMA snap;");
        for t in ROLLED_BACK {
            snapshot.push_str(&format!("CREATE TABLE snap.{t} AS SELECT * FROM {t};"));
        }
        db.behind_the_back(&snapshot).await;
        // Revoke the key and spend the credit.
        store
            .remove_usage_key(account, KeyHash([9; 32]), Charge::free())
            .await
            .unwrap();
        assert_eq!(store.charge(account, 100, "x").await.unwrap(), 0);
        let report = store.integrity_report().unwrap();
        assert_eq!(report.rollbacks(), 0);
        let seen = report.epoch();
        assert!(seen >= 3, "{seen}");
        let mut restore = String::from("BEGIN;");
        for t in ROLLED_BACK {
            restore.push_str(&format!(
                "DELETE FROM {t}; INSERT INTO {t} SELECT * FROM snap.{t};"
            ));
        }
        restore.push_str("COMMIT;");
        db.behind_the_back(&restore).await;
        tokio::time::sleep(crate::key_cache::REPLICA_TTL).await;
        assert_unavailable(store.resolve_key(KeyHash([9; 32])).await);
        assert_unavailable(store.balance(account).await);
        assert_unavailable(store.charge(account, 50, "x").await);
        assert_unavailable(
            store
                .add_usage_key(
                    account,
                    NewUsageKey {
                        key_hash: KeyHash([10; 32]),
                        name: "k2".into(),
                        description: String::new(),
                        permissions: Permissions::default(),
                    },
                    Charge::free(),
                )
                .await,
        );
        // The periodic check sees it too, without any request.
        let _ = store.check_database().await;
        assert!(report.rollbacks() >= 5, "{}", report.rollbacks());
        let last = report.last_rollback().unwrap();
        assert!(
            last.found < last.highest && last.highest == seen,
            "{last:?}"
        );
        // A replica that starts afterwards has seen nothing and cannot tell
        // (docs/threat-model.md §7): the limit of the defence, stated here.
        let fresh = db.open().await;
        assert!(matches!(
            fresh.resolve_key(KeyHash([9; 32])).await,
            Ok(Some(_))
        ));
    }

    fn assert_unavailable<T: std::fmt::Debug>(out: Result<T>) {
        match out {
            Err(StoreError::Unavailable(msg)) => assert!(msg.contains("rolled back"), "{msg}"),
            other => panic!("expected the rolled-back database to be refused, got {other:?}"),
        }
    }

    /// Every committed batch advances the epoch, and the epoch row's MAC chains.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_committed_batch_advances_the_write_epoch() {
        let Some((db, store, account)) = populated().await else {
            return;
        };
        let report = store.integrity_report().unwrap();
        let before = report.epoch();
        store
            .credit_payment(account, "pi_1".into(), 100, None)
            .await
            .unwrap();
        assert_eq!(report.epoch(), before + 1);
        // The epoch row edited behind the back (moved forward) is refused like any row.
        db.behind_the_back("UPDATE write_epoch SET epoch = epoch + 10")
            .await;
        match store.charge(account, 1, "x").await {
            Err(err) => assert!(err.to_string().contains("write_epoch"), "{err}"),
            Ok(balance) => panic!("charged against an edited epoch: {balance}"),
        }
        assert_eq!(report.last().unwrap().table, "write_epoch");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_store_with_another_key_refuses_every_row() {
        let Some((db, _store, account)) = populated().await else {
            return;
        };
        let url = db.postgres_url().unwrap().to_owned();
        let other = Store::open_postgres(crate::PgOptions::new(url))
            .await
            .unwrap();
        other.set_row_authenticator(std::sync::Arc::new(crate::testing::LocalRowKey::new(
            b"another root",
        )));
        assert_tampered(other.account(account).await, "accounts");
        // Without a key at all, protected rows are not served (503), never unchecked.
        let keyless =
            Store::open_postgres(crate::PgOptions::new(db.postgres_url().unwrap().to_owned()))
                .await
                .unwrap();
        assert!(matches!(
            keyless.account(account).await,
            Err(StoreError::Unavailable(_))
        ));
    }
}
