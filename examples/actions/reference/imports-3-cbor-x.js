import { encode } from "cbor-x@1.5.9";

// js_params: { pkpId, payload }
async function main({ pkpId, payload }) {
  const encoded = encode(payload);
  const hex = Array.from(new Uint8Array(encoded))
    .map((b) => b.toString(16).padStart(2, "0"))
    .join("");

  const wallet = new ethers.Wallet(
    await Lit.Actions.getPrivateKey({ pkpId })
  );
  const signature = await wallet.signMessage(hex);

  return { cbor: hex, signature };
}
