// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title AccountConfig: the on-chain mirror of the appliance's administrative state.
/// @notice Accounts are identified by `apiKeyHash`. A managed (API mode) account is written
/// only by the service's API payers (or the owner); an unmanaged (ChainSecured) account only
/// by its admin wallet. Every state change emits exactly one event.
///
/// Identifier conventions (all hashes are keccak256, as uint256):
/// * apiKeyHash   = keccak256(32 key bytes) for API mode; keccak256(abi.encodePacked(admin))
///                  for accounts created by `newChainSecuredAccount`.
/// * usageKeyHash = keccak256(32 usage key bytes).
/// * pkpId        = keccak256(64-byte uncompressed public key without the 0x04 prefix).
/// * cidHash      = keccak256(bytes(ipfsCid)).
/// * groupId      : unique across the contract, never reused. Ids below CHAIN_GROUP_ID_BASE
///                  are chosen by the service for managed accounts; ids from
///                  CHAIN_GROUP_ID_BASE up are assigned by the contract (groupId = 0 in
///                  `addGroup`), which is the only way for an unmanaged account.
/// * A pkpId or cidHash of 0 in a group's lists permits all wallets / all actions; a groupId
///   of 0 in a usage key's permission lists means all of the account's groups.
/// * derivationPath of a wallet an unmanaged account registers: its top 160 bits are the
///   account's admin address (`derivationPath >> 96 == uint160(admin)`), so a path the
///   service minted for one wallet owner cannot be registered by another account.
interface IAccountConfig {
    struct UsageKeyPermissions {
        bool canCreateGroups;
        bool canDeleteGroups;
        bool canCreatePkps;
        uint256[] manageIpfsIdsInGroups;
        uint256[] addPkpToGroups;
        uint256[] removePkpFromGroups;
        uint256[] executeInGroups;
    }

    // ---- events -------------------------------------------------------------------------
    event AccountCreated(
        uint256 indexed apiKeyHash, address indexed admin, bool managed, string name, string description
    );
    event AccountConverted(uint256 indexed apiKeyHash, address indexed newAdmin);

    event UsageApiKeySet(
        uint256 indexed apiKeyHash,
        uint256 indexed usageKeyHash,
        uint256 expiration,
        uint256 balance,
        string name,
        string description,
        UsageKeyPermissions permissions
    );
    event UsageApiKeyMetadataUpdated(
        uint256 indexed apiKeyHash, uint256 indexed usageKeyHash, string name, string description
    );
    event UsageApiKeyRemoved(uint256 indexed apiKeyHash, uint256 indexed usageKeyHash);

    event GroupAdded(
        uint256 indexed apiKeyHash,
        uint256 indexed groupId,
        string name,
        string description,
        uint256[] pkpIds,
        uint256[] cidHashes
    );
    event GroupUpdated(
        uint256 indexed apiKeyHash,
        uint256 indexed groupId,
        string name,
        string description,
        uint256[] pkpIds,
        uint256[] cidHashes
    );
    event GroupRemoved(uint256 indexed apiKeyHash, uint256 indexed groupId);
    event PkpAddedToGroup(uint256 indexed apiKeyHash, uint256 indexed groupId, uint256 pkpId);
    event PkpRemovedFromGroup(uint256 indexed apiKeyHash, uint256 indexed groupId, uint256 pkpId);
    event ActionAddedToGroup(uint256 indexed apiKeyHash, uint256 indexed groupId, uint256 cidHash);
    event ActionRemovedFromGroup(uint256 indexed apiKeyHash, uint256 indexed groupId, uint256 cidHash);

    event ActionMetadataSet(uint256 indexed apiKeyHash, uint256 indexed cidHash, string name, string description);
    event ActionDeleted(uint256 indexed apiKeyHash, uint256 indexed cidHash);

    event WalletRegistered(
        uint256 indexed apiKeyHash,
        address indexed wallet,
        uint256 derivationPath,
        string name,
        string description
    );

    event ApiPayerSet(address indexed payer, bool allowed);
    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);

    // ---- errors -------------------------------------------------------------------------
    error NotOwner(address caller);
    error NotAuthorized(uint256 apiKeyHash, address caller);
    error UnknownAccount(uint256 apiKeyHash);
    error AccountExists(uint256 apiKeyHash);
    error NotManaged(uint256 apiKeyHash);
    error ZeroAddress();
    error UsageKeyTaken(uint256 usageKeyHash);
    error UnknownUsageKey(uint256 usageKeyHash);
    error GroupIdTaken(uint256 groupId);
    error GroupIdNotAllowed(uint256 groupId);
    error UnknownGroup(uint256 groupId);
    error UnknownAction(uint256 cidHash);
    error WalletTaken(address wallet);
    error DerivationPathNotOwned(uint256 derivationPath, address admin);

    // ---- administration (owner) ---------------------------------------------------------
    function owner() external view returns (address);
    function transferOwnership(address newOwner) external;
    function setApiPayer(address payer, bool allowed) external;
    function isApiPayer(address payer) external view returns (bool);

    // ---- accounts -----------------------------------------------------------------------
    /// Managed account; API payer or owner only.
    function newAccount(uint256 apiKeyHash, address admin, string calldata name, string calldata description)
        external;
    /// Unmanaged account administered by msg.sender; apiKeyHash = keccak256(abi.encodePacked(msg.sender)).
    function newChainSecuredAccount(string calldata name, string calldata description)
        external
        returns (uint256 apiKeyHash);
    /// Managed → unmanaged, irreversibly; API payer or owner only; reverts NotManaged otherwise.
    function convertToChainSecuredAccount(uint256 apiKeyHash, address newAdminWalletAddress) external;

    // ---- usage keys (account writer) ----------------------------------------------------
    /// Creates or fully replaces a usage key of the account. A hash held by another account
    /// through a managed write (or kept through a conversion) reverts UsageKeyTaken. A hash
    /// an unmanaged account sets is recorded for that account alone: another unmanaged
    /// account setting the same hash gets its own record and blocks nobody (the service,
    /// which knows who minted a key, decides which record it honours).
    function setUsageApiKey(
        uint256 apiKeyHash,
        uint256 usageKeyHash,
        uint256 expiration,
        uint256 balance,
        string calldata name,
        string calldata description,
        UsageKeyPermissions calldata permissions
    ) external;
    function updateUsageApiKeyMetadata(
        uint256 apiKeyHash,
        uint256 usageKeyHash,
        string calldata name,
        string calldata description
    ) external;
    function removeUsageApiKey(uint256 apiKeyHash, uint256 usageKeyHash) external;

    // ---- groups (account writer) --------------------------------------------------------
    /// groupId = 0: the contract assigns the next id from CHAIN_GROUP_ID_BASE up (any writer);
    /// otherwise the id must be below CHAIN_GROUP_ID_BASE, unused, and the account managed.
    function addGroup(
        uint256 apiKeyHash,
        uint256 groupId,
        string calldata name,
        string calldata description,
        uint256[] calldata pkpIds,
        uint256[] calldata cidHashes
    ) external returns (uint256 assignedGroupId);
    /// Replaces name, description and both lists.
    function updateGroup(
        uint256 apiKeyHash,
        uint256 groupId,
        string calldata name,
        string calldata description,
        uint256[] calldata pkpIds,
        uint256[] calldata cidHashes
    ) external;
    function removeGroup(uint256 apiKeyHash, uint256 groupId) external;
    function addPkpToGroup(uint256 apiKeyHash, uint256 groupId, uint256 pkpId) external;
    function removePkpFromGroup(uint256 apiKeyHash, uint256 groupId, uint256 pkpId) external;
    function addActionToGroup(uint256 apiKeyHash, uint256 groupId, uint256 cidHash) external;
    function removeActionFromGroup(uint256 apiKeyHash, uint256 groupId, uint256 cidHash) external;

    // ---- actions and wallets (account writer) -------------------------------------------
    /// Registers the action or replaces its metadata.
    function setActionMetadata(uint256 apiKeyHash, uint256 cidHash, string calldata name, string calldata description)
        external;
    function deleteAction(uint256 apiKeyHash, uint256 cidHash) external;
    /// Attaches a keyservice wallet (by its derivation path) to the account. For an
    /// unmanaged account the path must carry its admin in its top 160 bits, else
    /// DerivationPathNotOwned.
    function registerWalletDerivation(
        uint256 apiKeyHash,
        address wallet,
        uint256 derivationPath,
        string calldata name,
        string calldata description
    ) external;

    // ---- batching -----------------------------------------------------------------------
    /// Runs each call of `calls` (calldata of this contract's functions) as if sent directly by
    /// msg.sender (delegatecall to itself), in order; reverts with the first failing call's
    /// revert data, so a batch applies entirely or not at all. The service's relayer uses it to
    /// mirror many writes in one transaction.
    function multicall(bytes[] calldata calls) external returns (bytes[] memory results);

    // ---- views --------------------------------------------------------------------------
    function CHAIN_GROUP_ID_BASE() external view returns (uint256);
    function nextChainGroupId() external view returns (uint256);
    function getAccount(uint256 apiKeyHash)
        external
        view
        returns (bool exists, bool managed, address admin, string memory name, string memory description);
    function getUsageApiKey(uint256 usageKeyHash)
        external
        view
        returns (
            uint256 apiKeyHash,
            uint256 expiration,
            uint256 balance,
            string memory name,
            string memory description,
            UsageKeyPermissions memory permissions
        );
    /// The usage key `usageKeyHash` as account `apiKeyHash` holds it (either kind of
    /// record); zero values if the account does not hold it.
    function getAccountUsageApiKey(uint256 apiKeyHash, uint256 usageKeyHash)
        external
        view
        returns (
            uint256 expiration,
            uint256 balance,
            string memory name,
            string memory description,
            UsageKeyPermissions memory permissions
        );
    function getGroup(uint256 groupId)
        external
        view
        returns (
            uint256 apiKeyHash,
            string memory name,
            string memory description,
            uint256[] memory pkpIds,
            uint256[] memory cidHashes
        );
    function getAction(uint256 apiKeyHash, uint256 cidHash)
        external
        view
        returns (bool exists, string memory name, string memory description);
    function getWallet(address wallet)
        external
        view
        returns (uint256 apiKeyHash, uint256 derivationPath, string memory name, string memory description);
}
