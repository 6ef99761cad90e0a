//! AppGovernance against a real anvil: owner-only writes, their events, and the allowed set.

use alloy::{
    primitives::{Address, B256},
    providers::Provider,
    rpc::types::Filter,
};
use chain_contracts::{
    IAppGovernance::{self, IAppGovernanceErrors as E, *},
    artifacts, deploy_app_governance,
};
use test_support::chain::{
    Chain, OTHER_ADMIN, OWNER, STRANGER, assert_no_events, only_event, revert, send,
};

#[tokio::test]
async fn deployment_sets_the_owner_and_matches_the_artifact() {
    let chain = Chain::start();
    let provider = chain.provider(OWNER);
    let address = deploy_app_governance(provider).await.expect("deploy");

    assert_eq!(
        provider.get_code_at(address).await.unwrap(),
        artifacts::app_governance_deployed_bytecode()
    );
    let logs = provider
        .get_logs(&Filter::new().address(address).from_block(0))
        .await
        .unwrap();
    assert_eq!(logs.len(), 1);
    assert_eq!(
        logs[0]
            .log_decode::<OwnershipTransferred>()
            .unwrap()
            .inner
            .data,
        OwnershipTransferred {
            previousOwner: Address::ZERO,
            newOwner: chain.address(OWNER)
        }
    );
    let governance = IAppGovernance::new(address, provider.clone());
    assert_eq!(
        governance.owner().call().await.unwrap(),
        chain.address(OWNER)
    );
    assert!(
        !governance
            .allowedComposeHashes(B256::ZERO)
            .call()
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn compose_hashes_are_allowed_and_revoked_by_the_owner_only() {
    let chain = Chain::start();
    let address = deploy_app_governance(chain.provider(OWNER)).await.unwrap();
    let owner = IAppGovernance::new(address, chain.provider(OWNER).clone());
    let stranger = IAppGovernance::new(address, chain.provider(STRANGER).clone());
    let hash = B256::repeat_byte(0x5a);
    let other = B256::repeat_byte(0x5b);
    let not_owner = E::NotOwner(NotOwner {
        caller: chain.address(STRANGER),
    });

    assert_eq!(
        revert::<E, _, _>(stranger.addComposeHash(hash)).await,
        not_owner
    );
    assert!(!owner.allowedComposeHashes(hash).call().await.unwrap());

    let receipt = send(owner.addComposeHash(hash)).await;
    assert_eq!(
        only_event::<ComposeHashAdded>(&receipt, address),
        ComposeHashAdded { composeHash: hash }
    );
    assert!(owner.allowedComposeHashes(hash).call().await.unwrap());
    assert!(!owner.allowedComposeHashes(other).call().await.unwrap());
    // Adding an allowed hash again changes nothing and emits nothing.
    assert_no_events(&send(owner.addComposeHash(hash)).await);
    assert!(owner.allowedComposeHashes(hash).call().await.unwrap());

    assert_eq!(
        revert::<E, _, _>(stranger.removeComposeHash(hash)).await,
        not_owner
    );
    let receipt = send(owner.removeComposeHash(hash)).await;
    assert_eq!(
        only_event::<ComposeHashRemoved>(&receipt, address),
        ComposeHashRemoved { composeHash: hash }
    );
    assert!(!owner.allowedComposeHashes(hash).call().await.unwrap());
    assert_no_events(&send(owner.removeComposeHash(hash)).await);
    assert_no_events(&send(owner.removeComposeHash(other)).await);

    // Allowed again after a revocation.
    let receipt = send(owner.addComposeHash(hash)).await;
    assert_eq!(
        only_event::<ComposeHashAdded>(&receipt, address),
        ComposeHashAdded { composeHash: hash }
    );
    assert!(owner.allowedComposeHashes(hash).call().await.unwrap());
}

#[tokio::test]
async fn ownership_moves_only_by_the_owner() {
    let chain = Chain::start();
    let address = deploy_app_governance(chain.provider(OWNER)).await.unwrap();
    let owner = IAppGovernance::new(address, chain.provider(OWNER).clone());
    let successor = IAppGovernance::new(address, chain.provider(OTHER_ADMIN).clone());
    let stranger = IAppGovernance::new(address, chain.provider(STRANGER).clone());

    assert_eq!(
        revert::<E, _, _>(stranger.transferOwnership(chain.address(STRANGER))).await,
        E::NotOwner(NotOwner {
            caller: chain.address(STRANGER)
        })
    );
    assert_eq!(
        revert::<E, _, _>(owner.transferOwnership(Address::ZERO)).await,
        E::ZeroAddress(ZeroAddress {})
    );
    assert_no_events(&send(owner.transferOwnership(chain.address(OWNER))).await);

    let receipt = send(owner.transferOwnership(chain.address(OTHER_ADMIN))).await;
    assert_eq!(
        only_event::<OwnershipTransferred>(&receipt, address),
        OwnershipTransferred {
            previousOwner: chain.address(OWNER),
            newOwner: chain.address(OTHER_ADMIN)
        }
    );
    assert_eq!(
        owner.owner().call().await.unwrap(),
        chain.address(OTHER_ADMIN)
    );

    let hash = B256::repeat_byte(1);
    assert_eq!(
        revert::<E, _, _>(owner.addComposeHash(hash)).await,
        E::NotOwner(NotOwner {
            caller: chain.address(OWNER)
        })
    );
    let receipt = send(successor.addComposeHash(hash)).await;
    assert_eq!(
        only_event::<ComposeHashAdded>(&receipt, address),
        ComposeHashAdded { composeHash: hash }
    );
}
