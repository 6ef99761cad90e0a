// ethers.Contract and ethers.BaseContract (ethers 5.7.2 semantics), over the native
// Interface, BigNumber and utils. Evaluated once per realm by contract.rs, on the first
// read of ethers.Contract or ethers.BaseContract; why this part is JavaScript is said
// there. The parameters are the realm's own built-ins (so a script's top-level bindings
// named Object, Array, Promise or JSON cannot reach in) and `lib`: the native Interface
// and Indexed, makeError (ethers' Logger.makeError), deepCopy and warn (console.log).
(function (ethers, lib, Object, Array, Promise, JSON) {
  "use strict";

  const utils = ethers.utils;
  const BigNumber = ethers.BigNumber;
  const Interface = lib.Interface;
  const getAddress = utils.getAddress;
  const isHexString = utils.isHexString;
  const hexDataLength = utils.hexDataLength;
  const arrayify = utils.arrayify;
  const deepCopy = lib.deepCopy;
  const VERSION = "contracts/5.7.0";
  const TX_VERSION = "transactions/5.7.0";

  function makeError(message, code, params) {
    return lib.makeError(message, code, params || {}, VERSION);
  }
  function argumentError(message, name, value) {
    return makeError(message, "INVALID_ARGUMENT", { argument: name, value: value });
  }
  function unsupported(message, params) {
    return makeError(message, "UNSUPPORTED_OPERATION", params);
  }
  function checkArgumentCount(count, expectedCount, message) {
    if (count < expectedCount) {
      throw makeError("missing argument: " + message, "MISSING_ARGUMENT",
        { count: count, expectedCount: expectedCount });
    }
    if (count > expectedCount) {
      throw makeError("too many arguments: " + message, "UNEXPECTED_ARGUMENT",
        { count: count, expectedCount: expectedCount });
    }
  }

  // properties: defineReadOnly, shallowCopy, resolveProperties.
  function defineReadOnly(object, name, value) {
    Object.defineProperty(object, name, { enumerable: true, value: value, writable: false });
  }
  function shallowCopy(object) {
    const result = {};
    for (const key in object) { result[key] = object[key]; }
    return result;
  }
  function resolveProperties(object) {
    const keys = Object.keys(object);
    return Promise.all(keys.map((key) => object[key])).then((values) => {
      const result = {};
      keys.forEach((key, i) => { result[key] = values[i]; });
      return result;
    });
  }

  function isSigner(value) { return !!(value && value._isSigner); }
  function isProvider(value) { return !!(value && value._isProvider); }

  // There is no ENS on the appliance: a name that is not an address is refused here,
  // where ethers would ask the provider to resolve it.
  function ensUnsupported(name) {
    return unsupported("ENS names are not supported in actions (there is no ENS resolver); use a 0x address",
      { operation: "resolveName", name: name });
  }

  async function resolveName(resolver, nameOrPromise) {
    const name = await nameOrPromise;
    if (typeof name !== "string") {
      throw argumentError("invalid address or ENS name", "name", name);
    }
    let failure;
    try {
      return getAddress(name);
    } catch (error) {
      failure = error;
    }
    if (!resolver) {
      throw unsupported("a provider or signer is needed to resolve ENS names", { operation: "resolveName" });
    }
    // A provider rejects a malformed hex address with getAddress's own error.
    if (isHexString(name)) { throw failure; }
    throw ensUnsupported(name);
  }

  async function resolveAddresses(resolver, value, paramType) {
    if (Array.isArray(paramType)) {
      return await Promise.all(paramType.map((param, index) => resolveAddresses(
        resolver, Array.isArray(value) ? value[index] : value[param.name], param)));
    }
    if (paramType.type === "address") { return await resolveName(resolver, value); }
    if (paramType.type === "tuple") {
      return await resolveAddresses(resolver, value, paramType.components);
    }
    if (paramType.baseType === "array") {
      if (!Array.isArray(value)) {
        throw makeError("invalid value for array", "INVALID_ARGUMENT", { argument: "value", value: value });
      }
      return await Promise.all(value.map((v) => resolveAddresses(resolver, v, paramType.arrayChildren)));
    }
    return value;
  }

  // transactions: accessListify.
  function accessSet(addr, storageKeys) {
    return {
      address: getAddress(addr),
      storageKeys: (storageKeys || []).map((storageKey, index) => {
        if (hexDataLength(storageKey) !== 32) {
          throw lib.makeError("invalid access list storageKey", "INVALID_ARGUMENT",
            { argument: "accessList[" + addr + ":" + index + "]", value: storageKey }, TX_VERSION);
        }
        return storageKey.toLowerCase();
      }),
    };
  }
  function accessListify(value) {
    if (Array.isArray(value)) {
      return value.map((set, index) => {
        if (Array.isArray(set)) {
          if (set.length > 2) {
            throw lib.makeError("access list expected to be [ address, storageKeys[] ]", "INVALID_ARGUMENT",
              { argument: "value[" + index + "]", value: set }, TX_VERSION);
          }
          return accessSet(set[0], set[1]);
        }
        return accessSet(set.address, set.storageKeys);
      });
    }
    const result = Object.keys(value).map((addr) => {
      const keys = {};
      value[addr].forEach((storageKey) => { keys[storageKey] = true; });
      return accessSet(addr, Object.keys(keys).sort());
    });
    // ethers sorts with localeCompare; for hex addresses that is the case-insensitive order.
    result.sort((a, b) => {
      const x = a.address.toLowerCase(), y = b.address.toLowerCase();
      return x < y ? -1 : (x > y ? 1 : 0);
    });
    return result;
  }

  const OVERRIDES = ["nonce", "gasLimit", "gasPrice", "from", "value", "type", "accessList",
    "maxFeePerGas", "maxPriorityFeePerGas", "customData", "ccipReadEnabled"];

  async function populateTransaction(contract, fragment, args) {
    let overrides = {};
    if (args.length === fragment.inputs.length + 1 && typeof args[args.length - 1] === "object") {
      overrides = shallowCopy(args.pop());
    }
    checkArgumentCount(args.length, fragment.inputs.length, "passed to contract");

    if (contract.signer) {
      if (overrides.from) {
        // A Signer's contract may name its own address as "from", nothing else.
        overrides.from = resolveProperties({
          override: resolveName(contract.signer, overrides.from),
          signer: contract.signer.getAddress(),
        }).then(async (check) => {
          if (getAddress(check.signer) !== check.override) {
            throw unsupported("Contract with a Signer cannot override from", { operation: "overrides.from" });
          }
          return check.override;
        });
      } else {
        overrides.from = contract.signer.getAddress();
      }
    } else if (overrides.from) {
      overrides.from = resolveName(contract.provider, overrides.from);
    }

    const resolved = await resolveProperties({
      args: resolveAddresses(contract.signer || contract.provider, args, fragment.inputs),
      address: contract.resolvedAddress,
      overrides: resolveProperties(overrides),
    });

    const data = contract.interface.encodeFunctionData(fragment, resolved.args);
    const tx = { data: data, to: resolved.address };
    const ro = resolved.overrides;
    if (ro.nonce != null) { tx.nonce = BigNumber.from(ro.nonce).toNumber(); }
    if (ro.gasLimit != null) { tx.gasLimit = BigNumber.from(ro.gasLimit); }
    if (ro.gasPrice != null) { tx.gasPrice = BigNumber.from(ro.gasPrice); }
    if (ro.maxFeePerGas != null) { tx.maxFeePerGas = BigNumber.from(ro.maxFeePerGas); }
    if (ro.maxPriorityFeePerGas != null) {
      tx.maxPriorityFeePerGas = BigNumber.from(ro.maxPriorityFeePerGas);
    }
    if (ro.from != null) { tx.from = ro.from; }
    if (ro.type != null) { tx.type = ro.type; }
    if (ro.accessList != null) { tx.accessList = accessListify(ro.accessList); }

    // A gas figure in the ABI ("@gas") plus the calldata's intrinsic cost.
    if (tx.gasLimit == null && fragment.gas != null) {
      let intrinsic = 21000;
      const bytes = arrayify(data);
      for (let i = 0; i < bytes.length; i++) {
        intrinsic += bytes[i] ? 68 : 4;
      }
      tx.gasLimit = BigNumber.from(fragment.gas).add(intrinsic);
    }

    if (ro.value) {
      const value = BigNumber.from(ro.value);
      if (!value.isZero() && !fragment.payable) {
        throw unsupported("non-payable method cannot override value",
          { operation: "overrides.value", value: overrides.value });
      }
      tx.value = value;
    }
    if (ro.customData) { tx.customData = shallowCopy(ro.customData); }
    if (ro.ccipReadEnabled) { tx.ccipReadEnabled = !!ro.ccipReadEnabled; }

    OVERRIDES.forEach((key) => { delete overrides[key]; });
    const leftovers = Object.keys(overrides).filter((key) => overrides[key] != null);
    if (leftovers.length) {
      throw unsupported("cannot override " + leftovers.map((l) => JSON.stringify(l)).join(","),
        { operation: "overrides", overrides: leftovers });
    }
    return tx;
  }

  function buildPopulate(contract, fragment) {
    return function (...args) { return populateTransaction(contract, fragment, args); };
  }

  function buildEstimate(contract, fragment) {
    const signerOrProvider = contract.signer || contract.provider;
    return async function (...args) {
      if (!signerOrProvider) {
        throw unsupported("estimate require a provider or signer", { operation: "estimateGas" });
      }
      const tx = await populateTransaction(contract, fragment, args);
      return await signerOrProvider.estimateGas(tx);
    };
  }

  // The receipt of tx.wait() gets `events`: its logs, decoded where the ABI knows them.
  function addContractWait(contract, tx) {
    const wait = tx.wait.bind(tx);
    tx.wait = (confirmations) => wait(confirmations).then((receipt) => {
      receipt.events = receipt.logs.map((log) => {
        const event = deepCopy(log);
        let parsed = null;
        try { parsed = contract.interface.parseLog(log); } catch (error) { /* not this ABI's */ }
        if (parsed) {
          event.args = parsed.args;
          event.decode = (data, topics) => contract.interface.decodeEventLog(parsed.eventFragment, data, topics);
          event.event = parsed.name;
          event.eventSignature = parsed.signature;
        }
        event.removeListener = () => contract.provider;
        event.getBlock = () => contract.provider.getBlock(receipt.blockHash);
        event.getTransaction = () => contract.provider.getTransaction(receipt.transactionHash);
        event.getTransactionReceipt = () => Promise.resolve(receipt);
        return event;
      });
      return receipt;
    });
  }

  function buildCall(contract, fragment, collapseSimple) {
    const signerOrProvider = contract.signer || contract.provider;
    return async function (...args) {
      let blockTag = undefined;
      if (args.length === fragment.inputs.length + 1 && typeof args[args.length - 1] === "object") {
        const overrides = shallowCopy(args.pop());
        if (overrides.blockTag != null) { blockTag = await overrides.blockTag; }
        delete overrides.blockTag;
        args.push(overrides);
      }
      const tx = await populateTransaction(contract, fragment, args);
      const result = await signerOrProvider.call(tx, blockTag);
      try {
        let value = contract.interface.decodeFunctionResult(fragment, result);
        if (collapseSimple && fragment.outputs.length === 1) { value = value[0]; }
        return value;
      } catch (error) {
        if (error.code === "CALL_EXCEPTION") {
          error.address = contract.address;
          error.args = args;
          error.transaction = tx;
        }
        throw error;
      }
    };
  }

  function buildSend(contract, fragment) {
    return async function (...args) {
      if (!contract.signer) {
        throw unsupported("sending a transaction requires a signer", { operation: "sendTransaction" });
      }
      const txRequest = await populateTransaction(contract, fragment, args);
      const tx = await contract.signer.sendTransaction(txRequest);
      addContractWait(contract, tx);
      return tx;
    };
  }

  function buildDefault(contract, fragment, collapseSimple) {
    return fragment.constant ? buildCall(contract, fragment, collapseSimple) : buildSend(contract, fragment);
  }

  // What queryFilter asks the provider for, and how it dresses each log it gets back.
  function fragmentEvent(contract, fragment, topics) {
    const filter = { address: contract.address };
    const topic = contract.interface.getEventTopic(fragment);
    if (topics) {
      if (topic !== topics[0]) { throw argumentError("topic mismatch", "topics", topics); }
      filter.topics = topics.slice();
    } else {
      filter.topics = [topic];
    }
    return {
      filter: filter,
      prepare(event) {
        event.event = fragment.name;
        event.eventSignature = fragment.format();
        event.decode = (data, topics) => contract.interface.decodeEventLog(fragment, data, topics);
        try {
          event.args = contract.interface.decodeEventLog(fragment, event.data, event.topics);
        } catch (error) {
          event.args = null;
          event.decodeError = error;
        }
      },
    };
  }

  function wildcardEvent(contract) {
    return {
      filter: { address: contract.address },
      prepare(event) {
        try {
          const parsed = contract.interface.parseLog(event);
          event.event = parsed.name;
          event.eventSignature = parsed.signature;
          event.decode = (data, topics) => contract.interface.decodeEventLog(parsed.eventFragment, data, topics);
          event.args = parsed.args;
        } catch (error) { /* no matching event */ }
      },
    };
  }

  function plainEvent(filter) {
    return { filter: filter, prepare() {} };
  }

  function runningEvent(contract, eventName) {
    if (typeof eventName === "string") {
      if (eventName === "error" || eventName === "event") { return plainEvent(null); }
      if (eventName === "*") { return wildcardEvent(contract); }
      return fragmentEvent(contract, contract.interface.getEvent(eventName));
    }
    if (eventName.topics && eventName.topics.length > 0) {
      try {
        const topic = eventName.topics[0];
        if (typeof topic !== "string") { throw new Error("invalid topic"); }
        const fragment = contract.interface.getEvent(topic);
        return fragmentEvent(contract, fragment, eventName.topics);
      } catch (error) { /* an unknown topic: filter by it as given */ }
      return plainEvent({ address: contract.address, topics: eventName.topics });
    }
    return wildcardEvent(contract);
  }

  function wrapEvent(contract, running, log) {
    const event = deepCopy(log);
    event.removeListener = () => {};
    event.getBlock = () => contract.provider.getBlock(log.blockHash);
    event.getTransaction = () => contract.provider.getTransaction(log.transactionHash);
    event.getTransactionReceipt = () => contract.provider.getTransactionReceipt(log.transactionHash);
    running.prepare(event);
    return event;
  }

  function noListeners(operation) {
    throw unsupported("contract event listeners are not supported in actions; use queryFilter",
      { operation: operation });
  }

  class BaseContract {
    constructor(addressOrName, contractInterface, signerOrProvider) {
      const getInterface = (new.target && new.target.getInterface) || BaseContract.getInterface;
      defineReadOnly(this, "interface", getInterface(contractInterface));

      if (signerOrProvider == null) {
        defineReadOnly(this, "provider", null);
        defineReadOnly(this, "signer", null);
      } else if (isSigner(signerOrProvider)) {
        defineReadOnly(this, "provider", signerOrProvider.provider || null);
        defineReadOnly(this, "signer", signerOrProvider);
      } else if (isProvider(signerOrProvider)) {
        defineReadOnly(this, "provider", signerOrProvider);
        defineReadOnly(this, "signer", null);
      } else {
        throw argumentError("invalid signer or provider", "signerOrProvider", signerOrProvider);
      }

      defineReadOnly(this, "callStatic", {});
      defineReadOnly(this, "estimateGas", {});
      defineReadOnly(this, "functions", {});
      defineReadOnly(this, "populateTransaction", {});
      defineReadOnly(this, "filters", {});

      const uniqueFilters = {};
      Object.keys(this.interface.events).forEach((signature) => {
        const event = this.interface.events[signature];
        defineReadOnly(this.filters, signature, (...args) => ({
          address: this.address,
          topics: this.interface.encodeFilterTopics(event, args),
        }));
        if (!uniqueFilters[event.name]) { uniqueFilters[event.name] = []; }
        uniqueFilters[event.name].push(signature);
      });
      Object.keys(uniqueFilters).forEach((name) => {
        const filters = uniqueFilters[name];
        if (filters.length === 1) {
          defineReadOnly(this.filters, name, this.filters[filters[0]]);
        } else {
          lib.warn("Duplicate definition of " + name + " (" + filters.join(", ") + ")");
        }
      });

      defineReadOnly(this, "_runningEvents", {});
      defineReadOnly(this, "_wrappedEmits", {});

      if (addressOrName == null) {
        throw argumentError("invalid contract address or ENS name", "addressOrName", addressOrName);
      }
      defineReadOnly(this, "address", addressOrName);
      if (this.provider) {
        let isAddress = false;
        try { getAddress(addressOrName); isAddress = true; } catch (error) { /* checked below */ }
        if (!isAddress && typeof addressOrName === "string" && !isHexString(addressOrName)) {
          throw ensUnsupported(addressOrName);
        }
        defineReadOnly(this, "resolvedAddress", resolveName(this.provider, addressOrName));
      } else {
        try {
          defineReadOnly(this, "resolvedAddress", Promise.resolve(getAddress(addressOrName)));
        } catch (error) {
          throw unsupported("provider is required to use ENS name as contract address",
            { operation: "new Contract" });
        }
      }
      this.resolvedAddress.catch(() => {});

      const uniqueNames = {};
      const uniqueSignatures = {};
      Object.keys(this.interface.functions).forEach((signature) => {
        const fragment = this.interface.functions[signature];
        if (uniqueSignatures[signature]) {
          lib.warn("Duplicate ABI entry for " + JSON.stringify(signature));
          return;
        }
        uniqueSignatures[signature] = true;
        const key = "%" + fragment.name;
        if (!uniqueNames[key]) { uniqueNames[key] = []; }
        uniqueNames[key].push(signature);

        if (this[signature] == null) {
          defineReadOnly(this, signature, buildDefault(this, fragment, true));
        }
        // `functions` always resolves to the whole Result.
        if (this.functions[signature] == null) {
          defineReadOnly(this.functions, signature, buildDefault(this, fragment, false));
        }
        if (this.callStatic[signature] == null) {
          defineReadOnly(this.callStatic, signature, buildCall(this, fragment, true));
        }
        if (this.populateTransaction[signature] == null) {
          defineReadOnly(this.populateTransaction, signature, buildPopulate(this, fragment));
        }
        if (this.estimateGas[signature] == null) {
          defineReadOnly(this.estimateGas, signature, buildEstimate(this, fragment));
        }
      });

      // Bare names only for functions that are not overloaded.
      Object.keys(uniqueNames).forEach((key) => {
        const signatures = uniqueNames[key];
        if (signatures.length > 1) { return; }
        const name = key.substring(1);
        const signature = signatures[0];
        try {
          if (this[name] == null) { defineReadOnly(this, name, this[signature]); }
        } catch (error) { /* a read-only member of the same name stays */ }
        ["functions", "callStatic", "populateTransaction", "estimateGas"].forEach((bucket) => {
          if (this[bucket][name] == null) { defineReadOnly(this[bucket], name, this[bucket][signature]); }
        });
      });
    }

    static getInterface(contractInterface) {
      if (Interface.isInterface(contractInterface)) { return contractInterface; }
      return new Interface(contractInterface);
    }

    static isIndexed(value) {
      return lib.Indexed.isIndexed(value);
    }

    deployed() {
      return this._deployed();
    }

    _deployed(blockTag) {
      if (!this._deployedPromise) {
        this._deployedPromise = this.provider.getCode(this.address, blockTag).then((code) => {
          if (code === "0x") {
            throw unsupported("contract not deployed", { contractAddress: this.address, operation: "getDeployed" });
          }
          return this;
        });
      }
      return this._deployedPromise;
    }

    fallback(overrides) {
      if (!this.signer) {
        throw unsupported("sending a transactions require a signer", { operation: "sendTransaction(fallback)" });
      }
      const tx = shallowCopy(overrides || {});
      ["from", "to"].forEach((key) => {
        if (tx[key] == null) { return; }
        throw unsupported("cannot override " + key, { operation: key });
      });
      tx.to = this.resolvedAddress;
      return this.deployed().then(() => this.signer.sendTransaction(tx));
    }

    connect(signerOrProvider) {
      if (typeof signerOrProvider === "string") {
        throw unsupported("connect(address) needs a VoidSigner, which actions do not have; connect a provider or a Wallet",
          { operation: "connect" });
      }
      return new this.constructor(this.address, this.interface, signerOrProvider);
    }

    attach(addressOrName) {
      return new this.constructor(addressOrName, this.interface, this.signer || this.provider);
    }

    queryFilter(event, fromBlockOrBlockhash, toBlock) {
      const running = runningEvent(this, event);
      const filter = shallowCopy(running.filter);
      if (typeof fromBlockOrBlockhash === "string" && isHexString(fromBlockOrBlockhash, 32)) {
        if (toBlock != null) {
          throw argumentError("cannot specify toBlock with blockhash", "toBlock", toBlock);
        }
        filter.blockHash = fromBlockOrBlockhash;
      } else {
        filter.fromBlock = fromBlockOrBlockhash != null ? fromBlockOrBlockhash : 0;
        filter.toBlock = toBlock != null ? toBlock : "latest";
      }
      return this.provider.getLogs(filter).then((logs) => logs.map((log) => wrapEvent(this, running, log)));
    }

    on() { return noListeners("on"); }
    once() { return noListeners("once"); }
    emit() { return noListeners("emit"); }
    listenerCount() { return noListeners("listenerCount"); }
    listeners() { return noListeners("listeners"); }
    removeAllListeners() { return noListeners("removeAllListeners"); }
    off() { return noListeners("off"); }
    removeListener() { return noListeners("removeListener"); }
  }

  class Contract extends BaseContract {}

  return { BaseContract: BaseContract, Contract: Contract };
})
