// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IAppAuth} from "./dstack/IAppAuth.sol";
import {IAppAuthBasicManagement} from "./dstack/IAppAuthBasicManagement.sol";

/// @title AppGovernance: which compose hashes, devices and OS images may run the appliance
/// and hold its keys — a dstack app contract.
/// @notice The owner (a multisig in production) allows and revokes. Two readers:
/// * dstack's on-chain KMS, which asks `isAppAllowed` (IAppAuth, found through ERC-165)
///   before it releases the app's keys to a booting CVM;
/// * the appliance's keyservice, which re-seals its root only to a compose hash that
///   `allowedComposeHashes` answers true for.
/// `isAppAllowed` checks, in this order, and answers the first failure's reason:
/// 1. `requireTcbUpToDate` and a TCB status other than "UpToDate": "TCB status is not up to date";
/// 2. a compose hash not allowed: "Compose hash not allowed";
/// 3. `allowAnyDevice` false and a device not allowed: "Device not allowed";
/// 4. `allowAnyOsImage` false and an OS image not allowed: "OS image is not allowed";
/// otherwise `(true, "")`. The reasons of 1-3 are the words of dstack's own app contract.
/// A new contract allows any device and any OS image (dstack's KMS has its own OS image
/// list) and does not require an up-to-date TCB; its constructor emits the events that say so.
interface IAppGovernance is IAppAuth, IAppAuthBasicManagement {
    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);
    event AllowAnyDeviceSet(bool allowAny);
    event AllowAnyOsImageSet(bool allowAny);
    event RequireTcbUpToDateSet(bool requireUpToDate);
    event OsImageHashAdded(bytes32 osImageHash);
    event OsImageHashRemoved(bytes32 osImageHash);

    error NotOwner(address caller);
    error ZeroAddress();

    function owner() external view returns (address);
    /// Hands the contract to `newOwner` (not 0); to the current owner it does nothing.
    function transferOwnership(address newOwner) external;

    function allowedComposeHashes(bytes32 composeHash) external view returns (bool);

    function allowAnyDevice() external view returns (bool);
    function allowedDeviceIds(bytes32 deviceId) external view returns (bool);
    function setAllowAnyDevice(bool allowAny) external;

    function allowAnyOsImage() external view returns (bool);
    function allowedOsImages(bytes32 osImageHash) external view returns (bool);
    function setAllowAnyOsImage(bool allowAny) external;
    function addOsImageHash(bytes32 osImageHash) external;
    function removeOsImageHash(bytes32 osImageHash) external;

    function requireTcbUpToDate() external view returns (bool);
    function setRequireTcbUpToDate(bool requireUpToDate) external;
}
