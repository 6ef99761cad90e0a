//! Faults between the parts (issue 39): the database dies under load and comes back.
//! Writers record every answer; whatever was acknowledged must be there afterwards, and
//! nothing may answer 500 or hang past the request deadline while the database is away.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use e2e::Appliance;
use e2e::replicas::Cluster;
use serde_json::json;
use test_support::postgres::Shutdown;

/// The request deadline the replicas run with here (`http.request_timeout_ms`).
const DEADLINE: Duration = Duration::from_secs(4);

/// One writer's record: what it was told.
#[derive(Default)]
struct Record {
    /// Names of the groups whose creation was acknowledged (200), with when it was sent.
    acknowledged: Vec<(String, Instant)>,
    /// Answers 503 (the database unavailable, or the deadline).
    unavailable: usize,
    /// Anything else: a status other than 200 and 503, a transport error, or an answer
    /// later than the deadline allows. Each is a failure of the test.
    wrong: Vec<String>,
}

/// Creates groups named `w{writer}-{n}` on `app` until `stop`, one at a time.
async fn write_until(app: &Appliance, key: &str, writer: usize, stop: &AtomicBool) -> Record {
    let mut record = Record::default();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let name = format!("w{writer}-{n}");
        let sent = Instant::now();
        let request = app
            .client
            .post(app.api("/add_group"))
            .bearer_auth(key)
            .json(&json!({"group_name": name, "group_description": "",
                          "pkp_ids_permitted": [], "cid_hashes_permitted": []}));
        // The deadline, plus room for the answer to travel.
        let answer = tokio::time::timeout(DEADLINE + Duration::from_secs(2), request.send()).await;
        match answer {
            Err(_) => record
                .wrong
                .push(format!("{name}: no answer within {DEADLINE:?} + 2 s")),
            Ok(Err(err)) => record.wrong.push(format!("{name}: {err}")),
            Ok(Ok(response)) => match response.status().as_u16() {
                200 => record.acknowledged.push((name, sent)),
                503 => record.unavailable += 1,
                status => {
                    let text = response.text().await.unwrap_or_default();
                    record.wrong.push(format!("{name}: {status} {text}"));
                }
            },
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    record
}

/// `GET /health` of `app`: its status and body.
async fn health_of(app: &Appliance) -> (u16, serde_json::Value) {
    let response = app.client.get(app.url("/health")).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// Every group name of the account `key` on `app`.
async fn group_names(app: &Appliance, key: &str) -> Vec<String> {
    let mut names = Vec::new();
    for page in 0.. {
        let reply = app
            .get(
                &format!("/list_groups?page_size=1000&page_number={page}"),
                Some(key),
            )
            .await;
        let items = reply.assert_ok().as_array().unwrap().clone();
        names.extend(items.iter().map(|g| g["name"].as_str().unwrap().to_owned()));
        if items.len() < 1000 {
            return names;
        }
    }
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_killed_under_load_loses_no_acknowledged_write_and_answers_503_meanwhile() {
    let timeout_ms = DEADLINE.as_millis().to_string();
    let Some(mut cluster) = Cluster::start(vec![(
        "APPLIANCE_HTTP__REQUEST_TIMEOUT_MS".to_owned(),
        timeout_ms,
    )])
    .await
    else {
        return;
    };
    let (key, _) = cluster.a().new_account("faults").await;

    // Four writers, two on each replica, while the database fails under them.
    let Cluster { pg, replicas, .. } = &mut cluster;
    let apps: Vec<&Appliance> = replicas.iter().map(|r| r.as_ref().unwrap()).collect();
    let stop = AtomicBool::new(false);
    let writers =
        futures_util::future::join_all((0..4).map(|w| write_until(apps[w % 2], &key, w, &stop)));
    let fault = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        // The database's machine loses power, and stays down for three seconds.
        let down_at = Instant::now();
        tokio::task::block_in_place(|| pg.stop(Shutdown::KillAll));
        tokio::time::sleep(Duration::from_secs(1)).await;
        // `/health` says which dependency is down.
        let mut down_health = Vec::new();
        for app in &apps {
            down_health.push(health_of(app).await);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        // (The writers of this task wait while the server runs crash recovery.)
        tokio::task::block_in_place(|| pg.start_again());
        let up_at = Instant::now();
        // The replicas find it again by themselves.
        tokio::time::sleep(Duration::from_secs(4)).await;
        stop.store(true, Ordering::Relaxed);
        let mut up_health = Vec::new();
        for app in &apps {
            up_health.push(health_of(app).await);
        }
        (down_at, up_at, down_health, up_health)
    };
    let (records, (down_at, up_at, down_health, up_health)) = tokio::join!(writers, fault);
    for (status, body) in &down_health {
        assert_eq!(*status, 503, "{body}");
        assert_eq!(body["checks"]["store"], "unavailable", "{body}");
    }
    for (status, body) in &up_health {
        assert_eq!(*status, 200, "{body}");
        assert_eq!(body["checks"]["store"], "ok", "{body}");
    }

    let mut acknowledged = Vec::new();
    let mut unavailable = 0;
    let mut wrong = Vec::new();
    for record in records {
        acknowledged.extend(record.acknowledged);
        unavailable += record.unavailable;
        wrong.extend(record.wrong);
    }
    let outage = up_at - down_at;
    eprintln!(
        "faults: {} writes acknowledged, {unavailable} answered 503; database down {outage:.2?} (restart included)",
        acknowledged.len()
    );
    assert!(
        wrong.is_empty(),
        "answers other than 200 or 503: {wrong:#?}"
    );
    assert!(
        unavailable > 0,
        "no write was refused while the database was down: the outage was not observed"
    );
    let before = acknowledged.iter().filter(|(_, at)| *at < down_at).count();
    assert!(before > 0, "no write was acknowledged before the outage");
    // Each replica acknowledges writes sent after the database came back.
    for (w, app) in apps.iter().enumerate() {
        let after = acknowledged
            .iter()
            .filter(|(name, at)| *at > up_at && name.starts_with(&format!("w{w}-")))
            .count()
            + acknowledged
                .iter()
                .filter(|(name, at)| *at > up_at && name.starts_with(&format!("w{}-", w + 2)))
                .count();
        assert!(
            after > 0,
            "replica {w} ({}) acknowledged nothing after the database came back",
            app.url("/")
        );
    }

    // Every acknowledged group exists, once, as both replicas read the database.
    for app in &apps {
        let names = group_names(app, &key).await;
        let mut seen = std::collections::HashSet::new();
        for name in &names {
            assert!(seen.insert(name.clone()), "group {name} exists twice");
        }
        let missing: Vec<_> = acknowledged
            .iter()
            .filter(|(name, _)| !seen.contains(name))
            .map(|(name, _)| name.clone())
            .collect();
        assert!(
            missing.is_empty(),
            "acknowledged but lost: {missing:?} (of {} acknowledged)",
            acknowledged.len()
        );
    }
}
