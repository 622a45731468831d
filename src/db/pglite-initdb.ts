/**
 * Creates an empty PGlite database in the directory given as the only argument, then exits.
 * src/db/pglite.ts runs it as a child process on first start: initdb's peak (~1 GB) and the
 * WebAssembly memory it leaves behind go with the child, and the service opens the files fresh.
 */
import { PGlite } from "@electric-sql/pglite"

const pg = await PGlite.create({ dataDir: process.argv[process.argv.length - 1] })
await pg.close()
