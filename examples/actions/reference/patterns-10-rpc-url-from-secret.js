// js_params: { pkpId, encryptedApiKey, targetAddress }
async function main({ pkpId, encryptedApiKey, targetAddress }) {
  // Decrypt the API key inside the TEE — it never leaves the node.
  const apiKey = await Lit.Actions.Decrypt({ pkpId, ciphertext: encryptedApiKey });

  // Assemble the full RPC URL.
  const provider = new ethers.providers.JsonRpcProvider(
    `https://sepolia.infura.io/v3/${apiKey}`
  );

  // Use the provider as normal.
  const balance = await provider.getBalance(targetAddress);

  return { balance: ethers.utils.formatEther(balance) };
}
