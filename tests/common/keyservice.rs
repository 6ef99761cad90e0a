//! A `keyservice` process started by a test on the dev platform, for tests that run the
//! appliance with `serve` or talk to the key process directly.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::binaries::binary;

/// A keyservice process started by a test (dev platform), killed when dropped.
pub struct KeyService {
    child: Option<Child>,
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    pub compose_file: PathBuf,
}

impl KeyService {
    /// Starts keyservice on `socket`, keeping its state in `state_dir`, and waits until
    /// the socket answers.
    pub async fn start(socket: &Path, state_dir: &Path, compose_file: &Path) -> Self {
        if !compose_file.exists() {
            std::fs::write(compose_file, b"{\"test\":\"compose\"}").unwrap();
        }
        let child = Command::new(binary("keyservice"))
            .arg("run")
            .arg("--socket")
            .arg(socket)
            .arg("--state-dir")
            .arg(state_dir)
            .args(["--platform", "dev", "--compose-file"])
            .arg(compose_file)
            // Payers sign only for a configured chain: the tests' anvil.
            .args(["--chain-id", "31337"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn keyservice");
        let client = keyservice_api::KeyClient::new(socket);
        let mut ready = false;
        for _ in 0..200 {
            if client.status().await.is_ok() {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(ready, "keyservice did not come up on {}", socket.display());
        Self {
            child: Some(child),
            socket: socket.to_owned(),
            state_dir: state_dir.to_owned(),
            compose_file: compose_file.to_owned(),
        }
    }

    /// SIGKILL.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
}

impl Drop for KeyService {
    fn drop(&mut self) {
        self.kill9();
    }
}
