// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC165} from "./IERC165.sol";

/// @title IAppAuthBasicManagement: the management calls dstack's tools (its UI, its CLIs) use
/// on an app's contract.
/// @notice Written in this project's words from dstack's published interface
/// (github.com/Dstack-TEE/dstack, `dstack/kms/auth-eth/contracts/IAppAuthBasicManagement.sol`
/// at 312dc605); interface id 0x8fd37527. Every successful call emits its event, whether or
/// not the set changed; callers that are not authorized make it revert.
interface IAppAuthBasicManagement is IERC165 {
    event ComposeHashAdded(bytes32 composeHash);
    event ComposeHashRemoved(bytes32 composeHash);
    event DeviceAdded(bytes32 deviceId);
    event DeviceRemoved(bytes32 deviceId);

    function addComposeHash(bytes32 composeHash) external;
    function removeComposeHash(bytes32 composeHash) external;
    function addDevice(bytes32 deviceId) external;
    function removeDevice(bytes32 deviceId) external;
}
