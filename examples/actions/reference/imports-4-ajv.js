import Ajv from "ajv@8.12.0";

// js_params: { pkpId, data, schema }
async function main({ pkpId, data, schema }) {
  const ajv = new Ajv();
  const validate = ajv.compile(schema);

  if (!validate(data)) {
    return { error: "Schema validation failed", errors: validate.errors };
  }

  const wallet = new ethers.Wallet(
    await Lit.Actions.getPrivateKey({ pkpId })
  );
  const signature = await wallet.signMessage(JSON.stringify(data));

  return { valid: true, data, signature };
}
