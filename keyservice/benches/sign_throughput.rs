//! Signatures per second through the keyservice socket (pipelined, one connection) versus
//! in-process k256 signing on the same machine; then `RowMac` requests of 1 and of 64 rows.
//!
//! ```text
//! cargo bench -p keyservice --bench sign_throughput
//! KS_BENCH_SIGNATURES=20000 KS_BENCH_IN_FLIGHT=64 cargo bench -p keyservice --bench sign_throughput
//! KS_BENCH_ROW_MAC_REQUESTS=100000 cargo bench -p keyservice --bench sign_throughput
//! ```
//!
//! It starts the real `keyservice` binary (release build, dev platform, temp dir), so the
//! socket figure includes framing, the syscalls, the per-request key derivation (HKDF)
//! and the task hand-offs — everything the appliance pays.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k256::ecdsa::SigningKey;
use keyservice_api::KeyClient;
use sha2::{Digest, Sha256};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn digest(i: usize) -> [u8; 32] {
    Sha256::digest((i as u64).to_be_bytes()).into()
}

/// A row of about the size of an authorization row (ids, a scope, flags).
fn row(i: usize) -> Vec<u8> {
    let mut r = format!("account {i}|group {}|wallet {}|", i % 97, i % 13).into_bytes();
    r.resize(96, b'.');
    r
}

/// `RowMac` requests per second with `rows` rows each, `in_flight` requests at once on
/// one connection.
async fn row_mac_rate(client: &KeyClient, rows: usize, requests: usize, in_flight: usize) -> f64 {
    let per_task = requests / in_flight;
    let t = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..in_flight {
        let client = client.clone();
        tasks.spawn(async move {
            let owned: Vec<Vec<u8>> = (0..rows).map(|i| row(w * rows + i)).collect();
            let items: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
            for _ in 0..per_task {
                let tags = client.row_macs(&items).await.unwrap();
                assert_eq!(tags.len(), rows);
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
    (per_task * in_flight) as f64 / t.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let total = env_usize("KS_BENCH_SIGNATURES", 20_000);
    let in_flight = env_usize("KS_BENCH_IN_FLIGHT", 64).max(1);
    let rounds = env_usize("KS_BENCH_ROUNDS", 3).max(1);
    let row_mac_requests = env_usize("KS_BENCH_ROW_MAC_REQUESTS", 100_000);

    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("ks.sock");
    let compose = dir.path().join("app-compose.json");
    std::fs::write(&compose, b"{\"name\":\"bench\"}").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_keyservice"))
        .args(["run", "--platform", "dev", "--payers", "1", "--socket"])
        .arg(&socket)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--compose-file")
        .arg(&compose)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "keyservice did not start");
        std::thread::sleep(Duration::from_millis(10));
    }

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (socket_rates, latency_us, row_mac_rows) = rt.block_on(async {
        let client = KeyClient::connect(&socket).await.unwrap();
        let wallet = client.create_wallet().await.unwrap();
        let path = wallet.derivation_path;

        // Warm-up, and a correctness check on what we are about to time.
        for i in 0..500 {
            let d = digest(i);
            let sig = client.sign_digest(&path, &d).await.unwrap();
            if i == 0 {
                let vk = k256::ecdsa::VerifyingKey::recover_from_prehash(
                    &d,
                    &k256::ecdsa::Signature::from_slice(&sig.as_bytes()[..64]).unwrap(),
                    k256::ecdsa::RecoveryId::from_byte(sig.recovery_id()).unwrap(),
                )
                .unwrap();
                let pk = keyservice_api::PublicKey::from_uncompressed(
                    vk.to_encoded_point(false).as_bytes().try_into().unwrap(),
                )
                .unwrap();
                assert_eq!(pk.address(), wallet.address);
            }
        }

        // Round-trip latency with one request in flight.
        let n_lat = 2000;
        let t = Instant::now();
        for i in 0..n_lat {
            client.sign_digest(&path, &digest(i)).await.unwrap();
        }
        let latency_us = t.elapsed().as_secs_f64() * 1e6 / n_lat as f64;

        let mut rates = Vec::new();
        for _ in 0..rounds {
            let per_task = total / in_flight;
            let t = Instant::now();
            let mut tasks = tokio::task::JoinSet::new();
            for w in 0..in_flight {
                let client = client.clone();
                tasks.spawn(async move {
                    for i in 0..per_task {
                        client
                            .sign_digest(&path, &digest(w * per_task + i))
                            .await
                            .unwrap();
                    }
                });
            }
            while let Some(r) = tasks.join_next().await {
                r.unwrap();
            }
            rates.push((per_task * in_flight) as f64 / t.elapsed().as_secs_f64());
        }

        // RowMac: a batch's tags equal its rows' single tags (what we are about to time).
        let owned: Vec<Vec<u8>> = (0..64).map(row).collect();
        let items: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
        let batch = client.row_macs(&items).await.unwrap();
        for (i, item) in items.iter().enumerate() {
            assert_eq!(client.row_macs(&[*item]).await.unwrap(), vec![batch[i]]);
        }
        let n_lat = 2000;
        let t = Instant::now();
        for i in 0..n_lat {
            client.row_macs(&[row(i).as_slice()]).await.unwrap();
        }
        let row_mac_latency_us = t.elapsed().as_secs_f64() * 1e6 / n_lat as f64;
        let mut row_mac_rows = Vec::new();
        for rows in [1usize, 64] {
            let mut r = Vec::new();
            for _ in 0..rounds {
                r.push(row_mac_rate(&client, rows, row_mac_requests, in_flight).await);
            }
            row_mac_rows.push((rows, median(r)));
        }
        (rates, latency_us, (row_mac_rows, row_mac_latency_us))
    });
    let _ = child.kill();
    let _ = child.wait();

    // In-process: the same number of signatures with a ready signing key, one thread.
    let sk = SigningKey::from_bytes((&[0x42u8; 32]).into()).unwrap();
    let digests: Vec<[u8; 32]> = (0..total).map(digest).collect();
    let mut local_rates = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        for d in &digests {
            let (sig, recid) = sk.sign_prehash_recoverable(d).unwrap();
            std::hint::black_box((sig, recid));
        }
        local_rates.push(total as f64 / t.elapsed().as_secs_f64());
    }

    // In-process on every core (one signing key per thread), for context.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut all_core_rates = Vec::new();
    for _ in 0..rounds {
        let per_thread = total / cores;
        let t = Instant::now();
        std::thread::scope(|s| {
            for c in 0..cores {
                let digests = &digests;
                s.spawn(move || {
                    let sk = SigningKey::from_bytes((&[0x42u8 + c as u8; 32]).into()).unwrap();
                    for d in &digests[c * per_thread..(c + 1) * per_thread] {
                        std::hint::black_box(sk.sign_prehash_recoverable(d).unwrap());
                    }
                });
            }
        });
        all_core_rates.push((per_thread * cores) as f64 / t.elapsed().as_secs_f64());
    }

    let socket_rate = median(socket_rates.clone());
    let local_rate = median(local_rates.clone());
    let all_core_rate = median(all_core_rates.clone());
    let ratio = socket_rate / local_rate;
    let row = |name: &str, value: String| println!("| {name:<52} | {value:>12} |");
    let rule = || println!("+{}+{}+", "-".repeat(54), "-".repeat(14));
    println!();
    println!(
        "keyservice signing throughput ({cores} cores, {total} signatures/round, median of {rounds} rounds)"
    );
    rule();
    row("path", "signatures/s".into());
    rule();
    row(
        &format!("socket: 1 connection, {in_flight} in flight (pipelined)"),
        format!("{socket_rate:.0}"),
    );
    row(
        "in-process k256, 1 thread (baseline)",
        format!("{local_rate:.0}"),
    );
    row(
        &format!("in-process k256, {cores} threads (context)"),
        format!("{all_core_rate:.0}"),
    );
    rule();
    row("ratio socket / in-process 1 thread", format!("{ratio:.2}"));
    row(
        &format!("ratio socket / in-process {cores} threads"),
        format!("{:.2}", socket_rate / all_core_rate),
    );
    rule();
    println!("socket rounds {socket_rates:.0?}; in-process 1-thread rounds {local_rates:.0?}");
    println!("round-trip latency with 1 request in flight: {latency_us:.1} µs");
    println!(
        "target (socket ≥ 0.70 × in-process 1 thread): {}",
        if ratio >= 0.7 { "met" } else { "NOT met" }
    );

    let (row_mac_rates, row_mac_latency_us) = row_mac_rows;
    let row3 = |name: &str, a: String, b: String| println!("| {name:<40} | {a:>12} | {b:>12} |");
    let rule3 = || println!("+{}+{}+{}+", "-".repeat(42), "-".repeat(14), "-".repeat(14));
    println!();
    println!(
        "keyservice RowMac (HMAC-SHA256 of 96-byte rows; {row_mac_requests} requests/round, median of {rounds} rounds)"
    );
    rule3();
    row3("path", "requests/s".into(), "rows/s".into());
    rule3();
    for (rows, rate) in row_mac_rates {
        row3(
            &format!("RowMac, {rows} row(s)/request, {in_flight} in flight"),
            format!("{rate:.0}"),
            format!("{:.0}", rate * rows as f64),
        );
    }
    rule3();
    println!("RowMac round-trip latency, 1 row, 1 request in flight: {row_mac_latency_us:.1} µs");
}
