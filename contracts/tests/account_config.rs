//! AccountConfig against a real anvil: access control, account kinds and conversion, group
//! ids and membership, usage keys, actions, wallets, batching, and the exact event of every
//! write.

use alloy::{
    contract::{CallBuilder, CallDecoder},
    primitives::{Address, Bytes, U256, keccak256},
    providers::{DynProvider, Provider},
    rpc::types::{Filter, TransactionReceipt},
    sol_types::SolCall,
};
use chain_contracts::{
    IAccountConfig::{self, IAccountConfigErrors as E, IAccountConfigInstance, *},
    artifacts, deploy_account_config,
};
use test_support::chain::{
    ADMIN, Chain, OTHER_ADMIN, OWNER, PAYER, STRANGER, assert_no_events, only_event,
};

type Contract = IAccountConfigInstance<DynProvider>;

/// keccak256 of a label, as uint256: stands in for the hashes the appliance computes.
fn h(label: &str) -> U256 {
    U256::from_be_bytes(keccak256(label.as_bytes()).0)
}

/// The id `newChainSecuredAccount` gives the account of `admin`.
fn chain_secured_id(admin: Address) -> U256 {
    U256::from_be_bytes(keccak256(admin.as_slice()).0)
}

/// CHAIN_GROUP_ID_BASE = 2^62.
const BASE: U256 = U256::from_limbs([1 << 62, 0, 0, 0]);

/// A fresh chain with AccountConfig deployed by OWNER and PAYER allowed as API payer.
struct Fixture {
    chain: Chain,
    address: Address,
}

impl Fixture {
    async fn new() -> Self {
        let chain = Chain::start();
        let address = deploy_account_config(chain.provider(OWNER))
            .await
            .unwrap_or_else(|e| panic!("deploy: {e}"));
        let fixture = Self { chain, address };
        let owner = fixture.as_(OWNER);
        send(owner.setApiPayer(fixture.who(PAYER), true)).await;
        fixture
    }

    /// The contract as seen by (sending from) dev account `account`.
    fn as_(&self, account: usize) -> Contract {
        IAccountConfig::new(self.address, self.chain.provider(account).clone())
    }

    fn who(&self, account: usize) -> Address {
        self.chain.address(account)
    }

    /// A managed account created by the payer.
    async fn managed(&self, label: &str) -> U256 {
        let key = h(label);
        send(
            self.as_(PAYER)
                .newAccount(key, self.who(STRANGER), label.into(), String::new()),
        )
        .await;
        key
    }

    /// The chain-secured account of dev account `admin`.
    async fn chain_secured(&self, admin: usize) -> U256 {
        send(
            self.as_(admin)
                .newChainSecuredAccount("cs".into(), String::new()),
        )
        .await;
        chain_secured_id(self.who(admin))
    }

    fn event<T: alloy::sol_types::SolEvent>(&self, receipt: &TransactionReceipt) -> T {
        only_event(receipt, self.address)
    }
}

async fn send<P: Provider, D: CallDecoder>(call: CallBuilder<P, D>) -> TransactionReceipt {
    test_support::chain::send(call).await
}

async fn revert<P: Provider, D: CallDecoder>(call: CallBuilder<P, D>) -> E {
    test_support::chain::revert::<E, P, D>(call).await
}

fn not_authorized(api_key_hash: U256, caller: Address) -> E {
    E::NotAuthorized(NotAuthorized {
        apiKeyHash: api_key_hash,
        caller,
    })
}

fn ids(values: &[u64]) -> Vec<U256> {
    values.iter().map(|&v| U256::from(v)).collect()
}

fn permissions(seed: u64) -> UsageKeyPermissions {
    UsageKeyPermissions {
        canCreateGroups: seed % 2 == 1,
        canDeleteGroups: true,
        canCreatePkps: false,
        manageIpfsIdsInGroups: ids(&[seed, seed + 1]),
        addPkpToGroups: ids(&[0]),
        removePkpFromGroups: vec![],
        executeInGroups: ids(&[seed, 7, 8]),
    }
}

/// Every account write, as `caller`, must revert NotAuthorized(apiKeyHash, caller).
async fn assert_every_write_refused(contract: &Contract, key: U256, group: U256, caller: Address) {
    let want = not_authorized(key, caller);
    let s = String::new;
    let g = group;
    let checks: Vec<(&str, E)> = vec![
        (
            "setUsageApiKey",
            revert(contract.setUsageApiKey(
                key,
                h("uk-x"),
                U256::ZERO,
                U256::ZERO,
                s(),
                s(),
                permissions(1),
            ))
            .await,
        ),
        (
            "updateUsageApiKeyMetadata",
            revert(contract.updateUsageApiKeyMetadata(key, h("uk"), s(), s())).await,
        ),
        (
            "removeUsageApiKey",
            revert(contract.removeUsageApiKey(key, h("uk"))).await,
        ),
        (
            "addGroup(0)",
            revert(contract.addGroup(key, U256::ZERO, s(), s(), vec![], vec![])).await,
        ),
        (
            "addGroup(id)",
            revert(contract.addGroup(key, U256::from(999), s(), s(), vec![], vec![])).await,
        ),
        (
            "updateGroup",
            revert(contract.updateGroup(key, g, s(), s(), vec![], vec![])).await,
        ),
        ("removeGroup", revert(contract.removeGroup(key, g)).await),
        (
            "addPkpToGroup",
            revert(contract.addPkpToGroup(key, g, h("pkp-x"))).await,
        ),
        (
            "removePkpFromGroup",
            revert(contract.removePkpFromGroup(key, g, h("pkp"))).await,
        ),
        (
            "addActionToGroup",
            revert(contract.addActionToGroup(key, g, h("cid-x"))).await,
        ),
        (
            "removeActionFromGroup",
            revert(contract.removeActionFromGroup(key, g, h("cid"))).await,
        ),
        (
            "setActionMetadata",
            revert(contract.setActionMetadata(key, h("cid"), s(), s())).await,
        ),
        (
            "deleteAction",
            revert(contract.deleteAction(key, h("cid"))).await,
        ),
        (
            "registerWalletDerivation",
            revert(contract.registerWalletDerivation(
                key,
                Address::repeat_byte(0x77),
                U256::ONE,
                s(),
                s(),
            ))
            .await,
        ),
    ];
    for (name, got) in checks {
        assert_eq!(got, want, "{name} by {caller}");
    }
}

/// A derivation path `admin` may register for its unmanaged account: the admin's address
/// in the top 160 bits, `n` below.
fn owned_path(admin: Address, n: u64) -> U256 {
    (U256::from_be_slice(admin.as_slice()) << 96) | U256::from(n)
}

/// Gives the account a usage key "uk", a group with pkp "pkp" and cid "cid", an action "cid"
/// and a wallet at `wallet_path`, written through `contract`; returns the group id.
async fn populate(
    contract: &Contract,
    key: U256,
    explicit_group: Option<u64>,
    wallet_path: U256,
) -> U256 {
    send(contract.setUsageApiKey(
        key,
        h("uk"),
        U256::from(10),
        U256::from(20),
        "uk".into(),
        "".into(),
        permissions(3),
    ))
    .await;
    let receipt = send(contract.addGroup(
        key,
        U256::from(explicit_group.unwrap_or(0)),
        "g".into(),
        "".into(),
        vec![h("pkp")],
        vec![h("cid")],
    ))
    .await;
    let group = only_event::<GroupAdded>(&receipt, *contract.address()).groupId;
    send(contract.setActionMetadata(key, h("cid"), "action".into(), "".into())).await;
    send(contract.registerWalletDerivation(
        key,
        Address::repeat_byte(0x11),
        wallet_path,
        "w".into(),
        "".into(),
    ))
    .await;
    group
}

// ---- deployment and administration ------------------------------------------------------

#[tokio::test]
async fn deployment_sets_the_owner_and_matches_the_artifact() {
    let chain = Chain::start();
    let address = deploy_account_config(chain.provider(OWNER))
        .await
        .expect("deploy");
    let provider = chain.provider(OWNER);

    let code = provider.get_code_at(address).await.expect("getCode");
    assert_eq!(code, artifacts::account_config_deployed_bytecode());

    let logs = provider
        .get_logs(&Filter::new().address(address).from_block(0))
        .await
        .expect("logs");
    assert_eq!(logs.len(), 1);
    let event = logs[0]
        .log_decode::<OwnershipTransferred>()
        .expect("OwnershipTransferred")
        .inner
        .data;
    assert_eq!(
        event,
        OwnershipTransferred {
            previousOwner: Address::ZERO,
            newOwner: chain.address(OWNER)
        }
    );

    let contract = IAccountConfig::new(address, provider.clone());
    assert_eq!(contract.owner().call().await.unwrap(), chain.address(OWNER));
    assert_eq!(BASE, U256::from(1u64) << 62);
    assert_eq!(contract.CHAIN_GROUP_ID_BASE().call().await.unwrap(), BASE);
    assert_eq!(contract.nextChainGroupId().call().await.unwrap(), BASE);
    assert!(
        !contract
            .isApiPayer(chain.address(PAYER))
            .call()
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn administration_is_owner_only() {
    let f = Fixture::new().await;
    let (owner, stranger) = (f.as_(OWNER), f.as_(STRANGER));
    let payer_address = f.who(PAYER);

    // setApiPayer
    assert_eq!(
        revert(stranger.setApiPayer(f.who(STRANGER), true)).await,
        E::NotOwner(NotOwner {
            caller: f.who(STRANGER)
        })
    );
    assert_eq!(
        revert(f.as_(PAYER).setApiPayer(f.who(STRANGER), true)).await,
        E::NotOwner(NotOwner {
            caller: payer_address
        })
    );
    assert_eq!(
        revert(owner.setApiPayer(Address::ZERO, true)).await,
        E::ZeroAddress(ZeroAddress {})
    );
    assert!(owner.isApiPayer(payer_address).call().await.unwrap());
    assert_no_events(&send(owner.setApiPayer(payer_address, true)).await);
    let receipt = send(owner.setApiPayer(payer_address, false)).await;
    assert_eq!(
        f.event::<ApiPayerSet>(&receipt),
        ApiPayerSet {
            payer: payer_address,
            allowed: false
        }
    );
    assert!(!owner.isApiPayer(payer_address).call().await.unwrap());
    assert_no_events(&send(owner.setApiPayer(payer_address, false)).await);
    let receipt = send(owner.setApiPayer(payer_address, true)).await;
    assert_eq!(
        f.event::<ApiPayerSet>(&receipt),
        ApiPayerSet {
            payer: payer_address,
            allowed: true
        }
    );

    // transferOwnership
    assert_eq!(
        revert(stranger.transferOwnership(f.who(STRANGER))).await,
        E::NotOwner(NotOwner {
            caller: f.who(STRANGER)
        })
    );
    assert_eq!(
        revert(owner.transferOwnership(Address::ZERO)).await,
        E::ZeroAddress(ZeroAddress {})
    );
    assert_no_events(&send(owner.transferOwnership(f.who(OWNER))).await);
    let receipt = send(owner.transferOwnership(f.who(OTHER_ADMIN))).await;
    assert_eq!(
        f.event::<OwnershipTransferred>(&receipt),
        OwnershipTransferred {
            previousOwner: f.who(OWNER),
            newOwner: f.who(OTHER_ADMIN)
        }
    );
    assert_eq!(owner.owner().call().await.unwrap(), f.who(OTHER_ADMIN));
    assert_eq!(
        revert(owner.setApiPayer(f.who(STRANGER), true)).await,
        E::NotOwner(NotOwner {
            caller: f.who(OWNER)
        })
    );
    let receipt = send(f.as_(OTHER_ADMIN).setApiPayer(f.who(STRANGER), true)).await;
    assert_eq!(
        f.event::<ApiPayerSet>(&receipt),
        ApiPayerSet {
            payer: f.who(STRANGER),
            allowed: true
        }
    );
}

// ---- managed accounts -------------------------------------------------------------------

#[tokio::test]
async fn managed_accounts_are_created_by_payers_and_the_owner() {
    let f = Fixture::new().await;
    let key = h("account key");
    let admin = f.who(ADMIN);

    assert_eq!(
        revert(
            f.as_(STRANGER)
                .newAccount(key, admin, "n".into(), "d".into())
        )
        .await,
        not_authorized(key, f.who(STRANGER))
    );
    let receipt = send(
        f.as_(PAYER)
            .newAccount(key, admin, "name".into(), "desc".into()),
    )
    .await;
    assert_eq!(
        f.event::<AccountCreated>(&receipt),
        AccountCreated {
            apiKeyHash: key,
            admin,
            managed: true,
            name: "name".into(),
            description: "desc".into()
        }
    );
    let account = f.as_(STRANGER).getAccount(key).call().await.unwrap();
    assert!(account.exists && account.managed);
    assert_eq!(
        (
            account.admin,
            account.name.as_str(),
            account.description.as_str()
        ),
        (admin, "name", "desc")
    );

    assert_eq!(
        revert(
            f.as_(PAYER)
                .newAccount(key, admin, "again".into(), "".into())
        )
        .await,
        E::AccountExists(AccountExists { apiKeyHash: key })
    );
    assert_eq!(
        revert(
            f.as_(OWNER)
                .newAccount(U256::ZERO, admin, "zero".into(), "".into())
        )
        .await,
        E::AccountExists(AccountExists {
            apiKeyHash: U256::ZERO
        })
    );
    // The owner may create managed accounts too.
    let receipt = send(
        f.as_(OWNER)
            .newAccount(h("by owner"), Address::ZERO, "".into(), "".into()),
    )
    .await;
    assert!(f.event::<AccountCreated>(&receipt).managed);

    let missing = f
        .as_(STRANGER)
        .getAccount(h("missing"))
        .call()
        .await
        .unwrap();
    assert!(!missing.exists && !missing.managed && missing.admin == Address::ZERO);
}

#[tokio::test]
async fn managed_accounts_are_written_only_by_payers_and_the_owner() {
    let f = Fixture::new().await;
    let key = f.managed("managed").await;
    let group = populate(&f.as_(PAYER), key, Some(42), U256::from(5)).await;
    assert_eq!(group, U256::from(42));

    // Neither a stranger nor the account's own admin wallet may write a managed account.
    assert_every_write_refused(&f.as_(STRANGER), key, group, f.who(STRANGER)).await;
    send(
        f.as_(PAYER)
            .newAccount(h("with admin"), f.who(ADMIN), "".into(), "".into()),
    )
    .await;
    assert_every_write_refused(&f.as_(ADMIN), h("with admin"), group, f.who(ADMIN)).await;

    // The owner may.
    let receipt = send(f.as_(OWNER).addPkpToGroup(key, group, h("owner's pkp"))).await;
    assert_eq!(
        f.event::<PkpAddedToGroup>(&receipt),
        PkpAddedToGroup {
            apiKeyHash: key,
            groupId: group,
            pkpId: h("owner's pkp")
        }
    );

    // A revoked payer may not.
    send(f.as_(OWNER).setApiPayer(f.who(PAYER), false)).await;
    assert_every_write_refused(&f.as_(PAYER), key, group, f.who(PAYER)).await;
    assert_eq!(
        revert(
            f.as_(PAYER)
                .newAccount(h("late"), Address::ZERO, "".into(), "".into())
        )
        .await,
        not_authorized(h("late"), f.who(PAYER))
    );
}

#[tokio::test]
async fn writes_to_a_missing_account_revert_unknown_account() {
    let f = Fixture::new().await;
    let payer = f.as_(PAYER);
    let missing = h("missing");
    let want = E::UnknownAccount(UnknownAccount {
        apiKeyHash: missing,
    });
    assert_eq!(
        revert(payer.addGroup(missing, U256::ZERO, "".into(), "".into(), vec![], vec![])).await,
        want
    );
    assert_eq!(
        revert(payer.setActionMetadata(missing, h("cid"), "".into(), "".into())).await,
        want
    );
    assert_eq!(
        revert(payer.setUsageApiKey(
            missing,
            h("uk"),
            U256::ZERO,
            U256::ZERO,
            "".into(),
            "".into(),
            permissions(0)
        ))
        .await,
        want
    );
    assert_eq!(
        revert(payer.convertToChainSecuredAccount(missing, f.who(ADMIN))).await,
        want
    );
}

// ---- chain-secured accounts -------------------------------------------------------------

#[tokio::test]
async fn chain_secured_accounts_are_keyed_by_their_admin_and_written_only_by_it() {
    let f = Fixture::new().await;
    let admin = f.as_(ADMIN);
    let key = chain_secured_id(f.who(ADMIN));

    assert_eq!(
        admin
            .newChainSecuredAccount("mine".into(), "".into())
            .call()
            .await
            .unwrap(),
        key
    );
    let receipt = send(admin.newChainSecuredAccount("mine".into(), "d".into())).await;
    assert_eq!(
        f.event::<AccountCreated>(&receipt),
        AccountCreated {
            apiKeyHash: key,
            admin: f.who(ADMIN),
            managed: false,
            name: "mine".into(),
            description: "d".into()
        }
    );
    let account = admin.getAccount(key).call().await.unwrap();
    assert!(account.exists && !account.managed);
    assert_eq!(account.admin, f.who(ADMIN));
    assert_eq!(
        revert(admin.newChainSecuredAccount("again".into(), "".into())).await,
        E::AccountExists(AccountExists { apiKeyHash: key })
    );
    // A payer cannot take the id either, and a managed account with it blocks creation.
    assert_eq!(
        revert(
            f.as_(PAYER)
                .newAccount(key, Address::ZERO, "".into(), "".into())
        )
        .await,
        E::AccountExists(AccountExists { apiKeyHash: key })
    );
    let squatted = chain_secured_id(f.who(OTHER_ADMIN));
    send(
        f.as_(PAYER)
            .newAccount(squatted, Address::ZERO, "".into(), "".into()),
    )
    .await;
    assert_eq!(
        revert(
            f.as_(OTHER_ADMIN)
                .newChainSecuredAccount("".into(), "".into())
        )
        .await,
        E::AccountExists(AccountExists {
            apiKeyHash: squatted
        })
    );

    // Only the admin writes; service-chosen group ids are refused.
    let group = populate(&admin, key, None, owned_path(f.who(ADMIN), 5)).await;
    assert_eq!(group, BASE);
    for who in [PAYER, OWNER, STRANGER, OTHER_ADMIN] {
        assert_every_write_refused(&f.as_(who), key, group, f.who(who)).await;
    }
    assert_eq!(
        revert(admin.addGroup(key, U256::from(7), "".into(), "".into(), vec![], vec![])).await,
        E::GroupIdNotAllowed(GroupIdNotAllowed {
            groupId: U256::from(7)
        })
    );
    let receipt = send(admin.removePkpFromGroup(key, group, h("pkp"))).await;
    assert_eq!(
        f.event::<PkpRemovedFromGroup>(&receipt),
        PkpRemovedFromGroup {
            apiKeyHash: key,
            groupId: group,
            pkpId: h("pkp")
        }
    );
}

// ---- conversion -------------------------------------------------------------------------

#[tokio::test]
async fn conversion_is_payer_or_owner_only_irreversible_and_keeps_state() {
    let f = Fixture::new().await;
    let key = f.managed("to convert").await;
    let payer = f.as_(PAYER);
    let group = populate(&payer, key, Some(100), U256::from(5)).await;
    let chain_group = populate_chain_group(&payer, key).await;
    let new_admin = f.who(ADMIN);

    for who in [STRANGER, ADMIN] {
        assert_eq!(
            revert(f.as_(who).convertToChainSecuredAccount(key, new_admin)).await,
            not_authorized(key, f.who(who))
        );
    }
    assert_eq!(
        revert(payer.convertToChainSecuredAccount(key, Address::ZERO)).await,
        E::ZeroAddress(ZeroAddress {})
    );
    let before_key = payer.getUsageApiKey(h("uk")).call().await.unwrap();
    let before_group = payer.getGroup(group).call().await.unwrap();

    let receipt = send(payer.convertToChainSecuredAccount(key, new_admin)).await;
    assert_eq!(
        f.event::<AccountConverted>(&receipt),
        AccountConverted {
            apiKeyHash: key,
            newAdmin: new_admin
        }
    );
    let account = payer.getAccount(key).call().await.unwrap();
    assert!(account.exists && !account.managed);
    assert_eq!(
        (account.admin, account.name.as_str()),
        (new_admin, "to convert")
    );

    // Irreversible: no second conversion, by anyone.
    for who in [PAYER, OWNER] {
        assert_eq!(
            revert(
                f.as_(who)
                    .convertToChainSecuredAccount(key, f.who(OTHER_ADMIN))
            )
            .await,
            E::NotManaged(NotManaged { apiKeyHash: key })
        );
    }
    let chain_secured = f.chain_secured(OTHER_ADMIN).await;
    assert_eq!(
        revert(
            f.as_(OWNER)
                .convertToChainSecuredAccount(chain_secured, new_admin)
        )
        .await,
        E::NotManaged(NotManaged {
            apiKeyHash: chain_secured
        })
    );

    // State is preserved.
    assert_eq!(
        payer.getUsageApiKey(h("uk")).call().await.unwrap(),
        before_key
    );
    assert_eq!(payer.getGroup(group).call().await.unwrap(), before_group);
    assert_eq!(
        payer.getGroup(chain_group).call().await.unwrap().apiKeyHash,
        key
    );
    assert!(payer.getAction(key, h("cid")).call().await.unwrap().exists);
    assert_eq!(
        payer
            .getWallet(Address::repeat_byte(0x11))
            .call()
            .await
            .unwrap()
            .apiKeyHash,
        key
    );

    // The payer and the owner lost write access; the new admin has it.
    for who in [PAYER, OWNER, STRANGER] {
        assert_every_write_refused(&f.as_(who), key, group, f.who(who)).await;
    }
    let admin = f.as_(ADMIN);
    let receipt = send(admin.addPkpToGroup(key, group, h("new pkp"))).await;
    assert_eq!(
        f.event::<PkpAddedToGroup>(&receipt),
        PkpAddedToGroup {
            apiKeyHash: key,
            groupId: group,
            pkpId: h("new pkp")
        }
    );
    let receipt =
        send(admin.updateUsageApiKeyMetadata(key, h("uk"), "renamed".into(), "".into())).await;
    assert_eq!(
        f.event::<UsageApiKeyMetadataUpdated>(&receipt),
        UsageApiKeyMetadataUpdated {
            apiKeyHash: key,
            usageKeyHash: h("uk"),
            name: "renamed".into(),
            description: "".into()
        }
    );
    // Service-chosen group ids are gone with the managed mode; contract-assigned ids remain.
    assert_eq!(
        revert(admin.addGroup(key, U256::from(101), "".into(), "".into(), vec![], vec![])).await,
        E::GroupIdNotAllowed(GroupIdNotAllowed {
            groupId: U256::from(101)
        })
    );
    let receipt = send(admin.addGroup(key, U256::ZERO, "".into(), "".into(), vec![], vec![])).await;
    assert_eq!(
        f.event::<GroupAdded>(&receipt).groupId,
        chain_group + U256::ONE
    );
}

async fn populate_chain_group(contract: &Contract, key: U256) -> U256 {
    let receipt =
        send(contract.addGroup(key, U256::ZERO, "chain".into(), "".into(), vec![], vec![])).await;
    only_event::<GroupAdded>(&receipt, *contract.address()).groupId
}

// ---- groups -----------------------------------------------------------------------------

#[tokio::test]
async fn group_ids_are_assigned_from_the_base_or_chosen_below_it_and_never_reused() {
    let f = Fixture::new().await;
    let payer = f.as_(PAYER);
    let key = f.managed("groups").await;
    let other = f.managed("other").await;

    // Contract-assigned ids count up from 2^62.
    for n in 0..3u64 {
        let receipt =
            send(payer.addGroup(key, U256::ZERO, format!("g{n}"), "".into(), vec![], vec![])).await;
        assert_eq!(
            f.event::<GroupAdded>(&receipt).groupId,
            BASE + U256::from(n)
        );
    }
    assert_eq!(
        payer.nextChainGroupId().call().await.unwrap(),
        BASE + U256::from(3)
    );

    // Service-chosen ids: nonzero, below the base, unused by any account.
    for bad in [BASE, BASE + U256::from(3), U256::MAX] {
        assert_eq!(
            revert(payer.addGroup(key, bad, "".into(), "".into(), vec![], vec![])).await,
            E::GroupIdNotAllowed(GroupIdNotAllowed { groupId: bad })
        );
    }
    let top = BASE - U256::ONE;
    let receipt = send(payer.addGroup(key, top, "top".into(), "".into(), vec![], vec![])).await;
    assert_eq!(f.event::<GroupAdded>(&receipt).groupId, top);
    let receipt =
        send(payer.addGroup(key, U256::from(5), "five".into(), "".into(), vec![], vec![])).await;
    assert_eq!(f.event::<GroupAdded>(&receipt).groupId, U256::from(5));
    for id in [U256::from(5), top] {
        for account in [key, other] {
            assert_eq!(
                revert(payer.addGroup(account, id, "".into(), "".into(), vec![], vec![])).await,
                E::GroupIdTaken(GroupIdTaken { groupId: id })
            );
        }
    }

    // A group belongs to its account.
    let five = U256::from(5);
    let unknown = E::UnknownGroup(UnknownGroup { groupId: five });
    assert_eq!(
        revert(payer.updateGroup(other, five, "".into(), "".into(), vec![], vec![])).await,
        unknown
    );
    assert_eq!(revert(payer.removeGroup(other, five)).await, unknown);
    assert_eq!(
        revert(payer.addPkpToGroup(other, five, h("p"))).await,
        unknown
    );
    assert_eq!(
        revert(payer.removePkpFromGroup(other, five, h("p"))).await,
        unknown
    );
    assert_eq!(
        revert(payer.addActionToGroup(other, five, h("c"))).await,
        unknown
    );
    assert_eq!(
        revert(payer.removeActionFromGroup(other, five, h("c"))).await,
        unknown
    );
    assert_eq!(
        revert(payer.removeGroup(key, U256::from(6))).await,
        E::UnknownGroup(UnknownGroup {
            groupId: U256::from(6)
        })
    );

    // Removal: gone, and the id is never given out again.
    let receipt = send(payer.removeGroup(key, five)).await;
    assert_eq!(
        f.event::<GroupRemoved>(&receipt),
        GroupRemoved {
            apiKeyHash: key,
            groupId: five
        }
    );
    let gone = payer.getGroup(five).call().await.unwrap();
    assert_eq!(gone.apiKeyHash, U256::ZERO);
    assert!(gone.name.is_empty() && gone.pkpIds.is_empty() && gone.cidHashes.is_empty());
    assert_eq!(revert(payer.removeGroup(key, five)).await, unknown);
    assert_eq!(
        revert(payer.addPkpToGroup(key, five, h("p"))).await,
        unknown
    );
    for account in [key, other] {
        assert_eq!(
            revert(payer.addGroup(account, five, "".into(), "".into(), vec![], vec![])).await,
            E::GroupIdTaken(GroupIdTaken { groupId: five })
        );
    }
    send(payer.removeGroup(key, BASE + U256::from(2))).await;
    let receipt = send(payer.addGroup(key, U256::ZERO, "".into(), "".into(), vec![], vec![])).await;
    assert_eq!(
        f.event::<GroupAdded>(&receipt).groupId,
        BASE + U256::from(3)
    );
}

#[tokio::test]
async fn group_lists_are_sets_with_idempotent_membership_writes() {
    let f = Fixture::new().await;
    let payer = f.as_(PAYER);
    let key = f.managed("members").await;
    let g = U256::from(9);

    // Duplicates in the given lists are kept once; the event carries the lists as stored.
    let receipt = send(payer.addGroup(
        key,
        g,
        "n".into(),
        "d".into(),
        ids(&[1, 2, 1, 0]),
        ids(&[5, 5]),
    ))
    .await;
    assert_eq!(
        f.event::<GroupAdded>(&receipt),
        GroupAdded {
            apiKeyHash: key,
            groupId: g,
            name: "n".into(),
            description: "d".into(),
            pkpIds: ids(&[1, 2, 0]),
            cidHashes: ids(&[5]),
        }
    );

    // Adding a member again, or removing a non-member: success, no event, no change.
    assert_no_events(&send(payer.addPkpToGroup(key, g, U256::from(2))).await);
    assert_no_events(&send(payer.removePkpFromGroup(key, g, U256::from(3))).await);
    assert_no_events(&send(payer.addActionToGroup(key, g, U256::from(5))).await);
    assert_no_events(&send(payer.removeActionFromGroup(key, g, U256::from(6))).await);
    let group = payer.getGroup(g).call().await.unwrap();
    assert_eq!(
        (group.pkpIds, group.cidHashes),
        (ids(&[1, 2, 0]), ids(&[5]))
    );

    let receipt = send(payer.addPkpToGroup(key, g, U256::from(3))).await;
    assert_eq!(
        f.event::<PkpAddedToGroup>(&receipt),
        PkpAddedToGroup {
            apiKeyHash: key,
            groupId: g,
            pkpId: U256::from(3)
        }
    );
    // Removal moves the last member into the freed place.
    let receipt = send(payer.removePkpFromGroup(key, g, U256::from(1))).await;
    assert_eq!(
        f.event::<PkpRemovedFromGroup>(&receipt),
        PkpRemovedFromGroup {
            apiKeyHash: key,
            groupId: g,
            pkpId: U256::from(1)
        }
    );
    assert_eq!(
        payer.getGroup(g).call().await.unwrap().pkpIds,
        ids(&[3, 2, 0])
    );
    let receipt = send(payer.removePkpFromGroup(key, g, U256::from(0))).await;
    assert_eq!(f.event::<PkpRemovedFromGroup>(&receipt).pkpId, U256::ZERO);
    assert_eq!(payer.getGroup(g).call().await.unwrap().pkpIds, ids(&[3, 2]));

    let receipt = send(payer.addActionToGroup(key, g, U256::from(6))).await;
    assert_eq!(
        f.event::<ActionAddedToGroup>(&receipt),
        ActionAddedToGroup {
            apiKeyHash: key,
            groupId: g,
            cidHash: U256::from(6)
        }
    );
    let receipt = send(payer.removeActionFromGroup(key, g, U256::from(5))).await;
    assert_eq!(
        f.event::<ActionRemovedFromGroup>(&receipt),
        ActionRemovedFromGroup {
            apiKeyHash: key,
            groupId: g,
            cidHash: U256::from(5)
        }
    );
    assert_eq!(payer.getGroup(g).call().await.unwrap().cidHashes, ids(&[6]));

    // updateGroup replaces everything; former members are really gone.
    let receipt =
        send(payer.updateGroup(key, g, "n2".into(), "d2".into(), ids(&[2, 4, 4]), vec![])).await;
    assert_eq!(
        f.event::<GroupUpdated>(&receipt),
        GroupUpdated {
            apiKeyHash: key,
            groupId: g,
            name: "n2".into(),
            description: "d2".into(),
            pkpIds: ids(&[2, 4]),
            cidHashes: vec![],
        }
    );
    let group = payer.getGroup(g).call().await.unwrap();
    assert_eq!(
        (
            group.apiKeyHash,
            group.name.as_str(),
            group.description.as_str()
        ),
        (key, "n2", "d2")
    );
    assert_eq!((group.pkpIds, group.cidHashes), (ids(&[2, 4]), vec![]));
    assert_no_events(&send(payer.removePkpFromGroup(key, g, U256::from(3))).await);
    assert_no_events(&send(payer.removeActionFromGroup(key, g, U256::from(6))).await);
    let receipt = send(payer.addPkpToGroup(key, g, U256::from(3))).await;
    assert_eq!(f.event::<PkpAddedToGroup>(&receipt).pkpId, U256::from(3));
    assert_eq!(
        payer.getGroup(g).call().await.unwrap().pkpIds,
        ids(&[2, 4, 3])
    );
}

// ---- usage keys -------------------------------------------------------------------------

#[tokio::test]
async fn usage_keys_are_upserted_and_belong_to_one_account() {
    let f = Fixture::new().await;
    let payer = f.as_(PAYER);
    let key = f.managed("usage").await;
    let other = f.managed("other").await;
    let uk = h("usage key");

    let receipt = send(payer.setUsageApiKey(
        key,
        uk,
        U256::from(1_700_000_000u64),
        U256::from(500),
        "first".into(),
        "d".into(),
        permissions(3),
    ))
    .await;
    assert_eq!(
        f.event::<UsageApiKeySet>(&receipt),
        UsageApiKeySet {
            apiKeyHash: key,
            usageKeyHash: uk,
            expiration: U256::from(1_700_000_000u64),
            balance: U256::from(500),
            name: "first".into(),
            description: "d".into(),
            permissions: permissions(3),
        }
    );
    let stored = payer.getUsageApiKey(uk).call().await.unwrap();
    assert_eq!(stored.apiKeyHash, key);
    assert_eq!(
        (stored.expiration, stored.balance),
        (U256::from(1_700_000_000u64), U256::from(500))
    );
    assert_eq!(
        (stored.name.as_str(), stored.description.as_str()),
        ("first", "d")
    );
    assert_eq!(stored.permissions, permissions(3));

    // Full replace, including shorter permission lists.
    let narrower = UsageKeyPermissions {
        canCreateGroups: false,
        canDeleteGroups: false,
        canCreatePkps: true,
        manageIpfsIdsInGroups: vec![],
        addPkpToGroups: vec![],
        removePkpFromGroups: ids(&[9]),
        executeInGroups: ids(&[0]),
    };
    let receipt = send(payer.setUsageApiKey(
        key,
        uk,
        U256::ZERO,
        U256::from(1),
        "second".into(),
        "".into(),
        narrower.clone(),
    ))
    .await;
    assert_eq!(f.event::<UsageApiKeySet>(&receipt).permissions, narrower);
    let stored = payer.getUsageApiKey(uk).call().await.unwrap();
    assert_eq!(
        (stored.name.as_str(), stored.balance, stored.expiration),
        ("second", U256::from(1), U256::ZERO)
    );
    assert_eq!(stored.permissions, narrower);

    // Another account can neither take nor touch it.
    assert_eq!(
        revert(payer.setUsageApiKey(
            other,
            uk,
            U256::ZERO,
            U256::ZERO,
            "".into(),
            "".into(),
            permissions(1)
        ))
        .await,
        E::UsageKeyTaken(UsageKeyTaken { usageKeyHash: uk })
    );
    let unknown = E::UnknownUsageKey(UnknownUsageKey { usageKeyHash: uk });
    assert_eq!(
        revert(payer.updateUsageApiKeyMetadata(other, uk, "".into(), "".into())).await,
        unknown
    );
    assert_eq!(revert(payer.removeUsageApiKey(other, uk)).await, unknown);

    let receipt = send(payer.updateUsageApiKeyMetadata(key, uk, "third".into(), "d3".into())).await;
    assert_eq!(
        f.event::<UsageApiKeyMetadataUpdated>(&receipt),
        UsageApiKeyMetadataUpdated {
            apiKeyHash: key,
            usageKeyHash: uk,
            name: "third".into(),
            description: "d3".into()
        }
    );
    let stored = payer.getUsageApiKey(uk).call().await.unwrap();
    assert_eq!(
        (stored.name.as_str(), stored.description.as_str()),
        ("third", "d3")
    );
    assert_eq!(
        (stored.balance, stored.permissions),
        (U256::from(1), narrower)
    );

    let receipt = send(payer.removeUsageApiKey(key, uk)).await;
    assert_eq!(
        f.event::<UsageApiKeyRemoved>(&receipt),
        UsageApiKeyRemoved {
            apiKeyHash: key,
            usageKeyHash: uk
        }
    );
    let gone = payer.getUsageApiKey(uk).call().await.unwrap();
    assert_eq!((gone.apiKeyHash, gone.name.as_str()), (U256::ZERO, ""));
    assert_eq!(gone.permissions, UsageKeyPermissions::default());
    assert_eq!(revert(payer.removeUsageApiKey(key, uk)).await, unknown);
    assert_eq!(
        revert(payer.updateUsageApiKeyMetadata(key, uk, "".into(), "".into())).await,
        unknown
    );

    // A removed key's hash is free again.
    send(payer.setUsageApiKey(
        other,
        uk,
        U256::ZERO,
        U256::ZERO,
        "".into(),
        "".into(),
        permissions(1),
    ))
    .await;
    assert_eq!(
        payer.getUsageApiKey(uk).call().await.unwrap().apiKeyHash,
        other
    );
}

// ---- actions and wallets ----------------------------------------------------------------

#[tokio::test]
async fn action_metadata_is_per_account_and_deletable() {
    let f = Fixture::new().await;
    let payer = f.as_(PAYER);
    let key = f.managed("actions").await;
    let other = f.managed("other").await;
    let cid = h("QmCid");

    let receipt = send(payer.setActionMetadata(key, cid, "a".into(), "d".into())).await;
    assert_eq!(
        f.event::<ActionMetadataSet>(&receipt),
        ActionMetadataSet {
            apiKeyHash: key,
            cidHash: cid,
            name: "a".into(),
            description: "d".into()
        }
    );
    let receipt = send(payer.setActionMetadata(key, cid, "b".into(), "".into())).await;
    assert_eq!(f.event::<ActionMetadataSet>(&receipt).name, "b");
    let action = payer.getAction(key, cid).call().await.unwrap();
    assert!(action.exists);
    assert_eq!(
        (action.name.as_str(), action.description.as_str()),
        ("b", "")
    );
    assert!(!payer.getAction(other, cid).call().await.unwrap().exists);

    let unknown = E::UnknownAction(UnknownAction { cidHash: cid });
    assert_eq!(revert(payer.deleteAction(other, cid)).await, unknown);
    let receipt = send(payer.deleteAction(key, cid)).await;
    assert_eq!(
        f.event::<ActionDeleted>(&receipt),
        ActionDeleted {
            apiKeyHash: key,
            cidHash: cid
        }
    );
    let gone = payer.getAction(key, cid).call().await.unwrap();
    assert!(!gone.exists && gone.name.is_empty());
    assert_eq!(revert(payer.deleteAction(key, cid)).await, unknown);
}

#[tokio::test]
async fn a_wallet_is_registered_once_to_one_account() {
    let f = Fixture::new().await;
    let payer = f.as_(PAYER);
    let key = f.managed("wallets").await;
    let other = f.managed("other").await;
    let wallet = Address::repeat_byte(0xab);

    let receipt =
        send(payer.registerWalletDerivation(key, wallet, U256::from(77), "w".into(), "d".into()))
            .await;
    assert_eq!(
        f.event::<WalletRegistered>(&receipt),
        WalletRegistered {
            apiKeyHash: key,
            wallet,
            derivationPath: U256::from(77),
            name: "w".into(),
            description: "d".into()
        }
    );
    let stored = payer.getWallet(wallet).call().await.unwrap();
    assert_eq!(
        (stored.apiKeyHash, stored.derivationPath),
        (key, U256::from(77))
    );
    assert_eq!(
        (stored.name.as_str(), stored.description.as_str()),
        ("w", "d")
    );

    let taken = E::WalletTaken(WalletTaken { wallet });
    assert_eq!(
        revert(payer.registerWalletDerivation(other, wallet, U256::from(1), "".into(), "".into()))
            .await,
        taken
    );
    assert_eq!(
        revert(payer.registerWalletDerivation(key, wallet, U256::from(77), "w".into(), "d".into()))
            .await,
        taken
    );
    assert_eq!(
        revert(payer.registerWalletDerivation(key, Address::ZERO, U256::ONE, "".into(), "".into()))
            .await,
        E::ZeroAddress(ZeroAddress {})
    );
    assert_eq!(
        payer
            .getWallet(Address::repeat_byte(0xcd))
            .call()
            .await
            .unwrap()
            .apiKeyHash,
        U256::ZERO
    );
}

/// Front-running a wallet owner: another ChainSecured admin who copies the owner's pending
/// `registerWalletDerivation` is refused (the path carries the owner's address), and one
/// who copies a pending `setUsageApiKey` gets a record of its own that blocks nobody.
#[tokio::test]
async fn a_copied_registration_neither_takes_nor_blocks_the_owners() {
    let f = Fixture::new().await;
    let victim = f.as_(ADMIN);
    let attacker = f.as_(OTHER_ADMIN);
    let victim_key = f.chain_secured(ADMIN).await;
    let attacker_key = f.chain_secured(OTHER_ADMIN).await;

    // The wallet: the attacker's copy reverts, the owner's own call then succeeds.
    let wallet = Address::repeat_byte(0x5a);
    let path = owned_path(f.who(ADMIN), 0xfeed);
    assert_eq!(
        revert(attacker.registerWalletDerivation(
            attacker_key,
            wallet,
            path,
            "mine".into(),
            "".into()
        ))
        .await,
        E::DerivationPathNotOwned(DerivationPathNotOwned {
            derivationPath: path,
            admin: f.who(OTHER_ADMIN)
        })
    );
    // A path without any owner (the old random paths) is refused too.
    assert!(matches!(
        revert(attacker.registerWalletDerivation(
            attacker_key,
            wallet,
            U256::from(7),
            "".into(),
            "".into()
        ))
        .await,
        E::DerivationPathNotOwned(_)
    ));
    let receipt =
        send(victim.registerWalletDerivation(victim_key, wallet, path, "w".into(), "".into()))
            .await;
    assert_eq!(f.event::<WalletRegistered>(&receipt).apiKeyHash, victim_key);
    assert_eq!(
        victim.getWallet(wallet).call().await.unwrap().apiKeyHash,
        victim_key
    );
    // Positive control: the attacker registers a path of its own.
    let own = owned_path(f.who(OTHER_ADMIN), 1);
    send(attacker.registerWalletDerivation(
        attacker_key,
        Address::repeat_byte(0x5b),
        own,
        "".into(),
        "".into(),
    ))
    .await;
    // A managed account's writer (the service) is not bound by the rule.
    let managed = f.managed("managed").await;
    send(f.as_(PAYER).registerWalletDerivation(
        managed,
        Address::repeat_byte(0x5c),
        U256::from(3),
        "".into(),
        "".into(),
    ))
    .await;

    // The usage key: the attacker sets the copied hash first, the owner's call still
    // succeeds, and each account sees only its own record.
    let uk = h("minted usage key");
    fn set<'a>(
        contract: &'a Contract,
        account: U256,
        uk: U256,
        name: &str,
        seed: u64,
    ) -> CallBuilder<&'a DynProvider, std::marker::PhantomData<setUsageApiKeyCall>> {
        contract.setUsageApiKey(
            account,
            uk,
            U256::ZERO,
            U256::ZERO,
            name.into(),
            "".into(),
            permissions(seed),
        )
    }
    let receipt = send(set(&attacker, attacker_key, uk, "copied", 1)).await;
    assert_eq!(f.event::<UsageApiKeySet>(&receipt).apiKeyHash, attacker_key);
    let receipt = send(set(&victim, victim_key, uk, "owner", 2)).await;
    assert_eq!(
        f.event::<UsageApiKeySet>(&receipt),
        UsageApiKeySet {
            apiKeyHash: victim_key,
            usageKeyHash: uk,
            expiration: U256::ZERO,
            balance: U256::ZERO,
            name: "owner".into(),
            description: "".into(),
            permissions: permissions(2),
        }
    );
    let seen = |account: U256| {
        let victim = victim.clone();
        async move {
            victim
                .getAccountUsageApiKey(account, uk)
                .call()
                .await
                .unwrap()
                .name
        }
    };
    assert_eq!(seen(victim_key).await, "owner");
    assert_eq!(seen(attacker_key).await, "copied");
    // The attacker can change and remove only its own record.
    send(attacker.removeUsageApiKey(attacker_key, uk)).await;
    assert_eq!(seen(attacker_key).await, "");
    assert_eq!(seen(victim_key).await, "owner");
    send(victim.updateUsageApiKeyMetadata(victim_key, uk, "renamed".into(), "".into())).await;
    assert_eq!(seen(victim_key).await, "renamed");
    send(victim.removeUsageApiKey(victim_key, uk)).await;
    assert_eq!(seen(victim_key).await, "");
    assert_eq!(
        revert(victim.removeUsageApiKey(victim_key, uk)).await,
        E::UnknownUsageKey(UnknownUsageKey { usageKeyHash: uk })
    );

    // A hash a managed account holds stays taken for everyone else.
    let managed_uk = h("service key");
    send(f.as_(PAYER).setUsageApiKey(
        managed,
        managed_uk,
        U256::ZERO,
        U256::ZERO,
        "".into(),
        "".into(),
        permissions(1),
    ))
    .await;
    assert_eq!(
        revert(attacker.setUsageApiKey(
            attacker_key,
            managed_uk,
            U256::ZERO,
            U256::ZERO,
            "".into(),
            "".into(),
            permissions(1)
        ))
        .await,
        E::UsageKeyTaken(UsageKeyTaken {
            usageKeyHash: managed_uk
        })
    );
}

// ---- batching ---------------------------------------------------------------------------

#[tokio::test]
async fn multicall_applies_a_batch_entirely_or_not_at_all() {
    let f = Fixture::new().await;
    let payer = f.as_(PAYER);
    let key = h("batched");
    let create: Bytes = IAccountConfig::newAccountCall {
        apiKeyHash: key,
        admin: f.who(ADMIN),
        name: "b".into(),
        description: "".into(),
    }
    .abi_encode()
    .into();
    let add_group: Bytes = IAccountConfig::addGroupCall {
        apiKeyHash: key,
        groupId: U256::ZERO,
        name: "g".into(),
        description: "".into(),
        pkpIds: vec![],
        cidHashes: vec![],
    }
    .abi_encode()
    .into();
    let bad_group: Bytes = IAccountConfig::addGroupCall {
        apiKeyHash: key,
        groupId: BASE,
        name: "".into(),
        description: "".into(),
        pkpIds: vec![],
        cidHashes: vec![],
    }
    .abi_encode()
    .into();

    // The failing call's error comes back as is, and nothing of the batch is applied.
    assert_eq!(
        revert(payer.multicall(vec![create.clone(), add_group.clone(), bad_group])).await,
        E::GroupIdNotAllowed(GroupIdNotAllowed { groupId: BASE })
    );
    assert!(!payer.getAccount(key).call().await.unwrap().exists);
    // Each call runs as the batch's sender.
    assert_eq!(
        revert(f.as_(STRANGER).multicall(vec![create.clone()])).await,
        not_authorized(key, f.who(STRANGER))
    );

    let results = payer
        .multicall(vec![create.clone(), add_group.clone()])
        .call()
        .await
        .unwrap();
    assert_eq!(results.len(), 2);
    assert!(results[0].is_empty());
    assert_eq!(U256::from_be_slice(&results[1]), BASE);
    let receipt = send(payer.multicall(vec![create, add_group])).await;
    let logs = receipt.inner.logs();
    assert_eq!(logs.len(), 2);
    assert!(logs.iter().all(|log| log.address() == f.address));
    assert_eq!(
        logs[0]
            .log_decode::<AccountCreated>()
            .expect("AccountCreated")
            .inner
            .data,
        AccountCreated {
            apiKeyHash: key,
            admin: f.who(ADMIN),
            managed: true,
            name: "b".into(),
            description: "".into()
        }
    );
    assert_eq!(
        logs[1]
            .log_decode::<GroupAdded>()
            .expect("GroupAdded")
            .inner
            .data,
        GroupAdded {
            apiKeyHash: key,
            groupId: BASE,
            name: "g".into(),
            description: "".into(),
            pkpIds: vec![],
            cidHashes: vec![],
        }
    );
}

// ---- gas --------------------------------------------------------------------------------

/// Gas of each write on anvil (printed; run with `--nocapture` to see the table).
#[tokio::test]
async fn gas_used_by_each_write() {
    let f = Fixture::new().await;
    let payer = f.as_(PAYER);
    let owner = f.as_(OWNER);
    let key = h("gas");
    let mut rows: Vec<(&str, u64)> = Vec::new();
    let three = ids(&[101, 102, 103]);

    rows.push((
        "setApiPayer",
        send(owner.setApiPayer(f.who(STRANGER), true))
            .await
            .gas_used,
    ));
    rows.push((
        "newAccount",
        send(payer.newAccount(key, f.who(ADMIN), "account".into(), "".into()))
            .await
            .gas_used,
    ));
    rows.push((
        "newChainSecuredAccount",
        send(
            f.as_(OTHER_ADMIN)
                .newChainSecuredAccount("account".into(), "".into()),
        )
        .await
        .gas_used,
    ));
    rows.push((
        "setUsageApiKey (new, 6 list entries)",
        send(payer.setUsageApiKey(
            key,
            h("uk"),
            U256::ZERO,
            U256::ZERO,
            "key".into(),
            "".into(),
            permissions(3),
        ))
        .await
        .gas_used,
    ));
    rows.push((
        "setUsageApiKey (replace)",
        send(payer.setUsageApiKey(
            key,
            h("uk"),
            U256::ONE,
            U256::ONE,
            "key".into(),
            "".into(),
            permissions(5),
        ))
        .await
        .gas_used,
    ));
    rows.push((
        "updateUsageApiKeyMetadata",
        send(payer.updateUsageApiKeyMetadata(key, h("uk"), "renamed".into(), "".into()))
            .await
            .gas_used,
    ));
    rows.push((
        "removeUsageApiKey",
        send(payer.removeUsageApiKey(key, h("uk"))).await.gas_used,
    ));
    rows.push((
        "addGroup (assigned id, empty)",
        send(payer.addGroup(key, U256::ZERO, "group".into(), "".into(), vec![], vec![]))
            .await
            .gas_used,
    ));
    rows.push((
        "addGroup (chosen id, 3 pkps + 1 cid)",
        send(payer.addGroup(
            key,
            U256::from(1),
            "group".into(),
            "".into(),
            three.clone(),
            ids(&[7]),
        ))
        .await
        .gas_used,
    ));
    rows.push((
        "updateGroup (3 pkps + 1 cid -> 3 + 1)",
        send(payer.updateGroup(
            key,
            U256::from(1),
            "group".into(),
            "".into(),
            ids(&[104, 105, 106]),
            ids(&[8]),
        ))
        .await
        .gas_used,
    ));
    rows.push((
        "addPkpToGroup",
        send(payer.addPkpToGroup(key, U256::from(1), U256::from(200)))
            .await
            .gas_used,
    ));
    rows.push((
        "addPkpToGroup (already a member)",
        send(payer.addPkpToGroup(key, U256::from(1), U256::from(200)))
            .await
            .gas_used,
    ));
    rows.push((
        "removePkpFromGroup",
        send(payer.removePkpFromGroup(key, U256::from(1), U256::from(104)))
            .await
            .gas_used,
    ));
    rows.push((
        "addActionToGroup",
        send(payer.addActionToGroup(key, U256::from(1), U256::from(9)))
            .await
            .gas_used,
    ));
    rows.push((
        "removeActionFromGroup",
        send(payer.removeActionFromGroup(key, U256::from(1), U256::from(8)))
            .await
            .gas_used,
    ));
    rows.push((
        "removeGroup (3 pkps + 1 cid)",
        send(payer.removeGroup(key, U256::from(1))).await.gas_used,
    ));
    rows.push((
        "setActionMetadata",
        send(payer.setActionMetadata(key, h("cid"), "action".into(), "".into()))
            .await
            .gas_used,
    ));
    rows.push((
        "deleteAction",
        send(payer.deleteAction(key, h("cid"))).await.gas_used,
    ));
    rows.push((
        "registerWalletDerivation",
        send(payer.registerWalletDerivation(
            key,
            Address::repeat_byte(1),
            U256::ONE,
            "wallet".into(),
            "".into(),
        ))
        .await
        .gas_used,
    ));
    let batch: Vec<Bytes> = (0..3u64)
        .map(|n| {
            IAccountConfig::addPkpToGroupCall {
                apiKeyHash: key,
                groupId: BASE,
                pkpId: U256::from(300 + n),
            }
            .abi_encode()
            .into()
        })
        .collect();
    rows.push((
        "multicall (3 x addPkpToGroup)",
        send(payer.multicall(batch)).await.gas_used,
    ));
    rows.push((
        "convertToChainSecuredAccount",
        send(payer.convertToChainSecuredAccount(key, f.who(ADMIN)))
            .await
            .gas_used,
    ));
    rows.push((
        "transferOwnership",
        send(owner.transferOwnership(f.who(STRANGER)))
            .await
            .gas_used,
    ));

    let mut table = String::from("| write | gas used |\n|---|---:|\n");
    for (name, gas) in &rows {
        table.push_str(&format!("| {name} | {gas} |\n"));
    }
    eprintln!("{table}");
    assert!(
        rows.iter()
            .all(|(_, gas)| *gas > 21_000 && *gas < 1_000_000)
    );
}
