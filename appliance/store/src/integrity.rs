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
//! in the job's [`Checks`]; when the job is kept they join its batch's ([`BatchRows`]),
//! and when the batch ends [`Integrity::batch_end`] asks keyservice, in one round trip,
//! to check every row the batch's kept jobs read (a job whose row fails is refused, and
//! the batch is not committed) and for the MACs of every image they wrote, which one
//! guarded statement writes by key just before the commit. What the database stores is
//! irrelevant to the MAC: if a trigger changed a row (or moved another one), the stored
//! values no longer match the MAC of the image the appliance chose, and every later read
//! refuses the row. A row read back in the batch that wrote it must equal the image
//! written (the batch's own rows have no MAC until the batch ends).
//!
//! **Ids.** Row ids are allocated in the appliance from `id_sequences` (itself MACed;
//! a write batch reads each sequence once, hands its ids out in memory and writes it back
//! sealed when it ends) and bound like any other column, never taken from the database
//! (PostgreSQL; SQLite, inside the TEE, keeps its `AUTOINCREMENT` ids).
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

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

pub(crate) use super::sql::Table;
use super::sql::{
    Conn, Engine, FromSql, OwnedValue, Param, Row, RowChecks, SqlError, SqlResult, TextRows,
    ToParam, ValueRef, params,
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
/// and the row images a write job wrote, to seal when its batch ends.
pub(crate) struct Checks<'b> {
    pending: RefCell<Vec<Check>>,
    /// The images this job wrote, by key (`key_of`).
    written: RefCell<HashMap<Vec<u8>, Written>>,
    /// Keys of rows written earlier in the batch that this job deleted.
    removed: RefCell<HashSet<Vec<u8>>>,
    /// The id sequences this job took ids from, as they now stand.
    sequences: RefCell<HashMap<String, Sequence>>,
    /// This job wrote or deleted a row of [`KEY_TABLES`].
    keys: Cell<bool>,
    /// The inserts this job deferred ([`insert_deferred`]), not yet sent.
    deferred: RefCell<Vec<String>>,
    /// Reads of key tables this job made (`RowChecks::remember`).
    recalled: RefCell<HashMap<String, Vec<OwnedValue>>>,
    /// What the jobs before this one in the batch wrote (a write job's only).
    batch: Option<&'b BatchRows>,
    /// This job's place in its batch.
    place: usize,
}

/// An id sequence a write batch hands ids out of: its row as the batch read it (`next`
/// and MAC; `None`: no row yet), and the next id to give. Written back, sealed, when the
/// batch ends: one statement for every id the batch took, not two per id.
#[derive(Clone)]
struct Sequence {
    stored: Option<StoredSequence>,
    next: i64,
}

/// An `id_sequences` row as stored: its `next` and its MAC.
type StoredSequence = (i64, Option<Vec<u8>>);

/// A table's row images to seal, each with its MAC.
type ToSeal<'a> = (&'static Table, Vec<(&'a [OwnedValue], &'a [u8; 32])>);

/// A row image a write wrote: its table and its values.
type Written = (&'static Table, Vec<OwnedValue>);

/// The row images the kept jobs of one write batch have written so far, by key: they
/// have no MAC until the batch ends ([`Integrity::batch_end`] seals them all in one
/// statement), so a later job of the batch that reads one accepts it only if it is
/// exactly the image written.
#[derive(Default)]
pub(crate) struct BatchRows {
    written: RefCell<HashMap<Vec<u8>, Written>>,
    sequences: RefCell<HashMap<String, Sequence>>,
    /// A kept job wrote or deleted a row of [`KEY_TABLES`].
    keys: Cell<bool>,
    /// The protected rows the kept jobs read or removed, by job (its place in the
    /// batch), to check when the batch ends.
    read: RefCell<Vec<(usize, Check)>>,
    /// The jobs whose rows failed that check.
    tampered: RefCell<Vec<usize>>,
    /// The `id_sequences` rows as the batch's first round trip showed them (name →
    /// next and MAC), not yet checked: a job that takes an id from one checks it.
    prefetched: RefCell<HashMap<String, StoredSequence>>,
    /// What kept jobs read of the key tables (`RowChecks::remember`), while no kept job
    /// has changed them: under the replicas' write lock nothing else can.
    recalled: RefCell<HashMap<String, Vec<OwnedValue>>>,
    /// What the database has not been sent yet: the end of the savepoints of the jobs
    /// so far (their deferred rows, `RELEASE`, the next `SAVEPOINT`; or `ROLLBACK TO`),
    /// sent before the next statement any job runs, or with the batch's end. Jobs that
    /// run no statement of their own (most, once the batch holds the ids and the
    /// account) cost no round trip at all.
    pending: RefCell<Vec<String>>,
    /// `pending` was being sent when that failed: which job's rows the database refused
    /// cannot be told, so the batch is not committed.
    in_flight: Cell<bool>,
    chain_failed: RefCell<Option<String>>,
}

/// The tables API keys resolve from (`accounts::resolve`, `usage_keys::resolve`): a
/// batch that changes none of their rows leaves every resolved key as it was, so the
/// replicas keep their key caches (`store::key_cache`). Every write of these tables goes
/// through this module's typed calls, which is what makes the tracking complete.
pub(crate) const KEY_TABLES: [&str; 2] = [ACCOUNTS.name, USAGE_KEYS.name];

impl BatchRows {
    /// Owes the database `sql` (see `pending`).
    pub(super) fn owe(&self, sql: impl Into<String>) {
        self.pending.borrow_mut().push(sql.into());
    }

    /// What the batch owes the database, taken.
    pub(super) fn take_owed(&self) -> Vec<String> {
        std::mem::take(&mut *self.pending.borrow_mut())
    }

    /// Why sending what the batch owed failed, if it did (the batch cannot be committed).
    pub(super) fn owed_failed(&self) -> Option<String> {
        self.chain_failed.borrow().clone()
    }

    /// Holds the `id_sequences` rows [`SEQUENCES_AS_TEXT`] showed. A row that does not
    /// parse is left out: the job that needs it reads it the ordinary way.
    pub(super) fn prefetch(&self, shown: &[Vec<Option<String>>]) {
        let mut held = self.prefetched.borrow_mut();
        for row in shown {
            let (Some(Some(name)), Some(Some(next)), Some(mac)) =
                (row.first(), row.get(1), row.get(2))
            else {
                continue;
            };
            let Ok(next) = next.parse::<i64>() else {
                continue;
            };
            let mac = match mac.as_deref().map(hex::decode) {
                None => None,
                Some(Ok(mac)) => Some(mac),
                Some(Err(_)) => continue,
            };
            held.insert(name.clone(), (next, mac));
        }
    }

    /// Whether the job at `place` in the batch read a row that failed its check (after
    /// [`Integrity::batch_end`] refused the batch).
    pub(super) fn tampered(&self, place: usize) -> bool {
        self.tampered.borrow().contains(&place)
    }

    /// Whether a job's row failed its check (rather than the batch's epoch row).
    pub(super) fn any_tampered(&self) -> bool {
        !self.tampered.borrow().is_empty()
    }

    /// Whether a kept job of the batch wrote or deleted a row API keys resolve from.
    pub(super) fn changes_keys(&self) -> bool {
        self.keys.get()
    }

    /// The image written earlier in the batch under `key`, if any.
    fn image(&self, key: &[u8]) -> Option<Vec<OwnedValue>> {
        self.written.borrow().get(key).map(|(_, v)| v.clone())
    }
}

impl Checks<'static> {
    pub(super) fn for_read() -> Self {
        Self {
            pending: RefCell::new(Vec::new()),
            written: RefCell::new(HashMap::new()),
            removed: RefCell::new(HashSet::new()),
            sequences: RefCell::new(HashMap::new()),
            keys: Cell::new(false),
            deferred: RefCell::new(Vec::new()),
            recalled: RefCell::new(HashMap::new()),
            batch: None,
            place: 0,
        }
    }
}

impl<'b> Checks<'b> {
    /// The checks of the write job at `place` in the batch whose rows so far are
    /// `batch`.
    pub(super) fn for_write(batch: &'b BatchRows, place: usize) -> Self {
        Self {
            batch: Some(batch),
            place,
            ..Checks::for_read()
        }
    }

    fn take(&self) -> Vec<Check> {
        std::mem::take(&mut *self.pending.borrow_mut())
    }

    fn touched(&self, table: &'static Table) {
        if KEY_TABLES.contains(&table.name) {
            self.keys.set(true);
        }
    }

    /// The inserts this job deferred and has not sent yet, taken.
    pub(super) fn take_own_deferred(&self) -> Vec<String> {
        std::mem::take(&mut *self.deferred.borrow_mut())
    }

    /// The job is kept (its savepoint released): what it wrote and deleted becomes the
    /// batch's.
    pub(super) fn keep(self) {
        let Some(batch) = self.batch else {
            return;
        };
        if self.keys.get() {
            batch.keys.set(true);
            batch.recalled.borrow_mut().clear();
        } else {
            batch
                .recalled
                .borrow_mut()
                .extend(self.recalled.into_inner());
        }
        batch.read.borrow_mut().extend(
            self.pending
                .into_inner()
                .into_iter()
                .map(|check| (self.place, check)),
        );
        let mut rows = batch.written.borrow_mut();
        for key in self.removed.into_inner() {
            rows.remove(&key);
        }
        rows.extend(self.written.into_inner());
        batch
            .sequences
            .borrow_mut()
            .extend(self.sequences.into_inner());
    }

    /// What this job wrote before the batch ends: the image this job wrote, or else the
    /// one an earlier job of the batch wrote (unless this job deleted it). `None`: the
    /// row is not the batch's own, its stored MAC decides.
    fn own_image(&self, key: &[u8]) -> Option<Option<Vec<OwnedValue>>> {
        if let Some((_, image)) = self.written.borrow().get(key) {
            return Some(Some(image.clone()));
        }
        if self.removed.borrow().contains(key) {
            // Deleted by this job: the database has no business showing it.
            return Some(None);
        }
        self.batch.and_then(|b| b.image(key)).map(Some)
    }
}

impl RowChecks for Checks<'_> {
    fn batches_ids(&self) -> bool {
        self.batch.is_some()
    }

    fn take_id(&self, name: &str) -> Option<i64> {
        let mut own = self.sequences.borrow_mut();
        if !own.contains_key(name) {
            let batch = self.batch?;
            let held = batch.sequences.borrow().get(name).cloned();
            let held = match held {
                Some(held) => held,
                None => {
                    // Shown when the batch began: checked as this job's read.
                    let (next, mac) = batch.prefetched.borrow().get(name).cloned()?;
                    let values = vec![OwnedValue::Text(name.to_owned()), OwnedValue::Int(next)];
                    self.pending
                        .borrow_mut()
                        .push(Check::new(&ID_SEQUENCES, values, mac.clone()));
                    Sequence {
                        stored: Some((next, mac)),
                        next,
                    }
                }
            };
            own.insert(name.to_owned(), held);
        }
        let sequence = own.get_mut(name)?;
        let id = sequence.next;
        sequence.next = id.checked_add(1)?;
        Some(id)
    }

    fn defer(&self, sql: String) {
        self.deferred.borrow_mut().push(sql);
    }

    fn take_deferred(&self) -> Vec<String> {
        let mut out = match self.batch {
            Some(batch) => batch.take_owed(),
            None => Vec::new(),
        };
        if let Some(batch) = self.batch {
            batch.in_flight.set(!out.is_empty());
        }
        out.extend(self.take_own_deferred());
        out
    }

    fn flushed(&self, error: Option<&SqlError>) {
        if let Some(batch) = self.batch {
            if let Some(error) = error
                && batch.in_flight.get()
            {
                *batch.chain_failed.borrow_mut() = Some(error.to_string());
            }
            batch.in_flight.set(false);
        }
    }

    fn recall(&self, key: &str) -> Option<Vec<OwnedValue>> {
        if self.keys.get() {
            // This job changed a key table: what was read before may be stale.
            return None;
        }
        if let Some(values) = self.recalled.borrow().get(key) {
            return Some(values.clone());
        }
        self.batch?.recalled.borrow().get(key).cloned()
    }

    fn remember(&self, key: String, values: Vec<OwnedValue>) {
        if self.batch.is_some() && !self.keys.get() {
            self.recalled.borrow_mut().insert(key, values);
        }
    }

    fn hold_sequence(&self, name: &str, stored: Option<(i64, Option<Vec<u8>>)>, next: i64) {
        self.sequences
            .borrow_mut()
            .insert(name.to_owned(), Sequence { stored, next });
    }

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
        match self.own_image(&key_of(table, &values)) {
            // Written in this very batch, exactly as it chose: no MAC yet, nothing to check.
            Some(Some(image)) if image == values => {}
            // Written in this batch but not what it wrote: refused (a NULL MAC never passes).
            Some(_) => self
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
        self.touched(table);
        let key = key_of(table, &values);
        self.removed.borrow_mut().remove(&key);
        self.written.borrow_mut().insert(key, (table, values));
    }

    fn forget(&self, table: &'static Table, values: &[OwnedValue]) {
        self.touched(table);
        let key = key_of(table, values);
        self.written.borrow_mut().remove(&key);
        if self.batch.is_some_and(|b| b.image(&key).is_some()) {
            self.removed.borrow_mut().insert(key);
        }
    }

    fn removed(&self, table: &'static Table, values: Vec<OwnedValue>, mac: Option<Vec<u8>>) {
        self.touched(table);
        let key = key_of(table, &values);
        let own = self.own_image(&key);
        self.written.borrow_mut().remove(&key);
        if self.batch.is_some_and(|b| b.image(&key).is_some()) {
            self.removed.borrow_mut().insert(key);
        }
        match own {
            // Written in this batch, and what was removed is that image.
            Some(Some(image)) if image == values => {}
            // A delete never launders a row: what it removed must have been genuine.
            Some(_) => self
                .pending
                .borrow_mut()
                .push(Check::new(table, values, None)),
            None => self
                .pending
                .borrow_mut()
                .push(Check::new(table, values, mac)),
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
    insert_new_row(tx, table, columns, NewRow::Now)?
        .ok_or_else(|| bug(format!("an insert into {} kept no row", table.name)))
}

/// As [`insert_new`], unless a row with one of its unique values exists (`None`).
pub(crate) fn insert_new_or_ignore(
    tx: Conn<'_>,
    table: &'static Table,
    columns: Columns<'_>,
) -> Result<Option<i64>> {
    insert_new_row(tx, table, columns, NewRow::NowOrIgnore)
}

/// As [`insert`], but in a PostgreSQL write batch the row is sent with the write's next
/// round trip (before its next statement, or with the statement that ends its savepoint)
/// instead of one of its own: for rows whose insert cannot conflict (ids the appliance
/// allocated). If it fails all the same, the write fails and nothing of it is kept, as
/// for any failed statement. Elsewhere (SQLite, or outside a batch) a plain insert.
pub(crate) fn insert_deferred(
    tx: Conn<'_>,
    table: &'static Table,
    columns: Columns<'_>,
) -> Result<()> {
    let values = image(table, columns, false)?;
    defer_image(tx, table, values)
}

/// As [`insert_new`], deferred as [`insert_deferred`] is; returns the id.
pub(crate) fn insert_new_deferred(
    tx: Conn<'_>,
    table: &'static Table,
    columns: Columns<'_>,
) -> Result<i64> {
    insert_new_row(tx, table, columns, NewRow::Deferred)?
        .ok_or_else(|| bug(format!("an insert into {} kept no row", table.name)))
}

/// How [`insert_new_row`] writes the row.
#[derive(Clone, Copy, PartialEq, Eq)]
enum NewRow {
    Now,
    NowOrIgnore,
    /// [`insert_deferred`]'s way (a plain insert outside a PostgreSQL batch).
    Deferred,
}

/// The first id of `table` after the upgrade to appliance-allocated ids: past every id
/// the database's identity column handed out.
fn first_id(tx: Conn<'_>, table: &'static Table) -> Result<i64> {
    let sql = format!(
        "SELECT GREATEST(COALESCE((SELECT MAX({c}) FROM {t}), 0) + 1,
                         nextval(pg_get_serial_sequence('{t}', '{c}')))",
        t = table.name,
        c = table.columns[0]
    );
    Ok(tx.query_row(&sql, params![], |r| r.get(0))?)
}

fn defer_image(tx: Conn<'_>, table: &'static Table, values: Vec<OwnedValue>) -> Result<()> {
    let Some(checks) = tx
        .checks()
        .filter(|c| c.batches_ids() && tx.engine() == Engine::Postgres)
    else {
        return insert_image(tx, table, values, false).map(|_| ());
    };
    let literals: Vec<String> = values.iter().map(literal).collect();
    checks.defer(format!(
        "INSERT INTO {} ({}) VALUES ({})",
        table.name,
        table.columns.join(", "),
        literals.join(", ")
    ));
    checks.wrote(table, values);
    Ok(())
}

fn insert_new_row(
    tx: Conn<'_>,
    table: &'static Table,
    columns: Columns<'_>,
    how: NewRow,
) -> Result<Option<i64>> {
    let or_ignore = how == NewRow::NowOrIgnore;
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
            let id = next_id(tx, table.name, |tx| first_id(tx, table))?;
            values[0] = OwnedValue::Int(id);
            if how == NewRow::Deferred {
                defer_image(tx, table, values)?;
                return Ok(Some(id));
            }
            Ok(insert_image(tx, table, values, or_ignore)?.then_some(id))
        }
    }
}

/// The next value of the named sequence (`id_sequences`, MACed), `first` when it has
/// none yet. In a PostgreSQL write batch the batch reads each sequence once (checked as
/// any protected row), hands its ids out in memory, and writes it back sealed when it
/// ends (`Integrity::batch_end`): a job that is rolled back gives its ids back.
pub(crate) fn next_id(
    tx: Conn<'_>,
    name: &str,
    first: impl FnOnce(Conn<'_>) -> Result<i64>,
) -> Result<i64> {
    if let Some(checks) = tx.checks()
        && checks.batches_ids()
    {
        if let Some(id) = checks.take_id(name) {
            return Ok(id);
        }
        let stored = tx.query_opt(
            &format!(
                "SELECT {} FROM id_sequences WHERE name = ?1",
                ID_SEQUENCES.select("")
            ),
            params![name],
            |r| {
                r.seal(0, &ID_SEQUENCES)?;
                Ok((
                    r.get::<String>(0)?,
                    r.get::<i64>(1)?,
                    r.get::<Option<Vec<u8>>>(2)?,
                ))
            },
        )?;
        let stored = match stored {
            Some((found, next, mac)) if found == name => Some((next, mac)),
            Some((found, _, _)) => {
                return Err(StoreError::Tampered {
                    table: ID_SEQUENCES.name,
                    row: format!("name={found} (asked for {name})"),
                });
            }
            None => None,
        };
        let id = match &stored {
            Some((next, _)) => *next,
            None => first(tx)?,
        };
        let after = id
            .checked_add(1)
            .ok_or_else(|| StoreError::Conflict(format!("the {name} id space is exhausted")))?;
        checks.hold_sequence(name, stored, after);
        return Ok(id);
    }
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
    /// The `write_epoch` row as the batch found it.
    found: Epoch,
    /// The highest epoch this replica had seen when the batch began.
    highest: u64,
    new: u64,
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

    /// The start of a write batch (under the replicas' write lock), from the
    /// `write_epoch` row as [`EPOCH_AS_TEXT`] showed it in the batch's first round trip.
    /// The row is checked, and the epoch compared with the highest this replica has seen,
    /// when the batch ends ([`Integrity::batch_end`]), in the batch's one keyservice
    /// round trip: nothing of a batch on a rolled-back database is committed or answered.
    ///
    /// `None` before the row keys are available: such a batch cannot touch a protected
    /// row (every job that does is refused when it ends), only the tables the root's
    /// hand-over uses, so it leaves the epoch alone.
    pub(super) fn begin_batch(&self, shown: &[TextRows]) -> Result<Option<EpochStep>> {
        if self.authenticator.get().is_none() {
            return Ok(None);
        }
        let highest = self.report.epoch();
        // The statements of the batch's first round trip: BEGIN, the lock, the epoch, ….
        let found = Epoch::from_text(shown.get(2).map_or(&[][..], Vec::as_slice))?;
        let new = found.epoch + 1;
        Ok(Some(EpochStep {
            found,
            highest,
            new,
        }))
    }

    /// The batch committed: its epoch is the highest this replica has seen.
    pub(super) fn committed(&self, step: &EpochStep) {
        self.report.epoch.fetch_max(step.new, Ordering::Relaxed);
    }

    /// The end of a write job (on the writer's thread, before its savepoint is
    /// released). What it read and removed is checked, and what it wrote sealed, when the
    /// batch ends; both need the row keys, so without them a job that touched a
    /// protected row is refused here.
    pub(super) fn finish_job(&self, checks: &Checks<'_>) -> Result<()> {
        let touched = !checks.pending.borrow().is_empty()
            || !checks.written.borrow().is_empty()
            || !checks.sequences.borrow().is_empty();
        if touched {
            self.authenticator()?;
        }
        Ok(())
    }

    /// The rows a job that failed read (one keyservice round trip when it read any):
    /// `Some` when one of them failed its check.
    pub(super) fn check_failed_job(&self, checks: &Checks<'_>) -> Option<StoreError> {
        let mut read = checks.take();
        if read.is_empty() || self.authenticator.get().is_none() {
            return None;
        }
        let inputs = read
            .iter_mut()
            .map(|c| std::mem::take(&mut c.input))
            .collect();
        let tags = self.tags(inputs).ok()?;
        read.iter()
            .zip(&tags)
            .find_map(|(check, tag)| self.compare(check, tag).err())
    }

    /// The batch's one keyservice round trip, then the statement that ends it. The round
    /// trip checks every protected row the batch's kept jobs read or removed and the
    /// `write_epoch` row the batch began on (a failed row refuses the batch: its jobs
    /// get [`StoreError::Tampered`], the others of the batch a 503; an epoch below the
    /// highest this replica has seen refuses it as rolled back), and computes every MAC
    /// the batch writes. The statement, run just before the commit in the same round
    /// trip: it writes the MAC of every image the batch's kept jobs chose, by key,
    /// on rows that have none yet (one `UPDATE … FROM (VALUES …)` per table), and the
    /// batch's epoch step; and it divides by zero (aborting the transaction, so nothing is
    /// committed) unless every one of those rows was there to seal and the epoch was
    /// still the one the batch began on. One keyservice round trip for all the MACs.
    ///
    /// Every value in it is a literal built here from the appliance's own images:
    /// integers as digits, bytes and text as hexadecimal through `pg_catalog` functions,
    /// so no value can change the statement.
    pub(super) fn batch_end(&self, step: &EpochStep, rows: &BatchRows) -> Result<String> {
        let written: Vec<Written> = rows.written.borrow_mut().drain().map(|(_, w)| w).collect();
        let sequences: Vec<(String, Sequence)> = rows
            .sequences
            .borrow_mut()
            .drain()
            .filter(|(_, s)| s.stored.as_ref().is_none_or(|(next, _)| *next != s.next))
            .collect();
        let sequence_images: Vec<Vec<OwnedValue>> = sequences
            .iter()
            .map(|(name, s)| vec![OwnedValue::Text(name.clone()), OwnedValue::Int(s.next)])
            .collect();
        let mut read: Vec<(usize, Check)> = std::mem::take(&mut *rows.read.borrow_mut());
        let mut epoch_check = step.found.check();
        let next_epoch = vec![
            OwnedValue::Int(1),
            OwnedValue::Int(to_i64(step.new)?),
            step.found
                .mac
                .clone()
                .map_or(OwnedValue::Null, OwnedValue::Blob),
        ];
        let inputs: Vec<Vec<u8>> = written
            .iter()
            .map(|(t, v)| mac_input(t, v))
            .chain(sequence_images.iter().map(|v| mac_input(&ID_SEQUENCES, v)))
            .chain(std::iter::once(encode(WRITE_EPOCH.name, &next_epoch)))
            .chain(read.iter_mut().map(|(_, c)| std::mem::take(&mut c.input)))
            .chain(epoch_check.as_mut().map(|c| std::mem::take(&mut c.input)))
            .collect();
        let tags = self.tags(inputs)?;
        let (tags, rest) = tags.split_at(written.len());
        let (sequence_tags, rest) = rest.split_at(sequences.len());
        let (epoch_tag, rest) = rest.split_at(1);
        let (read_tags, rest) = rest.split_at(read.len());
        if let (Some(check), Some(tag)) = (&epoch_check, rest.first()) {
            self.compare(check, tag)?;
        }
        let mut refused = None;
        let mut tampered_jobs = Vec::new();
        for ((job, check), tag) in read.iter().zip(read_tags) {
            if let Err(err) = self.compare(check, tag) {
                tampered_jobs.push(*job);
                refused.get_or_insert(err);
            }
        }
        if let Some(err) = refused {
            tampered_jobs.dedup();
            *rows.tampered.borrow_mut() = tampered_jobs;
            return Err(err);
        }
        self.accept_epoch(step.found.epoch, step.highest)?;
        let step_tag = epoch_tag.first().copied().unwrap_or([0; 32]);
        let mut by_table: Vec<ToSeal<'_>> = Vec::new();
        for ((table, values), tag) in written.iter().zip(tags) {
            match by_table.iter_mut().find(|(t, _)| t.name == table.name) {
                Some((_, list)) => list.push((values, tag)),
                None => by_table.push((table, vec![(values, tag)])),
            }
        }
        let mut ctes = Vec::with_capacity(by_table.len() + 1);
        let mut expected = Vec::with_capacity(by_table.len() + 1);
        for (i, (table, list)) in by_table.iter().enumerate() {
            let keys: Vec<String> = (0..table.key.len()).map(|k| format!("k{k}")).collect();
            let mut tuples = Vec::with_capacity(list.len());
            for (values, tag) in list {
                let mut tuple = Vec::with_capacity(table.key.len() + 1);
                for k in table.key {
                    let value = column_index(table, k)
                        .and_then(|idx| values.get(idx))
                        .ok_or_else(|| bug(format!("{} has no key column {k}", table.name)))?;
                    if matches!(value, OwnedValue::Null) {
                        return Err(bug(format!("a row of {} with a NULL key", table.name)));
                    }
                    tuple.push(literal(value));
                }
                tuple.push(bytes_literal(&tag[..]));
                tuples.push(format!("({})", tuple.join(", ")));
            }
            let matched: Vec<String> = table
                .key
                .iter()
                .zip(&keys)
                .map(|(column, k)| format!("t.{column} = v.{k}"))
                .collect();
            ctes.push(format!(
                "s{i} AS (UPDATE {table} AS t SET row_mac = v.mac FROM (VALUES {tuples}) AS v({keys}, mac) \
                 WHERE {matched} AND t.row_mac IS NULL RETURNING 1)",
                table = table.name,
                tuples = tuples.join(", "),
                keys = keys.join(", "),
                matched = matched.join(" AND "),
            ));
            expected.push(format!("(SELECT count(*) FROM s{i}) = {}", list.len()));
        }
        let mut moved = Vec::new();
        let mut started = Vec::new();
        for ((name, sequence), tag) in sequences.iter().zip(sequence_tags) {
            let name = literal(&OwnedValue::Text(name.clone()));
            match &sequence.stored {
                Some((old, old_mac)) => moved.push(format!(
                    "({name}, {next}::bigint, {tag}, {old}::bigint, {old_mac})",
                    next = sequence.next,
                    tag = bytes_literal(tag),
                    old_mac = old_mac
                        .as_deref()
                        .map_or_else(|| "NULL::bytea".to_owned(), bytes_literal),
                )),
                None => started.push(format!(
                    "({name}, {next}::bigint, {tag})",
                    next = sequence.next,
                    tag = bytes_literal(tag)
                )),
            }
        }
        if !moved.is_empty() {
            ctes.push(format!(
                "q AS (UPDATE id_sequences AS t SET next = v.next, row_mac = v.mac \
                 FROM (VALUES {}) AS v(name, next, mac, old, old_mac) \
                 WHERE t.name = v.name AND t.next = v.old AND t.row_mac IS NOT DISTINCT FROM v.old_mac \
                 RETURNING 1)",
                moved.join(", ")
            ));
            expected.push(format!("(SELECT count(*) FROM q) = {}", moved.len()));
        }
        if !started.is_empty() {
            ctes.push(format!(
                "n AS (INSERT INTO id_sequences (name, next, row_mac) VALUES {} RETURNING 1)",
                started.join(", ")
            ));
            expected.push(format!("(SELECT count(*) FROM n) = {}", started.len()));
        }
        ctes.push(format!(
            "e AS (UPDATE write_epoch SET epoch = {new}, prev_mac = {prev}, row_mac = {tag} \
             WHERE id = 1 AND epoch = {old} AND row_mac IS NOT DISTINCT FROM {prev} RETURNING 1)",
            new = to_i64(step.new)?,
            prev = step
                .found
                .mac
                .as_deref()
                .map_or_else(|| "NULL::bytea".to_owned(), bytes_literal),
            tag = bytes_literal(&step_tag),
            old = to_i64(step.found.epoch)?,
        ));
        expected.push("(SELECT count(*) FROM e) = 1".to_owned());
        Ok(format!(
            "WITH {} SELECT 1 / (CASE WHEN {} THEN 1 ELSE 0 END)",
            ctes.join(", "),
            expected.join(" AND ")
        ))
    }
}

/// The query that shows the `write_epoch` row as text, for [`Integrity::begin_batch`].
pub(super) const EPOCH_AS_TEXT: &str = "SELECT epoch, pg_catalog.encode(prev_mac, 'hex'), \
     pg_catalog.encode(row_mac, 'hex') FROM write_epoch WHERE id = 1";

/// The query that shows every `id_sequences` row as text, so that a write batch holds
/// them from its first round trip ([`BatchRows::prefetch`]).
pub(super) const SEQUENCES_AS_TEXT: &str =
    "SELECT name, next, pg_catalog.encode(row_mac, 'hex') FROM id_sequences";

/// `bytes` as an SQL literal of type `bytea`.
fn bytes_literal(bytes: &[u8]) -> String {
    format!("pg_catalog.decode('{}', 'hex')", hex::encode(bytes))
}

/// A value of the appliance's own as an SQL literal: nothing in it can end the literal.
fn literal(value: &OwnedValue) -> String {
    match value {
        OwnedValue::Null => "NULL".to_owned(),
        OwnedValue::Int(i) => i.to_string(),
        OwnedValue::Real(r) if r.is_finite() => format!("{r:?}::float8"),
        OwnedValue::Real(_) => "'NaN'::float8".to_owned(),
        OwnedValue::Text(t) => format!(
            "pg_catalog.convert_from({}, 'UTF8')",
            bytes_literal(t.as_bytes())
        ),
        OwnedValue::Blob(b) => bytes_literal(b),
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

impl Epoch {
    /// The row as [`EPOCH_AS_TEXT`] shows it (the last row of the batch's first round
    /// trip).
    fn from_text(shown: &[Vec<Option<String>>]) -> Result<Self> {
        let missing = || StoreError::Tampered {
            table: WRITE_EPOCH.name,
            row: "id=1 (missing or unreadable)".into(),
        };
        let row = shown.last().ok_or_else(missing)?;
        let (Some(Some(epoch)), Some(prev), Some(mac)) = (row.first(), row.get(1), row.get(2))
        else {
            return Err(missing());
        };
        let bytes = |v: &Option<String>| -> Result<Option<Vec<u8>>> {
            v.as_deref()
                .map(|h| hex::decode(h).map_err(|_| missing()))
                .transpose()
        };
        Ok(Self {
            epoch: epoch.parse().map_err(|_| missing())?,
            prev: bytes(prev)?,
            mac: bytes(mac)?,
        })
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

    /// The issue's attack: a trigger the database's operator adds moves the victim's
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

    /// Holds the store's writer inside a write until the returned sender is used, so
    /// that writes sent meanwhile are committed together in the next batch.
    async fn hold_writer(
        store: &Store,
    ) -> (std::sync::mpsc::Sender<()>, tokio::task::JoinHandle<()>) {
        let (started_tx, started) = tokio::sync::oneshot::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let store = store.clone();
        let held = tokio::spawn(async move {
            store
                .write(move |_| {
                    let _ = started_tx.send(());
                    let _ = released.recv();
                    Ok(())
                })
                .await
                .unwrap();
        });
        started.await.unwrap();
        (release, held)
    }

    /// The account's groups (the first ten).
    async fn groups_of(store: &Store, account: crate::AccountId) -> Vec<crate::GroupRecord> {
        let page = Page {
            number: 0,
            size: 10,
        };
        store.list_groups(account, page).await.unwrap()
    }

    fn group(name: &str) -> crate::GroupSpec {
        crate::GroupSpec {
            name: name.into(),
            description: String::new(),
            wallets: crate::Permitted::All,
            actions: crate::Permitted::Only(Vec::new()),
        }
    }

    /// The jobs of one batch build on each other's rows before any of them has a MAC
    /// (each `add_group` takes the next id from the `id_sequences` row the job before it
    /// wrote), a job that fails in the middle leaves the batch's rows as the jobs before
    /// it wrote them, and the one statement that ends the batch seals exactly what the
    /// kept jobs chose: every row reads back genuine, and the next batch builds on it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_jobs_of_one_batch_build_on_each_others_rows() {
        let Some((_db, store, account)) = populated().await else {
            return;
        };
        let (release, held) = hold_writer(&store).await;
        let before = store.write_stats();
        let mut writes = Vec::new();
        for i in 0..5 {
            let store = store.clone();
            writes.push(tokio::spawn(async move {
                if i == 2 {
                    // Takes an id from the sequence another job of the batch wrote, then
                    // fails: its savepoint is rolled back, and so is its row image.
                    store
                        .write(|tx| {
                            next_id(tx, "groups", |_| Ok(1))?;
                            Err::<appliance_domain::authz::GroupId, _>(StoreError::Conflict(
                                "no".into(),
                            ))
                        })
                        .await
                } else {
                    store
                        .add_group(account, group(&format!("g{i}")), Charge::free())
                        .await
                }
            }));
            // In order behind the held write.
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        release.send(()).unwrap();
        held.await.unwrap();
        let mut ids = Vec::new();
        for (i, w) in writes.into_iter().enumerate() {
            match (i, w.await.unwrap()) {
                (2, Err(StoreError::Conflict(_))) => {}
                (_, Ok(id)) => ids.push(id.0),
                (i, other) => panic!("write {i}: {other:?}"),
            }
        }
        let after = store.write_stats();
        assert_eq!(
            (after.batches - before.batches, after.writes - before.writes),
            (2, 6),
            "the held write, then the five behind it in one batch"
        );
        assert_eq!(
            ids,
            vec![1, 2, 3, 4],
            "no id lost to the failed job, none reused"
        );
        // Every row the batch wrote reads back genuine, and the next batch builds on it.
        let failures = store.integrity_report().unwrap().failures();
        let next = store
            .add_group(account, group("later"), Charge::free())
            .await
            .unwrap();
        assert_eq!(next.0, 5);
        let listed = groups_of(&store, account).await;
        let names: Vec<_> = listed.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, ["g0", "g1", "g3", "g4", "later"]);
        assert_eq!(store.integrity_report().unwrap().failures(), failures);
    }

    /// A job that read a tampered row is refused for it; the batch it was in is not
    /// committed, so the other jobs of that batch answer 503 (nothing of theirs kept),
    /// and succeed when retried.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_tampered_read_refuses_its_job_and_keeps_nothing_of_its_batch() {
        let Some((db, store, account)) = populated().await else {
            return;
        };
        db.behind_the_back("UPDATE wallets SET name = 'edited'")
            .await;
        let (release, held) = hold_writer(&store).await;
        let reader = {
            let store = store.clone();
            tokio::spawn(async move {
                let mut spec = group("reads the wallet");
                spec.wallets =
                    crate::Permitted::Only(vec![crate::WalletRef::Pkp(identity(7).pkp_id)]);
                store.add_group(account, spec, Charge::free()).await
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let innocent = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .add_group(account, group("innocent"), Charge::free())
                    .await
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        release.send(()).unwrap();
        held.await.unwrap();
        assert_tampered(reader.await.unwrap(), "wallets");
        match innocent.await.unwrap() {
            Err(StoreError::Unavailable(msg)) => assert!(msg.contains("another write"), "{msg}"),
            other => panic!("expected a 503 for the batch's other write, got {other:?}"),
        }
        assert!(groups_of(&store, account).await.is_empty());
        store
            .add_group(account, group("innocent"), Charge::free())
            .await
            .unwrap();
        let listed = groups_of(&store, account).await;
        assert_eq!(listed.len(), 1);
    }

    /// An id sequence moved back behind the store's back (to make it hand out an id
    /// again) is refused when a write takes an id from it, as the batch's first round
    /// trip showed it: no group gets an id twice.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_id_sequence_moved_back_is_refused() {
        let Some((db, store, account)) = populated().await else {
            return;
        };
        let first = store
            .add_group(account, group("a"), Charge::free())
            .await
            .unwrap();
        db.behind_the_back("UPDATE id_sequences SET next = next - 1 WHERE name = 'groups'")
            .await;
        assert_tampered(
            store.add_group(account, group("b"), Charge::free()).await,
            "id_sequences",
        );
        let listed = groups_of(&store, account).await;
        assert_eq!(listed.iter().map(|g| g.id).collect::<Vec<_>>(), vec![first]);
    }

    /// A statement that fails in one job of a batch (here an unknown column) rolls back
    /// that job only: the jobs after it in the same batch run and are kept.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_statement_spoils_only_its_own_job() {
        let Some((_db, store, account)) = populated().await else {
            return;
        };
        let (release, held) = hold_writer(&store).await;
        let failing = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .write(|tx| {
                        tx.execute("UPDATE groups SET no_such_column = 1", params![])?;
                        Ok(())
                    })
                    .await
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let after = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .add_group(account, group("after"), Charge::free())
                    .await
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        release.send(()).unwrap();
        held.await.unwrap();
        assert!(failing.await.unwrap().is_err());
        let id = after
            .await
            .unwrap()
            .expect("the next job of the batch is kept");
        let listed = groups_of(&store, account).await;
        assert_eq!(listed.iter().map(|g| g.id).collect::<Vec<_>>(), vec![id]);
    }

    /// Rows jobs deferred reach the database together, with the batch's next statement
    /// or its end: if the database refuses one there (here a foreign trigger refuses one
    /// group's name), which job's it was cannot be told, so nothing of the batch is
    /// committed and every write of it answers 503; retried, they go through, and no id
    /// was lost.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deferred_row_refused_later_keeps_nothing_of_its_batch() {
        let Some((db, store, account)) = populated().await else {
            return;
        };
        db.behind_the_back(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF NEW.name = 'refused' THEN RAISE EXCEPTION 'refused by the database'; END IF;
                 RETURN NEW;
             END $$;
             CREATE TRIGGER refuse BEFORE INSERT ON groups
                 FOR EACH ROW EXECUTE FUNCTION refuse();",
        )
        .await;
        let (release, held) = hold_writer(&store).await;
        let mut writes = Vec::new();
        // The refused row reaches the database with the batch's end here; with a
        // statement of a later write (the last one) in the second round.
        for name in ["kept", "refused", "also kept", "reads"] {
            let store = store.clone();
            writes.push(tokio::spawn(async move {
                if name == "reads" {
                    return store
                        .write(|tx| {
                            tx.query_row("SELECT 1", params![], |r| r.get::<i64>(0))?;
                            Ok(())
                        })
                        .await;
                }
                store
                    .add_group(account, group(name), Charge::free())
                    .await
                    .map(|_| ())
            }));
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let before = store.write_stats();
        release.send(()).unwrap();
        held.await.unwrap();
        for w in writes {
            match w.await.unwrap() {
                Err(StoreError::Unavailable(msg)) => assert!(msg.contains("refused"), "{msg}"),
                other => panic!("expected a 503, got {other:?}"),
            }
        }
        assert_eq!(
            store.write_stats().batches,
            before.batches + 1,
            "only the held write"
        );
        assert!(groups_of(&store, account).await.is_empty());
        db.behind_the_back("DROP TRIGGER refuse ON groups; DROP FUNCTION refuse();")
            .await;
        for name in ["kept", "also kept"] {
            store
                .add_group(account, group(name), Charge::free())
                .await
                .unwrap();
        }
        let ids: Vec<u64> = groups_of(&store, account)
            .await
            .into_iter()
            .map(|g| g.id.0)
            .collect();
        assert_eq!(ids, vec![1, 2]);
    }

    /// A batch reads an account's head once for all its writes, but only until a write
    /// of the batch changes an account: here the middle job turns the account
    /// ChainSecured, and the job after it (same batch) queues no mirror entry.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_remembers_an_account_only_until_a_write_changes_it() {
        let Some((_db, store, account)) = populated().await else {
            return;
        };
        let outbox = |store: Store| async move {
            store
                .read(|c| {
                    Ok(
                        c.query_row("SELECT COUNT(*) FROM chain_outbox", params![], |r| {
                            r.get::<i64>(0)
                        })?,
                    )
                })
                .await
                .unwrap()
        };
        let before = outbox(store.clone()).await;
        let (release, held) = hold_writer(&store).await;
        let mut writes = Vec::new();
        for i in 0..3 {
            let store = store.clone();
            writes.push(tokio::spawn(async move {
                if i == 1 {
                    store
                        .write(move |tx| {
                            update(tx, &ACCOUNTS, "id = ?1", params![account.0], |row| {
                                row.set("managed", &false)?;
                                Ok(true)
                            })?;
                            Ok(())
                        })
                        .await
                } else {
                    store
                        .add_group(account, group(&format!("g{i}")), Charge::free())
                        .await
                        .map(|_| ())
                }
            }));
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        release.send(()).unwrap();
        held.await.unwrap();
        for w in writes {
            w.await.unwrap().unwrap();
        }
        assert_eq!(
            outbox(store.clone()).await - before,
            1,
            "only the write before the conversion is mirrored"
        );
    }

    /// Writes that reach the store while its batch waits for the replicas' write lock
    /// (held here by another session, as another replica's batch would hold it) join
    /// that batch: one commit for all of them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_that_queue_behind_the_write_lock_join_the_waiting_batch() {
        let Some((db, store, account)) = populated().await else {
            return;
        };
        let url = db.postgres_url().unwrap().to_owned();
        let (locked_tx, locked) = std::sync::mpsc::channel::<()>();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let other_replica = std::thread::spawn(move || {
            let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            client
                .batch_execute(&format!(
                    "SELECT pg_advisory_lock({})",
                    crate::writer::WRITE_LOCK_KEY
                ))
                .unwrap();
            locked_tx.send(()).unwrap();
            let _ = released.recv();
            client
                .batch_execute(&format!(
                    "SELECT pg_advisory_unlock({})",
                    crate::writer::WRITE_LOCK_KEY
                ))
                .unwrap();
        });
        locked.recv().unwrap();
        let before = store.write_stats();
        let mut writes = Vec::new();
        for i in 0..4 {
            let store = store.clone();
            writes.push(tokio::spawn(async move {
                store
                    .add_group(account, group(&format!("g{i}")), Charge::free())
                    .await
            }));
            // The first write's batch is waiting for the lock before the others arrive.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        release.send(()).unwrap();
        other_replica.join().unwrap();
        for w in writes {
            w.await.unwrap().unwrap();
        }
        let after = store.write_stats();
        assert_eq!(
            (after.batches - before.batches, after.writes - before.writes),
            (1, 4),
            "one batch for the four writes"
        );
    }

    /// A batch that writes no row API keys resolve from leaves this replica's resolved
    /// keys in memory (and tells no other replica); one that does empties the cache
    /// before it is answered. Seen by removing a key behind the store's back: a group
    /// write does not make the store look again, a usage-key write does.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_a_write_of_the_key_tables_empties_the_key_cache() {
        let Some((db, store, account)) = populated().await else {
            return;
        };
        let key = KeyHash([9; 32]);
        assert!(store.resolve_key(key).await.unwrap().is_some());
        db.behind_the_back(&format!(
            "DELETE FROM usage_keys WHERE key_hash = '\\x{}'",
            hex::encode(key.0)
        ))
        .await;
        store
            .add_group(account, group("g"), Charge::free())
            .await
            .unwrap();
        assert!(
            store.resolve_key(key).await.unwrap().is_some(),
            "a group write kept the resolved key"
        );
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
            .await
            .unwrap();
        assert_eq!(
            store.resolve_key(key).await.unwrap(),
            None,
            "a usage-key write empties the cache"
        );
    }

    /// A row a batch wrote that the database changes before the batch's end (here a
    /// foreign trigger gives the new group a MAC of its own) fails the guard of the
    /// statement that seals it: nothing of the batch is committed, the write answers 503,
    /// and the next batch, without the trigger, goes through.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_row_changed_before_its_batch_is_sealed_keeps_nothing() {
        let Some((db, store, account)) = populated().await else {
            return;
        };
        db.behind_the_back(
            "CREATE FUNCTION forge() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 UPDATE groups SET row_mac = '\\x00' WHERE row_mac IS NULL;
                 RETURN NEW;
             END $$;
             CREATE TRIGGER forge AFTER INSERT ON chain_outbox
                 FOR EACH ROW EXECUTE FUNCTION forge();",
        )
        .await;
        let before = store.write_stats();
        match store.add_group(account, group("g"), Charge::free()).await {
            Err(StoreError::Unavailable(msg)) => {
                assert!(msg.contains("nothing was kept"), "{msg}");
            }
            other => panic!("expected a 503, got {other:?}"),
        }
        assert_eq!(
            store.write_stats().batches,
            before.batches,
            "nothing committed"
        );
        db.behind_the_back("DROP TRIGGER forge ON chain_outbox; DROP FUNCTION forge();")
            .await;
        let id = store
            .add_group(account, group("g"), Charge::free())
            .await
            .unwrap();
        let listed = groups_of(&store, account).await;
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].id, id);
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

    /// The issue's second path: database code that runs when the appliance writes (a
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
