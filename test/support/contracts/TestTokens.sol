// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// A minimal ERC-20 for tests (6 decimals like USDT/USDC, 18 like the Binance-Peg tokens on bsc):
/// real Transfer logs from a real contract.
/// Like USDT it can blacklist addresses: a transfer to one reverts ("blacklisted").
contract TestToken {
    string public name;
    string public symbol;
    uint8 public immutable decimals;
    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;
    mapping(address => bool) public blacklisted;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    constructor(string memory name_, string memory symbol_, uint8 decimals_) {
        name = name_;
        symbol = symbol_;
        decimals = decimals_;
    }

    function mint(address to, uint256 value) external {
        totalSupply += value;
        balanceOf[to] += value;
        emit Transfer(address(0), to, value);
    }

    function setBlacklisted(address account, bool value) external {
        blacklisted[account] = value;
    }

    function transfer(address to, uint256 value) external returns (bool) {
        _move(msg.sender, to, value);
        return true;
    }

    function approve(address spender, uint256 value) external returns (bool) {
        allowance[msg.sender][spender] = value;
        emit Approval(msg.sender, spender, value);
        return true;
    }

    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        require(allowance[from][msg.sender] >= value, "allowance");
        allowance[from][msg.sender] -= value;
        _move(from, to, value);
        return true;
    }

    function _move(address from, address to, uint256 value) private {
        require(!blacklisted[to], "blacklisted");
        require(balanceOf[from] >= value, "balance");
        balanceOf[from] -= value;
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }
}

/// Pays two addresses in ONE transaction (a batched payout, as exchanges send them).
contract Batcher {
    function payTwo(TestToken token, address a, uint256 x, address b, uint256 y) external {
        require(token.transferFrom(msg.sender, a, x), "first");
        require(token.transferFrom(msg.sender, b, y), "second");
    }

    /// Forwards ETH to two addresses: internal transfers no block scan of transactions sees.
    function forwardTwo(address payable a, uint256 x, address payable b, uint256 y) external payable {
        a.transfer(x);
        b.transfer(y);
    }
}
