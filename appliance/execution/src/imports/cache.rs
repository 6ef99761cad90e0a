//! The appliance's memory of modules: verified bodies by SHA-384 (bounded in bytes, least
//! recently used evicted), and the locks already read from the store by URL (bounded in
//! entries). A body is found only by the hash the caller expects, so the cache can never
//! hand out a body for a URL whose lock or pin says otherwise.

use std::collections::HashMap;
use std::sync::Arc;

/// Lock entries remembered before the memo is cleared (each is a URL and 48 bytes).
const MAX_REMEMBERED_LOCKS: usize = 16 * 1024;

pub(super) struct ModuleCache {
    capacity: usize,
    used: usize,
    clock: u64,
    bodies: HashMap<[u8; 48], Body>,
    locks: HashMap<String, [u8; 48]>,
}

struct Body {
    text: Arc<str>,
    last_used: u64,
}

impl ModuleCache {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            used: 0,
            clock: 0,
            bodies: HashMap::new(),
            locks: HashMap::new(),
        }
    }

    /// The body whose SHA-384 is `hash`, if kept.
    pub(super) fn body(&mut self, hash: &[u8; 48]) -> Option<Arc<str>> {
        self.clock += 1;
        let clock = self.clock;
        self.bodies.get_mut(hash).map(|body| {
            body.last_used = clock;
            Arc::clone(&body.text)
        })
    }

    /// Keeps `text`, whose SHA-384 the caller computed as `hash`, evicting the least
    /// recently used bodies to make room (a body larger than the whole cache is not kept).
    pub(super) fn keep(&mut self, hash: [u8; 48], text: Arc<str>) {
        if text.len() > self.capacity || self.bodies.contains_key(&hash) {
            return;
        }
        while self.used + text.len() > self.capacity {
            let Some(oldest) = self
                .bodies
                .iter()
                .min_by_key(|(_, body)| body.last_used)
                .map(|(hash, _)| *hash)
            else {
                break;
            };
            if let Some(evicted) = self.bodies.remove(&oldest) {
                self.used -= evicted.text.len();
            }
        }
        self.clock += 1;
        self.used += text.len();
        self.bodies.insert(
            hash,
            Body {
                text,
                last_used: self.clock,
            },
        );
    }

    /// The lock of `url` as the store gave it earlier (locks are never changed).
    pub(super) fn lock(&self, url: &str) -> Option<[u8; 48]> {
        self.locks.get(url).copied()
    }

    pub(super) fn remember_lock(&mut self, url: &str, hash: [u8; 48]) {
        if self.locks.len() >= MAX_REMEMBERED_LOCKS {
            self.locks.clear();
        }
        self.locks.insert(url.to_owned(), hash);
    }

    /// Bytes of bodies kept.
    #[cfg(test)]
    pub(super) fn used(&self) -> usize {
        self.used
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_found_by_hash_and_the_least_recently_used_go_first() {
        let mut cache = ModuleCache::new(10);
        cache.keep([1; 48], "aaaa".into());
        cache.keep([2; 48], "bbbb".into());
        assert_eq!(cache.body(&[1; 48]).as_deref(), Some("aaaa"));
        // 4 + 4 + 4 > 10: the least recently used (2) goes.
        cache.keep([3; 48], "cccc".into());
        assert_eq!(cache.body(&[2; 48]), None);
        assert_eq!(cache.body(&[1; 48]).as_deref(), Some("aaaa"));
        assert_eq!(cache.body(&[3; 48]).as_deref(), Some("cccc"));
        assert_eq!(cache.used(), 8);
        // Larger than the whole cache: not kept, nothing evicted.
        cache.keep([4; 48], "x".repeat(11).into());
        assert_eq!(cache.body(&[4; 48]), None);
        assert_eq!(cache.used(), 8);
        // A capacity of 0 keeps nothing.
        let mut none = ModuleCache::new(0);
        none.keep([1; 48], "a".into());
        assert_eq!(none.body(&[1; 48]), None);
    }

    #[test]
    fn remembered_locks_are_bounded() {
        let mut cache = ModuleCache::new(0);
        for i in 0..MAX_REMEMBERED_LOCKS + 1 {
            cache.remember_lock(&format!("u{i}"), [0; 48]);
        }
        assert!(cache.locks.len() <= MAX_REMEMBERED_LOCKS);
        assert_eq!(
            cache.lock(&format!("u{MAX_REMEMBERED_LOCKS}")),
            Some([0; 48])
        );
    }
}
