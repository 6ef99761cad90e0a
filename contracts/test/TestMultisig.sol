// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title TestMultisig: a Safe-style multisig for tests (this project's own code).
/// @notice `threshold` of `owners` sign a transaction off-chain (EIP-712, type
/// `MultisigTx(address to,uint256 value,bytes data,uint256 nonce)`, domain
/// `EIP712Domain(uint256 chainId,address verifyingContract)`); anyone submits it with the
/// signatures (65 bytes each, r ‖ s ‖ v, signers in ascending address order) and the
/// multisig makes the call. A failed call reverts with the callee's revert data unchanged.
contract TestMultisig {
    bytes32 private constant DOMAIN_TYPEHASH = keccak256("EIP712Domain(uint256 chainId,address verifyingContract)");
    bytes32 private constant TX_TYPEHASH = keccak256("MultisigTx(address to,uint256 value,bytes data,uint256 nonce)");

    mapping(address => bool) public isOwner;
    uint256 public immutable threshold;
    uint256 public nonce;

    error BadSignatures();

    constructor(address[] memory owners, uint256 threshold_) {
        require(threshold_ > 0 && threshold_ <= owners.length, "bad threshold");
        for (uint256 i = 0; i < owners.length; i++) {
            isOwner[owners[i]] = true;
        }
        threshold = threshold_;
    }

    function transactionHash(address to, uint256 value, bytes calldata data, uint256 txNonce)
        public
        view
        returns (bytes32)
    {
        bytes32 domain = keccak256(abi.encode(DOMAIN_TYPEHASH, block.chainid, address(this)));
        bytes32 structHash = keccak256(abi.encode(TX_TYPEHASH, to, value, keccak256(data), txNonce));
        return keccak256(abi.encodePacked("\x19\x01", domain, structHash));
    }

    function execTransaction(address to, uint256 value, bytes calldata data, bytes calldata signatures)
        external
        returns (bytes memory)
    {
        bytes32 hash = transactionHash(to, value, data, nonce);
        if (signatures.length != threshold * 65) revert BadSignatures();
        address last = address(0);
        for (uint256 i = 0; i < threshold; i++) {
            bytes32 r = bytes32(signatures[i * 65:i * 65 + 32]);
            bytes32 s = bytes32(signatures[i * 65 + 32:i * 65 + 64]);
            uint8 v = uint8(signatures[i * 65 + 64]);
            address signer = ecrecover(hash, v, r, s);
            if (signer <= last || !isOwner[signer]) revert BadSignatures();
            last = signer;
        }
        nonce += 1;
        (bool ok, bytes memory result) = to.call{value: value}(data);
        if (!ok) {
            assembly {
                revert(add(result, 32), mload(result))
            }
        }
        return result;
    }
}
