// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC165} from "../src/dstack/IERC165.sol";
import {IAppAuth} from "../src/dstack/IAppAuth.sol";

/// @title TestKms: a test stand-in for dstack's on-chain KMS contract, as far as it consults
/// an app (this project's own code; it behaves as `DstackKms.isAppAllowed` of
/// Dstack-TEE/dstack 312dc605 is documented and written to behave).
/// @notice The KMS answers for an app in this order: the app must be registered ("App not
/// registered"; registering is open to anyone, as dstack's is), its OS image allowed by the
/// KMS owner ("OS image is not allowed"), code at the app's address ("App not deployed or
/// invalid address"); then the app's own `isAppAllowed` decides. One step further than
/// dstack's: the app must announce IAppAuth through ERC-165 ("App does not implement
/// IAppAuth"), so a contract that merely has a function of that name is not consulted.
contract TestKms is IAppAuth {
    address public immutable owner;
    mapping(address appId => bool) public registeredApps;
    mapping(bytes32 osImageHash => bool) public allowedOsImages;

    event AppRegistered(address appId);

    constructor() {
        owner = msg.sender;
    }

    function supportsInterface(bytes4 interfaceId) external pure returns (bool) {
        return interfaceId == type(IERC165).interfaceId || interfaceId == type(IAppAuth).interfaceId;
    }

    function registerApp(address appId) external {
        require(appId != address(0), "Invalid app ID");
        registeredApps[appId] = true;
        emit AppRegistered(appId);
    }

    function addOsImageHash(bytes32 osImageHash) external {
        require(msg.sender == owner, "not the KMS owner");
        allowedOsImages[osImageHash] = true;
    }

    function isAppAllowed(AppBootInfo calldata bootInfo) external view returns (bool, string memory) {
        if (!registeredApps[bootInfo.appId]) return (false, "App not registered");
        if (!allowedOsImages[bootInfo.osImageHash]) return (false, "OS image is not allowed");
        if (bootInfo.appId.code.length == 0) return (false, "App not deployed or invalid address");
        if (!announcesAppAuth(bootInfo.appId)) return (false, "App does not implement IAppAuth");
        return IAppAuth(bootInfo.appId).isAppAllowed(bootInfo);
    }

    /// ERC-165 detection as the EIP describes it: supports IERC165, does not support 0xffffffff,
    /// supports IAppAuth; each query with at most 30 000 gas, a revert or a short answer is "no".
    function announcesAppAuth(address app) internal view returns (bool) {
        return query(app, type(IERC165).interfaceId) && !query(app, 0xffffffff)
            && query(app, type(IAppAuth).interfaceId);
    }

    function query(address app, bytes4 interfaceId) internal view returns (bool) {
        (bool ok, bytes memory answer) =
            app.staticcall{gas: 30000}(abi.encodeCall(IERC165.supportsInterface, (interfaceId)));
        return ok && answer.length >= 32 && abi.decode(answer, (bool));
    }
}
