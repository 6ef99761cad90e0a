// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// The smallest ERC-20 the reference examples read: a fixed supply minted to the deployer,
/// `balanceOf`, `symbol`, `decimals` and `transfer`. Test use only.
contract Token {
    string public constant symbol = "REF";
    string public constant name = "Reference Token";
    uint8 public constant decimals = 18;
    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;

    event Transfer(address indexed from, address indexed to, uint256 value);

    constructor(uint256 supply) {
        totalSupply = supply;
        balanceOf[msg.sender] = supply;
        emit Transfer(address(0), msg.sender, supply);
    }

    function transfer(address to, uint256 value) external returns (bool) {
        require(balanceOf[msg.sender] >= value, "balance");
        balanceOf[msg.sender] -= value;
        balanceOf[to] += value;
        emit Transfer(msg.sender, to, value);
        return true;
    }
}
