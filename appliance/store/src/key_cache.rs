//! Resolved API keys, held in memory so that an authenticated request does not read the
//! database to learn who it is.
//!
//! Correctness rests on one rule: **every write batch that may have changed what a key
//! resolves to empties the cache before any write in it is acknowledged**
//! (`writer::commit_batch` calls [`KeyCache::invalidate`] after the commit, before the
//! completions). So once a revocation, a deletion or a mode change has been answered,
//! the very next request resolves its key from the database. On SQLite that is every
//! batch (nothing there tracks what a batch wrote). On PostgreSQL it is every batch in
//! which a kept job wrote or deleted a row of `accounts` or `usage_keys`, the tables keys
//! resolve from (`integrity::KEY_TABLES`): every write of a protected table goes through
//! `store::integrity`'s typed calls, which record the table, so the tracking is complete;
//! a batch that was not committed empties the cache too. This relies on the store being
//! the database's only writer (with its replicas): a change made to the database by
//! another process while the appliance runs is not seen until the next batch that
//! changes keys, or (PostgreSQL) [`REPLICA_TTL`].
//!
//! A look-up that races a write cannot leave a stale entry behind: it takes the
//! generation before it reads the database and inserts only if the generation has not
//! moved, and [`KeyCache::invalidate`] moves it under the same lock that empties the map.
//!
//! With PostgreSQL several replicas write, so a replica also empties its cache whenever
//! another replica commits a change to keys: such a write batch sends `NOTIFY` in its
//! transaction and each replica listens (`store::postgres::follow_changes`). As a bound that holds even
//! while that feed is down or late, entries of a replicated store live at most
//! [`REPLICA_TTL`]: a key revoked on one replica stops working on every other replica as
//! soon as the notification arrives (milliseconds), and at the latest `REPLICA_TTL` after
//! the revocation was acknowledged.
//!
//! Only keys that resolved are kept (unknown keys always go to the database, and are
//! rate-limited there), with the usage key's expiry, checked on every hit. The map is
//! bounded ([`MAX_ENTRIES`]); when full it is emptied and refilled. It holds key hashes,
//! never keys.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::{Duration, Instant};

use super::base::ResolvedKey;
use super::now_unix;
use appliance_domain::api_keys::KeyHash;

/// Most keys held; past it the map is emptied.
pub(super) const MAX_ENTRIES: usize = 16_384;

/// How long a replicated store (PostgreSQL) keeps a resolved key at most.
pub(super) const REPLICA_TTL: Duration = Duration::from_secs(2);

#[derive(Default)]
pub(super) struct KeyCache {
    generation: AtomicU64,
    entries: RwLock<HashMap<KeyHash, Entry>>,
    /// `None`: until the next write batch (one writer: SQLite).
    ttl: Option<Duration>,
}

struct Entry {
    key: ResolvedKey,
    /// Unix seconds after which a usage key is dead.
    expires_at: Option<i64>,
    cached_at: Instant,
}

impl KeyCache {
    /// A cache whose entries also expire `ttl` after they were read from the database.
    pub(super) fn with_ttl(ttl: Duration) -> Self {
        Self {
            ttl: Some(ttl),
            ..Self::default()
        }
    }

    /// The resolved key for `hash`, when held and not expired.
    pub(super) fn get(&self, hash: &KeyHash) -> Option<ResolvedKey> {
        let entries = self.entries.read().unwrap_or_else(PoisonError::into_inner);
        let entry = entries.get(hash)?;
        if entry.expires_at.is_some_and(|t| t <= now_unix()) {
            return None;
        }
        if self.ttl.is_some_and(|ttl| entry.cached_at.elapsed() >= ttl) {
            return None;
        }
        Some(entry.key.clone())
    }

    /// Taken before reading the database; passed to [`KeyCache::insert`].
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Keeps what the database said of `hash` at `generation`, unless a write batch
    /// has completed since.
    pub(super) fn insert(
        &self,
        generation: u64,
        hash: KeyHash,
        key: ResolvedKey,
        expires_at: Option<i64>,
    ) {
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(
            hash,
            Entry {
                key,
                expires_at,
                cached_at: Instant::now(),
            },
        );
    }

    /// Forgets every key; called by the writer after each batch that may have changed
    /// keys, before acknowledging it.
    pub(super) fn invalidate(&self) {
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        self.generation.fetch_add(1, Ordering::AcqRel);
        entries.clear();
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.read().map(|e| e.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AccountId;

    fn hash(n: u32) -> KeyHash {
        let mut h = [0u8; 32];
        h[..4].copy_from_slice(&n.to_be_bytes());
        KeyHash(h)
    }

    #[test]
    fn a_lookup_that_raced_a_write_is_not_kept() {
        let cache = KeyCache::default();
        let before = cache.generation();
        // A write batch completes between the database read and the insert.
        cache.invalidate();
        cache.insert(before, hash(1), ResolvedKey::Account(AccountId(1)), None);
        assert_eq!(cache.get(&hash(1)), None);
        // Read after the write: kept.
        let after = cache.generation();
        cache.insert(after, hash(1), ResolvedKey::Account(AccountId(1)), None);
        assert_eq!(
            cache.get(&hash(1)),
            Some(ResolvedKey::Account(AccountId(1)))
        );
        cache.invalidate();
        assert_eq!(cache.get(&hash(1)), None);
    }

    #[test]
    fn an_expired_usage_key_is_not_served_from_memory() {
        let cache = KeyCache::default();
        let key = ResolvedKey::Account(AccountId(7));
        let g = cache.generation();
        cache.insert(g, hash(1), key.clone(), Some(now_unix() - 1));
        cache.insert(g, hash(2), key.clone(), Some(now_unix() + 3600));
        assert_eq!(cache.get(&hash(1)), None);
        assert_eq!(cache.get(&hash(2)), Some(key));
    }

    #[test]
    fn a_replicated_cache_forgets_after_its_ttl() {
        let cache = KeyCache::with_ttl(Duration::from_millis(50));
        let g = cache.generation();
        cache.insert(g, hash(1), ResolvedKey::Account(AccountId(1)), None);
        assert!(cache.get(&hash(1)).is_some());
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(cache.get(&hash(1)), None);
    }

    #[test]
    fn the_map_stays_bounded() {
        let cache = KeyCache::default();
        let g = cache.generation();
        for n in 0..(MAX_ENTRIES as u32 * 2 + 5) {
            cache.insert(g, hash(n), ResolvedKey::Account(AccountId(1)), None);
            assert!(cache.len() <= MAX_ENTRIES);
        }
    }
}
