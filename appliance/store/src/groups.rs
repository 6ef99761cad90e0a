//! Groups: named sets of permitted wallets and actions, per account. Group ids are
//! service-wide and never reused, so a usage key that listed a removed group can never
//! gain access to a later one.

use std::collections::HashMap;

use keyservice_api::PkpId;

use alloy::primitives::B256;

use chain_contracts::ops::MirrorOp;

use super::actions::{self, CidHash};
use super::base::{AccountId, GroupFlags, group_sql_id as sql_id, require_group as require};
use super::integrity::{
    self, ACTIONS, GROUP_ACTIONS, GROUP_WALLETS, GROUPS, Table, WALLETS, columns,
};
use super::ledger::Charge;
use super::sql::{Conn, params};
use super::wallets::{self, WALLET_WIDTH, WalletRecord, WalletRef, wallet_columns, wallet_from};
use super::{Page, Result, Store, StoreError, now_unix, outbox};
use appliance_domain::authz::GroupId;

/// A permitted set: everything, or exactly these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permitted<T> {
    All,
    Only(Vec<T>),
}

/// A group's name, description and permitted sets, as a write gives them.
#[derive(Debug, Clone)]
pub struct GroupSpec {
    pub name: String,
    pub description: String,
    pub wallets: Permitted<WalletRef>,
    pub actions: Permitted<CidHash>,
}

#[derive(Debug, Clone)]
pub struct GroupRecord {
    pub id: GroupId,
    pub name: String,
    pub description: String,
    pub wallets: Permitted<PkpId>,
    pub actions: Permitted<CidHash>,
}

/// Replaces the group's permitted sets; every named wallet and action must exist in
/// the account.
fn set_members(tx: Conn<'_>, account: AccountId, group: i64, spec: &GroupSpec) -> Result<()> {
    integrity::delete(tx, &GROUP_WALLETS, "group_id = ?1", params![group])?;
    integrity::delete(tx, &GROUP_ACTIONS, "group_id = ?1", params![group])?;
    add_members(tx, account, group, spec)?;
    Ok(())
}

/// Adds the group's permitted sets (every named wallet and action must exist in the
/// account), and answers its members as its mirror lists them: each once, in the order
/// of their rows.
fn add_members(
    tx: Conn<'_>,
    account: AccountId,
    group: i64,
    spec: &GroupSpec,
) -> Result<(Permitted<PkpId>, Permitted<CidHash>)> {
    let wallets = match &spec.wallets {
        Permitted::All => Permitted::All,
        Permitted::Only(list) => {
            let mut rows = Vec::with_capacity(list.len());
            for wallet in list {
                let record = wallets::require(tx, account, wallet)?;
                integrity::insert_or_ignore(
                    tx,
                    &GROUP_WALLETS,
                    columns![("group_id", group), ("wallet_id", record.row)],
                )?;
                rows.push((record.row, record.pkp_id));
            }
            rows.sort_by_key(|(row, _)| *row);
            rows.dedup_by_key(|(row, _)| *row);
            Permitted::Only(rows.into_iter().map(|(_, pkp)| pkp).collect())
        }
    };
    let actions = match &spec.actions {
        Permitted::All => Permitted::All,
        Permitted::Only(list) => {
            let mut rows = Vec::with_capacity(list.len());
            for hash in list {
                let action = actions::require(tx, account, hash)?;
                integrity::insert_or_ignore(
                    tx,
                    &GROUP_ACTIONS,
                    columns![("group_id", group), ("action_id", action)],
                )?;
                rows.push((action, *hash));
            }
            rows.sort_by_key(|(row, _)| *row);
            rows.dedup_by_key(|(row, _)| *row);
            Permitted::Only(rows.into_iter().map(|(_, hash)| hash).collect())
        }
    };
    Ok((wallets, actions))
}

/// Group ids the service assigns stay below this; AccountConfig assigns the ids of groups
/// created on chain from here up.
pub const CHAIN_GROUP_ID_BASE: u64 = 1 << 62;

/// The next service-assigned group id (never reused).
fn next_group_id(tx: Conn<'_>) -> Result<i64> {
    let id = integrity::next_id(tx, "groups", |_| Ok(1))?;
    if id as u64 >= CHAIN_GROUP_ID_BASE {
        return Err(StoreError::Conflict(
            "the group id space is exhausted".into(),
        ));
    }
    Ok(id)
}

/// Records that `group` changed now.
fn touch(tx: Conn<'_>, group: GroupId) -> Result<()> {
    let now = now_unix();
    integrity::update_eq(tx, &GROUPS, columns![("id", sql_id(group))], |row| {
        row.set("updated_at", &now)?;
        Ok(true)
    })?;
    Ok(())
}

/// The mirror of a group as it now is (`updateGroup`), read back from the store.
fn mirror_group(tx: Conn<'_>, account: AccountId, group: i64) -> Result<()> {
    let (name, description, flags): (String, String, GroupFlags) = tx.query_row(
        &format!(
            "SELECT name, description, all_wallets, all_actions, {} FROM groups WHERE id = ?1",
            GROUPS.select("")
        ),
        params![group],
        |r| {
            r.seal(4, &GROUPS)?;
            Ok((
                r.get(0)?,
                r.get(1)?,
                GroupFlags {
                    all_wallets: r.get(2)?,
                    all_actions: r.get(3)?,
                },
            ))
        },
    )?;
    let members = members(tx, group, &flags)?;
    let key = outbox::mirror_key(tx, account)?;
    record_mirror(tx, key.as_ref(), group, false, name, description, members)
}

/// Records the mirror of a group with these fields and members (`addGroup` when new,
/// else `updateGroup`), as `key` (`outbox::mirror_key`).
fn record_mirror(
    tx: Conn<'_>,
    key: Option<&Vec<u8>>,
    group: i64,
    new: bool,
    name: String,
    description: String,
    (wallets, actions): (Permitted<PkpId>, Permitted<CidHash>),
) -> Result<()> {
    let pkp_ids = match wallets {
        Permitted::All => vec![B256::ZERO],
        Permitted::Only(ids) => ids.into_iter().map(|p| B256::from(p.0)).collect(),
    };
    let cid_hashes = match actions {
        Permitted::All => vec![B256::ZERO],
        Permitted::Only(ids) => ids.into_iter().map(|c| B256::from(c.0)).collect(),
    };
    outbox::record_as(
        tx,
        key,
        &MirrorOp::SetGroup {
            new,
            group_id: group as u64,
            name,
            description,
            pkp_ids,
            cid_hashes,
        },
    )
}

/// `(group id, 32-byte member)` rows of `sql`, grouped by group id in their order; the
/// membership row (`link`) and the member's row (`target`) follow those two columns,
/// for their integrity checks.
fn members_of_page<T>(
    conn: Conn<'_>,
    sql: &str,
    page: &[&dyn super::sql::ToParam],
    (link, target): (&'static Table, &'static Table),
    member: impl Fn([u8; 32]) -> T,
) -> Result<HashMap<i64, Vec<T>>> {
    let rows = conn.query_map(sql, page, |row| {
        row.seal(2, link)?;
        row.seal(2 + link.width(), target)?;
        Ok((row.get::<i64>(0)?, row.get::<[u8; 32]>(1)?))
    })?;
    let mut out: HashMap<i64, Vec<T>> = HashMap::new();
    for (group, bytes) in rows {
        out.entry(group).or_default().push(member(bytes));
    }
    Ok(out)
}

fn members(
    conn: Conn<'_>,
    group: i64,
    flags: &GroupFlags,
) -> Result<(Permitted<PkpId>, Permitted<CidHash>)> {
    let wallets = if flags.all_wallets {
        Permitted::All
    } else {
        Permitted::Only(conn.query_map(
            &format!(
                "SELECT w.pkp_id, {}, {} FROM wallets w JOIN group_wallets gw ON gw.wallet_id = w.id
                 WHERE gw.group_id = ?1 ORDER BY w.id",
                GROUP_WALLETS.select("gw"),
                WALLETS.select("w")
            ),
            params![group],
            |r| {
                r.seal(1, &GROUP_WALLETS)?;
                r.seal(1 + GROUP_WALLETS.width(), &WALLETS)?;
                Ok(PkpId(r.get(0)?))
            },
        )?)
    };
    let actions = if flags.all_actions {
        Permitted::All
    } else {
        Permitted::Only(conn.query_map(
            &format!(
                "SELECT a.cid_hash, {}, {} FROM actions a JOIN group_actions ga ON ga.action_id = a.id
                 WHERE ga.group_id = ?1 ORDER BY a.id",
                GROUP_ACTIONS.select("ga"),
                ACTIONS.select("a")
            ),
            params![group],
            |r| {
                r.seal(1, &GROUP_ACTIONS)?;
                r.seal(1 + GROUP_ACTIONS.width(), &ACTIONS)?;
                Ok(CidHash(r.get(0)?))
            },
        )?)
    };
    Ok((wallets, actions))
}

impl Store {
    /// Creates a group; returns its new, never reused id.
    pub async fn add_group(
        &self,
        account: AccountId,
        spec: GroupSpec,
        charge: Charge,
    ) -> Result<GroupId> {
        self.write_charged(account, charge, move |tx| {
            let now = now_unix();
            let id = next_group_id(tx)?;
            // Read before anything is written: the group's row and its mirror entry then
            // reach the database with the write's next round trip (when it has no
            // members to look up), not one round trip each.
            let key = outbox::mirror_key(tx, account)?;
            integrity::insert_deferred(
                tx,
                &GROUPS,
                columns![
                    ("id", id),
                    ("account_id", account.0),
                    ("name", spec.name),
                    ("description", spec.description),
                    ("all_wallets", spec.wallets == Permitted::All),
                    ("all_actions", spec.actions == Permitted::All),
                    ("created_at", now),
                    ("updated_at", now),
                ],
            )?;
            // A new group has no members to replace, and its mirror is what was just
            // written: nothing to read back.
            let members = add_members(tx, account, id, &spec)?;
            record_mirror(
                tx,
                key.as_ref(),
                id,
                true,
                spec.name,
                spec.description,
                members,
            )?;
            Ok(GroupId(id as u64))
        })
        .await
    }

    /// The account's groups in creation order.
    pub async fn list_groups(&self, account: AccountId, page: Page) -> Result<Vec<GroupRecord>> {
        let Some((limit, offset)) = page.limit_offset() else {
            return Ok(Vec::new());
        };
        self.read(move |conn| {
            // One read transaction: the page and its members come from one snapshot
            // (and the WAL read lock is taken once, not once per statement).
            conn.snapshot(|conn| {
                let heads: Vec<(i64, String, String, GroupFlags)> = conn.query_map(
                    &format!(
                        "SELECT id, name, description, all_wallets, all_actions, {} FROM groups
                         WHERE account_id = ?1 ORDER BY id LIMIT ?2 + 0 OFFSET ?3 + 0",
                        GROUPS.select("")
                    ),
                    params![account.0, limit, offset],
                    |r| {
                        r.seal(5, &GROUPS)?;
                        Ok((
                            r.get(0)?,
                            r.get(1)?,
                            r.get(2)?,
                            GroupFlags {
                                all_wallets: r.get(3)?,
                                all_actions: r.get(4)?,
                            },
                        ))
                    },
                )?;
                // Every member of the page's groups in two queries (not two per group). The
                // page is exactly the account's groups with ids from its first to its last,
                // so the queries select that range through `groups_by_account` and read
                // each group's members in primary-key order: no temporary table, no sort.
                let (Some(first), Some(last)) = (heads.first(), heads.last()) else {
                    return Ok(Vec::new());
                };
                let range = params![account.0, first.0, last.0];
                let mut wallets = members_of_page(
                    conn,
                    &format!(
                        "SELECT g.id, w.pkp_id, {}, {} FROM groups g
                         JOIN group_wallets gw ON gw.group_id = g.id
                         JOIN wallets w ON w.id = gw.wallet_id
                         WHERE g.account_id = ?1 AND g.id BETWEEN ?2 AND ?3
                         ORDER BY g.id, gw.wallet_id",
                        GROUP_WALLETS.select("gw"),
                        WALLETS.select("w")
                    ),
                    range,
                    (&GROUP_WALLETS, &WALLETS),
                    PkpId,
                )?;
                let mut actions = members_of_page(
                    conn,
                    &format!(
                        "SELECT g.id, a.cid_hash, {}, {} FROM groups g
                         JOIN group_actions ga ON ga.group_id = g.id
                         JOIN actions a ON a.id = ga.action_id
                         WHERE g.account_id = ?1 AND g.id BETWEEN ?2 AND ?3
                         ORDER BY g.id, ga.action_id",
                        GROUP_ACTIONS.select("ga"),
                        ACTIONS.select("a")
                    ),
                    range,
                    (&GROUP_ACTIONS, &ACTIONS),
                    CidHash,
                )?;
                Ok(heads
                    .into_iter()
                    .map(|(id, name, description, flags)| GroupRecord {
                        id: GroupId(id as u64),
                        name,
                        description,
                        wallets: if flags.all_wallets {
                            Permitted::All
                        } else {
                            Permitted::Only(wallets.remove(&id).unwrap_or_default())
                        },
                        actions: if flags.all_actions {
                            Permitted::All
                        } else {
                            Permitted::Only(actions.remove(&id).unwrap_or_default())
                        },
                    })
                    .collect())
            })
        })
        .await
    }

    /// Replaces a group's name, description and both permitted sets.
    pub async fn update_group(
        &self,
        account: AccountId,
        group: GroupId,
        spec: GroupSpec,
        charge: Charge,
    ) -> Result<()> {
        self.write_charged(account, charge, move |tx| {
            require(tx, account, group)?;
            let now = now_unix();
            integrity::update_eq(tx, &GROUPS, columns![("id", sql_id(group))], |row| {
                row.set("name", &spec.name)?;
                row.set("description", &spec.description)?;
                row.set("all_wallets", &(spec.wallets == Permitted::All))?;
                row.set("all_actions", &(spec.actions == Permitted::All))?;
                row.set("updated_at", &now)?;
                Ok(true)
            })?;
            set_members(tx, account, sql_id(group), &spec)?;
            mirror_group(tx, account, sql_id(group))
        })
        .await
    }

    pub async fn remove_group(
        &self,
        account: AccountId,
        group: GroupId,
        charge: Charge,
    ) -> Result<()> {
        self.write_charged(account, charge, move |tx| {
            require(tx, account, group)?;
            // Memberships go with it (ON DELETE CASCADE).
            integrity::delete(tx, &GROUPS, "id = ?1", params![sql_id(group)])?;
            outbox::record(tx, account, &MirrorOp::RemoveGroup { group_id: group.0 })
        })
        .await
    }

    /// Permits `wallet` in `group` (idempotent).
    pub async fn add_wallet_to_group(
        &self,
        account: AccountId,
        group: GroupId,
        wallet: WalletRef,
        charge: Charge,
    ) -> Result<()> {
        self.write_charged(account, charge, move |tx| {
            require(tx, account, group)?;
            let record = wallets::require(tx, account, &wallet)?;
            let added = integrity::insert_or_ignore(
                tx,
                &GROUP_WALLETS,
                columns![("group_id", sql_id(group)), ("wallet_id", record.row)],
            )?;
            touch(tx, group)?;
            if !added {
                return Ok(());
            }
            outbox::record(
                tx,
                account,
                &MirrorOp::AddPkpToGroup {
                    group_id: group.0,
                    pkp_id: B256::from(record.pkp_id.0),
                },
            )
        })
        .await
    }

    pub async fn remove_wallet_from_group(
        &self,
        account: AccountId,
        group: GroupId,
        wallet: WalletRef,
        charge: Charge,
    ) -> Result<()> {
        self.write_charged(account, charge, move |tx| {
            let flags = require(tx, account, group)?;
            if flags.all_wallets {
                return Err(StoreError::Conflict(format!(
                    "group {group} permits all wallets, so removing one has no effect; use update_group to list the permitted wallets explicitly"
                )));
            }
            let record = wallets::require(tx, account, &wallet)?;
            let removed = integrity::delete(
                tx,
                &GROUP_WALLETS,
                "group_id = ?1 AND wallet_id = ?2",
                params![sql_id(group), record.row],
            )?;
            if removed == 0 {
                return Err(StoreError::NotFound(format!(
                    "wallet {wallet} is not in group {group}"
                )));
            }
            touch(tx, group)?;
            outbox::record(
                tx,
                account,
                &MirrorOp::RemovePkpFromGroup {
                    group_id: group.0,
                    pkp_id: B256::from(record.pkp_id.0),
                },
            )
        })
        .await
    }

    /// Permits the action `cid` in `group`, registering it on the account first if it is
    /// not yet (idempotent).
    pub async fn add_action_to_group(
        &self,
        account: AccountId,
        group: GroupId,
        cid: String,
        hash: CidHash,
        charge: Charge,
    ) -> Result<()> {
        self.write_charged(account, charge, move |tx| {
            require(tx, account, group)?;
            let (action, new) = actions::ensure(tx, account, &cid, &hash, "", "")?;
            if new {
                outbox::record(
                    tx,
                    account,
                    &MirrorOp::SetActionMetadata {
                        cid_hash: B256::from(hash.0),
                        name: String::new(),
                        description: String::new(),
                    },
                )?;
            }
            let added = integrity::insert_or_ignore(
                tx,
                &GROUP_ACTIONS,
                columns![("group_id", sql_id(group)), ("action_id", action)],
            )?;
            touch(tx, group)?;
            if !added {
                return Ok(());
            }
            outbox::record(
                tx,
                account,
                &MirrorOp::AddActionToGroup {
                    group_id: group.0,
                    cid_hash: B256::from(hash.0),
                },
            )
        })
        .await
    }

    pub async fn remove_action_from_group(
        &self,
        account: AccountId,
        group: GroupId,
        hash: CidHash,
        charge: Charge,
    ) -> Result<()> {
        self.write_charged(account, charge, move |tx| {
            let flags = require(tx, account, group)?;
            if flags.all_actions {
                return Err(StoreError::Conflict(format!(
                    "group {group} permits all actions, so removing one has no effect; use update_group to list the permitted actions explicitly"
                )));
            }
            let action = actions::require(tx, account, &hash)?;
            let removed = integrity::delete(
                tx,
                &GROUP_ACTIONS,
                "group_id = ?1 AND action_id = ?2",
                params![sql_id(group), action],
            )?;
            if removed == 0 {
                return Err(StoreError::NotFound(format!(
                    "action {hash} is not in group {group}"
                )));
            }
            touch(tx, group)?;
            outbox::record(
                tx,
                account,
                &MirrorOp::RemoveActionFromGroup {
                    group_id: group.0,
                    cid_hash: B256::from(hash.0),
                },
            )
        })
        .await
    }

    /// The wallets `group` permits (all of the account's for a wildcard group).
    pub async fn list_wallets_in_group(
        &self,
        account: AccountId,
        group: GroupId,
        page: Page,
    ) -> Result<Vec<WalletRecord>> {
        let Some((limit, offset)) = page.limit_offset() else {
            return Ok(Vec::new());
        };
        self.read(move |conn| {
            let flags = require(conn, account, group)?;
            let rows = if flags.all_wallets {
                conn.query_map(
                    &format!(
                        "SELECT {} FROM wallets w WHERE w.account_id = ?1 ORDER BY w.id LIMIT ?2 + 0 OFFSET ?3 + 0",
                        wallet_columns()
                    ),
                    params![account.0, limit, offset],
                    wallet_from,
                )?
            } else {
                conn.query_map(
                    &format!(
                        "SELECT {}, {} FROM wallets w JOIN group_wallets gw ON gw.wallet_id = w.id
                         WHERE gw.group_id = ?1 ORDER BY w.id LIMIT ?2 + 0 OFFSET ?3 + 0",
                        wallet_columns(),
                        GROUP_WALLETS.select("gw")
                    ),
                    params![sql_id(group), limit, offset],
                    |r| {
                        r.seal(WALLET_WIDTH, &GROUP_WALLETS)?;
                        wallet_from(r)
                    },
                )?
            };
            Ok(rows)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::store_test;
    use crate::testing::{identity, new_account};

    fn spec(name: &str, wallets: Permitted<WalletRef>, actions: Permitted<CidHash>) -> GroupSpec {
        GroupSpec {
            name: name.into(),
            description: String::new(),
            wallets,
            actions,
        }
    }

    store_test! {
    async fn a_listed_page_carries_each_groups_own_members(db) {
        let store = db.open().await;
        let (a, b) = (new_account(&store, 1).await, new_account(&store, 2).await);
        let pkp = |n: u8| identity(n).pkp_id;
        for (account, n) in [(a, 11), (a, 12), (b, 21)] {
            store
                .create_wallet(
                    account,
                    identity(n),
                    String::new(),
                    String::new(),
                    Charge::free(),
                )
                .await
                .unwrap();
        }
        let cid = |n: u8| CidHash([n; 32]);
        for (account, n) in [(a, 31), (b, 41)] {
            store
                .add_action(
                    account,
                    format!("Qm{n}"),
                    cid(n),
                    String::new(),
                    String::new(),
                    Charge::free(),
                )
                .await
                .unwrap();
        }
        let only_wallets =
            |ns: &[u8]| Permitted::Only(ns.iter().map(|n| WalletRef::Pkp(pkp(*n))).collect());
        // Account b's group, between a's, with members of its own: never in a's list.
        store
            .add_group(
                a,
                spec(
                    "g1",
                    only_wallets(&[12, 11]),
                    Permitted::Only(vec![cid(31)]),
                ),
                Charge::free(),
            )
            .await
            .unwrap();
        store
            .add_group(
                b,
                spec("other", only_wallets(&[21]), Permitted::Only(vec![cid(41)])),
                Charge::free(),
            )
            .await
            .unwrap();
        store
            .add_group(
                a,
                spec("g2", Permitted::All, Permitted::Only(vec![])),
                Charge::free(),
            )
            .await
            .unwrap();
        store
            .add_group(
                a,
                spec("g3", only_wallets(&[12]), Permitted::All),
                Charge::free(),
            )
            .await
            .unwrap();

        let page = |number| Page { number, size: 2 };
        let first = store.list_groups(a, page(0)).await.unwrap();
        let second = store.list_groups(a, page(1)).await.unwrap();
        let got: Vec<_> = first
            .iter()
            .chain(&second)
            .map(|g| (g.name.as_str(), g.wallets.clone(), g.actions.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                // Members in the order the wallets were created, as one group's list gives them.
                (
                    "g1",
                    Permitted::Only(vec![pkp(11), pkp(12)]),
                    Permitted::Only(vec![cid(31)])
                ),
                ("g2", Permitted::All, Permitted::Only(vec![])),
                ("g3", Permitted::Only(vec![pkp(12)]), Permitted::All),
            ]
        );
        assert!(store.list_groups(a, page(2)).await.unwrap().is_empty());
    }
    }
}
