import * as fs from "node:fs"
import * as path from "node:path"
import { defineConfig } from "vitest/config"
import { WASM_BASELINE_ONLY } from "./src/process.ts"
import { engineDependentFiles } from "./test/support/engine-files.ts"

const root = path.dirname(new URL(import.meta.url).pathname)
const tests = "test/**/*.test.ts"

export default defineConfig({
  test: {
    // On PostgreSQL (TEST_DATABASE_URL, CI's second pass) only the files that can run differently
    // there: the others ran on the first pass already (test/support/engine-files.ts).
    include: process.env.TEST_DATABASE_URL ? engineDependentFiles(root, fs.globSync(tests, { cwd: root })) : [tests],
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Each of the two forks runs its files one after another in one process, keeping what they
    // imported: a fresh process per file spent longer starting than many files spend testing
    // (bench/REPORT.md "Test suite (CI time)"). What would leak from file to file through the
    // process is kept out: no file sets process.env, mocks modules or fakes timers, and each msw
    // interceptor is closed by the file that opens it; the suite passes with its files shuffled
    // (`--sequence.shuffle.files`), on both engines. test/ci/shared-process.test.ts keeps it so.
    isolate: false,
    // PGlite's WebAssembly compiled as the service compiles it on PGlite: baseline only. V8
    // optimising it in the background was a quarter of a PGlite test's CPU: ten of the heaviest
    // files 100 → 78 s here (2026-11-28).
    execArgv: WASM_BASELINE_ONLY,
    // Two cores: two files at a time keeps socket-heavy tests from starving each other.
    maxWorkers: 2,
    reporters: ["default"],
  },
})
