/** The body the ChainSecured endpoints take, and what `X-Wallet-Auth` carries. */
export interface SignedTypedData<T = unknown> {
  typed_data: T;
  signature: `0x${string}`;
}

function base64(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

/**
 * The `X-Wallet-Auth` header value for a signed `BillingAuth` envelope: standard base64
 * (with padding) of the UTF-8 JSON `{"typed_data":…,"signature":"0x…"}`, as
 * `appliance/src/http/auth.rs` parses it. Each signature is accepted once: sign anew for
 * every request.
 */
export function walletAuthHeader(signed: SignedTypedData): string {
  if (typeof signed?.signature !== "string" || typeof signed.typed_data !== "object" || signed.typed_data === null) {
    throw new TypeError("walletAuthHeader takes {typed_data, signature} as signChainSecured returns it");
  }
  const json = JSON.stringify({ typed_data: signed.typed_data, signature: signed.signature });
  return base64(new TextEncoder().encode(json));
}

/** The inverse of {@link walletAuthHeader}. */
export function decodeWalletAuthHeader(value: string): SignedTypedData {
  const binary = atob(value.trim());
  const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  const parsed = JSON.parse(new TextDecoder().decode(bytes)) as SignedTypedData;
  if (typeof parsed?.signature !== "string" || typeof parsed.typed_data !== "object") {
    throw new TypeError("not an X-Wallet-Auth value: expected base64 of {typed_data, signature}");
  }
  return parsed;
}
