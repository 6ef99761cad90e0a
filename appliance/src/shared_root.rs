//! One root for every replica.
//!
//! A keyservice started in shared-root mode (`[store] engine = "postgres"`, or
//! `--shared-root`) has no root of its own: it waits for the appliance to hand it the
//! sealed root the database holds for its compose hash. The first replica of an app
//! finds none, asks its keyservice for a fresh sealed root and offers it to the database;
//! whichever replica's offer lands first is the app's root, and every replica (that one
//! included) adopts the blob the database kept. A keyservice that cannot open the blob
//! (another app, another compose hash, a damaged row) refuses it and exits: it never
//! makes a second root, and the appliance does not start.
//!
//! With PostgreSQL the store also needs keyservice's row-MAC key
//! ([`KeyserviceRowKey`]), which only exists once the root is adopted; the database's
//! replicas must all run the same root (same `root_id`), or none of their rows would
//! verify, so a mismatch stops the start.
//!
//! A keyservice that restarts while the appliance runs is waiting again: [`keep`] hands
//! it the root again within [`KEEP_EVERY`].

use std::sync::Arc;
use std::time::Duration;

use keyservice_api::{ComposeHash, KeyError, RootId};

use crate::keyservice_client::Keys;
use crate::store::{Engine, RowAuthenticator, SealedRootRow, Store, StoreError};

/// How often a running appliance checks that its keyservice still holds the root.
pub const KEEP_EVERY: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RootError {
    #[error("keyservice: {0}")]
    Keys(#[from] KeyError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "keyservice refused the database's shared sealed root for compose hash {compose_hash}: {reason}; it exits rather than create a second root (is this replica the same app, with the same compose hash, and the same dev secret on the dev platform?)"
    )]
    Refused {
        compose_hash: ComposeHash,
        reason: String,
    },
    #[error(
        "the database holds the shared root sealed for compose hash(es) {sealed_for}, not for this replica's {compose_hash}: reseal it for this compose hash from a running replica and import it (docs/operators.md, \"Replicas\", upgrades)"
    )]
    NotSealedForThisCompose {
        compose_hash: ComposeHash,
        sealed_for: String,
    },
    #[error(
        "keyservice runs root {running} but this database was written under root {recorded}: refusing to serve, since its wallets would derive other keys (restore the keyservice state, the sealed root, that goes with this database)"
    )]
    OtherRoot { running: RootId, recorded: RootId },
    #[error(
        "the database holds sealed roots with different root ids ({0}); it has been written by more than one app"
    )]
    Inconsistent(String),
    #[error(
        "a PostgreSQL store is shared by replicas, which must share one root: run keyservice with [store] engine = \"postgres\" in its --chain-config (or --shared-root); this one holds a root of its own ({0})"
    )]
    NotShared(RootId),
}

/// Makes sure keyservice holds the app's shared root (adopting it, or making the first
/// one), then gives a PostgreSQL store its row key. Returns the root id.
pub async fn establish(store: &Store, keys: &Keys) -> Result<RootId, RootError> {
    let status = keys.root_status().await?;
    let recorded = store.sealed_roots().await?;
    let ids = distinct_ids(&recorded)?;
    let root_id = match status.root_id {
        Some(running) => {
            if let Some(recorded) = ids.first()
                && *recorded != running
            {
                return Err(RootError::OtherRoot {
                    running,
                    recorded: *recorded,
                });
            }
            if store.engine() == Engine::Postgres && recorded.is_empty() {
                return Err(RootError::NotShared(running));
            }
            running
        }
        None => adopt(store, keys, status.compose_hash, &recorded).await?,
    };
    // Whatever the engine: a database whose wallets derive from another root (restored
    // beside another keyservice state) would serve other keys under the same names.
    let recorded = RootId(store.record_root_identity(root_id.0).await?);
    if recorded != root_id {
        return Err(RootError::OtherRoot {
            running: root_id,
            recorded,
        });
    }
    if store.engine() == Engine::Postgres {
        store.set_row_authenticator(Arc::new(KeyserviceRowKey {
            client: keyservice_api::BlockingClient::like(keys.client()),
        }));
    }
    Ok(root_id)
}

fn distinct_ids(rows: &[SealedRootRow]) -> Result<Vec<RootId>, RootError> {
    let mut ids: Vec<RootId> = Vec::new();
    for row in rows {
        let id = RootId(row.root_id);
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    if ids.len() > 1 {
        let list: Vec<String> = ids.iter().map(ToString::to_string).collect();
        return Err(RootError::Inconsistent(list.join(", ")));
    }
    Ok(ids)
}

async fn adopt(
    store: &Store,
    keys: &Keys,
    compose_hash: ComposeHash,
    recorded: &[SealedRootRow],
) -> Result<RootId, RootError> {
    let row = match recorded
        .iter()
        .find(|r| r.compose_hash == *compose_hash.as_bytes())
    {
        Some(row) => row.clone(),
        None if !recorded.is_empty() => {
            let sealed_for: Vec<String> = recorded
                .iter()
                .map(|r| ComposeHash::from_bytes(r.compose_hash).to_string())
                .collect();
            return Err(RootError::NotSealedForThisCompose {
                compose_hash,
                sealed_for: sealed_for.join(", "),
            });
        }
        None => {
            // The app's first replica: offer a fresh root; the first offer recorded wins.
            let fresh = keys.create_sealed_root().await?;
            let winner = store
                .offer_first_root(SealedRootRow {
                    compose_hash: *compose_hash.as_bytes(),
                    sealed: fresh.sealed.to_vec(),
                    root_id: fresh.root_id.0,
                })
                .await?;
            if winner.root_id == fresh.root_id.0 {
                tracing::info!(root_id = %fresh.root_id, %compose_hash, "created the app's shared root");
            }
            winner
        }
    };
    let adopted = keys.adopt_root(&row.sealed).await.map_err(|e| {
        if e.is_unavailable() {
            RootError::Keys(e)
        } else {
            RootError::Refused {
                compose_hash,
                reason: e.to_string(),
            }
        }
    })?;
    if adopted.0 != row.root_id {
        return Err(RootError::OtherRoot {
            running: adopted,
            recorded: RootId(row.root_id),
        });
    }
    tracing::info!(root_id = %adopted, %compose_hash, "keyservice adopted the shared root");
    Ok(adopted)
}

/// [`establish`], waiting up to `wait` for a keyservice that does not answer yet (a
/// container that starts after this one); any other failure is returned at once.
pub async fn establish_waiting(
    store: &Store,
    keys: &Keys,
    wait: Duration,
) -> Result<RootId, RootError> {
    let started = tokio::time::Instant::now();
    let mut warned_at: Option<tokio::time::Instant> = None;
    loop {
        match establish(store, keys).await {
            Err(RootError::Keys(err)) if err.is_unavailable() && started.elapsed() < wait => {
                if warned_at.is_none_or(|at| at.elapsed() >= Duration::from_secs(5)) {
                    tracing::warn!(error = %err, waited_ms = started.elapsed().as_millis() as u64,
                        limit_ms = wait.as_millis() as u64,
                        "keyservice does not answer yet; waiting for it before serving");
                    warned_at = Some(tokio::time::Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            other => return other,
        }
    }
}

/// Hands the root again to a keyservice that restarted (and so waits for it), every
/// [`KEEP_EVERY`], for as long as the task runs.
pub async fn keep(store: Store, keys: Keys) {
    loop {
        tokio::time::sleep(KEEP_EVERY).await;
        match keys.root_status().await {
            Ok(status) if !status.is_ready() => {
                tracing::warn!("keyservice restarted and waits for its root; handing it over");
                let recorded = match store.sealed_roots().await {
                    Ok(rows) => rows,
                    Err(err) => {
                        tracing::warn!(error = %err, "cannot read the shared root");
                        continue;
                    }
                };
                if let Err(err) = adopt(&store, &keys, status.compose_hash, &recorded).await {
                    tracing::error!(error = %err, "keyservice did not take the shared root back");
                }
            }
            Ok(_) => {}
            Err(err) => tracing::debug!(error = %err, "keyservice not reachable"),
        }
    }
}

/// Row MACs computed by keyservice, which derives their key from the root and never
/// exports it (operation `RowMac`). Blocking, on a connection of its own: the store calls
/// it from its writer thread (once per write batch) and from reads on the blocking pool,
/// so it does not hop through the async runtime. Counted with the other keyservice calls.
pub struct KeyserviceRowKey {
    client: keyservice_api::BlockingClient,
}

impl RowAuthenticator for KeyserviceRowKey {
    fn tags(&self, items: &[Vec<u8>]) -> Result<Vec<[u8; 32]>, String> {
        let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
        self.client.row_macs(&refs).map_err(|e| e.to_string())
    }
}

/// The sealed-root format (keyservice/src/sealing.rs): magic, version, compose hash,
/// nonce, ciphertext and tag.
const SEALED_LEN: usize = keyservice_api::SEALED_ROOT_LEN;
const MAGIC: &[u8; 8] = b"KSVCSEAL";

/// The compose hash in a sealed root's header, if it is one.
pub fn sealed_compose_hash(sealed: &[u8]) -> Option<[u8; 32]> {
    if sealed.len() != SEALED_LEN || &sealed[..8] != MAGIC || sealed[8] != 1 {
        return None;
    }
    sealed[9..41].try_into().ok()
}

#[cfg(test)]
mod sealed_format_tests {
    use super::*;

    #[test]
    fn only_a_sealed_root_names_a_compose_hash() {
        let mut blob = vec![0u8; SEALED_LEN];
        blob[..8].copy_from_slice(MAGIC);
        blob[8] = 1;
        blob[9..41].copy_from_slice(&[7; 32]);
        assert_eq!(sealed_compose_hash(&blob), Some([7; 32]));
        assert_eq!(sealed_compose_hash(&blob[..100]), None);
        blob[8] = 2;
        assert_eq!(sealed_compose_hash(&blob), None);
        blob[8] = 1;
        blob[0] = b'X';
        assert_eq!(sealed_compose_hash(&blob), None);
    }
}
