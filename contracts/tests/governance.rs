//! AppGovernance against a real anvil: a dstack app contract. Owner-only writes and their
//! events; ERC-165; `isAppAllowed` called through dstack's own interface (`IAppAuth`, the ABI
//! its KMS uses) directly and through a KMS contract that consults the app as dstack's does;
//! and ownership handed to a Safe-style multisig.

#![allow(clippy::unwrap_used, reason = "test helpers")]

use alloy::{
    primitives::{Address, B256, Bytes, FixedBytes, U256},
    providers::Provider,
    rpc::types::Filter,
    signers::local::PrivateKeySigner,
    sol_types::{SolCall, SolEvent},
};
use chain_contracts::{
    IAppGovernance::{self, IAppGovernanceErrors as E, *},
    artifacts, deploy_account_config, deploy_app_governance,
    dstack::{
        IAPP_AUTH_BASIC_MANAGEMENT_INTERFACE_ID, IAPP_AUTH_INTERFACE_ID, IAppAuth,
        IAppAuthBasicManagement, IERC165, IERC165_INTERFACE_ID,
    },
};
use test_support::chain::{
    Chain, OTHER_ADMIN, OWNER, PAYER, STRANGER, revert, send,
    test_contracts::{TestKms, TestMultisig, multisig_exec, multisig_signatures},
};

const UP_TO_DATE: &str = "UpToDate";

/// A boot of the app at `app` with compose hash `compose`, on device 0xd1, OS image 0x05.
fn boot(app: Address, compose: B256) -> IAppAuth::AppBootInfo {
    IAppAuth::AppBootInfo {
        appId: app,
        composeHash: compose,
        instanceId: Address::repeat_byte(0x11),
        deviceId: B256::repeat_byte(0xd1),
        mrAggregated: B256::repeat_byte(0xa9),
        mrSystem: B256::repeat_byte(0x5e),
        osImageHash: B256::repeat_byte(0x05),
        tcbStatus: UP_TO_DATE.to_owned(),
        advisoryIds: vec!["INTEL-SA-00837".to_owned()],
    }
}

/// `isAppAllowed` through dstack's interface, as its KMS calls it.
async fn ask<P: Provider>(
    contract: Address,
    provider: P,
    info: IAppAuth::AppBootInfo,
) -> (bool, String) {
    let answer = IAppAuth::new(contract, provider)
        .isAppAllowed(info)
        .call()
        .await
        .unwrap();
    (answer.isAllowed, answer.reason)
}

fn allowed() -> (bool, String) {
    (true, String::new())
}

fn refused(reason: &str) -> (bool, String) {
    (false, reason.to_owned())
}

/// The events of `receipt`, as (topic0, data) — to compare whole event sequences.
fn events(receipt: &alloy::rpc::types::TransactionReceipt) -> Vec<(B256, Bytes)> {
    receipt
        .inner
        .logs()
        .iter()
        .map(|log| (log.topics()[0], log.data().data.clone()))
        .collect()
}

#[tokio::test]
async fn deployment_sets_the_owner_and_the_open_device_and_os_policy() {
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
    // The policy can be rebuilt from the events alone, from the first one on.
    assert_eq!(logs.len(), 3, "{logs:#?}");
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
    assert_eq!(
        logs[1]
            .log_decode::<AllowAnyDeviceSet>()
            .unwrap()
            .inner
            .data,
        AllowAnyDeviceSet { allowAny: true }
    );
    assert_eq!(
        logs[2]
            .log_decode::<AllowAnyOsImageSet>()
            .unwrap()
            .inner
            .data,
        AllowAnyOsImageSet { allowAny: true }
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
    assert!(governance.allowAnyDevice().call().await.unwrap());
    assert!(governance.allowAnyOsImage().call().await.unwrap());
    assert!(!governance.requireTcbUpToDate().call().await.unwrap());
    // A new contract allows nothing to boot: no compose hash is allowed yet.
    assert_eq!(
        ask(address, provider, boot(address, B256::ZERO)).await,
        refused("Compose hash not allowed")
    );
}

#[tokio::test]
async fn it_announces_dstacks_interfaces_through_erc165() {
    // The ids dstack publishes are the XOR of the selectors of the interfaces written here.
    assert_eq!(
        IAppAuth::isAppAllowedCall::SELECTOR,
        IAPP_AUTH_INTERFACE_ID,
        "IAppAuth's ABI is not dstack's"
    );
    let management = [
        IAppAuthBasicManagement::addComposeHashCall::SELECTOR,
        IAppAuthBasicManagement::removeComposeHashCall::SELECTOR,
        IAppAuthBasicManagement::addDeviceCall::SELECTOR,
        IAppAuthBasicManagement::removeDeviceCall::SELECTOR,
    ]
    .iter()
    .fold([0u8; 4], |acc, s| std::array::from_fn(|i| acc[i] ^ s[i]));
    assert_eq!(management, IAPP_AUTH_BASIC_MANAGEMENT_INTERFACE_ID);
    assert_eq!(
        IERC165::supportsInterfaceCall::SELECTOR,
        IERC165_INTERFACE_ID
    );
    // The same event as dstack's (its tools read the hash from the data: not indexed, which
    // the write tests check).
    assert_eq!(
        ComposeHashAdded::SIGNATURE_HASH,
        IAppAuthBasicManagement::ComposeHashAdded::SIGNATURE_HASH
    );

    let chain = Chain::start();
    let address = deploy_app_governance(chain.provider(OWNER)).await.unwrap();
    let erc165 = IERC165::new(address, chain.provider(STRANGER));
    for (id, expected) in [
        (IERC165_INTERFACE_ID, true),
        (IAPP_AUTH_INTERFACE_ID, true),
        (IAPP_AUTH_BASIC_MANAGEMENT_INTERFACE_ID, true),
        ([0xff; 4], false),
        ([0, 0, 0, 0], false),
        ([0x12, 0x34, 0x56, 0x78], false),
    ] {
        assert_eq!(
            erc165
                .supportsInterface(FixedBytes(id))
                .call()
                .await
                .unwrap(),
            expected,
            "supportsInterface(0x{})",
            hex::encode(id)
        );
    }
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

    let added = || vec![(ComposeHashAdded::SIGNATURE_HASH, Bytes::from(hash.to_vec()))];
    assert_eq!(events(&send(owner.addComposeHash(hash)).await), added());
    assert!(owner.allowedComposeHashes(hash).call().await.unwrap());
    assert!(!owner.allowedComposeHashes(other).call().await.unwrap());
    // IAppAuthBasicManagement: every successful call emits, also one that changes nothing.
    assert_eq!(events(&send(owner.addComposeHash(hash)).await), added());
    assert!(owner.allowedComposeHashes(hash).call().await.unwrap());
    assert_eq!(
        ask(address, chain.provider(STRANGER), boot(address, hash)).await,
        allowed()
    );

    assert_eq!(
        revert::<E, _, _>(stranger.removeComposeHash(hash)).await,
        not_owner
    );
    let receipt = send(owner.removeComposeHash(hash)).await;
    assert_eq!(
        events(&receipt),
        vec![(
            ComposeHashRemoved::SIGNATURE_HASH,
            Bytes::from(hash.to_vec())
        )]
    );
    assert!(!owner.allowedComposeHashes(hash).call().await.unwrap());
    assert_eq!(
        ask(address, chain.provider(STRANGER), boot(address, hash)).await,
        refused("Compose hash not allowed")
    );

    // Allowed again after a revocation.
    send(owner.addComposeHash(hash)).await;
    assert!(owner.allowedComposeHashes(hash).call().await.unwrap());
}

#[tokio::test]
async fn is_app_allowed_checks_tcb_compose_device_and_os_image_in_that_order() {
    let chain = Chain::start();
    let address = deploy_app_governance(chain.provider(OWNER)).await.unwrap();
    let owner = IAppGovernance::new(address, chain.provider(OWNER).clone());
    let stranger = IAppGovernance::new(address, chain.provider(STRANGER).clone());
    let reader = chain.provider(STRANGER);
    let compose = B256::repeat_byte(0xc0);
    let good = boot(address, compose);
    let with = |f: &dyn Fn(&mut IAppAuth::AppBootInfo)| {
        let mut info = good.clone();
        f(&mut info);
        info
    };
    send(owner.addComposeHash(compose)).await;
    assert_eq!(ask(address, reader, good.clone()).await, allowed());
    // Open device and OS policy: any device, any image, any TCB status.
    let anywhere = with(&|i| {
        i.deviceId = B256::repeat_byte(0x77);
        i.osImageHash = B256::repeat_byte(0x78);
        i.tcbStatus = "OutOfDate".into();
    });
    assert_eq!(ask(address, reader, anywhere.clone()).await, allowed());

    // Every policy write is the owner's alone.
    let not_owner = E::NotOwner(NotOwner {
        caller: chain.address(STRANGER),
    });
    assert_eq!(
        revert::<E, _, _>(stranger.setRequireTcbUpToDate(true)).await,
        not_owner
    );
    assert_eq!(
        revert::<E, _, _>(stranger.setAllowAnyDevice(false)).await,
        not_owner
    );
    assert_eq!(
        revert::<E, _, _>(stranger.addDevice(good.deviceId)).await,
        not_owner
    );
    assert_eq!(
        revert::<E, _, _>(stranger.removeDevice(good.deviceId)).await,
        not_owner
    );
    assert_eq!(
        revert::<E, _, _>(stranger.setAllowAnyOsImage(false)).await,
        not_owner
    );
    assert_eq!(
        revert::<E, _, _>(stranger.addOsImageHash(good.osImageHash)).await,
        not_owner
    );
    assert_eq!(
        revert::<E, _, _>(stranger.removeOsImageHash(good.osImageHash)).await,
        not_owner
    );

    // TCB: required up to date.
    assert_eq!(
        events(&send(owner.setRequireTcbUpToDate(true)).await),
        vec![(
            RequireTcbUpToDateSet::SIGNATURE_HASH,
            RequireTcbUpToDateSet {
                requireUpToDate: true
            }
            .encode_data()
            .into()
        )]
    );
    assert_eq!(
        ask(address, reader, anywhere.clone()).await,
        refused("TCB status is not up to date")
    );
    for status in ["", "uptodate", "UpToDate ", "SWHardeningNeeded"] {
        assert_eq!(
            ask(address, reader, with(&|i| i.tcbStatus = status.into())).await,
            refused("TCB status is not up to date"),
            "{status:?}"
        );
    }
    // The TCB is checked before the compose hash.
    assert_eq!(
        ask(
            address,
            reader,
            with(&|i| {
                i.tcbStatus = "OutOfDate".into();
                i.composeHash = B256::ZERO;
            })
        )
        .await,
        refused("TCB status is not up to date")
    );
    assert_eq!(ask(address, reader, good.clone()).await, allowed());

    // Devices: only listed ones once "any device" is off.
    send(owner.setAllowAnyDevice(false)).await;
    assert!(!owner.allowAnyDevice().call().await.unwrap());
    assert_eq!(
        ask(address, reader, good.clone()).await,
        refused("Device not allowed")
    );
    // The compose hash is checked before the device.
    assert_eq!(
        ask(address, reader, with(&|i| i.composeHash = B256::ZERO)).await,
        refused("Compose hash not allowed")
    );
    let receipt = send(owner.addDevice(good.deviceId)).await;
    assert_eq!(
        events(&receipt),
        vec![(
            DeviceAdded::SIGNATURE_HASH,
            Bytes::from(good.deviceId.to_vec())
        )]
    );
    assert!(owner.allowedDeviceIds(good.deviceId).call().await.unwrap());
    assert_eq!(ask(address, reader, good.clone()).await, allowed());
    assert_eq!(
        ask(
            address,
            reader,
            with(&|i| i.deviceId = B256::repeat_byte(0xd2))
        )
        .await,
        refused("Device not allowed")
    );

    // OS images: only listed ones once "any image" is off.
    send(owner.setAllowAnyOsImage(false)).await;
    assert_eq!(
        ask(address, reader, good.clone()).await,
        refused("OS image is not allowed")
    );
    assert_eq!(
        ask(
            address,
            reader,
            with(&|i| i.deviceId = B256::repeat_byte(0xd2))
        )
        .await,
        refused("Device not allowed"),
        "the device is checked before the OS image"
    );
    send(owner.addOsImageHash(good.osImageHash)).await;
    assert!(
        owner
            .allowedOsImages(good.osImageHash)
            .call()
            .await
            .unwrap()
    );
    assert_eq!(ask(address, reader, good.clone()).await, allowed());

    // Revocations take effect at once.
    send(owner.removeOsImageHash(good.osImageHash)).await;
    assert_eq!(
        ask(address, reader, good.clone()).await,
        refused("OS image is not allowed")
    );
    send(owner.setAllowAnyOsImage(true)).await;
    send(owner.removeDevice(good.deviceId)).await;
    assert_eq!(
        ask(address, reader, good.clone()).await,
        refused("Device not allowed")
    );
    send(owner.setAllowAnyDevice(true)).await;
    send(owner.setRequireTcbUpToDate(false)).await;
    assert_eq!(ask(address, reader, anywhere).await, allowed());
}

#[tokio::test]
async fn a_kms_that_consults_the_app_as_dstacks_does_releases_keys_only_for_allowed_boots() {
    let chain = Chain::start();
    let app = deploy_app_governance(chain.provider(OWNER)).await.unwrap();
    let governance = IAppGovernance::new(app, chain.provider(OWNER).clone());
    let kms = TestKms::deploy(chain.provider(OWNER).clone())
        .await
        .unwrap();
    let kms_address = *kms.address();
    let reader = chain.provider(STRANGER);
    let compose = B256::repeat_byte(0xc1);
    let info = boot(app, compose);

    // The KMS's own gates come first.
    assert_eq!(
        ask(kms_address, reader, info.clone()).await,
        refused("App not registered")
    );
    send(kms.registerApp(app)).await;
    assert_eq!(
        ask(kms_address, reader, info.clone()).await,
        refused("OS image is not allowed")
    );
    send(kms.addOsImageHash(info.osImageHash)).await;
    // Then the app decides: nothing allowed yet.
    assert_eq!(
        ask(kms_address, reader, info.clone()).await,
        refused("Compose hash not allowed")
    );
    send(governance.addComposeHash(compose)).await;
    assert_eq!(ask(kms_address, reader, info.clone()).await, allowed());
    // Another compose hash of the same app is refused; so is the app once revoked.
    assert_eq!(
        ask(kms_address, reader, boot(app, B256::repeat_byte(0xc2))).await,
        refused("Compose hash not allowed")
    );
    send(governance.setRequireTcbUpToDate(true)).await;
    let mut stale = info.clone();
    stale.tcbStatus = "OutOfDate".into();
    assert_eq!(
        ask(kms_address, reader, stale).await,
        refused("TCB status is not up to date")
    );
    send(governance.removeComposeHash(compose)).await;
    assert_eq!(
        ask(kms_address, reader, info.clone()).await,
        refused("Compose hash not allowed")
    );

    // An app id with no code, or a contract that does not announce IAppAuth, is refused
    // before anything is asked of it.
    let nobody = chain.address(STRANGER);
    send(kms.registerApp(nobody)).await;
    assert_eq!(
        ask(kms_address, reader, boot(nobody, compose)).await,
        refused("App not deployed or invalid address")
    );
    let not_an_app = deploy_account_config(chain.provider(OWNER)).await.unwrap();
    send(kms.registerApp(not_an_app)).await;
    assert_eq!(
        ask(kms_address, reader, boot(not_an_app, compose)).await,
        refused("App does not implement IAppAuth")
    );
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
    test_support::chain::assert_no_events(
        &send(owner.transferOwnership(chain.address(OWNER))).await,
    );

    let receipt = send(owner.transferOwnership(chain.address(OTHER_ADMIN))).await;
    assert_eq!(
        test_support::chain::only_event::<OwnershipTransferred>(&receipt, address),
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
    send(successor.addComposeHash(hash)).await;
    assert!(owner.allowedComposeHashes(hash).call().await.unwrap());
}

#[tokio::test]
async fn a_safe_style_multisig_owner_governs_with_its_threshold_of_signatures() {
    let chain = Chain::start();
    let address = deploy_app_governance(chain.provider(OWNER)).await.unwrap();
    let deployer = IAppGovernance::new(address, chain.provider(OWNER).clone());
    // Three signers, any two decide; a fourth key is not a signer.
    let keys: Vec<PrivateKeySigner> = (5..9)
        .map(|i| PrivateKeySigner::from_slice(&[i as u8 + 0x40; 32]).unwrap())
        .collect();
    let (a, b, c, outsider) = (&keys[0], &keys[1], &keys[2], &keys[3]);
    let multisig = TestMultisig::deploy(
        chain.provider(PAYER).clone(),
        vec![a.address(), b.address(), c.address()],
        U256::from(2),
    )
    .await
    .unwrap();
    send(deployer.transferOwnership(*multisig.address())).await;
    assert_eq!(deployer.owner().call().await.unwrap(), *multisig.address());
    // The former owner is nobody now.
    let hash = B256::repeat_byte(0x3c);
    assert_eq!(
        revert::<E, _, _>(deployer.addComposeHash(hash)).await,
        E::NotOwner(NotOwner {
            caller: chain.address(OWNER)
        })
    );

    // The calldata `compose-pin propose --calldata-only` prints, signed by two of three and
    // submitted by anyone.
    let add: Bytes = IAppGovernance::addComposeHashCall { composeHash: hash }
        .abi_encode()
        .into();
    let as_stranger = TestMultisig::new(*multisig.address(), chain.provider(STRANGER).clone());
    // One signature is not enough; nor are two when one is not a signer's.
    let nonce = as_stranger.nonce().call().await.unwrap();
    let tx_hash = as_stranger
        .transactionHash(address, U256::ZERO, add.clone(), nonce)
        .call()
        .await
        .unwrap();
    for signers in [vec![a], vec![a, outsider], vec![a, a]] {
        let error = as_stranger
            .execTransaction(
                address,
                U256::ZERO,
                add.clone(),
                multisig_signatures(&signers, tx_hash),
            )
            .send()
            .await
            .expect_err("refused");
        assert!(
            error
                .as_decoded_error::<TestMultisig::BadSignatures>()
                .is_some(),
            "{error}"
        );
    }
    assert!(!deployer.allowedComposeHashes(hash).call().await.unwrap());
    let receipt = multisig_exec(&as_stranger, &[c, a], address, U256::ZERO, add.clone())
        .await
        .unwrap();
    assert!(receipt.decoded_log::<ComposeHashAdded>().is_some());
    assert!(deployer.allowedComposeHashes(hash).call().await.unwrap());
    // The same signatures cannot be replayed: the nonce moved.
    let replay = as_stranger
        .execTransaction(
            address,
            U256::ZERO,
            add,
            multisig_signatures(&[a, c], tx_hash),
        )
        .send()
        .await
        .expect_err("replay refused");
    assert!(
        replay
            .as_decoded_error::<TestMultisig::BadSignatures>()
            .is_some()
    );

    // A governance revert comes back through the multisig unchanged.
    let to_zero: Bytes = IAppGovernance::transferOwnershipCall {
        newOwner: Address::ZERO,
    }
    .abi_encode()
    .into();
    let error = multisig_exec(&as_stranger, &[a, b], address, U256::ZERO, to_zero)
        .await
        .expect_err("reverts");
    assert_eq!(
        error.as_decoded_interface_error::<E>(),
        Some(E::ZeroAddress(ZeroAddress {}))
    );
    // Tightening the policy works the same way.
    let policy: Bytes = IAppGovernance::setRequireTcbUpToDateCall {
        requireUpToDate: true,
    }
    .abi_encode()
    .into();
    multisig_exec(&as_stranger, &[b, c], address, U256::ZERO, policy)
        .await
        .unwrap();
    assert!(deployer.requireTcbUpToDate().call().await.unwrap());
}
