//! What an execution may use: of the groups `authz` lets a usage key execute in, those
//! that permit the running action, and so the wallets the action may use. Computed once
//! per execution (one read); each key operation inside the action then checks one wallet.

use std::collections::HashSet;

use super::actions::CidHash;
use super::sql::params;
use super::wallets::{self, WalletRecord, WalletRef};
use super::{AccountId, Result, Store};
use crate::authz::GroupId;

/// The wallets an execution may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalletScope {
    /// Every wallet of the account (account key, or `execute_in_groups = [0]`).
    Account,
    /// Only these wallets (store row ids), permitted by a group that may run the action.
    Only(HashSet<i64>),
}

impl Store {
    /// The wallet scope of running the action `cid` with the groups `authz` granted
    /// (`ExecuteInGroup`), or `None` if none of them is the account's and permits that
    /// action.
    pub async fn execution_scope(
        &self,
        account: AccountId,
        groups_granted: Vec<GroupId>,
        action: CidHash,
    ) -> Result<Option<WalletScope>> {
        self.read(move |conn| {
            let mut groups = Vec::new();
            for GroupId(id) in groups_granted {
                let Ok(id) = i64::try_from(id) else { continue };
                let row = conn.query_opt(
                    "SELECT g.id, g.all_wallets FROM groups g
                     WHERE g.account_id = ?1 AND g.id = ?2
                       AND (g.all_actions = 1 OR EXISTS (
                            SELECT 1 FROM group_actions ga JOIN actions a ON a.id = ga.action_id
                            WHERE ga.group_id = g.id AND a.cid_hash = ?3))",
                    params![account.0, id, action.0],
                    |r| Ok((r.get::<i64>(0)?, r.get::<bool>(1)?)),
                )?;
                groups.extend(row);
            }
            if groups.is_empty() {
                return Ok(None);
            }
            if groups.iter().any(|(_, all)| *all) {
                return Ok(Some(WalletScope::Account));
            }
            let mut wallets = HashSet::new();
            for (group, _) in groups {
                wallets.extend(conn.query_map(
                    "SELECT wallet_id FROM group_wallets WHERE group_id = ?1",
                    params![group],
                    |r| r.get::<i64>(0),
                )?);
            }
            Ok(Some(WalletScope::Only(wallets)))
        })
        .await
    }

    /// The wallet `wallet` of `account`, if `scope` lets an execution use it: `None` for
    /// a wallet outside the scope and for one that does not exist alike.
    pub async fn wallet_in_scope(
        &self,
        account: AccountId,
        wallet: WalletRef,
        scope: &WalletScope,
    ) -> Result<Option<WalletRecord>> {
        let record = self
            .read(move |conn| wallets::find(conn, account, &wallet))
            .await?;
        Ok(record.filter(|record| match scope {
            WalletScope::Account => true,
            WalletScope::Only(rows) => rows.contains(&record.row),
        }))
    }
}
