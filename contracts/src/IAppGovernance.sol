// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title AppGovernance: which compose hashes may hold the appliance's keys.
/// @notice The owner (a multisig in production) allows and revokes compose hashes; an
/// upgrade re-seals the keyservice root only to a hash this contract allows.
interface IAppGovernance {
    event ComposeHashAdded(bytes32 indexed composeHash);
    event ComposeHashRemoved(bytes32 indexed composeHash);
    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);

    error NotOwner(address caller);
    error ZeroAddress();

    function owner() external view returns (address);
    function transferOwnership(address newOwner) external;
    function allowedComposeHashes(bytes32 composeHash) external view returns (bool);
    function addComposeHash(bytes32 composeHash) external;
    function removeComposeHash(bytes32 composeHash) external;
}
