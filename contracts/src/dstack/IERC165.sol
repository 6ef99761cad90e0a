// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title IERC165: standard interface detection (EIP-165).
/// @notice `supportsInterface(id)` answers whether the contract implements the interface whose
/// id is the XOR of its function selectors. Costs at most 30 000 gas; never reverts.
interface IERC165 {
    function supportsInterface(bytes4 interfaceId) external view returns (bool);
}
