// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC165} from "./IERC165.sol";

/// @title IAppAuth: what dstack's on-chain KMS asks an app's contract before it releases the
/// app's keys.
/// @notice Written in this project's words from dstack's published interface
/// (github.com/Dstack-TEE/dstack, `dstack/kms/auth-eth/contracts/IAppAuth.sol` at 312dc605):
/// the struct's fields, their order and types, and the function's signature are dstack's, so
/// the ABI (selector `isAppAllowed((address,bytes32,address,bytes32,bytes32,bytes32,bytes32,
/// string,string[]))`, interface id 0x1e079198) is the one its KMS calls.
interface IAppAuth is IERC165 {
    /// What a booting CVM reports to the KMS, checked against its quote by the KMS.
    struct AppBootInfo {
        /// The app's id: on an on-chain KMS, the address of the app's contract.
        address appId;
        /// SHA-256 of the app's `app-compose.json` (the `compose-hash` event of RTMR3).
        bytes32 composeHash;
        /// This instance of the app (0 when the compose sets `no_instance_id`).
        address instanceId;
        /// The physical machine (a hash of its platform identity).
        bytes32 deviceId;
        /// One hash over MRTD, RTMR0-3 and the rest of the measurement.
        bytes32 mrAggregated;
        /// One hash over the OS part of the measurement (MRTD, RTMR0-2).
        bytes32 mrSystem;
        /// The dstack OS image's hash.
        bytes32 osImageHash;
        /// The quote's TCB status as Intel's collateral states it ("UpToDate", "OutOfDate", ...).
        string tcbStatus;
        /// The Intel security advisories that apply to the platform ("INTEL-SA-00837", ...).
        string[] advisoryIds;
    }

    /// @return isAllowed whether the app may boot with these parameters (and get its keys)
    /// @return reason why not, in words (empty when allowed)
    function isAppAllowed(AppBootInfo calldata bootInfo) external view returns (bool isAllowed, string memory reason);
}
