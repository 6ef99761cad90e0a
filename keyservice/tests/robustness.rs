//! Hostile and unlucky clients: garbage, oversized and truncated frames, clients that
//! vanish mid-request or never read, restarts. The service must stay up and every other
//! client unaffected.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::time::Duration;

use keyservice_api::protocol::ErrorCode;
use keyservice_api::{KeyClient, KeyError};
use test_support::keyservice::{
    Env, assert_closed, digest, raw_connect, raw_frame, read_raw_frame, recover_address,
};

/// Status (op 0x01), as raw bytes.
fn status_frame(id: u64) -> Vec<u8> {
    raw_frame(1, 0x01, 0, id, &[])
}

#[tokio::test]
async fn socket_is_private_and_stale_sockets_are_replaced() {
    let env = Env::new();
    std::fs::create_dir_all(env.socket.parent().unwrap()).unwrap();
    // A stale socket left by a crashed instance: bound, then its listener dropped.
    drop(std::os::unix::net::UnixListener::bind(&env.socket).unwrap());
    assert!(
        std::fs::symlink_metadata(&env.socket)
            .unwrap()
            .file_type()
            .is_socket()
    );

    let ks = env.start();
    let meta = std::fs::symlink_metadata(&env.socket).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    KeyClient::connect(&ks.socket)
        .await
        .unwrap()
        .status()
        .await
        .unwrap();

    // A second instance refuses to steal a live socket.
    let err = env.start_expecting_failure();
    assert!(err.contains("in use"), "{err}");
    KeyClient::connect(&ks.socket)
        .await
        .unwrap()
        .status()
        .await
        .unwrap();

    // A regular file at the socket path is never deleted.
    drop(ks);
    std::fs::remove_file(&env.socket).unwrap();
    std::fs::write(&env.socket, b"precious").unwrap();
    env.start_expecting_failure();
    assert_eq!(std::fs::read(&env.socket).unwrap(), b"precious");
}

#[tokio::test]
async fn garbage_and_oversized_frames_do_not_take_the_service_down() {
    let env = Env::new();
    let ks = env.start();

    // Oversized length prefix: error frame (id 0, BadFrame), then the connection closes.
    let mut s = raw_connect(&ks.socket);
    test_support::keyservice::write_all(&mut s, &u32::MAX.to_be_bytes());
    let (_, status, id, msg) = read_raw_frame(&mut s).unwrap();
    assert_eq!((status, id), (ErrorCode::BadFrame as u8, 0));
    assert!(String::from_utf8_lossy(&msg).contains("exceeds"));
    assert_closed(&mut s);

    // Just over the limit, with the bytes actually sent.
    let mut s = raw_connect(&ks.socket);
    let mut big = ((64 * 1024 + 1) as u32).to_be_bytes().to_vec();
    big.extend(std::iter::repeat_n(0u8, 64 * 1024 + 1));
    let _ = s.write_all(&big);
    let (_, status, _, _) = read_raw_frame(&mut s).unwrap();
    assert_eq!(status, ErrorCode::BadFrame as u8);

    // Shorter than a header.
    let mut s = raw_connect(&ks.socket);
    test_support::keyservice::write_all(&mut s, &[0, 0, 0, 3, 1, 2, 3]);
    let (_, status, _, _) = read_raw_frame(&mut s).unwrap();
    assert_eq!(status, ErrorCode::BadFrame as u8);
    assert_closed(&mut s);

    // Well-framed but wrong: error frames for that id, and the connection goes on.
    let mut s = raw_connect(&ks.socket);
    let cases: [(Vec<u8>, ErrorCode); 5] = [
        (
            raw_frame(9, 0x01, 0, 11, &[]),
            ErrorCode::UnsupportedVersion,
        ),
        (raw_frame(1, 0x7f, 0, 12, &[]), ErrorCode::UnknownOperation),
        (raw_frame(1, 0x04, 0, 13, &[1, 2, 3]), ErrorCode::BadRequest),
        (raw_frame(1, 0x01, 5, 14, &[]), ErrorCode::BadRequest),
        (
            raw_frame(1, 0x0D, 0, 15, &[200]),
            ErrorCode::InvalidArgument,
        ),
    ];
    for (frame, code) in &cases {
        test_support::keyservice::write_all(&mut s, frame);
        let (_, status, id, _) = read_raw_frame(&mut s).unwrap();
        assert_eq!(status, *code as u8, "id {id}");
    }
    test_support::keyservice::write_all(&mut s, &status_frame(16));
    let (op, status, id, payload) = read_raw_frame(&mut s).unwrap();
    assert_eq!((op, status, id), (0x01, 0, 16));
    assert_eq!(payload[0], 1);

    // Pseudo-random junk on many connections.
    let mut x: u64 = 0x9e3779b97f4a7c15;
    for _ in 0..50 {
        let mut s = raw_connect(&ks.socket);
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let junk: Vec<u8> = (0..512)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let _ = s.write_all(&junk);
        let _ = read_raw_frame(&mut s);
    }

    // A later valid request on a new connection works.
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    let w = client.create_wallet().await.unwrap();
    let d = digest(1);
    let sig = client.sign_digest(&w.derivation_path, &d).await.unwrap();
    assert_eq!(recover_address(&d, &sig), w.address);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_dying_mid_request_do_not_affect_others() {
    let env = Env::new();
    let ks = env.start();
    let good = KeyClient::connect(&ks.socket).await.unwrap();
    let w = good.create_wallet().await.unwrap();

    // Half a frame, then gone.
    {
        let mut s = raw_connect(&ks.socket);
        let f = status_frame(1);
        test_support::keyservice::write_all(&mut s, &f[..7]);
    }
    // A complete sign request, then gone without reading the answer.
    let mut sign_payload = w.derivation_path.0.to_vec();
    sign_payload.extend_from_slice(&digest(7));
    {
        let mut s = raw_connect(&ks.socket);
        test_support::keyservice::write_all(&mut s, &raw_frame(1, 0x04, 0, 1, &sign_payload));
    }
    // A client that floods requests and never reads: it keeps its connection open while
    // the good client works, so the server's writes to it back up.
    let mut flood = raw_connect(&ks.socket);
    flood.set_nonblocking(true).unwrap();
    let mut burst = Vec::new();
    for id in 0..4000u64 {
        burst.extend_from_slice(&raw_frame(1, 0x04, 0, id + 1, &sign_payload));
    }
    let mut sent = 0;
    while sent < burst.len() {
        match flood.write(&burst[sent..]) {
            Ok(n) => sent += n,
            Err(_) => break, // the socket buffer is full: the server has stopped reading
        }
    }

    // Meanwhile the good client is served normally, in parallel.
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..200u64 {
        let good = good.clone();
        let path = w.derivation_path;
        tasks.spawn(async move { (i, good.sign_digest(&path, &digest(i)).await.unwrap()) });
    }
    while let Some(r) = tasks.join_next().await {
        let (i, sig) = r.unwrap();
        assert_eq!(recover_address(&digest(i), &sig), w.address);
    }

    // Kill the flooder mid-stream; the service and the good client carry on.
    drop(flood);
    tokio::time::sleep(Duration::from_millis(50)).await;
    good.status().await.unwrap();
    let fresh = KeyClient::connect(&ks.socket).await.unwrap();
    fresh
        .sign_digest(&w.derivation_path, &digest(3))
        .await
        .unwrap();
}

#[tokio::test]
async fn client_reports_unavailable_and_reconnects_after_a_restart() {
    let env = Env::new();
    let missing = KeyClient::connect(&env.socket).await;
    match missing {
        Err(e @ KeyError::Unavailable { .. }) => assert!(e.is_unavailable()),
        other => panic!("{other:?}"),
    }

    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    let w = client.create_wallet().await.unwrap();
    assert!(ks.terminate());
    assert!(!env.socket.exists(), "socket not removed on SIGTERM");

    match client.wallet(&w.derivation_path).await {
        Err(e) => assert!(e.is_unavailable(), "{e:?}"),
        Ok(_) => panic!("answered while down"),
    }
    // Still down: still Unavailable, promptly.
    assert!(client.status().await.unwrap_err().is_unavailable());

    let _ks = env.start();
    // Same client object, no manual reconnect.
    assert_eq!(
        client.wallet(&w.derivation_path).await.unwrap().address,
        w.address
    );
}

#[tokio::test]
async fn killed_service_is_unavailable_not_hung() {
    let env = Env::new();
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    client.status().await.unwrap();
    drop(ks); // SIGKILL: the socket file stays behind, stale
    let start = std::time::Instant::now();
    assert!(client.status().await.unwrap_err().is_unavailable());
    assert!(start.elapsed() < Duration::from_secs(5));
    // A restart removes the stale socket and serves again.
    let _ks = env.start();
    client.status().await.unwrap();
}

/// `--exit-with-parent --parent-pid P` (how `appliance dev` starts keyservice): a
/// keyservice whose supervisor is already gone when it starts stops by itself, instead of
/// living on re-parented; with its real parent's pid it keeps serving (control).
#[tokio::test]
async fn a_child_whose_supervisor_is_already_gone_stops() {
    let wait_exit = |child: &mut std::process::Child, within: Duration| {
        let deadline = std::time::Instant::now() + within;
        while std::time::Instant::now() < deadline {
            if let Some(status) = child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    };

    // Control: the parent named is the real one (this test process).
    let mut env = Env::new();
    env.run_extra.extend([
        "--exit-with-parent".into(),
        "--parent-pid".into(),
        std::process::id().to_string().into(),
    ]);
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    std::thread::sleep(Duration::from_millis(600));
    client.status().await.unwrap();
    drop(ks);

    // The supervisor named is not the parent: it "died" before keyservice looked.
    let mut env = Env::new();
    env.run_extra.extend([
        "--exit-with-parent".into(),
        "--parent-pid".into(),
        "1".into(),
    ]);
    let (mut child, log) = env.spawn_run();
    let status = wait_exit(&mut child, Duration::from_secs(20));
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        status.is_some(),
        "keyservice outlived its supervisor: {text}"
    );
    assert!(text.contains("the parent process exited"), "{text}");
}
