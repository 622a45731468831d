/**
 * Which test files can run differently on PostgreSQL than on PGlite: those whose own source, or
 * that of a module they import (relative imports, followed through the checkout), names
 * TEST_DATABASE_URL. The rest (parsers, clocks, the prepare thread, process flags, ...) run the
 * same on both engines, so the PostgreSQL pass of CI (`TEST_DATABASE_URL=… npm test`, .ci/run)
 * runs only the files this returns: the suite's second pass, 38 files and ~50 s shorter
 * (2026-11-28). Imports are read from the text (static `import … from`, `export … from`,
 * `import("…")` with a literal): a test that reached the database some other way would have to
 * name TEST_DATABASE_URL, as every way to a test database does (test/support/db.ts).
 */
import * as fs from "node:fs"
import * as path from "node:path"

const IMPORT = /(?:import|export)\s[^'"]*?from\s*["']([^"']+)["']|import\s*\(\s*["']([^"']+)["']\s*\)|import\s+["']([^"']+)["']/g

/** A module's relative imports (resolved) and whether it names TEST_DATABASE_URL, read once. */
const reader = () => {
  const read = new Map<string, { readonly names: boolean; readonly imports: ReadonlyArray<string> }>()
  return (file: string) => {
    let module = read.get(file)
    if (!module) {
      const source = fs.readFileSync(file, "utf8")
      const imports: Array<string> = []
      for (const match of source.matchAll(IMPORT)) {
        const spec = match[1] ?? match[2] ?? match[3]!
        if (!spec.startsWith(".")) continue
        const target = path.resolve(path.dirname(file), spec)
        if (/\.(ts|js|mjs)$/.test(target) && fs.existsSync(target)) imports.push(target)
      }
      read.set(file, (module = { names: source.includes("TEST_DATABASE_URL"), imports }))
    }
    return module
  }
}

export const engineDependentFiles = (root: string, files: ReadonlyArray<string>): Array<string> => {
  const read = reader()
  const depends = (file: string): boolean => {
    const seen = new Set([file])
    const queue = [file]
    while (queue.length > 0) {
      const module = read(queue.pop()!)
      if (module.names) return true
      for (const next of module.imports) if (!seen.has(next)) (seen.add(next), queue.push(next))
    }
    return false
  }
  return files.filter((f) => depends(path.resolve(root, f)))
}
