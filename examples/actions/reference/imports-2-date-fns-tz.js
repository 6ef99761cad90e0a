import { format, utcToZonedTime } from "date-fns-tz@2.0.1";

// js_params: { pkpId, timezone }
async function main({ pkpId, timezone }) {
  const now = new Date();
  const zonedTime = utcToZonedTime(now, timezone);
  const formatted = format(zonedTime, "yyyy-MM-dd HH:mm:ss zzz", { timeZone: timezone });

  const wallet = new ethers.Wallet(
    await Lit.Actions.getPrivateKey({ pkpId })
  );
  const signature = await wallet.signMessage(formatted);

  return { timestamp: formatted, timezone, signature };
}
