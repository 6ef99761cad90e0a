//! What an execution may do: the groups a usage key may execute in that permit the
//! running action, and so the wallets the action may use. Computed once per execution
//! (one read), then every key operation inside the action is checked locally.

use std::collections::HashSet;

use rusqlite::params;

use super::actions::CidHash;
use super::wallets::{self, WalletRecord, WalletRef};
use super::{AccountId, Result, Store, StoreError};
use crate::authz::GroupSet;

/// The wallets an execution may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalletScope {
    /// Every wallet of the account (account key, or `execute_in_groups = [0]`).
    Account,
    /// Only these wallets (store row ids), permitted by a group that may run the action.
    Only(HashSet<i64>),
}

impl Store {
    /// The wallet scope of a usage key with `execute_in_groups` (no wildcard) running
    /// the action `cid`, or `None` if no group it may execute in permits that action.
    pub async fn execution_scope(
        &self,
        account: AccountId,
        execute_in_groups: GroupSet,
        action: CidHash,
    ) -> Result<Option<WalletScope>> {
        self.read(move |conn| {
            let mut groups = Vec::new();
            {
                let mut stmt = conn.prepare_cached(
                    "SELECT g.id, g.all_wallets FROM groups g
                     WHERE g.account_id = ?1 AND g.id = ?2
                       AND (g.all_actions = 1 OR EXISTS (
                            SELECT 1 FROM group_actions ga JOIN actions a ON a.id = ga.action_id
                            WHERE ga.group_id = g.id AND a.cid_hash = ?3))",
                )?;
                for &id in execute_in_groups.ids() {
                    let Ok(id) = i64::try_from(id) else { continue };
                    let row = stmt.query_row(params![account.0, id, action.0.as_slice()], |r| {
                        Ok((r.get::<_, i64>(0)?, r.get::<_, bool>(1)?))
                    });
                    match row {
                        Ok(group) => groups.push(group),
                        Err(rusqlite::Error::QueryReturnedNoRows) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            if groups.is_empty() {
                return Ok(None);
            }
            if groups.iter().any(|(_, all)| *all) {
                return Ok(Some(WalletScope::Account));
            }
            let mut wallets = HashSet::new();
            let mut stmt =
                conn.prepare_cached("SELECT wallet_id FROM group_wallets WHERE group_id = ?1")?;
            for (group, _) in groups {
                for row in stmt.query_map([group], |r| r.get::<_, i64>(0))? {
                    wallets.insert(row?);
                }
            }
            Ok(Some(WalletScope::Only(wallets)))
        })
        .await
    }

    /// The wallet `wallet` of `account`, if `scope` lets an execution use it.
    /// A wallet outside the scope and a wallet that does not exist are both refused
    /// with the same error, so an action learns nothing about other wallets.
    pub async fn wallet_in_scope(
        &self,
        account: AccountId,
        wallet: WalletRef,
        scope: &WalletScope,
    ) -> Result<WalletRecord> {
        let refused =
            || StoreError::NotFound(format!("wallet {wallet} is not available to this action"));
        let record = self
            .read(move |conn| wallets::find(conn, account, &wallet))
            .await?
            .ok_or_else(refused)?;
        match scope {
            WalletScope::Account => Ok(record),
            WalletScope::Only(rows) if rows.contains(&record.row) => Ok(record),
            WalletScope::Only(_) => Err(refused()),
        }
    }
}
