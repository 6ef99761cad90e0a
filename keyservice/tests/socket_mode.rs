//! `--socket-group-access`: the socket is 0660 (the appliance container's user reaches it
//! through the keyservice group), and still never world-accessible.

use std::os::unix::fs::PermissionsExt;

use keyservice_api::KeyClient;
use test_support::keyservice::Env;

#[tokio::test]
#[allow(clippy::unwrap_used)]
async fn group_access_makes_the_socket_0660() {
    let mut env = Env::new();
    env.platform_args.push("--socket-group-access".into());
    let ks = env.start();
    let meta = std::fs::symlink_metadata(&env.socket).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    KeyClient::connect(&ks.socket)
        .await
        .unwrap()
        .status()
        .await
        .unwrap();
    assert!(ks.terminate());
}
