/**
 * `@appliance/sdk`: a typed client of the appliance's `/core/v1` API for node and
 * browsers. The EIP-712 (ChainSecured) helpers, which need viem, are in
 * `@appliance/sdk/chain-secured`.
 */
export { ApplianceError } from "./errors.js";
export {
  createClient,
  operations,
  type ApplianceClient,
  type CallOptions,
  type ClientOptions,
  type Query,
  type RawClient,
  type RequestBody,
  type ResponseBody,
  type Schemas,
} from "./client.js";
export { paginate, listAll, type PageQuery, type PaginateOptions } from "./paginate.js";
export { computeCidV0, hashedCid } from "./cid.js";
export {
  checkDeploymentOs,
  checkOsMeasurements,
  parseOsPolicy,
  parseQuote,
  quoteRegisters,
  OsMeasurementError,
  RECOMPUTE_NOTE,
  type CheckOsOptions,
  type EvidenceSource,
  type OsCheck,
  type OsCheckStatus,
  type OsPolicy,
  type OsPolicyEntry,
  type ParsedQuote,
  type TdReport,
  type QuoteRegisters,
} from "./os-measurements.js";
export { walletAuthHeader, decodeWalletAuthHeader, type SignedTypedData } from "./wallet-auth.js";
export type { components, paths, operations as operationTypes } from "./schema.js";
