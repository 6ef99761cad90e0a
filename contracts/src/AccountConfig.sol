// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IAccountConfig} from "./IAccountConfig.sol";

/// @title AccountConfig: the on-chain mirror of the appliance's administrative state.
/// @notice Implements IAccountConfig; the rules are documented there and in contracts/README.md.
/// Choices the interface leaves open:
/// * A write that changes nothing (adding a member a group already has, removing one it does
///   not have, setting an API payer flag or the owner to its current value) succeeds and
///   emits no event. Upserts (`setUsageApiKey`, `setActionMetadata`, `updateGroup`, ...)
///   always emit.
/// * Duplicates in the `pkpIds` / `cidHashes` arrays of `addGroup` / `updateGroup` are kept
///   once; the event carries the lists as stored.
/// * Removing a member moves the group's last member into its place (swap and pop).
/// * apiKeyHash 0 is reserved (views answer 0 for "none"): `newAccount(0, ...)` reverts
///   AccountExists(0). Views of an absent usage key, group or wallet return zero values.
/// * A wallet is registered once; registering it again reverts WalletTaken, even for the
///   same account. An unmanaged account registers only derivation paths that carry its
///   admin in their top 160 bits (the service mints paths that way for the signer).
/// * Usage keys set by unmanaged accounts live in a per-account map: a hash copied from
///   another account's pending transaction gives the copier its own record and blocks
///   nobody.
/// * Usage key permission lists and group lists are stored as given: their group ids, pkpIds
///   and cidHashes are not checked against existing groups, wallets or actions, and removing
///   a group, action or usage key does not cascade.
contract AccountConfig is IAccountConfig {
    uint256 public constant CHAIN_GROUP_ID_BASE = 2 ** 62;

    struct Account {
        bool exists;
        bool managed;
        address admin;
        string name;
        string description;
    }

    struct UsageKey {
        uint256 apiKeyHash; // 0: absent
        uint256 expiration;
        uint256 balance;
        string name;
        string description;
        UsageKeyPermissions permissions;
    }

    struct Group {
        uint256 apiKeyHash; // 0: absent (never created, or removed)
        string name;
        string description;
        uint256[] pkpIds;
        uint256[] cidHashes;
    }

    struct Action {
        bool exists;
        string name;
        string description;
    }

    struct Wallet {
        uint256 apiKeyHash; // 0: absent
        uint256 derivationPath;
        string name;
        string description;
    }

    address public owner;
    uint256 public nextChainGroupId = CHAIN_GROUP_ID_BASE;
    mapping(address payer => bool) public isApiPayer;

    mapping(uint256 apiKeyHash => Account) private _accounts;
    mapping(uint256 usageKeyHash => UsageKey) private _usageKeys;
    /// Usage keys set by unmanaged accounts (other than those kept through a conversion).
    mapping(uint256 apiKeyHash => mapping(uint256 usageKeyHash => UsageKey)) private _chainSecuredUsageKeys;
    mapping(uint256 groupId => Group) private _groups;
    /// Service-chosen ids (below CHAIN_GROUP_ID_BASE) ever used; the contract's own ids are
    /// never reused because `nextChainGroupId` only grows.
    mapping(uint256 groupId => bool) private _explicitGroupIdUsed;
    /// Position + 1 of each member in its group's list (0: not a member).
    mapping(uint256 groupId => mapping(uint256 pkpId => uint256)) private _pkpIndex;
    mapping(uint256 groupId => mapping(uint256 cidHash => uint256)) private _cidIndex;
    mapping(uint256 apiKeyHash => mapping(uint256 cidHash => Action)) private _actions;
    mapping(address wallet => Wallet) private _wallets;

    constructor() {
        owner = msg.sender;
        emit OwnershipTransferred(address(0), msg.sender);
    }

    modifier onlyOwner() {
        if (msg.sender != owner) revert NotOwner(msg.sender);
        _;
    }

    // ---- administration (owner) ---------------------------------------------------------

    function transferOwnership(address newOwner) external onlyOwner {
        if (newOwner == address(0)) revert ZeroAddress();
        if (newOwner == owner) return;
        emit OwnershipTransferred(owner, newOwner);
        owner = newOwner;
    }

    function setApiPayer(address payer, bool allowed) external onlyOwner {
        if (payer == address(0)) revert ZeroAddress();
        if (isApiPayer[payer] == allowed) return;
        isApiPayer[payer] = allowed;
        emit ApiPayerSet(payer, allowed);
    }

    // ---- accounts -----------------------------------------------------------------------

    function newAccount(uint256 apiKeyHash, address admin, string calldata name, string calldata description)
        external
    {
        if (!_isPayerOrOwner()) revert NotAuthorized(apiKeyHash, msg.sender);
        _createAccount(apiKeyHash, true, admin, name, description);
    }

    function newChainSecuredAccount(string calldata name, string calldata description)
        external
        returns (uint256 apiKeyHash)
    {
        apiKeyHash = uint256(keccak256(abi.encodePacked(msg.sender)));
        _createAccount(apiKeyHash, false, msg.sender, name, description);
    }

    function convertToChainSecuredAccount(uint256 apiKeyHash, address newAdminWalletAddress) external {
        Account storage account = _accounts[apiKeyHash];
        if (!account.exists) revert UnknownAccount(apiKeyHash);
        if (!_isPayerOrOwner()) revert NotAuthorized(apiKeyHash, msg.sender);
        if (!account.managed) revert NotManaged(apiKeyHash);
        if (newAdminWalletAddress == address(0)) revert ZeroAddress();
        account.managed = false;
        account.admin = newAdminWalletAddress;
        emit AccountConverted(apiKeyHash, newAdminWalletAddress);
    }

    // ---- usage keys ---------------------------------------------------------------------

    function setUsageApiKey(
        uint256 apiKeyHash,
        uint256 usageKeyHash,
        uint256 expiration,
        uint256 balance,
        string calldata name,
        string calldata description,
        UsageKeyPermissions calldata permissions
    ) external {
        Account storage account = _writableAccount(apiKeyHash);
        UsageKey storage key = _usageKeys[usageKeyHash];
        if (key.apiKeyHash != apiKeyHash) {
            if (key.apiKeyHash != 0) revert UsageKeyTaken(usageKeyHash);
            if (!account.managed) key = _chainSecuredUsageKeys[apiKeyHash][usageKeyHash];
        }
        key.apiKeyHash = apiKeyHash;
        key.expiration = expiration;
        key.balance = balance;
        key.name = name;
        key.description = description;
        key.permissions = permissions;
        emit UsageApiKeySet(apiKeyHash, usageKeyHash, expiration, balance, name, description, permissions);
    }

    function updateUsageApiKeyMetadata(
        uint256 apiKeyHash,
        uint256 usageKeyHash,
        string calldata name,
        string calldata description
    ) external {
        _writableAccount(apiKeyHash);
        UsageKey storage key = _ownUsageKey(apiKeyHash, usageKeyHash);
        key.name = name;
        key.description = description;
        emit UsageApiKeyMetadataUpdated(apiKeyHash, usageKeyHash, name, description);
    }

    function removeUsageApiKey(uint256 apiKeyHash, uint256 usageKeyHash) external {
        _writableAccount(apiKeyHash);
        _ownUsageKey(apiKeyHash, usageKeyHash);
        if (_usageKeys[usageKeyHash].apiKeyHash == apiKeyHash) {
            delete _usageKeys[usageKeyHash];
        } else {
            delete _chainSecuredUsageKeys[apiKeyHash][usageKeyHash];
        }
        emit UsageApiKeyRemoved(apiKeyHash, usageKeyHash);
    }

    // ---- groups -------------------------------------------------------------------------

    function addGroup(
        uint256 apiKeyHash,
        uint256 groupId,
        string calldata name,
        string calldata description,
        uint256[] calldata pkpIds,
        uint256[] calldata cidHashes
    ) external returns (uint256 assignedGroupId) {
        Account storage account = _writableAccount(apiKeyHash);
        if (groupId == 0) {
            assignedGroupId = nextChainGroupId++;
        } else {
            if (groupId >= CHAIN_GROUP_ID_BASE || !account.managed) revert GroupIdNotAllowed(groupId);
            if (_explicitGroupIdUsed[groupId]) revert GroupIdTaken(groupId);
            _explicitGroupIdUsed[groupId] = true;
            assignedGroupId = groupId;
        }
        Group storage group = _groups[assignedGroupId];
        group.apiKeyHash = apiKeyHash;
        _writeGroup(group, assignedGroupId, name, description, pkpIds, cidHashes);
        emit GroupAdded(apiKeyHash, assignedGroupId, name, description, group.pkpIds, group.cidHashes);
    }

    function updateGroup(
        uint256 apiKeyHash,
        uint256 groupId,
        string calldata name,
        string calldata description,
        uint256[] calldata pkpIds,
        uint256[] calldata cidHashes
    ) external {
        _writableAccount(apiKeyHash);
        Group storage group = _ownGroup(apiKeyHash, groupId);
        _clearMembers(group.pkpIds, _pkpIndex[groupId]);
        _clearMembers(group.cidHashes, _cidIndex[groupId]);
        _writeGroup(group, groupId, name, description, pkpIds, cidHashes);
        emit GroupUpdated(apiKeyHash, groupId, name, description, group.pkpIds, group.cidHashes);
    }

    function removeGroup(uint256 apiKeyHash, uint256 groupId) external {
        _writableAccount(apiKeyHash);
        Group storage group = _ownGroup(apiKeyHash, groupId);
        _clearMembers(group.pkpIds, _pkpIndex[groupId]);
        _clearMembers(group.cidHashes, _cidIndex[groupId]);
        delete _groups[groupId];
        emit GroupRemoved(apiKeyHash, groupId);
    }

    function addPkpToGroup(uint256 apiKeyHash, uint256 groupId, uint256 pkpId) external {
        _writableAccount(apiKeyHash);
        Group storage group = _ownGroup(apiKeyHash, groupId);
        if (_addMember(group.pkpIds, _pkpIndex[groupId], pkpId)) {
            emit PkpAddedToGroup(apiKeyHash, groupId, pkpId);
        }
    }

    function removePkpFromGroup(uint256 apiKeyHash, uint256 groupId, uint256 pkpId) external {
        _writableAccount(apiKeyHash);
        Group storage group = _ownGroup(apiKeyHash, groupId);
        if (_removeMember(group.pkpIds, _pkpIndex[groupId], pkpId)) {
            emit PkpRemovedFromGroup(apiKeyHash, groupId, pkpId);
        }
    }

    function addActionToGroup(uint256 apiKeyHash, uint256 groupId, uint256 cidHash) external {
        _writableAccount(apiKeyHash);
        Group storage group = _ownGroup(apiKeyHash, groupId);
        if (_addMember(group.cidHashes, _cidIndex[groupId], cidHash)) {
            emit ActionAddedToGroup(apiKeyHash, groupId, cidHash);
        }
    }

    function removeActionFromGroup(uint256 apiKeyHash, uint256 groupId, uint256 cidHash) external {
        _writableAccount(apiKeyHash);
        Group storage group = _ownGroup(apiKeyHash, groupId);
        if (_removeMember(group.cidHashes, _cidIndex[groupId], cidHash)) {
            emit ActionRemovedFromGroup(apiKeyHash, groupId, cidHash);
        }
    }

    // ---- actions and wallets ------------------------------------------------------------

    function setActionMetadata(uint256 apiKeyHash, uint256 cidHash, string calldata name, string calldata description)
        external
    {
        _writableAccount(apiKeyHash);
        Action storage action = _actions[apiKeyHash][cidHash];
        action.exists = true;
        action.name = name;
        action.description = description;
        emit ActionMetadataSet(apiKeyHash, cidHash, name, description);
    }

    function deleteAction(uint256 apiKeyHash, uint256 cidHash) external {
        _writableAccount(apiKeyHash);
        if (!_actions[apiKeyHash][cidHash].exists) revert UnknownAction(cidHash);
        delete _actions[apiKeyHash][cidHash];
        emit ActionDeleted(apiKeyHash, cidHash);
    }

    function registerWalletDerivation(
        uint256 apiKeyHash,
        address wallet,
        uint256 derivationPath,
        string calldata name,
        string calldata description
    ) external {
        Account storage account = _writableAccount(apiKeyHash);
        if (wallet == address(0)) revert ZeroAddress();
        if (!account.managed && address(uint160(derivationPath >> 96)) != account.admin) {
            revert DerivationPathNotOwned(derivationPath, account.admin);
        }
        Wallet storage entry = _wallets[wallet];
        if (entry.apiKeyHash != 0) revert WalletTaken(wallet);
        entry.apiKeyHash = apiKeyHash;
        entry.derivationPath = derivationPath;
        entry.name = name;
        entry.description = description;
        emit WalletRegistered(apiKeyHash, wallet, derivationPath, name, description);
    }

    // ---- batching -----------------------------------------------------------------------

    function multicall(bytes[] calldata calls) external returns (bytes[] memory results) {
        results = new bytes[](calls.length);
        for (uint256 i = 0; i < calls.length; ++i) {
            (bool ok, bytes memory result) = address(this).delegatecall(calls[i]);
            if (!ok) {
                assembly ("memory-safe") {
                    revert(add(result, 0x20), mload(result))
                }
            }
            results[i] = result;
        }
    }

    // ---- views --------------------------------------------------------------------------

    function getAccount(uint256 apiKeyHash)
        external
        view
        returns (bool exists, bool managed, address admin, string memory name, string memory description)
    {
        Account storage account = _accounts[apiKeyHash];
        return (account.exists, account.managed, account.admin, account.name, account.description);
    }

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
        )
    {
        UsageKey storage key = _usageKeys[usageKeyHash];
        return (key.apiKeyHash, key.expiration, key.balance, key.name, key.description, key.permissions);
    }

    function getAccountUsageApiKey(uint256 apiKeyHash, uint256 usageKeyHash)
        external
        view
        returns (
            uint256 expiration,
            uint256 balance,
            string memory name,
            string memory description,
            UsageKeyPermissions memory permissions
        )
    {
        UsageKey storage key = _usageKeys[usageKeyHash];
        if (apiKeyHash == 0 || key.apiKeyHash != apiKeyHash) key = _chainSecuredUsageKeys[apiKeyHash][usageKeyHash];
        return (key.expiration, key.balance, key.name, key.description, key.permissions);
    }

    function getGroup(uint256 groupId)
        external
        view
        returns (
            uint256 apiKeyHash,
            string memory name,
            string memory description,
            uint256[] memory pkpIds,
            uint256[] memory cidHashes
        )
    {
        Group storage group = _groups[groupId];
        return (group.apiKeyHash, group.name, group.description, group.pkpIds, group.cidHashes);
    }

    function getAction(uint256 apiKeyHash, uint256 cidHash)
        external
        view
        returns (bool exists, string memory name, string memory description)
    {
        Action storage action = _actions[apiKeyHash][cidHash];
        return (action.exists, action.name, action.description);
    }

    function getWallet(address wallet)
        external
        view
        returns (uint256 apiKeyHash, uint256 derivationPath, string memory name, string memory description)
    {
        Wallet storage entry = _wallets[wallet];
        return (entry.apiKeyHash, entry.derivationPath, entry.name, entry.description);
    }

    // ---- internals ----------------------------------------------------------------------

    function _isPayerOrOwner() private view returns (bool) {
        return isApiPayer[msg.sender] || msg.sender == owner;
    }

    function _createAccount(
        uint256 apiKeyHash,
        bool managed,
        address admin,
        string calldata name,
        string calldata description
    ) private {
        Account storage account = _accounts[apiKeyHash];
        if (apiKeyHash == 0 || account.exists) revert AccountExists(apiKeyHash);
        account.exists = true;
        account.managed = managed;
        account.admin = admin;
        account.name = name;
        account.description = description;
        emit AccountCreated(apiKeyHash, admin, managed, name, description);
    }

    /// The account, if msg.sender may write it: an API payer or the owner for a managed
    /// account, only its admin wallet for an unmanaged one.
    function _writableAccount(uint256 apiKeyHash) private view returns (Account storage account) {
        account = _accounts[apiKeyHash];
        if (!account.exists) revert UnknownAccount(apiKeyHash);
        bool allowed = account.managed ? _isPayerOrOwner() : msg.sender == account.admin;
        if (!allowed) revert NotAuthorized(apiKeyHash, msg.sender);
    }

    function _ownUsageKey(uint256 apiKeyHash, uint256 usageKeyHash) private view returns (UsageKey storage key) {
        key = _usageKeys[usageKeyHash];
        if (key.apiKeyHash == apiKeyHash && apiKeyHash != 0) return key;
        key = _chainSecuredUsageKeys[apiKeyHash][usageKeyHash];
        if (key.apiKeyHash == 0) revert UnknownUsageKey(usageKeyHash);
    }

    function _ownGroup(uint256 apiKeyHash, uint256 groupId) private view returns (Group storage group) {
        group = _groups[groupId];
        if (group.apiKeyHash == 0 || group.apiKeyHash != apiKeyHash) revert UnknownGroup(groupId);
    }

    /// Sets name, description and both lists of a group whose lists are empty.
    function _writeGroup(
        Group storage group,
        uint256 groupId,
        string calldata name,
        string calldata description,
        uint256[] calldata pkpIds,
        uint256[] calldata cidHashes
    ) private {
        group.name = name;
        group.description = description;
        mapping(uint256 => uint256) storage pkpIndex = _pkpIndex[groupId];
        for (uint256 i = 0; i < pkpIds.length; ++i) {
            _addMember(group.pkpIds, pkpIndex, pkpIds[i]);
        }
        mapping(uint256 => uint256) storage cidIndex = _cidIndex[groupId];
        for (uint256 i = 0; i < cidHashes.length; ++i) {
            _addMember(group.cidHashes, cidIndex, cidHashes[i]);
        }
    }

    function _addMember(uint256[] storage list, mapping(uint256 => uint256) storage index, uint256 value)
        private
        returns (bool added)
    {
        if (index[value] != 0) return false;
        list.push(value);
        index[value] = list.length;
        return true;
    }

    function _removeMember(uint256[] storage list, mapping(uint256 => uint256) storage index, uint256 value)
        private
        returns (bool removed)
    {
        uint256 position = index[value];
        if (position == 0) return false;
        uint256 lastPosition = list.length;
        if (position != lastPosition) {
            uint256 last = list[lastPosition - 1];
            list[position - 1] = last;
            index[last] = position;
        }
        list.pop();
        delete index[value];
        return true;
    }

    function _clearMembers(uint256[] storage list, mapping(uint256 => uint256) storage index) private {
        for (uint256 n = list.length; n > 0; --n) {
            delete index[list[n - 1]];
            list.pop();
        }
    }
}
