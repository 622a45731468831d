/**
 * The PostgreSQL pass runs only the test files that can run differently there
 * (test/support/engine-files.ts): those that reach TEST_DATABASE_URL through their imports.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { engineDependentFiles } from "../support/engine-files.ts"

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..")

describe("the files of the PostgreSQL pass", () => {
  it("follows imports, re-exports, dynamic imports and cycles to TEST_DATABASE_URL", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "engine-files-"))
    const write = (name: string, text: string) => fs.writeFileSync(path.join(dir, name), text)
    try {
      write("db.ts", "export const url = process.env.TEST_DATABASE_URL\n")
      write("via.ts", 'export { url } from "./db.ts"\n')
      write("a.ts", 'import { b } from "./b.ts"\nexport const a = 1\n')
      write("b.ts", 'import { a } from "./a.ts"\nimport { url } from "./via.ts"\nexport const b = url\n')
      write("c.ts", 'import { d } from "./d.ts"\nexport const c = 1\n')
      write("d.ts", 'import { c } from "./c.ts"\nimport { Effect } from "effect"\nexport const d = 2\n')
      write("direct.test.ts", 'import { url } from "./db.ts"\n')
      write("cycle.test.ts", 'import { a } from "./a.ts"\n')
      write("dynamic.test.ts", 'const m = await import("./via.ts")\n')
      write("pure.test.ts", 'import { c } from "./c.ts"\nimport * as fs from "node:fs"\n')
      write("missing.test.ts", 'import { x } from "./gone.ts"\n')
      const files = ["direct.test.ts", "cycle.test.ts", "dynamic.test.ts", "pure.test.ts", "missing.test.ts"]
      expect(engineDependentFiles(dir, files)).toEqual(["direct.test.ts", "cycle.test.ts", "dynamic.test.ts"])
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("keeps every test of the checkout that opens a test database, and leaves out pure ones", () => {
    const all = fs.globSync("test/**/*.test.ts", { cwd: root })
    const dependent = new Set(engineDependentFiles(root, all))
    // Each reaches test/support/db.ts.
    for (const f of ["test/db/database.test.ts", "test/inbound/ingest-batch.test.ts", "test/crash/crash.test.ts"]) expect(dependent.has(f)).toBe(true)
    for (const f of ["test/shared/fifo.test.ts", "test/inbound/mime-quick.test.ts"]) expect(dependent.has(f)).toBe(false)
    expect(dependent.size).toBeGreaterThan(all.length / 2)
  })
})
