//! The keyservice boundary, tried through the socket: wallet operations refuse the
//! service's own paths, service keys are reachable only through their purpose-named
//! operations, a payer never signs a bare digest, and signs only transactions its policy
//! allows (chain id, destination, no value, fee cap, the committed contracts only).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use alloy::consensus::{SignableTransaction as _, TxLegacy};
use alloy::primitives::{Bytes, TxKind, U256};
use alloy::sol_types::SolCall as _;
use chain_contracts::artifacts;
use keyservice_api::protocol::ErrorCode;
use keyservice_api::{DerivationPath, KeyClient, KeyError, Payer, ServicePurpose, keccak256};
use test_support::keyservice::{
    Env, eip1559, preimage, raw_connect, raw_frame, read_raw_frame, recover_address,
};

/// An AccountConfig someone else deployed; keyservice is told about it.
const CONFIGURED: [u8; 20] = [0xac; 20];
/// An address keyservice knows nothing about.
const STRANGER: [u8; 20] = [0x5e; 20];

fn env_with_contract() -> Env {
    let mut env = Env::new();
    env.run_extra
        .extend(["--account-config".into(), hex::encode(CONFIGURED).into()]);
    env
}

#[track_caller]
fn assert_refused<T: std::fmt::Debug>(result: Result<T, KeyError>, needle: &str) {
    match result {
        Err(e) if e.is_refused() => {
            let text = e.to_string();
            assert!(text.contains(needle), "{text} does not mention {needle:?}");
        }
        other => panic!("expected a refusal mentioning {needle:?}, got {other:?}"),
    }
}

fn legacy_paths() -> [DerivationPath; 2] {
    [
        DerivationPath(keccak256(b"appliance/acme/account-key/v1")),
        DerivationPath(keccak256(b"appliance/acme/cert-key/v1")),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wallet_operations_refuse_the_service_paths() {
    let env = Env::new();
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    for path in legacy_paths() {
        assert_refused(client.wallet(&path).await, "belongs to the service");
        assert_refused(
            client.sign_digest(&path, &[1; 32]).await,
            "belongs to the service",
        );
        assert_refused(
            client.export_private_key(&path).await,
            "belongs to the service",
        );
        assert_refused(client.encrypt(&path, b"x").await, "belongs to the service");
        assert_refused(
            client.decrypt(&path, &[0; 40]).await,
            "belongs to the service",
        );
    }
    // Every other path is a wallet.
    let ordinary = DerivationPath([7; 32]);
    client.wallet(&ordinary).await.unwrap();
    client.export_private_key(&ordinary).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_keys_are_reachable_only_by_their_purpose() {
    let env = Env::new();
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();

    let sealed = client
        .service_seal(ServicePurpose::AcmeAccount, b"account credentials")
        .await
        .unwrap();
    assert_eq!(
        &client
            .service_unseal(ServicePurpose::AcmeAccount, &sealed)
            .await
            .unwrap()[..],
        b"account credentials"
    );
    // Another purpose, or any wallet, cannot open it.
    assert!(matches!(
        client
            .service_unseal(ServicePurpose::AcmeCertificate, &sealed)
            .await,
        Err(KeyError::DecryptFailed)
    ));
    let wallet = client.create_wallet().await.unwrap();
    assert!(matches!(
        client.decrypt(&wallet.derivation_path, &sealed).await,
        Err(KeyError::DecryptFailed)
    ));
    for path in legacy_paths() {
        assert_refused(client.decrypt(&path, &sealed).await, "belongs");
    }
    // And a wallet's ciphertext is not a service seal.
    let by_wallet = client
        .encrypt(&wallet.derivation_path, b"tenant data")
        .await
        .unwrap();
    assert!(matches!(
        client
            .service_unseal(ServicePurpose::AcmeAccount, &by_wallet)
            .await,
        Err(KeyError::DecryptFailed)
    ));

    // Purposes are a closed set: an unknown one does not even decode.
    let mut s = raw_connect(&ks.socket);
    let mut payload = vec![0x7f];
    payload.extend_from_slice(&[0; 28]);
    test_support::keyservice::write_all(&mut s, &raw_frame(1, 0x10, 0, 5, &payload));
    let (op, status, id, _) = read_raw_frame(&mut s).unwrap();
    assert_eq!(
        (op, status, id),
        (0x10, ErrorCode::BadRequest as u8, 5),
        "unknown purpose"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payers_never_sign_a_bare_digest() {
    let env = Env::new();
    let ks = env.start();
    // 0x0C was PayerSign (kind ‖ index ‖ digest): it is no operation any more.
    let mut s = raw_connect(&ks.socket);
    let mut payload = vec![1u8, 0, 0, 0, 0];
    payload.extend_from_slice(&[0x11; 32]);
    test_support::keyservice::write_all(&mut s, &raw_frame(1, 0x0C, 0, 9, &payload));
    let (op, status, id, _) = read_raw_frame(&mut s).unwrap();
    assert_eq!(
        (op, status, id),
        (0x0C, ErrorCode::UnknownOperation as u8, 9)
    );

    // A digest passed where a transaction belongs is not a transaction.
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    assert_refused(
        client
            .payer_sign_transaction(Payer::Admin, &[0x11; 32])
            .await,
        "not an unsigned",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_chain_id_payers_sign_nothing() {
    let mut env = Env::new();
    env.run_extra.clear();
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    let tx = eip1559(Some(CONFIGURED), 0, vec![], 0);
    assert_refused(
        client
            .payer_sign_transaction(Payer::Api(0), &preimage(&tx))
            .await,
        "without a chain id",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payer_transactions_outside_the_policy_are_refused() {
    let env = env_with_contract();
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    let sign = |payer: Payer, bytes: Vec<u8>| {
        let client = client.clone();
        async move { client.payer_sign_transaction(payer, &bytes).await }
    };

    // Allowed: a call with no value to the configured contract, EIP-1559 and legacy.
    let ok = eip1559(Some(CONFIGURED), 0, vec![1, 2, 3, 4], 0);
    let sig = sign(Payer::Api(0), preimage(&ok)).await.unwrap();
    assert_eq!(
        recover_address(&ok.signature_hash().0, &sig),
        client.payer_address(Payer::Api(0)).await.unwrap()
    );
    let legacy = TxLegacy {
        chain_id: Some(31337),
        nonce: 1,
        gas_price: 1_000_000_000,
        gas_limit: 100_000,
        to: TxKind::Call(CONFIGURED.into()),
        value: U256::ZERO,
        input: Bytes::new(),
    };
    sign(Payer::Api(1), preimage(&legacy)).await.unwrap();

    // Another chain.
    let mut other_chain = ok.clone();
    other_chain.chain_id = 1;
    assert_refused(
        sign(Payer::Api(0), preimage(&other_chain)).await,
        "another chain",
    );
    // A pre-EIP-155 legacy transaction (valid on every chain).
    let replayable = TxLegacy {
        chain_id: None,
        ..legacy.clone()
    };
    assert_refused(
        sign(Payer::Api(0), preimage(&replayable)).await,
        "not an unsigned",
    );
    // Value, to the contract or to anyone else.
    assert_refused(
        sign(
            Payer::Api(0),
            preimage(&eip1559(Some(CONFIGURED), 1, vec![], 0)),
        )
        .await,
        "never transfer value",
    );
    assert_refused(
        sign(
            Payer::Admin,
            preimage(&eip1559(Some(STRANGER), 10u64.pow(18), vec![], 0)),
        )
        .await,
        "never transfer value",
    );
    // A call to an address that is not one of the contracts.
    assert_refused(
        sign(
            Payer::Api(0),
            preimage(&eip1559(Some(STRANGER), 0, vec![0xa9, 0x05, 0x9c, 0xbb], 0)),
        )
        .await,
        "not a contract the payers may call",
    );
    // A fee over the cap (0.1 ether by default): 10^6 gas at 10^12 wei.
    let mut greedy = ok.clone();
    greedy.gas_limit = 1_000_000;
    greedy.max_fee_per_gas = 1_000_000_000_000;
    assert_refused(sign(Payer::Api(0), preimage(&greedy)).await, "fee cap");
    // An access list (no flow uses one).
    let mut listed = ok.clone();
    listed.access_list =
        alloy::eips::eip2930::AccessList(vec![alloy::eips::eip2930::AccessListItem {
            address: STRANGER.into(),
            storage_keys: vec![],
        }]);
    assert_refused(sign(Payer::Api(0), preimage(&listed)).await, "access list");
    // Trailing bytes, truncation, another transaction type.
    let mut trailing = preimage(&ok);
    trailing.push(0);
    assert_refused(sign(Payer::Api(0), trailing).await, "not an unsigned");
    let full = preimage(&ok);
    assert_refused(
        sign(Payer::Api(0), full[..full.len() - 1].to_vec()).await,
        "not an unsigned",
    );
    let mut typed = full.clone();
    typed[0] = 0x01;
    assert_refused(sign(Payer::Api(0), typed).await, "not an unsigned");

    // Creations: never by an API payer, and only the committed contracts by the admin.
    let account_config = artifacts::account_config_bytecode().to_vec();
    assert_refused(
        sign(
            Payer::Api(0),
            preimage(&eip1559(None, 0, account_config.clone(), 0)),
        )
        .await,
        "only the admin payer creates",
    );
    assert_refused(
        sign(
            Payer::Admin,
            preimage(&eip1559(None, 0, vec![0x60, 0x00, 0x60, 0x00, 0xf3], 0)),
        )
        .await,
        "only the committed",
    );
    let mut with_args = account_config.clone();
    with_args.extend_from_slice(&[0; 32]);
    assert_refused(
        sign(Payer::Admin, preimage(&eip1559(None, 0, with_args, 0))).await,
        "only the committed",
    );
    assert_refused(
        sign(
            Payer::Admin,
            preimage(&eip1559(None, 1, account_config.clone(), 0)),
        )
        .await,
        "never transfer value",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contracts_the_admin_payer_creates_become_callable_and_stay_so() {
    use chain_contracts::IAppGovernance;
    let env = Env::new();
    let admin;
    let account_config;
    let governance;
    {
        let ks = env.start();
        let client = KeyClient::connect(&ks.socket).await.unwrap();
        admin = client.payer_address(Payer::Admin).await.unwrap();
        let admin_alloy = alloy::primitives::Address::from(admin.0);
        account_config = admin_alloy.create(10).0.0;
        governance = admin_alloy.create(11).0.0;

        // Before its creation is signed, the future address is nobody's contract.
        let call = eip1559(Some(account_config), 0, vec![1], 0);
        assert_refused(
            client
                .payer_sign_transaction(Payer::Api(0), &preimage(&call))
                .await,
            "not a contract",
        );
        let create_ac = eip1559(None, 0, artifacts::account_config_bytecode().to_vec(), 10);
        client
            .payer_sign_transaction(Payer::Admin, &preimage(&create_ac))
            .await
            .unwrap();
        // Signing the same creation again (a re-broadcast or repricing) is fine; another
        // contract for the same nonce is not.
        client
            .payer_sign_transaction(Payer::Admin, &preimage(&create_ac))
            .await
            .unwrap();
        let clash = eip1559(None, 0, artifacts::app_governance_bytecode().to_vec(), 10);
        assert_refused(
            client
                .payer_sign_transaction(Payer::Admin, &preimage(&clash))
                .await,
            "already signed for this nonce",
        );
        client
            .payer_sign_transaction(Payer::Api(0), &preimage(&call))
            .await
            .unwrap();

        let create_gov = eip1559(None, 0, artifacts::app_governance_bytecode().to_vec(), 11);
        client
            .payer_sign_transaction(Payer::Admin, &preimage(&create_gov))
            .await
            .unwrap();
        // The governance contract: handed on by the admin right after deploying it, and
        // never asked to allow a compose hash.
        let hand_on = IAppGovernance::transferOwnershipCall {
            newOwner: alloy::primitives::Address::repeat_byte(0x5a),
        }
        .abi_encode();
        client
            .payer_sign_transaction(
                Payer::Admin,
                &preimage(&eip1559(Some(governance), 0, hand_on.clone(), 14)),
            )
            .await
            .unwrap();
        assert_refused(
            client
                .payer_sign_transaction(
                    Payer::Api(0),
                    &preimage(&eip1559(Some(governance), 0, hand_on.clone(), 14)),
                )
                .await,
            "governance",
        );
        assert_refused(
            client
                .payer_sign_transaction(
                    Payer::Admin,
                    &preimage(&eip1559(Some(governance), 0, hand_on.clone(), 100)),
                )
                .await,
            "right after deploying",
        );
        let allow = IAppGovernance::addComposeHashCall {
            composeHash: alloy::primitives::B256::repeat_byte(0x66),
        }
        .abi_encode();
        assert_refused(
            client
                .payer_sign_transaction(
                    Payer::Admin,
                    &preimage(&eip1559(Some(governance), 0, allow, 12)),
                )
                .await,
            "governance",
        );
        assert!(ks.terminate());
    }

    // After a restart the created contract is still callable (the record is on disk)...
    {
        let ks = env.start();
        let client = KeyClient::connect(&ks.socket).await.unwrap();
        let call = eip1559(Some(account_config), 0, vec![2], 1);
        client
            .payer_sign_transaction(Payer::Api(0), &preimage(&call))
            .await
            .unwrap();
        assert!(ks.terminate());
    }

    // ...but a record that was edited (an address added by hand) is ignored entirely.
    let file = env.state_dir.join("payer-contracts.json");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(&hex::encode(account_config)), "{text}");
    std::fs::write(
        &file,
        text.replace(&hex::encode(account_config), &hex::encode(STRANGER)),
    )
    .unwrap();
    let ks = env.start();
    let client = KeyClient::connect(&ks.socket).await.unwrap();
    for to in [account_config, STRANGER] {
        assert_refused(
            client
                .payer_sign_transaction(Payer::Api(0), &preimage(&eip1559(Some(to), 0, vec![3], 2)))
                .await,
            "not a contract",
        );
    }
    assert!(ks.log_text().contains("payer state file is damaged"));
}
