//! `--peer-uid`: the kernel's account of the connecting process (`SO_PEERCRED`) decides,
//! not only the socket's mode. A peer whose uid is not in the set is refused before any
//! request is read (one `Refused` error frame, then the connection closes); a peer whose
//! uid is in it is served. (The tests run as one uid: the set either leaves it out or
//! names it.)

use std::io::Read as _;
use std::time::Duration;

use keyservice_api::KeyClient;
use test_support::keyservice::Env;

/// A uid no test process runs as.
const STRANGER: &str = "4242";

#[tokio::test]
#[allow(clippy::unwrap_used)]
async fn a_peer_whose_uid_is_not_in_the_set_is_refused() {
    let mut env = Env::new();
    env.platform_args
        .extend(["--peer-uid".into(), STRANGER.into()]);
    let ks = env.start();
    let mut raw = std::os::unix::net::UnixStream::connect(&env.socket).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut answer = Vec::new();
    // The server writes its refusal and closes: read to the end.
    raw.read_to_end(&mut answer).unwrap();
    let text = String::from_utf8_lossy(&answer);
    let own = rustix::process::getuid().as_raw();
    assert!(
        text.contains(&format!("uid {own} may not use this keyservice")),
        "{text:?}"
    );
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    assert!(
        client.status().await.is_err(),
        "a refused peer was answered"
    );
    assert!(
        ks.log_text().contains("connection refused"),
        "{}",
        ks.log_text()
    );
    assert!(ks.terminate());
}

#[tokio::test]
#[allow(clippy::unwrap_used)]
async fn a_peer_whose_uid_is_in_the_set_is_served() {
    let own = rustix::process::getuid().as_raw().to_string();
    let mut env = Env::new();
    env.platform_args.extend([
        "--peer-uid".into(),
        STRANGER.into(),
        "--peer-uid".into(),
        own.into(),
    ]);
    let ks = env.start();
    KeyClient::connect(&ks.socket)
        .await
        .unwrap()
        .status()
        .await
        .unwrap();
    assert!(ks.terminate());
}

#[tokio::test]
#[allow(clippy::unwrap_used)]
async fn by_default_the_set_is_keyservice_s_own_uid() {
    let own = rustix::process::getuid().as_raw();
    let env = Env::new();
    let ks = env.start();
    KeyClient::connect(&ks.socket)
        .await
        .unwrap()
        .status()
        .await
        .unwrap();
    assert!(
        ks.log_text().contains(&format!("peer_uids=[{own}]")),
        "{}",
        ks.log_text()
    );
    assert!(ks.terminate());
}
