/**
 * Creates and migrates a PGlite database in the directory given as the only argument, then
 * exits. src/db/pglite.ts runs it as a child process on first start: initdb's peak (~1 GB) and
 * the WebAssembly memory it and the migrations leave behind go with the child, and the service
 * opens the files fresh (WebAssembly memory never shrinks).
 */
import { Effect } from "effect"
import { Database } from "../../effects/ports/Database.ts"
import { makeDatabase } from "./connection.ts"
import { migrate } from "./migrate.ts"
import { openPglite } from "./pglite.ts"

const dir = process.argv[process.argv.length - 1]!
const { source, close } = await openPglite({ pgDir: dir })
await Effect.runPromise(Effect.provideService(migrate(), Database, makeDatabase(source)))
await close()
