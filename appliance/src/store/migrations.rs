//! Versioned schema migrations, applied in order at start.
//!
//! The schema version is SQLite's `user_version`. Each migration runs in its own
//! transaction together with the version bump, so a crash leaves the database at a
//! whole version. Migrations are append-only: never edit one that has shipped.

use rusqlite::Connection;

use super::{Result, StoreError};

struct Migration {
    version: i64,
    name: &'static str,
    sql: &'static str,
}

const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "accounts and usage keys",
        sql: r#"
CREATE TABLE accounts (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    api_key_hash         BLOB    NOT NULL UNIQUE CHECK (length(api_key_hash) = 32),
    name                 TEXT    NOT NULL,
    description          TEXT    NOT NULL DEFAULT '',
    email                TEXT,
    wallet_address       TEXT    NOT NULL,
    managed              INTEGER NOT NULL DEFAULT 1 CHECK (managed IN (0, 1)),
    admin_wallet_address TEXT,
    created_at           INTEGER NOT NULL
);

CREATE TABLE usage_keys (
    id                        INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id                INTEGER NOT NULL REFERENCES accounts (id),
    key_hash                  BLOB    NOT NULL UNIQUE CHECK (length(key_hash) = 32),
    name                      TEXT    NOT NULL,
    description               TEXT    NOT NULL DEFAULT '',
    can_create_groups         INTEGER NOT NULL CHECK (can_create_groups IN (0, 1)),
    can_delete_groups         INTEGER NOT NULL CHECK (can_delete_groups IN (0, 1)),
    can_create_pkps           INTEGER NOT NULL CHECK (can_create_pkps IN (0, 1)),
    manage_ipfs_ids_in_groups TEXT    NOT NULL,
    add_pkp_to_groups         TEXT    NOT NULL,
    remove_pkp_from_groups    TEXT    NOT NULL,
    execute_in_groups         TEXT    NOT NULL,
    created_at                INTEGER NOT NULL,
    updated_at                INTEGER NOT NULL
);

CREATE INDEX usage_keys_by_account ON usage_keys (account_id, id);
"#,
    },
    Migration {
        version: 2,
        name: "wallets",
        sql: r#"
-- Wallets (PKPs) held by keyservice. The key never leaves keyservice; the store keeps
-- only its public identity and the derivation path keyservice derives it from.
-- account_id is NULL for a wallet not (yet) attached to an account.
CREATE TABLE wallets (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id      INTEGER REFERENCES accounts (id),
    pkp_id          BLOB    NOT NULL UNIQUE CHECK (length(pkp_id) = 32),
    address         BLOB    NOT NULL UNIQUE CHECK (length(address) = 20),
    derivation_path BLOB    NOT NULL UNIQUE CHECK (length(derivation_path) = 32),
    name            TEXT    NOT NULL DEFAULT '',
    description     TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL
);

CREATE INDEX wallets_by_account ON wallets (account_id, id);
"#,
    },
    Migration {
        version: 3,
        name: "groups, actions and the code cache",
        sql: r#"
-- Group ids are service-wide and never reused (AUTOINCREMENT). A group permits wallets
-- and actions, each either explicitly (the membership tables) or all of them (flags).
CREATE TABLE groups (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id  INTEGER NOT NULL REFERENCES accounts (id),
    name        TEXT    NOT NULL,
    description TEXT    NOT NULL DEFAULT '',
    all_wallets INTEGER NOT NULL DEFAULT 0 CHECK (all_wallets IN (0, 1)),
    all_actions INTEGER NOT NULL DEFAULT 0 CHECK (all_actions IN (0, 1)),
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX groups_by_account ON groups (account_id, id);

-- Actions registered on an account, by IPFS CID; cid_hash = keccak256(CID string).
CREATE TABLE actions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id  INTEGER NOT NULL REFERENCES accounts (id),
    cid_hash    BLOB    NOT NULL CHECK (length(cid_hash) = 32),
    ipfs_cid    TEXT    NOT NULL,
    name        TEXT    NOT NULL DEFAULT '',
    description TEXT    NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    UNIQUE (account_id, cid_hash)
);
CREATE INDEX actions_by_cid ON actions (ipfs_cid);

CREATE TABLE group_wallets (
    group_id  INTEGER NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    wallet_id INTEGER NOT NULL REFERENCES wallets (id),
    PRIMARY KEY (group_id, wallet_id)
) WITHOUT ROWID;
CREATE INDEX group_wallets_by_wallet ON group_wallets (wallet_id);

CREATE TABLE group_actions (
    group_id  INTEGER NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    action_id INTEGER NOT NULL REFERENCES actions (id) ON DELETE CASCADE,
    PRIMARY KEY (group_id, action_id)
) WITHOUT ROWID;
CREATE INDEX group_actions_by_action ON group_actions (action_id);

-- Action code seen by the service, by CID, for later execution by ipfs_id. Bounded:
-- least recently used entries not referenced by a registered action are evicted.
CREATE TABLE code_blobs (
    cid       TEXT    PRIMARY KEY,
    code      BLOB    NOT NULL,
    size      INTEGER NOT NULL,
    last_used INTEGER NOT NULL
);
CREATE INDEX code_blobs_by_use ON code_blobs (last_used);
"#,
    },
    Migration {
        version: 4,
        name: "chain outbox, batches, indexer cursors, id sequences",
        sql: r#"
-- Mirror writes for AccountConfig, in commit order; `op` is JSON of format `format`.
-- state: pending → sent (in a batch) → mined; failed = refused for good (see error).
-- solo = 1: its batch reverted once; it is retried alone.
CREATE TABLE chain_outbox (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    api_key_hash BLOB    NOT NULL CHECK (length(api_key_hash) = 32),
    format       INTEGER NOT NULL,
    op           TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    state        TEXT    NOT NULL DEFAULT 'pending'
                 CHECK (state IN ('pending', 'sent', 'mined', 'failed')),
    batch_id     INTEGER REFERENCES chain_batches (id),
    solo         INTEGER NOT NULL DEFAULT 0 CHECK (solo IN (0, 1)),
    error        TEXT
);
CREATE INDEX chain_outbox_by_state ON chain_outbox (state, seq);
CREATE INDEX chain_outbox_by_batch ON chain_outbox (batch_id);

-- One transaction per batch; recorded (with its nonce and raw bytes) before broadcast.
CREATE TABLE chain_batches (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    first_seq    INTEGER NOT NULL,
    last_seq     INTEGER NOT NULL,
    payer        INTEGER NOT NULL,
    nonce        INTEGER NOT NULL,
    raw_tx       BLOB    NOT NULL,
    tx_hashes    TEXT    NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('sent', 'mined', 'reverted')),
    mined_hash   BLOB,
    block_number INTEGER,
    gas_used     INTEGER,
    created_at   INTEGER NOT NULL,
    mined_at     INTEGER
);
CREATE INDEX chain_batches_by_state ON chain_batches (state, id);

-- Where each chain follower resumes (the next block to read).
CREATE TABLE chain_cursors (
    name  TEXT    PRIMARY KEY,
    block INTEGER NOT NULL
);

-- Service-assigned ids. Group ids below 2^62 are the service's, from here; ids from 2^62
-- are assigned by AccountConfig for ChainSecured accounts and stored as the chain gives
-- them, so the two never collide.
CREATE TABLE id_sequences (
    name TEXT    PRIMARY KEY,
    next INTEGER NOT NULL
);
INSERT INTO id_sequences (name, next)
VALUES ('groups', coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'groups'), 0) + 1);
"#,
    },
    Migration {
        version: 5,
        name: "accepted wallet signatures",
        sql: r#"
-- EIP-712 wallet signatures already accepted, by the digest that was signed, kept until
-- their issuedAt window has passed (then the window alone refuses them): a signature is
-- accepted once, across restarts.
CREATE TABLE accepted_signatures (
    digest      BLOB    PRIMARY KEY CHECK (length(digest) = 32),
    flow        TEXT    NOT NULL,
    signer      BLOB    NOT NULL CHECK (length(signer) = 20),
    expires_at  INTEGER NOT NULL,
    accepted_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX accepted_signatures_by_expiry ON accepted_signatures (expires_at);
"#,
    },
    Migration {
        version: 6,
        name: "credit ledger",
        sql: super::ledger::MIGRATION_SQL,
    },
    Migration {
        version: 7,
        name: "ChainSecured accounts by admin wallet",
        sql: r#"
-- X-Wallet-Auth resolves a signer to its ChainSecured account on every billing request;
-- this expression index serves store::signatures' `lower(admin_wallet_address)` lookup.
CREATE INDEX accounts_by_admin_wallet
    ON accounts (lower(admin_wallet_address)) WHERE managed = 0;
"#,
    },
    Migration {
        version: 8,
        name: "minters of signature-minted wallets and usage keys, usage key expiry",
        sql: r#"
-- The wallet that signed the mint request (create_wallet_with_signature,
-- add_usage_api_key_with_signature). A minted wallet or usage key joins a ChainSecured
-- account only when that account's admin is its minter. NULL for wallets the service
-- created for an account, and for wallets minted before this version (whose minter was
-- never recorded: they join no account).
ALTER TABLE wallets ADD COLUMN minted_by BLOB CHECK (minted_by IS NULL OR length(minted_by) = 20);

-- Usage keys minted for a wallet owner; the key itself is never stored, only its hash.
CREATE TABLE minted_usage_keys (
    key_hash  BLOB    PRIMARY KEY CHECK (length(key_hash) = 32),
    minted_by BLOB    NOT NULL CHECK (length(minted_by) = 20),
    minted_at INTEGER NOT NULL
) WITHOUT ROWID;

-- When a usage key stops authenticating (Unix seconds); NULL: never. Set from the
-- on-chain `expiration` of ChainSecured accounts' keys.
ALTER TABLE usage_keys ADD COLUMN expires_at INTEGER;
"#,
    },
    Migration {
        version: 9,
        name: "code cache areas: anonymous and per account",
        sql: r#"
-- Action code by CID, in areas: owner 0 is the anonymous area (get_lit_action_ipfs_id
-- without a key, capped as a whole), any other owner an account id (capped by its quota;
-- code of the account's registered actions is pinned but counted).
CREATE TABLE code_store (
    owner     INTEGER NOT NULL,
    cid       TEXT    NOT NULL,
    code      BLOB    NOT NULL,
    size      INTEGER NOT NULL,
    last_used INTEGER NOT NULL,
    PRIMARY KEY (owner, cid)
) WITHOUT ROWID;
CREATE INDEX code_store_by_use ON code_store (owner, last_used);

-- Code registered actions refer to goes to those accounts' areas; the rest is anonymous.
INSERT INTO code_store (owner, cid, code, size, last_used)
    SELECT DISTINCT a.account_id, c.cid, c.code, c.size, c.last_used
    FROM code_blobs c JOIN actions a ON a.ipfs_cid = c.cid;
INSERT INTO code_store (owner, cid, code, size, last_used)
    SELECT 0, c.cid, c.code, c.size, c.last_used FROM code_blobs c
    WHERE NOT EXISTS (SELECT 1 FROM actions a WHERE a.ipfs_cid = c.cid);
DROP TABLE code_blobs;
"#,
    },
];

pub(super) fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

pub(super) fn run(conn: &mut Connection) -> Result<()> {
    let current: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    let known = latest_version();
    if current > known {
        return Err(StoreError::SchemaTooNew {
            found: current,
            known,
        });
    }
    for migration in MIGRATIONS.iter().filter(|m| m.version > current) {
        let fail = |source| StoreError::Migration {
            version: migration.version,
            name: migration.name,
            source,
        };
        let tx = conn.transaction().map_err(fail)?;
        tx.execute_batch(migration.sql).map_err(fail)?;
        tx.pragma_update(None, "user_version", migration.version)
            .map_err(fail)?;
        tx.commit().map_err(fail)?;
        tracing::info!(
            version = migration.version,
            name = migration.name,
            "applied migration"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database at version 7 with an unattached minted wallet and a usage key moves to
    /// version 8 keeping both: the wallet's minter is unknown (NULL) and the key never
    /// expires.
    #[test]
    fn version_8_records_minters_and_keeps_older_rows() {
        let mut conn = Connection::open_in_memory().unwrap();
        let tx = conn.transaction().unwrap();
        for m in MIGRATIONS.iter().filter(|m| m.version <= 7) {
            tx.execute_batch(m.sql).unwrap();
        }
        tx.pragma_update(None, "user_version", 7).unwrap();
        tx.execute_batch(
            "INSERT INTO accounts (api_key_hash, name, wallet_address, created_at)
                 VALUES (zeroblob(32), 'a', '0x', 1);
             INSERT INTO usage_keys (account_id, key_hash, name, can_create_groups,
                 can_delete_groups, can_create_pkps, manage_ipfs_ids_in_groups,
                 add_pkp_to_groups, remove_pkp_from_groups, execute_in_groups, created_at,
                 updated_at)
                 VALUES (1, randomblob(32), 'k', 0, 0, 0, '[]', '[]', '[]', '[0]', 1, 1);
             INSERT INTO wallets (account_id, pkp_id, address, derivation_path, created_at)
                 VALUES (NULL, randomblob(32), randomblob(20), randomblob(32), 1);",
        )
        .unwrap();
        tx.commit().unwrap();

        run(&mut conn).unwrap();
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, latest_version());
        let minter: Option<Vec<u8>> = conn
            .query_row("SELECT minted_by FROM wallets", [], |r| r.get(0))
            .unwrap();
        assert_eq!(minter, None);
        let expires: Option<i64> = conn
            .query_row("SELECT expires_at FROM usage_keys", [], |r| r.get(0))
            .unwrap();
        assert_eq!(expires, None);
        // The new table takes a minter, and only a 20-byte one.
        conn.execute(
            "INSERT INTO minted_usage_keys (key_hash, minted_by, minted_at)
             VALUES (randomblob(32), randomblob(20), 1)",
            [],
        )
        .unwrap();
        assert!(
            conn.execute(
                "INSERT INTO minted_usage_keys (key_hash, minted_by, minted_at)
                 VALUES (randomblob(32), randomblob(19), 1)",
                [],
            )
            .is_err()
        );
    }

    /// Version 9 moves cached code a registered action refers to into that account's
    /// area and the rest into the anonymous area.
    #[test]
    fn version_9_splits_the_code_cache_into_areas() {
        let mut conn = Connection::open_in_memory().unwrap();
        let tx = conn.transaction().unwrap();
        for m in MIGRATIONS.iter().filter(|m| m.version <= 8) {
            tx.execute_batch(m.sql).unwrap();
        }
        tx.pragma_update(None, "user_version", 8).unwrap();
        tx.execute_batch(
            "INSERT INTO accounts (api_key_hash, name, wallet_address, created_at)
                 VALUES (zeroblob(32), 'a', '0x', 1);
             INSERT INTO actions (account_id, cid_hash, ipfs_cid, name, description, created_at, updated_at)
                 VALUES (1, randomblob(32), 'QmPinned', 'n', '', 1, 1);
             INSERT INTO code_blobs (cid, code, size, last_used) VALUES ('QmPinned', x'01', 1, 5);
             INSERT INTO code_blobs (cid, code, size, last_used) VALUES ('QmLoose', x'0203', 2, 6);",
        )
        .unwrap();
        tx.commit().unwrap();

        run(&mut conn).unwrap();
        let rows: Vec<(i64, String, i64)> = conn
            .prepare("SELECT owner, cid, size FROM code_store ORDER BY cid")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(
            rows,
            vec![(0, "QmLoose".to_owned(), 2), (1, "QmPinned".to_owned(), 1)]
        );
    }

    #[test]
    fn versions_are_consecutive_from_one() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i64 + 1, "{}", m.name);
        }
    }
}
