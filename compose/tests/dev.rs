//! `appliance dev` seals its keyservice to the rendered template: a fresh data directory
//! gets `app-compose.json` = `compose_pin::render_dev()`, and the running keyservice and
//! `/info` report the hash `compose-pin dev` prints.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use keyservice_api::KeyClient;
use test_support::compose_pin::{compose_pin, stdout};

struct Dev(Child);

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.0.id().to_string())
            .status();
        let _ = self.0.wait();
    }
}

fn appliance_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("appliance");
    assert!(
        bin.is_file(),
        "{} not found: cargo build -p appliance -p action-runtime -p keyservice -p worker-launcher",
        bin.display()
    );
    bin
}

#[tokio::test]
#[allow(clippy::unwrap_used)]
async fn appliance_dev_seals_to_the_rendered_template() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut cmd = Command::new(appliance_bin());
    for (key, _) in std::env::vars() {
        if key.starts_with("APPLIANCE_") {
            cmd.env_remove(key);
        }
    }
    let mut child = cmd
        .args(["dev", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.path().join("appliance.log")).unwrap())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let dev = Dev(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if line.contains("https://") {
                let _ = tx.send(line);
            }
        }
    });
    let Ok(line) = rx.recv_timeout(Duration::from_secs(60)) else {
        let log = std::fs::read_to_string(dir.path().join("appliance.log")).unwrap_or_default();
        panic!("appliance dev did not start:\n{log}");
    };
    let base_url = line
        .split_whitespace()
        .find(|w| w.starts_with("https://"))
        .unwrap()
        .to_owned();

    let rendered = compose_pin::render_dev().unwrap();
    let written = std::fs::read(data.join("app-compose.json")).unwrap();
    assert_eq!(written, rendered.bytes());
    let printed = stdout(&compose_pin(&["dev"]));
    assert_eq!(printed.trim(), rendered.hash_hex());
    let status = KeyClient::connect(data.join("keyservice.sock"))
        .await
        .unwrap()
        .status()
        .await
        .unwrap();
    assert_eq!(status.compose_hash.0, rendered.hash());

    // `/info` shows the same compose and hash (simulated provider in dev).
    let pem = std::fs::read(data.join("tls/self-signed.pem")).unwrap();
    let client = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .build()
        .unwrap();
    let info: serde_json::Value = client
        .get(format!("{base_url}/info"))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(info["compose_hash"], rendered.hash_hex());
    assert_eq!(
        info["tcb_info"]["app_compose"].as_str().unwrap().as_bytes(),
        rendered.bytes()
    );
    drop(dev);
}
