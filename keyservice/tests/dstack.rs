//! The `dstack` platform end to end, against a `simulated` guest agent (see
//! `test_support::dstack_agent`) that serves the documented `/Info` and `/GetKey` endpoints.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsStr;

use keyservice_api::{KeyClient, PlatformKind};
use test_support::dstack_agent::{AgentConfig, StandInAgent};
use test_support::keyservice::{ComposeHashOf, Env, digest, recover_address};

const COMPOSE_V1: &str =
    "{\"manifest_version\":2,\"name\":\"appliance\",\"docker_compose_file\":\"v1\"}";
const COMPOSE_V2: &str =
    "{\"manifest_version\":2,\"name\":\"appliance\",\"docker_compose_file\":\"v2\"}";

#[tokio::test]
async fn dstack_platform_seals_with_the_agent_key() {
    let mut env = Env::new();
    let v1 = AgentConfig::new(COMPOSE_V1, 1);
    let agent = StandInAgent::start_in(env.dir.path(), "agent-v1.sock", v1.clone());
    env.use_dstack(&agent.socket);

    // First run: creates the root, sealed with the agent's key for this compose hash.
    let (path, address) = {
        let ks = env.start();
        let client = KeyClient::connect(&ks.socket).await.unwrap();
        let status = client.status().await.unwrap();
        assert_eq!(status.platform, PlatformKind::Dstack);
        assert_eq!(status.compose_hash, v1.compose_hash());
        let w = client.create_wallet().await.unwrap();
        let d = digest(5);
        let sig = client.sign_digest(&w.derivation_path, &d).await.unwrap();
        assert_eq!(recover_address(&d, &sig), w.address);
        (w.derivation_path, w.address)
    };
    let requests = agent.key_requests();
    let expected_path = format!(
        "keyservice/seal/v1/{}",
        hex::encode(v1.compose_hash().as_bytes())
    );
    assert_eq!(
        requests,
        vec![(expected_path.clone(), "keyservice-root-sealing".to_owned())]
    );
    let sealed = std::fs::read(env.sealed_file()).unwrap();
    assert_eq!(&sealed[9..41], v1.compose_hash().as_bytes());

    // Restart against the same agent: same wallet.
    {
        let ks = env.start();
        let client = KeyClient::connect(&ks.socket).await.unwrap();
        assert_eq!(client.wallet(&path).await.unwrap().address, address);
    }

    // Same compose hash, but another app key: the key really comes from the agent, so
    // unsealing fails authentication (and nothing is regenerated).
    let impostor = StandInAgent::start_in(
        env.dir.path(),
        "agent-other-key.sock",
        AgentConfig::new(COMPOSE_V1, 2),
    );
    env.use_dstack(&impostor.socket);
    let err = env.start_expecting_failure();
    assert!(err.contains("failed authentication"), "{err}");
    assert_eq!(std::fs::read(env.sealed_file()).unwrap(), sealed);

    // The agent reports another compose hash: refused, naming both hashes.
    let v2 = AgentConfig::new(COMPOSE_V2, 1);
    let upgraded = StandInAgent::start_in(env.dir.path(), "agent-v2.sock", v2.clone());
    env.use_dstack(&upgraded.socket);
    let err = env.start_expecting_failure();
    assert!(
        err.contains(&format!("bound to compose hash {}", v1.compose_hash())),
        "{err}"
    );
    assert!(
        err.contains(&format!("measured compose hash is {}", v2.compose_hash())),
        "{err}"
    );
    assert_eq!(env.state_files(), vec!["root.sealed"]);

    // The governed upgrade: v1 reseals to v2 (allowed), then v2 opens it.
    env.use_dstack(&agent.socket);
    let allow = env.dir.path().join("allowed");
    std::fs::write(&allow, format!("{}\n", v2.compose_hash())).unwrap();
    let to = v2.compose_hash().to_string();
    let out = env.command(
        "reseal",
        &[
            OsStr::new("--to"),
            OsStr::new(&to),
            OsStr::new("--allow-list"),
            allow.as_os_str(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v2_path = format!(
        "keyservice/seal/v1/{}",
        hex::encode(v2.compose_hash().as_bytes())
    );
    assert!(
        agent
            .key_requests
            .lock()
            .unwrap()
            .iter()
            .any(|(p, _)| *p == v2_path)
    );

    env.use_dstack(&upgraded.socket);
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    assert_eq!(
        client.status().await.unwrap().compose_hash,
        v2.compose_hash()
    );
    assert_eq!(client.wallet(&path).await.unwrap().address, address);
}

#[test]
fn an_agent_that_contradicts_itself_is_refused() {
    let mut env = Env::new();
    let mut cfg = AgentConfig::new(COMPOSE_V1, 1);
    cfg.lie_about_compose_hash = true;
    let agent = StandInAgent::start_in(env.dir.path(), "agent.sock", cfg);
    env.use_dstack(&agent.socket);
    let err = env.start_expecting_failure();
    assert!(err.contains("disagrees"), "{err}");
    assert!(agent.key_requests().is_empty(), "asked for a key anyway");
}

#[test]
fn a_missing_agent_is_a_clear_error() {
    let mut env = Env::new();
    let gone = env.dir.path().join("no-agent.sock");
    env.use_dstack(&gone);
    let err = env.start_expecting_failure();
    assert!(err.contains("dstack guest agent"), "{err}");
    assert!(!env.sealed_file().exists());
}
