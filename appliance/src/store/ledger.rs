//! The credit ledger: every grant, top-up and charge of an account is one row, and the
//! account's balance (`credit_balances`) is updated in the same transaction, so the two
//! always agree (`balance = sum(amount_cents)`). A payment intent is credited at most
//! once (`UNIQUE (payment_intent_id)`), and no row can take a balance below zero
//! (`CHECK (balance_after >= 0)`, enforced again in code with a clear error).
//!
//! The ledger is keyed by the account row, which survives the conversion of an account
//! to ChainSecured together with its `apiKeyHash`.
//!
//! A billed management write takes its [`Charge`] as an argument and runs through
//! [`Store::write_charged`], which applies the charge in the write's own transaction,
//! after the write succeeded: either both the effect and its charge commit, or neither
//! does; with too little credit the write fails with [`StoreError::PaymentRequired`] and
//! nothing changed. A new account's starting credit ([`InitialCredit`]) is granted the
//! same way, in the transaction that creates the account.

use rusqlite::{Connection, OptionalExtension, Transaction, params};

use super::base::AccountId;
use super::{Page, Result, Store, StoreError, now_unix};

/// Schema of the ledger (store migration 6).
pub(super) const MIGRATION_SQL: &str = r#"
-- One row per credit movement; amount_cents > 0 credits, < 0 charges. balance_after is
-- the account's balance once the row applied (never negative).
CREATE TABLE credit_ledger (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id        INTEGER NOT NULL REFERENCES accounts (id),
    kind              TEXT    NOT NULL CHECK (kind IN ('initial', 'top_up', 'charge')),
    amount_cents      INTEGER NOT NULL CHECK (amount_cents <> 0),
    balance_after     INTEGER NOT NULL CHECK (balance_after >= 0),
    -- The Stripe payment intent a top-up came from; each is credited at most once.
    payment_intent_id TEXT    UNIQUE,
    -- What was charged (the endpoint), or where the credit came from.
    operation         TEXT    NOT NULL,
    created_at        INTEGER NOT NULL,
    CHECK ((kind = 'charge') = (amount_cents < 0)),
    CHECK ((kind = 'top_up') = (payment_intent_id IS NOT NULL))
);
CREATE INDEX credit_ledger_by_account ON credit_ledger (account_id, id);

-- The current balance of each account with ledger rows, kept with them.
CREATE TABLE credit_balances (
    account_id    INTEGER PRIMARY KEY REFERENCES accounts (id),
    balance_cents INTEGER NOT NULL CHECK (balance_cents >= 0),
    updated_at    INTEGER NOT NULL
);
"#;

/// The kind of a ledger row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedgerKind {
    /// The starting credit of a new account (`billing.initial_credit_cents`).
    Initial,
    /// A card payment (a succeeded Stripe payment intent).
    TopUp,
    /// A billed call.
    Charge,
}

impl LedgerKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Initial => "initial",
            Self::TopUp => "top_up",
            Self::Charge => "charge",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "initial" => Some(Self::Initial),
            "top_up" => Some(Self::TopUp),
            "charge" => Some(Self::Charge),
            _ => None,
        }
    }
}

/// One ledger row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerEntry {
    pub id: i64,
    pub kind: LedgerKind,
    /// Positive for credit, negative for a charge.
    pub amount_cents: i64,
    pub balance_after: u64,
    pub payment_intent_id: Option<String>,
    pub operation: String,
    pub created_at: i64,
}

/// What crediting a payment intent did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credited {
    /// This call credited it.
    Now { cents: u64, balance: u64 },
    /// It had been credited to this account before; nothing changed.
    Before { balance: u64 },
}

fn to_i64(cents: u64) -> Result<i64> {
    i64::try_from(cents).map_err(|_| StoreError::Conflict("the amount is too large".into()))
}

/// The balance of `account` as of this connection's snapshot.
fn balance_in(conn: &Connection, account: AccountId) -> Result<u64> {
    let balance: Option<i64> = conn
        .prepare_cached("SELECT balance_cents FROM credit_balances WHERE account_id = ?1")?
        .query_row([account.0], |r| r.get(0))
        .optional()?;
    Ok(balance.map_or(0, |b| u64::try_from(b).unwrap_or(0)))
}

/// Appends a row and moves the balance with it. `amount` must not take the balance below
/// zero (the caller checks; the schema refuses it anyway).
fn append(
    tx: &Transaction<'_>,
    account: AccountId,
    kind: LedgerKind,
    amount: i64,
    payment_intent_id: Option<&str>,
    operation: &str,
) -> Result<u64> {
    let before = to_i64(balance_in(tx, account)?)?;
    let after = before
        .checked_add(amount)
        .filter(|a| *a >= 0)
        .ok_or_else(|| StoreError::PaymentRequired(insufficient(before, -amount)))?;
    let now = now_unix();
    tx.prepare_cached(
        "INSERT INTO credit_ledger (account_id, kind, amount_cents, balance_after, payment_intent_id, operation, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        account.0,
        kind.as_str(),
        amount,
        after,
        payment_intent_id,
        operation,
        now
    ])?;
    tx.prepare_cached(
        "INSERT INTO credit_balances (account_id, balance_cents, updated_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (account_id) DO UPDATE SET balance_cents = excluded.balance_cents, updated_at = excluded.updated_at",
    )?
    .execute(params![account.0, after, now])?;
    Ok(u64::try_from(after).unwrap_or(0))
}

fn insufficient(balance: i64, needed: i64) -> String {
    format!(
        "insufficient credit: this call costs {needed} cent(s) and the account has {balance}; add credit with /billing/create_payment_intent and /billing/confirm_payment"
    )
}

/// Charges `cents` for `operation` in `tx`, or fails with `PaymentRequired` (leaving the
/// balance as it was) when the account has less.
pub(super) fn charge_in(
    tx: &Transaction<'_>,
    account: AccountId,
    cents: u64,
    operation: &str,
) -> Result<u64> {
    if cents == 0 {
        return balance_in(tx, account);
    }
    append(
        tx,
        account,
        LedgerKind::Charge,
        -to_i64(cents)?,
        None,
        operation,
    )
}

/// What a billed write costs: `cents` for `operation` (the ledger row's `operation`).
/// A charge of 0 cents (billing disabled, or a price of 0) writes no ledger row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    pub cents: u64,
    pub operation: String,
}

impl Charge {
    /// No charge: a write that is free.
    pub fn free() -> Self {
        Self {
            cents: 0,
            operation: String::new(),
        }
    }
}

/// The starting credit of a new account, granted in the transaction that creates it
/// (0: none, and no ledger row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitialCredit {
    pub cents: u64,
}

impl InitialCredit {
    pub const NONE: Self = Self { cents: 0 };
}

/// Grants `credit` to the new `account` in `tx`.
pub(super) fn grant_initial(
    tx: &Transaction<'_>,
    account: AccountId,
    credit: InitialCredit,
) -> Result<()> {
    if credit.cents > 0 {
        append(
            tx,
            account,
            LedgerKind::Initial,
            to_i64(credit.cents)?,
            None,
            "initial credit",
        )?;
    }
    Ok(())
}

impl Store {
    /// Runs `f` in one write transaction and, once it succeeded, applies `charge` to
    /// `account` in the same transaction. A write that fails for its own reason is not
    /// charged; a charge the account cannot pay fails the write with `PaymentRequired`
    /// and keeps nothing of it.
    pub(super) async fn write_charged<T, F>(
        &self,
        account: AccountId,
        charge: Charge,
        f: F,
    ) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>) -> Result<T> + Send + 'static,
    {
        self.write(move |tx| {
            let out = f(tx)?;
            charge_in(tx, account, charge.cents, &charge.operation)?;
            Ok(out)
        })
        .await
    }

    /// The account's available credit, in cents.
    pub async fn balance(&self, account: AccountId) -> Result<u64> {
        self.read(move |conn| balance_in(conn, account)).await
    }

    /// Credits a succeeded payment of `cents` from `payment_intent_id`, once: a second
    /// call for the same intent changes nothing (`Credited::Before`), and an intent
    /// credited to another account is refused.
    pub async fn credit_payment(
        &self,
        account: AccountId,
        payment_intent_id: String,
        cents: u64,
    ) -> Result<Credited> {
        self.write(move |tx| {
            let owner: Option<i64> = tx
                .prepare_cached(
                    "SELECT account_id FROM credit_ledger WHERE payment_intent_id = ?1",
                )?
                .query_row([&payment_intent_id], |r| r.get(0))
                .optional()?;
            match owner {
                Some(owner) if owner == account.0 => Ok(Credited::Before {
                    balance: balance_in(tx, account)?,
                }),
                Some(_) => Err(StoreError::Conflict(
                    "this payment was credited to another account".into(),
                )),
                None => {
                    if cents == 0 {
                        return Err(StoreError::Conflict("the payment is of zero cents".into()));
                    }
                    let balance = append(
                        tx,
                        account,
                        LedgerKind::TopUp,
                        to_i64(cents)?,
                        Some(&payment_intent_id),
                        "card payment",
                    )?;
                    Ok(Credited::Now { cents, balance })
                }
            }
        })
        .await
    }

    /// Charges up to `cents` for `operation`, never more than the balance (an action's
    /// run time is charged after it ran, within the credit reserved for it). Returns the
    /// cents charged and the balance after.
    pub async fn charge_at_most(
        &self,
        account: AccountId,
        cents: u64,
        operation: &'static str,
    ) -> Result<(u64, u64)> {
        self.write(move |tx| {
            let balance = balance_in(tx, account)?;
            let due = cents.min(balance);
            if due == 0 {
                return Ok((0, balance));
            }
            let after = charge_in(tx, account, due, operation)?;
            Ok((due, after))
        })
        .await
    }

    /// Charges exactly `cents` for `operation`, or fails with `PaymentRequired`.
    pub async fn charge(
        &self,
        account: AccountId,
        cents: u64,
        operation: &'static str,
    ) -> Result<u64> {
        self.write(move |tx| charge_in(tx, account, cents, operation))
            .await
    }

    /// The account's ledger rows, oldest first.
    pub async fn ledger(&self, account: AccountId, page: Page) -> Result<Vec<LedgerEntry>> {
        self.read(move |conn| {
            let Some((limit, offset)) = page.limit_offset() else {
                return Ok(Vec::new());
            };
            let mut stmt = conn.prepare_cached(
                "SELECT id, kind, amount_cents, balance_after, payment_intent_id, operation, created_at
                 FROM credit_ledger WHERE account_id = ?1 ORDER BY id LIMIT ?2 + 0 OFFSET ?3 + 0",
            )?;
            let rows = stmt.query_map(params![account.0, limit, offset], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, i64>(6)?,
                ))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (id, kind, amount_cents, balance_after, payment_intent_id, operation, created_at) =
                    row?;
                let kind = LedgerKind::parse(&kind)
                    .ok_or_else(|| StoreError::Corrupt(format!("ledger row {id} has kind {kind}")))?;
                out.push(LedgerEntry {
                    id,
                    kind,
                    amount_cents,
                    balance_after: u64::try_from(balance_after).unwrap_or(0),
                    payment_intent_id,
                    operation,
                    created_at,
                });
            }
            Ok(out)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::base::CachedSql as _;
    use crate::store::testing::{new_account, store_with_account};

    async fn sum_and_count(store: &Store, account: AccountId) -> (i64, i64) {
        store
            .read(move |c| {
                Ok(c.query_row_cached(
                    "SELECT coalesce(sum(amount_cents), 0), count(*) FROM credit_ledger WHERE account_id = ?1",
                    [account.0],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )?)
            })
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn balance_is_the_sum_of_the_ledger() {
        let (_dir, store, account) = store_with_account(1).await;
        assert_eq!(store.balance(account).await.unwrap(), 0);
        let credited = store
            .credit_payment(account, "pi_a".into(), 700)
            .await
            .unwrap();
        assert_eq!(
            credited,
            Credited::Now {
                cents: 700,
                balance: 700
            }
        );
        assert_eq!(store.charge(account, 3, "add_group").await.unwrap(), 697);
        assert_eq!(
            store
                .charge_at_most(account, 5, "lit_action")
                .await
                .unwrap(),
            (5, 692)
        );
        assert_eq!(store.balance(account).await.unwrap(), 692);
        assert_eq!(sum_and_count(&store, account).await, (692, 3));
        let rows = store
            .ledger(
                account,
                Page {
                    number: 0,
                    size: 10,
                },
            )
            .await
            .unwrap();
        let kinds: Vec<_> = rows
            .iter()
            .map(|r| (r.kind, r.amount_cents, r.balance_after))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (LedgerKind::TopUp, 700, 700),
                (LedgerKind::Charge, -3, 697),
                (LedgerKind::Charge, -5, 692)
            ]
        );
        assert_eq!(rows[0].payment_intent_id.as_deref(), Some("pi_a"));
        assert_eq!(rows[1].operation, "add_group");
    }

    #[tokio::test]
    async fn a_payment_is_credited_once() {
        let (_dir, store, a) = store_with_account(1).await;
        let b = new_account(&store, 2).await;
        store.credit_payment(a, "pi_x".into(), 500).await.unwrap();
        for _ in 0..3 {
            assert_eq!(
                store.credit_payment(a, "pi_x".into(), 500).await.unwrap(),
                Credited::Before { balance: 500 }
            );
        }
        // Concurrent attempts: exactly one credits.
        let mut tasks = Vec::new();
        for _ in 0..10 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                store.credit_payment(a, "pi_y".into(), 600).await.unwrap()
            }));
        }
        let mut now = 0;
        for t in tasks {
            if matches!(t.await.unwrap(), Credited::Now { .. }) {
                now += 1;
            }
        }
        assert_eq!(now, 1);
        assert_eq!(store.balance(a).await.unwrap(), 1100);
        // Another account cannot take it.
        let err = store
            .credit_payment(b, "pi_x".into(), 500)
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Conflict(_)), "{err}");
        assert_eq!(store.balance(b).await.unwrap(), 0);
        // The schema refuses a second row for an intent even if code did not check.
        let dup = store
            .write(move |tx| {
                tx.execute_cached(
                    "INSERT INTO credit_ledger (account_id, kind, amount_cents, balance_after, payment_intent_id, operation, created_at)
                     VALUES (?1, 'top_up', 500, 500, 'pi_x', 'x', 0)",
                    [b.0],
                )?;
                Ok(())
            })
            .await;
        assert!(dup.is_err());
    }

    #[tokio::test]
    async fn charges_never_go_below_zero() {
        let (_dir, store, account) = store_with_account(1).await;
        let err = store.charge(account, 1, "add_group").await.unwrap_err();
        assert!(matches!(err, StoreError::PaymentRequired(_)), "{err}");
        assert_eq!(sum_and_count(&store, account).await, (0, 0));
        store
            .credit_payment(account, "pi_a".into(), 500)
            .await
            .unwrap();
        let err = store.charge(account, 501, "x").await.unwrap_err();
        assert!(matches!(err, StoreError::PaymentRequired(_)));
        assert_eq!(
            store
                .charge_at_most(account, 900, "lit_action")
                .await
                .unwrap(),
            (500, 0)
        );
        assert_eq!(
            store
                .charge_at_most(account, 2, "lit_action")
                .await
                .unwrap(),
            (0, 0)
        );
        assert_eq!(sum_and_count(&store, account).await, (0, 2));
        // The schema refuses a negative balance too.
        let raw = store
            .write(move |tx| {
                tx.execute_cached(
                    "UPDATE credit_balances SET balance_cents = -1 WHERE account_id = ?1",
                    [account.0],
                )?;
                Ok(())
            })
            .await;
        assert!(raw.is_err());
    }

    #[tokio::test]
    async fn a_charge_commits_with_the_write_or_not_at_all() {
        let (_dir, store, account) = store_with_account(1).await;
        let insert_group = move |tx: &Transaction<'_>| -> Result<()> {
            tx.execute_cached(
                "INSERT INTO groups (account_id, name, created_at, updated_at) VALUES (?1, 'g', 0, 0)",
                [account.0],
            )?;
            Ok(())
        };
        let groups = |store: Store| async move {
            store
                .read(|c| {
                    Ok(c.query_row_cached("SELECT count(*) FROM groups", [], |r| {
                        r.get::<_, i64>(0)
                    })?)
                })
                .await
                .unwrap()
        };
        let charge = || Charge {
            cents: 1,
            operation: "add_group".into(),
        };

        // No credit: the write fails with PaymentRequired and leaves nothing.
        let out = store.write_charged(account, charge(), insert_group).await;
        assert!(
            matches!(out, Err(StoreError::PaymentRequired(_))),
            "{out:?}"
        );
        assert_eq!(groups(store.clone()).await, 0);

        // With credit: the write and its charge commit together, once per write.
        store
            .credit_payment(account, "pi_a".into(), 500)
            .await
            .unwrap();
        store
            .write_charged(account, charge(), insert_group)
            .await
            .unwrap();
        assert_eq!(groups(store.clone()).await, 1);
        assert_eq!(store.balance(account).await.unwrap(), 499);

        // A write that fails for its own reason is not charged, and its own error wins.
        let out: Result<()> = store
            .write_charged(account, charge(), |_| {
                Err(StoreError::NotFound("no such group".into()))
            })
            .await;
        assert!(matches!(out, Err(StoreError::NotFound(_))));
        assert_eq!(store.balance(account).await.unwrap(), 499);

        // A free write (billing disabled) is not charged and writes no ledger row.
        store
            .write_charged(account, Charge::free(), insert_group)
            .await
            .unwrap();
        assert_eq!(store.balance(account).await.unwrap(), 499);
        assert_eq!(sum_and_count(&store, account).await, (499, 2));
    }

    #[tokio::test]
    async fn initial_credit_is_a_ledger_row_of_the_new_account() {
        let (_dir, store) = crate::store::testing::open_store();
        let account = store
            .create_account(
                crate::store::testing::new_account_spec(7),
                InitialCredit { cents: 250 },
            )
            .await
            .unwrap();
        assert_eq!(store.balance(account).await.unwrap(), 250);
        let rows = store
            .ledger(
                account,
                Page {
                    number: 0,
                    size: 10,
                },
            )
            .await
            .unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].kind, LedgerKind::Initial);
    }
}
