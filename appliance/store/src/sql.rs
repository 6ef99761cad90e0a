//! The SQL the store speaks, on either engine.
//!
//! Domain modules write their SQL once, in the subset SQLite and PostgreSQL share, with
//! numbered parameters (`?1`, `?2`, …), and run it through a [`Conn`]: a borrowed SQLite
//! connection or a PostgreSQL session. What differs between the two engines stays here:
//!
//! * parameters: `?N` becomes `$N` for PostgreSQL (outside quoted text), and the store's
//!   paged form `LIMIT ?N + 0 OFFSET ?M + 0` (which keeps SQLite from re-preparing a
//!   cached statement) becomes `LIMIT $N::bigint OFFSET $M::bigint`;
//! * values: a parameter is one of four kinds ([`Param`]: NULL, integer, text, bytes) and
//!   a column is read as one of five ([`ValueRef`]); PostgreSQL's integer widths and
//!   booleans convert to and from Rust integers and `bool` with range checks, so the same
//!   Rust code binds and reads the same columns on both engines (flags are `0`/`1`
//!   integers in both schemas);
//! * statements are prepared once per connection (SQLite's statement cache; a map of
//!   prepared statements per PostgreSQL session);
//! * errors: [`SqlError`] tells a unique-key violation, a lost connection or a busy
//!   database apart the same way for both.
//!
//! A PostgreSQL statement that fails inside a transaction aborts the whole transaction,
//! where SQLite carries on; so store code never relies on catching a failed statement and
//! continuing (it uses `ON CONFLICT DO NOTHING` and row counts instead), and a session
//! remembers that a statement failed ([`Conn::failed`]) so the writer can roll the job
//! back even if the job swallowed the error.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;

use postgres::types::{IsNull, Type, to_sql_checked};

/// Which engine a connection belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        })
    }
}

/// An error from either engine, or from reading a column as the wrong type.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqlError {
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("{}", describe_pg(.0))]
    Postgres(#[from] postgres::Error),
    /// `query_row` found no row.
    #[error("the query returned no row")]
    NoRows,
    /// A column could not be read as the type asked for.
    #[error("column {column}: {reason}")]
    Decode {
        column: usize,
        #[source]
        reason: ValueError,
    },
    /// The PostgreSQL session's connection is closed.
    #[error("the database connection is closed")]
    Closed,
}

/// PostgreSQL's errors print as "db error" unless asked for their detail.
fn describe_pg(err: &postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => err.to_string(),
    }
}

impl SqlError {
    /// A `UNIQUE` or `PRIMARY KEY` constraint refused the row.
    pub fn is_unique_violation(&self) -> bool {
        match self {
            Self::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => matches!(
                e.extended_code,
                rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                    | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
            ),
            Self::Postgres(e) => e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION),
            _ => false,
        }
    }

    /// Any constraint (CHECK, NOT NULL, foreign key, unique) refused the change.
    pub fn is_constraint_violation(&self) -> bool {
        match self {
            Self::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => {
                e.code == rusqlite::ErrorCode::ConstraintViolation
            }
            Self::Postgres(e) => e.code().is_some_and(|c| c.code().starts_with("23")),
            _ => false,
        }
    }

    /// The disk under the database is full (SQLite's `SQLITE_FULL`, PostgreSQL's
    /// `53100 disk_full`): nothing of the statement was kept, and writes succeed again
    /// once space is freed.
    pub fn is_disk_full(&self) -> bool {
        match self {
            Self::Sqlite(e) => e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull),
            Self::Postgres(e) => e.code() == Some(&postgres::error::SqlState::DISK_FULL),
            _ => false,
        }
    }

    /// The database cannot serve right now (busy, locked, full, unreachable, shutting
    /// down): a 503, worth retrying later, rather than a bug.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::Sqlite(e) => matches!(
                e.sqlite_error_code(),
                Some(
                    rusqlite::ErrorCode::DiskFull
                        | rusqlite::ErrorCode::DatabaseBusy
                        | rusqlite::ErrorCode::DatabaseLocked
                )
            ),
            Self::Postgres(e) => {
                if e.is_closed() {
                    return true;
                }
                match e.code() {
                    // No SQLSTATE: the connection or its I/O failed.
                    None => true,
                    Some(code) => {
                        let class = &code.code()[..2];
                        // 08 connection exception, 53 insufficient resources, 57 operator
                        // intervention (shutdown, cancel), 40 serialization / deadlock.
                        matches!(class, "08" | "53" | "57" | "40")
                    }
                }
            }
            Self::Closed => true,
            _ => false,
        }
    }

    /// A statement's own guard refused it: it divided by zero (the writer's batch end
    /// does so when the rows it seals are not exactly the rows it wrote).
    pub fn is_guard_failure(&self) -> bool {
        match self {
            Self::Postgres(e) => e.code() == Some(&postgres::error::SqlState::DIVISION_BY_ZERO),
            _ => false,
        }
    }

    /// The session is unusable and must be replaced (PostgreSQL only).
    pub fn breaks_session(&self) -> bool {
        match self {
            Self::Postgres(e) => e.is_closed() || e.code().is_none(),
            Self::Closed => true,
            _ => false,
        }
    }
}

pub type SqlResult<T> = std::result::Result<T, SqlError>;

/// A parameter value.
#[derive(Debug, Clone, Copy)]
pub enum Param<'a> {
    Null,
    Int(i64),
    Text(&'a str),
    Blob(&'a [u8]),
}

/// Anything that binds as a parameter.
pub trait ToParam {
    fn to_param(&self) -> Param<'_>;
}

impl ToParam for Param<'_> {
    fn to_param(&self) -> Param<'_> {
        *self
    }
}

macro_rules! int_param {
    ($($t:ty),*) => {$(
        impl ToParam for $t {
            fn to_param(&self) -> Param<'_> {
                Param::Int(i64::from(*self))
            }
        }
    )*};
}
int_param!(i64, i32, u32, u16, u8);

impl ToParam for bool {
    fn to_param(&self) -> Param<'_> {
        Param::Int(i64::from(*self))
    }
}

impl ToParam for str {
    fn to_param(&self) -> Param<'_> {
        Param::Text(self)
    }
}

impl ToParam for String {
    fn to_param(&self) -> Param<'_> {
        Param::Text(self)
    }
}

impl ToParam for [u8] {
    fn to_param(&self) -> Param<'_> {
        Param::Blob(self)
    }
}

impl ToParam for Vec<u8> {
    fn to_param(&self) -> Param<'_> {
        Param::Blob(self)
    }
}

impl<const N: usize> ToParam for [u8; N] {
    fn to_param(&self) -> Param<'_> {
        Param::Blob(self)
    }
}

impl<T: ToParam + ?Sized> ToParam for &T {
    fn to_param(&self) -> Param<'_> {
        (**self).to_param()
    }
}

impl<T: ToParam> ToParam for Option<T> {
    fn to_param(&self) -> Param<'_> {
        match self {
            Some(v) => v.to_param(),
            None => Param::Null,
        }
    }
}

/// `params![a, b, …]`: the parameters of a statement, `?1` first.
macro_rules! params {
    () => {
        &[] as &[&dyn $crate::sql::ToParam]
    };
    ($($p:expr),+ $(,)?) => {
        &[$(&$p as &dyn $crate::sql::ToParam),+] as &[&dyn $crate::sql::ToParam]
    };
}
pub(crate) use params;

impl rusqlite::ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef as V};
        Ok(ToSqlOutput::Borrowed(match *self {
            Param::Null => V::Null,
            Param::Int(i) => V::Integer(i),
            Param::Text(t) => V::Text(t.as_bytes()),
            Param::Blob(b) => V::Blob(b),
        }))
    }
}

impl postgres::types::ToSql for Param<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let int_err = |i: i64| format!("{i} does not fit a {ty} column");
        match *self {
            Param::Null => Ok(IsNull::Yes),
            Param::Int(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => i32::try_from(i).map_err(|_| int_err(i))?.to_sql(ty, out),
                Type::INT2 => i16::try_from(i).map_err(|_| int_err(i))?.to_sql(ty, out),
                Type::BOOL => (i != 0).to_sql(ty, out),
                _ => Err(format!("an integer cannot bind to a {ty} column").into()),
            },
            Param::Text(t) => match *ty {
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
                    t.to_sql(&Type::TEXT, out)
                }
                _ => Err(format!("text cannot bind to a {ty} column").into()),
            },
            Param::Blob(b) => match *ty {
                Type::BYTEA => b.to_sql(ty, out),
                _ => Err(format!("bytes cannot bind to a {ty} column").into()),
            },
        }
    }

    fn accepts(ty: &Type) -> bool {
        matches!(
            *ty,
            Type::INT8
                | Type::INT4
                | Type::INT2
                | Type::BOOL
                | Type::TEXT
                | Type::VARCHAR
                | Type::BPCHAR
                | Type::NAME
                | Type::UNKNOWN
                | Type::BYTEA
        )
    }

    to_sql_checked!();
}

/// A column's value, borrowed from the row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueRef<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a str),
    Blob(&'a [u8]),
}

impl ValueRef<'_> {
    fn kind(&self) -> &'static str {
        match self {
            Self::Null => "NULL",
            Self::Int(_) => "an integer",
            Self::Real(_) => "a real number",
            Self::Text(_) => "text",
            Self::Blob(_) => "bytes",
        }
    }
}

/// Why a column's value is not the Rust type asked for (the caller adds the column).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("expected {want}, found {found}")]
    WrongKind {
        want: &'static str,
        found: &'static str,
    },
    #[error("{0} is negative")]
    Negative(i64),
    #[error("{0} is not a flag (0 or 1)")]
    NotAFlag(i64),
    #[error("expected {want} bytes, found {found}")]
    WrongLength { want: usize, found: usize },
    #[error("{0}")]
    NotUtf8(#[from] std::str::Utf8Error),
    /// A JSON column (a group set) does not hold what it should.
    #[error("not {what}: {reason}")]
    Json { what: &'static str, reason: String },
}

/// Reads a column as a Rust value.
pub trait FromSql: Sized {
    fn from_sql(value: ValueRef<'_>) -> std::result::Result<Self, ValueError>;
}

fn wrong(value: ValueRef<'_>, want: &'static str) -> ValueError {
    ValueError::WrongKind {
        want,
        found: value.kind(),
    }
}

impl FromSql for i64 {
    fn from_sql(value: ValueRef<'_>) -> std::result::Result<Self, ValueError> {
        match value {
            ValueRef::Int(i) => Ok(i),
            other => Err(wrong(other, "an integer")),
        }
    }
}

impl FromSql for u64 {
    fn from_sql(value: ValueRef<'_>) -> std::result::Result<Self, ValueError> {
        let i = i64::from_sql(value)?;
        u64::try_from(i).map_err(|_| ValueError::Negative(i))
    }
}

impl FromSql for bool {
    fn from_sql(value: ValueRef<'_>) -> std::result::Result<Self, ValueError> {
        match value {
            ValueRef::Int(0) => Ok(false),
            ValueRef::Int(1) => Ok(true),
            ValueRef::Int(i) => Err(ValueError::NotAFlag(i)),
            other => Err(wrong(other, "a flag")),
        }
    }
}

impl FromSql for String {
    fn from_sql(value: ValueRef<'_>) -> std::result::Result<Self, ValueError> {
        match value {
            ValueRef::Text(t) => Ok(t.to_owned()),
            other => Err(wrong(other, "text")),
        }
    }
}

impl FromSql for Vec<u8> {
    fn from_sql(value: ValueRef<'_>) -> std::result::Result<Self, ValueError> {
        match value {
            ValueRef::Blob(b) => Ok(b.to_vec()),
            other => Err(wrong(other, "bytes")),
        }
    }
}

impl<const N: usize> FromSql for [u8; N] {
    fn from_sql(value: ValueRef<'_>) -> std::result::Result<Self, ValueError> {
        match value {
            ValueRef::Blob(b) => b.try_into().map_err(|_| ValueError::WrongLength {
                want: N,
                found: b.len(),
            }),
            other => Err(wrong(other, "bytes")),
        }
    }
}

impl<T: FromSql> FromSql for Option<T> {
    fn from_sql(value: ValueRef<'_>) -> std::result::Result<Self, ValueError> {
        match value {
            ValueRef::Null => Ok(None),
            other => T::from_sql(other).map(Some),
        }
    }
}

/// A PostgreSQL column read without knowing its type in advance.
struct PgCell<'a>(ValueRef<'a>);

impl<'a> postgres::types::FromSql<'a> for PgCell<'a> {
    fn from_sql(
        ty: &Type,
        raw: &'a [u8],
    ) -> std::result::Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        use postgres::types::FromSql as Pg;
        Ok(PgCell(match *ty {
            Type::INT8 => ValueRef::Int(<i64 as Pg>::from_sql(ty, raw)?),
            Type::INT4 => ValueRef::Int(i64::from(<i32 as Pg>::from_sql(ty, raw)?)),
            Type::INT2 => ValueRef::Int(i64::from(<i16 as Pg>::from_sql(ty, raw)?)),
            Type::BOOL => ValueRef::Int(i64::from(<bool as Pg>::from_sql(ty, raw)?)),
            Type::FLOAT8 => ValueRef::Real(<f64 as Pg>::from_sql(ty, raw)?),
            Type::BYTEA => ValueRef::Blob(raw),
            _ => ValueRef::Text(<&str as Pg>::from_sql(ty, raw)?),
        }))
    }

    fn from_sql_null(
        _: &Type,
    ) -> std::result::Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(PgCell(ValueRef::Null))
    }

    fn accepts(ty: &Type) -> bool {
        matches!(
            *ty,
            Type::INT8
                | Type::INT4
                | Type::INT2
                | Type::BOOL
                | Type::FLOAT8
                | Type::BYTEA
                | Type::TEXT
                | Type::VARCHAR
                | Type::BPCHAR
                | Type::NAME
        )
    }
}

/// A protected table: its name, its data columns (every column but `row_mac`, in the
/// order they are encoded), its key columns (for messages and sealing), and how many of
/// the last columns were added after its rows were first MACed (`store::integrity`: they
/// are encoded only when one of them is not NULL, so rows written before keep their MAC).
#[derive(Debug)]
pub(crate) struct Table {
    pub name: &'static str,
    pub columns: &'static [&'static str],
    pub key: &'static [&'static str],
    pub added_later: usize,
}

impl Table {
    /// `a.c1, a.c2, …, a.row_mac`: what a query appends to its select list to have the
    /// row checked.
    pub fn select(&self, alias: &str) -> String {
        let mut out = String::new();
        for column in self.columns.iter().chain(std::iter::once(&"row_mac")) {
            if !out.is_empty() {
                out.push_str(", ");
            }
            if !alias.is_empty() {
                out.push_str(alias);
                out.push('.');
            }
            out.push_str(column);
        }
        out
    }

    /// How many columns [`Table::select`] appends.
    pub const fn width(&self) -> usize {
        self.columns.len() + 1
    }
}

/// Where a read's protected rows go to be checked (`integrity::Checks`): the rows a query
/// returns are queued with [`Row::seal`], and checked before the result leaves the store;
/// and where a write job's row images go to be sealed.
pub(crate) trait RowChecks {
    /// Queues the row whose columns start at `offset` (the layout of [`Table::select`]).
    fn queue(&self, row: &Row<'_>, offset: usize, table: &'static Table) -> SqlResult<()>;
    /// A write job wrote this full image of a row of `table` (sealed when the job ends).
    fn wrote(&self, table: &'static Table, values: Vec<OwnedValue>);
    /// A write job deleted this row without needing it genuine (a prune).
    fn forget(&self, table: &'static Table, values: &[OwnedValue]);
    /// A write job deleted this row (as the database reported it, with its MAC).
    fn removed(&self, table: &'static Table, values: Vec<OwnedValue>, mac: Option<Vec<u8>>);
    /// Whether this write's batch hands out the ids of `id_sequences` itself
    /// (`integrity::next_id`).
    fn batches_ids(&self) -> bool;
    /// The next id of sequence `name`, if this write's batch already holds the sequence.
    fn take_id(&self, name: &str) -> Option<i64>;
    /// This write read sequence `name`: as stored (`next` and MAC; `None` when there is no
    /// row yet), and the batch's next id after the one it took.
    fn hold_sequence(&self, name: &str, stored: Option<(i64, Option<Vec<u8>>)>, next: i64);
    /// Keeps `sql` (an `INSERT` of literals, `integrity::insert_deferred`) to run before
    /// this write's next statement, or with the round trip that ends the write.
    fn defer(&self, sql: String);
    /// What must reach the database before this write's next statement, taken: what the
    /// batch still owes it (the end of the previous writes' savepoints, their deferred
    /// rows), then the statements this write kept with [`RowChecks::defer`].
    fn take_deferred(&self) -> Vec<String>;
    /// Sending what [`RowChecks::take_deferred`] gave succeeded, or failed with `error`.
    fn flushed(&self, error: Option<&SqlError>);
    /// What this write's batch already read (and will check) under `key`
    /// ([`RowChecks::remember`]), while no kept write of the batch has changed a key table.
    fn recall(&self, key: &str) -> Option<Vec<OwnedValue>>;
    /// Keeps what a read of a key table (`integrity::KEY_TABLES`) under `key` found, for
    /// the batch's later writes: unless this write changes a key table itself, and only
    /// once it is kept (its read checked with the batch's).
    fn remember(&self, key: String, values: Vec<OwnedValue>);
}

/// One row of a result.
pub struct Row<'r> {
    inner: RowRef<'r>,
    checks: Option<&'r dyn RowChecks>,
}

enum RowRef<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    Postgres(&'r postgres::Row),
}

impl Row<'_> {
    /// Queues the integrity check of the protected row whose columns start at `offset`
    /// (the query appended [`Table::select`] there). Nothing on SQLite.
    pub(crate) fn seal(&self, offset: usize, table: &'static Table) -> SqlResult<()> {
        match self.checks {
            Some(checks) => checks.queue(self, offset, table),
            None => Ok(()),
        }
    }

    /// Column `idx` (0-based) as `T`.
    pub fn get<T: FromSql>(&self, idx: usize) -> SqlResult<T> {
        let decode = |reason: ValueError| SqlError::Decode {
            column: idx,
            reason,
        };
        match &self.inner {
            RowRef::Sqlite(row) => {
                use rusqlite::types::ValueRef as V;
                let value = match row.get_ref(idx)? {
                    V::Null => ValueRef::Null,
                    V::Integer(i) => ValueRef::Int(i),
                    V::Real(r) => ValueRef::Real(r),
                    V::Text(t) => {
                        ValueRef::Text(std::str::from_utf8(t).map_err(|e| decode(e.into()))?)
                    }
                    V::Blob(b) => ValueRef::Blob(b),
                };
                T::from_sql(value).map_err(decode)
            }
            RowRef::Postgres(row) => {
                let cell: PgCell<'_> = row.try_get(idx)?;
                T::from_sql(cell.0).map_err(decode)
            }
        }
    }

    /// The number of columns.
    pub fn len(&self) -> usize {
        match &self.inner {
            RowRef::Sqlite(row) => row.as_ref().column_count(),
            RowRef::Postgres(row) => row.len(),
        }
    }

    /// The raw value of column `idx`, for code that encodes whole rows.
    pub fn value(&self, idx: usize) -> SqlResult<OwnedValue> {
        match &self.inner {
            RowRef::Sqlite(row) => {
                use rusqlite::types::ValueRef as V;
                Ok(match row.get_ref(idx)? {
                    V::Null => OwnedValue::Null,
                    V::Integer(i) => OwnedValue::Int(i),
                    V::Real(r) => OwnedValue::Real(r),
                    V::Text(t) => OwnedValue::Text(String::from_utf8_lossy(t).into_owned()),
                    V::Blob(b) => OwnedValue::Blob(b.to_vec()),
                })
            }
            RowRef::Postgres(row) => {
                let cell: PgCell<'_> = row.try_get(idx)?;
                Ok(match cell.0 {
                    ValueRef::Null => OwnedValue::Null,
                    ValueRef::Int(i) => OwnedValue::Int(i),
                    ValueRef::Real(r) => OwnedValue::Real(r),
                    ValueRef::Text(t) => OwnedValue::Text(t.to_owned()),
                    ValueRef::Blob(b) => OwnedValue::Blob(b.to_vec()),
                })
            }
        }
    }
}

/// A column's value, owned.
#[derive(Debug, Clone, PartialEq)]
pub enum OwnedValue {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl OwnedValue {
    pub fn as_param(&self) -> Param<'_> {
        match self {
            Self::Null | Self::Real(_) => Param::Null,
            Self::Int(i) => Param::Int(*i),
            Self::Text(t) => Param::Text(t),
            Self::Blob(b) => Param::Blob(b),
        }
    }
}

impl ToParam for OwnedValue {
    fn to_param(&self) -> Param<'_> {
        self.as_param()
    }
}

/// The rows of one statement of plain SQL, as text (`None`: NULL).
pub type TextRows = Vec<Vec<Option<String>>>;

/// A PostgreSQL connection with its prepared statements.
pub struct PgSession {
    client: RefCell<postgres::Client>,
    statements: RefCell<HashMap<String, postgres::Statement>>,
    /// A statement failed since [`PgSession::clear_failure`]: the transaction, if one is
    /// open, is aborted until it is rolled back (to a savepoint).
    failed: Cell<bool>,
    /// Round trips to the server since the session opened (each prepare, statement and
    /// batch of plain SQL is one): what `docs/performance.md` profiles writes by.
    round_trips: Cell<u64>,
}

/// Most statements kept prepared per session; past it the map is emptied (the store has
/// fewer distinct statements than this).
const MAX_PREPARED: usize = 512;

impl PgSession {
    pub fn new(client: postgres::Client) -> Self {
        Self {
            client: RefCell::new(client),
            statements: RefCell::new(HashMap::new()),
            failed: Cell::new(false),
            round_trips: Cell::new(0),
        }
    }

    /// Round trips to the server since the session opened.
    pub fn round_trips(&self) -> u64 {
        self.round_trips.get()
    }

    fn trip(&self) {
        self.round_trips.set(self.round_trips.get() + 1);
    }

    /// Whether the server closed the connection.
    pub fn is_closed(&self) -> bool {
        self.client.borrow().is_closed()
    }

    pub fn clear_failure(&self) {
        self.failed.set(false);
    }

    /// Runs several statements of plain SQL, without parameters (transaction control,
    /// migrations).
    pub fn batch(&self, sql: &str) -> SqlResult<()> {
        self.trip();
        let out = self.client.borrow_mut().batch_execute(sql);
        self.note(out)
    }

    /// Runs several statements of plain SQL (no parameters: every value in them is a
    /// literal the caller built) in one round trip, and answers each statement's rows,
    /// as text (`None`: NULL), statement by statement in order.
    pub fn simple_rows(&self, sql: &str) -> SqlResult<Vec<TextRows>> {
        self.trip();
        let out = self.client.borrow_mut().simple_query(sql);
        let messages = self.note(out)?;
        let mut statements = Vec::new();
        let mut rows: TextRows = Vec::new();
        for message in &messages {
            match message {
                postgres::SimpleQueryMessage::Row(row) => rows.push(
                    (0..row.len())
                        .map(|i| row.get(i).map(str::to_owned))
                        .collect(),
                ),
                postgres::SimpleQueryMessage::CommandComplete(_) => {
                    statements.push(std::mem::take(&mut rows));
                }
                _ => {}
            }
        }
        Ok(statements)
    }

    fn note<T>(&self, out: Result<T, postgres::Error>) -> SqlResult<T> {
        out.map_err(|e| {
            self.failed.set(true);
            SqlError::Postgres(e)
        })
    }

    fn statement(&self, sql: &str) -> SqlResult<postgres::Statement> {
        if let Some(stmt) = self.statements.borrow().get(sql) {
            return Ok(stmt.clone());
        }
        let translated = to_postgres(sql);
        self.trip();
        let stmt = self.note(self.client.borrow_mut().prepare(&translated))?;
        let mut cache = self.statements.borrow_mut();
        if cache.len() >= MAX_PREPARED {
            cache.clear();
        }
        cache.insert(sql.to_owned(), stmt.clone());
        Ok(stmt)
    }

    /// Runs `sql` (prepared once) with `params` through `run`: the client's `query` or
    /// `execute`.
    fn run<T>(
        &self,
        sql: &str,
        params: &[&dyn ToParam],
        run: impl FnOnce(
            &mut postgres::Client,
            &postgres::Statement,
            &[&(dyn postgres::types::ToSql + Sync)],
        ) -> Result<T, postgres::Error>,
    ) -> SqlResult<T> {
        let stmt = self.statement(sql)?;
        let values: Vec<Param<'_>> = params.iter().map(|p| p.to_param()).collect();
        let refs: Vec<&(dyn postgres::types::ToSql + Sync)> = values
            .iter()
            .map(|v| v as &(dyn postgres::types::ToSql + Sync))
            .collect();
        self.trip();
        let out = run(&mut self.client.borrow_mut(), &stmt, &refs);
        self.note(out)
    }

    fn run_query(&self, sql: &str, params: &[&dyn ToParam]) -> SqlResult<Vec<postgres::Row>> {
        self.run(sql, params, |client, stmt, refs| client.query(stmt, refs))
    }

    fn run_execute(&self, sql: &str, params: &[&dyn ToParam]) -> SqlResult<u64> {
        self.run(sql, params, |client, stmt, refs| client.execute(stmt, refs))
    }

    /// The client itself, for what the facade does not cover (`LISTEN`).
    pub fn client(&self) -> std::cell::RefMut<'_, postgres::Client> {
        self.client.borrow_mut()
    }
}

/// `?N` → `$N` outside quoted text; `LIMIT ?N + 0` / `OFFSET ?N + 0` → `… $N::bigint`.
pub fn to_postgres(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let bytes = sql.as_bytes();
    let mut i = 0;
    let mut quoted = false;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'\'' {
            quoted = !quoted;
            out.push('\'');
            i += 1;
            continue;
        }
        if !quoted && c == b'?' {
            let start = i + 1;
            let mut end = start;
            while end < bytes.len() && bytes[end].is_ascii_digit() {
                end += 1;
            }
            if end > start {
                out.push('$');
                out.push_str(&sql[start..end]);
                // The paged form: a bigint, not `$N + 0` (typed int4 by PostgreSQL).
                let before = out[..out.len() - (end - start) - 1].trim_end();
                let paged = before.ends_with("LIMIT") || before.ends_with("OFFSET");
                if paged && sql[end..].starts_with(" + 0") {
                    out.push_str("::bigint");
                    i = end + " + 0".len();
                } else {
                    i = end;
                }
                continue;
            }
        }
        // Copy one UTF-8 character.
        let len = utf8_len(c);
        out.push_str(&sql[i..i + len]);
        i += len;
    }
    out
}

fn utf8_len(first: u8) -> usize {
    match first {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    }
}

/// A connection of either engine, borrowed for one read or one write; on a store that
/// checks row integrity, with the operation's [`RowChecks`].
#[derive(Clone, Copy)]
pub struct Conn<'c> {
    db: Db<'c>,
    checks: Option<&'c dyn RowChecks>,
}

#[derive(Clone, Copy)]
enum Db<'c> {
    Sqlite(&'c rusqlite::Connection),
    Postgres(&'c PgSession),
}

impl<'c> Conn<'c> {
    pub fn sqlite(conn: &'c rusqlite::Connection) -> Self {
        Self {
            db: Db::Sqlite(conn),
            checks: None,
        }
    }

    pub fn postgres(session: &'c PgSession) -> Self {
        Self {
            db: Db::Postgres(session),
            checks: None,
        }
    }

    /// This connection, queueing the rows it reads for `checks`.
    pub(crate) fn with_checks(self, checks: &'c dyn RowChecks) -> Self {
        Self {
            checks: Some(checks),
            ..self
        }
    }

    /// The operation's row checks (a PostgreSQL store's; `None` on SQLite).
    pub(crate) fn checks(&self) -> Option<&'c dyn RowChecks> {
        self.checks
    }

    pub fn engine(&self) -> Engine {
        match self.db {
            Db::Sqlite(_) => Engine::Sqlite,
            Db::Postgres(_) => Engine::Postgres,
        }
    }

    /// Whether a statement failed on this PostgreSQL session since the writer last
    /// cleared it (never, for SQLite).
    pub fn failed(&self) -> bool {
        match self.db {
            Db::Sqlite(_) => false,
            Db::Postgres(s) => s.failed.get(),
        }
    }

    /// Runs the statements this write deferred (`RowChecks::defer`), in one round trip,
    /// before any other statement of it: whatever it runs sees its own rows.
    fn flush(&self, session: &PgSession) -> SqlResult<()> {
        let Some(checks) = self.checks else {
            return Ok(());
        };
        let deferred = checks.take_deferred();
        if deferred.is_empty() {
            return Ok(());
        }
        let sent = session.batch(&deferred.join("; "));
        checks.flushed(sent.as_ref().err());
        sent
    }

    /// Runs a statement; the number of rows it changed.
    pub fn execute(&self, sql: &str, params: &[&dyn ToParam]) -> SqlResult<usize> {
        if let Db::Postgres(s) = self.db {
            self.flush(s)?;
        }
        match self.db {
            Db::Sqlite(c) => {
                let values: Vec<Param<'_>> = params.iter().map(|p| p.to_param()).collect();
                Ok(c.prepare_cached(sql)?
                    .execute(rusqlite::params_from_iter(values.iter()))?)
            }
            Db::Postgres(s) => {
                Ok(usize::try_from(s.run_execute(sql, params)?).unwrap_or(usize::MAX))
            }
        }
    }

    /// Every row of a query, each turned into a `T` by `f`.
    pub fn query_map<T>(
        &self,
        sql: &str,
        params: &[&dyn ToParam],
        mut f: impl FnMut(&Row<'_>) -> SqlResult<T>,
    ) -> SqlResult<Vec<T>> {
        if let Db::Postgres(s) = self.db {
            self.flush(s)?;
        }
        match self.db {
            Db::Sqlite(c) => {
                let values: Vec<Param<'_>> = params.iter().map(|p| p.to_param()).collect();
                let mut stmt = c.prepare_cached(sql)?;
                let mut rows = stmt.query(rusqlite::params_from_iter(values.iter()))?;
                let mut out = Vec::new();
                while let Some(row) = rows.next()? {
                    out.push(f(&Row {
                        inner: RowRef::Sqlite(row),
                        checks: self.checks,
                    })?);
                }
                Ok(out)
            }
            Db::Postgres(s) => {
                let rows = s.run_query(sql, params)?;
                rows.iter()
                    .map(|row| {
                        f(&Row {
                            inner: RowRef::Postgres(row),
                            checks: self.checks,
                        })
                    })
                    .collect()
            }
        }
    }

    /// The first row of a query, if any.
    pub fn query_opt<T>(
        &self,
        sql: &str,
        params: &[&dyn ToParam],
        f: impl FnOnce(&Row<'_>) -> SqlResult<T>,
    ) -> SqlResult<Option<T>> {
        if let Db::Postgres(s) = self.db {
            self.flush(s)?;
        }
        match self.db {
            Db::Sqlite(c) => {
                let values: Vec<Param<'_>> = params.iter().map(|p| p.to_param()).collect();
                let mut stmt = c.prepare_cached(sql)?;
                let mut rows = stmt.query(rusqlite::params_from_iter(values.iter()))?;
                match rows.next()? {
                    Some(row) => Ok(Some(f(&Row {
                        inner: RowRef::Sqlite(row),
                        checks: self.checks,
                    })?)),
                    None => Ok(None),
                }
            }
            Db::Postgres(s) => {
                let rows = s.run_query(sql, params)?;
                match rows.first() {
                    Some(row) => Ok(Some(f(&Row {
                        inner: RowRef::Postgres(row),
                        checks: self.checks,
                    })?)),
                    None => Ok(None),
                }
            }
        }
    }

    /// The first row of a query; [`SqlError::NoRows`] if there is none.
    pub fn query_row<T>(
        &self,
        sql: &str,
        params: &[&dyn ToParam],
        f: impl FnOnce(&Row<'_>) -> SqlResult<T>,
    ) -> SqlResult<T> {
        self.query_opt(sql, params, f)?.ok_or(SqlError::NoRows)
    }

    /// Runs `f` in a read-only transaction: every statement sees one snapshot.
    pub fn snapshot<T, E: From<SqlError>>(
        &self,
        f: impl FnOnce(Conn<'_>) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        match self.db {
            Db::Sqlite(c) => {
                let tx = c.unchecked_transaction().map_err(SqlError::from)?;
                let out = f(Conn {
                    db: Db::Sqlite(&tx),
                    checks: self.checks,
                })?;
                tx.commit().map_err(SqlError::from)?;
                Ok(out)
            }
            Db::Postgres(s) => {
                s.batch("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
                let out = f(*self);
                // A read-only transaction: ending it either way keeps nothing.
                let end = s.batch(if out.is_ok() { "COMMIT" } else { "ROLLBACK" });
                let out = out?;
                end?;
                Ok(out)
            }
        }
    }

    /// The SQLite connection, for SQLite-only code (pragmas, tests).
    pub fn as_sqlite(&self) -> Option<&'c rusqlite::Connection> {
        match self.db {
            Db::Sqlite(c) => Some(c),
            Db::Postgres(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_numbered_for_postgres() {
        assert_eq!(
            to_postgres("SELECT a FROM t WHERE b = ?1 AND c = '?2' AND d = ?12"),
            "SELECT a FROM t WHERE b = $1 AND c = '?2' AND d = $12"
        );
        assert_eq!(
            to_postgres("SELECT a FROM t WHERE b = ?1 ORDER BY a LIMIT ?2 + 0 OFFSET ?3 + 0"),
            "SELECT a FROM t WHERE b = $1 ORDER BY a LIMIT $2::bigint OFFSET $3::bigint"
        );
        // Only the paged form loses its `+ 0`.
        assert_eq!(to_postgres("SELECT ?1 + 0"), "SELECT $1 + 0");
        assert_eq!(to_postgres("SELECT 'é?1', ?1"), "SELECT 'é?1', $1");
    }

    #[test]
    fn sqlite_reads_and_binds_every_kind() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        c.execute_batch("CREATE TABLE t (i INTEGER, f INTEGER, s TEXT, b BLOB, n TEXT)")
            .unwrap();
        let conn = Conn::sqlite(&c);
        let blob = [7u8; 4];
        let none: Option<String> = None;
        assert_eq!(
            conn.execute(
                "INSERT INTO t VALUES (?1, ?2, ?3, ?4, ?5)",
                params![-5i64, true, "x", blob, none]
            )
            .unwrap(),
            1
        );
        let row: (i64, bool, String, [u8; 4], Option<String>) = conn
            .query_row("SELECT i, f, s, b, n FROM t", params![], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .unwrap();
        assert_eq!(row, (-5, true, "x".into(), blob, None));
        let err = conn
            .query_row("SELECT s FROM t", params![], |r| r.get::<i64>(0))
            .unwrap_err();
        assert!(matches!(err, SqlError::Decode { column: 0, .. }), "{err}");
        assert!(matches!(
            conn.query_row("SELECT i FROM t WHERE i = 99", params![], |r| r
                .get::<i64>(0)),
            Err(SqlError::NoRows)
        ));
    }
}
