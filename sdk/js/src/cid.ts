/**
 * The CIDv0 of action code, exactly as the appliance computes it (`appliance/domain/src/cid.rs`)
 * and as `ipfs add --only-hash` gives it with its defaults: a UnixFS file of dag-pb
 * nodes, 262 144-byte chunks, a balanced DAG of at most 174 links per node, sha2-256,
 * base58btc. sha2-256 comes from WebCrypto (`globalThis.crypto.subtle`: node 20 and every
 * browser in a secure context).
 */
import { keccak_256 } from "@noble/hashes/sha3";

const CHUNK_SIZE = 262_144;
const MAX_LINKS = 174;
const SHA2_256 = 0x12;
const SHA2_256_LEN = 32;
const UNIXFS_FILE = 2;
const WIRE_VARINT = 0;
const WIRE_LEN = 2;
const BASE58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/** One node of the DAG as its parent sees it. */
interface DagNode {
  digest: Uint8Array;
  /** The block's length plus its links' Tsize. */
  tsize: number;
  /** File bytes under the node. */
  filesize: number;
}

/** A growable byte buffer writing protobuf keys and varints. */
class Writer {
  private parts: Uint8Array[] = [];
  private scratch: number[] = [];
  length = 0;

  key(field: number, wireType: number): this {
    return this.byte((field << 3) | wireType);
  }

  byte(b: number): this {
    this.scratch.push(b);
    this.length += 1;
    return this;
  }

  /** An unsigned varint (exact up to 2^53, far beyond any file here). */
  varint(value: number): this {
    let v = value;
    while (v >= 0x80) {
      this.byte((v % 0x80) | 0x80);
      v = Math.floor(v / 0x80);
    }
    return this.byte(v);
  }

  bytes(data: Uint8Array): this {
    this.flush();
    this.parts.push(data);
    this.length += data.length;
    return this;
  }

  finish(): Uint8Array {
    this.flush();
    const out = new Uint8Array(this.length);
    let at = 0;
    for (const part of this.parts) {
      out.set(part, at);
      at += part.length;
    }
    return out;
  }

  private flush(): void {
    if (this.scratch.length) {
      this.parts.push(Uint8Array.from(this.scratch));
      this.scratch = [];
    }
  }
}

function subtle(): SubtleCrypto {
  const s = globalThis.crypto?.subtle;
  if (!s) {
    throw new Error(
      "computeCidV0 needs WebCrypto (globalThis.crypto.subtle): node 20 or later, or a browser page served over HTTPS or from localhost",
    );
  }
  return s;
}

async function sha256(data: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await subtle().digest("SHA-256", data as Uint8Array<ArrayBuffer>));
}

/** A leaf: `PBNode { Data = UnixFS { Type = File, Data = chunk (absent when empty), filesize } }`. */
async function leaf(chunk: Uint8Array): Promise<DagNode> {
  const unixfs = new Writer().key(1, WIRE_VARINT).varint(UNIXFS_FILE);
  if (chunk.length > 0) unixfs.key(2, WIRE_LEN).varint(chunk.length).bytes(chunk);
  unixfs.key(3, WIRE_VARINT).varint(chunk.length);
  const data = unixfs.finish();
  const block = new Writer().key(1, WIRE_LEN).varint(data.length).bytes(data).finish();
  return { digest: await sha256(block), tsize: block.length, filesize: chunk.length };
}

/** A parent: links first (Hash, empty Name, Tsize), then `Data = UnixFS { File, filesize, blocksizes }`. */
async function parent(children: DagNode[]): Promise<DagNode> {
  const block = new Writer();
  for (const child of children) {
    const link = new Writer()
      .key(1, WIRE_LEN)
      .varint(2 + SHA2_256_LEN)
      .byte(SHA2_256)
      .byte(SHA2_256_LEN)
      .bytes(child.digest)
      .key(2, WIRE_LEN)
      .varint(0)
      .key(3, WIRE_VARINT)
      .varint(child.tsize)
      .finish();
    block.key(2, WIRE_LEN).varint(link.length).bytes(link);
  }
  const filesize = children.reduce((sum, c) => sum + c.filesize, 0);
  const unixfs = new Writer().key(1, WIRE_VARINT).varint(UNIXFS_FILE).key(3, WIRE_VARINT).varint(filesize);
  for (const child of children) unixfs.key(4, WIRE_VARINT).varint(child.filesize);
  const data = unixfs.finish();
  block.key(1, WIRE_LEN).varint(data.length).bytes(data);
  const bytes = block.finish();
  const linksTsize = children.reduce((sum, c) => sum + c.tsize, 0);
  return { digest: await sha256(bytes), tsize: bytes.length + linksTsize, filesize };
}

function base58(bytes: Uint8Array): string {
  let zeros = 0;
  while (zeros < bytes.length && bytes[zeros] === 0) zeros++;
  // Base-58 digits, least significant first.
  const digits: number[] = [];
  for (let i = zeros; i < bytes.length; i++) {
    let carry = bytes[i]!;
    for (let j = 0; j < digits.length; j++) {
      carry += digits[j]! << 8;
      digits[j] = carry % 58;
      carry = Math.floor(carry / 58);
    }
    while (carry > 0) {
      digits.push(carry % 58);
      carry = Math.floor(carry / 58);
    }
  }
  let text = "1".repeat(zeros);
  for (let i = digits.length - 1; i >= 0; i--) text += BASE58_ALPHABET[digits[i]!];
  return text;
}

const encoder = new TextEncoder();

/** The UTF-8 bytes of `code` (a string), or `code` itself. */
function codeBytes(code: string | Uint8Array): Uint8Array {
  if (typeof code === "string") return encoder.encode(code);
  if (code instanceof Uint8Array) return code;
  throw new TypeError("computeCidV0 takes the code as a string or a Uint8Array");
}

/**
 * The CIDv0 (`Qm…`) the appliance gives `code` (what `add_action` and
 * `get_lit_action_ipfs_id` answer): strings are hashed as UTF-8.
 */
export async function computeCidV0(code: string | Uint8Array): Promise<string> {
  const data = codeBytes(code);
  let level: DagNode[] = [];
  for (let at = 0; at < data.length; at += CHUNK_SIZE) {
    level.push(await leaf(data.subarray(at, Math.min(at + CHUNK_SIZE, data.length))));
  }
  // The empty file is one leaf holding no data.
  if (level.length === 0) level.push(await leaf(new Uint8Array(0)));
  while (level.length > 1) {
    const next: DagNode[] = [];
    for (let at = 0; at < level.length; at += MAX_LINKS) next.push(await parent(level.slice(at, at + MAX_LINKS)));
    level = next;
  }
  const multihash = new Uint8Array(2 + SHA2_256_LEN);
  multihash[0] = SHA2_256;
  multihash[1] = SHA2_256_LEN;
  multihash.set(level[0]!.digest, 2);
  return base58(multihash);
}

function hex(bytes: Uint8Array): string {
  let out = "";
  for (const b of bytes) out += b.toString(16).padStart(2, "0");
  return out;
}

/**
 * keccak256 of the CID text's UTF-8 bytes, `0x` + 64 lowercase hex: the `hashed_cid` the
 * server answers and the contracts store.
 */
export function hashedCid(cid: string): `0x${string}` {
  if (typeof cid !== "string") throw new TypeError("hashedCid takes the CID as a string");
  return `0x${hex(keccak_256(encoder.encode(cid)))}`;
}
