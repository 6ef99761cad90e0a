//! The chain outbox: every API-mode management write adds, in the same transaction, the
//! `AccountConfig` call that mirrors it. The relayer (`crate::chain::relayer`) submits the
//! entries in `seq` order, in batches, each batch one transaction with a fixed payer
//! nonce recorded *before* it is broadcast, so an entry lands on chain exactly once even
//! across crashes and outages.
//!
//! Entries are stored as versioned JSON (`chain_contracts::ops::MirrorOp`, the
//! contract-call vocabulary; format [`FORMAT`]), not as calldata, so they stay readable
//! and can be re-encoded if the contract's ABI changes with a migration.

use alloy::primitives::B256;
use chain_contracts::ops::MirrorOp;

use super::base::{AccountId, AccountMode, account_head};
use super::integrity::{self, ACCOUNTS, CHAIN_BATCHES, CHAIN_CURSORS, CHAIN_OUTBOX, columns};
use super::sql::{Conn, SqlResult, params};
use super::{Result, Store, StoreError, now_unix};

/// The version of the JSON in `chain_outbox.op`.
pub const FORMAT: i64 = 1;

/// Queues `op` for `account` if the account is in API mode. ChainSecured accounts are
/// written on chain by their owners, never by the service.
pub(super) fn record(tx: Conn<'_>, account: AccountId, op: &MirrorOp) -> Result<()> {
    let key = mirror_key(tx, account)?;
    record_as(tx, key.as_ref(), op)
}

/// Whom `account`'s mirror writes are queued as: its API key hash, or `None` when it is
/// ChainSecured (nothing to queue). A write that also inserts rows reads this first, so
/// that its inserts can go to the database with the next round trip (`integrity::
/// insert_deferred`).
pub(super) fn mirror_key(tx: Conn<'_>, account: AccountId) -> Result<Option<Vec<u8>>> {
    let Some(head) = account_head(tx, account)? else {
        return Err(StoreError::NotFound("no such account".into()));
    };
    Ok((head.mode == AccountMode::Api).then_some(head.api_key_hash))
}

/// Queues `op` as [`mirror_key`] answered (nothing for `None`). The entry is written
/// with the write's next round trip.
pub(super) fn record_as(tx: Conn<'_>, key: Option<&Vec<u8>>, op: &MirrorOp) -> Result<()> {
    let Some(api_key_hash) = key else {
        return Ok(());
    };
    let json = serde_json::to_string(op).map_err(|e| StoreError::Task(e.to_string()))?;
    integrity::insert_new_deferred(
        tx,
        &CHAIN_OUTBOX,
        columns![
            ("api_key_hash", api_key_hash),
            ("format", FORMAT),
            ("op", json),
            ("created_at", now_unix()),
            ("state", "pending"),
            ("batch_id", None::<i64>),
            ("solo", 0i64),
            ("error", None::<String>),
        ],
    )?;
    Ok(())
}

/// An outbox entry as the relayer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEntry {
    pub seq: i64,
    pub api_key_hash: B256,
    pub op: MirrorOp,
}

/// A batch transaction that was signed and recorded before its broadcast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentBatch {
    pub id: i64,
    pub nonce: u64,
    pub raw_tx: Vec<u8>,
    /// Every hash this batch was signed under (fee bumps re-sign with the same nonce);
    /// the newest last. Whichever is mined settles the batch.
    pub tx_hashes: Vec<B256>,
    pub first_seq: i64,
    pub last_seq: i64,
    pub sent_at: i64,
}

fn b256(bytes: [u8; 32]) -> SqlResult<B256> {
    Ok(B256::from(bytes))
}

fn hashes_json(hashes: &[B256]) -> String {
    serde_json::to_string(hashes).unwrap_or_else(|_| "[]".into())
}

impl Store {
    /// Up to `limit` entries waiting to be sent, oldest first; when the oldest must go
    /// alone (its batch reverted before), only that one. An entry whose JSON cannot be
    /// read is marked failed (it would block the queue forever) and skipped.
    pub async fn outbox_pending(&self, limit: usize) -> Result<Vec<OutboxEntry>> {
        let (mut entries, broken) = self
            .read(move |conn| {
                let mut out = Vec::new();
                let mut broken = Vec::new();
                let rows = conn.query_map(
                    &format!(
                        "SELECT seq, api_key_hash, format, op, solo, {} FROM chain_outbox
                         WHERE state = 'pending' ORDER BY seq LIMIT ?1 + 0",
                        CHAIN_OUTBOX.select("")
                    ),
                    params![limit as i64],
                    |r| {
                        r.seal(5, &CHAIN_OUTBOX)?;
                        Ok((
                            r.get::<i64>(0)?,
                            b256(r.get(1)?)?,
                            r.get::<i64>(2)?,
                            r.get::<String>(3)?,
                            r.get::<bool>(4)?,
                        ))
                    },
                )?;
                for row in rows {
                    let (seq, api_key_hash, format, json, solo) = row;
                    match (format, serde_json::from_str::<MirrorOp>(&json)) {
                        (FORMAT, Ok(op)) => out.push((
                            OutboxEntry {
                                seq,
                                api_key_hash,
                                op,
                            },
                            solo,
                        )),
                        (_, Err(e)) => broken.push((seq, format!("unreadable entry: {e}"))),
                        (other, _) => broken.push((seq, format!("unknown format {other}"))),
                    }
                }
                Ok((out, broken))
            })
            .await?;
        for (seq, err) in broken {
            tracing::error!(seq, error = %err, "outbox entry cannot be mirrored");
            self.outbox_fail(seq, err).await?;
        }
        if entries.first().is_some_and(|(_, solo)| *solo) {
            entries.truncate(1);
        }
        Ok(entries.into_iter().map(|(entry, _)| entry).collect())
    }

    /// Marks one entry as failed for good (the chain refuses it; see the log and `error`).
    pub async fn outbox_fail(&self, seq: i64, error: String) -> Result<()> {
        self.write(move |tx| {
            integrity::update_eq(
                tx,
                &CHAIN_OUTBOX,
                columns![("seq", seq), ("state", "pending")],
                |row| {
                    row.set("state", &"failed")?;
                    row.set("error", &error)?;
                    Ok(true)
                },
            )?;
            undo_refused_conversions(tx, "seq = ?1", seq)
        })
        .await
    }

    /// Records a signed batch over `seqs` (consecutive pending entries) before it is
    /// broadcast.
    pub async fn outbox_record_batch(
        &self,
        seqs: Vec<i64>,
        payer: u32,
        nonce: u64,
        raw_tx: Vec<u8>,
        tx_hash: B256,
    ) -> Result<SentBatch> {
        self.write(move |tx| {
            let (Some(&first), Some(&last)) = (seqs.first(), seqs.last()) else {
                return Err(StoreError::Task("an empty batch".into()));
            };
            let now = now_unix();
            // At most one batch in flight, whichever replica relays.
            let in_flight = tx.query_opt(
                &format!(
                    "SELECT id, {} FROM chain_batches WHERE state = 'sent' LIMIT 1",
                    CHAIN_BATCHES.select("")
                ),
                params![],
                |r| {
                    r.seal(1, &CHAIN_BATCHES)?;
                    r.get::<i64>(0)
                },
            )?;
            if let Some(other) = in_flight {
                return Err(StoreError::Conflict(format!(
                    "batch {other} is still in flight"
                )));
            }
            let id = integrity::insert_new(
                tx,
                &CHAIN_BATCHES,
                columns![
                    ("first_seq", first),
                    ("last_seq", last),
                    ("payer", payer),
                    ("nonce", nonce as i64),
                    ("raw_tx", raw_tx),
                    ("tx_hashes", hashes_json(&[tx_hash])),
                    ("state", "sent"),
                    ("mined_hash", None::<Vec<u8>>),
                    ("block_number", None::<i64>),
                    ("gas_used", None::<i64>),
                    ("created_at", now),
                    ("mined_at", None::<i64>),
                ],
            )?;
            for seq in &seqs {
                let sent = integrity::update_eq(
                    tx,
                    &CHAIN_OUTBOX,
                    columns![("seq", *seq), ("state", "pending")],
                    |row| {
                        row.set("state", &"sent")?;
                        row.set("batch_id", &id)?;
                        Ok(true)
                    },
                )?;
                if sent != 1 {
                    return Err(StoreError::Conflict(format!(
                        "outbox entry {seq} is not pending"
                    )));
                }
            }
            Ok(SentBatch {
                id,
                nonce,
                raw_tx,
                tx_hashes: vec![tx_hash],
                first_seq: first,
                last_seq: last,
                sent_at: now,
            })
        })
        .await
    }

    /// Replaces the batch's transaction with a re-signed one (same nonce, higher fees).
    pub async fn outbox_replace_tx(
        &self,
        batch: i64,
        raw_tx: Vec<u8>,
        tx_hash: B256,
    ) -> Result<SentBatch> {
        self.write(move |tx| {
            let mut current = load_batch(tx, batch)?
                .ok_or_else(|| StoreError::NotFound(format!("no batch {batch}")))?;
            current.tx_hashes.push(tx_hash);
            current.raw_tx = raw_tx;
            current.sent_at = now_unix();
            integrity::update_eq(tx, &CHAIN_BATCHES, columns![("id", batch)], |row| {
                row.set("raw_tx", &current.raw_tx)?;
                row.set("tx_hashes", &hashes_json(&current.tx_hashes))?;
                row.set("created_at", &current.sent_at)?;
                Ok(true)
            })?;
            Ok(current)
        })
        .await
    }

    /// The batch sent but not yet settled, if any (at most one is in flight).
    pub async fn outbox_in_flight(&self) -> Result<Option<SentBatch>> {
        self.read(|conn| {
            let id: Option<i64> = conn.query_opt(
                &format!(
                    "SELECT id, {} FROM chain_batches WHERE state = 'sent' ORDER BY id LIMIT 1",
                    CHAIN_BATCHES.select("")
                ),
                params![],
                |r| {
                    r.seal(1, &CHAIN_BATCHES)?;
                    r.get(0)
                },
            )?;
            match id {
                Some(id) => load_batch(conn, id),
                None => Ok(None),
            }
        })
        .await
    }

    /// Settles a batch: mined (its entries are mirrored) or reverted (its entries go back
    /// to pending, to be retried one by one so a single bad entry cannot block the rest).
    pub async fn outbox_settle(
        &self,
        batch: i64,
        success: bool,
        tx_hash: B256,
        block: u64,
        gas_used: u64,
    ) -> Result<()> {
        self.write(move |tx| {
            let now = now_unix();
            let settled = integrity::update_eq(
                tx,
                &CHAIN_BATCHES,
                columns![("id", batch), ("state", "sent")],
                |row| {
                    row.set("state", &if success { "mined" } else { "reverted" })?;
                    row.set("mined_hash", &tx_hash.as_slice())?;
                    row.set("block_number", &(block as i64))?;
                    row.set("gas_used", &(gas_used as i64))?;
                    row.set("mined_at", &now)?;
                    Ok(true)
                },
            )?;
            if settled == 0 {
                // Settled already (by another replica's relayer): its entries too.
                return Ok(());
            }
            if success {
                integrity::update_eq(tx, &CHAIN_OUTBOX, columns![("batch_id", batch)], |row| {
                    row.set("state", &"mined")?;
                    Ok(true)
                })?;
            } else {
                // Alone, the entry itself is refused; in a batch, retry each alone.
                let error = format!("reverted on chain in {tx_hash}");
                integrity::update_eq(tx, &CHAIN_OUTBOX, columns![("batch_id", batch)], |row| {
                    if row.get::<i64>("solo")? == 1 {
                        row.set("state", &"failed")?;
                        row.set("error", &error)?;
                    } else {
                        row.set("state", &"pending")?;
                        row.set("error", &None::<String>)?;
                        row.set("batch_id", &None::<i64>)?;
                    }
                    row.set("solo", &1i64)?;
                    Ok(true)
                })?;
                undo_refused_conversions(tx, "batch_id = ?1", batch)?;
            }
            Ok(())
        })
        .await
    }

    /// The highest nonce the relayer used for `payer`, if any.
    pub async fn outbox_last_nonce(&self, payer: u32) -> Result<Option<u64>> {
        self.read(move |conn| {
            // The row itself, not `max(nonce)`: its MAC is checked.
            let n: Option<i64> = conn.query_opt(
                &format!(
                    "SELECT nonce, {} FROM chain_batches WHERE payer = ?1 ORDER BY nonce DESC LIMIT 1",
                    CHAIN_BATCHES.select("")
                ),
                params![payer],
                |r| {
                    r.seal(1, &CHAIN_BATCHES)?;
                    r.get(0)
                },
            )?;
            Ok(n.map(|n| n as u64))
        })
        .await
    }

    /// The indexer's position: the next block to read, if it has started.
    pub async fn chain_cursor(&self, name: String) -> Result<Option<u64>> {
        self.read(move |conn| cursor_at(conn, &name)).await
    }
}

/// A conversion the chain refused for good leaves the account in API mode, as it still is
/// on chain: otherwise the API would refuse its master key while the contract refuses its
/// new admin, and nobody could administer it. `just_failed` selects the entries that
/// have just been marked failed (`seq = ?1` or `batch_id = ?1`, bound to `id`); only
/// conversions among them are undone.
fn undo_refused_conversions(tx: Conn<'_>, just_failed: &str, id: i64) -> Result<()> {
    // The entries' JSON is read here rather than in SQL (the engines' JSON functions
    // differ).
    let failed = tx.query_map(
        &format!(
            "SELECT api_key_hash, op, {} FROM chain_outbox WHERE {just_failed} AND state = 'failed'",
            CHAIN_OUTBOX.select("")
        ),
        params![id],
        |r| {
            r.seal(2, &CHAIN_OUTBOX)?;
            Ok((r.get::<Vec<u8>>(0)?, r.get::<String>(1)?))
        },
    )?;
    let mut undone = 0;
    for (api_key_hash, json) in failed {
        let conversion = matches!(
            serde_json::from_str::<MirrorOp>(&json),
            Ok(MirrorOp::ConvertAccount { .. })
        );
        if conversion {
            undone += integrity::update_eq(
                tx,
                &ACCOUNTS,
                columns![("managed", 0i64), ("api_key_hash", api_key_hash)],
                |row| {
                    row.set("managed", &1i64)?;
                    row.set("admin_wallet_address", &None::<String>)?;
                    Ok(true)
                },
            )?;
        }
    }
    if undone > 0 {
        tracing::warn!(
            accounts = undone,
            "the chain refused a conversion to ChainSecured; the account stays in API mode"
        );
    }
    Ok(())
}

/// The cursor `name`, checked.
pub(super) fn cursor_at(conn: Conn<'_>, name: &str) -> Result<Option<u64>> {
    Ok(conn
        .query_opt(
            &format!(
                "SELECT block, {} FROM chain_cursors WHERE name = ?1",
                CHAIN_CURSORS.select("")
            ),
            params![name],
            |r| {
                r.seal(1, &CHAIN_CURSORS)?;
                r.get::<i64>(0)
            },
        )?
        .map(|b| b as u64))
}

pub(super) fn set_cursor(tx: Conn<'_>, name: &str, block: u64) -> Result<()> {
    let moved = integrity::update_eq(tx, &CHAIN_CURSORS, columns![("name", name)], |row| {
        row.set("block", &(block as i64))?;
        Ok(true)
    })?;
    if moved == 0 {
        integrity::insert(
            tx,
            &CHAIN_CURSORS,
            columns![("name", name), ("block", block as i64)],
        )?;
    }
    Ok(())
}

fn load_batch(conn: Conn<'_>, id: i64) -> Result<Option<SentBatch>> {
    let row = conn.query_opt(
        &format!(
            "SELECT id, nonce, raw_tx, tx_hashes, first_seq, last_seq, created_at, {} FROM chain_batches WHERE id = ?1",
            CHAIN_BATCHES.select("")
        ),
        params![id],
        |r| {
            r.seal(7, &CHAIN_BATCHES)?;
            Ok((
                r.get::<i64>(0)?,
                r.get::<i64>(1)?,
                r.get::<Vec<u8>>(2)?,
                r.get::<String>(3)?,
                r.get::<i64>(4)?,
                r.get::<i64>(5)?,
                r.get::<i64>(6)?,
            ))
        },
    )?;
    let Some((id, nonce, raw_tx, hashes, first_seq, last_seq, sent_at)) = row else {
        return Ok(None);
    };
    let tx_hashes: Vec<B256> =
        serde_json::from_str(&hashes).map_err(|e| StoreError::Task(e.to_string()))?;
    Ok(Some(SentBatch {
        id,
        nonce: nonce as u64,
        raw_tx,
        tx_hashes,
        first_seq,
        last_seq,
        sent_at,
    }))
}
