// The build steps after `tsc`: the generated schema types next to the compiled modules
// (tsc does not copy .d.ts inputs), and the browser bundle, in dist/ and in the dashboard.
import { copyFile, mkdir, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { bundle, dashboardCopy, distCopy, sdkDir } from "./bundle.mjs";

await copyFile(`${sdkDir}src/schema.d.ts`, `${sdkDir}dist/schema.d.ts`);
const bytes = await bundle();
for (const target of [distCopy, dashboardCopy]) {
  await mkdir(dirname(target), { recursive: true });
  await writeFile(target, bytes);
}
console.log(`browser bundle: ${bytes.length} bytes → ${dashboardCopy.slice(sdkDir.length - "sdk/js/".length)}`);
