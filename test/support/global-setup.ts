/**
 * Runs once per `vitest run`:
 * - builds a migrated PGlite template and writes it to a temp file, so each test database starts
 *   from a copy (~0.3 s) instead of a fresh initdb (~2 s); skipped when the suite targets
 *   PostgreSQL (TEST_DATABASE_URL);
 * - makes the self-signed certificate of the test apps' MX_HOST, which each test app's fresh
 *   DATA_DIR gets a copy of (test/support/app.ts): generating one costs a child process and an
 *   RSA key, ~1 s of CPU per app start.
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
import { generateSelfSigned } from "../../src/smtp/self-signed.ts"
import { TEST_MX_HOST } from "./mx-host.ts"

const pgliteTemplate = async (dir: string): Promise<string> => {
  const { source, pg } = await openPglite({})
  await Effect.runPromise(Effect.provideService(migrate(), Database, makeDatabase(source)))
  const dump = await (pg as PGlite).dumpDataDir("none")
  const file = path.join(dir, "template.tar")
  fs.writeFileSync(file, new Uint8Array(await dump.arrayBuffer()))
  await pg.close()
  return file
}

/** The pair as src/smtp/tls.ts keeps a generated one: key.pem (0600) and cert.pem in a directory of their own. */
const testCertificate = async (dir: string): Promise<string> => {
  const pems = await generateSelfSigned(TEST_MX_HOST, Date.now())
  const pair = fs.mkdtempSync(path.join(dir, "tls-"))
  fs.writeFileSync(path.join(pair, "key.pem"), pems.private, { mode: 0o600 })
  fs.writeFileSync(path.join(pair, "cert.pem"), pems.cert, { mode: 0o644 })
  return pair
}

export default async function setup(project: TestProject) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "test-run-"))
  const [template, certificate] = await Promise.all([
    process.env.TEST_DATABASE_URL ? Promise.resolve("") : pgliteTemplate(dir),
    testCertificate(dir),
  ])
  project.provide("pgliteTemplate", template)
  project.provide("testCertificate", { host: TEST_MX_HOST, dir: certificate })
  return () => fs.rmSync(dir, { recursive: true, force: true })
}

declare module "vitest" {
  export interface ProvidedContext {
    pgliteTemplate: string
    testCertificate: { host: string; dir: string }
  }
}
