import { z } from "zod@3.22.4";

// js_params: { pkpId, userData }
async function main({ pkpId, userData }) {
  const UserSchema = z.object({
    email: z.string().email(),
    age: z.number().int().min(0).max(150),
    name: z.string().min(1).max(100),
  });

  const result = UserSchema.safeParse(userData);
  if (!result.success) {
    return { error: "Validation failed", issues: result.error.issues };
  }

  const wallet = new ethers.Wallet(
    await Lit.Actions.getPrivateKey({ pkpId })
  );
  const signature = await wallet.signMessage(JSON.stringify(result.data));

  return { validated: result.data, signature };
}
