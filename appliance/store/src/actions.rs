//! Registered actions (by IPFS CID), and the cache of action code by CID.

use std::fmt;

use alloy::primitives::B256;

use chain_contracts::ops::MirrorOp;

use super::base::{AccountId, require_group};
use super::integrity::{self, ACTIONS, GROUP_ACTIONS, columns};
use super::ledger::Charge;
use super::sql::{Conn, Row, SqlResult, params};
use super::{Page, Result, Store, StoreError, now_unix, outbox};
use appliance_domain::authz::GroupId;

/// `keccak256(CID string)`: how update and delete calls name an action.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CidHash(pub [u8; 32]);

impl fmt::Display for CidHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{}", hex::encode(self.0))
    }
}

impl fmt::Debug for CidHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CidHash({self})")
    }
}

#[derive(Debug, Clone)]
pub struct ActionRecord {
    pub row: i64,
    pub cid_hash: CidHash,
    pub ipfs_cid: String,
    pub name: String,
    pub description: String,
}

pub(super) const ACTION_COLUMNS: &str = "a.id, a.cid_hash, a.ipfs_cid, a.name, a.description";

pub(super) fn action_from(row: &Row<'_>) -> SqlResult<ActionRecord> {
    row.seal(5, &ACTIONS)?;
    Ok(ActionRecord {
        row: row.get(0)?,
        cid_hash: CidHash(row.get(1)?),
        ipfs_cid: row.get(2)?,
        name: row.get(3)?,
        description: row.get(4)?,
    })
}

/// The row id of the action `hash` on `account`, if registered.
pub(super) fn find(conn: Conn<'_>, account: AccountId, hash: &CidHash) -> Result<Option<i64>> {
    Ok(conn.query_opt(
        &format!(
            "SELECT id, {} FROM actions WHERE account_id = ?1 AND cid_hash = ?2",
            ACTIONS.select("")
        ),
        params![account.0, hash.0],
        |r| {
            r.seal(1, &ACTIONS)?;
            r.get(0)
        },
    )?)
}

pub(super) fn require(conn: Conn<'_>, account: AccountId, hash: &CidHash) -> Result<i64> {
    find(conn, account, hash)?
        .ok_or_else(|| StoreError::NotFound(format!("no action {hash} in this account")))
}

/// Registers an action unless it already is; returns its row id and whether it is new.
pub(super) fn ensure(
    tx: Conn<'_>,
    account: AccountId,
    cid: &str,
    hash: &CidHash,
    name: &str,
    description: &str,
) -> Result<(i64, bool)> {
    if let Some(row) = find(tx, account, hash)? {
        return Ok((row, false));
    }
    let now = now_unix();
    let row = integrity::insert_new(
        tx,
        &ACTIONS,
        columns![
            ("account_id", account.0),
            ("cid_hash", hash.0),
            ("ipfs_cid", cid),
            ("name", name),
            ("description", description),
            ("created_at", now),
            ("updated_at", now),
        ],
    )?;
    Ok((row, true))
}

impl Store {
    /// Registers an action; `Conflict` if the account already has it.
    pub async fn add_action(
        &self,
        account: AccountId,
        cid: String,
        hash: CidHash,
        name: String,
        description: String,
        charge: Charge,
    ) -> Result<()> {
        self.write_charged(account, charge, move |tx| {
            match ensure(tx, account, &cid, &hash, &name, &description)? {
                (_, true) => outbox::record(
                    tx,
                    account,
                    &MirrorOp::SetActionMetadata {
                        cid_hash: B256::from(hash.0),
                        name: name.clone(),
                        description: description.clone(),
                    },
                ),
                (_, false) => Err(StoreError::Conflict(format!(
                    "action {cid} is already registered on this account; use update_action_metadata"
                ))),
            }
        })
        .await
    }

    /// Deletes an action and removes it from every group.
    pub async fn delete_action(
        &self,
        account: AccountId,
        hash: CidHash,
        charge: Charge,
    ) -> Result<()> {
        self.write_charged(account, charge, move |tx| {
            let row = require(tx, account, &hash)?;
            // group_actions rows go with it (ON DELETE CASCADE).
            integrity::delete(tx, &ACTIONS, "id = ?1", params![row])?;
            outbox::record(
                tx,
                account,
                &MirrorOp::DeleteAction {
                    cid_hash: B256::from(hash.0),
                },
            )
        })
        .await
    }

    pub async fn update_action_metadata(
        &self,
        account: AccountId,
        hash: CidHash,
        name: String,
        description: String,
        charge: Charge,
    ) -> Result<()> {
        self.write_charged(account, charge, move |tx| {
            let row = require(tx, account, &hash)?;
            let now = now_unix();
            integrity::update_eq(tx, &ACTIONS, columns![("id", row)], |action| {
                action.set("name", &name)?;
                action.set("description", &description)?;
                action.set("updated_at", &now)?;
                Ok(true)
            })?;
            outbox::record(
                tx,
                account,
                &MirrorOp::SetActionMetadata {
                    cid_hash: B256::from(hash.0),
                    name,
                    description,
                },
            )
        })
        .await
    }

    /// The account's actions in registration order, or those `group` permits.
    pub async fn list_actions(
        &self,
        account: AccountId,
        group: Option<GroupId>,
        page: Page,
    ) -> Result<Vec<ActionRecord>> {
        let Some((limit, offset)) = page.limit_offset() else {
            return Ok(Vec::new());
        };
        self.read(move |conn| {
            let only_members = match group {
                Some(g) => !require_group(conn, account, g)?.all_actions,
                None => false,
            };
            let rows = if only_members {
                let g = group.map_or(0, |g| g.0 as i64);
                conn.query_map(
                    &format!(
                        "SELECT {ACTION_COLUMNS}, {}, {} FROM actions a JOIN group_actions ga ON ga.action_id = a.id
                         WHERE ga.group_id = ?1 ORDER BY a.id LIMIT ?2 + 0 OFFSET ?3 + 0",
                        ACTIONS.select("a"),
                        GROUP_ACTIONS.select("ga")
                    ),
                    params![g, limit, offset],
                    |r| {
                        r.seal(5 + ACTIONS.width(), &GROUP_ACTIONS)?;
                        action_from(r)
                    },
                )?
            } else {
                conn.query_map(
                    &format!(
                        "SELECT {ACTION_COLUMNS}, {} FROM actions a WHERE a.account_id = ?1 ORDER BY a.id LIMIT ?2 + 0 OFFSET ?3 + 0",
                        ACTIONS.select("a")
                    ),
                    params![account.0, limit, offset],
                    action_from,
                )?
            };
            Ok(rows)
        })
        .await
    }

    /// Keeps `code` under `cid` in `owner`'s area of the code cache (see [`CodeOwner`]).
    ///
    /// The anonymous area is capped at `cap_bytes`: its least recently stored entries
    /// (never `cid`) are evicted to fit. An account's area is capped at `cap_bytes` (its
    /// quota) likewise, but code of its own registered actions is pinned there: never
    /// evicted, yet counted. If pinned code and `code` together exceed the quota, nothing
    /// is stored and the answer is [`StoreError::QuotaExceeded`].
    pub async fn put_code(
        &self,
        owner: CodeOwner,
        cid: String,
        code: Vec<u8>,
        cap_bytes: u64,
    ) -> Result<()> {
        self.write(move |tx| {
            let owner_id = owner.id();
            let size = code.len() as i64;
            tx.execute(
                "INSERT INTO code_store (owner, cid, code, size, last_used) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (owner, cid) DO UPDATE SET last_used = excluded.last_used",
                params![owner_id, cid, code, size, now_unix()],
            )?;
            let total = area_bytes(tx, owner_id)?;
            if total as u64 > cap_bytes {
                evict(tx, owner_id, &cid, total - cap_bytes as i64)?;
                let left = area_bytes(tx, owner_id)?;
                if left as u64 > cap_bytes && matches!(owner, CodeOwner::Account(_)) {
                    return Err(StoreError::QuotaExceeded(format!(
                        "the account's stored action code would exceed its quota of {cap_bytes} bytes (code of registered actions counts); delete actions to make room"
                    )));
                }
            }
            Ok(())
        })
        .await
    }

    /// The code stored under `cid` for `account`: from its own area, else from the
    /// anonymous area; with whether it came from the account's own area. Other
    /// accounts' areas are never read.
    pub async fn code_for(
        &self,
        account: AccountId,
        cid: String,
    ) -> Result<Option<(Vec<u8>, bool)>> {
        self.read(move |conn| {
            Ok(conn.query_opt(
                "SELECT code, owner FROM code_store WHERE cid = ?1 AND owner IN (?2, 0)
                 ORDER BY owner DESC LIMIT 1",
                params![cid, account.0],
                |r| Ok((r.get::<Vec<u8>>(0)?, r.get::<i64>(1)? != 0)),
            )?)
        })
        .await
    }

    /// Bytes of code kept in `owner`'s area.
    pub async fn code_bytes(&self, owner: CodeOwner) -> Result<u64> {
        self.read(move |conn| Ok(area_bytes(conn, owner.id())? as u64))
            .await
    }
}

/// Whose area of the code cache an entry lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeOwner {
    /// Code sent to `get_lit_action_ipfs_id` without a key: one small shared area that
    /// strangers may churn, never evicting any account's code.
    Anonymous,
    /// Code an account ran, had fetched or sent with its key: counted against its quota,
    /// evicted only by its own later code.
    Account(AccountId),
}

impl CodeOwner {
    /// The `owner` column: 0 for the anonymous area (account ids start at 1).
    fn id(self) -> i64 {
        match self {
            Self::Anonymous => 0,
            Self::Account(account) => account.0,
        }
    }
}

fn area_bytes(conn: Conn<'_>, owner: i64) -> Result<i64> {
    Ok(conn.query_row(
        "SELECT CAST(coalesce(sum(size), 0) AS BIGINT) FROM code_store WHERE owner = ?1",
        params![owner],
        |r| r.get(0),
    )?)
}

/// Frees at least `excess` bytes of `owner`'s unpinned code, oldest first, never `keep`.
/// Pinned: code of the owning account's registered actions (the anonymous area, owner 0,
/// has no pins).
fn evict(tx: Conn<'_>, owner: i64, keep: &str, excess: i64) -> Result<()> {
    let victims: Vec<(String, i64)> = tx.query_map(
        "SELECT cid, size FROM code_store c
         WHERE c.owner = ?1 AND c.cid <> ?2
           AND NOT EXISTS (SELECT 1 FROM actions a WHERE a.account_id = c.owner AND a.ipfs_cid = c.cid)
         ORDER BY last_used, cid",
        params![owner, keep],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let mut freed = 0;
    for (cid, size) in victims {
        if freed >= excess {
            break;
        }
        tx.execute(
            "DELETE FROM code_store WHERE owner = ?1 AND cid = ?2",
            params![owner, cid],
        )?;
        freed += size;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::params;
    use crate::testing::store_test;
    use crate::testing::store_with_account;
    use crate::{GroupSpec, Permitted};

    async fn used_bytes(store: &Store, owner: CodeOwner) -> u64 {
        store.code_bytes(owner).await.unwrap()
    }

    async fn age(store: &Store, cid: &str) {
        let cid = cid.to_owned();
        store
            .write(move |tx| {
                Ok(tx.execute(
                    "UPDATE code_store SET last_used = 0 WHERE cid = ?1",
                    params![cid],
                )?)
            })
            .await
            .unwrap();
    }

    store_test! {
    async fn anonymous_code_never_evicts_an_accounts_code(db) {
        let (store, account) = store_with_account(&db, 1).await;
        let mine = CodeOwner::Account(account);
        store
            .put_code(mine, "mine".into(), vec![0; 400], 1000)
            .await
            .unwrap();
        age(&store, "mine").await;
        // A stranger floods the anonymous area far past its cap.
        for i in 0..20 {
            store
                .put_code(CodeOwner::Anonymous, format!("junk{i}"), vec![1; 400], 1000)
                .await
                .unwrap();
        }
        assert!(used_bytes(&store, CodeOwner::Anonymous).await <= 1000);
        assert_eq!(
            store.code_for(account, "mine".into()).await.unwrap(),
            Some((vec![0; 400], true))
        );
        // The newest anonymous code is readable by any account; older is gone.
        assert_eq!(
            store.code_for(account, "junk19".into()).await.unwrap(),
            Some((vec![1; 400], false))
        );
        assert!(
            store
                .code_for(account, "junk0".into())
                .await
                .unwrap()
                .is_none()
        );
        // Another account's area is never read.
        let other = AccountId(account.0 + 1000);
        assert!(
            store
                .code_for(other, "mine".into())
                .await
                .unwrap()
                .is_none()
        );
    }

    async fn pinned_code_counts_against_the_quota(db) {
        let (store, account) = store_with_account(&db, 1).await;
        let mine = CodeOwner::Account(account);
        store
            .put_code(mine, "pinned".into(), vec![0; 600], 1000)
            .await
            .unwrap();
        store
            .add_action(
                account,
                "pinned".into(),
                CidHash([9; 32]),
                "n".into(),
                String::new(),
                Charge::free(),
            )
            .await
            .unwrap();
        age(&store, "pinned").await;
        // Unpinned code is evicted to make room, the pinned code never.
        store
            .put_code(mine, "a".into(), vec![1; 300], 1000)
            .await
            .unwrap();
        age(&store, "a").await;
        store
            .put_code(mine, "b".into(), vec![2; 300], 1000)
            .await
            .unwrap();
        assert!(store.code_for(account, "a".into()).await.unwrap().is_none());
        assert!(
            store
                .code_for(account, "pinned".into())
                .await
                .unwrap()
                .is_some()
        );
        assert_eq!(used_bytes(&store, mine).await, 900);
        // Code that does not fit beside the pinned code is refused, and not stored.
        let err = store
            .put_code(mine, "big".into(), vec![3; 500], 1000)
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::QuotaExceeded(_)), "{err}");
        assert!(
            store
                .code_for(account, "big".into())
                .await
                .unwrap()
                .is_none()
        );
        assert!(used_bytes(&store, mine).await <= 1000);
        // Storing the same CID again does not duplicate it.
        store
            .put_code(mine, "b".into(), vec![2; 300], 1000)
            .await
            .unwrap();
        assert_eq!(used_bytes(&store, mine).await, 900);
    }

    async fn delete_action_leaves_every_group(db) {
        let (store, account) = store_with_account(&db, 1).await;
        let hash = CidHash([7; 32]);
        let spec = |actions| GroupSpec {
            name: "g".into(),
            description: String::new(),
            wallets: Permitted::Only(vec![]),
            actions,
        };
        let g1 = store
            .add_group(account, spec(Permitted::Only(vec![])), Charge::free())
            .await
            .unwrap();
        let g2 = store
            .add_group(account, spec(Permitted::Only(vec![])), Charge::free())
            .await
            .unwrap();
        for g in [g1, g2] {
            store
                .add_action_to_group(account, g, "QmX".into(), hash, Charge::free())
                .await
                .unwrap();
        }
        let page = Page {
            number: 0,
            size: 10,
        };
        assert_eq!(
            store
                .list_actions(account, Some(g2), page)
                .await
                .unwrap()
                .len(),
            1
        );
        store
            .delete_action(account, hash, Charge::free())
            .await
            .unwrap();
        for g in [g1, g2] {
            assert!(
                store
                    .list_actions(account, Some(g), page)
                    .await
                    .unwrap()
                    .is_empty()
            );
        }
        assert!(matches!(
            store.delete_action(account, hash, Charge::free()).await,
            Err(StoreError::NotFound(_))
        ));
        // Group ids are never reused.
        store
            .remove_group(account, g2, Charge::free())
            .await
            .unwrap();
        let g3 = store
            .add_group(account, spec(Permitted::All), Charge::free())
            .await
            .unwrap();
        assert!(g3.0 > g2.0);
    }
    }
}
