//! The attested-TLS client (`client/`, crate `appliance-client`) against the whole chain
//! on one machine (`e2e::attested::AttestedStack`: Pebble ACME certificate, CAA, governance
//! on anvil, simulated quotes allowed explicitly):
//!
//! * nothing is sent before the verification, and the key only after it;
//! * a relay presenting another valid certificate for the same name gets no request;
//! * evidence that fails a check (a flipped byte of the compose; the compose hash
//!   removed from governance) stops the client before it sends anything;
//! * an ACME renewal is followed by exactly one re-verification, and the calls go on.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use appliance_client::api::PagingParams;
use appliance_client::api::accounts::NewAccountRequest;
use appliance_client::api::groups::{AddGroupRequest, AddGroupResponse, GroupItem};
use appliance_client::evidence::check::Status;
use appliance_client::{Client, ClientError, Policy};
use e2e::attested::{AttestedStack, CAA_DOMAIN, DOMAIN};
use e2e::relay::{Relay, Switch, Tamper};
use serde_json::Value;

fn policy(stack: &AttestedStack) -> Policy {
    Policy {
        allow_simulated: true,
        rpc_url: Some(stack.rpc_url()),
        dns_server: Some(stack.dns()),
        caa_domain: Some(CAA_DOMAIN.to_owned()),
        ..Policy::default()
    }
}

fn client(stack: &AttestedStack, base: &str, key: Option<&str>, policy: Policy) -> Client {
    build(base, &stack.root_file, policy, key, false)
}

/// A client of `base` trusting the roots in `roots`, with `key` if given;
/// `fresh_connections`: a new connection (and so a pin check) for every call.
fn build(
    base: &str,
    roots: &Path,
    policy: Policy,
    key: Option<&str>,
    fresh_connections: bool,
) -> Client {
    let mut b = Client::builder(base)
        .ca_file(roots)
        .policy(policy)
        .timeout(Duration::from_secs(20))
        .reuse_connections(!fresh_connections);
    if let Some(k) = key {
        b = b.api_key(k);
    }
    b.build().unwrap()
}

async fn new_account(c: &Client) -> String {
    let request = NewAccountRequest {
        account_name: "attested".into(),
        account_description: None,
        email: None,
    };
    c.new_account(&request).await.unwrap().api_key
}

async fn list_groups(c: &Client) -> Result<Vec<GroupItem>, ClientError> {
    c.list_groups(&PagingParams::default()).await
}

/// `add_group` through the typed method.
async fn add_group(c: &Client, name: &str) -> Result<AddGroupResponse, ClientError> {
    let request = AddGroupRequest {
        group_name: name.into(),
        ..AddGroupRequest::default()
    };
    c.add_group(&request).await
}

fn trust_both(stack: &AttestedStack, relay: &Relay) -> std::path::PathBuf {
    let path = stack.tmp.path().join(format!("roots-{}.pem", relay.port));
    std::fs::write(&path, format!("{}{}", stack.root_pem, relay.ca_pem)).unwrap();
    path
}

/// No HTTP request of `seen` carried a credential or reached the API.
fn only_public_evidence(requests: &[String]) {
    for r in requests {
        assert!(
            !r.contains("+authorization"),
            "a credential reached the relay: {r}"
        );
        assert!(
            !r.contains("/core/v1"),
            "an API request reached the relay: {r}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_goes_only_to_the_verified_deployment_and_survives_a_renewal() {
    let stack = AttestedStack::start().await;

    // Nothing is verified before the first call; the first call verifies, then pins.
    let anon = client(&stack, &stack.base, None, policy(&stack));
    assert_eq!(anon.verification_count(), 0);
    assert!(anon.verification().is_none());
    let key = new_account(&anon).await;
    assert_eq!(anon.verification_count(), 1);
    let v = anon.verification().unwrap();
    assert!(v.simulated);
    assert!(
        // os-image is N/A: a simulated quote has no OS measurement.
        v.report.checks.iter().all(|c| c.status == Status::Pass
            || (c.id == "os-image" && c.status == Status::NotApplicable)),
        "{}",
        v.report.to_text()
    );
    assert_eq!(v.compose_hash, hex::encode(stack.compose_hash));
    let leaf = stack.cert_pem().await;
    assert_eq!(v.pinned_leaves.len(), 1);

    // A call that needs a key, from a client without one, is refused locally.
    assert!(matches!(
        list_groups(&anon).await,
        Err(ClientError::NoApiKey)
    ));

    // A client with the key, one connection per call, so that every call's handshake
    // shows the server's current leaf.
    let keyed = build(
        &stack.base,
        &stack.root_file,
        policy(&stack),
        Some(&key),
        true,
    );
    // Eight calls at once on the unverified client: one verification serves them all.
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let keyed = keyed.clone();
            tokio::spawn(async move { list_groups(&keyed).await })
        })
        .collect();
    for call in calls {
        let groups = call.await.unwrap().unwrap();
        assert!(groups.is_empty(), "{groups:?}");
    }
    assert_eq!(
        keyed.verification_count(),
        1,
        "one verification for concurrent calls"
    );
    // The server's error envelope arrives typed.
    let err = add_group(&keyed, "").await.unwrap_err();
    match &err {
        ClientError::Api { status: 400, error } => {
            assert_eq!(error.code, 400);
            assert!(error.description.contains("group_name"), "{error:?}");
        }
        other => panic!("expected a typed 400, got {other:?}"),
    }

    // A forced ACME renewal: the next handshake shows a new leaf, which the fresh
    // evidence attests; one re-verification, and the calls go on.
    e2e::signal(stack.app.pid(), "USR1");
    let renewed = e2e::eventually_async(Duration::from_secs(60), || {
        let old = leaf.clone();
        let stack = &stack;
        async move { stack.cert_pem().await != old }
    })
    .await;
    assert!(renewed, "no renewal; log:\n{}", stack.app.log());
    let old_pin = keyed.verification().unwrap().pinned_leaves.clone();
    list_groups(&keyed).await.unwrap();
    assert_eq!(keyed.verification_count(), 2, "one re-verification");
    assert_ne!(keyed.verification().unwrap().pinned_leaves, old_pin);
    for _ in 0..3 {
        list_groups(&keyed).await.unwrap();
    }
    assert_eq!(keyed.verification_count(), 2, "no further verification");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_with_another_valid_certificate_gets_no_request() {
    let stack = AttestedStack::start().await;
    let relay = Relay::start(DOMAIN, stack.plain.clone(), stack.base.clone(), None).await;
    let roots = trust_both(&stack, &relay);

    // 1. The network path changes after the verification: the same URL now reaches the
    // relay, whose certificate is valid for the name (the client trusts its CA). With
    // the default policy the relay's leaf is refused in the handshake (neither attested
    // nor carrying the announced next key): not one HTTP byte reaches it.
    let switch = Switch::start(stack.port).await;
    let url = format!("https://{DOMAIN}:{}", switch.port);
    assert!(!Policy::default().reverify_on_new_certificate);
    let anon = build(&url, &roots, policy(&stack), None, false);
    let key = new_account(&anon).await;
    assert!(
        anon.verification().unwrap().announced_next_key.is_some(),
        "the evidence announces the next certificate key"
    );
    let keyed = build(&url, &roots, policy(&stack), Some(&key), true);
    list_groups(&keyed).await.unwrap();
    switch.route_to(relay.port);
    let err = list_groups(&keyed).await.unwrap_err();
    assert!(
        matches!(err, ClientError::CertificateNotAttested { .. }),
        "{err:?}"
    );
    assert!(
        relay.seen.connections() >= 1,
        "the client did reach the relay"
    );
    assert_eq!(relay.seen.http_bytes(), 0, "{:?}", relay.seen.requests());

    // 2. With re-verification on unannounced certificates (opt-in, for deployments that
    // do not announce their next key): the relay's certificate makes the client verify
    // once more, over a fresh credential-free connection; the evidence it relays does
    // not attest its certificate, so the client fails closed. The relay sees the public
    // evidence requests only: no credential, no API call.
    let lenient = Policy {
        reverify_on_new_certificate: true,
        ..policy(&stack)
    };
    let keyed = build(&url, &roots, lenient, Some(&key), true);
    switch.route_to(stack.port);
    list_groups(&keyed).await.unwrap();
    switch.route_to(relay.port);
    let err = list_groups(&keyed).await.unwrap_err();
    assert!(
        matches!(err, ClientError::CertificateNotAttested { .. }),
        "{err:?}"
    );
    // Fails closed: no further call is attempted, even back on the real path.
    switch.route_to(stack.port);
    assert!(matches!(
        list_groups(&keyed).await,
        Err(ClientError::VerificationFailedEarlier)
    ));
    only_public_evidence(&relay.seen.requests());

    // 3. First contact through the relay: the verification fails by name
    // (tls-certificate), and no API request or key is ever sent.
    let via_relay = format!("https://{DOMAIN}:{}", relay.port);
    let c = build(&via_relay, &roots, policy(&stack), Some(&key), false);
    let err = list_groups(&c).await.unwrap_err();
    let report = err.report().unwrap_or_else(|| panic!("{err:?}"));
    assert_eq!(
        report.failed(),
        vec!["tls-certificate"],
        "{}",
        report.to_text()
    );
    only_public_evidence(&relay.seen.requests());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_that_fails_a_check_stops_the_client_before_it_sends_anything() {
    let stack = AttestedStack::start().await;
    let anon = client(&stack, &stack.base, None, policy(&stack));
    let key = new_account(&anon).await;

    // One flipped byte of the compose, in /info.
    let flip: Tamper = Arc::new(|path: &str, body: Vec<u8>| {
        if path != "/info" {
            return body;
        }
        let mut info: Value = serde_json::from_slice(&body).unwrap();
        let compose = info["tcb_info"]["app_compose"].as_str().unwrap().to_owned();
        let i = compose.find("services").expect("a compose with services");
        let mut bytes = compose.into_bytes();
        bytes[i] ^= 0x01; // 's' -> 'r'
        info["tcb_info"]["app_compose"] = Value::String(String::from_utf8(bytes).unwrap());
        serde_json::to_vec(&info).unwrap()
    });
    let relay = Relay::start(DOMAIN, stack.plain.clone(), stack.base.clone(), Some(flip)).await;
    let roots = trust_both(&stack, &relay);
    let c = build(
        &format!("https://{DOMAIN}:{}", relay.port),
        &roots,
        Policy {
            // Isolate the compose: accept the relay's own certificate for this case.
            skip: vec!["tls-certificate".to_owned()],
            ..policy(&stack)
        },
        Some(&key),
        false,
    );
    let err = list_groups(&c).await.unwrap_err();
    let report = err.report().unwrap_or_else(|| panic!("{err:?}"));
    assert!(
        report.failed().contains(&"compose-hash"),
        "{}",
        report.to_text()
    );
    only_public_evidence(&relay.seen.requests());
    assert!(
        !relay.seen.requests().is_empty(),
        "the evidence did go through the relay"
    );

    // The compose hash removed from the governance allow-list: the verification fails
    // (governance), and a write with the key never reaches the server.
    stack.allow(false).await;
    let c = client(&stack, &stack.base, Some(&key), policy(&stack));
    let err = add_group(&c, "never").await.unwrap_err();
    let report = err.report().unwrap_or_else(|| panic!("{err:?}"));
    assert_eq!(report.failed(), vec!["governance"], "{}", report.to_text());
    assert!(matches!(
        list_groups(&c).await,
        Err(ClientError::VerificationFailedEarlier)
    ));
    // Allowed again: a new client verifies, and the write above never happened.
    stack.allow(true).await;
    let c = client(&stack, &stack.base, Some(&key), policy(&stack));
    assert!(list_groups(&c).await.unwrap().is_empty());
    c.verify().await.unwrap();

    // Expected compose hashes: a deployment running another one is refused.
    let c = client(
        &stack,
        &stack.base,
        Some(&key),
        Policy {
            compose_hashes: vec!["00".repeat(32)],
            ..policy(&stack)
        },
    );
    assert!(matches!(
        c.verify().await,
        Err(ClientError::UnexpectedComposeHash { .. })
    ));
    // And a policy that requires a check whose input is missing fails it.
    let c = client(
        &stack,
        &stack.base,
        Some(&key),
        Policy {
            rpc_url: None,
            ..policy(&stack)
        },
    );
    let err = c.verify().await.unwrap_err();
    assert_eq!(err.report().unwrap().failed(), vec!["governance"]);
}
