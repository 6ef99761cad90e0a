//! Two replicas on one PostgreSQL database: two `Store`s, each with its own writer,
//! pool and change feed, as two appliance processes would have. The guarantees of
//! issue 22 that the store itself gives (the end-to-end test with two appliance
//! processes is `tests/e2e/replicas.rs`).

use std::time::{Duration, Instant};

use super::testing::{TestDb, new_account, signature};
use super::{Charge, NewUsageKey, Store, StoreError};
use appliance_domain::api_keys::KeyHash;
use appliance_domain::authz::{GroupSet, Permissions};

/// Two stores on one fresh database, sharing the row key (as replicas sharing a root).
async fn two_replicas() -> Option<(TestDb, Store, Store)> {
    let db = TestDb::postgres()?;
    let a = db.open().await;
    let b = db.open().await;
    Some((db, a, b))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_charges_on_two_replicas_never_overdraw() {
    let Some((_db, a, b)) = two_replicas().await else {
        return;
    };
    let account = new_account(&a, 1).await;
    a.credit_payment(account, "pi_1".into(), 1000, None)
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..300 {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            store.charge(account, 7, "lit_action").await
        }));
    }
    let (mut charged, mut refused) = (0u64, 0u64);
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => charged += 1,
            Err(StoreError::PaymentRequired(_)) => refused += 1,
            Err(other) => panic!("unexpected {other}"),
        }
    }
    assert_eq!(charged, 1000 / 7, "every charge that fits, and no more");
    assert_eq!(refused, 300 - 1000 / 7);
    assert_eq!(a.balance(account).await.unwrap(), 1000 % 7);
    assert_eq!(b.balance(account).await.unwrap(), 1000 % 7);
    let ledger = b
        .ledger(
            account,
            super::Page {
                number: 0,
                size: 1000,
            },
        )
        .await
        .unwrap();
    let sum: i64 = ledger.iter().map(|e| e.amount_cents).sum();
    assert_eq!(sum, (1000 % 7) as i64);
    assert!(
        ledger
            .iter()
            .all(|e| e.balance_after < 1000 || e.amount_cents > 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ids_stay_unique_across_replicas() {
    let Some((_db, a, b)) = two_replicas().await else {
        return;
    };
    let mut tasks = Vec::new();
    for seed in 1..=40u8 {
        let store = if seed % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            let account = new_account(&store, seed).await;
            let group = store
                .add_group(
                    account,
                    super::GroupSpec {
                        name: "g".into(),
                        description: String::new(),
                        wallets: super::Permitted::All,
                        actions: super::Permitted::All,
                    },
                    Charge::free(),
                )
                .await
                .unwrap();
            (account, group)
        }));
    }
    let mut accounts = std::collections::HashSet::new();
    let mut groups = std::collections::HashSet::new();
    for t in tasks {
        let (account, group) = t.await.unwrap();
        assert!(accounts.insert(account), "account id {account:?} twice");
        assert!(groups.insert(group), "group id {group} twice");
    }
    assert_eq!((accounts.len(), groups.len()), (40, 40));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_signature_accepted_by_one_replica_is_refused_by_the_other() {
    let Some((_db, a, b)) = two_replicas().await else {
        return;
    };
    let sig = signature(5, super::testing::now());
    assert!(a.accept_signature(sig).await.unwrap());
    assert!(!b.accept_signature(sig).await.unwrap());
    assert!(b.signature_accepted(sig.digest).await.unwrap());
    // Raced on both at once: exactly one accepts.
    let sig = signature(6, super::testing::now());
    let (x, y) = tokio::join!(a.accept_signature(sig), b.accept_signature(sig));
    assert!(x.unwrap() ^ y.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_key_revoked_on_one_replica_stops_on_the_other_within_the_bound() {
    let Some((_db, a, b)) = two_replicas().await else {
        return;
    };
    let account = new_account(&a, 1).await;
    let key = KeyHash([9; 32]);
    a.add_usage_key(
        account,
        NewUsageKey {
            key_hash: key,
            name: "k".into(),
            description: String::new(),
            permissions: Permissions {
                execute_in_groups: GroupSet::new(vec![0]),
                ..Permissions::default()
            },
        },
        Charge::free(),
    )
    .await
    .unwrap();
    // B resolves it (and caches it).
    assert!(b.resolve_key(key).await.unwrap().is_some());
    assert!(b.resolve_key(key).await.unwrap().is_some());
    a.remove_usage_key(account, key, Charge::free())
        .await
        .unwrap();
    let revoked = Instant::now();
    loop {
        if b.resolve_key(key).await.unwrap().is_none() {
            break;
        }
        assert!(
            revoked.elapsed() < super::key_cache::REPLICA_TTL + Duration::from_millis(500),
            "the other replica still accepts a revoked key after {:?}",
            revoked.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    eprintln!(
        "revocation seen by the other replica after {:?} (bound {:?})",
        revoked.elapsed(),
        super::key_cache::REPLICA_TTL
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_replica_leads_and_another_takes_over_when_it_goes() {
    let Some((_db, a, b)) = two_replicas().await else {
        return;
    };
    let mut la = a.leadership("test-singleton").unwrap();
    let mut lb = b.leadership("test-singleton").unwrap();
    let deadline = Duration::from_secs(10);
    tokio::time::timeout(deadline, async {
        tokio::select! {
            () = la.wait_to_lead() => {}
            () = lb.wait_to_lead() => {}
        }
    })
    .await
    .expect("someone leads");
    tokio::time::sleep(super::leadership::POLL * 3).await;
    assert!(la.leads() ^ lb.leads(), "exactly one replica leads");
    let (leader, mut other) = if la.leads() { (la, lb) } else { (lb, la) };
    assert!(!other.leads());
    // The leader goes (as when its process exits: its session closes).
    drop(leader);
    let gone = Instant::now();
    tokio::time::timeout(deadline, other.wait_to_lead())
        .await
        .expect("the other replica takes over");
    eprintln!("leadership handed over after {:?}", gone.elapsed());
}
