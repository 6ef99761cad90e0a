/**
 * Which operating system produced a deployment's TDX quote: the quote's MRTD and RTMR0-2
 * (firmware, kernel, command line, initrd) compared with a policy file of accepted OS
 * measurements, the same JSON `evidence verify --os-measurements FILE` reads and
 * `evidence os-measure` writes (`{"entries": [{os_image_hash, mrtd, rtmr0, rtmr1, rtmr2,
 * vm_shape, version?, is_dev?}]}`), and the same rules as its `os-image` check.
 *
 * What this does NOT do: recompute the registers from an OS image (that is a CLI job:
 * `evidence verify --os-image DIR`), or decide that the quote is genuine (its DCAP
 * signature and TCB status need Intel's collateral: `evidence verify` or `appliance-cli
 * verify`). It tells which OS measurements the quote states, and whether a policy accepts
 * them. Without a policy the OS is NOT pinned: any firmware, kernel or command line could
 * have produced the quote.
 */

/** One accepted OS measurement (an entry of the policy file). */
export interface OsPolicyEntry {
  /** SHA-256 of the image's `sha256sum.txt`, 64 hex digits. */
  os_image_hash: string;
  version?: string;
  is_dev?: boolean;
  /** The VM shape the registers are for (`cpu_count`, `memory_size`, `qemu_version`, …). */
  vm_shape?: Record<string, unknown>;
  /** Accepted MRTD values (96 hex each); a single string is accepted too. */
  mrtd: string | string[];
  /** RTMR0 for this image and shape; `null` or absent: not pinned by this entry. */
  rtmr0?: string | null;
  rtmr1: string;
  rtmr2: string;
}

/** A policy file: the OS measurements a verifier accepts. */
export interface OsPolicy {
  entries: OsPolicyEntry[];
}

/** The registers a TDX quote states (lowercase hex), and whether it is a simulated one. */
export interface QuoteRegisters {
  version: number;
  /** The `simulated` provider's marker: a development stack, no TDX module measured anything. */
  simulated: boolean;
  mrtd: string;
  rtmr0: string;
  rtmr1: string;
  rtmr2: string;
  rtmr3: string;
}

/**
 * `pass`: every OS register is pinned by a matching policy entry. `fail`: the policy has
 * no entry that matches. `unpinned`: no policy, or the matching entry leaves RTMR0
 * unpinned. `n/a`: a simulated quote (no OS measurement exists).
 */
export type OsCheckStatus = "pass" | "fail" | "unpinned" | "n/a";

export interface OsCheck {
  status: OsCheckStatus;
  /** True for `pass`, for `unpinned` with `allowUnpinnedOs`, for `n/a` with `allowSimulated`. */
  ok: boolean;
  /** One paragraph a person reads: what matched or differed, and what was not checked. */
  detail: string;
  /** The image hash the deployment names (vm_config, or /info tcb_info), else the entry's. */
  osImageHash: string | null;
  registers: QuoteRegisters | null;
  /** The index of the matching policy entry. */
  entry: number | null;
  /** Registers pinned by the policy (taken on trust from the policy file). */
  pinned: string[];
  /** Registers nothing pinned. */
  unpinned: string[];
  /** The OS version and dev flag: the policy entry's, else the host's image name (not measured). */
  version: string | null;
  isDev: boolean | null;
}

export interface CheckOsOptions {
  /** The TDX quote: bytes, or hex as `/attestation` serves it. */
  quote: Uint8Array | string;
  /** `/attestation`'s `vm_config` (a JSON string, an object, or "" / null where unknown). */
  vmConfig?: string | Record<string, unknown> | null;
  /** `/info`'s `tcb_info` (object or JSON string), for its `os_image_hash`. */
  tcbInfo?: string | Record<string, unknown> | null;
  /** The policy: a parsed one, or the file's text. Absent: the OS is not pinned. */
  policy?: OsPolicy | string | null;
  /** Count an unpinned OS as ok (the caller accepts not knowing the OS). */
  allowUnpinnedOs?: boolean;
  /** Count a simulated quote as ok (development stack only: NOT confidential). */
  allowSimulated?: boolean;
}

/** Said by every result: where the registers can be recomputed. */
export const RECOMPUTE_NOTE =
  "Recomputing MRTD and RTMR0-2 from an OS image is a command-line job: evidence verify --os-image DIR (with --os-measurements FILE for RTMR0).";

const REGISTERS = ["MRTD", "RTMR0", "RTMR1", "RTMR2"] as const;

/** `vm_config` fields that describe the VM shape (as the Rust verifier lists them). */
const SHAPE_FIELDS = [
  "cpu_count",
  "memory_size",
  "qemu_version",
  "qemu_single_pass_add_pages",
  "pic",
  "pci_hole64_size",
  "hugepages",
  "num_gpus",
  "num_nvswitches",
  "num_nics",
  "num_verity_volumes",
  "swtpm",
  "hotplug_off",
  "host_share_mode",
];

const SIMULATED_MARKER = "SIMULATED-TDX-DEV";

/** A malformed policy file, quote or vm_config. */
export class OsMeasurementError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OsMeasurementError";
  }
}

function hexOf(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += b.toString(16).padStart(2, "0");
  return s;
}

/** Surrounding ASCII whitespace (space, tab, LF, FF, CR) removed, as Rust's `trim_ascii`. */
function trimAscii(s: string): string {
  return s.replace(/^[ \t\n\f\r]+|[ \t\n\f\r]+$/g, "");
}

/**
 * A hex value of a policy file or vm_config, lowercase: surrounding ASCII whitespace
 * ignored, at most one lowercase `0x` prefix (`0X`, `0x0x`: malformed), then exactly
 * `2 * bytes` digits of either case. The Rust verifier's rule.
 */
function normHex(value: unknown, bytes: number, what: string): string {
  if (typeof value !== "string") throw new OsMeasurementError(`${what}: not a hex string`);
  const trimmed = trimAscii(value);
  const t = trimmed.startsWith("0x") ? trimmed.slice(2) : trimmed;
  if (t.length !== 2 * bytes || !/^[0-9a-fA-F]*$/.test(t)) {
    throw new OsMeasurementError(`${what}: not ${2 * bytes} hex digits`);
  }
  return t.toLowerCase();
}

/** Largest `cpu_count` of a policy entry (as the Rust verifier's u32). */
const MAX_CPU_COUNT = 0xffff_ffff;

/** Checks a policy entry's `vm_shape`: `cpu_count` and `memory_size`, when present, are whole numbers. */
function checkShape(shape: Record<string, unknown>, what: (field: string) => string): void {
  for (const [field, max] of [
    ["cpu_count", MAX_CPU_COUNT],
    ["memory_size", Number.MAX_SAFE_INTEGER],
  ] as const) {
    if (!(field in shape)) continue;
    const v = shape[field];
    if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > max) {
      throw new OsMeasurementError(what(`vm_shape.${field}: not a whole number from 0 to ${max}`));
    }
  }
}

function hexToBytes(text: string): Uint8Array {
  // At most one lowercase `0x`, as the Rust verifier reads a quote's hex.
  let t = text.trim();
  if (t.startsWith("0x")) t = t.slice(2);
  if (t.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(t)) throw new OsMeasurementError("quote: not hex");
  const out = new Uint8Array(t.length / 2);
  for (let i = 0; i < out.length; i += 1) out[i] = parseInt(t.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** The TD report's fields in quote order, with their sizes (as evidence/src/quote.rs reads them). */
const REPORT_FIELDS = [
  ["teeTcbSvn", 16],
  ["mrSeam", 48],
  ["mrSignerSeam", 48],
  ["seamAttributes", 8],
  ["tdAttributes", 8],
  ["xfam", 8],
  ["mrTd", 48],
  ["mrConfigId", 48],
  ["mrOwner", 48],
  ["mrOwnerConfig", 48],
  ["rtmr0", 48],
  ["rtmr1", 48],
  ["rtmr2", 48],
  ["rtmr3", 48],
  ["reportData", 64],
] as const;

/** The TD report of a quote: each field's bytes, and RTMR0-3 again as `rtmrs`. */
export type TdReport = { [K in (typeof REPORT_FIELDS)[number][0]]: Uint8Array } & {
  rtmrs: [Uint8Array, Uint8Array, Uint8Array, Uint8Array];
};

/** A TDX quote's header fields and TD report (bytes). */
export interface ParsedQuote {
  version: number;
  teeType: number;
  /** The header's 20 bytes of user data (the `simulated` provider's marker is there). */
  userData: Uint8Array;
  /** The `simulated` provider's marker: a development stack, no TDX module measured anything. */
  simulated: boolean;
  report: TdReport;
}

/**
 * Parses a TDX quote, v4 or v5 (header 48 bytes; v5 adds a 6-byte body descriptor): the
 * header and the TD report's fields as bytes. Only slices: whether the quote is genuine is
 * not decided here.
 */
export function parseQuote(quote: Uint8Array | string): ParsedQuote {
  const bytes = typeof quote === "string" ? hexToBytes(quote) : quote;
  const need = (n: number, what: string) => {
    if (bytes.length < n) {
      throw new OsMeasurementError(`quote is truncated: ${what} needs ${n} bytes, ${bytes.length} present`);
    }
  };
  need(48, "header");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = view.getUint16(0, true);
  const teeType = view.getUint32(4, true);
  if (version !== 4 && version !== 5) throw new OsMeasurementError(`unsupported quote version ${version} (only 4 and 5)`);
  if (teeType !== 0x81) throw new OsMeasurementError(`not a TDX quote (tee_type 0x${teeType.toString(16)})`);
  const userData = bytes.slice(28, 48);
  let body = 48;
  let bodyLen = 584;
  if (version === 5) {
    need(54, "v5 body descriptor");
    const bodyType = view.getUint16(48, true);
    const size = view.getUint32(50, true);
    const expected = bodyType === 2 ? 584 : bodyType === 3 ? 648 : null;
    if (expected === null) throw new OsMeasurementError(`unsupported v5 body type ${bodyType}`);
    if (size !== expected) throw new OsMeasurementError(`v5 body size ${size} does not match body type ${bodyType}`);
    bodyLen = expected;
    body = 54;
  }
  need(body + bodyLen, "TD report");
  const fields: Record<string, Uint8Array> = {};
  let off = body;
  for (const [name, len] of REPORT_FIELDS) {
    fields[name] = bytes.slice(off, off + len);
    off += len;
  }
  const report = { ...fields, rtmrs: [fields.rtmr0, fields.rtmr1, fields.rtmr2, fields.rtmr3] } as unknown as TdReport;
  const marker = new TextEncoder().encode(SIMULATED_MARKER);
  const simulated = marker.every((b, i) => userData[i] === b);
  return { version, teeType, userData, simulated, report };
}

/** MRTD and RTMR0-3 of a TDX quote, v4 or v5, as lowercase hex ([`parseQuote`]). */
export function quoteRegisters(quote: Uint8Array | string): QuoteRegisters {
  const { version, simulated, report } = parseQuote(quote);
  return {
    version,
    simulated,
    mrtd: hexOf(report.mrTd),
    rtmr0: hexOf(report.rtmr0),
    rtmr1: hexOf(report.rtmr1),
    rtmr2: hexOf(report.rtmr2),
    rtmr3: hexOf(report.rtmr3),
  };
}

function asObject(value: unknown, what: string): Record<string, unknown> {
  if (typeof value === "string") {
    try {
      value = JSON.parse(value);
    } catch (e) {
      throw new OsMeasurementError(`${what}: ${(e as Error).message}`);
    }
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new OsMeasurementError(`${what} is not a JSON object`);
  }
  return value as Record<string, unknown>;
}

/**
 * Parses and checks a policy file (its text, or the parsed JSON): every entry must have a
 * 64-hex `os_image_hash`, at least one 96-hex `mrtd`, 96-hex `rtmr1`/`rtmr2` and `rtmr0`
 * (or null); `vm_shape` (an object, if present) with `cpu_count` (0 to 2^32 - 1) and
 * `memory_size` (0 to 2^53 - 1) whole numbers; `version` a string and `is_dev` a boolean
 * (or null). Any malformed entry refuses the file. Values come back lowercase without `0x`.
 */
export function parseOsPolicy(input: string | unknown): OsPolicy {
  const obj = asObject(input, "policy file");
  if (!Array.isArray(obj.entries)) throw new OsMeasurementError('policy file: no "entries" array');
  const entries = obj.entries.map((raw: unknown, i: number): OsPolicyEntry => {
    const what = (field: string) => `policy file entry ${i}: ${field}`;
    const e = asObject(raw, `policy file entry ${i}`);
    const mrtds = typeof e.mrtd === "string" ? [e.mrtd] : e.mrtd;
    if (!Array.isArray(mrtds) || mrtds.length === 0) throw new OsMeasurementError(what("mrtd: no value"));
    // Not a JSON string to parse: an object (as the Rust verifier's serde reads it).
    if (e.vm_shape !== undefined && (typeof e.vm_shape !== "object" || e.vm_shape === null || Array.isArray(e.vm_shape))) {
      throw new OsMeasurementError(`${what("vm_shape")} is not a JSON object`);
    }
    const shape = (e.vm_shape ?? {}) as Record<string, unknown>;
    checkShape(shape, what);
    for (const [field, type] of [
      ["version", "string"],
      ["is_dev", "boolean"],
    ] as const) {
      const v = e[field];
      if (v !== undefined && v !== null && typeof v !== type) throw new OsMeasurementError(what(`${field}: not a ${type}`));
    }
    const entry: OsPolicyEntry = {
      os_image_hash: normHex(e.os_image_hash, 32, what("os_image_hash")),
      vm_shape: shape,
      mrtd: mrtds.map((m: unknown) => normHex(m, 48, what("mrtd"))),
      rtmr0: e.rtmr0 === undefined || e.rtmr0 === null ? null : normHex(e.rtmr0, 48, what("rtmr0")),
      rtmr1: normHex(e.rtmr1, 48, what("rtmr1")),
      rtmr2: normHex(e.rtmr2, 48, what("rtmr2")),
    };
    if (typeof e.version === "string") entry.version = e.version;
    if (typeof e.is_dev === "boolean") entry.is_dev = e.is_dev;
    return entry;
  });
  return { entries };
}

/**
 * JSON with sorted keys, to compare and show shape values (the Rust verifier writes the
 * same text: whole numbers without a fraction).
 */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v !== null && typeof v === "object") {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(v);
}

interface VmConfig {
  osImageHash: string | null;
  image: string | null;
  shape: Record<string, unknown>;
}

function parseVmConfig(value: CheckOsOptions["vmConfig"]): VmConfig {
  if (value === undefined || value === null || (typeof value === "string" && !value.trim())) {
    return { osImageHash: null, image: null, shape: {} };
  }
  const obj = asObject(value, "vm_config");
  const h = obj.os_image_hash;
  const osImageHash = typeof h === "string" && h ? normHex(h, 32, "vm_config os_image_hash") : null;
  const shape: Record<string, unknown> = {};
  for (const k of SHAPE_FIELDS) if (obj[k] !== undefined) shape[k] = obj[k];
  return { osImageHash, image: typeof obj.image === "string" ? obj.image : null, shape };
}

function infoImageHash(tcbInfo: CheckOsOptions["tcbInfo"]): string | null {
  if (tcbInfo === undefined || tcbInfo === null || tcbInfo === "") return null;
  const h = asObject(tcbInfo, "/info tcb_info").os_image_hash;
  if (typeof h !== "string") return null;
  const t = trimAscii(h);
  return t === "" || t === "0x" ? null : normHex(t, 32, "/info tcb_info.os_image_hash");
}

/** Version and dev flag from the host's image name (`dstack-0.5.3`, `dstack-dev-0.5.3`). */
function imageNameInfo(name: string | null): [string, boolean] | null {
  if (!name) return null;
  const version = name.split("-").pop() ?? "";
  return /^\d+\.\d+\.\d+/.test(version) && version.split(".").slice(0, 3).every((p) => /^\d+$/.test(p))
    ? [version, name.includes("-dev-")]
    : null;
}

/**
 * The fields where the deployment's shape and an entry's both state a value and differ, in
 * the order of the field names (as the Rust verifier lists them). A field vm_config states
 * is compared as stated: `"4"` never equals an entry's `4`.
 */
function shapeDifferences(actual: Record<string, unknown>, entry: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const k of Object.keys(actual).sort()) {
    const a = actual[k];
    if (!Object.prototype.hasOwnProperty.call(entry, k)) continue;
    const b = entry[k];
    if (canonical(a) !== canonical(b)) out.push(`vm_config ${k} ${canonical(a)} != ${canonical(b)} (entry)`);
  }
  return out;
}

/**
 * Compares the quote's OS registers with the policy, as `evidence verify`'s `os-image`
 * check does with `--os-measurements` (see the module documentation for what it does not
 * do). Throws {@link OsMeasurementError} on a malformed quote, vm_config or policy.
 */
export function checkOsMeasurements(opts: CheckOsOptions): OsCheck {
  const registers = quoteRegisters(opts.quote);
  const result: OsCheck = {
    status: "n/a",
    ok: false,
    detail: "",
    osImageHash: null,
    registers,
    entry: null,
    pinned: [],
    unpinned: [],
    version: null,
    isDev: null,
  };
  if (registers.simulated) {
    result.ok = Boolean(opts.allowSimulated);
    result.detail =
      "Simulated quote: no TDX module measured a firmware, kernel or command line, so there is no OS measurement to pin (development stack only, NOT confidential).";
    return result;
  }
  const vm = parseVmConfig(opts.vmConfig);
  const fromInfo = infoImageHash(opts.tcbInfo);
  if (vm.osImageHash && fromInfo && vm.osImageHash !== fromInfo) {
    result.status = "fail";
    result.detail = `vm_config names os_image_hash ${vm.osImageHash}, /info tcb_info names ${fromInfo}.`;
    return result;
  }
  const claimed = vm.osImageHash ?? fromInfo;
  result.osImageHash = claimed;
  const named = imageNameInfo(vm.image);
  if (named) [result.version, result.isDev] = named;
  const actual = [registers.mrtd, registers.rtmr0, registers.rtmr1, registers.rtmr2];

  if (opts.policy === undefined || opts.policy === null || opts.policy === "") {
    result.status = "unpinned";
    result.ok = Boolean(opts.allowUnpinnedOs);
    result.unpinned = [...REGISTERS];
    result.detail = `The OS is NOT pinned: no OS measurements policy was given, so MRTD and RTMR0-2 (firmware, kernel, command line, initrd) were not compared with anything, and any OS could have produced this quote. Give a policy file (as evidence verify --os-measurements FILE reads). ${RECOMPUTE_NOTE}`;
    return result;
  }
  const policy = typeof opts.policy === "string" ? parseOsPolicy(opts.policy) : parseOsPolicy(opts.policy);

  const why: string[] = [];
  for (const [i, entry] of policy.entries.entries()) {
    if (claimed && entry.os_image_hash !== claimed) continue;
    const mrtds = Array.isArray(entry.mrtd) ? entry.mrtd : [entry.mrtd];
    const differs: string[] = [];
    if (!mrtds.includes(actual[0]!)) differs.push("MRTD");
    if (entry.rtmr0 && entry.rtmr0 !== actual[1]) differs.push("RTMR0");
    if (entry.rtmr1 !== actual[2]) differs.push("RTMR1");
    if (entry.rtmr2 !== actual[3]) differs.push("RTMR2");
    differs.push(...shapeDifferences(vm.shape, entry.vm_shape ?? {}));
    if (differs.length) {
      why.push(`entry ${i} differs in ${differs.join(", ")}`);
      continue;
    }
    result.entry = i;
    result.osImageHash = claimed ?? entry.os_image_hash;
    if (entry.version !== undefined || entry.is_dev !== undefined) {
      result.version = entry.version ?? null;
      result.isDev = entry.is_dev ?? null;
    }
    result.pinned = entry.rtmr0 ? [...REGISTERS] : ["MRTD", "RTMR1", "RTMR2"];
    result.unpinned = entry.rtmr0 ? [] : ["RTMR0"];
    const head = `Policy entry ${i} matches: ${result.pinned.join(", ")} equal the policy's (taken on trust from the policy file) for os_image_hash ${result.osImageHash}.`;
    if (entry.rtmr0) {
      result.status = "pass";
      result.ok = true;
      result.detail = `${head} ${RECOMPUTE_NOTE}`;
    } else {
      result.status = "unpinned";
      result.ok = Boolean(opts.allowUnpinnedOs);
      result.detail = `${head} RTMR0 is NOT pinned: the entry has no rtmr0 (it covers the ACPI tables QEMU builds for the VM shape). ${RECOMPUTE_NOTE}`;
    }
    return result;
  }
  result.status = "fail";
  const target = claimed ?? "any os_image_hash (the deployment names none)";
  result.detail = why.length
    ? `No policy entry for ${target} matches the quote: ${why.join("; ")}. ${RECOMPUTE_NOTE}`
    : `The policy file has no entry for os_image_hash ${target}. ${RECOMPUTE_NOTE}`;
  return result;
}

/** The two calls {@link checkDeploymentOs} makes (an {@link ApplianceClient} has both). */
export interface EvidenceSource {
  attestation(): Promise<{ quote: string; vm_config: string }>;
  info(): Promise<{ tcb_info: Record<string, unknown> }>;
}

/**
 * Fetches `/attestation` and `/info` with `client` and checks the quote's OS measurements
 * against `options.policy` ({@link checkOsMeasurements}).
 */
export async function checkDeploymentOs(
  client: EvidenceSource,
  options: Omit<CheckOsOptions, "quote" | "vmConfig" | "tcbInfo"> = {},
): Promise<OsCheck> {
  const [attestation, info] = await Promise.all([client.attestation(), client.info()]);
  return checkOsMeasurements({
    ...options,
    quote: attestation.quote,
    vmConfig: attestation.vm_config,
    tcbInfo: info.tcb_info,
  });
}
