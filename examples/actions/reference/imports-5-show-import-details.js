import { z } from "zod@3.22.4";

async function main() {
  const details = Lit.Actions.showImportDetails();
  // details is an array of { url, hash } objects:
  // [
  //   {
  //     "url": "https://cdn.jsdelivr.net/npm/zod@3.22.4/+esm",
  //     "hash": "sha384-oKhMb3mCbOey4gFjFHm1..."
  //   }
  // ]
  return details;
}
