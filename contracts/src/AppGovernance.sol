// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC165} from "./dstack/IERC165.sol";
import {IAppAuth} from "./dstack/IAppAuth.sol";
import {IAppAuthBasicManagement} from "./dstack/IAppAuthBasicManagement.sol";
import {IAppGovernance} from "./IAppGovernance.sol";

/// @title AppGovernance: the appliance's dstack app contract.
/// @notice Implements IAppGovernance (and through it dstack's IAppAuth and
/// IAppAuthBasicManagement, announced by ERC-165). The deployer is the first owner (hand it
/// to a multisig with `transferOwnership`). Every owner write emits its event, also when it
/// changes nothing (as IAppAuthBasicManagement requires), except `transferOwnership` to the
/// current owner, which does nothing.
contract AppGovernance is IAppGovernance {
    bytes32 private constant TCB_UP_TO_DATE = keccak256("UpToDate");

    address public owner;
    mapping(bytes32 composeHash => bool) public allowedComposeHashes;
    bool public allowAnyDevice;
    mapping(bytes32 deviceId => bool) public allowedDeviceIds;
    bool public allowAnyOsImage;
    mapping(bytes32 osImageHash => bool) public allowedOsImages;
    bool public requireTcbUpToDate;

    constructor() {
        owner = msg.sender;
        emit OwnershipTransferred(address(0), msg.sender);
        allowAnyDevice = true;
        emit AllowAnyDeviceSet(true);
        allowAnyOsImage = true;
        emit AllowAnyOsImageSet(true);
    }

    modifier onlyOwner() {
        if (msg.sender != owner) revert NotOwner(msg.sender);
        _;
    }

    function supportsInterface(bytes4 interfaceId) external pure returns (bool) {
        return interfaceId == type(IERC165).interfaceId || interfaceId == type(IAppAuth).interfaceId
            || interfaceId == type(IAppAuthBasicManagement).interfaceId
            || interfaceId == type(IAppGovernance).interfaceId;
    }

    function isAppAllowed(AppBootInfo calldata bootInfo) external view returns (bool, string memory) {
        if (requireTcbUpToDate && keccak256(bytes(bootInfo.tcbStatus)) != TCB_UP_TO_DATE) {
            return (false, "TCB status is not up to date");
        }
        if (!allowedComposeHashes[bootInfo.composeHash]) {
            return (false, "Compose hash not allowed");
        }
        if (!allowAnyDevice && !allowedDeviceIds[bootInfo.deviceId]) {
            return (false, "Device not allowed");
        }
        if (!allowAnyOsImage && !allowedOsImages[bootInfo.osImageHash]) {
            return (false, "OS image is not allowed");
        }
        return (true, "");
    }

    function transferOwnership(address newOwner) external onlyOwner {
        if (newOwner == address(0)) revert ZeroAddress();
        if (newOwner == owner) return;
        emit OwnershipTransferred(owner, newOwner);
        owner = newOwner;
    }

    function addComposeHash(bytes32 composeHash) external onlyOwner {
        allowedComposeHashes[composeHash] = true;
        emit ComposeHashAdded(composeHash);
    }

    function removeComposeHash(bytes32 composeHash) external onlyOwner {
        allowedComposeHashes[composeHash] = false;
        emit ComposeHashRemoved(composeHash);
    }

    function setAllowAnyDevice(bool allowAny) external onlyOwner {
        allowAnyDevice = allowAny;
        emit AllowAnyDeviceSet(allowAny);
    }

    function addDevice(bytes32 deviceId) external onlyOwner {
        allowedDeviceIds[deviceId] = true;
        emit DeviceAdded(deviceId);
    }

    function removeDevice(bytes32 deviceId) external onlyOwner {
        allowedDeviceIds[deviceId] = false;
        emit DeviceRemoved(deviceId);
    }

    function setAllowAnyOsImage(bool allowAny) external onlyOwner {
        allowAnyOsImage = allowAny;
        emit AllowAnyOsImageSet(allowAny);
    }

    function addOsImageHash(bytes32 osImageHash) external onlyOwner {
        allowedOsImages[osImageHash] = true;
        emit OsImageHashAdded(osImageHash);
    }

    function removeOsImageHash(bytes32 osImageHash) external onlyOwner {
        allowedOsImages[osImageHash] = false;
        emit OsImageHashRemoved(osImageHash);
    }

    function setRequireTcbUpToDate(bool requireUpToDate) external onlyOwner {
        requireTcbUpToDate = requireUpToDate;
        emit RequireTcbUpToDateSet(requireUpToDate);
    }
}
