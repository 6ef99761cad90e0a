// The typed surface compiles as documented (test/types/usage.ts, which also asserts that
// wrong bodies and missing queries are type errors).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";

import { sdkDir } from "../scripts/bundle.mjs";

test("tsc accepts the sources and test/types/usage.ts", async () => {
  const tsc = join(sdkDir, "node_modules", "typescript", "bin", "tsc");
  const result = await promisify(execFile)(process.execPath, [tsc, "-p", "test/types/tsconfig.json"], { cwd: sdkDir }).catch(
    (e) => e,
  );
  assert.equal(result.code ?? 0, 0, `tsc failed:\n${result.stdout}${result.stderr}`);
});
