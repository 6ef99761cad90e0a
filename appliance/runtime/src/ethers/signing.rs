//! secp256k1 keys as `@ethersproject/signing-key` and `wallet` expose them: SigningKey,
//! Wallet, public-key recovery, computeAddress/recoverAddress/verifyMessage.

use boa_engine::object::builtins::{JsFunction, JsPromise};
use boa_engine::object::{FunctionObjectBuilder, JsObject};
use boa_engine::{Context, JsError, JsResult, JsValue, NativeFunction, js_string};
use k256::ecdsa::hazmat::{SignPrimitive as _, bits2field};
use k256::elliptic_curve::ops::{MulByGenerator as _, Reduce};
use k256::elliptic_curve::point::DecompressPoint;
use k256::elliptic_curve::sec1::{FromEncodedPoint, ToEncodedPoint};
use k256::elliptic_curve::subtle::Choice;
use k256::{AffinePoint, EncodedPoint, FieldBytes, NonZeroScalar, ProjectivePoint, Scalar, U256};
use num_bigint::BigUint;

use super::address;
use super::bytes::{self, Sig};
use super::err::{self, INVALID_ARGUMENT, P, V_SIGNING_KEY, V_WALLET};
use super::js;
use super::strings::{self, keccak};
use super::tx;

const ORDER_HEX: &str = "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141";

fn to32(b: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    let n = b.len().min(32);
    out[32 - n..].copy_from_slice(&b[b.len() - n..]);
    out
}

/// A big-endian integer of any length, reduced modulo the curve order.
fn scalar_mod_n(b: &[u8]) -> Scalar {
    if b.len() <= 32 {
        return <Scalar as Reduce<U256>>::reduce_bytes(&FieldBytes::from(to32(b)));
    }
    let n = BigUint::parse_bytes(ORDER_HEX.as_bytes(), 16).unwrap_or_default();
    let v = BigUint::from_bytes_be(b) % n;
    <Scalar as Reduce<U256>>::reduce_bytes(&FieldBytes::from(to32(&v.to_bytes_be())))
}

fn invalid_private_key(ctx: &mut Context) -> JsError {
    err::arg(
        ctx,
        V_SIGNING_KEY,
        "invalid private key",
        "privateKey",
        P::str("[[ REDACTED ]]"),
    )
}

/// The secret scalar of a 32-byte key, reduced mod n as elliptic does.
fn secret(ctx: &mut Context, key: &[u8]) -> JsResult<NonZeroScalar> {
    let s = scalar_mod_n(key);
    Option::<NonZeroScalar>::from(NonZeroScalar::new(s)).ok_or_else(|| invalid_private_key(ctx))
}

/// `s·G`, from k256's precomputed tables of G (a fixed-base multiplication: several
/// times cheaper than the generic `GENERATOR * s`, and the same point).
fn public_of(s: &NonZeroScalar) -> AffinePoint {
    ProjectivePoint::mul_by_generator(s.as_ref()).to_affine()
}

fn encode(p: &AffinePoint, compressed: bool) -> String {
    bytes::hex(p.to_encoded_point(compressed).as_bytes())
}

fn decode_point(bytes_in: &[u8]) -> JsResult<AffinePoint> {
    let point =
        EncodedPoint::from_bytes(bytes_in).map_err(|_| err::plain("Unknown point format"))?;
    Option::<AffinePoint>::from(AffinePoint::from_encoded_point(&point))
        .ok_or_else(|| err::plain("invalid point"))
}

/// `computePublicKey(key, compressed)`.
pub(crate) fn compute_public_key(
    ctx: &mut Context,
    key: &JsValue,
    compressed: bool,
) -> JsResult<String> {
    let b = bytes::arrayify(ctx, key)?;
    match b.len() {
        32 => {
            let s = secret(ctx, &b)?;
            Ok(encode(&public_of(&s), compressed))
        }
        33 => {
            if compressed {
                return Ok(bytes::hex(&b));
            }
            if b[0] != 2 && b[0] != 3 {
                return Err(err::plain("Unknown point format"));
            }
            let p = decode_point(&b)?;
            Ok(encode(&p, false))
        }
        65 => {
            if !compressed {
                return Ok(bytes::hex(&b));
            }
            if b[0] != 4 && b[0] != 6 && b[0] != 7 {
                return Err(err::plain("Unknown point format"));
            }
            let mut out = vec![0x02 | (b[64] & 1)];
            out.extend_from_slice(&b[1..33]);
            Ok(bytes::hex(&out))
        }
        _ => Err(err::arg(
            ctx,
            V_SIGNING_KEY,
            "invalid public or private key",
            "key",
            P::str("[REDACTED]"),
        )),
    }
}

/// `computeAddress(key)`.
pub(crate) fn compute_address(ctx: &mut Context, key: &JsValue) -> JsResult<String> {
    let public = compute_public_key(ctx, key, false)?;
    let b = bytes::decode_hex_digits(&public[2..]);
    let h = keccak(b.get(1..).unwrap_or(&[]));
    Ok(address::checksum_bytes(&h[12..]))
}

/// `recoverPublicKey(digest, signature)` (uncompressed hex).
pub(crate) fn recover_public_key(
    ctx: &mut Context,
    digest: &JsValue,
    signature: &JsValue,
) -> JsResult<String> {
    let sig = bytes::split_signature(ctx, signature)?;
    let r = bytes::arrayify(ctx, &js::s(&sig.r))?;
    let s = bytes::arrayify(ctx, &js::s(&sig.s))?;
    let d = bytes::arrayify(ctx, digest)?;
    let recid = sig.recid();
    let x = FieldBytes::from(to32(&r));
    let big_r = Option::<AffinePoint>::from(AffinePoint::decompress(&x, Choice::from(recid & 1)))
        .ok_or_else(|| err::plain("invalid point"))?;
    let r_s = scalar_mod_n(&r);
    let s_s = scalar_mod_n(&s);
    let e = scalar_mod_n(&d);
    let r_inv =
        Option::<Scalar>::from(r_s.invert()).ok_or_else(|| err::plain("invalid signature"))?;
    let q =
        (ProjectivePoint::from(big_r) * (s_s * r_inv)) - (ProjectivePoint::GENERATOR * (e * r_inv));
    let q = q.to_affine();
    if bool::from(k256::elliptic_curve::group::prime::PrimeCurveAffine::is_identity(&q)) {
        return Err(err::plain("invalid point"));
    }
    Ok(encode(&q, false))
}

pub(crate) fn recover_address(
    ctx: &mut Context,
    digest: &JsValue,
    signature: &JsValue,
) -> JsResult<String> {
    let public = recover_public_key(ctx, digest, signature)?;
    compute_address(ctx, &js::s(&public))
}

/// Signs a 32-byte digest with a hex private key (what `SigningKey.signDigest` does).
pub(crate) fn sign_digest_raw(
    ctx: &mut Context,
    private_key_hex: &str,
    digest: &[u8],
) -> JsResult<Sig> {
    let key = bytes::decode_hex_digits(
        private_key_hex
            .strip_prefix("0x")
            .unwrap_or(private_key_hex),
    );
    let s = secret(ctx, &key)?;
    // What `SigningKey::sign_prehash_recoverable` does (RFC 6979 nonce, low s, recovery
    // id), without building a `SigningKey`, whose constructor derives the public key: a
    // scalar multiplication the signature does not need.
    let z = bits2field::<k256::Secp256k1>(digest).map_err(|_| err::plain("signing failed"))?;
    let (sig, recid) = s
        .as_ref()
        .try_sign_prehashed_rfc6979::<k256::sha2::Sha256>(&z, &[])
        .ok()
        .and_then(|(sig, recid)| Some((sig, recid?)))
        .ok_or_else(|| err::plain("signing failed"))?;
    let (r, s) = sig.split_bytes();
    Ok(Sig::from_parts(&r, &s, u8::from(recid.is_y_odd())))
}

// ---- SigningKey ----

/// `new SigningKey(privateKey)` as a JS object with the realm's SigningKey prototype.
pub(crate) fn new_signing_key(
    ctx: &mut Context,
    private_key: &JsValue,
    proto: JsObject,
) -> JsResult<JsObject> {
    let pk = bytes::hexlify(ctx, private_key)?;
    if bytes::hex_data_length(ctx, &js::s(&pk))? != Some(32) {
        return Err(invalid_private_key(ctx));
    }
    let s = secret(ctx, &bytes::decode_hex_digits(&pk[2..]))?;
    let p = public_of(&s);
    let obj = js::with_proto(proto);
    js::read_only(ctx, &obj, "curve", js::s("secp256k1"))?;
    js::read_only(ctx, &obj, "privateKey", js::s(&pk))?;
    js::read_only(ctx, &obj, "publicKey", js::s(&encode(&p, false)))?;
    js::read_only(ctx, &obj, "compressedPublicKey", js::s(&encode(&p, true)))?;
    js::read_only(ctx, &obj, "_isSigningKey", true.into())?;
    Ok(obj)
}

fn sk_ctor(new_target: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let proto = match js::get(ctx, new_target, "prototype")?.as_object() {
        Some(p) => p,
        None => js::realm(ctx)?.sk_proto.clone(),
    };
    Ok(new_signing_key(ctx, &js::arg(args, 0), proto)?.into())
}

fn sk_sign_digest(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let pk = js::get(ctx, this, "privateKey")?;
    let pk = bytes::hexlify(ctx, &pk)?;
    let digest = js::arg(args, 0);
    let d = bytes::arrayify(ctx, &digest)?;
    if d.len() != 32 {
        return Err(err::arg(
            ctx,
            V_SIGNING_KEY,
            "bad digest length",
            "digest",
            P::Js(digest),
        ));
    }
    let sig = sign_digest_raw(ctx, &pk, &d)?;
    Ok(sig.to_js(ctx))
}

fn sk_compute_shared_secret(
    this: &JsValue,
    args: &[JsValue],
    ctx: &mut Context,
) -> JsResult<JsValue> {
    let pk = js::get(ctx, this, "privateKey")?;
    let pk = bytes::arrayify(ctx, &pk)?;
    let s = secret(ctx, &pk)?;
    let other = compute_public_key(ctx, &js::arg(args, 0), false)?;
    let p = decode_point(&bytes::decode_hex_digits(&other[2..]))?;
    let shared = (ProjectivePoint::from(p) * s.as_ref()).to_affine();
    let enc = shared.to_encoded_point(false);
    let x = enc.x().map(|x| x.to_vec()).unwrap_or_default();
    let trimmed = bytes::strip_zeros(&x);
    let h = bytes::hex_zero_pad(ctx, &js::s(&bytes::hex(&trimmed)), 32)?;
    Ok(js::s(&h))
}

fn sk_is_signing_key(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let v = js::arg(args, 0);
    if !v.to_boolean() {
        return Ok(false.into());
    }
    Ok(js::get(ctx, &v, "_isSigningKey")?.to_boolean().into())
}

// ---- Wallet ----

fn is_account(ctx: &mut Context, v: &JsValue) -> JsResult<bool> {
    if js::is_nullish(v) {
        return Ok(false);
    }
    let pk = js::get(ctx, v, "privateKey")?;
    let addr = js::get(ctx, v, "address")?;
    Ok(bytes::is_hex_string(&pk, Some(32)) && !js::is_nullish(&addr))
}

fn constant_fn(ctx: &mut Context, value: JsValue) -> JsFunction {
    FunctionObjectBuilder::new(
        ctx.realm(),
        NativeFunction::from_copy_closure_with_captures(
            |_, _, v: &JsValue, _| Ok(v.clone()),
            value,
        ),
    )
    .length(0)
    .build()
}

fn wallet_ctor(new_target: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let realm = js::realm(ctx)?;
    if new_target.is_undefined() {
        return Err(err::make(
            ctx,
            "abstract-signer/5.7.0",
            "missing new",
            "MISSING_NEW",
            vec![("name", P::str("Signer"))],
        ));
    }
    let proto = match js::get(ctx, new_target, "prototype")?.as_object() {
        Some(p) => p,
        None => realm.wallet_proto.clone(),
    };
    let private_key = js::arg(args, 0);
    let provider = js::arg(args, 1);
    let obj = js::with_proto(proto);
    js::read_only(ctx, &obj, "_isSigner", true.into())?;
    if is_account(ctx, &private_key)? {
        let pk = js::get(ctx, &private_key, "privateKey")?;
        let sk = new_signing_key(ctx, &pk, realm.sk_proto.clone())?;
        let f = constant_fn(ctx, sk.clone().into());
        js::read_only(ctx, &obj, "_signingKey", f.into())?;
        let public = sk.get(js_string!("publicKey"), ctx)?;
        let addr = compute_address(ctx, &public)?;
        js::read_only(ctx, &obj, "address", js::s(&addr))?;
        let given = js::get(ctx, &private_key, "address")?;
        let given = address::get_address(ctx, &given)?;
        if given != addr {
            return Err(err::arg(
                ctx,
                V_WALLET,
                "privateKey/address mismatch",
                "privateKey",
                P::str("[REDACTED]"),
            ));
        }
        let f = constant_fn(ctx, JsValue::null());
        js::read_only(ctx, &obj, "_mnemonic", f.into())?;
    } else {
        let sk: JsObject = if js::get(ctx, &private_key, "_isSigningKey")?.to_boolean() {
            let curve = js::get(ctx, &private_key, "curve")?;
            if js::as_str(&curve).as_deref() != Some("secp256k1") {
                return Err(err::arg(
                    ctx,
                    V_WALLET,
                    "unsupported curve; must be secp256k1",
                    "privateKey",
                    P::str("[REDACTED]"),
                ));
            }
            private_key
                .as_object()
                .ok_or_else(|| err::type_error("invalid signing key"))?
        } else {
            let mut pk = private_key.clone();
            if let Some(s) = js::as_str(&pk)
                && s.len() == 64
                && s.bytes().all(|c| c.is_ascii_hexdigit())
            {
                pk = js::s(&format!("0x{s}"));
            }
            new_signing_key(ctx, &pk, realm.sk_proto.clone())?
        };
        let f = constant_fn(ctx, sk.clone().into());
        js::read_only(ctx, &obj, "_signingKey", f.into())?;
        let f = constant_fn(ctx, JsValue::null());
        js::read_only(ctx, &obj, "_mnemonic", f.into())?;
        let public = sk.get(js_string!("publicKey"), ctx)?;
        let addr = compute_address(ctx, &public)?;
        js::read_only(ctx, &obj, "address", js::s(&addr))?;
    }
    if provider.to_boolean() && !js::get(ctx, &provider, "_isProvider")?.to_boolean() {
        return Err(err::arg(
            ctx,
            V_WALLET,
            "invalid provider",
            "provider",
            P::Js(provider),
        ));
    }
    let provider = if provider.to_boolean() {
        provider
    } else {
        JsValue::null()
    };
    js::read_only(ctx, &obj, "provider", provider)?;
    Ok(obj.into())
}

fn signing_key_of(ctx: &mut Context, this: &JsValue) -> JsResult<JsValue> {
    js::call_method(ctx, this, "_signingKey", &[])
}

fn w_private_key(this: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let sk = signing_key_of(ctx, this)?;
    js::get(ctx, &sk, "privateKey")
}

fn w_public_key(this: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let sk = signing_key_of(ctx, this)?;
    js::get(ctx, &sk, "publicKey")
}

fn w_mnemonic(this: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    js::call_method(ctx, this, "_mnemonic", &[])
}

fn settle(ctx: &mut Context, r: JsResult<JsValue>) -> JsResult<JsValue> {
    let p = match r {
        Ok(v) => JsPromise::resolve(v, ctx)?,
        Err(e) => JsPromise::reject(e, ctx)?,
    };
    Ok(p.into())
}

fn w_get_address(this: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let a = js::get(ctx, this, "address");
    settle(ctx, a)
}

fn sign_message(ctx: &mut Context, this: &JsValue, message: &JsValue) -> JsResult<JsValue> {
    let digest = strings::hash_message(ctx, message)?;
    let sk = signing_key_of(ctx, this)?;
    let d = js::s(&bytes::hex(&digest));
    let sig = js::call_method(ctx, &sk, "signDigest", &[d])?;
    Ok(js::s(&bytes::join_signature(ctx, &sig)?))
}

fn w_sign_message(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let r = sign_message(ctx, this, &js::arg(args, 0));
    settle(ctx, r)
}

/// The body of `signTransaction` once every property is resolved: `tx` is a fresh plain object.
fn sign_resolved(
    ctx: &mut Context,
    this: &JsValue,
    original: &JsValue,
    tx: &JsObject,
) -> JsResult<JsValue> {
    let from = tx.get(js_string!("from"), ctx)?;
    if !js::is_nullish(&from) {
        let from = address::get_address(ctx, &from)?;
        let mine = js::get(ctx, this, "address")?;
        if js::as_str(&mine).as_deref() != Some(from.as_str()) {
            let orig_from = js::get(ctx, original, "from")?;
            return Err(err::arg(
                ctx,
                V_WALLET,
                "transaction from address mismatch",
                "transaction.from",
                P::Js(orig_from),
            ));
        }
        tx.delete_property_or_throw(js_string!("from"), ctx)?;
    }
    let unsigned = tx::serialize(ctx, tx, None)?;
    let digest = keccak(&bytes::decode_hex_digits(&unsigned[2..]));
    let sk = signing_key_of(ctx, this)?;
    let sig = js::call_method(ctx, &sk, "signDigest", &[js::s(&bytes::hex(&digest))])?;
    Ok(js::s(&tx::serialize(ctx, tx, Some(&sig))?))
}

fn is_thenable(ctx: &mut Context, v: &JsValue) -> JsResult<bool> {
    if v.as_object().is_none() {
        return Ok(false);
    }
    Ok(js::get(ctx, v, "then")?.is_callable())
}

fn w_sign_transaction(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let original = js::arg(args, 0);
    let Some(obj) = original.as_object() else {
        return settle(
            ctx,
            Err(err::type_error(
                "Cannot convert undefined or null to object",
            )),
        );
    };
    let keys = match js::object_keys(ctx, &obj) {
        Ok(k) => k,
        Err(e) => return settle(ctx, Err(e)),
    };
    let mut values = Vec::with_capacity(keys.len());
    let mut pending = false;
    for k in &keys {
        let v = obj.get(js::jstr(k), ctx)?;
        pending |= is_thenable(ctx, &v)?;
        values.push(v);
    }
    if !pending {
        let tx = js::new_object(ctx);
        for (k, v) in keys.iter().zip(values) {
            tx.create_data_property_or_throw(js::jstr(k), v, ctx)?;
        }
        let r = sign_resolved(ctx, this, &original, &tx);
        return settle(ctx, r);
    }
    let all = JsPromise::all(
        values
            .into_iter()
            .map(|v| JsPromise::resolve(v, ctx))
            .collect::<JsResult<Vec<_>>>()?,
        ctx,
    )?;
    let keys_js = js::array(ctx, keys.iter().map(|k| js::s(k)).collect());
    let captures = (this.clone(), original.clone(), keys_js);
    let on_ok = FunctionObjectBuilder::new(
        ctx.realm(),
        NativeFunction::from_copy_closure_with_captures(
            |_, args, caps: &(JsValue, JsValue, JsValue), ctx| {
                let (this, original, keys) = caps;
                let keys = js::array_items(ctx, keys)?;
                let vals = js::array_items(ctx, &js::arg(args, 0))?;
                let tx = js::new_object(ctx);
                for (k, v) in keys.iter().zip(vals) {
                    tx.create_data_property_or_throw(k.to_string(ctx)?, v, ctx)?;
                }
                sign_resolved(ctx, this, original, &tx)
            },
            captures,
        ),
    )
    .length(1)
    .build();
    Ok(all.then(Some(on_ok), None, ctx)?.into())
}

fn w_connect(this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let realm = js::realm(ctx)?;
    let ctor: JsValue = realm.wallet_ctor.clone().into();
    wallet_ctor(&ctor, &[this.clone(), js::arg(args, 0)], ctx)
}

fn w_is_signer(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let v = js::arg(args, 0);
    if !v.to_boolean() {
        return Ok(false.into());
    }
    Ok(js::get(ctx, &v, "_isSigner")?.to_boolean().into())
}

fn class(
    ctx: &mut Context,
    name: &str,
    length: usize,
    ctor: fn(&JsValue, &[JsValue], &mut Context) -> JsResult<JsValue>,
) -> JsResult<(JsObject, JsObject)> {
    let proto = js::new_object(ctx);
    let f = js::constructor(ctx, name, length, NativeFunction::from_fn_ptr(ctor), &proto)?;
    Ok((f, proto))
}

/// Builds `SigningKey` and `Wallet`: (sk ctor, sk proto, wallet ctor, wallet proto).
pub(crate) fn build(ctx: &mut Context) -> JsResult<(JsObject, JsObject, JsObject, JsObject)> {
    let (sk, sk_proto) = class(ctx, "SigningKey", 1, sk_ctor)?;
    js::method(
        ctx,
        &sk_proto,
        "signDigest",
        1,
        NativeFunction::from_fn_ptr(sk_sign_digest),
    )?;
    js::method(
        ctx,
        &sk_proto,
        "computeSharedSecret",
        1,
        NativeFunction::from_fn_ptr(sk_compute_shared_secret),
    )?;
    js::method(
        ctx,
        &sk,
        "isSigningKey",
        1,
        NativeFunction::from_fn_ptr(sk_is_signing_key),
    )?;

    let (w, w_proto) = class(ctx, "Wallet", 2, wallet_ctor)?;
    js::getter(
        ctx,
        &w_proto,
        "mnemonic",
        NativeFunction::from_fn_ptr(w_mnemonic),
    )?;
    js::getter(
        ctx,
        &w_proto,
        "privateKey",
        NativeFunction::from_fn_ptr(w_private_key),
    )?;
    js::getter(
        ctx,
        &w_proto,
        "publicKey",
        NativeFunction::from_fn_ptr(w_public_key),
    )?;
    js::method(
        ctx,
        &w_proto,
        "getAddress",
        0,
        NativeFunction::from_fn_ptr(w_get_address),
    )?;
    js::method(
        ctx,
        &w_proto,
        "connect",
        1,
        NativeFunction::from_fn_ptr(w_connect),
    )?;
    js::method(
        ctx,
        &w_proto,
        "signTransaction",
        1,
        NativeFunction::from_fn_ptr(w_sign_transaction),
    )?;
    js::method(
        ctx,
        &w_proto,
        "signMessage",
        1,
        NativeFunction::from_fn_ptr(w_sign_message),
    )?;
    js::method(
        ctx,
        &w,
        "isSigner",
        1,
        NativeFunction::from_fn_ptr(w_is_signer),
    )?;
    Ok((sk, sk_proto, w, w_proto))
}

// ---- utils ----

fn f_compute_address(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(js::s(&compute_address(ctx, &js::arg(args, 0))?))
}

fn f_compute_public_key(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let compressed = js::arg(args, 1).to_boolean();
    Ok(js::s(&compute_public_key(
        ctx,
        &js::arg(args, 0),
        compressed,
    )?))
}

fn f_recover_public_key(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(js::s(&recover_public_key(
        ctx,
        &js::arg(args, 0),
        &js::arg(args, 1),
    )?))
}

fn f_recover_address(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(js::s(&recover_address(
        ctx,
        &js::arg(args, 0),
        &js::arg(args, 1),
    )?))
}

fn f_verify_message(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let h = strings::hash_message(ctx, &js::arg(args, 0))?;
    Ok(js::s(&recover_address(
        ctx,
        &js::s(&bytes::hex(&h)),
        &js::arg(args, 1),
    )?))
}

pub(crate) fn install(ctx: &mut Context, utils: &JsObject) -> JsResult<()> {
    type F = fn(&JsValue, &[JsValue], &mut Context) -> JsResult<JsValue>;
    let fns: [(&str, usize, F); 5] = [
        ("computeAddress", 1, f_compute_address),
        ("computePublicKey", 2, f_compute_public_key),
        ("recoverPublicKey", 2, f_recover_public_key),
        ("recoverAddress", 2, f_recover_address),
        ("verifyMessage", 2, f_verify_message),
    ];
    for (name, len, f) in fns {
        js::method(ctx, utils, name, len, NativeFunction::from_fn_ptr(f))?;
    }
    let _ = INVALID_ARGUMENT;
    Ok(())
}
