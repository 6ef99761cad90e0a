#!/usr/bin/env python3
"""Computes keyservice/tests/data/derivation-vectors.json.

An implementation of the keyservice derivations written from their README formulas,
independent of the Rust code: HKDF (RFC 5869) on Python's hmac/hashlib, textbook affine
secp256k1 arithmetic, and Keccak-256 from the Keccak-f[1600] definition (self-checked
against hashlib.sha3_256, which shares the permutation). Only the AES-GCM step uses a
library (pyca/cryptography's AESGCM); the secp256k1 public keys are also re-checked
against that library when it is installed.

Run from anywhere:  python3 keyservice/tests/data/gen_vectors.py
The output is deterministic (fixed inputs and nonces); the Rust tests read it and also
cross-check every public key / address with libsecp256k1.
"""

import hashlib
import hmac
import json
import os
import sys

# ---------------------------------------------------------------- Keccak-256

def _rol(v, n):
    n %= 64
    return ((v << n) | (v >> (64 - n))) & 0xFFFFFFFFFFFFFFFF


def _rc_bit(t):
    if t % 255 == 0:
        return 1
    r = 1
    for _ in range(t % 255):
        r <<= 1
        if r & 0x100:
            r ^= 0x171
    return r & 1


_RC = [sum(_rc_bit(j + 7 * i) << ((1 << j) - 1) for j in range(7)) for i in range(24)]
_ROT = [[0] * 5 for _ in range(5)]
_x, _y = 1, 0
for _t in range(24):
    _ROT[_x][_y] = ((_t + 1) * (_t + 2) // 2) % 64
    _x, _y = _y, (2 * _x + 3 * _y) % 5


def _keccak_f(a):
    for rnd in range(24):
        c = [a[x] ^ a[x + 5] ^ a[x + 10] ^ a[x + 15] ^ a[x + 20] for x in range(5)]
        d = [c[(x - 1) % 5] ^ _rol(c[(x + 1) % 5], 1) for x in range(5)]
        a = [a[i] ^ d[i % 5] for i in range(25)]
        b = [0] * 25
        for x in range(5):
            for y in range(5):
                b[y + 5 * ((2 * x + 3 * y) % 5)] = _rol(a[x + 5 * y], _ROT[x][y])
        a = [
            b[i] ^ ((~b[(i % 5 + 1) % 5 + 5 * (i // 5)]) & b[(i % 5 + 2) % 5 + 5 * (i // 5)])
            for i in range(25)
        ]
        a[0] ^= _RC[rnd]
    return a


def _sponge256(data, pad):
    rate = 136
    msg = bytearray(data)
    msg.append(pad)
    while len(msg) % rate:
        msg.append(0)
    msg[-1] |= 0x80
    st = [0] * 25
    for off in range(0, len(msg), rate):
        block = msg[off:off + rate]
        for i in range(rate // 8):
            st[i] ^= int.from_bytes(block[8 * i:8 * i + 8], "little")
        st = _keccak_f(st)
    return b"".join(st[i].to_bytes(8, "little") for i in range(4))


def keccak256(data):
    return _sponge256(data, 0x01)


assert _sponge256(b"abc", 0x06) == hashlib.sha3_256(b"abc").digest()
assert keccak256(b"").hex() == "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"

# ---------------------------------------------------------------- secp256k1

P = 2**256 - 2**32 - 977
N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
G = (
    0x79BE667EF9DCBBAC55A06295CE870B07029BFCDB2DCE28D959F2815B16F81798,
    0x483ADA7726A3C4655DA4FBFC0E1108A8FD17B448A68554199C47D08FFB10D4B8,
)


def _add(p1, p2):
    if p1 is None:
        return p2
    if p2 is None:
        return p1
    (x1, y1), (x2, y2) = p1, p2
    if x1 == x2 and (y1 + y2) % P == 0:
        return None
    if p1 == p2:
        lam = 3 * x1 * x1 * pow(2 * y1, -1, P) % P
    else:
        lam = (y2 - y1) * pow(x2 - x1, -1, P) % P
    x3 = (lam * lam - x1 - x2) % P
    return (x3, (lam * (x1 - x3) - y1) % P)


def _mul(k, pt=G):
    acc = None
    while k:
        if k & 1:
            acc = _add(acc, pt)
        pt = _add(pt, pt)
        k >>= 1
    return acc


def public_key(sk):
    x, y = _mul(int.from_bytes(sk, "big"))
    return b"\x04" + x.to_bytes(32, "big") + y.to_bytes(32, "big")


def eip55(addr20):
    lower = addr20.hex()
    h = keccak256(lower.encode()).hex()
    return "0x" + "".join(c.upper() if c.isalpha() and int(h[i], 16) >= 8 else c for i, c in enumerate(lower))


# ---------------------------------------------------------------- HKDF (RFC 5869)

def hkdf_extract(salt, ikm):
    return hmac.new(salt, ikm, hashlib.sha256).digest()


def hkdf_expand(prk, info, length=32):
    out, t, i = b"", b"", 1
    while len(out) < length:
        t = hmac.new(prk, t + info + bytes([i]), hashlib.sha256).digest()
        out += t
        i += 1
    return out[:length]


SALT = b"keyservice/v1"


def scalar(prk, label, data):
    for counter in range(16):
        okm = hkdf_expand(prk, label + b"\x00" + data + counter.to_bytes(4, "big"))
        if 0 < int.from_bytes(okm, "big") < N:
            return okm, counter
    raise RuntimeError("exhausted")


def key_entry(sk):
    pk = public_key(sk)
    h = keccak256(pk[1:])
    return {
        "private_key": "0x" + sk.hex(),
        "public_key": "0x" + pk.hex(),
        "pkp_id": "0x" + h.hex(),
        "address": eip55(h[12:]),
    }


def main():
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:
        sys.exit("needs pyca/cryptography for AES-GCM: pip install cryptography")

    root = hashlib.sha256(b"keyservice test vector root").digest()
    prk = hkdf_extract(SALT, root)

    wallets = []
    for path in [
        bytes(32),
        b"\xff" * 32,
        hashlib.sha256(b"derivation path 1").digest(),
        hashlib.sha256(b"derivation path 2").digest(),
    ]:
        sk, counter = scalar(prk, b"keyservice/v1/wallet", path)
        aes = hkdf_expand(hkdf_extract(SALT, sk), b"keyservice/v1/wallet-aes-256-gcm")
        e = {"derivation_path": "0x" + path.hex(), "counter": counter}
        e.update(key_entry(sk))
        e["aes_key"] = "0x" + aes.hex()
        wallets.append(e)

    actions = []
    for cid in [
        "QmbFMke1KXqnYyBBWxB74N4c5SBnJMVAiMNRcGu6x1AwQH",
        "QmZr5qtNmcxBdpXF7K7hSkLbxK2wUVhMhZn29PKzhynvcR",
        "QmXoMqm4sckyYxbqarxfyfY36qj9bvmVFihXEYNqK4Uri6",
    ]:
        sk, counter = scalar(prk, b"keyservice/v1/action", cid.encode())
        e = {"cid": cid, "counter": counter}
        e.update(key_entry(sk))
        actions.append(e)

    api_payers = []
    for i in range(4):
        sk, counter = scalar(prk, b"keyservice/v1/api-payer", i.to_bytes(4, "big"))
        e = {"index": i, "counter": counter}
        e.update(key_entry(sk))
        api_payers.append(e)

    sk, counter = scalar(prk, b"keyservice/v1/admin-payer", b"")
    admin = {"counter": counter}
    admin.update(key_entry(sk))

    encryption = []
    for w, plaintext, nonce in [
        (wallets[2], b"hello keyservice", bytes(range(12))),
        (wallets[3], b"", b"\x5a" * 12),
    ]:
        ct = AESGCM(bytes.fromhex(w["aes_key"][2:])).encrypt(nonce, plaintext, None)
        encryption.append({
            "derivation_path": w["derivation_path"],
            "plaintext": "0x" + plaintext.hex(),
            "ciphertext": "0x" + (nonce + ct).hex(),
        })

    # The root id (public fingerprint) and the store-row MAC key with a few tags:
    # okm(label, empty, 0), then HMAC-SHA256 of each row.
    root_id = hkdf_expand(prk, b"keyservice/v1/root-id" + b"\x00" + (0).to_bytes(4, "big"))
    row_key = hkdf_expand(prk, b"keyservice/v1/store-row-mac" + b"\x00" + (0).to_bytes(4, "big"))
    row_macs = []
    for row in [b"", b"account 1|wallet 7|allow", bytes(range(256))]:
        row_macs.append({
            "row": "0x" + row.hex(),
            "tag": "0x" + hmac.new(row_key, row, hashlib.sha256).hexdigest(),
        })

    # Sealed root under the dev platform.
    dev_secret = hashlib.sha256(b"keyservice test vector dev secret").digest()
    compose = b'{"manifest_version":2,"name":"keyservice-vector"}\n'
    compose_hash = hashlib.sha256(compose).digest()
    info = b"keyservice/v1/seal-key" + b"\x00" + compose_hash
    dev_key = hkdf_expand(hkdf_extract(b"keyservice/v1/dev-seal", dev_secret), info)
    nonce = bytes(range(100, 112))
    header = b"KSVCSEAL" + b"\x01" + compose_hash
    sealed = header + nonce + AESGCM(dev_key).encrypt(nonce, root, header)
    assert len(sealed) == 101

    # The dstack sealing-key KDF, from an agent key.
    agent_key = hashlib.sha256(b"keyservice test vector agent key").digest()
    dstack_key = hkdf_expand(hkdf_extract(b"keyservice/v1/dstack-seal", agent_key), info)

    try:  # optional extra check of the textbook EC code
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives import serialization
        for e in wallets + actions + api_payers + [admin]:
            k = ec.derive_private_key(int(e["private_key"], 16), ec.SECP256K1())
            lib_pk = k.public_key().public_bytes(
                serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
            assert lib_pk.hex() == e["public_key"][2:], e
    except ImportError:
        pass

    out = {
        "generator": "keyservice/tests/data/gen_vectors.py (see its docstring)",
        "root": "0x" + root.hex(),
        "wallets": wallets,
        "actions": actions,
        "api_payers": api_payers,
        "admin_payer": admin,
        "encryption": encryption,
        "root_id": "0x" + root_id.hex(),
        "store_row_mac": {"key": "0x" + row_key.hex(), "rows": row_macs},
        "dev_sealing": {
            "dev_secret": "0x" + dev_secret.hex(),
            "compose_file": compose.decode(),
            "compose_hash": "0x" + compose_hash.hex(),
            "sealing_key": "0x" + dev_key.hex(),
            "sealed_file": "0x" + sealed.hex(),
        },
        "dstack_sealing": {
            "agent_key": "0x" + agent_key.hex(),
            "compose_hash": "0x" + compose_hash.hex(),
            "getkey_path": "keyservice/seal/v1/" + compose_hash.hex(),
            "sealing_key": "0x" + dstack_key.hex(),
        },
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "derivation-vectors.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
