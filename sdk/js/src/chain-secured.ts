/**
 * `@appliance/sdk/chain-secured`: the EIP-712 envelope of the wallet-signature
 * (ChainSecured) endpoints and the `X-Wallet-Auth` header, signed with viem.
 *
 * The envelope is the spec's, exactly as the server checks it
 * (`appliance/typed-data/src/lib.rs`): domain `{name: "Service ChainSecured", version: "1",
 * chainId}`, types `EIP712Domain(string name,string version,uint256 chainId)` and
 * `<primaryType>(address address,uint256 issuedAt)`, message `{address, issuedAt}`, with
 * `chainId` and `issuedAt` written as decimal strings (the server takes numbers or decimal
 * strings). The server accepts an `issuedAt` within 300 seconds of its clock, and each
 * signature once.
 */
import { getAddress, type Account, type WalletClient } from "viem";

import type { SignedTypedData } from "./wallet-auth.js";

export { walletAuthHeader, decodeWalletAuthHeader, type SignedTypedData } from "./wallet-auth.js";

/** The four flows: three endpoints and the billing header. */
export type ChainSecuredPrimaryType = "CreateWallet" | "ConvertAccount" | "AddUsageApiKey" | "BillingAuth";

const PRIMARY_TYPES: readonly ChainSecuredPrimaryType[] = ["CreateWallet", "ConvertAccount", "AddUsageApiKey", "BillingAuth"];

export const CHAIN_SECURED_DOMAIN_NAME = "Service ChainSecured";
export const CHAIN_SECURED_DOMAIN_VERSION = "1";

type Field = { name: string; type: string };

/** The JSON typed data the endpoints take (`typed_data`). */
export interface ChainSecuredTypedData<P extends ChainSecuredPrimaryType = ChainSecuredPrimaryType> {
  types: { EIP712Domain: Field[] } & { [K in P]: Field[] };
  primaryType: P;
  domain: { name: string; version: string; chainId: string };
  message: { address: `0x${string}`; issuedAt: string };
}

/** A uint as a decimal string (numbers must be safe non-negative integers). */
function decimal(value: number | bigint | string, what: string): string {
  if (typeof value === "bigint" && value >= 0n) return value.toString();
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return value.toString();
  if (typeof value === "string" && /^(0|[1-9][0-9]*)$/.test(value)) return value;
  throw new TypeError(`${what} must be a non-negative integer (number, bigint or decimal string), not ${String(value)}`);
}

function checkPrimaryType(primaryType: string): asserts primaryType is ChainSecuredPrimaryType {
  if (!PRIMARY_TYPES.includes(primaryType as ChainSecuredPrimaryType)) {
    throw new TypeError(`primaryType must be one of ${PRIMARY_TYPES.join(", ")}, not ${primaryType}`);
  }
}

/** Seconds since the Unix epoch. */
export function unixNow(): number {
  return Math.floor(Date.now() / 1000);
}

/**
 * The typed data for `primaryType` about `address` on `chainId` (the node's, from
 * `getNodeChainConfig().chain_id`), issued at `issuedAt` (default: now). The address is
 * written EIP-55 checksummed.
 */
export function chainSecuredTypedData<P extends ChainSecuredPrimaryType>(
  primaryType: P,
  params: { address: string; chainId: number | bigint | string; issuedAt?: number | bigint | string },
): ChainSecuredTypedData<P> {
  checkPrimaryType(primaryType);
  const fields: Field[] = [
    { name: "address", type: "address" },
    { name: "issuedAt", type: "uint256" },
  ];
  return {
    types: {
      EIP712Domain: [
        { name: "name", type: "string" },
        { name: "version", type: "string" },
        { name: "chainId", type: "uint256" },
      ],
      [primaryType]: fields,
    } as ChainSecuredTypedData<P>["types"],
    primaryType,
    domain: {
      name: CHAIN_SECURED_DOMAIN_NAME,
      version: CHAIN_SECURED_DOMAIN_VERSION,
      chainId: decimal(params.chainId, "chainId"),
    },
    message: {
      address: getAddress(params.address),
      issuedAt: decimal(params.issuedAt ?? unixNow(), "issuedAt"),
    },
  };
}

/** What can sign: a viem Account (e.g. `privateKeyToAccount`) or a WalletClient (e.g. a browser wallet). */
export type ChainSecuredSigner = Account | WalletClient;

function isWalletClient(signer: ChainSecuredSigner): signer is WalletClient {
  return typeof (signer as WalletClient).getAddresses === "function";
}

/**
 * The last default `issuedAt` given to each (signer, flow, chain) in this process. Signing
 * is deterministic (RFC 6979), so two envelopes signed in the same second would be the same
 * signature and the second one a replay: a default `issuedAt` is moved one second past the
 * last one instead (still well inside the server's ±300 s window).
 */
const lastIssuedAt = new Map<string, bigint>();

function freshIssuedAt(address: string, primaryType: string, chainId: string): bigint {
  const key = `${address.toLowerCase()}|${primaryType}|${chainId}`;
  const now = BigInt(unixNow());
  const last = lastIssuedAt.get(key);
  const issued = last !== undefined && last >= now ? last + 1n : now;
  lastIssuedAt.set(key, issued);
  return issued;
}

/**
 * Signs the `primaryType` envelope about the signer's own address (`eth_signTypedData_v4`)
 * and returns the body the endpoint takes, `{typed_data, signature}` (for `BillingAuth`,
 * pass it to `walletAuthHeader`). Sign anew for every request: the server accepts each
 * signature once. Without `issuedAt`, it is now, or one second past the last default this
 * process gave the same signer, flow and chain, so that back-to-back calls never repeat a
 * signature.
 */
export async function signChainSecured<P extends ChainSecuredPrimaryType>(
  signer: ChainSecuredSigner,
  primaryType: P,
  params: { chainId: number | bigint | string; issuedAt?: number | bigint | string },
): Promise<SignedTypedData<ChainSecuredTypedData<P>>> {
  let account: Account | `0x${string}`;
  let address: string;
  if (isWalletClient(signer)) {
    if (signer.account) {
      account = signer.account;
      address = signer.account.address;
    } else {
      const [first] = await signer.getAddresses();
      if (!first) throw new Error("the wallet client has no account: connect a wallet first");
      account = first;
      address = first;
    }
  } else {
    if (typeof signer?.signTypedData !== "function") {
      throw new TypeError("signChainSecured needs a viem Account that can sign typed data (e.g. privateKeyToAccount) or a WalletClient");
    }
    account = signer;
    address = signer.address;
  }
  const issuedAt = params.issuedAt ?? freshIssuedAt(address, primaryType, decimal(params.chainId, "chainId"));
  const typed_data = chainSecuredTypedData(primaryType, { address, chainId: params.chainId, issuedAt });
  // viem takes the uint256 values as bigints; the JSON keeps them as decimal strings.
  const request = {
    domain: { ...typed_data.domain, chainId: BigInt(typed_data.domain.chainId) },
    types: typed_data.types as Record<string, Field[]>,
    primaryType: typed_data.primaryType as string,
    message: { address: typed_data.message.address, issuedAt: BigInt(typed_data.message.issuedAt) },
  };
  const signature = isWalletClient(signer)
    ? await signer.signTypedData({ account, ...request } as Parameters<WalletClient["signTypedData"]>[0])
    : await (signer as { signTypedData: (r: unknown) => Promise<`0x${string}`> }).signTypedData(request);
  return { typed_data, signature };
}
