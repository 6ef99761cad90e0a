// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IAppGovernance} from "./IAppGovernance.sol";

/// @title AppGovernance: which compose hashes may hold the appliance's keys.
/// @notice Implements IAppGovernance. The deployer is the first owner (hand it to a multisig
/// with `transferOwnership`). Adding an allowed hash or removing one that is not allowed
/// (and transferring ownership to the current owner) succeeds and emits no event.
contract AppGovernance is IAppGovernance {
    address public owner;
    mapping(bytes32 composeHash => bool) public allowedComposeHashes;

    constructor() {
        owner = msg.sender;
        emit OwnershipTransferred(address(0), msg.sender);
    }

    modifier onlyOwner() {
        if (msg.sender != owner) revert NotOwner(msg.sender);
        _;
    }

    function transferOwnership(address newOwner) external onlyOwner {
        if (newOwner == address(0)) revert ZeroAddress();
        if (newOwner == owner) return;
        emit OwnershipTransferred(owner, newOwner);
        owner = newOwner;
    }

    function addComposeHash(bytes32 composeHash) external onlyOwner {
        if (allowedComposeHashes[composeHash]) return;
        allowedComposeHashes[composeHash] = true;
        emit ComposeHashAdded(composeHash);
    }

    function removeComposeHash(bytes32 composeHash) external onlyOwner {
        if (!allowedComposeHashes[composeHash]) return;
        allowedComposeHashes[composeHash] = false;
        emit ComposeHashRemoved(composeHash);
    }
}
