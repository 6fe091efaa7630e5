// Run the TypeScript unit tests (test/*.test.ts) with node's built-in test runner.
// esbuild compiles each test file with what it imports into .tsbuild/test/ (git-ignored);
// type checking is `npm run typecheck`, which covers test/ too.
import { build } from "esbuild";
import { spawnSync } from "node:child_process";
import { readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const outDir = join(root, ".tsbuild", "test");
const tests = readdirSync(join(root, "test")).filter((name) => name.endsWith(".test.ts")).sort();
if (tests.length === 0) {
  console.error("no test files in labextension/test/");
  process.exit(1);
}
rmSync(outDir, { recursive: true, force: true });
await build({
  absWorkingDir: root,
  entryPoints: tests.map((name) => join("test", name)),
  outdir: outDir,
  outExtension: { ".js": ".mjs" },
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  packages: "external",
  logLevel: "warning",
});
const files = tests.map((name) => join(outDir, name.replace(/\.ts$/, ".mjs")));
const result = spawnSync(process.execPath, ["--test", "--test-reporter=spec", ...files], { stdio: "inherit" });
process.exit(result.status ?? 1);
