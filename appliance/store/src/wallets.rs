//! Wallets (PKPs): the public identity of keys held by keyservice, per account.

use keyservice_api::{Address, DerivationPath, PkpId};

use chain_contracts::ops::MirrorOp;

use super::base::{AccountId, WalletIdentity};
use super::integrity::{self, WALLETS, columns};
use super::ledger::Charge;
use super::sql::{Conn, Row, SqlResult, params};
use super::{Page, Result, Store, StoreError, now_unix, outbox};

/// How a request names a wallet: by `pkp_id` or by address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalletRef {
    Pkp(PkpId),
    Address(Address),
}

impl std::fmt::Display for WalletRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Pkp(id) => id.fmt(f),
            Self::Address(a) => f.write_str(&a.to_checksum()),
        }
    }
}

#[derive(Debug, Clone)]
pub struct WalletRecord {
    /// The store's row id (creation order); never shown to clients.
    pub row: i64,
    pub pkp_id: PkpId,
    pub address: Address,
    pub derivation_path: DerivationPath,
    pub name: String,
    pub description: String,
}

/// What [`wallet_from`] reads: the record's columns of `wallets w`, then the row for its
/// integrity check.
pub(super) fn wallet_columns() -> String {
    format!(
        "w.id, w.pkp_id, w.address, w.derivation_path, w.name, w.description, {}",
        WALLETS.select("w")
    )
}

/// Columns [`wallet_columns`] selects.
pub(super) const WALLET_WIDTH: usize = 6 + WALLETS.width();

pub(super) fn wallet_from(row: &Row<'_>) -> SqlResult<WalletRecord> {
    row.seal(6, &WALLETS)?;
    Ok(WalletRecord {
        row: row.get(0)?,
        pkp_id: PkpId(row.get(1)?),
        address: Address(row.get(2)?),
        derivation_path: DerivationPath(row.get(3)?),
        name: row.get(4)?,
        description: row.get(5)?,
    })
}

/// Inserts a wallet for `account` (or unattached, for `None`).
pub(super) fn insert(
    tx: Conn<'_>,
    account: Option<AccountId>,
    wallet: &WalletIdentity,
    name: &str,
    description: &str,
) -> Result<i64> {
    integrity::insert_new(
        tx,
        &WALLETS,
        columns![
            ("account_id", account.map(|a| a.0)),
            ("pkp_id", wallet.pkp_id.0),
            ("address", wallet.address.0),
            ("derivation_path", wallet.derivation_path.0),
            ("name", name),
            ("description", description),
            ("created_at", now_unix()),
            ("minted_by", None::<Vec<u8>>),
        ],
    )
    .map_err(|e| {
        if integrity::is_unique_violation(&e) {
            StoreError::Conflict("this wallet already exists".into())
        } else {
            e
        }
    })
}

/// The wallet of `account` named by `wallet`, if it has one.
pub(super) fn find(
    conn: Conn<'_>,
    account: AccountId,
    wallet: &WalletRef,
) -> Result<Option<WalletRecord>> {
    let (sql, key): (&str, &[u8]) = match wallet {
        WalletRef::Pkp(id) => ("pkp_id", id.0.as_slice()),
        WalletRef::Address(a) => ("address", a.0.as_slice()),
    };
    Ok(conn.query_opt(
        &format!(
            "SELECT {} FROM wallets w WHERE w.account_id = ?1 AND w.{sql} = ?2",
            wallet_columns()
        ),
        params![account.0, key],
        wallet_from,
    )?)
}

/// As `find`, but a missing wallet is `NotFound`.
pub(super) fn require(
    conn: Conn<'_>,
    account: AccountId,
    wallet: &WalletRef,
) -> Result<WalletRecord> {
    find(conn, account, wallet)?
        .ok_or_else(|| StoreError::NotFound(format!("no wallet {wallet} in this account")))
}

/// The mirror of a wallet's registration on its account.
pub(super) fn register_op(wallet: &WalletIdentity, name: &str, description: &str) -> MirrorOp {
    MirrorOp::RegisterWallet {
        wallet: alloy::primitives::Address::from(wallet.address.0),
        derivation_path: alloy::primitives::B256::from(wallet.derivation_path.0),
        name: name.to_owned(),
        description: description.to_owned(),
    }
}

impl Store {
    /// Records a wallet keyservice created for `account`.
    pub async fn create_wallet(
        &self,
        account: AccountId,
        wallet: WalletIdentity,
        name: String,
        description: String,
        charge: Charge,
    ) -> Result<WalletRecord> {
        self.write_charged(account, charge, move |tx| {
            let row = insert(tx, Some(account), &wallet, &name, &description)?;
            outbox::record(tx, account, &register_op(&wallet, &name, &description))?;
            Ok(WalletRecord {
                row,
                pkp_id: wallet.pkp_id,
                address: wallet.address,
                derivation_path: wallet.derivation_path,
                name,
                description,
            })
        })
        .await
    }

    /// The account's wallets in creation order.
    pub async fn list_wallets(&self, account: AccountId, page: Page) -> Result<Vec<WalletRecord>> {
        let Some((limit, offset)) = page.limit_offset() else {
            return Ok(Vec::new());
        };
        self.read(move |conn| {
            Ok(conn.query_map(
                &format!(
                    "SELECT {} FROM wallets w WHERE w.account_id = ?1 ORDER BY w.id LIMIT ?2 + 0 OFFSET ?3 + 0",
                    wallet_columns()
                ),
                params![account.0, limit, offset],
                wallet_from,
            )?)
        })
        .await
    }

    /// The wallet of `account` named by `wallet`.
    pub async fn wallet(&self, account: AccountId, wallet: WalletRef) -> Result<WalletRecord> {
        self.read(move |conn| require(conn, account, &wallet)).await
    }
}
