//! Rule 6 against a real chain: anvil (installed by scripts/setup), the committed
//! AppGovernance artifact, and the verifier's eth_call through --rpc-url.

use crate::fixtures::*;
use alloy::primitives::B256;
use alloy::providers::ProviderBuilder;
use alloy::signers::local::PrivateKeySigner;
use chain_contracts::{IAppGovernance, deploy_app_governance};
use evidence::check::{Options, Status, run};
use evidence::verify::Policy;

#[tokio::test]
async fn governance_check_asks_the_contract_at_app_id_for_the_compose_hash() {
    let anvil = test_support::anvil::spawn();
    let signer = PrivateKeySigner::from(anvil.keys()[0].clone());
    let provider = ProviderBuilder::new().wallet(signer).connect_reqwest(
        chain_contracts::rpc::http_client().unwrap(),
        anvil.endpoint_url(),
    );
    let contract = deploy_app_governance(&provider).await.unwrap();

    // A simulated deployment whose app_id is the governance contract.
    let compose = simulated_app_compose();
    let simulated = evidence::SimulatedProvider::new(compose.clone().into_bytes())
        .with_app_id(contract.into_array());
    let provider_enum: evidence::QuoteProvider = simulated.into();
    let mut bundle = simulated_bundle().await;
    bundle.info = Some(provider_enum.info().await.unwrap().info_json());
    bundle.attestation = Some(
        provider_enum
            .quote([0; 64])
            .await
            .unwrap()
            .attestation_json(),
    );
    let opts = Options {
        at: NEAR_MPC_AT,
        policy: Policy {
            allow_simulated: true,
            ..Policy::default()
        },
        rpc_url: Some(anvil.endpoint()),
        ..Options::default()
    };

    // Not allowed yet.
    let r = run(&bundle, &opts).await;
    let g = r.get("governance").unwrap();
    assert_eq!(g.status, Status::Fail, "{}", r.to_text());
    assert!(g.detail.ends_with("= false"), "{}", g.detail);

    // The owner allows the hash: the check passes.
    let hash = B256::from_slice(&hex::decode(evidence::compose_hash(compose.as_bytes())).unwrap());
    IAppGovernance::new(contract, &provider)
        .addComposeHash(hash)
        .send()
        .await
        .unwrap()
        .get_receipt()
        .await
        .unwrap();
    let r = run(&bundle, &opts).await;
    assert_eq!(
        r.get("governance").unwrap().status,
        Status::Pass,
        "{}",
        r.to_text()
    );

    // An app_id with no contract behind it fails with a reason.
    let mut other = bundle.clone();
    other.info.as_mut().unwrap()["app_id"] = serde_json::json!("00".repeat(20));
    let r = run(&other, &opts).await;
    let g = r.get("governance").unwrap();
    assert_eq!(g.status, Status::Fail);
    assert!(g.detail.contains("no contract"), "{}", g.detail);
}
