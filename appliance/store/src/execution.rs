//! What an execution may use: of the groups `authz` lets a usage key execute in, those
//! that permit the running action, and so the wallets the action may use. Computed once
//! per execution (one read); each key operation inside the action then checks one wallet.

use std::collections::HashSet;

use super::actions::CidHash;
use super::integrity::{ACTIONS, GROUP_ACTIONS, GROUP_WALLETS, GROUPS};
use super::sql::params;
use super::wallets::{self, WalletRecord, WalletRef};
use super::{AccountId, Result, Store};
use appliance_domain::authz::GroupId;

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
                // The group, and its membership of the action if it has one: every row
                // the decision rests on is read (and checked), none only tested in SQL.
                let row = conn.query_opt(
                    &format!(
                        "SELECT g.all_wallets, g.all_actions, ga.group_id IS NOT NULL, {}, {}, {}
                         FROM groups g
                         LEFT JOIN (group_actions ga JOIN actions a
                                    ON a.id = ga.action_id AND a.cid_hash = ?3)
                              ON ga.group_id = g.id
                         WHERE g.account_id = ?1 AND g.id = ?2
                         LIMIT 1",
                        GROUPS.select("g"),
                        GROUP_ACTIONS.select("ga"),
                        ACTIONS.select("a")
                    ),
                    params![account.0, id, action.0],
                    |r| {
                        r.seal(3, &GROUPS)?;
                        let member: bool = r.get(2)?;
                        if member {
                            let at = 3 + GROUPS.width();
                            r.seal(at, &GROUP_ACTIONS)?;
                            r.seal(at + GROUP_ACTIONS.width(), &ACTIONS)?;
                        }
                        let (all_wallets, all_actions): (bool, bool) = (r.get(0)?, r.get(1)?);
                        Ok((all_actions || member).then_some((id, all_wallets)))
                    },
                )?;
                groups.extend(row.flatten());
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
                    &format!(
                        "SELECT wallet_id, {} FROM group_wallets WHERE group_id = ?1",
                        GROUP_WALLETS.select("")
                    ),
                    params![group],
                    |r| {
                        r.seal(1, &GROUP_WALLETS)?;
                        r.get::<i64>(0)
                    },
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
