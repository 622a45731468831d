/**
 * Runs once per `vitest run`: builds a migrated PGlite template and writes it to a temp file,
 * so each test database starts from a copy (~0.3 s) instead of a fresh initdb (~2 s).
 * Skipped when the suite targets PostgreSQL (TEST_DATABASE_URL).
 */
import { PGlite } from "@electric-sql/pglite"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { TestProject } from "vitest/node"
import { Database } from "../../effects/ports/Database.ts"
import { makeDatabase } from "../../src/db/connection.ts"
import { migrate } from "../../src/db/migrate.ts"
import { openPglite } from "../../src/db/pglite.ts"

export default async function setup(project: TestProject) {
  if (process.env.TEST_DATABASE_URL) return
  const { source, pg } = await openPglite({})
  await Effect.runPromise(Effect.provideService(migrate(), Database, makeDatabase(source)))
  const dump = await (pg as PGlite).dumpDataDir("none")
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "pgtemplate-")), "template.tar")
  fs.writeFileSync(file, new Uint8Array(await dump.arrayBuffer()))
  await pg.close()
  project.provide("pgliteTemplate", file)
  return () => fs.rmSync(path.dirname(file), { recursive: true, force: true })
}

declare module "vitest" {
  export interface ProvidedContext {
    pgliteTemplate: string
  }
}
